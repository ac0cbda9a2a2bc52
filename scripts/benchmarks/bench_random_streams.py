"""Step time of per-env random streams (``SuspendCfg.per_env_random``) against Isaac Lab's shared generator.

The noisy push-cube (noise on four policy terms, one of them delayed at random, a nudge every 0.2-0.5 s, a new
target every 0.2-0.5 s: draws on every step) runs in two processes, one per generator, built side by side with the
same seed; the parent has them time blocks of steps in turn, so load on the machine falls on both alike, and the
ratio of their median block times is the cost. The top-level torch ops of one step without resets are counted
too (``torch.profiler``; each is a kernel launch on a GPU). The load average is printed with each row. Prints a
table (paste it into docs/results.rst).

Example::

    tools/run.sh python scripts/benchmarks/bench_random_streams.py --num_envs 64 512 4096
"""

from __future__ import annotations

import argparse
import os
import time

from prettytable import PrettyTable

from isaaclab_suspend.benchmarks.paired_workers import median_in_turn, paired_workers

TASK = "Isaac-PushCube-Noisy-Suspendable"
"""The default task: push-cube with noise on every policy term, a random delay, nudges and target resampling."""


def worker(task: str, num_envs: int, per_env_random: bool, device: str, pipe) -> None:
    """Build the env, then for each number of steps received time that many steps and send the seconds per step;
    for 0, send the top-level torch ops of one step; stop on None."""
    import torch

    from isaaclab_suspend.tasks.env_factory import open_env

    with open_env(task, num_envs, device, suspend__per_env_random=per_env_random, episode_length_s=1e6) as env:
        env.reset()
        gen, width = torch.Generator().manual_seed(0), env.action_manager.total_action_dim
        pipe.send("ready")
        while (steps := pipe.recv()) is not None:
            actions = [(2.0 * torch.rand(num_envs, width, generator=gen) - 1.0).to(env.device) for _ in range(max(steps, 1))]
            if steps == 0:
                with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
                    with torch.profiler.record_function("env_step"):
                        env.step(actions[0])
                pipe.send(sum(1 for e in prof.events() if e.name.startswith("aten::")
                              and e.cpu_parent is not None and e.cpu_parent.name == "env_step"))
                continue
            start = time.perf_counter()
            for action in actions:
                env.step(action)
            if env.device != "cpu":
                torch.cuda.synchronize()
            pipe.send((time.perf_counter() - start) / steps)


def measure(task: str, num_envs: int, blocks: int, steps: int, device: str) -> tuple[float, float, int, int]:
    """Median seconds per step and ops per step, shared generator then per-env streams."""
    with paired_workers(worker, [(task, num_envs, per_env, device) for per_env in (False, True)]) as pipes:
        shared, per_env = median_in_turn(pipes, blocks, steps)
        ops = []
        for pipe in pipes:
            pipe.send(0)
            ops.append(pipe.recv())
    return shared, per_env, ops[0], ops[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", default=TASK, help="a task with noise or random events (e.g. Isaac-Reach-Franka)")
    parser.add_argument("--num_envs", type=int, nargs="+", default=[64, 512, 4096])
    parser.add_argument("--blocks", type=int, default=5, help="timed blocks per generator")
    parser.add_argument("--steps", type=int, default=20, help="steps per block")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    table = PrettyTable(["envs", "shared [ms/step]", "per-env [ms/step]", "cost", "ops shared", "ops per-env",
                         "load average"])
    for n in args.num_envs:
        shared, streams, ops_shared, ops_streams = measure(args.task, n, args.blocks, args.steps, args.device)
        load = " ".join(f"{x:.1f}" for x in os.getloadavg())
        table.add_row([n, f"{1e3 * shared:.2f}", f"{1e3 * streams:.2f}", f"{100 * (streams / shared - 1):+.1f} %",
                       ops_shared, ops_streams, load])
        print(table.rows[-1], flush=True)
    print(f"{args.task} on {args.device}, {os.cpu_count()} cores, median of {args.blocks} blocks of {args.steps} steps")
    print(table)


if __name__ == "__main__":
    main()
