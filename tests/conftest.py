"""Shared test set-up: one Warp kernel cache in the checkout, quiet Isaac Lab logs."""

import os

os.environ.setdefault("WARP_CACHE_PATH", os.path.join(os.path.dirname(os.path.dirname(__file__)), ".warp_cache"))
