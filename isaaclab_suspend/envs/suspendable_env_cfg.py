"""Configuration of :class:`~isaaclab_suspend.envs.SuspendableManagerBasedRLEnv`: Isaac Lab's RL env cfg with a
:class:`~isaaclab_suspend.suspension.SuspendCfg`."""

from __future__ import annotations

from isaaclab.envs import ManagerBasedRLEnvCfg
from isaaclab.utils import configclass

from ..suspension.suspend_cfg import SuspendCfg


@configclass
class SuspendableManagerBasedRLEnvCfg(ManagerBasedRLEnvCfg):
    """A :class:`~isaaclab.envs.ManagerBasedRLEnvCfg` with a :class:`SuspendCfg`."""

    suspend: SuspendCfg = SuspendCfg()
    """Per-env suspension settings."""
