"""Observation, reward and termination terms of the push-cube task."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from isaaclab.managers import SceneEntityCfg

if TYPE_CHECKING:
    from isaaclab.envs import ManagerBasedRLEnv

__all__ = ["object_x", "object_vel_x", "object_to_target", "object_distance", "object_at_target", "object_at_rest_at_target",
           "object_out_of_bounds"]


def object_x(env: ManagerBasedRLEnv, asset_cfg: SceneEntityCfg = SceneEntityCfg("cube")) -> torch.Tensor:
    """Object x position relative to the env origin [m]. Shape: (num_envs, 1)."""
    return env.scene[asset_cfg.name].data.root_pos_w.torch[:, :1] - env.scene.env_origins[:, :1]


def object_vel_x(env: ManagerBasedRLEnv, asset_cfg: SceneEntityCfg = SceneEntityCfg("cube")) -> torch.Tensor:
    """Object x velocity [m/s]. Shape: (num_envs, 1)."""
    return env.scene[asset_cfg.name].data.root_vel_w.torch[:, :1].clone()


def object_to_target(env: ManagerBasedRLEnv, command_name: str = "target", asset_cfg=SceneEntityCfg("cube")) -> torch.Tensor:
    """Signed distance from the object to its target along x [m]. Shape: (num_envs, 1)."""
    return env.command_manager.get_command(command_name) - object_x(env, asset_cfg)


def object_distance(env: ManagerBasedRLEnv, command_name: str = "target", asset_cfg=SceneEntityCfg("cube")) -> torch.Tensor:
    """Absolute distance from the object to its target along x [m]. Shape: (num_envs,)."""
    return torch.abs(object_to_target(env, command_name, asset_cfg)[:, 0])


def object_at_target(
    env: ManagerBasedRLEnv, threshold: float = 0.05, command_name: str = "target", asset_cfg=SceneEntityCfg("cube")
) -> torch.Tensor:
    """True where the object is within ``threshold`` of its target. Shape: (num_envs,)."""
    return torch.abs(object_to_target(env, command_name, asset_cfg)[:, 0]) < threshold


def object_at_rest_at_target(
    env: ManagerBasedRLEnv, threshold: float = 0.03, max_speed: float = 0.02, command_name: str = "target",
    asset_cfg=SceneEntityCfg("cube"),
) -> torch.Tensor:
    """True where the object rests within ``threshold`` of its target: slower than ``max_speed`` [m/s] along x.

    Passing through the target does not count, so pushing all the time (any constant or random action) does not
    succeed: the cube has to be brought to a stop there. Shape: (num_envs,)."""
    speed = env.scene[asset_cfg.name].data.root_vel_w.torch[:, 0].abs()
    return object_at_target(env, threshold, command_name, asset_cfg) & (speed < max_speed)


def object_out_of_bounds(
    env: ManagerBasedRLEnv, bounds: tuple[float, float] = (-0.5, 2.5), asset_cfg=SceneEntityCfg("cube")
) -> torch.Tensor:
    """True where the object left the x range, fell below the floor or was thrown up. Shape: (num_envs,)."""
    pos = env.scene[asset_cfg.name].data.root_pos_w.torch - env.scene.env_origins
    return (pos[:, 0] < bounds[0]) | (pos[:, 0] > bounds[1]) | (pos[:, 2] < -0.05) | (pos[:, 2] > 0.5)
