"""Environments with per-env suspension."""

from .suspendable_env import SuspendableManagerBasedRLEnv
from .suspendable_env_cfg import SuspendableManagerBasedRLEnvCfg

__all__ = ["SuspendableManagerBasedRLEnv", "SuspendableManagerBasedRLEnvCfg"]
