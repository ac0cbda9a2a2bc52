"""Both physics presets simulate the push-cube scene plausibly: the cube rests on the floor until pushed."""

import pytest
import torch

from isaaclab_suspend.utils import open_env


@pytest.mark.parametrize(
    "preset",
    [
        "newton_mjwarp",
        pytest.param("newton_featherstone", marks=pytest.mark.xfail(
            strict=True, reason="known bug: on Featherstone the resting cube is thrown up (z 0.06 m -> 0.17 m in 10"
            " steps) and leaves the bounds within 15 steps; push-cube on Featherstone is not usable yet")),
    ],
)
def test_cube_rests_on_the_floor(preset):
    with open_env("Isaac-PushCube-Suspendable", 2, overrides=[f"presets={preset}"], events__nudge_cube=None,
                  terminations__cube_out_of_bounds=None) as env:
        env.reset()
        start = env.scene["cube"].data.root_pos_w.torch.clone()
        for _ in range(30):
            env.step(torch.zeros(2, 1))  # the pusher stays away from the cube
        end = env.scene["cube"].data.root_pos_w.torch
        assert (end - start).abs().max() < 5e-3, (start, end)
