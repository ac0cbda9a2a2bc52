"""A suspended-then-resumed env continues bit-exactly as if it had never been suspended, on both solvers:
observations and the full physics state of every asset, step by step."""

import pytest
import torch

from isaaclab_suspend.rl import load_checkpoint_policy
from isaaclab_suspend.rl.checkpoint_policy import shipped_checkpoint
from isaaclab_suspend.tasks.env_factory import open_env

from scene_state import physics_tensors

NUM_ENVS = 4
STEPS = 60
SUSPENDED = [1, 2]
SUSPEND_AT, SUSPEND_FOR = 15, 13  # 13 is prime to every ring length here
PRESETS = ["newton_mjwarp", "newton_featherstone"]


def _feedback(obs: torch.Tensor) -> torch.Tensor:
    """A deterministic per-env state feedback (no time dependence), so trajectories depend on state only."""
    return torch.clamp(-0.8 * obs[:, :1] - 0.3 * obs[:, 2:3] + 0.5, -1.0, 1.0)


def _physics(env) -> torch.Tensor:
    """Every physics quantity of every asset, one row per env. Shape: (num_envs, D)."""
    return torch.cat([t.reshape(env.num_envs, -1) for t in physics_tensors(env)], dim=1)


def _rollout(task: str, preset: str, suspend: bool, device: str, **attrs) -> dict[str, torch.Tensor]:
    """Obs and physics state per step and per env, the cube position (push-cube) and a mask of the steps each
    env was active."""
    if "PushCube" in task:
        # interval events draw from the shared RNG at schedule-dependent times; success would end the window
        # (the rewards of those terminations go with them: they read the terms)
        attrs.update(events__nudge_cube=None, terminations__success=None, rewards__success=None)
        if preset == "newton_featherstone":  # the shipped expert, trained on MuJoCo-Warp, pushes past x = 2.5 there
            attrs.update(terminations__cube_out_of_bounds=None, rewards__out_of_bounds=None)
    with open_env(task, NUM_ENVS, device, overrides=[f"presets={preset}"], deterministic="auto", **attrs) as env:
        if "PushCube" in task:  # the shipped expert: a closed-loop, state-only policy that pushes the cube
            policy = load_checkpoint_policy(shipped_checkpoint(task), env).act
        else:
            policy = lambda obs: _feedback(obs["policy"])  # noqa: E731
        obs, _ = env.reset()
        out = {"obs": [obs["policy"].clone()], "physics": [_physics(env)], "active": [env.active_mask]}
        for step in range(STEPS):
            if suspend and step == SUSPEND_AT:
                env.suspend_envs(SUSPENDED)
            if suspend and step == SUSPEND_AT + SUSPEND_FOR:
                env.resume_envs(SUSPENDED)
            out["active"].append(env.active_mask)
            obs, _, term, trunc, _ = env.step(policy(obs))
            assert not (term | trunc).any(), "the comparison window must not cross an episode boundary"
            out["obs"].append(obs["policy"].clone())
            out["physics"].append(_physics(env))
        return {key: torch.stack(value) for key, value in out.items()}


OBS_WITH_MEMORY = {
    # a 3-step history on every policy term and a fixed 2-step delay on the joint positions
    "observations__policy__history_length": 3,
    "observations__policy__joint_pos_rel__delay_min_lag": 2,
    "observations__policy__joint_pos_rel__delay_max_lag": 2,
}


@pytest.mark.cuda
@pytest.mark.parametrize(
    "task, preset, attrs",
    [
        ("Isaac-Cartpole-Suspendable", "newton_mjwarp", {}),
        ("Isaac-Cartpole-Suspendable", "newton_mjwarp", OBS_WITH_MEMORY),
        ("Isaac-PushCube-Suspendable", "newton_mjwarp", {}),
        ("Isaac-Cartpole-Suspendable", "newton_featherstone", OBS_WITH_MEMORY),
        ("Isaac-PushCube-Suspendable", "newton_featherstone", {}),
        # an odd number of physics steps per captured graph (newton #4098; docs/gpu.rst, exactness hazards)
        pytest.param("Isaac-Cartpole-Suspendable", "newton_featherstone", {"decimation": 3}, marks=pytest.mark.slow),
    ],
    ids=["cartpole", "cartpole-history-delay", "push-cube", "cartpole-history-delay-featherstone",
         "push-cube-featherstone", "cartpole-odd-decimation-featherstone"],
)
def test_resume_continues_bit_exactly(task, preset, attrs, device):
    reference = _rollout(task, preset, suspend=False, device=device, **attrs)
    result = _rollout(task, preset, suspend=True, device=device, **attrs)
    active = result["active"]
    for env_id in range(NUM_ENVS):
        steps = active[:, env_id]
        for key in ("obs", "physics"):
            ours = result[key][steps, env_id]
            # the env's own active steps, in order, equal the never-suspended run's first steps
            assert torch.equal(ours, reference[key][: len(ours), env_id]), f"env {env_id}: {key} diverged after resume"
    assert (~active[:, SUSPENDED]).sum() == SUSPEND_FOR * len(SUSPENDED)
    # the suspended envs really moved after their resume (an env frozen forever would also pass the above) ...
    resumed = SUSPEND_AT + SUSPEND_FOR
    moved = (result["physics"][-1, SUSPENDED] - result["physics"][resumed, SUSPENDED]).abs().amax(dim=1)
    assert (moved > 1e-2).all(), moved
    if "PushCube" in task:  # ... and the pusher moved their cube: contacts too, on both solvers
        cube = env_cube_x(result["obs"])
        assert ((cube[-1, SUSPENDED] - cube[resumed, SUSPENDED]).abs() > 1e-2).all(), cube[:, SUSPENDED]


def env_cube_x(obs: torch.Tensor) -> torch.Tensor:
    """The cube's x in the push-cube observation (cart_pos, cart_vel, cube_x, ...). Shape: (steps, num_envs)."""
    return obs[..., 2]
