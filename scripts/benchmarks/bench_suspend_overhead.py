"""Step-time overhead and torch ops per step of SuspendableManagerBasedRLEnv against stock ManagerBasedRLEnv.

Both steps run on the same env instance (same task, solver, seed and state), interleaved block by block:
a block of stock ``ManagerBasedRLEnv.step`` calls with every env active, then a block of
``SuspendableManagerBasedRLEnv.step`` calls with a fraction of the envs suspended. The ratio of the
median block times is the overhead. Top-level torch ops per step (each a kernel launch on a GPU) are counted
with ``torch.profiler`` for both steps. Any task id works (``--import`` registers another package's tasks);
e.g. ``Test-Stateful-PushCube`` of tests/stateful_task.py has stateful actuators and sensors. Prints a table
(paste it into docs/results.rst).

Example::

    PYTHONPATH=$PWD:$PWD/tests tools/run.sh python scripts/benchmarks/bench_suspend_overhead.py \\
        --tasks Isaac-PushCube-Suspendable Test-Stateful-PushCube --import stateful_task --num_envs 64 512
"""

from __future__ import annotations

import argparse

from prettytable import PrettyTable

from isaaclab_suspend import cli
from isaaclab_suspend.benchmarks.step_timing import measure_overhead
from isaaclab_suspend.tasks.env_factory import import_task_modules, open_env


def measure(task: str, solver: str, num_envs: int, fractions: list[float], blocks: int, steps: int) -> list[dict]:
    with open_env(task, num_envs, overrides=[f"presets={solver}"], suspendable=True, episode_length_s=1e6) as env:
        env.reset()
        rows = [{"task": task, "solver": solver, **row} for row in measure_overhead(env, fractions, blocks, steps)]
    for row in rows:
        print(row, flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", nargs="+", default=["Isaac-Cartpole-Suspendable", "Isaac-PushCube-Suspendable"])
    parser.add_argument("--import", dest="modules", nargs="*", default=[], help="modules that register the tasks")
    parser.add_argument("--num_envs", type=cli.positive_int, nargs="+", default=[64, 512])
    parser.add_argument("--solvers", nargs="+", default=["newton_mjwarp", "newton_featherstone"])
    parser.add_argument("--fractions", type=cli.fraction, nargs="+", default=[0.0, 0.25, 0.75])
    parser.add_argument("--blocks", type=cli.positive_int, default=7, help="interleaved block pairs per configuration")
    parser.add_argument("--steps", type=cli.positive_int, default=20, help="env steps per block")
    args = parser.parse_args()
    import_task_modules(args.modules)

    rows = []
    for task in args.tasks:
        for solver in args.solvers:
            for num_envs in args.num_envs:
                rows += measure(task, solver, num_envs, args.fractions, args.blocks, args.steps)
    table = PrettyTable(["task", "solver", "num_envs", "suspended", "stock ms/step", "suspendable ms/step", "overhead",
                         "ops/step stock", "ops/step ours", "extra ops"])
    for r in rows:
        table.add_row([r["task"], r["solver"], r["num_envs"], r["suspended"], f"{r['stock_ms']:.2f}",
                       f"{r['suspendable_ms']:.2f}", f"{100 * r['overhead']:+.1f} %", f"{r['ops_stock']:.0f}",
                       f"{r['ops_ours']:.0f}", f"{r['ops_ours'] - r['ops_stock']:+.0f}"])
    print(f"\nMedian of {args.blocks} interleaved blocks of {args.steps} steps, CPU; ops: top-level torch ops of a step"
          " without resets.")
    print(table)


if __name__ == "__main__":
    main()
