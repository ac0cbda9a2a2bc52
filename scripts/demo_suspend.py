"""Suspend and resume envs mid-episode and print what happened to them (figures, not prose).

Runs the push-cube task (a pusher and a free cube per env): half of the envs are suspended for a while,
then resumed. For each env the table shows how far its cube moved while suspended (0 for a frozen env),
how many steps it was active and suspended, and its episode length and reward.

Example::

    tools/run.sh python scripts/demo_suspend.py --num_envs 8 --steps 90
"""

from __future__ import annotations

import argparse
import sys

from prettytable import PrettyTable

from isaaclab_suspend import cli  # light: torch and Isaac Lab are imported after parsing, where they are used


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = cli.script_parser(__doc__)
    cli.add_env_args(parser, num_envs=8, seed=None, desync=False)
    cli.add_quiet_arg(parser)
    parser.add_argument("--steps", type=cli.positive_int, default=90)
    parser.add_argument("--suspend_at", type=cli.non_negative_int, default=20)
    parser.add_argument("--suspend_for", type=cli.positive_int, default=40)
    args = parser.parse_args(argv)
    cli.resolve_task(args, "Isaac-PushCube-Suspendable")
    return args


def demo(args: argparse.Namespace) -> None:
    import torch

    with cli.open_env(args) as env:
        n = env.num_envs
        chosen = torch.arange(n) % 2 == 1
        obj = env.scene[next(iter(env.scene.rigid_objects))] if env.scene.rigid_objects else None
        obs, _ = env.reset()
        active_steps = torch.zeros(n, dtype=torch.long)
        drift = torch.zeros(n)
        reward_sum = torch.zeros(n)
        frozen_pose = None
        for step in range(args.steps):
            if step == args.suspend_at:
                env.suspend_envs(chosen)
                frozen_pose = obj.data.root_pose_w.torch.clone() if obj is not None else None
            if step == args.suspend_at + args.suspend_for:
                env.resume_envs(chosen)
            active_steps += env.active_mask.long()
            # push forward, slowing down near the target
            action = torch.clamp(2.0 * obs["policy"][:, -1:], -1.0, 1.0)
            obs, rew, *_ = env.step(action)
            reward_sum += rew
            if frozen_pose is not None and env.num_suspended > 0:
                moved = (obj.data.root_pose_w.torch - frozen_pose).abs().amax(dim=1)
                drift = torch.maximum(drift, torch.where(env.suspended_mask, moved, 0.0))

        table = PrettyTable(["env", "suspended", "active steps", "suspended steps", "max cube drift while suspended [m]",
                             "episode length", "reward sum"])
        for i in range(n):
            table.add_row([i, bool(chosen[i]), int(active_steps[i]), args.steps - int(active_steps[i]),
                           f"{float(drift[i]):.3g}" if chosen[i] else "-", int(env.episode_length_buf[i]), f"{float(reward_sum[i]):.3f}"])
        print(f"\n{args.task}: {n} envs, {args.steps} steps, odd envs suspended for steps "
              f"[{args.suspend_at}, {args.suspend_at + args.suspend_for})")
        print(table)


def main(argv: list[str] | None = None) -> int:
    return cli.run(demo, parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
