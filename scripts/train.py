"""Train an RL agent (rsl_rl or skrl PPO) on a suspendable task, on the CPU.

The agent cfg is the task's registered one (``rsl_rl_cfg_entry_point`` / ``skrl_cfg_entry_point``); the
libraries print their usual console output and write TensorBoard logs and checkpoints to
``logs/<library>/<task>/<date>/``. The env is the suspendable one with suspension enabled; nothing is
suspended, so training is bit-identical to the stock ``ManagerBasedRLEnv`` (tests/test_rl_training.py).

Examples::

    tools/run.sh python scripts/train.py --task Isaac-Cartpole-Suspendable --rl_library rsl_rl
    tools/run.sh python scripts/train.py --task Isaac-PushCube-Suspendable --rl_library rsl_rl --max_iterations 150
    tools/run.sh python scripts/train.py --task Isaac-Cartpole-Suspendable --rl_library skrl --num_envs 256
    tensorboard --logdir logs
"""

from __future__ import annotations

import argparse
import sys
import time

import gymnasium as gym

from isaaclab.app.sim_launcher import launch_simulation

from isaaclab_suspend.rl import LIBRARIES, load_agent_cfg, make_log_dir, train
from isaaclab_suspend.rl.runners import agent_seed
from isaaclab_suspend.utils import make_env_cfg


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", default="Isaac-Cartpole-Suspendable")
    parser.add_argument("--rl_library", default="rsl_rl", choices=LIBRARIES)
    parser.add_argument("--num_envs", type=int, default=256, help="parallel envs (the GPU defaults are 4096)")
    parser.add_argument("--max_iterations", type=int, default=None, help="PPO updates (default: the agent cfg's)")
    parser.add_argument("--seed", type=int, default=None, help="agent and env seed (default: the agent cfg's)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--log_root", default="logs", help="runs go to <log_root>/<library>/<task>/<date>/")
    args = parser.parse_args(argv)
    if args.num_envs < 1:
        parser.error(f"--num_envs must be >= 1, got {args.num_envs}")
    if args.max_iterations is not None and args.max_iterations < 1:
        parser.error(f"--max_iterations must be >= 1, got {args.max_iterations}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        agent_cfg = load_agent_cfg(args.task, args.rl_library, args.max_iterations, args.seed, args.device)
    except ValueError as err:
        print(f"train.py: error: {err}", file=sys.stderr)
        return 2
    env_cfg = make_env_cfg(args.task, args.num_envs, args.device, seed=agent_seed(agent_cfg))
    log_dir = make_log_dir(args.rl_library, args.task, args.log_root)
    print(f"[INFO] Logging experiment in directory: {log_dir}")
    start = time.perf_counter()
    with launch_simulation(env_cfg, {}):
        env = gym.make(args.task, cfg=env_cfg)
        try:
            train(env, args.rl_library, agent_cfg, log_dir)
        except KeyboardInterrupt:
            print("\nInterrupted: the checkpoints written so far are in", log_dir)
            return 130
        finally:
            env.close()
    print(f"Training time: {time.perf_counter() - start:.1f} s. Logs and checkpoints: {log_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
