"""A suspended-then-resumed env continues bit-exactly as if it had never been suspended."""

import pytest
import torch

from isaaclab_suspend.utils import open_env

NUM_ENVS = 4
STEPS = 60
SUSPENDED = [1, 2]
SUSPEND_AT, SUSPEND_FOR = 15, 13  # 13 is prime to every ring length here


def _feedback(obs: torch.Tensor) -> torch.Tensor:
    """A deterministic per-env state feedback (no time dependence), so trajectories depend on state only."""
    return torch.clamp(-0.8 * obs[:, :1] - 0.3 * obs[:, 2:3] + 0.5, -1.0, 1.0)


def _rollout(task: str, suspend: bool, **attrs) -> tuple[torch.Tensor, torch.Tensor]:
    """Obs per step and per env, and a mask of the steps each env was active."""
    if "PushCube" in task:
        attrs["events__nudge_cube"] = None  # interval events draw from the shared RNG at schedule-dependent times
    with open_env(task, NUM_ENVS, **attrs) as env:
        obs, _ = env.reset()
        trajectory, active = [obs["policy"].clone()], [torch.ones(NUM_ENVS, dtype=torch.bool)]
        for step in range(STEPS):
            if suspend and step == SUSPEND_AT:
                env.suspend_envs(SUSPENDED)
            if suspend and step == SUSPEND_AT + SUSPEND_FOR:
                env.resume_envs(SUSPENDED)
            active.append(env.active_mask)
            obs, _, term, trunc, _ = env.step(_feedback(obs["policy"]))
            assert not (term | trunc).any(), "the comparison window must not cross an episode boundary"
            trajectory.append(obs["policy"].clone())
        return torch.stack(trajectory), torch.stack(active)


OBS_WITH_MEMORY = {
    # a 3-step history on every policy term and a fixed 2-step delay on the joint positions
    "observations__policy__history_length": 3,
    "observations__policy__joint_pos_rel__delay_min_lag": 2,
    "observations__policy__joint_pos_rel__delay_max_lag": 2,
}


@pytest.mark.parametrize(
    "task, attrs",
    [("Isaac-Cartpole-Suspendable", {}), ("Isaac-Cartpole-Suspendable", OBS_WITH_MEMORY), ("Isaac-PushCube-Suspendable", {})],
    ids=["cartpole", "cartpole-history-delay", "push-cube"],
)
def test_resume_continues_bit_exactly(task, attrs):
    reference, _ = _rollout(task, suspend=False, **attrs)
    result, active = _rollout(task, suspend=True, **attrs)
    for env_id in range(NUM_ENVS):
        steps = active[:, env_id]
        ours = result[steps, env_id]
        # the env's own active steps, in order, equal the never-suspended run's first steps
        assert torch.equal(ours, reference[: len(ours), env_id]), f"env {env_id} diverged after resume"
    assert (~active[:, SUSPENDED]).sum() == SUSPEND_FOR * len(SUSPENDED)
    # the trajectory actually moved while the others ran (a frozen-forever env would also pass the above)
    assert not torch.equal(reference[SUSPEND_AT, SUSPENDED], reference[-1, SUSPENDED])
