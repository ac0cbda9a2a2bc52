"""Deprecated: :mod:`isaaclab_suspend.lerobot` (``interop.lerobot_env`` is ``lerobot.env``, and so on)."""

from ..deprecation import warn_moved

warn_moved("isaaclab_suspend.interop", "isaaclab_suspend.lerobot")
