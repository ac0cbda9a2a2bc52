"""Pytest plugin: run Isaac Lab's own tests against the suspendable env and the masked recorder.

Loaded with ``-p isaaclab_conformance_plugin`` before Isaac Lab's test modules are imported, it replaces
``isaaclab.envs.ManagerBasedRLEnv`` with :class:`ConformanceEnv` (suspension enabled, every step through the
masked step) and ``isaaclab.managers.RecorderManager`` with the masked recorder.
"""

import isaaclab.envs
import isaaclab.managers

from isaaclab_suspend.envs import SuspendableManagerBasedRLEnv
from isaaclab_suspend.suspension import SuspendCfg
from isaaclab_suspend.recording import SuspendableRecorderManager


class ConformanceEnv(SuspendableManagerBasedRLEnv):
    """Suspension enabled, and every step takes the masked path (with nothing suspended it must be the stock step)."""

    def __init__(self, cfg, render_mode=None, **kwargs):
        cfg.suspend = SuspendCfg(enabled=True)
        super().__init__(cfg, render_mode, **kwargs)

    def step(self, action):
        self.suspension_manager.maybe_suspended = True
        return super().step(action)


isaaclab.envs.ManagerBasedRLEnv = ConformanceEnv
isaaclab.managers.RecorderManager = SuspendableRecorderManager


def pytest_report_header(config):
    return (f"conformance: ManagerBasedRLEnv -> {isaaclab.envs.ManagerBasedRLEnv.__name__},"
            f" RecorderManager -> {isaaclab.managers.RecorderManager.__name__}")
