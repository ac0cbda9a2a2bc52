"""Two builds of one env timed against each other: each in a process of its own, stepped in turn block by block, so
that a busy machine slows both alike and their ratio stays meaningful (what ``bench_determinism.py`` and
``bench_random_streams.py`` compare)."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import statistics
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.connection import Connection


@contextlib.contextmanager
def paired_workers(worker: Callable, args: Sequence[tuple]) -> Iterator[list[Connection]]:
    """Start ``worker(*a, pipe)`` for each ``a`` of ``args`` in a spawned process and wait until each sent
    ``"ready"``; yields their pipes. On exit each is sent None (the worker's signal to close its env) and joined."""
    ctx = mp.get_context("spawn")
    pipes, procs = [], []
    try:
        for worker_args in args:
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=worker, args=(*worker_args, child))
            proc.start()
            pipes.append(parent)
            procs.append(proc)
        for pipe in pipes:
            assert pipe.recv() == "ready"
        yield pipes
    finally:
        for pipe in pipes:
            pipe.send(None)
        for proc in procs:
            proc.join()


def median_in_turn(pipes: Sequence[Connection], blocks: int, steps: int) -> list[float]:
    """Send ``steps`` to each worker in turn, ``blocks`` + 1 times (the first round warms up), and return each
    worker's median of the seconds per step it answers."""
    times: list[list[float]] = [[] for _ in pipes]
    for block in range(blocks + 1):
        for pipe, kept in zip(pipes, times):
            pipe.send(steps)
            seconds = pipe.recv()
            if block:
                kept.append(seconds)
    return [statistics.median(kept) for kept in times]
