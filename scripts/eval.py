"""Evaluate a chunk policy on a suspendable task under one or several chunk schedules, side by side.

Each schedule runs on a freshly created env with the same seed and the task's embedded chunk model
(Cartpole: LQR plans; push-cube: scripted PD plans). Prints a table of figures per schedule and saves a
PNG timeline of the first envs (active / holding / suspended, resets, chunks received, model calls).

Examples::

    # the embedded default: Cartpole + LQR chunks, the naive trigger against the global clock
    tools/run.sh python scripts/eval.py --compare any,global_clock --desync --latency gr1

    tools/run.sh python scripts/eval.py --task Isaac-PushCube-Suspendable --schedule auto --chunk 16 \\
        --num_envs 32 --steps 600 --latency 0.02+0.001n --virtual_latency
"""

from __future__ import annotations

import argparse
import os

import torch
from tqdm import tqdm

from isaaclab_suspend.policies import (
    AGGREGATORS,
    SCHEDULES,
    ActionChunkingPolicy,
    LatencyCfg,
    LatencyEmulator,
    stats_table,
)
from isaaclab_suspend.policies.embedded import DEFAULT_MODELS, make_default_model
from isaaclab_suspend.policies.timeline import ChunkTimeline, plot_timelines
from isaaclab_suspend.utils import open_env


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", default="Isaac-Cartpole-Suspendable", choices=sorted(DEFAULT_MODELS))
    parser.add_argument("--schedule", default="global_clock", choices=sorted(SCHEDULES))
    parser.add_argument("--compare", default=None, help="comma-separated schedules to run one after the other (overrides --schedule)")
    parser.add_argument("--chunk", type=int, default=16, help="actions per chunk H")
    parser.add_argument("--aggregator", default="replace", choices=sorted(AGGREGATORS))
    parser.add_argument("--refill_threshold", type=float, default=0.0, help="any/partial_batch: refill at <= g*H actions left")
    parser.add_argument("--num_envs", type=int, default=16)
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--desync", action="store_true",
                        help="start every env at a random point of its episode (Isaac Lab's init_at_random_ep_len), so"
                             " episodes end at different steps as they do when tasks succeed or fail at different times")
    parser.add_argument("--latency", default=None, help="emulated inference latency: '0.2', '0.05+0.002n', 'gr1' or 'droid'")
    parser.add_argument("--virtual_latency", action="store_true", help="account the latency without sleeping")
    parser.add_argument("--timeline", default="outputs/chunking/timeline.png", help="PNG path ('' for none)")
    parser.add_argument("--timeline_envs", type=int, default=16, help="envs shown in the timeline")
    parser.add_argument("--log_dir", default=None, help="TensorBoard directory (one sub-directory per schedule)")
    parser.add_argument("--record", default=None, help="HDF5 file to record the episodes to")
    args = parser.parse_args()
    args.schedules = args.compare.split(",") if args.compare else [args.schedule]
    unknown = [s for s in args.schedules if s not in SCHEDULES]
    if unknown:
        parser.error(f"unknown schedules {unknown}; choose from {sorted(SCHEDULES)}")
    return args


def require_recording() -> None:
    """Raise if isaaclab_suspend has no episode recorder to write ``--record`` files with."""
    try:
        from isaaclab_suspend.managers import recorder  # noqa: F401
    except ImportError:
        raise NotImplementedError(
            "--record needs isaaclab_suspend's episode recorder (isaaclab_suspend/managers/recorder*.py), which is"
            " not part of this checkout yet; run without --record."
        ) from None


def run(args: argparse.Namespace, schedule: str) -> tuple[dict, ChunkTimeline]:
    """Run ``schedule`` on a fresh env; returns its figures and the timeline of its first envs."""
    with open_env(args.task, args.num_envs, seed=args.seed) as env:
        model = make_default_model(args.task, args.chunk)
        if args.latency:
            model = LatencyEmulator(model, LatencyCfg.parse(args.latency, virtual=args.virtual_latency))
        log_dir = os.path.join(args.log_dir, schedule) if args.log_dir else None
        policy = ActionChunkingPolicy(model, env, chunk_length=args.chunk, schedule=schedule,
                                      aggregator=args.aggregator, refill_threshold=args.refill_threshold, log_dir=log_dir)
        timeline = ChunkTimeline(min(args.timeline_envs, env.num_envs))
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
            if step % 20 == 0:
                progress.set_postfix(calls=policy.stats_counters.inference_calls)
        policy.close()
        return policy.stats, timeline


def main() -> None:
    args = parse_args()
    if args.record:
        require_recording()
    results, timelines = {}, {}
    for schedule in args.schedules:
        results[schedule], timelines[schedule] = run(args, schedule)
    latency = f", latency {args.latency}{' (virtual)' if args.virtual_latency else ''}" if args.latency else ""
    header = (f"{args.task}: {args.num_envs} envs, {args.steps} steps, H = {args.chunk}, seed {args.seed}"
              f"{', desynchronised episodes' if args.desync else ''}{latency}")
    print(f"\n{header}")
    print(stats_table(results))
    if args.timeline:
        os.makedirs(os.path.dirname(os.path.abspath(args.timeline)), exist_ok=True)
        plot_timelines(timelines, args.timeline, title=header)
        print(f"Timeline of the first {min(args.timeline_envs, args.num_envs)} envs: {args.timeline}")


if __name__ == "__main__":
    main()
