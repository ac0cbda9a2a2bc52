"""Step-time overhead of SuspendableManagerBasedRLEnv against stock ManagerBasedRLEnv.

Both steps run on the same env instance (same task, solver, seed and state), interleaved block by block:
a block of stock ``ManagerBasedRLEnv.step`` calls with every env active, then a block of
``SuspendableManagerBasedRLEnv.step`` calls with a fraction of the envs suspended. The ratio of the
median block times is the overhead. Prints a table (paste it into docs/benchmarks.rst).

Example::

    tools/run.sh python scripts/benchmarks/bench_suspend_overhead.py --num_envs 64 512 --solvers newton_mjwarp newton_featherstone
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from prettytable import PrettyTable

from isaaclab.envs import ManagerBasedRLEnv

from isaaclab_suspend import cli
from isaaclab_suspend.utils import open_env


def _time_block(step, env, steps: int, gen: torch.Generator) -> float:
    start = time.perf_counter()
    for _ in range(steps):
        step(env, 2.0 * torch.rand(env.num_envs, 1, generator=gen) - 1.0)
    return (time.perf_counter() - start) / steps


def measure(task: str, solver: str, num_envs: int, fractions: list[float], blocks: int, steps: int) -> list[dict]:
    rows = []
    with open_env(task, num_envs, overrides=[f"presets={solver}"], episode_length_s=1e6) as env:
        env.reset()
        gen = torch.Generator().manual_seed(0)
        _time_block(ManagerBasedRLEnv.step, env, steps, gen)  # warm-up
        for fraction in fractions:
            mask = torch.zeros(num_envs, dtype=torch.bool)
            mask[: round(fraction * num_envs)] = True
            stock, ours = [], []
            for _ in range(blocks):
                stock.append(_time_block(ManagerBasedRLEnv.step, env, steps, gen))
                if mask.any():
                    env.suspend_envs(mask)
                ours.append(_time_block(type(env).step, env, steps, gen))
                env.resume_envs(mask)
            t_stock, t_ours = statistics.median(stock), statistics.median(ours)
            rows.append({
                "solver": solver, "num_envs": num_envs, "suspended": f"{fraction:.0%}",
                "stock_ms": 1e3 * t_stock, "suspendable_ms": 1e3 * t_ours, "overhead": t_ours / t_stock - 1.0,
            })
            print(rows[-1], flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", default="Isaac-Cartpole-Suspendable")
    parser.add_argument("--num_envs", type=cli.positive_int, nargs="+", default=[64, 512])
    parser.add_argument("--solvers", nargs="+", default=["newton_mjwarp", "newton_featherstone"])
    parser.add_argument("--fractions", type=cli.fraction, nargs="+", default=[0.0, 0.25, 0.75])
    parser.add_argument("--blocks", type=cli.positive_int, default=7, help="interleaved block pairs per configuration")
    parser.add_argument("--steps", type=cli.positive_int, default=20, help="env steps per block")
    args = parser.parse_args()

    rows = []
    for solver in args.solvers:
        for num_envs in args.num_envs:
            rows += measure(args.task, solver, num_envs, args.fractions, args.blocks, args.steps)
    table = PrettyTable(["solver", "num_envs", "suspended", "stock ms/step", "suspendable ms/step", "overhead"])
    for r in rows:
        table.add_row([r["solver"], r["num_envs"], r["suspended"], f"{r['stock_ms']:.2f}", f"{r['suspendable_ms']:.2f}",
                       f"{100 * r['overhead']:+.1f} %"])
    print(f"\nTask {args.task}, median of {args.blocks} interleaved blocks of {args.steps} steps, CPU.")
    print(table)


if __name__ == "__main__":
    main()
