"""Step time of per-env random streams (``SuspendCfg.per_env_random``) against Isaac Lab's shared generator.

The noisy push-cube (noise on four policy terms, one of them delayed at random, a nudge every 0.2-0.5 s, a new
target every 0.5-1 s: draws on every step) is built with each generator in turn, per env count; after a warm-up,
blocks of steps with random actions are timed and the median block gives the step time. The machine's load
average is printed with each row (the figures are only as quiet as the machine). Prints a table (paste it into
docs/benchmarks.rst).

Example::

    tools/run.sh python scripts/benchmarks/bench_random_streams.py --num_envs 64 512 4096
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch
from prettytable import PrettyTable

from isaaclab_suspend import cli
from isaaclab_suspend.utils import open_env, set_quiet

TASK = "Isaac-PushCube-Noisy-Suspendable"


def step_time(num_envs: int, per_env_random: bool, blocks: int, steps: int, device: str) -> float:
    """Median seconds per step over ``blocks`` blocks of ``steps`` steps."""
    with open_env(TASK, num_envs, device, suspend__per_env_random=per_env_random, episode_length_s=1e6) as env:
        env.reset()
        gen = torch.Generator().manual_seed(0)
        times = []
        for block in range(blocks + 1):  # the first block warms up
            actions = [2.0 * torch.rand(num_envs, 1, generator=gen) - 1.0 for _ in range(steps)]
            actions = [a.to(env.device) for a in actions]
            start = time.perf_counter()
            for action in actions:
                env.step(action)
            if env.device != "cpu":
                torch.cuda.synchronize()
            if block:
                times.append((time.perf_counter() - start) / steps)
        return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--num_envs", type=cli.positive_int, nargs="+", default=[64, 512, 4096])
    parser.add_argument("--blocks", type=cli.positive_int, default=3)
    parser.add_argument("--steps", type=cli.positive_int, default=20, help="steps per block")
    parser.add_argument("--device", type=cli.device, default="cpu")
    args = parser.parse_args()
    set_quiet(True)
    table = PrettyTable(["envs", "shared generator [ms/step]", "per-env streams [ms/step]", "cost", "load average"])
    for n in args.num_envs:
        shared = step_time(n, False, args.blocks, args.steps, args.device)
        streams = step_time(n, True, args.blocks, args.steps, args.device)
        load = " ".join(f"{x:.1f}" for x in os.getloadavg())
        table.add_row([n, f"{1e3 * shared:.2f}", f"{1e3 * streams:.2f}", f"{100 * (streams / shared - 1):+.1f} %", load])
        print(table.rows[-1], flush=True)
    print(f"{TASK} on {args.device}, {os.cpu_count()} cores, median of {args.blocks} blocks of {args.steps} steps")
    print(table)


if __name__ == "__main__":
    main()
