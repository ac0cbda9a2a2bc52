"""Suspension on pixels: a suspended env's images (and their frame stack) stay bit-identical, and after resuming
it sees exactly the images of a never-suspended run. Runs the real camera task (4 envs, 32x32 RGB)."""

import pytest
import torch

from isaaclab.managers import SceneEntityCfg

from isaaclab_suspend.tasks.env_factory import open_env

TASK = "Isaac-PushCube-Camera-Suspendable"
NUM_ENVS = 4
STEPS = 24
SUSPENDED = [1, 2]
SUSPEND_AT, SUSPEND_FOR = 6, 7
FRAME_STACK = 3  # a stack of 3 tells a suspension that pushed the frozen frame from one that did not


def _feedback(policy_obs: torch.Tensor) -> torch.Tensor:
    """A deterministic state feedback, so trajectories depend on state only."""
    return torch.clamp(-0.8 * policy_obs[:, :1] - 0.3 * policy_obs[:, 2:3] + 0.5, -1.0, 1.0)


def _rollout(suspend: bool, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Stacked images per step and env (Shape: (steps + 1, num_envs, 32, 32, 3 * FRAME_STACK)) and the active mask."""
    image_params = {
        "sensor_cfg": SceneEntityCfg("scene_camera"), "data_type": "rgb", "normalize": False, "frame_stack": FRAME_STACK
    }
    attrs = {
        "events__nudge_cube": None,  # interval events draw from the shared RNG at schedule-dependent times
        "scene__scene_camera__height": 32,
        "scene__scene_camera__width": 32,
        "observations__images__scene_camera__params": image_params,
    }
    with open_env(TASK, NUM_ENVS, device, **attrs) as env:
        obs, _ = env.reset()
        images, active = [obs["images"]["scene_camera"].clone()], [env.active_mask]
        # phases: run, then (if suspend) suspend and run, then resume and run to the end
        phases = ((SUSPEND_AT, None), (SUSPEND_FOR, env.suspend_envs), (STEPS - SUSPEND_AT - SUSPEND_FOR, env.resume_envs))
        for length, switch in phases:
            if suspend and switch is not None:
                switch(SUSPENDED)
            for _ in range(length):
                active.append(env.active_mask)
                obs, _, term, trunc, _ = env.step(_feedback(obs["policy"]))
                assert not (term | trunc).any() and obs["images"]["scene_camera"].dtype == torch.uint8
                images.append(obs["images"]["scene_camera"].clone())
        return torch.stack(images), torch.stack(active)


@pytest.fixture(scope="module")
def runs(device):
    """The never-suspended run and the suspended one, on ``--device``."""
    return _rollout(suspend=False, device=device), _rollout(suspend=True, device=device)


@pytest.mark.cuda
def test_suspended_images_are_frozen(runs):
    _, (images, active) = runs
    frozen = images[SUSPEND_AT + 1 : SUSPEND_AT + SUSPEND_FOR + 1, SUSPENDED]
    assert not active[SUSPEND_AT + 1 : SUSPEND_AT + SUSPEND_FOR + 1, SUSPENDED].any()
    assert torch.equal(frozen, images[SUSPEND_AT, SUSPENDED].unsqueeze(0).expand_as(frozen))


@pytest.mark.cuda
def test_resumed_images_equal_never_suspended_run(runs):
    (reference, _), (images, active) = runs
    for env_id in range(NUM_ENVS):
        steps = active[:, env_id]
        ours = images[steps, env_id]
        assert torch.equal(ours, reference[: len(ours), env_id]), f"env {env_id}: images diverged after resume"
    # the scene moved in the images (a frozen-forever camera would also pass the above)
    assert not torch.equal(reference[SUSPEND_AT, SUSPENDED], reference[-1, SUSPENDED])
    # the two stacked frames differ while the pusher moves, so a stale stack would be caught
    assert not torch.equal(reference[-1, ..., :3], reference[-1, ..., 3:6])
