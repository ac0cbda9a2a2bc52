"""Per-env queues of planned actions: the chunk buffer of :class:`~isaaclab_suspend.chunking.ActionChunkingPolicy`."""

from __future__ import annotations

import torch

from .aggregators import Aggregator

MAX_QUEUE_BYTES = 2**30
"""The most memory the chunk queues of a run may take: 1 GiB (:func:`queue_bytes`). A chunk length or env count
past it is a mistake (10**8 actions per chunk), refused before anything is allocated."""


def queue_bytes(num_envs: int, chunk_length: int, action_dim: int = 1) -> int:
    """Bytes the queues of ``num_envs`` envs take for chunks of ``chunk_length`` actions of ``action_dim`` numbers:
    N x H x (4 A + 8), the float32 actions and an int64 count per planned action."""
    return num_envs * chunk_length * (4 * action_dim + 8)


def check_queue_memory(num_envs: int, chunk_length: int, action_dim: int = 1) -> None:
    """Raise a one-line ``ValueError`` if the queues (:func:`queue_bytes`) would pass :data:`MAX_QUEUE_BYTES`;
    ``action_dim`` 1 (the least) where the env is not built yet."""
    needed = queue_bytes(num_envs, chunk_length, action_dim)
    if needed > MAX_QUEUE_BYTES:
        raise ValueError(
            f"chunk_length {chunk_length} on {num_envs} envs with {action_dim} action"
            f" dim{'s' if action_dim != 1 else ''} needs {needed / 2**30:.1f} GiB of chunk queues (num_envs x"
            f" chunk_length x (4 x action_dim + 8) bytes), over the {MAX_QUEUE_BYTES / 2**30:g} GiB bound: use a"
            " shorter chunk or fewer envs."
        )


