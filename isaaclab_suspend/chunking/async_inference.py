"""The ``async`` schedule's machinery: one full-batch model call in a worker thread while the envs step."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import torch

ModelCall = Callable[..., tuple[torch.Tensor, float, float]]
"""``call(obs_rows, env_ids, **prefix) -> (chunk, seconds, virtual_s)``: one timed model call (``prefix``: the
optional ``prefix=`` and ``delay=`` of :class:`~.model.ChunkModel`)."""


@dataclass
class BackgroundInference:
    """A full-batch inference running in the worker thread until the tick that collects it."""

    future: Future
    """Resolves to ``(chunk, seconds, virtual_s)`` of the model call."""
    launched: float
    """``time.perf_counter()`` at the launch [s]."""
    start: torch.Tensor
    """Index of the first action each env takes: the lead for envs that run meanwhile, 0 for suspended ones.
    Shape: (N,), long."""
    stale: torch.Tensor
    """Envs reset since the launch: their chunk was planned from their previous episode. Shape: (N,), bool."""
    maybe_stale: bool = False
    """Host mirror: False guarantees that :attr:`stale` is empty."""

    def mark_stale(self, env_mask: torch.Tensor) -> None:
        """Envs reset since the launch (bool mask of shape (N,))."""
        self.stale |= env_mask
        self.maybe_stale = True


@dataclass
class CollectedInference:
    """What :meth:`InferenceWorker.collect` hands back: the chunk and how much of its latency the loop saw."""

    chunk: torch.Tensor
    """The model's chunk for every env, unchecked. Shape: (N, H, action_dim)."""
    start: torch.Tensor
    """See :attr:`BackgroundInference.start`. Shape: (N,), long."""
    stale: torch.Tensor
    """See :attr:`BackgroundInference.stale`. Shape: (N,), bool."""
    maybe_stale: bool
    """Host mirror: False guarantees that :attr:`stale` is empty."""
    seconds: float
    """Latency of the call, emulated part included [s] (for the schedule's cost model)."""
    waited: float
    """Time the loop waited for the result, plus the emulated latency the lead did not cover [s]."""
    unslept: float
    """The emulated part of :attr:`waited` that was not slept [s]."""


class InferenceWorker:
    """Runs at most one model call at a time in a worker thread, with copies of the observation rows.

    Args:
        call: The timed model call of the policy.
    """

    def __init__(self, call: ModelCall):
        self._call = call
        self._executor: ThreadPoolExecutor | None = None
        self.pending: BackgroundInference | None = None
        """The inference in flight; None when there is none."""

    def launch(self, rows: dict, env_ids: torch.Tensor, start: torch.Tensor, prefix: dict | None = None) -> None:
        """Start the model on ``rows`` (already copies, the loop may overwrite the observation), with the keyword
        arguments ``prefix`` (new tensors too) if given."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chunk-inference")
        future = self._executor.submit(self._call, rows, env_ids, **(prefix or {}))
        stale = torch.zeros(len(start), dtype=torch.bool, device=start.device)
        self.pending = BackgroundInference(future, time.perf_counter(), start, stale)

    def mark_stale(self, env_mask: torch.Tensor) -> None:
        """Envs reset (bool mask of shape (N,)): the chunk in flight no longer fits them."""
        if self.pending is not None:
            self.pending.mark_stale(env_mask)

    def collect(self) -> CollectedInference:
        """Wait for the inference in flight and return it (re-raises the model's exception).

        The loop waits only for the part of the latency the lead did not cover; with an emulated latency that is
        not slept, that part is accounted as virtual time.
        """
        background, self.pending = self.pending, None
        waited_from = time.perf_counter()
        chunk, seconds, _ = background.future.result()
        waited = time.perf_counter() - waited_from
        unslept = max(0.0, seconds - (waited_from - background.launched) - waited)
        return CollectedInference(chunk, background.start, background.stale, background.maybe_stale, seconds,
                                  waited + unslept, unslept)

    def discard(self) -> None:
        """Wait for an inference in flight and drop its result (a full reset or close makes it obsolete)."""
        if self.pending is not None:
            self.pending.future.exception()
            self.pending = None

    def close(self) -> None:
        """Drop the inference in flight and stop the thread."""
        self.discard()
        if self._executor is not None:
            self._executor.shutdown()
            self._executor = None
