"""Record episodes of a policy on a suspendable task to an Isaac Lab HDF5 dataset (active envs only).

The recorder is :class:`~isaaclab_suspend.managers.SuspendableRecorderManager` with the terms of
:class:`~isaaclab_suspend.datasets.DatasetRecorderManagerCfg` (Isaac Lab's action-state terms, plus the
pre-step states and env origins that make the replay exact). Suspended envs record nothing, so with the
``global_clock`` schedule an env waiting for the next chunk adds no junk sample. Episodes still open when
the run stops (done, error or Ctrl-C) are dropped; every exported episode is already flushed to the file.
Ctrl-C stops the run after the current step, so no export is cut in the middle; a second Ctrl-C stops it at once.

Examples::

    # the embedded push-cube chunk policy on the global clock, 100 episodes from 16 envs
    tools/run.sh python scripts/record.py --task Isaac-PushCube-Suspendable --policy chunk \\
        --schedule global_clock --num_envs 16 --episodes 100 --output datasets/push_cube.hdf5

    # random actions on Cartpole, successes and failures in two files
    tools/run.sh python scripts/record.py --policy random --episodes 20 --export separate

    # expert demos from an rsl_rl checkpoint (default: the task's shipped expert), successes only
    tools/run.sh python scripts/record.py --task Isaac-PushCube-Suspendable --policy checkpoint \\
        --num_envs 16 --episodes 100 --desync --export succeeded --output datasets/push_cube_expert.hdf5

    # a chunk policy trained by scripts/train_chunk_policy.py as the expert (H: the checkpoint's), under hold
    tools/run.sh python scripts/record.py --task Isaac-PushCube-Suspendable --policy bc \\
        --checkpoint outputs/bc/push_cube.pt --schedule hold --num_envs 16 --episodes 64 --desync

    # a chunk policy served by scripts/serve_policy.py (H: the server's), or with openpi's protocol
    tools/run.sh python scripts/record.py --policy remote --remote 127.0.0.1:5555 --episodes 64 --desync
    tools/run.sh python scripts/record.py --policy remote --remote openpi://127.0.0.1:8000 --episodes 64

    # shard 1 of 4: 16 of the 64 episodes, seed + 1, datasets/cartpole-shard1of4.hdf5 (scripts/merge_shards.py)
    tools/run.sh python scripts/record.py --episodes 64 --shard 1/4 --output datasets/cartpole.hdf5
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time

import h5py
import torch
from prettytable import PrettyTable
from tqdm import tqdm

from isaaclab.managers import DatasetExportMode

from isaaclab_suspend.datasets import DatasetRecorderManagerCfg
from isaaclab_suspend.learning import load_chunk_policy
from isaaclab_suspend.policies import (
    SCHEDULES,
    ActionChunkingPolicy,
    add_openpi_arguments,
    connect_remote,
    parse_key_pairs,
)
from isaaclab_suspend.policies.embedded import DEFAULT_MODELS, make_default_model
from isaaclab_suspend.rl import load_checkpoint_policy
from isaaclab_suspend.rl.checkpoint_policy import shipped_checkpoint
from isaaclab_suspend.shards import Shard
from isaaclab_suspend.utils import StopAfterStep, open_env

EXPORT_MODES = {
    "all": DatasetExportMode.EXPORT_ALL,
    "succeeded": DatasetExportMode.EXPORT_SUCCEEDED_ONLY,
    "separate": DatasetExportMode.EXPORT_SUCCEEDED_FAILED_IN_SEPARATE_FILES,
}
"""``--export`` choices: Isaac Lab's export modes."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", default="Isaac-Cartpole-Suspendable", choices=sorted(DEFAULT_MODELS))
    parser.add_argument("--num_envs", type=int, default=16)
    parser.add_argument("--episodes", type=int, default=32,
                        help="episodes to write (successes only with --export succeeded)")
    parser.add_argument("--policy", default="chunk", choices=("chunk", "checkpoint", "bc", "remote", "random"),
                        help="'chunk': the task's embedded chunk model run by ActionChunkingPolicy; 'checkpoint': an"
                             " rsl_rl or skrl checkpoint as a chunk model with H = 1; 'bc': a chunk policy checkpoint of"
                             " scripts/train_chunk_policy.py run by ActionChunkingPolicy with its H; 'remote': the"
                             " chunk policy served at --remote, with its H; 'random': uniform actions in [-1, 1]")
    parser.add_argument("--checkpoint", default=None,
                        help="--policy checkpoint: rsl_rl or skrl checkpoint (default: the task's shipped expert);"
                             " --policy bc: chunk policy checkpoint (required)")
    parser.add_argument("--remote", default=None, metavar="HOST:PORT",
                        help="--policy remote: address of a scripts/serve_policy.py server, or openpi://HOST:PORT of"
                             " an openpi server (required)")
    add_openpi_arguments(parser)
    parser.add_argument("--shard", default="0/1", metavar="I/K",
                        help="record shard I of K: its part of --episodes, seed + I, <stem>-shardIofK.hdf5 (merge:"
                             " scripts/merge_shards.py)")
    parser.add_argument("--schedule", default="global_clock", choices=sorted(SCHEDULES), help="chunk schedule")
    parser.add_argument("--chunk", type=int, default=None,
                        help="actions per chunk H (default 16; --policy bc or remote: the policy's, which it must equal)")
    parser.add_argument("--desync", action="store_true",
                        help="start every env at a random point of its episode, so episodes end at different steps")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--output", default=None, help="dataset file (default: outputs/datasets/<task>.hdf5)")
    parser.add_argument("--export", default="all", choices=sorted(EXPORT_MODES),
                        help="'all' episodes, 'succeeded' only, or succeeded and failed in 'separate' files")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing dataset file")
    parser.add_argument("--max_steps", type=int, default=100_000, help="stop after this many steps in any case")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    args.model = None
    try:
        args.shard = Shard.parse(args.shard)
        keys = parse_key_pairs(args.openpi_keys or ())
    except ValueError as err:
        parser.error(str(err))
    if 0 < args.episodes < args.shard.count:
        parser.error(f"--episodes {args.episodes} leaves shard {args.shard.index}/{args.shard.count} no episode:"
                     " record at least one episode per shard")
    args.seed, args.episodes = args.shard.seed(args.seed), args.shard.episodes(args.episodes)
    if args.policy == "bc":
        if args.checkpoint is None:
            parser.error("--policy bc needs --checkpoint (a chunk policy checkpoint of scripts/train_chunk_policy.py)")
        try:
            args.model = load_chunk_policy(args.checkpoint, args.device)
        except (FileNotFoundError, ValueError) as err:
            parser.error(str(err))
    if args.policy == "remote":
        if args.remote is None:
            parser.error("--policy remote needs --remote HOST:PORT (a server of scripts/serve_policy.py)")
        try:
            args.model = connect_remote(args.remote, args.chunk, keys, args.prompt)
        except (ValueError, ConnectionError, TimeoutError, RuntimeError) as err:
            parser.error(str(err))
    elif args.remote is not None:
        parser.error("--remote needs --policy remote")
    if args.model is not None:
        if args.chunk is not None and args.chunk != args.model.chunk_length:
            parser.error(f"--chunk {args.chunk}: the chunk policy '{args.checkpoint or args.remote}' plans"
                         f" {args.model.chunk_length} actions per chunk")
        args.chunk = args.model.chunk_length
    args.chunk = 16 if args.chunk is None else args.chunk
    if args.num_envs < 1 or args.episodes < 1 or args.chunk < 1:
        parser.error("--num_envs, --episodes and --chunk must be positive")
    if args.policy == "checkpoint":
        args.checkpoint = args.checkpoint or shipped_checkpoint(args.task)
        if not os.path.isfile(args.checkpoint):
            parser.error(f"checkpoint file not found: '{args.checkpoint}'")
    elif args.checkpoint is not None and args.policy != "bc":
        parser.error("--checkpoint needs --policy checkpoint or bc")
    args.output = os.path.abspath(args.shard.path(args.output or os.path.join("outputs", "datasets", f"{args.task}.hdf5")))
    if not args.output.endswith(".hdf5"):
        parser.error(f"--output must end with .hdf5, got '{args.output}'")
    for path in output_paths(args):
        if os.path.isdir(path):
            parser.error(f"'{path}' is a directory")
        if os.path.exists(path) and not args.overwrite:
            parser.error(f"'{path}' exists: pass --overwrite to replace it")
    return args


