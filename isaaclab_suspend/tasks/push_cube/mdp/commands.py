"""A goal position along the rail, resampled on a timer."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import MISSING
from typing import TYPE_CHECKING

import torch

from isaaclab.managers import CommandTerm, CommandTermCfg
from isaaclab.utils import configclass

if TYPE_CHECKING:
    from isaaclab.envs import ManagerBasedRLEnv


class TargetPositionCommand(CommandTerm):
    """Target x position of the object (relative to the env origin), uniform in :attr:`~TargetPositionCommandCfg.x_range`."""

    cfg: TargetPositionCommandCfg

    def __init__(self, cfg: TargetPositionCommandCfg, env: ManagerBasedRLEnv):
        super().__init__(cfg, env)
        self.target_x = torch.zeros(self.num_envs, 1, device=self.device)
        """Target x [m]. Shape: (num_envs, 1)."""
        self.object = env.scene[cfg.asset_name]
        self.metrics["distance"] = torch.zeros(self.num_envs, device=self.device)

    @property
    def command(self) -> torch.Tensor:
        """Target x [m]. Shape: (num_envs, 1)."""
        return self.target_x

    def _update_metrics(self):
        x = self.object.data.root_pos_w.torch[:, 0] - self._env.scene.env_origins[:, 0]
        self.metrics["distance"] = torch.abs(x - self.target_x[:, 0])

    def _resample_command(self, env_ids: Sequence[int] | slice):
        low, high = self.cfg.x_range
        sample = torch.empty_like(self.target_x).uniform_(low, high)
        self.target_x[env_ids] = sample[env_ids]

    def _update_command(self):
        pass


@configclass
class TargetPositionCommandCfg(CommandTermCfg):
    """Configuration of :class:`TargetPositionCommand`."""

    class_type: type = TargetPositionCommand
    asset_name: str = MISSING
    """Scene entity whose x position the target refers to."""
    x_range: tuple[float, float] = (1.0, 1.6)
    """Range of the target x [m] relative to the env origin."""
