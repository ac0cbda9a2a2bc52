"""Run a trained rsl_rl or skrl checkpoint on a suspendable task and print its episodes' length and success rate.

Without ``--checkpoint`` the expert shipped for the task (``isaaclab_suspend/policies/checkpoints/``) runs;
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

from isaaclab_suspend.policies import EpisodeOutcomes
from isaaclab_suspend.rl import load_checkpoint_policy
from isaaclab_suspend.rl.checkpoint_policy import shipped_checkpoint
from isaaclab_suspend.utils import open_env


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", default="Isaac-Cartpole-Suspendable")
    parser.add_argument("--checkpoint", default=None, help="rsl_rl or skrl checkpoint (default: the task's shipped expert)")
    parser.add_argument("--num_envs", type=int, default=16)
    parser.add_argument("--steps", type=int, default=600, help="env steps to run")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    if args.num_envs < 1 or args.steps < 1:
        parser.error("--num_envs and --steps must be >= 1")
    return args


def play(args: argparse.Namespace) -> dict:
    """Run the checkpoint for ``args.steps`` steps; returns :meth:`EpisodeOutcomes.as_dict` and the wall time."""
    checkpoint = args.checkpoint or shipped_checkpoint(args.task)
    with open_env(args.task, args.num_envs, args.device, seed=args.seed) as env:
        policy = load_checkpoint_policy(checkpoint, env, task=args.task)
        outcomes = EpisodeOutcomes(env)
        obs, _ = env.reset()
        start = time.perf_counter()
        for _ in range(args.steps):
            obs, _, terminated, truncated, _ = env.step(policy.act(obs))
            outcomes.update(terminated | truncated, ~env.suspended_mask)
        results = {"checkpoint": checkpoint, **outcomes.as_dict(), "seconds": time.perf_counter() - start}
    table = PrettyTable(["checkpoint", "episodes", "mean episode length", "success rate", "wall time (s)"])
    table.add_row([results["checkpoint"], results["episodes_scored"], f"{results['mean_episode_length']:.1f}",
                   f"{results['success_rate']:.3f}", f"{results['seconds']:.1f}"])
    print(f"\n{args.task}: {args.num_envs} envs, {args.steps} steps\n{table}")
    return results


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        play(args)
    except (FileNotFoundError, ValueError) as err:
        print(f"play.py: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
