"""Chunk schedules side by side: inference calls and useful env-steps per second under emulated latency.

For every number of envs N (one env instance each) and chunk length H, every schedule runs T steps of the
same task, seed and embedded chunk model, with the model wrapped in a :class:`LatencyEmulator` (200 ms per
call by default, slept for real). Episodes start at random points (Isaac Lab's ``init_at_random_ep_len``) so
that they end at different steps, as evaluation episodes do when tasks succeed or fail at different times.

Figures per run:

* calls / 1000 steps: model calls per 1000 steps of the batched env (each step advances all N envs);
* useful env-steps/s: env-steps in which an env executed a chunk action (not suspended, not holding), over
  the wall time of the loop (simulation, inference, policy);
* ideal: ``N H / (H t_step + L(N))``, one full-batch call per H steps with every env always active, where
  ``L(N)`` is the emulated latency of a full batch and ``t_step`` the mean ``env.step`` time within the run
  ("run step"), so that useful/ideal measures what the schedule costs (waiting envs, extra calls, the
  policy's own work) whatever the speed of a shared machine at the time; "plain step" is the ``env.step``
  time with every env active and no policy, measured on the same env just before the run (median of 40
  steps): the difference shows what resets and suspended envs add to a step;
* overlap: ``N / t_step``, every env acting every step and inference costing no wall time (the bound of the
  overlapping schedules ``async`` and ``rtc``), with the same run step time;
* rough / boundary: mean ``|a_t - a_(t-1)|`` over consecutive executed actions of an episode, and the same over
  the pairs whose second action is the first of a new chunk;
* vs any: how many times fewer calls than ``any`` made in the same setting.

Example (a subset; ``--quick`` for a short check)::

    tools/run.sh python scripts/benchmarks/bench_schedules.py --chunks 8 16 32 --num_envs 16 64 --steps 320
"""

from __future__ import annotations

import argparse
import ast
import math
import shlex
import sys
import time

import torch
from prettytable import PrettyTable

from isaaclab_suspend import cli, runs
from isaaclab_suspend.chunking import SCHEDULES, ActionChunkingPolicy, LatencyCfg, LatencyEmulator
from isaaclab_suspend.tasks.embedded import make_default_model, tasks_with_chunk_model
from isaaclab_suspend.tasks.env_factory import open_env


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", default="Isaac-Cartpole-Suspendable", choices=tasks_with_chunk_model())
    parser.add_argument("--schedules", nargs="+", choices=sorted(SCHEDULES),
                        default=["any", "hold", "partial_batch", "global_clock", "auto", "async", "rtc"])
    parser.add_argument("--chunks", type=cli.positive_int, nargs="+", default=[8, 16, 32], help="chunk lengths H")
    parser.add_argument("--num_envs", type=cli.positive_int, nargs="+", default=[16, 64, 256])
    parser.add_argument("--steps", type=cli.positive_int, default=320, help="steps T per run")
    parser.add_argument("--latency", nargs="+", default=["0.2"], type=cli.latency,
                        help="emulated latencies, one table block each: '0.2', '0.02+0.0005n', 'gr1', 'droid'")
    parser.add_argument("--virtual_latency", action="store_true", help="account the latency without sleeping")
    parser.add_argument("--set", nargs="+", default=[], metavar="FIELD=VALUE",
                        help="env cfg fields to set (nested with '__'), e.g. episode_length_s=2.0"
                             " commands__target__x_range='(0.6, 0.8)'")
    parser.add_argument("--no_desync", action="store_true", help="start all episodes at step 0")
    parser.add_argument("--seed", type=cli.env_seed, default=42)
    parser.add_argument("--repeats", type=cli.positive_int, default=1,
                        help="runs per schedule, interleaved round-robin; the table shows the run with the median"
                             " useful env-steps/s and the range over the repeats")
    parser.add_argument("--quick", action="store_true", help="H = 16, N in {16, 64}, 160 steps")
    args = parser.parse_args(argv)
    if args.quick:
        args.chunks, args.num_envs, args.steps = [16], [16, 64], 160
    return args


