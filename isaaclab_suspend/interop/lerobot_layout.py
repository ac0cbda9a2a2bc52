"""Deprecated: :mod:`isaaclab_suspend.lerobot.layout`."""

from ..lerobot.layout import *  # noqa: F401,F403