def output_paths(args: argparse.Namespace) -> list[str]:
    """The dataset file, and the failed-episode file with ``--export separate`` (named as Isaac Lab names it)."""
    paths = [args.output]
    if args.export == "separate":
        paths.append(args.output[: -len(".hdf5")] + "_failed.hdf5")
    return paths


def check_space(args: argparse.Namespace, env) -> None:
    """Exit with a clear message if the requested episodes may not fit on the disk (uncompressed bound)."""
    bytes_per_episode = env.recorder_manager.buffers.bytes_per_step * env.max_episode_length + 8192
    needed_mb = args.episodes * bytes_per_episode / 2**20
    free_mb = shutil.disk_usage(os.path.dirname(args.output)).free / 2**20
    if needed_mb > free_mb:
        raise OSError(
            f"{args.episodes} episodes of up to {env.max_episode_length} steps may need {needed_mb:.0f} MiB"
            f" (uncompressed), but only {free_mb:.0f} MiB are free for '{args.output}'."
        )


def file_summary(path: str) -> list:
    """Episodes, successes, samples and size of one dataset file."""
    with h5py.File(path, "r") as f:
        data = f["data"]
        successes = sum(bool(data[name].attrs.get("success", False)) for name in data)
        return [path, len(data), successes, int(data.attrs["total"]), f"{os.path.getsize(path) / 2**20:.2f}"]


