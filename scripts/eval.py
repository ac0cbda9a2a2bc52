"""Evaluate a chunk policy on a suspendable task under one or several chunk schedules, side by side.

Each schedule runs on a freshly created env with the same seed and the task's embedded chunk model
(Cartpole: LQR plans; push-cube: scripted PD plans), or with ``--checkpoint`` a chunk policy trained by
``scripts/train_chunk_policy.py``. Prints a table of figures per schedule (inference calls, episodes, their
mean length and success rate, ...), saves a PNG timeline of the first envs (active / holding / suspended, resets, chunks received, model calls) and, with
``--record``, the completed episodes as a replayable HDF5 dataset of the active env-steps.

Examples::

    # the embedded default: Cartpole + LQR chunks, the naive trigger against the global clock
    tools/run.sh python scripts/eval.py --compare any,global_clock --desync --latency gr1

    tools/run.sh python scripts/eval.py --task Isaac-PushCube-Suspendable --schedule auto --chunk 16 \\
        --num_envs 32 --steps 600 --latency 0.02+0.001n --virtual_latency

    # a behaviour-cloned chunk policy (task and H from the checkpoint) under every schedule
    tools/run.sh python scripts/eval.py --checkpoint outputs/bc/push_cube.pt \
        --compare any,hold,partial_batch,global_clock,auto --desync

    # a policy served by scripts/serve_policy.py (task and H from the server)
    tools/run.sh python scripts/eval.py --remote 127.0.0.1:5555 --compare global_clock,async --desync

    # a policy served with openpi's protocol (openpi's serve_policy.py or ours with --protocol openpi)
    tools/run.sh python scripts/eval.py --remote openpi://127.0.0.1:8000 --chunk 16 \
        --openpi_keys observation/state=policy --prompt "balance the pole"

    # shard 2 of 4 (seed + 2, files <stem>-shard2of4.*); scripts/merge_shards.py merges the shards' results
    tools/run.sh python scripts/eval.py --remote 127.0.0.1:5555 --shard 2/4 --results outputs/eval.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch
from tqdm import tqdm

from isaaclab_suspend.datasets import DatasetRecorderManagerCfg
from isaaclab_suspend.policies import (
    AGGREGATORS,
    DEFAULT_MODELS,
    SCHEDULES,
    ActionChunkingPolicy,
    ChunkTimeline,
    EpisodeOutcomes,
    LatencyCfg,
    LatencyEmulator,
    add_openpi_arguments,
    connect_remote,
    make_default_model,
    parse_key_pairs,
    plot_timelines,
    stats_table,
)
from isaaclab_suspend.learning import load_chunk_policy
from isaaclab_suspend.shards import Shard
from isaaclab_suspend.utils import open_env


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", default=None, choices=sorted(DEFAULT_MODELS),
                        help="task (default: the checkpoint's, else Isaac-Cartpole-Suspendable)")
    parser.add_argument("--checkpoint", default=None,
                        help="chunk policy checkpoint of scripts/train_chunk_policy.py (default: the embedded model)")
    parser.add_argument("--remote", default=None, metavar="HOST:PORT",
                        help="a chunk policy served by scripts/serve_policy.py, or openpi://HOST:PORT by an openpi"
                             " server (default: the embedded model)")
    add_openpi_arguments(parser)
    parser.add_argument("--shard", default="0/1", metavar="I/K",
                        help="run shard I of K: seed + I, files <stem>-shardIofK.* (merge: scripts/merge_shards.py)")
    parser.add_argument("--results", default=None, help="JSON file of the figures per schedule")
    parser.add_argument("--schedule", default="global_clock", choices=sorted(SCHEDULES))
    parser.add_argument("--compare", default=None,
                        help="comma-separated schedules to run one after the other (overrides --schedule)")
    parser.add_argument("--chunk", type=int, default=None, help="actions per chunk H (default: the checkpoint's, else 16)")
    parser.add_argument("--aggregator", default="replace", choices=sorted(AGGREGATORS))
    parser.add_argument("--refill_threshold", type=float, default=0.0,
                        help="any/partial_batch: request a chunk at <= g*H actions left")
    parser.add_argument("--num_envs", type=int, default=16)
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--desync", action="store_true",
                        help="start every env at a random point of its episode (Isaac Lab's init_at_random_ep_len),"
                             " so episodes end at different steps, as when tasks succeed or fail at different times")
    parser.add_argument("--latency", default=None,
                        help="emulated inference latency: '0.2', '0.05+0.002n', 'gr1' or 'droid'")
    parser.add_argument("--virtual_latency", action="store_true", help="account the latency without sleeping")
    parser.add_argument("--timeline", default="outputs/chunking/timeline.png", help="PNG path ('' for none)")
    parser.add_argument("--timeline_envs", type=int, default=16, help="envs shown in the timeline")
    parser.add_argument("--log_dir", default=None, help="TensorBoard directory (one sub-directory per schedule)")
    parser.add_argument("--record", default=None,
                        help="HDF5 file of the completed episodes, active env-steps only (one file per schedule"
                             " with --compare: <stem>_<schedule>.hdf5)")
    args = parser.parse_args()
    args.schedules = args.compare.split(",") if args.compare else [args.schedule]
    unknown = [s for s in args.schedules if s not in SCHEDULES]
    if unknown:
        parser.error(f"unknown schedules {unknown}; choose from {sorted(SCHEDULES)}")
    args.model = None
    try:
        args.shard = Shard.parse(args.shard)
        keys = parse_key_pairs(args.openpi_keys or ())
    except ValueError as err:
        parser.error(str(err))
    args.seed = args.shard.seed(args.seed)
    for name in ("record", "results", "timeline"):
        if getattr(args, name):
            setattr(args, name, args.shard.path(getattr(args, name)))
    if args.checkpoint and args.remote:
        parser.error("--checkpoint and --remote both name the policy: pass one (serve the checkpoint remotely with"
                     " scripts/serve_policy.py --checkpoint)")
    if args.remote:
        try:
            args.model = connect_remote(args.remote, args.chunk, keys, args.prompt)
        except (ValueError, ConnectionError, TimeoutError, RuntimeError) as err:
            parser.error(str(err))
        args.task = args.task or args.model.metadata.get("task")
        if args.chunk is not None and args.chunk != args.model.chunk_length:
            parser.error(f"--chunk {args.chunk}: the served policy plans {args.model.chunk_length} actions")
        args.chunk = args.model.chunk_length
    if args.checkpoint:
        try:
            args.model = load_chunk_policy(args.checkpoint)
        except (FileNotFoundError, ValueError) as err:
            parser.error(str(err))
        args.task = args.task or args.model.task
        if args.chunk is not None and args.chunk != args.model.chunk_length:
            parser.error(f"--chunk {args.chunk}: the checkpoint's policy plans {args.model.chunk_length} actions")
        args.chunk = args.model.chunk_length
    args.task = args.task or "Isaac-Cartpole-Suspendable"
    args.chunk = args.chunk or 16
    return args


def recorder_cfg(path: str, schedule: str, several: bool) -> DatasetRecorderManagerCfg:
    """Recorder of replayable HDF5 episodes (active env-steps only) at ``path``; with several schedules, one
    file per schedule, ``<stem>_<schedule>.hdf5``."""
    directory, name = os.path.split(os.path.abspath(path))
    stem = name[: -len(".hdf5")] if name.endswith(".hdf5") else name
    return DatasetRecorderManagerCfg(dataset_export_dir_path=directory,
                                     dataset_filename=f"{stem}_{schedule}" if several else stem)


def run(args: argparse.Namespace, schedule: str) -> tuple[dict, ChunkTimeline]:
    """Run ``schedule`` on a fresh env; returns its figures and the timeline of its first envs."""
    recording = {"recorders": recorder_cfg(args.record, schedule, len(args.schedules) > 1)} if args.record else {}
    with open_env(args.task, args.num_envs, seed=args.seed, **recording) as env:
        if args.model is not None:
            try:
                args.model.check_env(env)
            except ValueError as err:  # another task's policy, or other dims: say so instead of a traceback
                print(f"eval.py: error: {err}", file=sys.stderr)
                sys.exit(2)
            model = args.model
        else:
            model = make_default_model(args.task, args.chunk)
        if args.latency:
            model = LatencyEmulator(model, LatencyCfg.parse(args.latency, virtual=args.virtual_latency))
        log_dir = os.path.join(args.log_dir, schedule) if args.log_dir else None
        policy = ActionChunkingPolicy(
            model, env, chunk_length=args.chunk, schedule=schedule, aggregator=args.aggregator,
            refill_threshold=args.refill_threshold, log_dir=log_dir,
        )
        timeline = ChunkTimeline(min(args.timeline_envs, env.num_envs))
        outcomes = EpisodeOutcomes(env, score_first=not args.desync)
        obs, _ = env.reset(seed=args.seed)
        if args.desync:
            generator = torch.Generator().manual_seed(args.seed)
            start = torch.randint(0, int(env.max_episode_length), (env.num_envs,), generator=generator)
            env.episode_length_buf[:] = start.to(env.device)
        progress = tqdm(range(args.steps), desc=f"{schedule:>13}", unit="step")
        for step in progress:
            actions = policy.act(obs)
            obs, _, terminated, truncated, _ = env.step(actions)
            dones = terminated | truncated
            policy.observe(dones)
            timeline.record(policy.last_step, dones)
            outcomes.update(dones, ~policy.last_step.suspended)
            if step % 20 == 0:
                progress.set_postfix(calls=policy.stats_counters.inference_calls)
        policy.close()
        return {**policy.stats, **outcomes.as_dict()}, timeline


def main() -> int:
    args = parse_args()
    results, timelines = {}, {}
    for schedule in args.schedules:
        try:
            results[schedule], timelines[schedule] = run(args, schedule)
        except (ConnectionError, TimeoutError, RuntimeError) as err:
            if not args.remote:
                raise
            print(f"eval.py: error: {err}", file=sys.stderr)  # episodes recorded so far are already in the file
            return 2
    latency = f", latency {args.latency}{' (virtual)' if args.virtual_latency else ''}" if args.latency else ""
    model = (f", chunk policy {args.checkpoint}" if args.checkpoint else f", remote policy {args.remote}"
             if args.remote else ", embedded model")
    shard = f", shard {args.shard.index}/{args.shard.count}" if args.shard.count > 1 else ""
    header = (f"{args.task}{model}: {args.num_envs} envs, {args.steps} steps, H = {args.chunk}, seed {args.seed}"
              f"{shard}{', desynchronised episodes' if args.desync else ''}{latency}")
    print(f"\n{header}")
    print(stats_table(results))
    print("Episodes scored: those that started and ended in the run"
          f"{' (the first episode of each env started at a random point, so it is not scored)' if args.desync else ''}.")
    if args.results:
        os.makedirs(os.path.dirname(os.path.abspath(args.results)), exist_ok=True)
        with open(args.results, "w") as f:
            json.dump({"header": header, "schedules": results}, f, indent=1)
        print(f"Figures written to {os.path.abspath(args.results)}")
    if args.record:
        print(f"Episodes recorded to {os.path.abspath(args.record)}"
              f"{' (one file per schedule, <stem>_<schedule>.hdf5)' if len(args.schedules) > 1 else ''}")
    if args.timeline:
        os.makedirs(os.path.dirname(os.path.abspath(args.timeline)), exist_ok=True)
        plot_timelines(timelines, args.timeline, title=header)
        print(f"Timeline of the first {min(args.timeline_envs, args.num_envs)} envs: {args.timeline}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
