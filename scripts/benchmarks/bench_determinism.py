"""Step time with Isaac Lab 3.0's reproducible physics (``--deterministic on``) against without it.

Each task runs in two processes, one with ``PhysicsCfg.deterministic`` off and one with it on (the contact
self-check runs first in the second, as in every script), built side by side with the same seed; the parent has
them time blocks of the stock ``ManagerBasedRLEnv.step`` (random actions, episodes that do not end) in turn, so
load on the machine falls on both alike, and the ratio of their median block times is the cost. Prints a table
(paste it into docs/results.rst; a GPU's figures come from the GPU suite's ``determinism`` rows).

Example::

    tools/run.sh python scripts/benchmarks/bench_determinism.py --num_envs 16 64
"""

from __future__ import annotations

import argparse
import os

from prettytable import PrettyTable

from isaaclab_suspend.benchmarks.paired_workers import median_in_turn, paired_workers

TASKS = ("Isaac-PushCube-Suspendable", "IsaacContrib-Stack-Cube-SO101-Suspendable")
"""Push-cube and the SO-101 stack (MuJoCo's narrow phase and Newton's collision pipeline)."""


def worker(task: str, num_envs: int, deterministic: str, device: str, pipe) -> None:
    """Build the env, then for each number of steps received time a block of that many stock steps and send the
    seconds per step; stop on None."""
    import torch
    from isaaclab.envs import ManagerBasedRLEnv

    from isaaclab_suspend.benchmarks.step_timing import random_actions, time_block
    from isaaclab_suspend.tasks.env_factory import open_env

    with open_env(task, num_envs, device, suspendable=True, episode_length_s=1e6, deterministic=deterministic) as env:
        env.reset()
        gen = torch.Generator().manual_seed(0)
        pipe.send("ready")
        while (steps := pipe.recv()) is not None:
            pipe.send(time_block(ManagerBasedRLEnv.step, env, random_actions(env, gen, steps)))


def measure(task: str, num_envs: int, blocks: int, steps: int, device: str) -> tuple[float, float]:
    """Median seconds per step, reproducible physics off then on."""
    with paired_workers(worker, [(task, num_envs, mode, device) for mode in ("off", "on")]) as pipes:
        off, on = median_in_turn(pipes, blocks, steps)
    return off, on


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", nargs="+", default=list(TASKS))
    parser.add_argument("--num_envs", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--blocks", type=int, default=5, help="timed blocks per mode")
    parser.add_argument("--steps", type=int, default=20, help="steps per block")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    table = PrettyTable(["task", "envs", "off [ms/step]", "on [ms/step]", "on / off", "load average"])
    for task in args.tasks:
        for n in args.num_envs:
            off, on = measure(task, n, args.blocks, args.steps, args.device)
            load = " ".join(f"{x:.1f}" for x in os.getloadavg())
            table.add_row([task, n, f"{1e3 * off:.2f}", f"{1e3 * on:.2f}", f"{on / off:.3f}", load])
            print(table.rows[-1], flush=True)
    print(f"on {args.device}, {os.cpu_count()} cores, median of {args.blocks} blocks of {args.steps} steps")
    print(table)


if __name__ == "__main__":
    main()
