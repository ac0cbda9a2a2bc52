"""Env-steps/s of an arm task: Isaac Lab's stock env with its own solver setting, the stock env with MuJoCo-Warp's
``update_data_interval = 1`` (what suspension needs), and the suspendable env with none and with half of the envs
suspended; physics steps/s beside (env-steps/s x decimation x substeps). One run, side by side, on these cores;
the load average is printed with the table (the machine may be shared).

Example::

    tools/run.sh python scripts/benchmarks/bench_arms.py --task IsaacContrib-Stack-Cube-SO101-v0 --num_envs 4 16 64
"""

from __future__ import annotations

import argparse
import os
import time

import torch
from prettytable import PrettyTable

from isaaclab_suspend import cli
from isaaclab_suspend.utils import open_env, set_quiet

CONFIGS = (
    ("stock, task's interval", False, None, 0.0),
    ("stock, interval 1", False, 1, 0.0),
    ("suspendable, none suspended", True, 1, 0.0),
    ("suspendable, half suspended", True, 1, 0.5),
)
"""(label, suspendable, update_data_interval (None: the task's), fraction suspended)."""


def measure(task: str, num_envs: int, suspendable: bool, interval: int | None, fraction: float, steps: int
            ) -> tuple[float, float]:
    """Env-steps/s and physics steps/s (suspended envs count: they are stepped) over ``steps`` steps after 5
    warm-up steps."""
    attrs = {"sim__physics__solver_cfg__update_data_interval": interval} if interval is not None else {}
    with open_env(task, num_envs, suspendable=suspendable, episode_length_s=1e6, **attrs) as env:
        env.reset()
        action = torch.zeros(num_envs, env.action_manager.total_action_dim, device=env.device)
        for _ in range(5):
            env.step(action)
        if fraction:
            env.suspend_envs(torch.arange(round(fraction * num_envs)))
        start = time.perf_counter()
        for _ in range(steps):
            env.step(action)
        rate = steps * num_envs / (time.perf_counter() - start)
        substeps = env.cfg.decimation * getattr(env.cfg.sim.physics, "num_substeps", 1)
    return rate, rate * substeps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", default="IsaacContrib-Stack-Cube-SO101-v0")
    parser.add_argument("--num_envs", type=cli.positive_int, nargs="+", default=[4, 16, 64])
    parser.add_argument("--steps", type=cli.positive_int, default=20, help="timed env steps per configuration")
    args = parser.parse_args()
    set_quiet()
    table = PrettyTable(["envs", "configuration", "env-steps/s", "physics steps/s", "vs stock"])
    for num_envs in args.num_envs:
        base = None
        for label, suspendable, interval, fraction in CONFIGS:
            rate, physics = measure(args.task, num_envs, suspendable, interval, fraction, args.steps)
            base = base or rate
            table.add_row([num_envs, label, f"{rate:.1f}", f"{physics:.0f}", f"{rate / base:.2f}"])
            print(table.rows[-1], f"load average {os.getloadavg()[0]:.1f}", flush=True)
    print(f"\n{args.task}, {args.steps} timed steps per configuration, zero actions; load average (1, 5, 15 min):"
          f" {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(table)


if __name__ == "__main__":
    main()
