"""Tasks registered as gym ids ending in ``-Suspendable``."""

from . import cartpole  # noqa: F401
