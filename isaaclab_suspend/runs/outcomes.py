"""Outcomes of the episodes of an evaluation run: how many ended, their mean length and success rate."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from isaaclab.envs import ManagerBasedRLEnv


class EpisodeOutcomes:
    """Counts, without host syncs per step, the episodes that ended in a run, their length in env steps
    (steps the env was simulated, suspended ones excluded) and whether the task's ``success`` termination
    term ended them.

    Only episodes seen from their first step are scored: with desynchronised starts (an env begins at a
    random point of its episode) an env's first episode is cut short by the run's set-up, not by the policy,
    so it is left out with ``score_first=False``.

    With ``final_term``, a term of the ``policy`` observation group (e.g. push-cube's ``cube_to_target``), the
    mean of its norm in the last observation of each scored episode is reported too: what is left to do when the
    episode ends, which separates policies that all miss a success radius.

    Args:
        env: The env; its ``success`` termination term is read when it has one.
        score_first: Score the episode each env is in when the run starts.
        final_term: Observation term to report at the end of the episodes (ignored if the task has none).
    """

    def __init__(self, env: ManagerBasedRLEnv, score_first: bool = True, final_term: str | None = None):
        self.env = env
        self.has_success = "success" in env.termination_manager.active_terms
        """Whether the task has a ``success`` termination term (success rate is NaN otherwise)."""
        self.length = torch.zeros(env.num_envs, dtype=torch.long, device=env.device)
        """Steps of each env's current episode. Shape: (N,)."""
        self.scored = torch.full((env.num_envs,), score_first, dtype=torch.bool, device=env.device)
        """Whether each env's current episode is scored. Shape: (N,)."""
        self._episodes = torch.zeros((), dtype=torch.long, device=env.device)
        self._total_length = torch.zeros((), dtype=torch.long, device=env.device)
        self._successes = torch.zeros((), dtype=torch.long, device=env.device)
        terms = env.observation_manager.active_terms.get("policy", []) if final_term else []
        self.final_term = final_term if final_term in terms else None
        """The reported observation term; None if not asked for or not in the task's ``policy`` group."""
        if self.final_term:  # the term's columns in the concatenated group
            widths = [math.prod(dims) for dims in env.observation_manager.group_obs_term_dim["policy"]]
            start = sum(widths[: terms.index(final_term)])
            self._final_columns = slice(start, start + widths[terms.index(final_term)])
        self._final_sum = torch.zeros((), device=env.device)

    def update(self, dones: torch.Tensor, stepped: torch.Tensor, obs: dict | None = None) -> None:
        """Count one env step: ``dones`` (terminated | truncated) and ``stepped`` (not suspended) are bool
        tensors of shape (N,); ``obs`` is the observation the step started from (needed with ``final_term``)."""
        self.length += stepped
        ended = dones & self.scored
        if self.final_term:
            self._final_sum += (obs["policy"][:, self._final_columns].norm(dim=1) * ended).sum()
        self._episodes += ended.sum()
        self._total_length += (self.length * ended).sum()
        if self.has_success:
            self._successes += (ended & self.env.termination_manager.get_term("success")).sum()
        self.length.masked_fill_(dones, 0)
        self.scored |= dones

    def as_dict(self) -> dict[str, float | int]:
        """``episodes_scored``, ``mean_episode_length``, ``success_rate`` and, with a final term, ``final_<term>``
        (NaN without episodes, without a success term or without the term); one device read."""
        episodes, total, successes = (int(t) for t in (self._episodes, self._total_length, self._successes))
        figures = {
            "episodes_scored": episodes,
            "mean_episode_length": total / episodes if episodes else float("nan"),
            "success_rate": successes / episodes if episodes and self.has_success else float("nan"),
        }
        if self.final_term:
            figures[f"final_{self.final_term}"] = float(self._final_sum) / episodes if episodes else float("nan")
        return figures
