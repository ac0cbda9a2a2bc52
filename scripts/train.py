"""Train an RL agent (rsl_rl or skrl PPO) on a suspendable task, on the CPU (or GPUs, with ``--distributed``).

The agent cfg is the task's registered one (``rsl_rl_cfg_entry_point`` / ``skrl_cfg_entry_point``); the
libraries print their usual console output and write TensorBoard logs and checkpoints to
``logs/<library>/<task>/<date>/``. The env is the suspendable one with suspension enabled; nothing is
suspended, so training is bit-identical to the stock ``ManagerBasedRLEnv`` (tests/rl/test_rl_training.py).

Examples::

    tools/run.sh python scripts/train.py --task Isaac-Cartpole-Suspendable --rl_library rsl_rl
    tools/run.sh python scripts/train.py --task Isaac-PushCube-Suspendable --rl_library rsl_rl --max_iterations 150
    tools/run.sh python scripts/train.py --task Isaac-Cartpole-Suspendable --rl_library skrl --num_envs 256
    # 2 GPUs of each of 2 nodes (Isaac Lab's multi-GPU convention: cuda:LOCAL_RANK, seed + RANK)
    torchrun --nnodes 2 --nproc_per_node 2 --rdzv_backend c10d --rdzv_endpoint node0:29400 \
        scripts/train.py --distributed --task Isaac-PushCube-Suspendable --rl_library rsl_rl
    tensorboard --logdir logs
"""

from __future__ import annotations

import argparse
import sys
import time

from isaaclab_suspend import cli  # light: torch and Isaac Lab are imported after parsing, where they are used


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = cli.script_parser(__doc__)
    cli.add_env_args(parser, num_envs=256, seed=None, desync=False, per_env_random=False)
    cli.add_quiet_arg(parser)
    parser.add_argument("--rl_library", default="rsl_rl", choices=cli.RL_LIBRARIES)
    parser.add_argument("--max_iterations", type=cli.positive_int, default=None,
                        help="PPO updates (default: the agent cfg's)")
    parser.add_argument("--log_root", default="logs", help="runs go to <log_root>/<library>/<task>/<date>/")
    parser.add_argument("--distributed", action="store_true",
                        help="under torchrun: train on several GPUs or nodes (one process per GPU, NCCL)")
    args = parser.parse_args(argv)
    from isaaclab_suspend.rl import make_log_dir

    cli.apply_distributed_training(args)
    cli.resolve_task(args)
    try:
        args.log_dir = cli.check_writable(make_log_dir(args.rl_library, args.task, args.log_root), "--log_root")
    except ValueError as err:
        parser.error(str(err))
    args.on_interrupt = f"Interrupted: the checkpoints written so far are in {args.log_dir}"
    return args


def train_agent(args: argparse.Namespace) -> int:
    from isaaclab_suspend.rl import load_agent_cfg, train
    from isaaclab_suspend.rl.runners import agent_seed
    from isaaclab_suspend.tasks.env_factory import make_env_cfg, open_env, quieted

    with quieted(not args.verbose):  # set-up tables with --verbose only; --quiet: no per-iteration log either
        agent_cfg = load_agent_cfg(args.task, args.rl_library, args.max_iterations, args.seed, args.device, args.rank)
    rng = {"suspend__per_env_random": True} if args.per_env_random else {}
    env_cfg = make_env_cfg(args.task, args.num_envs, args.device, cli.env_overrides(args), seed=agent_seed(agent_cfg),
                           verbose=args.verbose, **rng)
    if not args.quiet:
        print(f"[INFO] Logging experiment in directory: {args.log_dir}")
    start = time.perf_counter()
    with open_env(args.task, cfg=env_cfg, verbose=args.verbose) as env, cli.user_errors():
        with quieted(args.quiet):  # the library's per-iteration log unless --quiet
            train(env, args.rl_library, agent_cfg, args.log_dir)
    print(f"Training time: {time.perf_counter() - start:.1f} s. Logs and checkpoints: {args.log_dir}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return cli.run(train_agent, parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
