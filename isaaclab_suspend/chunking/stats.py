"""Figures of a chunking run: inference calls, active and suspended env-steps, wall time split, roughness."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping

import torch
from prettytable import PrettyTable

# figures shown in tables, in order, with their format
_TABLE_FIGURES: dict[str, str] = {
    "steps": "{:d}",
    "inference_calls": "{:d}",
    "calls_per_1000_steps": "{:.1f}",
    "rows_inferred": "{:d}",
    "envs_served": "{:d}",
    "mean_envs_per_call": "{:.1f}",
    "fetch_efficiency": "{:.3f}",
    "active_env_steps": "{:d}",
    "suspended_env_steps": "{:d}",
    "held_env_steps": "{:d}",
    "suspended_fraction": "{:.3f}",
    "episodes_completed": "{:d}",
    "episodes_scored": "{:d}",
    "mean_episode_length": "{:.1f}",
    "success_rate": "{:.3f}",
    "inference_s": "{:.2f}",
    "simulation_s": "{:.2f}",
    "wall_s": "{:.2f}",
    "active_env_steps_per_s": "{:.0f}",
    "overlap_bound": "{:.0f}",
    "roughness": "{:.4f}",
    "boundary_roughness": "{:.4f}",
    "within_chunk_roughness": "{:.4f}",
}


class ChunkingStats:
    """Counters of a chunking run, kept without device syncs: per-env counters on the device, call counts
    and timings on the host. Reading :meth:`as_dict` syncs once.

    A call's rows are the envs the model sees; the envs it serves are those that take the chunk (fewer than
    the rows under ``any``, which infers the full batch for a few requesting envs). The mean envs per call
    counts served envs, and the fetch efficiency is that mean over the number of envs.

    Roughness is the mean ``|a_t - a_(t-1)|`` (averaged over the action dims) over pairs of consecutive executed
    actions of an episode (steps suspended in between do not break a pair: the env's time stood still; a held
    step or the episode's end does); boundary roughness counts only the pairs whose second action is the first
    one taken from a newly served chunk, within-chunk roughness the others.

    Args:
        num_envs: Number of envs N.
        action_dim: Action dimension A.
        device: Torch device of the env.
    """

    def __init__(self, num_envs: int, action_dim: int, device: str):
        self.num_envs = num_envs
        self.steps = 0
        """Env steps taken."""
        self.inference_calls = 0
        """Model calls."""
        self.rows_inferred = 0
        """Env rows passed to the model, over all calls."""
        self.inference_s = 0.0
        """Time in model calls, emulated latency included [s]."""
        self.simulation_s = 0.0
        """Time in ``env.step`` (between :meth:`ActionChunkingPolicy.act` and ``observe``) [s]."""
        self.virtual_s = 0.0
        """Emulated latency accounted without sleeping (included in :attr:`inference_s`) [s]."""
        self.calls_per_env = torch.zeros(num_envs, dtype=torch.long, device=device)
        """Model calls that served each env a chunk. Shape: (N,)."""
        self.active_steps = torch.zeros(num_envs, dtype=torch.long, device=device)
        """Steps in which each env executed a chunk action. Shape: (N,)."""
        self.suspended_steps = torch.zeros(num_envs, dtype=torch.long, device=device)
        """Steps in which each env was suspended. Shape: (N,)."""
        self.held_steps = torch.zeros(num_envs, dtype=torch.long, device=device)
        """Steps in which each env was simulated without a chunk action (holding). Shape: (N,)."""
        self.episodes = torch.zeros(num_envs, dtype=torch.long, device=device)
        """Episodes completed by each env. Shape: (N,)."""
        self.action_change = torch.zeros(2, num_envs, dtype=torch.float64, device=device)
        """Sums of ``mean |a_t - a_(t-1)|`` over each env's counted pairs: all, at chunk boundaries. Shape: (2, N)."""
        self.action_pairs = torch.zeros(2, num_envs, dtype=torch.long, device=device)
        """Counted pairs of consecutive actions of each env: all, at chunk boundaries. Shape: (2, N)."""
        self._last_action = torch.zeros(num_envs, action_dim, device=device)
        self._continues = torch.zeros(num_envs, dtype=torch.bool, device=device)
        """Envs whose last executed action belongs to the current episode, with no held step since. Shape: (N,)."""
        self._start: float | None = None
        self._end: float | None = None

    def begin(self) -> None:
        """Start the wall clock (at the first call only)."""
        if self._start is None:
            self._start = time.perf_counter()

    def record_inference(self, num_rows: int, served: torch.Tensor, seconds: float, virtual_s: float) -> None:
        """Count a model call on ``num_rows`` rows that served the envs in ``served`` (bool, shape (N,)) and took
        ``seconds``, ``virtual_s`` of which were not slept."""
        self.inference_calls += 1
        self.rows_inferred += num_rows
        self.inference_s += seconds
        self.virtual_s += virtual_s
        self.calls_per_env += served

    def record_step(self, executing: torch.Tensor, suspended: torch.Tensor, counted: torch.Tensor | None = None,
                    actions: torch.Tensor | None = None, served: torch.Tensor | None = None) -> None:
        """Count one env step; ``executing``, ``suspended`` and ``counted`` (the envs whose step counts, e.g. not
        retired after their episode quota; None: all) are bool masks of shape (N,), ``actions`` the step's actions
        (N, A) (None: no roughness), ``served`` the envs served a new chunk this step (None: none)."""
        self.steps += 1
        self.active_steps += executing
        if counted is None:
            self.suspended_steps += suspended
            self.held_steps += ~(executing | suspended)
        else:
            self.suspended_steps += suspended & counted
            self.held_steps += ~(executing | suspended) & counted
        if actions is None:
            return
        pair = executing & self._continues
        pairs = torch.stack((pair, torch.zeros_like(pair) if served is None else pair & served))
        change = (actions - self._last_action).abs().mean(-1, dtype=torch.float64)
        self.action_change += torch.where(pairs, change, 0.0)
        self.action_pairs += pairs
        self._last_action = torch.where(executing.unsqueeze(1), actions, self._last_action)
        self._continues = executing | (self._continues & suspended)

    def record_outcome(self, sim_seconds: float, dones: torch.Tensor) -> None:
        """Count the simulation time of the last step and the episodes it completed (bool, shape (N,))."""
        self.simulation_s += sim_seconds
        self.episodes += dones
        self._continues &= ~dones
        self._end = time.perf_counter()

    def as_dict(self) -> dict[str, float | int | list[int]]:
        """All figures (one device sync). Wall time runs from the first step to the last outcome and
        includes the virtual latency. ``overlap_bound``: N / t, the useful env-steps per second if every env acted
        every step and no inference cost wall time, with t the run's mean ``env.step`` time; roughness figures are
        NaN without a pair to count."""
        active, suspended, held = (int(t.sum()) for t in (self.active_steps, self.suspended_steps, self.held_steps))
        env_steps = active + suspended + held
        wall = (self._end - self._start if self._start is not None and self._end is not None else 0.0) + self.virtual_s
        calls = self.inference_calls
        served = int(self.calls_per_env.sum())
        mean_envs = served / calls if calls else 0.0
        change, pairs = self.action_change.sum(1).tolist(), self.action_pairs.sum(1).tolist()
        within = (change[0] - change[1], pairs[0] - pairs[1])
        return {
            "steps": self.steps,
            "num_envs": self.num_envs,
            "inference_calls": calls,
            "calls_per_1000_steps": 1000.0 * calls / self.steps if self.steps else 0.0,
            "rows_inferred": self.rows_inferred,
            "envs_served": served,
            "mean_envs_per_call": mean_envs,
            "fetch_efficiency": mean_envs / self.num_envs,
            "active_env_steps": active,
            "suspended_env_steps": suspended,
            "held_env_steps": held,
            "suspended_fraction": suspended / env_steps if env_steps else 0.0,
            "episodes_completed": int(self.episodes.sum()),
            "inference_s": self.inference_s,
            "simulation_s": self.simulation_s,
            "wall_s": wall,
            "active_env_steps_per_s": active / wall if wall > 0 else 0.0,
            "overlap_bound": self.num_envs * self.steps / self.simulation_s if self.simulation_s > 0 else 0.0,
            "roughness": change[0] / pairs[0] if pairs[0] else math.nan,
            "boundary_roughness": change[1] / pairs[1] if pairs[1] else math.nan,
            "within_chunk_roughness": within[0] / within[1] if within[1] else math.nan,
            "calls_per_env": self.calls_per_env.tolist(),
        }

    def write_tensorboard(self, writer, global_step: int) -> None:
        """Write the scalar figures under ``chunking/`` to a ``torch.utils.tensorboard.SummaryWriter``."""
        for key, value in self.as_dict().items():
            if isinstance(value, (int, float)):
                writer.add_scalar(f"chunking/{key}", value, global_step)
        writer.add_histogram("chunking/calls_per_env", self.calls_per_env, global_step)


def format_figure(fmt: str, value: float | int) -> str:
    """``fmt.format(value)``, or ``n/a`` for NaN: a figure the run does not define (the success rate of a task
    without a ``success`` termination term, the mean length of no episode)."""
    return "n/a" if isinstance(value, float) and math.isnan(value) else fmt.format(value)


def stats_table(runs: Mapping[str, Mapping]) -> PrettyTable:
    """A table of figures (rows) by run (columns), e.g. ``{"any": stats, "global_clock": stats}``. Figures no
    run has are left out, those some runs lack are shown as ``-``, undefined ones (NaN) as ``n/a``."""
    table = PrettyTable(["figure", *runs])
    table.align = "r"
    table.align["figure"] = "l"
    for key, fmt in _TABLE_FIGURES.items():
        if any(key in run for run in runs.values()):
            table.add_row([key, *(format_figure(fmt, run[key]) if key in run else "-" for run in runs.values())])
    return table


def table_figures(run: Mapping) -> dict[str, str]:
    """The figures of ``run`` that :func:`stats_table` shows, in its order, as it writes them (the HTML report's
    figures read exactly as the printed table)."""
    return {key: format_figure(fmt, run[key]) for key, fmt in _TABLE_FIGURES.items() if key in run}