class ChunkQueues:
    """The action chunk of every env, a cursor into it, and a host-side mirror of the earliest refill.

    Env ``i`` executes ``chunks[i, cursor[i]]`` and advances its cursor; ``cursor[i] == H`` means its queue is
    empty (exhausted, or dropped at a reset). A new chunk is merged with the leftover actions by an
    aggregator and restarts the cursor at 0.

    Everything lives on the env device; only :meth:`requests` reads the device back, gated by a host-side
    mirror of the step at which the first queue reaches the refill level.

    Args:
        num_envs: Number of envs.
        chunk_length: Actions per chunk H.
        action_dim: Action dimension A.
        refill_at: An env requests a new chunk once at most this many actions are left in its queue
            (0: when it is empty). Read only by :meth:`requests`.
        device: Torch device of the env.

    Raises:
        ValueError: If the queues would take more than
            :data:`~isaaclab_suspend.chunking.chunk_queues.MAX_QUEUE_BYTES`
            (:func:`~isaaclab_suspend.chunking.chunk_queues.check_queue_memory`).
    """

    def __init__(self, num_envs: int, chunk_length: int, action_dim: int, refill_at: int, device: str):
        check_queue_memory(num_envs, chunk_length, action_dim)
        self.num_envs = num_envs
        """Number of envs N."""
        self.chunk_length = chunk_length
        """Actions per chunk H."""
        self.refill_at = refill_at
        """Queue length at or below which an env requests a new chunk (see :meth:`requests`)."""
        self.chunks = torch.zeros(num_envs, chunk_length, action_dim, device=device)
        """Planned actions. Shape: (N, H, A)."""
        self.cursor = torch.full((num_envs,), chunk_length, dtype=torch.long, device=device)
        """Index of each env's next action; H when its queue is empty. Shape: (N,)."""
        self.counts = torch.zeros(num_envs, chunk_length, dtype=torch.long, device=device)
        """Number of predictions merged into each planned action (for the aggregators). Shape: (N, H)."""
        self.idle = torch.zeros(num_envs, dtype=torch.bool, device=device)
        """Envs that take no more chunks (past their episode quota): their queues stay empty, and they neither
        wait for a chunk nor request one. Shape: (N,)."""
        self._rows = torch.arange(num_envs, device=device)
        self._offsets = torch.arange(chunk_length, device=device)
        self._steps_to_refill: int | None = 0
        """Host mirror: steps until the first env reaches :attr:`refill_at` (a lower bound if some env is
        suspended mid-chunk); None when it must be re-read from the device."""

    def empty_mask(self) -> torch.Tensor:
        """Envs with no action left. Shape: (N,)."""
        return self.cursor >= self.chunk_length

    def waiting_mask(self) -> torch.Tensor:
        """Envs with no action left that want a chunk (not :attr:`idle`). Shape: (N,)."""
        return self.empty_mask() & ~self.idle

    def refill_mask(self) -> torch.Tensor:
        """Envs with at most :attr:`refill_at` actions left, :attr:`idle` ones excepted. Shape: (N,)."""
        return (self.chunk_length - self.cursor <= self.refill_at) & ~self.idle

    def set_idle(self, env_mask: torch.Tensor) -> None:
        """Make the envs in ``env_mask`` (bool, shape (N,)) :attr:`idle`: their queues are dropped, for good."""
        self.idle |= env_mask
        self.drop(env_mask)

    def requests(self, resets_pending: bool) -> torch.Tensor | None:
        """The envs requesting a chunk (:meth:`refill_mask`), or None if none does.

        Reads the device (one sync) only when ``resets_pending`` or when the host mirror says the earliest
        queue has reached the refill level, and once after each merge to refresh the mirror: between
        those steps it costs nothing.

        Args:
            resets_pending: Whether queues were dropped (env resets) since the last call.
        """
        if self._steps_to_refill is None:
            self._refresh_mirror()
        if not resets_pending and self._steps_to_refill > 0:
            return None
        mask = self.refill_mask()
        if not bool(mask.any()):
            self._refresh_mirror()  # an env was suspended mid-chunk: it refills later than the mirror said
            return None
        return mask

    def may_request(self) -> bool:
        """Whether :meth:`requests` may find an env at its next call without resets (host-side; True when unsure).
        After a merge it reads the device once, the read :meth:`requests` would otherwise make next."""
        if self._steps_to_refill is None:
            self._refresh_mirror()
        return self._steps_to_refill <= 0

    def drop(self, env_mask: torch.Tensor) -> None:
        """Empty the queues of the envs in ``env_mask`` (bool, shape (N,)): their leftovers are discarded."""
        self.cursor.masked_fill_(env_mask, self.chunk_length)
        self.counts.masked_fill_(env_mask.unsqueeze(1), 0)
        self._steps_to_refill = 0

    def merge(
        self,
        env_ids: torch.Tensor,
        chunk: torch.Tensor,
        aggregator: Aggregator,
        take: torch.Tensor | None,
        start: torch.Tensor | None = None,
    ) -> None:
        """Merge a new chunk into the queues of ``env_ids`` and restart their cursors (:attr:`idle` envs excepted).

        Args:
            env_ids: Env indices, unique. Shape: (B,).
            chunk: The new chunk, ``chunk[:, 0]`` being the action for the current step. Shape: (B, H, A).
            aggregator: Merges the leftovers with the new chunk (see :mod:`~isaaclab_suspend.chunking.aggregators`).
            take: Envs that take the new chunk; the others keep their queue untouched (None: all of
                ``env_ids``). Shape: (N,).
            start: Cursor each taking env restarts at (None: 0, the chunk's first action), for a chunk planned
                some steps ago whose first actions are already past. Shape: (N,), long.
        """
        cursor = self.cursor[env_ids]
        chunks, counts = self.chunks[env_ids], self.counts[env_ids]
        new_cursor = torch.zeros_like(cursor) if start is None else start[env_ids]
        # leftovers aligned with the new chunk: old step cursor + j meets new step new_cursor + j
        source = (cursor - new_cursor).unsqueeze(1) + self._offsets
        left = (source < self.chunk_length) & (self._offsets >= new_cursor.unsqueeze(1))
        source = source.clamp(0, self.chunk_length - 1)
        old = chunks.gather(1, source.unsqueeze(-1).expand_as(chunks))
        old_counts = torch.where(left, counts.gather(1, source), 0)
        merged, merged_counts = aggregator(old, chunk, old_counts)
        new_cursor = torch.zeros_like(cursor) if start is None else start[env_ids]
        rows = ~self.idle[env_ids] if take is None else take[env_ids] & ~self.idle[env_ids]
        merged = torch.where(rows.view(-1, 1, 1), merged, chunks)
        merged_counts = torch.where(rows.view(-1, 1), merged_counts, counts)
        new_cursor = torch.where(rows, new_cursor, cursor)
        self.chunks[env_ids] = merged
        self.counts[env_ids] = merged_counts
        self.cursor[env_ids] = new_cursor
        self._steps_to_refill = None

    def prefix(self, length: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The next ``length`` queued actions of every env (a new tensor) and how many of them it has.

        Returns:
            The actions, padded with the last one past the end of a queue, shape (N, length, A); and
            ``min(actions left, length)``, shape (N,), long.
        """
        index = (self.cursor.unsqueeze(1) + self._offsets[:length]).clamp(max=self.chunk_length - 1)
        actions = self.chunks.gather(1, index.unsqueeze(-1).expand(-1, -1, self.chunks.shape[-1]))
        return actions, (self.chunk_length - self.cursor).clamp(max=length)

    def pop(self, executing: torch.Tensor, fallback: torch.Tensor) -> torch.Tensor:
        """The next action of every env, advancing the queues of the executing envs.

        Args:
            executing: Envs that execute their next queued action this step (they must have one). Shape: (N,).
            fallback: Action of the other envs. Shape: (N, A).

        Returns:
            A new tensor of actions, shape (N, A).
        """
        index = self.cursor.clamp(max=self.chunk_length - 1)
        actions = torch.where(executing.unsqueeze(1), self.chunks[self._rows, index], fallback)
        self.cursor += executing
        if self._steps_to_refill is not None:
            self._steps_to_refill -= 1
        return actions

    def _refresh_mirror(self) -> None:
        steps = (self.chunk_length - self.refill_at - self.cursor).masked_fill(self.idle, self.chunk_length)
        self._steps_to_refill = int(steps.min())
