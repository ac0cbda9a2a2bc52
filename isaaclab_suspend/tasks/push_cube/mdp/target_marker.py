"""A target command that also moves a visual marker to the target, so cameras can see the goal."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import MISSING
from typing import TYPE_CHECKING

import torch

from isaaclab.utils import configclass

from .commands import TargetPositionCommand, TargetPositionCommandCfg

if TYPE_CHECKING:
    from isaaclab.envs import ManagerBasedRLEnv


class MarkedTargetPositionCommand(TargetPositionCommand):
    """:class:`TargetPositionCommand` that puts a marker articulation's slider joint at the target x.

    The marker is a collision-free strip on its own rail (see ``assets/generate_usd.py``), so its pose is
    physics state like any joint: suspension freezes it and replay restores it with the rest of the scene.
    """

    cfg: MarkedTargetPositionCommandCfg

    def __init__(self, cfg: MarkedTargetPositionCommandCfg, env: ManagerBasedRLEnv):
        super().__init__(cfg, env)
        self.marker = env.scene[cfg.marker_name]

    def _resample_command(self, env_ids: Sequence[int] | slice):
        super()._resample_command(env_ids)
        ids = torch.arange(self.num_envs, device=self.device)[env_ids]
        self.marker.write_joint_position_to_sim_index(position=self.target_x[ids], joint_ids=[0], env_ids=ids)
        self.marker.write_joint_velocity_to_sim_index(
            velocity=torch.zeros_like(self.target_x[ids]), joint_ids=[0], env_ids=ids
        )


@configclass
class MarkedTargetPositionCommandCfg(TargetPositionCommandCfg):
    """Configuration of :class:`MarkedTargetPositionCommand`."""

    class_type: type = MarkedTargetPositionCommand
    marker_name: str = MISSING
    """Scene articulation whose single slider joint shows the target."""
