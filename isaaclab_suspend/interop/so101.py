"""Deprecated: :mod:`isaaclab_suspend.lerobot.so101`."""

from ..lerobot.so101 import *  # noqa: F401,F403
