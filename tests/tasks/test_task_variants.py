"""Every ``-Suspendable`` id the project registers opens with Isaac Lab's plain API, kitless on local assets:
``parse_env_cfg`` + ``gym.make`` inside ``launch_simulation`` on the CPU, then a reset and a step, with suspension
enabled (the variant's cfg carries Newton physics, the local asset paths and a ``SuspendCfg``)."""

from __future__ import annotations

import gymnasium as gym
import pytest
import torch

from isaaclab.app.sim_launcher import launch_simulation

import isaaclab_suspend.tasks  # noqa: F401  (registers the gym ids)
from isaaclab_tasks.utils import parse_env_cfg

SUSPENDABLE = sorted(task for task in gym.registry if "Suspendable" in task)
FAMILIES = ("SO101", "Franka", "PushCube", "Cartpole")
"""A variant's family is its robot or scene: the first of these its id names."""


def _family(task: str) -> str:
    return next((family for family in FAMILIES if family in task), task)


FAST_TIER = {min((t for t in SUSPENDABLE if _family(t) == family), key=len) for family in map(_family, SUSPENDABLE)}
"""The shortest id of each family opens in the fast tier; every other variant in the full suite only."""


def test_the_project_registers_its_variants():
    assert len(SUSPENDABLE) >= 10 and "IsaacContrib-Lift-Cube-SO101-IK-Abs-Suspendable" in SUSPENDABLE, SUSPENDABLE


@pytest.mark.parametrize("task", [t if t in FAST_TIER else pytest.param(t, marks=pytest.mark.slow)
                                  for t in SUSPENDABLE])
def test_variant_opens_with_isaaclab_plain_api(task):
    env_cfg = parse_env_cfg(task, device="cpu", num_envs=2)
    with launch_simulation(env_cfg, {}):
        env = gym.make(task, cfg=env_cfg)
        try:
            base = env.unwrapped
            assert base.suspend_cfg.enabled, f"{task}: opened without suspension"
            env.reset(seed=0)
            actions = torch.zeros(base.num_envs, base.action_manager.total_action_dim, device=base.device)
            obs, *_ = env.step(actions)
            assert obs, task
        finally:
            env.close()
