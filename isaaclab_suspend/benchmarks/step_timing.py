"""Step time of SuspendableManagerBasedRLEnv against stock ManagerBasedRLEnv on the same env instance, torch ops
per step, and the chunking loop's throughput: what ``scripts/benchmarks/bench_suspend_overhead.py`` and
``scripts/benchmarks/gpu_suite.py`` measure. On a GPU each timed block ends with a device sync, so the figures
are of the work done, not of the launches."""

from __future__ import annotations

import statistics
import time

import torch

from isaaclab.envs import ManagerBasedRLEnv

from ..policies import ActionChunkingPolicy


def synchronize(device: str | torch.device) -> None:
    """Wait for the device's queued work (a no-op on the CPU)."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def random_actions(env, gen: torch.Generator, steps: int) -> list[torch.Tensor]:
    """``steps`` uniform actions in [-1, 1] from ``gen`` (a CPU generator, so every device gets the same ones), on
    the env's device. Shape of each: (num_envs, action_dim)."""
    shape = (env.num_envs, env.action_manager.total_action_dim)
    return [(2.0 * torch.rand(shape, generator=gen) - 1.0).to(env.device) for _ in range(steps)]


def time_block(step, env, actions: list[torch.Tensor]) -> float:
    """Seconds per ``step(env, action)`` over ``actions``, the device's work included."""
    synchronize(env.device)
    start = time.perf_counter()
    for action in actions:
        step(env, action)
    synchronize(env.device)
    return (time.perf_counter() - start) / len(actions)


def ops_per_step(step, env, actions: list[torch.Tensor]) -> int:
    """Top-level aten ops (ops called by other ops not counted) of the cheapest step: a step without resets."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for action in actions:
            with torch.profiler.record_function("env_step"):
                step(env, action)
    counts = {}
    for e in prof.events():
        parent = e.cpu_parent
        if e.name.startswith("aten::") and parent is not None and parent.name == "env_step":
            counts[parent.id] = counts.get(parent.id, 0) + 1
    return min(counts.values())


def _set_suspended(env, mask: torch.Tensor, suspend: bool, gen: torch.Generator) -> None:
    """Suspend (or resume) ``mask`` and take one step, which refreshes the env's host mirror."""
    if bool(mask.any()):
        (env.suspend_envs if suspend else env.resume_envs)(mask)
    type(env).step(env, random_actions(env, gen, 1)[0])


def measure_overhead(env, fractions: list[float], blocks: int, steps: int, ops: bool = True) -> list[dict]:
    """Stock ``ManagerBasedRLEnv.step`` (every env active) against ``env.step`` with each fraction of the envs
    suspended, interleaved block by block; one row per fraction: median ms per step of each, the overhead (ours /
    stock - 1) and, with ``ops``, the torch ops of a step of each."""
    gen = torch.Generator().manual_seed(0)
    stock_step, our_step = ManagerBasedRLEnv.step, type(env).step
    time_block(stock_step, env, random_actions(env, gen, steps))  # warm-up
    rows = []
    for fraction in fractions:
        mask = torch.zeros(env.num_envs, dtype=torch.bool, device=env.device)
        mask[: round(fraction * env.num_envs)] = True
        stock, ours = [], []
        for _ in range(blocks):
            stock.append(time_block(stock_step, env, random_actions(env, gen, steps)))
            _set_suspended(env, mask, True, gen)
            ours.append(time_block(our_step, env, random_actions(env, gen, steps)))
            _set_suspended(env, mask, False, gen)
        row = {"num_envs": env.num_envs, "suspended": f"{fraction:.0%}", "stock_ms": 1e3 * statistics.median(stock),
               "suspendable_ms": 1e3 * statistics.median(ours)}
        row["overhead"] = row["suspendable_ms"] / row["stock_ms"] - 1.0
        if ops:
            row["ops_stock"] = ops_per_step(stock_step, env, random_actions(env, gen, 8))
            _set_suspended(env, mask, True, gen)
            row["ops_ours"] = ops_per_step(our_step, env, random_actions(env, gen, 8))
            _set_suspended(env, mask, False, gen)
        rows.append(row)
    return rows


def measure_policy(env, model, schedule: str, chunk_length: int, steps: int) -> dict:
    """The chunking loop (``act``, ``env.step``, ``observe``) for ``steps`` steps after one chunk of warm-up:
    loop steps, env-steps and model calls (ticks) per second."""
    policy = ActionChunkingPolicy(model, env, chunk_length=chunk_length, schedule=schedule)
    obs, _ = env.reset()
    for step in range(chunk_length + steps):
        if step == chunk_length:
            synchronize(env.device)
            start, calls = time.perf_counter(), policy.stats["inference_calls"]
        actions = policy.act(obs)
        obs, _, terminated, truncated, _ = env.step(actions)
        policy.observe(terminated | truncated)
    synchronize(env.device)
    seconds = time.perf_counter() - start
    ticks = policy.stats["inference_calls"] - calls
    policy.close()
    return {"num_envs": env.num_envs, "schedule": schedule, "chunk_length": chunk_length,
            "steps_per_s": steps / seconds, "env_steps_per_s": steps * env.num_envs / seconds,
            "ticks_per_s": ticks / seconds}