def step_time(env, steps: int = 40) -> float:
    """Median wall time of a plain ``env.step`` with every env active and zero actions [s]."""
    actions = torch.zeros(env.num_envs, env.action_manager.total_action_dim, device=env.device)
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        env.step(actions)
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def run(env, args, schedule: str, chunk_length: int, latency: LatencyCfg) -> dict:
    """One schedule on ``env`` for ``args.steps`` steps; returns the policy's figures and the ideal bound."""
    env.reset(seed=args.seed)  # also resumes any env left suspended by the previous run
    plain_step = step_time(env)
    model = LatencyEmulator(make_default_model(args.task, chunk_length), latency)
    policy = ActionChunkingPolicy(model, env, chunk_length=chunk_length, schedule=schedule)
    for _ in runs.rollout(env, policy, runs.start_episodes(env, args.seed, not args.no_desync), args.steps):
        pass
    stats, n = policy.stats, env.num_envs
    stats["plain_step_s"] = plain_step
    stats["run_step_s"] = stats["simulation_s"] / stats["steps"]
    stats["ideal"] = n * chunk_length / (chunk_length * stats["run_step_s"] + latency.latency(n))
    return stats


def _median_run(runs: list[dict]) -> dict:
    """The run with the median useful env-steps/s (the lower middle one for an even count)."""
    return sorted(runs, key=lambda s: s["active_env_steps_per_s"])[(len(runs) - 1) // 2]


def main() -> None:
    args = parse_args()
    overrides = {field: ast.literal_eval(value) for field, value in (item.split("=", 1) for item in args.set)}
    rows = []
    for num_envs in args.num_envs:
        with open_env(args.task, num_envs, seed=args.seed, **overrides) as env:
            for chunk_length, spec in ((h, spec) for h in args.chunks for spec in args.latency):
                latency = LatencyCfg.parse(spec, virtual=args.virtual_latency)
                runs = {schedule: [] for schedule in args.schedules}
                for _ in range(args.repeats):
                    for schedule in args.schedules:
                        runs[schedule].append(stats := run(env, args, schedule, chunk_length, latency))
                        print(f"[bench] N={num_envs} H={chunk_length} L={spec} {schedule}: {stats['inference_calls']}"
                              f" calls, {stats['active_env_steps_per_s']:.0f} useful env-steps/s", flush=True)
                median = {schedule: _median_run(stats) for schedule, stats in runs.items()}
                for schedule, stats in median.items():
                    any_calls = median["any"]["inference_calls"] if "any" in median else None
                    rates = [s["active_env_steps_per_s"] for s in runs[schedule]]
                    rows.append((num_envs, chunk_length, spec, schedule, stats, any_calls, (min(rates), max(rates))))

    columns = ["N", "H", "latency", "schedule", "calls", "ceil(T/H)", "calls/1000 steps", "envs/call", "suspended",
               "held", "plain step ms", "run step ms", "useful env-steps/s", "ideal", "useful/ideal", "overlap",
               "useful/overlap", "rough", "boundary", "vs any"]
    if args.repeats > 1:
        columns.insert(columns.index("ideal"), "range")
    table = PrettyTable(columns)
    table.align = "r"
    for num_envs, chunk_length, spec, schedule, s, any_calls, (low, high) in rows:
        useful = s["active_env_steps_per_s"]
        row = [
            num_envs, chunk_length, spec, schedule, s["inference_calls"], math.ceil(args.steps / chunk_length),
            f"{s['calls_per_1000_steps']:.1f}", f"{s['mean_envs_per_call']:.1f}", f"{s['suspended_fraction']:.1%}",
            f"{s['held_env_steps'] / (num_envs * args.steps):.1%}", f"{1e3 * s['plain_step_s']:.1f}",
            f"{1e3 * s['run_step_s']:.1f}", f"{useful:.0f}", f"{s['ideal']:.0f}", f"{useful / s['ideal']:.2f}",
            f"{s['overlap_bound']:.0f}", f"{useful / s['overlap_bound']:.2f}", f"{s['roughness']:.4f}",
            f"{s['boundary_roughness']:.4f}", f"{any_calls / s['inference_calls']:.1f}x" if any_calls else "-",
        ]
        if args.repeats > 1:
            row.insert(columns.index("range"), f"{low:.0f}-{high:.0f}")
        table.add_row(row)
    mode, episodes = "virtual" if args.virtual_latency else "slept", "episodes start at random points"
    episodes = "all episodes start at step 0" if args.no_desync else episodes
    print(f"\n$ {' '.join(shlex.quote(a) for a in ['python', *sys.argv])}")
    print(f"{args.task}, embedded chunk model, T = {args.steps} steps, seed {args.seed}, latency per call in seconds"
          f" ({mode}), {episodes}{''.join(f', {item}' for item in args.set)}, CPU.")
    print(table)


if __name__ == "__main__":
    main()
