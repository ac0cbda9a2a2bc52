"""Batch the concurrent chunk requests of several clients into one model call.

A policy server that serves K env processes (or one process calling it over K connections) otherwise runs K
model calls per global-clock tick, each paying the model's full latency. :class:`BatchingChunkModel` queues
the requests, concatenates the rows of those that arrive together into one call of the wrapped model, and
gives every request its own rows of the result back. A batch closes when every active client has a
request waiting, when it holds ``max_rows`` rows, or ``max_wait_s`` after its first request, whichever comes
first. A client is waited for from its connection on; one that has not sent a request yet is no longer waited
for once ``PATIENCE`` batches in a row closed at ``max_wait_s`` without it (until its first request), so a
connection that sends nothing costs the others at most that many waits, never one per call; the model runs in one worker thread, so calls never overlap. Each client waits for its answer before
sending its next request, so its order is kept, and a request only ever gets its own rows.

The batched call's ``env_ids`` are the requests' own ids, concatenated (ids of different clients may repeat):
batch only models whose chunk of a row depends on that row alone, not on per-env state kept by id. A request
may carry the optional ``prefix`` and ``delay`` of the chunk-model contract (real-time chunking) when the model
accepts them: the prefixes of the requests of one call are concatenated row by row like their observations, so
each row keeps its own; requests with prefixes of another length, or without one, get a call of their own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Hashable, Mapping
from concurrent.futures import Future

import torch

from isaaclab.utils import configclass

from ..tensor_tree import flatten_names
from ..chunking.model import ChunkModel, accepts_prefix, prefix_problem


PATIENCE = 2
"""Batches in a row closed at ``max_wait_s`` without a request of a client that has sent none yet, after which
it is no longer waited for (until its first request). A client that has sent requests is waited for until it
leaves: the connections of a client with fewer rows on some ticks (suspended envs) must not split the next
full tick into several calls."""


def _signature(tree: Mapping) -> tuple:
    """Keys, dtypes and row shapes of a nested observation dict: requests with equal ones can be concatenated."""
    return tuple(
        (key, _signature(value)) if isinstance(value, Mapping) else (key, value.dtype, tuple(value.shape[1:]),
                                                                      str(value.device))
        for key, value in sorted(tree.items())
    )


def _prefix_signature(prefix: Mapping) -> tuple | None:
    """Length, action dim and dtype of a request's prefix (None without one): requests with equal ones can be
    concatenated."""
    return (tuple(prefix["prefix"].shape[1:]), prefix["prefix"].dtype) if prefix else None


def _concat(trees: list[Mapping]) -> dict:
    return {key: _concat([t[key] for t in trees]) if isinstance(value, Mapping) else torch.cat([t[key] for t in trees])
            for key, value in trees[0].items()}


class _Request:
    __slots__ = ("obs_rows", "env_ids", "client", "prefix", "future")

    def __init__(self, obs_rows: Mapping, env_ids: torch.Tensor, client: Hashable | None, prefix: dict):
        self.obs_rows, self.env_ids, self.client, self.prefix, self.future = obs_rows, env_ids, client, prefix, Future()


class BatchingChunkModel:
    """A thread-safe chunk model that merges concurrent calls into one call of ``model``.

    Args:
        model: The batched chunk model, ``model(obs_rows, env_ids) -> (B, H, action_dim)``.
        cfg: When a batch closes.
    """

    def __init__(self, model: ChunkModel, cfg: BatchingCfg):
        self.model = model
        """The wrapped chunk model, called from the worker thread under ``torch.no_grad()``."""
        self.cfg = cfg
        """When a batch closes."""
        self.calls = 0
        """Calls of the wrapped model so far."""
        self.requests = 0
        """Requests served so far (``requests / calls``: the mean number of requests per model call)."""
        self._active: dict[Hashable, int | None] = {}  # client -> misses before its first request, else None
        self._queue: list[_Request] = []
        self._rows = 0
        self._cond = threading.Condition()
        self._closed = False
        self._worker = threading.Thread(target=self._run, name="batching-chunk-model", daemon=True)
        self._worker.start()

    @property
    def accepts_prefix(self) -> bool:
        """Whether the wrapped model takes a prefix (the optional ``accepts_prefix`` of the contract)."""
        return accepts_prefix(self.model)

    def register_client(self, client: Hashable) -> None:
        """A client that connected (a key of its connection): batches wait for its request, see ``PATIENCE``."""
        with self._cond:
            self._active[client] = 0

    def forget_client(self, client: Hashable) -> None:
        """A client that left (its connection closed): batches no longer wait for it."""
        with self._cond:
            self._active.pop(client, None)
            self._cond.notify()

    def submit(self, obs_rows: Mapping, env_ids: torch.Tensor, client: Hashable | None = None, **prefix) -> Future:
        """Queue a request of ``client`` (a key of its connection; None: a request no batch waits for again);
        the future's result is its chunk. Shape: (len(env_ids), H, action_dim). ``prefix``: the optional
        ``prefix=`` (B, d, action_dim) float and ``delay=`` (B,) integer of the contract, for a model that takes them.

        Raises:
            ValueError: If ``env_ids`` is not a 1-D integer tensor, an observation leaf has not one row per id, or
                the prefix is given to a model that takes none, without its delay, or with other rows: refused
                here, so that it cannot fail (or shift the rows of) the other requests of its batch.
        """
        if not isinstance(env_ids, torch.Tensor) or env_ids.ndim != 1 or env_ids.dtype.is_floating_point \
                or env_ids.dtype == torch.bool:
            raise ValueError(f"env_ids must be a 1-D integer tensor, got {getattr(env_ids, 'dtype', type(env_ids))}"
                             f" of shape {tuple(getattr(env_ids, 'shape', ()))}.")
        for name, leaf in flatten_names(obs_rows).items():
            if not isinstance(leaf, torch.Tensor) or leaf.ndim == 0 or leaf.shape[0] != env_ids.shape[0]:
                raise ValueError(f"Observation '{name}' must have one row per env id ({env_ids.shape[0]}), got"
                                 f" shape {tuple(getattr(leaf, 'shape', ()))}.")
        if prefix and not self.accepts_prefix:
            raise ValueError("This model takes no prefix (it has no accepts_prefix): send none.")
        problem = prefix_problem(prefix, env_ids.shape[0])
        if problem:
            raise ValueError(problem + ".")
        request = _Request(obs_rows, env_ids, client, prefix)
        with self._cond:
            if self._closed:
                raise RuntimeError("The batching chunk model is closed.")
            if client is not None:
                self._active[client] = None
            self._queue.append(request)
            self._rows += len(env_ids)
            if len(self._queue) == 1 or self._full():  # wake the worker only when it has something to decide
                self._cond.notify()
        return request.future

    def __call__(self, obs_rows: Mapping, env_ids: torch.Tensor, **prefix) -> torch.Tensor:
        return self.submit(obs_rows, env_ids, **prefix).result()

    def close(self) -> None:
        """Serve the requests already queued, then stop the worker; later calls raise a ``RuntimeError``."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._worker.join()

    def _next_batch(self) -> list[_Request]:
        """Wait for a batch to close and take it out of the queue (empty when closed)."""
        with self._cond:
            while not self._queue and not self._closed:
                self._cond.wait()
            deadline = time.monotonic() + self.cfg.max_wait_s
            while not self._closed and not self._full() and (remaining := deadline - time.monotonic()) > 0:
                self._cond.wait(remaining)
            if not self._full():  # closed at max_wait_s: count a miss of each client that never sent anything
                queued = {r.client for r in self._queue}
                for client in [c for c, misses in self._active.items() if misses is not None and c not in queued]:
                    self._active[client] += 1
                    if self._active[client] >= PATIENCE:
                        del self._active[client]
            batch, rows = [], 0
            while self._queue and (not batch or rows + len(self._queue[0].env_ids) <= self.cfg.max_rows):
                rows += len(self._queue[0].env_ids)
                batch.append(self._queue.pop(0))
            self._rows -= rows
            return batch

    def _full(self) -> bool:
        """Whether the queued requests close a batch: ``max_rows`` rows, or one request of every active client."""
        return self._rows >= self.cfg.max_rows or self._active.keys() <= {r.client for r in self._queue}

    def _run(self) -> None:
        while batch := self._next_batch():
            groups: dict[tuple, list[_Request]] = {}
            for request in batch:  # requests of another structure (keys, dtypes, row shapes, prefix) get their own call
                groups.setdefault((_signature(request.obs_rows), _prefix_signature(request.prefix)), []).append(request)
            for requests in groups.values():
                self._serve(requests)

    def _serve(self, requests: list[_Request]) -> None:
        try:
            prefix = _concat([r.prefix for r in requests]) if requests[0].prefix else {}
            with torch.no_grad():
                chunk = self.model(_concat([r.obs_rows for r in requests]), torch.cat([r.env_ids for r in requests]),
                                   **prefix)
            self.calls += 1
            self.requests += len(requests)
            for request, rows in zip(requests, chunk.split([len(r.env_ids) for r in requests])):
                request.future.set_result(rows)
        except Exception as err:  # every request of the call gets the model's error; the worker lives on
            for request in requests:
                request.future.set_exception(err)

    def __repr__(self) -> str:
        return f"BatchingChunkModel({self.model!r}, max_wait_s={self.cfg.max_wait_s:g}, max_rows={self.cfg.max_rows})"


@configclass
class BatchingCfg:
    """When :class:`BatchingChunkModel` closes a batch: every client waiting, ``max_rows`` or ``max_wait_s``."""

    class_type: type = BatchingChunkModel
    """The class this cfg configures."""
    max_wait_s: float = 0.005
    """Longest wait for more requests after the first of a batch [s]. Clients of one global clock that run in
    step send theirs within a few ms; raise it (up to about one model call) to bring clients that started out of
    step into one call, at the cost of that wait whenever a client is busy elsewhere."""
    max_rows: int = 4096
    """Most env rows in one model call (a request larger than this is served alone)."""
