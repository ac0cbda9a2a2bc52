"""Both physics presets simulate the push-cube scene plausibly: the cube rests on the floor until pushed, and
the pusher then moves it along the floor."""

import pytest
import torch

from isaaclab_suspend.tasks.env_factory import open_env

pytestmark = pytest.mark.slow  # two physics presets simulated for seconds


@pytest.mark.parametrize("preset", ["newton_mjwarp", "newton_featherstone"])
def test_cube_rests_on_the_floor_and_is_pushable(preset):
    with open_env("Isaac-PushCube-Suspendable", 2, overrides=[f"presets={preset}"], events__nudge_cube=None,
                  terminations__cube_out_of_bounds=None, terminations__success=None,
                  rewards__success=None, rewards__out_of_bounds=None) as env:  # those rewards read the terminations
        env.reset()
        cube = env.scene["cube"].data
        start = cube.root_pos_w.torch.clone()
        for _ in range(30):
            env.step(torch.zeros(2, 1))  # the pusher stays away from the cube
        rest = cube.root_pos_w.torch.clone()
        assert (rest - start).abs().max() < 5e-3, (start, rest)
        top = rest[:, 2].clone()
        for _ in range(30):
            env.step(torch.full((2, 1), 0.5))
            top = torch.maximum(top, cube.root_pos_w.torch[:, 2])
        pushed = cube.root_pos_w.torch - rest
        assert (pushed[:, 0] > 0.05).all(), pushed  # moved forward by the pusher (at rest: < 5 mm)
        assert (top < 0.1).all(), top  # along the floor, not thrown (centre at rest: 0.05 m)
