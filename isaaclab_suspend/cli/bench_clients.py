"""The env process of the transport benchmarks: K of them run one task against one policy server, in step, so
that a server's way of serving several clients (one at a time, or batched) is measured side by side."""

from __future__ import annotations

import time
from collections.abc import Callable
from multiprocessing.connection import Connection

import torch

from ..policies import ActionChunkingPolicy, ChunkModel
from ..utils import open_env


def env_process(rank: int, pipe: Connection, task: str, num_envs: int, chunk: int, schedule: str,
                warmup_ticks: int, ticks: int, connect: Callable[[object], ChunkModel]) -> None:
    """Open ``task`` with ``num_envs`` envs (seed ``rank``), then, for each server address received on ``pipe``
    (None ends), connect a model with ``connect(address)`` and run ``schedule`` from desynchronised episodes for
    ``warmup_ticks + ticks`` chunks of ``chunk`` steps. The process says ``ready``, ``connected`` (then waits for
    ``go``, so every client starts together) and ``measuring``, and sends ``(seconds, active env-steps, model
    calls)`` of the measured ticks (calls: the model's ``calls`` counter, 0 where it has none)."""
    torch.set_num_threads(1)
    with open_env(task, num_envs, seed=rank) as env:
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
            pipe.send((time.perf_counter() - start, policy.stats["active_env_steps"] - active,
                       getattr(model, "calls", 0) - calls))
            policy.close()
            model.close()
