"""Observation and termination terms of the SO-101 lift task (Isaac Lab's stack terms do the rest)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from isaaclab.envs.mdp import joint_pos  # noqa: F401  (the absolute joint positions: the follower's state)
from isaaclab.managers import SceneEntityCfg
from isaaclab.utils.math import subtract_frame_transforms

if TYPE_CHECKING:
    from isaaclab.envs import ManagerBasedRLEnv


def object_pose_in_base(
    env: ManagerBasedRLEnv, object_cfg: SceneEntityCfg, robot_cfg: SceneEntityCfg = SceneEntityCfg("robot")
) -> torch.Tensor:
    """The object's position and orientation (quaternion x, y, z, w) in the robot's base frame. Shape: (N, 7)."""
    robot, obj = env.scene[robot_cfg.name], env.scene[object_cfg.name]
    pos, quat = subtract_frame_transforms(
        robot.data.root_pos_w.torch, robot.data.root_quat_w.torch, obj.data.root_pos_w.torch, obj.data.root_quat_w.torch
    )
    return torch.cat((pos, quat), dim=1)


def object_lifted(env: ManagerBasedRLEnv, object_cfg: SceneEntityCfg, height: float) -> torch.Tensor:
    """Whether the object's centre is ``height`` [m] or more above the table top (z = 0 of the env). Shape: (N,)."""
    z = env.scene[object_cfg.name].data.root_pos_w.torch[:, 2] - env.scene.env_origins[:, 2]
    return z >= height
