"""Deprecated: :mod:`isaaclab_suspend.lerobot.policy`."""

from ..lerobot.policy import *  # noqa: F401,F403
