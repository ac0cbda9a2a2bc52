"""The env process of the transport benchmarks: K of them run one task against one policy server, in step, so
that a server's way of serving several clients (one at a time, or batched) is measured side by side."""

from __future__ import annotations

import time
from collections.abc import Callable
from multiprocessing.connection import Connection, wait

import torch

from ..chunking import ActionChunkingPolicy, ChunkModel
from ..tasks.env_factory import open_env


def env_process(rank: int, pipe: Connection, task: str, num_envs: int, chunk: int, schedule: str,
                warmup_ticks: int, ticks: int, connect: Callable[[object], ChunkModel],
                overrides: tuple[str, ...] = ()) -> None:
    """Open ``task`` with ``num_envs`` envs (seed ``rank``), then, for each server address received on ``pipe``
    (None ends), connect a model with ``connect(address)`` and run ``schedule`` from desynchronised episodes for
    ``warmup_ticks + ticks`` chunks of ``chunk`` steps. The process says ``ready``, ``connected`` (then waits for
    ``go``, so every client starts together), ``measuring`` and ``done``, and sends ``(seconds, active env-steps,
    model calls)`` of the measured ticks once its policy is closed (calls: the model's ``calls`` counter, 0 where
    it has none). ``overrides``: Hydra-style cfg overrides of the task, e.g. ``presets=newton_featherstone``."""
    torch.set_num_threads(1)
    with open_env(task, num_envs, overrides=overrides, seed=rank) as env:
        pipe.send("ready")
        while (address := pipe.recv()) is not None:
            model = connect(address)
            policy = ActionChunkingPolicy(model, env, chunk_length=chunk, schedule=schedule)
            obs, _ = env.reset(seed=rank)
            env.episode_length_buf[:] = torch.randint(0, int(env.max_episode_length), (env.num_envs,))
            pipe.send("connected")
            pipe.recv()  # go: every client starts together
            for step in range(chunk * (warmup_ticks + ticks)):
                if step == chunk * warmup_ticks:
                    start, active = time.perf_counter(), policy.stats["active_env_steps"]
                    calls = getattr(model, "calls", 0)
                    pipe.send("measuring")
                actions = policy.act(obs)
                obs, _, terminated, truncated, _ = env.step(actions)
                policy.observe(terminated | truncated)
            figures = (time.perf_counter() - start, policy.stats["active_env_steps"] - active,
                       getattr(model, "calls", 0) - calls)
            pipe.send("done")
            policy.close()  # an async chunk still in flight is answered while the server lives
            model.close()
            pipe.send(figures)


def measure(pipes: list[Connection], address: object, count: Callable[[], int]) -> tuple[list[tuple], slice]:
    """Run every :func:`env_process` of ``pipes`` against the server at ``address``; return their figures and
    the values of ``count()`` (e.g. the server's model calls) while every client measured, as a slice: from the
    moment all are measuring to the moment the first is done. The server must live until this returns."""
    for pipe in pipes:
        pipe.send(address)
    assert all(pipe.recv() == "connected" for pipe in pipes)
    for pipe in pipes:
        pipe.send("go")
    assert all(pipe.recv() == "measuring" for pipe in pipes)
    first = count()
    wait(pipes)  # the window closes when the first client is done
    window = slice(first, count())
    assert all(pipe.recv() == "done" for pipe in pipes)
    return [pipe.recv() for pipe in pipes], window
