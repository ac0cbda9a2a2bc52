"""Shared memory that exported episodes are gathered into and the writer process reads them from."""

from __future__ import annotations

import mmap
import os
from collections import deque

import numpy as np

ALIGNMENT = 64
"""Byte alignment of every region and every array placed in one (a cache line, and any numpy dtype's)."""


class StagingRing:
    """A ring of shared memory (a Linux ``memfd``) holding the episodes handed to the writer process and not yet
    written by it, so that an export is gathered once, straight into memory the writer reads, and the message
    sent over the pipe carries only offsets.

    Regions are reserved in hand-over order and released in the same order, as the writer reports the messages
    it has written. The ring grows (doubling, at least to the region asked for) only when it is empty and a
    region does not fit: its size is bounded by twice the largest export, or by the bytes of the episodes the
    writer's queue holds. It is mapped populated: its pages are committed at once, so that an export does not
    fault them in.

    Args:
        size: Initial size in bytes.
    """

    def __init__(self, size: int):
        if size < ALIGNMENT:
            raise ValueError(f"The staging ring needs at least {ALIGNMENT} bytes, got {size}.")
        self.fd = os.memfd_create("isaaclab_suspend_episodes")  # close-on-exec: only the writer gets it (pass_fds)
        """File descriptor of the shared memory, for the writer process to map."""
        self.size = 0
        self.buffer = np.empty(0, np.uint8)
        """The ring, mapped. Shape: (size,), uint8."""
        self._regions: deque[tuple[int, int]] = deque()  # (start, end) of the regions in use, oldest first
        self._resize(size)

    @property
    def empty(self) -> bool:
        """Whether no region is in use."""
        return not self._regions

    def reserve(self, nbytes: int) -> int | None:
        """Offset of a new region of ``nbytes`` bytes after the newest one, or None if the ring has no room now."""
        nbytes = max(_aligned(nbytes), ALIGNMENT)  # never empty: head == tail then means a full, wrapped ring
        if not self._regions:
            start = 0 if nbytes <= self.size else None
        else:
            head, tail = self._regions[-1][1], self._regions[0][0]
            if head > tail:  # in use: [tail, head)
                start = head if head + nbytes <= self.size else (0 if nbytes <= tail else None)
            else:  # wrapped, in use: [tail, size) and [0, head)
                start = head if head + nbytes <= tail else None
        if start is not None:
            self._regions.append((start, start + nbytes))
        return start

    def unreserve(self) -> None:
        """Free the newest region (its hand-over never happened)."""
        self._regions.pop()

    def release(self, count: int) -> None:
        """Free the ``count`` oldest regions (their messages are written)."""
        if count > len(self._regions):
            raise RuntimeError(f"The writer released {count} regions of the staging ring; {len(self._regions)} are"
                               " in use.")
        for _ in range(count):
            self._regions.popleft()

    def grow(self, nbytes: int) -> None:
        """Make room for a region of ``nbytes`` bytes: double the ring (at least). Only while it is empty."""
        if self._regions:
            raise RuntimeError("The staging ring grows only while it is empty.")
        self._resize(max(2 * self.size, _aligned(nbytes)))

    def array(self, offset: int, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """The array of ``shape`` and ``dtype`` at ``offset`` (a view of the ring)."""
        count = int(np.prod(shape, dtype=np.int64))
        return self.buffer[offset: offset + count * dtype.itemsize].view(dtype).reshape(shape)

    def close(self) -> None:
        os.close(self.fd)

    def _resize(self, size: int) -> None:
        # the old mapping stays valid for arrays still viewing it (same pages); it is unmapped with them
        os.ftruncate(self.fd, size)
        self.buffer = np.frombuffer(mmap.mmap(self.fd, size, flags=mmap.MAP_SHARED | mmap.MAP_POPULATE), np.uint8)
        self.size = size


def aligned_offsets(nbytes: list[int]) -> tuple[list[int], int]:
    """Offsets of arrays of ``nbytes`` bytes placed one after another in a region, each aligned; and its size."""
    offsets, end = [], 0
    for n in nbytes:
        offsets.append(end)
        end += _aligned(n)
    return offsets, end


def _aligned(nbytes: int) -> int:
    return -(-nbytes // ALIGNMENT) * ALIGNMENT
