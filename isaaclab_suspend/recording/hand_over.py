"""The one way ended episodes go from the device buffers to the writer: who retires them, who allocates their
shared memory and who waits."""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import torch

from .episode_buffers import EpisodeBuffers
from .episode_writer import EpisodeBatch, EpisodeWriter
from .sharded_writer import ShardedEpisodeWriter


class EpisodeHandOver:
    """Owns the hand-over of ended episodes from :class:`EpisodeBuffers` to the writer.

    An export either retires its episodes (they stay in the buffers where they were recorded, and their envs move
    to spare slots) or, when the spare slots or the writer's queue bound have no room, hands the waiting ones over
    first and then these, together or at once. Retired episodes leave in one batch at the first :meth:`poll`
    ``interval_s`` after the first of them ended, when room is needed, or at :meth:`flush`. Only here are slots
    retired, the writer's shared memory allocated (``writer.allocate``) and the step thread made to wait
    (``writer.put`` blocks while ``queue_size`` episodes wait to be flushed): the back-pressure of the recording.
    """

    def __init__(self, buffers: EpisodeBuffers, writer: EpisodeWriter | ShardedEpisodeWriter, queue_size: int,
                 interval_s: float):
        self.buffers = buffers
        self.writer = writer
        self.queue_size = queue_size
        """Most episodes exported and not flushed (in the buffers and the writer's queue): what a kill may lose."""
        self.interval_s = interval_s
        """Longest wait of a retired episode before its hand-over [s]."""
        self._due: float | None = None
        """When the retired episodes are handed over at the latest (None while there are none)."""

    @property
    def unflushed_count(self) -> int:
        """Episodes exported and not flushed to the file(s) yet: at most what a killed run loses."""
        return self.writer.pending + self.buffers.retired_count

    def export(self, ids: torch.Tensor | None, env_list: list[int], success: torch.Tensor | np.ndarray,
               demo_ids: Sequence[int] | None) -> None:
        """End the open episodes of ``env_list`` (``ids``: the same on the device, None on the CPU) with their
        ``success`` (shape (len(env_list),)) and ``demo_ids`` (None: the file's next): retired if there is room,
        else handed over now; their envs start empty episodes."""
        if not self._fits(len(env_list)):
            self.flush()  # the episodes ended before go first
        if self._fits(len(env_list)):
            self.buffers.retire(ids, env_list, (success, env_list, demo_ids))
            if self._due is None:
                self._due = time.perf_counter() + self.interval_s
            return
        rows = self.buffers.take(ids, env_list, allocate=self.writer.allocate)
        self.writer.put(EpisodeBatch(rows, success, env_list, demo_ids))
        # emptied once handed over: an interrupt before leaves them open (dropped at close), never lost unseen
        self.buffers.clear(ids, env_list)

    def poll(self) -> None:
        """Hand the retired episodes over if they are due, and take the writer's reports (raises its error)."""
        if self._due is not None and time.perf_counter() >= self._due:
            self.flush()
        self.writer.check()

    def flush(self) -> None:
        """Hand the retired episodes to the writer in one batch (waits while its shared memory has no room); their
        slots are freed once the writer holds them, so that an interrupt before loses none."""
        self._due = None
        if self.buffers.retired_count == 0 or self.writer.error is not None:  # an error is raised once, elsewhere
            return
        rows, infos = self.buffers.take_retired(allocate=self.writer.allocate)
        success = [s for s, _, _ in infos]
        success = np.concatenate(success) if isinstance(success[0], np.ndarray) else torch.cat(success)
        env_ids = [i for _, ids, _ in infos for i in ids]
        demo_ids = None
        if any(d is not None for _, _, d in infos):
            demo_ids = [i for _, ids, d in infos for i in (d if d is not None else [None] * len(ids))]
        handed = self.writer.batches
        try:
            self.writer.put(EpisodeBatch(rows, success, env_ids, demo_ids))
        finally:
            if self.writer.batches != handed:
                self.buffers.release_retired()

    def _fits(self, size: int) -> bool:
        """Whether an export of ``size`` episodes can stay in the buffers: a spare slot for each, and what a kill
        would lose within the queue bound."""
        return size <= self.buffers.free_slots and self.unflushed_count + size <= self.queue_size
