"""Run a trained rsl_rl or skrl checkpoint on a suspendable task and print its episodes' length and success rate.

Without ``--checkpoint`` the expert shipped for the task (``isaaclab_suspend/rl/checkpoints/``) runs;
``--checkpoint`` takes a file written by ``scripts/train.py`` (rsl_rl ``model_<it>.pt``, skrl
``checkpoints/agent_<step>.pt``) or an actor-only file.

Examples::

    tools/run.sh python scripts/play.py --task Isaac-PushCube-Suspendable
    tools/run.sh python scripts/play.py --task Isaac-Cartpole-Suspendable \\
        --checkpoint logs/rsl_rl/Isaac-Cartpole-Suspendable/<date>/model_149.pt --num_envs 64 --steps 900
"""

from __future__ import annotations

import argparse
import sys
import time

from prettytable import PrettyTable

from isaaclab_suspend import cli  # light: torch and Isaac Lab are imported after parsing, where they are used


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = cli.script_parser(__doc__)
    cli.add_env_args(parser, desync=False)
    cli.add_quiet_arg(parser)
    parser.add_argument("--checkpoint", default=None, help="rsl_rl or skrl checkpoint (default: the task's shipped expert)")
    parser.add_argument("--steps", type=cli.positive_int, default=600, help="env steps to run")
    args = parser.parse_args(argv)
    cli.resolve_task(args)
    return args


def play(args: argparse.Namespace) -> dict:
    """Run the checkpoint for ``args.steps`` steps; returns :meth:`EpisodeOutcomes.as_dict` and the wall time."""
    from isaaclab_suspend import runs
    from isaaclab_suspend.chunking.stats import format_figure

    source = runs.ChunkModelSource(runs.RlActorModelCfg(path=args.checkpoint), args.task, args.device)  # file read
    with cli.open_env(args) as env:
        policy = source.make(env)
        start = time.perf_counter()
        figures = runs.score(env, policy, runs.start_episodes(env, None, desync=False), args.steps)
        results = {"checkpoint": source.describe_where(), **figures, "seconds": time.perf_counter() - start}
    table = PrettyTable(["checkpoint", "episodes", "mean episode length", "success rate", "wall time (s)"])
    table.add_row([results["checkpoint"], results["episodes_scored"], f"{results['mean_episode_length']:.1f}",
                   format_figure("{:.3f}", results["success_rate"]), f"{results['seconds']:.1f}"])
    print(f"\n{args.task}: {args.num_envs} envs, {args.steps} steps\n{table}")
    return results


def main(argv: list[str] | None = None) -> int:
    return cli.run(play, parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