def record(args: argparse.Namespace) -> None:
    mode = EXPORT_MODES[args.export]
    recorders = DatasetRecorderManagerCfg(
        dataset_export_dir_path=os.path.dirname(args.output),
        dataset_filename=os.path.basename(args.output)[: -len(".hdf5")],
        dataset_export_mode=mode,
    )
    start = time.perf_counter()
    steps = 0
    with open_env(args.task, args.num_envs, args.device, seed=args.seed, recorders=recorders) as env:
        manager = env.recorder_manager
        if args.policy == "checkpoint":
            expert = load_checkpoint_policy(args.checkpoint, env, task=args.task)
            policy = ActionChunkingPolicy(expert, env, chunk_length=expert.chunk_length, schedule=args.schedule)
        elif args.policy in ("bc", "remote"):
            args.model.check_env(env)
            policy = ActionChunkingPolicy(args.model, env, chunk_length=args.chunk, schedule=args.schedule)
        elif args.policy == "chunk":
            policy = ActionChunkingPolicy(make_default_model(args.task, args.chunk), env, chunk_length=args.chunk,
                                          schedule=args.schedule)
        generator = torch.Generator(device=env.device).manual_seed(args.seed)
        obs, _ = env.reset(seed=args.seed)
        if args.desync:
            env.episode_length_buf[:] = torch.randint(
                0, int(env.max_episode_length), (env.num_envs,), generator=generator, device=env.device
            )

        def written() -> int:
            if mode == DatasetExportMode.EXPORT_SUCCEEDED_ONLY:
                return manager.exported_successful_episode_count
            return manager.exported_successful_episode_count + manager.exported_failed_episode_count

        with tqdm(total=args.episodes, desc="episodes", unit="ep") as progress, StopAfterStep() as stop:
            while written() < args.episodes and steps < args.max_steps and not stop.requested:
                if args.policy != "random":
                    actions = policy.act(obs)
                else:
                    actions = 2.0 * torch.rand(env.num_envs, env.action_manager.total_action_dim,
                                               generator=generator, device=env.device) - 1.0
                obs, _, terminated, truncated, _ = env.step(actions)
                if args.policy != "random":
                    policy.observe(terminated | truncated)
                steps += 1
                if steps == 1:
                    check_space(args, env)
                progress.update(min(written(), args.episodes) - progress.n)
    if stop.requested:
        raise KeyboardInterrupt
    seconds = time.perf_counter() - start
    if written() < args.episodes:
        print(f"[WARN] stopped at --max_steps {args.max_steps} with {written()} of {args.episodes} episodes written.")
    table = PrettyTable(["file", "episodes", "successes", "samples", "size [MiB]"])
    for path in output_paths(args):
        table.add_row(file_summary(path))
    table.align["file"] = "l"
    policy_name = {"chunk": f"chunk ({args.schedule}, H = {args.chunk})", "random": "random",
                   "checkpoint": f"checkpoint {args.checkpoint} (H = 1)",
                   "bc": f"chunk policy {args.checkpoint} ({args.schedule}, H = {args.chunk})",
                   "remote": f"remote policy {args.remote} ({args.schedule}, H = {args.chunk})"}[args.policy]
    print(f"\n{args.task}: {args.num_envs} envs, policy {policy_name}, {steps} steps in {seconds:.1f} s"
          f" ({steps * args.num_envs / max(seconds, 1e-9):.0f} env-steps/s). {written()} episodes written"
          f" ({args.episodes} requested; episodes ending in the same step are all kept), open ones dropped.")
    print(table)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        record(args)
    except KeyboardInterrupt:
        print(f"\nInterrupted: the episodes exported so far are in {output_paths(args)}; open episodes were dropped.")
        return 130
    except (OSError, ValueError) as err:
        print(f"record.py: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
