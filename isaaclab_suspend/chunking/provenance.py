"""Chunk provenance: where each env's action of a step came from (which model call, which action of its chunk,
planned how many env steps ago), kept on the device so that a recorder term can store it with every sample."""

from __future__ import annotations

import torch

NO_CHUNK = -1
"""Provenance of an action that did not come from a chunk (a held or suspended env's step)."""


class ChunkProvenance:
    """Per-env provenance of the chunk in each queue and of the action of the current step.

    :meth:`install` stamps a served env's chunk with the id of the model call that computed it (the calls are
    numbered 0, 1, 2, ... in the order their chunks are installed) and with the env's step count at the
    observation it was planned from; :meth:`record` derives the current step's provenance from them. Everything
    stays on the device: a few tensor ops per step, no host read.

    Args:
        num_envs: Number of envs N.
        device: Torch device of the env.
    """

    def __init__(self, num_envs: int, device: str | torch.device):
        self.chunk_call = torch.full((num_envs,), NO_CHUNK, dtype=torch.long, device=device)
        """Id of the model call whose chunk each env's queue holds (``NO_CHUNK``, -1, before the first).
        Shape: (N,)."""
        self.planned_at = torch.zeros(num_envs, dtype=torch.long, device=device)
        """:attr:`stepped` of each env at the observation its chunk was planned from. Shape: (N,)."""
        self.stepped = torch.zeros(num_envs, dtype=torch.long, device=device)
        """Steps each env was simulated (not suspended) so far. Shape: (N,)."""
        self.current: dict[str, torch.Tensor] = self._none(num_envs, device)
        """Provenance of the current step's actions (fresh tensors every step), ``NO_CHUNK`` (-1) for envs that did
        not execute a chunk action: ``call`` (model call id), ``index`` (position in that call's chunk) and ``age``
        (env steps from the observation the chunk was planned from to this step). Shapes: (N,), long."""

    def install(self, served: torch.Tensor, call_id: int, planned_at: torch.Tensor | None = None) -> None:
        """Stamp the chunks just installed for the envs in ``served`` (bool, shape (N,)) with ``call_id``, planned
        from the observation at step count ``planned_at`` (shape (N,); None: this step's observation)."""
        self.chunk_call = torch.where(served, call_id, self.chunk_call)
        self.planned_at = torch.where(served, self.stepped if planned_at is None else planned_at, self.planned_at)

    def record(self, executing: torch.Tensor, suspended: torch.Tensor, cursor: torch.Tensor) -> None:
        """Set :attr:`current` for a step: ``executing`` and ``suspended`` are bool masks, ``cursor`` the index of
        each env's action in its chunk (before the queues advance). Shapes: (N,)."""
        self.current = {
            "call": torch.where(executing, self.chunk_call, NO_CHUNK),
            "index": torch.where(executing, cursor, NO_CHUNK),
            "age": torch.where(executing, self.stepped - self.planned_at, NO_CHUNK),
        }
        self.stepped += ~suspended

    @staticmethod
    def _none(num_envs: int, device: str | torch.device) -> dict[str, torch.Tensor]:
        return {key: torch.full((num_envs,), NO_CHUNK, dtype=torch.long, device=device)
                for key in ("call", "index", "age")}
