"""What push-cube's success rate means: baselines that must not succeed beside the planner that should.

The task's success is the cube at rest (slower than 2 cm/s) within 3 cm of its target. Doing nothing, pushing all
the time (a constant action) and uniform random actions in [-1, 1] run on the same env and seed as the embedded
planner (``global_clock``, H = 16); each scores the episodes that start and end in ``--steps`` steps. The figures
beside every push-cube success rate in the docs come from here.

Example::

    tools/run.sh python scripts/benchmarks/bench_baselines.py --num_envs 16 --steps 900
"""

from __future__ import annotations

import argparse
import time

from prettytable import PrettyTable

from isaaclab_suspend import cli  # light: torch and Isaac Lab are imported after parsing

TASK = "Isaac-PushCube-Suspendable"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--num_envs", type=cli.positive_int, default=16)
    parser.add_argument("--steps", type=cli.positive_int, default=900, help="env steps per policy")
    parser.add_argument("--seed", type=cli.env_seed, default=0)
    args = parser.parse_args(argv)
    import torch

    from isaaclab_suspend import runs
    from isaaclab_suspend.chunking import ActionChunkingPolicy
    from isaaclab_suspend.tasks.embedded import make_default_model
    from isaaclab_suspend.chunking.stats import format_figure
    from isaaclab_suspend.tasks.env_factory import open_env

    table = PrettyTable(["policy", "episodes scored", "success rate", "mean episode length", "wall time (s)"])
    with open_env(TASK, args.num_envs) as env:
        policies = {
            "zero (do nothing)": lambda: runs.ConstantPolicy(env, 0.0),
            "constant +1 (push all the time)": lambda: runs.ConstantPolicy(env, 1.0),
            "constant +0.3 (push gently)": lambda: runs.ConstantPolicy(env, 0.3),
            "random in [-1, 1]": lambda: runs.RandomPolicy(env, torch.Generator(env.device).manual_seed(args.seed)),
            "embedded planner (global_clock)": lambda: ActionChunkingPolicy(
                make_default_model(TASK, 16), env, chunk_length=16, schedule="global_clock"),
        }
        for name, make in policies.items():
            start = time.perf_counter()
            figures = runs.score(env, make(), runs.start_episodes(env, args.seed, desync=False), args.steps)
            table.add_row([name, figures["episodes_scored"], format_figure("{:.3f}", figures["success_rate"]),
                           format_figure("{:.1f}", figures["mean_episode_length"]),
                           f"{time.perf_counter() - start:.1f}"])
    print(f"{TASK}: {args.num_envs} envs, {args.steps} steps per policy, seed {args.seed}, CPU\n{table}")


if __name__ == "__main__":
    main()
