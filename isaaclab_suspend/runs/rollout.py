"""The env loop every run drives: start (seeded, optionally desynchronised) episodes, then act -> step -> observe,
with an episode ledger that counts the episodes and ends the run."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, NamedTuple, Protocol

import torch

if TYPE_CHECKING:
    from ..envs import SuspendableManagerBasedRLEnv
    from .episode_ledger import EpisodeLedger



class StepPolicy(Protocol):
    """What the loop drives: ``ActionChunkingPolicy``, ``CheckpointPolicy`` or ``RandomPolicy``."""

    def act(self, obs: dict) -> torch.Tensor:
        """Actions for the next step. Shape: (num_envs, action_dim)."""
        ...

    def observe(self, dones: torch.Tensor) -> None:
        """Account the step just taken (``terminated | truncated``, shape (num_envs,))."""
        ...


class Transition(NamedTuple):
    """One step of :func:`rollout`."""

    step: int
    """Index of the step in the rollout."""
    obs: dict
    """The observation the policy acted on (tensors of shape (num_envs, ...))."""
    next_obs: dict
    """The observation after the step."""
    dones: torch.Tensor
    """``terminated | truncated`` of the step. Shape: (num_envs,), bool."""


def desync_episodes(env: SuspendableManagerBasedRLEnv, generator: torch.Generator) -> None:
    """Start every env at a random point of its episode (Isaac Lab's ``init_at_random_ep_len``), so episodes end at
    different steps, as when tasks succeed or fail at different times. These first episodes, cut short, are not
    demos: a recorder that can drop them does."""
    start = torch.randint(0, int(env.max_episode_length), (env.num_envs,), generator=generator,
                          device=generator.device)
    env.episode_length_buf[:] = start.to(env.device)
    discard = getattr(env.recorder_manager, "discard_open_episodes", None)
    if discard is not None:
        discard()


def start_episodes(env: SuspendableManagerBasedRLEnv, seed: int | None, desync: bool,
                   generator: torch.Generator | None = None) -> dict:
    """Reset ``env`` with ``seed`` and, if ``desync``, desynchronise its episodes with ``generator`` (default: a CPU
    generator seeded with ``seed``). Returns the first observation."""
    obs, _ = env.reset(seed=seed)
    if desync:
        desync_episodes(env, generator or torch.Generator().manual_seed(seed or 0))
    return obs


def rollout(env: SuspendableManagerBasedRLEnv, policy: StepPolicy, obs: dict, steps: int | None = None,
            ledger: EpisodeLedger | None = None) -> Iterator[Transition]:
    """Run ``policy`` from ``obs`` for ``steps`` steps (None: until the caller stops iterating or, with a
    ``ledger``, until it is finished); each step is accounted in ``ledger`` before it is yielded."""
    step = 0
    while (steps is None or step < steps) and not (ledger is not None and ledger.finished):
        actions = policy.act(obs)
        next_obs, _, terminated, truncated, _ = env.step(actions)
        dones = terminated | truncated
        policy.observe(dones)
        if ledger is not None:
            status = getattr(policy, "last_step", None)  # an ActionChunkingPolicy's: suspended and served masks
            ledger.update(dones, env.suspended_mask if status is None else status.suspended,
                          None if status is None else status.served)
        yield Transition(step, obs, next_obs, dones)
        obs = next_obs
        step += 1


def score(env: SuspendableManagerBasedRLEnv, policy: StepPolicy, obs: dict, steps: int) -> dict:
    """Run ``policy`` from ``obs`` for ``steps`` steps; the figures of the episodes it ended
    (:meth:`~isaaclab_suspend.runs.EpisodeOutcomes.as_dict`: ``episodes_scored``, ``success_rate``,
    ``mean_episode_length``, ...), suspended steps not counted."""
    from .outcomes import EpisodeOutcomes

    outcomes = EpisodeOutcomes(env)
    for t in rollout(env, policy, obs, steps):
        outcomes.update(t.dones, ~env.suspended_mask)
    return outcomes.as_dict()
