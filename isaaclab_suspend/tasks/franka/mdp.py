"""Observation terms of the Franka cube lift (Isaac Lab's lift and stack terms do the rest)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from isaaclab.managers import SceneEntityCfg
from isaaclab.utils.math import combine_frame_transforms, subtract_frame_transforms

if TYPE_CHECKING:
    from isaaclab.envs import ManagerBasedRLEnv


def body_frame_pose_in_base(
    env: ManagerBasedRLEnv, asset_cfg: SceneEntityCfg, offset: tuple[float, float, float]
) -> torch.Tensor:
    """The pose of a frame fixed to a body (``offset`` in the body's frame), in the robot's base frame: position
    and quaternion (x, y, z, w). Shape: (N, 7).

    Read from the articulation's body state, which Isaac Lab brings up to date after a reset (a sensor's frames
    can still show the pose before the reset until the next physics step)."""
    robot = env.scene[asset_cfg.name]
    body = asset_cfg.body_ids[0]
    pos_w, quat_w = combine_frame_transforms(
        robot.data.body_pos_w.torch[:, body], robot.data.body_quat_w.torch[:, body],
        torch.tensor(offset, device=env.device).expand(env.num_envs, 3),
    )
    pos, quat = subtract_frame_transforms(robot.data.root_pos_w.torch, robot.data.root_quat_w.torch, pos_w, quat_w)
    return torch.cat((pos, quat), dim=1)
