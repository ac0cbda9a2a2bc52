"""Baseline step policies of the rollout loop: random, constant and hold-pose actions, the figures a task's success
criterion must not credit (docs/chunking.rst)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from ..envs import SuspendableManagerBasedRLEnv


class RandomPolicy:
    """Uniform actions in [-1, 1] from a seeded generator, as a policy of the rollout loop (``record.py --model random``)."""

    def __init__(self, env: SuspendableManagerBasedRLEnv, generator: torch.Generator):
        self.env = env
        self.generator = generator

    def act(self, obs: dict) -> torch.Tensor:
        """Shape: (num_envs, action_dim)."""
        shape = (self.env.num_envs, self.env.action_manager.total_action_dim)
        return 2.0 * torch.rand(shape, generator=self.generator, device=self.env.device) - 1.0

    def observe(self, dones: torch.Tensor) -> None:
        """Nothing to drop."""


class ConstantPolicy:
    """The same action in every env at every step (0: do nothing; 1: push all the time), as a policy of the rollout
    loop: a baseline that a task's success criterion must not credit (docs/chunking.rst)."""

    def __init__(self, env: SuspendableManagerBasedRLEnv, value: float):
        self.env = env
        self.value = value

    def act(self, obs: dict) -> torch.Tensor:
        """Shape: (num_envs, action_dim); a new tensor each step."""
        shape = (self.env.num_envs, self.env.action_manager.total_action_dim)
        return torch.full(shape, self.value, device=self.env.device)

    def observe(self, dones: torch.Tensor) -> None:
        """Nothing to drop."""


class HoldPosePolicy(ConstantPolicy):
    """Joint targets = the joints' positions now (the ``policy`` term ``term``): an arm that stays where it starts,
    a baseline of joint-target tasks (the SO-101 follower's action space)."""

    def __init__(self, env: SuspendableManagerBasedRLEnv, term: str):
        super().__init__(env, 0.0)
        self.term = term

    def act(self, obs: dict) -> torch.Tensor:
        """Shape: (num_envs, action_dim); a new tensor each step."""
        return obs["policy"][self.term].clone()
