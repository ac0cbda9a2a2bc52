"""Per-env rings of past observations that freeze with their env, for models that look back in time.

A model that takes past steps (GR00T's ``delta_indices`` of ``[-20, 0]``: the observation 20 steps ago and
the current one; LeRobot's ``n_obs_steps``) needs every env's observation of every step, while the chunking
policy only calls it with the rows of the envs it serves. Its ``observe_step`` hook
(:class:`~isaaclab_suspend.chunking.model.ChunkModel`) feeds an :class:`ObservationHistory` per observation term
(:class:`ObservationHistories`) each step: the ring of an env advances only when its env moved (a suspended
env's history stands still, as its observation does), and an env that starts an episode has its whole ring
filled with its first observation. Everything stays on the env device, indexed by per-env positions:
no host sync, no per-env Python loop.
"""

from __future__ import annotations

import torch

MAX_STEPS = 1024
"""Longest ring L (steps kept per env) a history may have: the oldest offset comes from a model's config (a
server's ``delta_indices``, a checkpoint's ``n_obs_steps``), and the ring takes N x L x D of the env device."""


class ObservationHistory:
    """A ring of the last ``L`` observations of one term for each of N envs, read at fixed step offsets.

    Args:
        offsets: The steps to read, relative to the current one, each <= 0 (e.g. ``[-20, 0]``).
        first: The first observation of every env; sets the shape, dtype and device. Shape: (N, ...).

    Raises:
        ValueError: If ``offsets`` is empty, holds a positive offset or one older than ``1 - MAX_STEPS``.
    """

    def __init__(self, offsets: list[int], first: torch.Tensor):
        check_offsets(offsets)
        self.length = 1 - min(offsets)
        """Observations kept per env L (the oldest offset's distance plus the current one)."""
        n = first.shape[0]
        self._ring = first.unsqueeze(1).repeat(1, self.length, *([1] * (first.ndim - 1)))
        """Past observations. Shape: (N, L, ...)."""
        self._head = torch.zeros(n, dtype=torch.long, device=first.device)
        """Slot of each env's current observation. Shape: (N,)."""
        self._rows = torch.arange(n, device=first.device)
        self._offsets = torch.tensor(offsets, dtype=torch.long, device=first.device)

    def push(self, obs: torch.Tensor, moved: torch.Tensor, restarted: torch.Tensor | None) -> None:
        """Add this step's observations: envs that ``moved`` advance by one, ``restarted`` envs refill.

        Args:
            obs: The observation of every env this step. Shape: (N, ...).
            moved: Envs whose observation advanced in the last step (not suspended). Shape: (N,), bool.
            restarted: Envs whose episode began (their ring is filled with ``obs``), or None for none. Shape: (N,).
        """
        self._head = torch.where(moved, (self._head + 1) % self.length, self._head)
        keep = moved.view(-1, *([1] * (obs.ndim - 1)))
        self._ring[self._rows, self._head] = torch.where(keep, obs, self._ring[self._rows, self._head])
        if restarted is not None:
            fill = restarted.view(-1, 1, *([1] * (obs.ndim - 1)))
            self._ring = torch.where(fill, obs.unsqueeze(1), self._ring)

    def read(self) -> torch.Tensor:
        """The observations at the offsets, in their order, in a new tensor. Shape: (N, len(offsets), ...)."""
        slots = (self._head.unsqueeze(1) + self._offsets) % self.length
        return self._ring[self._rows.unsqueeze(1), slots]


def check_offsets(offsets: list[int], max_steps: int = MAX_STEPS) -> None:
    """Raise a ``ValueError`` unless ``offsets`` is a non-empty list of integer steps in ``1 - max_steps .. 0``."""
    if not (isinstance(offsets, list) and offsets and all(type(o) is int and 1 - max_steps <= o <= 0
                                                          for o in offsets)):
        raise ValueError(f"History offsets must be a non-empty list of integer steps from {1 - max_steps} to 0, got"
                         f" {str(offsets)[:80]}.")


class ObservationHistories:
    """One :class:`ObservationHistory` per observation term, made at the first step, for a model's ``observe_step``.

    Args:
        offsets: Term name -> the steps to read of it, relative to the current one, each <= 0 (e.g. LeRobot's
            ``n_obs_steps`` 2: ``[-1, 0]``).

    Raises:
        ValueError: If a term's offsets are not steps from ``1 - MAX_STEPS`` to 0 (checked before any ring is made).
    """

    def __init__(self, offsets: dict[str, list[int]]):
        for steps in offsets.values():
            check_offsets(steps)
        self.offsets = dict(offsets)
        """Term name -> the steps read of it."""
        self.rings: dict[str, ObservationHistory] | None = None
        """The ring of each term (None until the first :meth:`step`)."""

    def step(self, obs: dict[str, torch.Tensor], moved: torch.Tensor,
             restarted: torch.Tensor | None) -> dict[str, torch.Tensor]:
        """Push this step's observation of every term (the first step fills the rings with it, as a restart does).

        Args:
            obs: Term name -> the observation of every env this step, for every term of :attr:`offsets`.
                Shape of each: (N, ...).
            moved: Envs whose observation advanced in the last step. Shape: (N,), bool.
            restarted: Envs whose episode began, or None for none. Shape: (N,).

        Returns:
            Each term name mapped to its observations at its offsets, new tensors, each of shape
            (N, len(offsets), ...).
        """
        if self.rings is None:
            self.rings = {key: ObservationHistory(offsets, obs[key]) for key, offsets in self.offsets.items()}
        else:
            for key, ring in self.rings.items():
                ring.push(obs[key], moved, restarted)
        return {key: ring.read() for key, ring in self.rings.items()}
