"""Step time of SuspendableManagerBasedRLEnv against stock ManagerBasedRLEnv on the same env instance, torch ops
per step, and the chunking loop's throughput and where its time goes: what
``scripts/benchmarks/bench_suspend_overhead.py`` and ``scripts/benchmarks/gpu_suite.py`` measure. On a GPU each
timed block ends with a device sync, so the figures are of the work done, not of the launches."""

from __future__ import annotations

import contextlib
import statistics
import time
from collections import defaultdict
from collections.abc import Iterator

import torch

from isaaclab.envs import ManagerBasedRLEnv

from ..chunking import ActionChunkingPolicy


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


def stock_step_ms(env, blocks: int, steps: int) -> float:
    """Median ms per stock ``ManagerBasedRLEnv.step`` over ``blocks`` blocks of ``steps`` random actions, after a
    block of warm-up."""
    gen = torch.Generator().manual_seed(0)
    time_block(ManagerBasedRLEnv.step, env, random_actions(env, gen, steps))
    return 1e3 * statistics.median(time_block(ManagerBasedRLEnv.step, env, random_actions(env, gen, steps))
                                   for _ in range(blocks))


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


class PhaseClock:
    """Seconds spent in named phases of a loop, summed over a block of steps with no host sync inside it: on the
    host (``time.perf_counter``: the Python and launch time of each phase, and the waits of its own syncs) and, on
    a CUDA device, on the device's timeline between CUDA events recorded at each phase's start and end (read by
    :meth:`device_seconds` after the block's closing sync).

    The events go on torch's current stream; Warp's default stream is a blocking one, so on torch's default
    (legacy) stream they also order Warp's kernels: a phase's device seconds are its kernels' time or, where the
    device idles waiting for the host's launches, the host's. Phases may nest (a model call inside ``act``)."""

    def __init__(self, device: str | torch.device):
        self.cuda = torch.device(device).type == "cuda"
        """Whether device seconds are recorded (CUDA events)."""
        self.host: dict[str, float] = defaultdict(float)
        """Host seconds per phase."""
        self._events: list[tuple[str, torch.cuda.Event, torch.cuda.Event]] = []

    def clear(self) -> None:
        """Forget the phases timed so far (the warm-up's)."""
        self.host.clear()
        self._events.clear()

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the block as phase ``name``."""
        begin = self._record()
        start = time.perf_counter()
        try:
            yield
        finally:
            self.host[name] += time.perf_counter() - start
            if begin is not None:
                self._events.append((name, begin, self._record()))

    def timed(self, model, name: str = "model") -> TimedModel:
        """``model`` with each call timed as phase ``name``."""
        return TimedModel(model, self, name)

    def device_seconds(self) -> dict[str, float]:
        """Device seconds per phase (empty off CUDA); call after the block's closing device sync."""
        seconds = defaultdict(float)
        for name, begin, end in self._events:
            seconds[name] += begin.elapsed_time(end) / 1e3
        return seconds

    def _record(self) -> torch.cuda.Event | None:
        if not self.cuda:
            return None
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event


class TimedModel:
    """A chunk model whose calls are a phase of a :class:`PhaseClock`; the model's optional attributes of the
    :class:`~isaaclab_suspend.chunking.model.ChunkModel` contract (``observe_step``, ``accepts_prefix``,
    ``virtual_s``) pass through."""

    def __init__(self, model, clock: PhaseClock, name: str):
        self.model = model
        """The timed chunk model."""
        self._clock, self._name = clock, name

    def __call__(self, *args, **kwargs) -> torch.Tensor:
        with self._clock.phase(self._name):
            return self.model(*args, **kwargs)

    def __getattr__(self, name: str):
        return getattr(self.__dict__["model"], name)


LOOP_PHASES = ("act", "model", "env.step", "observe")
"""The phases of a chunking loop step that :func:`measure_policy` splits (``act`` holds the model's calls)."""


def measure_policy(env, model, schedule: str, chunk_length: int, steps: int, split: bool = False,
                   observation_demand: bool = False) -> dict:
    """The chunking loop (``act``, ``env.step``, ``observe``) for ``steps`` steps after one chunk of warm-up:
    loop steps, env-steps, active (not suspended) env-steps and model calls (ticks) per second (and active env-steps
    per second of this process's CPU time, which other processes on a shared machine disturb less); with
    ``observation_demand``, the cameras render only for the model's calls
    (:attr:`~isaaclab_suspend.chunking.ActionChunkingPolicyCfg.observation_demand`).

    With ``split`` (for a schedule that calls the model in ``act``, not in a worker thread), also where a loop
    step's time goes (:class:`PhaseClock`, no host sync added): ms per loop step in ``act`` without the model
    call, the model call (its mean over every step, ticks or not), ``env.step`` and ``observe``, and the rest
    (the loop itself), on the host (``host``) and, on a CUDA device, on the device's timeline (``device``)."""
    clock = PhaseClock(env.device)
    policy = ActionChunkingPolicy(clock.timed(model) if split else model, env, chunk_length=chunk_length,
                                  schedule=schedule, observation_demand=observation_demand)
    phase = clock.phase if split else lambda name: contextlib.nullcontext()
    obs, _ = env.reset()
    for step in range(chunk_length + steps):
        if step == chunk_length:
            calls, active = policy.stats["inference_calls"], policy.stats["active_env_steps"]  # syncs: before
            synchronize(env.device)
            clock.clear()
            start, cpu_start = time.perf_counter(), time.process_time()
        with phase("act"):
            actions = policy.act(obs)
        with phase("env.step"):
            obs, _, terminated, truncated, _ = env.step(actions)
        with phase("observe"):
            policy.observe(terminated | truncated)
    synchronize(env.device)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    stats = policy.stats
    ticks, active = stats["inference_calls"] - calls, stats["active_env_steps"] - active
    policy.close()
    out = {"num_envs": env.num_envs, "schedule": schedule, "chunk_length": chunk_length,
           "steps_per_s": steps / seconds, "env_steps_per_s": steps * env.num_envs / seconds,
           "active_env_steps_per_s": active / seconds, "active_env_steps_per_cpu_s": active / cpu_seconds,
           "ticks_per_s": ticks / seconds}
    if split:
        clocks = {"host": clock.host, **({"device": clock.device_seconds()} if clock.cuda else {})}
        out["split"] = {name: _split_ms(phases, seconds, steps) for name, phases in clocks.items()}
    return out


def _split_ms(phases: dict[str, float], seconds: float, steps: int) -> dict[str, float]:
    """ms per loop step of each phase (``act`` without the model's calls) and of the rest of ``seconds``."""
    ms = {name.replace(".", "_") + "_ms": 1e3 * phases[name] / steps for name in LOOP_PHASES}
    ms["act_ms"] -= ms["model_ms"]
    ms["rest_ms"] = 1e3 * seconds / steps - sum(ms.values())
    ms["loop_ms"] = 1e3 * seconds / steps
    return ms
