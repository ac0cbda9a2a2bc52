"""Deprecated: :mod:`isaaclab_suspend.lerobot.export`."""

from ..lerobot.export import *  # noqa: F401,F403
