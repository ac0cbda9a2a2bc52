"""Deprecated: :mod:`isaaclab_suspend.lerobot.env`."""

from ..lerobot.env import *  # noqa: F401,F403
