"""Record episodes of a policy on a suspendable task to an Isaac Lab HDF5 dataset (active envs only).

The recorder is :class:`~isaaclab_suspend.recording.SuspendableRecorderManager` with the terms of
:class:`~isaaclab_suspend.recording.DatasetRecorderManagerCfg` (Isaac Lab's action-state terms, plus the
pre-step states and env origins that make the replay exact, and the chunk each action came from). Suspended envs
record nothing, so with the ``global_clock`` schedule an env waiting for the next chunk adds no junk sample. A demo
starts at its reset with its full time budget (not a ``--desync`` first episode); exactly ``--episodes`` are written
(or ``--episodes_per_env`` from each env): an env whose next episode would exceed them waits suspended. Episodes
still open when the run stops (done, error or Ctrl-C) are dropped; every exported episode is already in the file.
Ctrl-C stops the run after the current step, so no export is cut in the middle; a second Ctrl-C stops it at once.

Examples::

    # the embedded push-cube chunk policy on the global clock, 100 episodes from 16 envs
    tools/run.sh python scripts/record.py --task Isaac-PushCube-Suspendable --model embedded \\
        --schedule global_clock --num_envs 16 --episodes 100 --output datasets/push_cube.hdf5

    # random actions on Cartpole, successes and failures in two files
    tools/run.sh python scripts/record.py --model random --episodes 20 --export separate
    # expert demos from an rsl_rl checkpoint (default: the task's shipped expert), successes only
    tools/run.sh python scripts/record.py --task Isaac-PushCube-Suspendable --model rl_actor \\
        --num_envs 16 --episodes 100 --desync --export succeeded --output datasets/push_cube_expert.hdf5

    # a chunk policy trained by scripts/train_chunk_policy.py as the expert (H: the checkpoint's), under hold
    tools/run.sh python scripts/record.py --task Isaac-PushCube-Suspendable \\
        --checkpoint outputs/bc/push_cube.pt --schedule hold --num_envs 16 --episodes 64 --desync

    # a chunk policy served by scripts/serve_policy.py (H: the server's), or with openpi's protocol
    tools/run.sh python scripts/record.py --remote 127.0.0.1:5555 --episodes 64 --desync
    tools/run.sh python scripts/record.py --remote openpi://127.0.0.1:8000 --model.chunk_length 16 --episodes 64
    tools/run.sh python scripts/record.py --remote gr00t://127.0.0.1:5555 --model.keys state.cartpole=policy

    # on a GPU, a dataset that replay.py retraces state for state: reproducible physics, at its cost (docs/gpu.rst)
    tools/run.sh python scripts/record.py --task Isaac-PushCube-Suspendable --model embedded --device cuda:0 \
        --num_envs 1024 --episodes 1024 --deterministic on

    # shard 1 of 4: 16 of the 64 episodes, seed + 1, datasets/cartpole-shard1of4.hdf5 (scripts/merge_shards.py)
    tools/run.sh python scripts/record.py --episodes 64 --shard 1/4 --output datasets/cartpole.hdf5
"""

from __future__ import annotations

import argparse
import os
import sys

from isaaclab_suspend import cli  # light: torch and Isaac Lab are imported after parsing, where they are used


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = cli.script_parser(__doc__)
    cli.add_env_args(parser, per_env_random=True, deterministic="off")
    cli.add_quiet_arg(parser)
    cli.add_policy_args(parser, random=True)
    cli.add_shard_args(parser)
    cli.add_episode_args(parser)
    parser.add_argument("--episodes", type=cli.positive_int, default=None,
                        help="episodes to write, exactly (successes only with --export succeeded; default 32)")
    parser.add_argument("--output", default=None, help="dataset file (default: outputs/datasets/<task>.hdf5)")
    parser.add_argument("--export", default="all", choices=cli.EXPORT_MODE_NAMES,
                        help="'all' episodes, 'succeeded' only, or succeeded and failed in 'separate' files")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing dataset file")
    parser.add_argument("--writers", type=cli.positive_int, default=1, help="writer processes (several: parts merged)")
    parser.add_argument("--max_steps", type=cli.positive_int, default=100_000, help="stop after this many steps anyway")
    args = parser.parse_args(argv)
    cli.resolve_policy(parser, args)
    args.output = os.path.abspath(args.output or os.path.join("outputs", "datasets", f"{args.task}.hdf5"))
    if not args.output.endswith(".hdf5"):
        parser.error(f"--output must end with .hdf5, got '{args.output}'")
    cli.apply_episode_args(parser, args, "episodes", 32)
    cli.apply_shard(parser, args, files=("output", "episode_log"), episodes=args.episodes is not None)
    cli.check_episode_logs(parser, args)
    from isaaclab_suspend.runs import dataset_recorder_cfg  # torch, Isaac Lab: once parsed

    try:
        recorders = dataset_recorder_cfg(args.output, export=args.export, writers=args.writers)
        args.paths = cli.check_new_datasets(recorders, args.overwrite)
    except ValueError as err:
        parser.error(str(err))
    cli.check_run_cfg(parser, cli.recording_cfg(args), args)
    args.on_interrupt = f"Interrupted: the episodes exported so far are in {args.paths}; open episodes were dropped."
    return args


def record(args: argparse.Namespace) -> None:
    from isaaclab_suspend import runs

    errors = (RuntimeError,) if args.remote else ()  # a lost server: one line; exported episodes stay in the file
    result = runs.record(cli.recording_cfg(args), args.source, cli.env_opener(*errors, quiet=args.quiet))
    if result.interrupted:
        raise KeyboardInterrupt
    cli.log_episodes(args.episode_log, result.episodes, overwrite=args.overwrite)
    if not result.finished:
        print(f"[WARN] stopped at --max_steps {args.max_steps} with {len(result.episodes)} of {result.expected}"
              " episodes run.")
    print(cli.recording_summary(args, result.written, result.steps, result.seconds, result.figures, result.finished))
    print(cli.dataset_table(cli.gather_datasets(args), result.has_success))  # torchrun: rank 0 merges the ranks'


def main(argv: list[str] | None = None) -> int:
    return cli.run(record, parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
