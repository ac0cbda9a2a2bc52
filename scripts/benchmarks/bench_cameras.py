"""Step time of the push-cube task with cameras against without, render share, and image recording cost.

Part 1, step time: ``Isaac-PushCube-Suspendable`` (no camera) beside ``-Camera-`` (one) and ``-TwoCamera-`` (two)
at each size and env count, same random actions, a render per step; the render share is ``(camera step -
no-camera step) / camera step``.

Part 2, recording: the one-camera task with and without ``DatasetRecorderManagerCfg`` (states, actions, images),
same actions, desynchronised episodes: both rates and their ratio (export and final flush included), bytes per
image sample stored, and the images rewritten by h5py raw, with gzip 2 and with lzf, one frame per chunk.

Part 3, observation demand: the eval loop (the planner, ``global_clock``) in active env-steps/s with the demand
off and on (:mod:`isaaclab_suspend.benchmarks.demand_timing`), at each H, on push-cube camera and the SO-101 lift
camera, with the on/off factor; then push-cube camera (demand on) against ``Isaac-PushCube-Suspendable``.

Example (``--parts demand`` for part 3 alone)::

    tools/run.sh python scripts/benchmarks/bench_cameras.py --num_envs 16 64 --sizes 64 128 --steps 30
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import h5py
import torch
from prettytable import PrettyTable

from isaaclab_suspend.benchmarks.demand_timing import demand_rates, rates_against
from isaaclab_suspend.recording import DatasetRecorderManagerCfg
from isaaclab_suspend.tasks.env_factory import open_env

TASKS = {0: "Isaac-PushCube-Suspendable", 1: "Isaac-PushCube-Camera-Suspendable", 2: "Isaac-PushCube-TwoCamera-Suspendable"}
"""Task per number of cameras."""
DEMAND_TASKS = (TASKS[1], "IsaacContrib-Lift-Cube-SO101-IK-Abs-Camera-Suspendable")
"""The observation-demand rows' tasks: push-cube's scene camera, the SO-101 lift's wrist and front cameras."""


def camera_attrs(cameras: int, size: int) -> dict:
    """Cfg overrides setting every camera of the task to ``size`` x ``size``."""
    return {f"scene__{n}__{d}": size for n in ("scene_camera", "pusher_camera")[:cameras] for d in ("height", "width")}


def step_ms(cameras: int, num_envs: int, size: int, steps: int, warmup: int) -> float:
    """Mean wall time of one env step [ms]."""
    with open_env(TASKS[cameras], num_envs, events__nudge_cube=None, **camera_attrs(cameras, size)) as env:
        gen = torch.Generator().manual_seed(0)
        env.reset()
        for step in range(warmup + steps):
            if step == warmup:
                start = time.perf_counter()
            env.step(2.0 * torch.rand(num_envs, 1, generator=gen) - 1.0)
        return 1e3 * (time.perf_counter() - start) / steps


def env_steps_per_s(num_envs: int, size: int, steps: int, out_dir: str | None) -> float:
    """Env-steps/s of the one-camera task, random actions, desynchronised episodes; with ``out_dir``, recorded into
    ``out_dir/bench_cameras.hdf5`` (the export of the open episodes and the final flush included)."""
    recorders = out_dir and DatasetRecorderManagerCfg(dataset_export_dir_path=out_dir, dataset_filename="bench_cameras")
    with open_env(TASKS[1], num_envs, recorders=recorders, **camera_attrs(1, size)) as env:
        gen = torch.Generator().manual_seed(0)
        env.reset()
        env.episode_length_buf[:] = torch.randint(0, int(env.max_episode_length), (num_envs,), generator=gen)
        env.step(torch.zeros(num_envs, 1))  # warm-up: first render, buffers allocated
        start = time.perf_counter()
        for _ in range(steps):
            env.step(2.0 * torch.rand(num_envs, 1, generator=gen) - 1.0)
        if out_dir:
            env.recorder_manager.export_episodes()
            env.recorder_manager.close()  # hands every episode over and waits until it is written
        return num_envs * steps / (time.perf_counter() - start)


def image_storage(path: str, out_dir: str) -> list[tuple[str, float, float]]:
    """(filter, bytes per image sample, MB/s written) for the file's images as written and rewritten."""
    with h5py.File(path) as f:
        sets = [d["images/scene_camera"] for d in f["data"].values()]
        samples = sum(s.shape[0] for s in sets)
        rows = [("as recorded: gzip 1, one chunk per demo", sum(s.id.get_storage_size() for s in sets) / samples, float("nan"))]
        frames = [s[()] for s in sets]
    for name, opts in (("none", {}), ("gzip 2", {"compression": "gzip", "compression_opts": 2}), ("lzf", {"compression": "lzf"})):
        start = time.perf_counter()
        with h5py.File(os.path.join(out_dir, f"rewrite_{name.replace(' ', '')}.hdf5"), "w") as g:
            stored = 0
            for i, x in enumerate(frames):
                d = g.create_dataset(f"demo_{i}", data=x, chunks=(1, *x.shape[1:]), **opts)
                stored += d.id.get_storage_size()
        seconds = time.perf_counter() - start
        rows.append((f"{name}, one frame per chunk", stored / samples, sum(x.nbytes for x in frames) / seconds / 1e6))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for flag, default in (("--num_envs", [16, 64]), ("--sizes", [64, 128]), ("--demand_envs", [16, 64]),
                          ("--chunks", [8, 16, 32])):
        parser.add_argument(flag, type=int, nargs="+", default=default)
    for flag, default in (("--steps", 30), ("--warmup", 5), ("--record_envs", 64), ("--record_steps", 300),
                          ("--demand_steps", 96), ("--rounds", 2), ("--ratio_steps", 320)):
        parser.add_argument(flag, type=int, default=default)
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument("--demand_tasks", nargs="*", default=list(DEMAND_TASKS))
    args = parser.parse_args()
    for part in args.parts:
        PARTS[part](args)


def step_table(args: argparse.Namespace) -> None:
    """Part 1: step time with cameras against without."""
    table = PrettyTable(["envs", "size", "cameras", "step [ms]", "x no camera", "render share"])
    for num_envs in args.num_envs:
        base = step_ms(0, num_envs, 0, args.steps, args.warmup)
        table.add_row([num_envs, "-", 0, f"{base:.1f}", "1.00", "-"])
        for size in args.sizes:
            for cameras in (1, 2):
                ms = step_ms(cameras, num_envs, size, args.steps, args.warmup)
                table.add_row([num_envs, f"{size}x{size}", cameras, f"{ms:.1f}", f"{ms / base:.2f}", f"{(ms - base) / ms:.0%}"])
        print(table, flush=True)


def recording_rows(args: argparse.Namespace) -> None:
    """Part 2: the one-camera task recorded against not, and the image storage."""
    with tempfile.TemporaryDirectory() as out_dir:
        plain = env_steps_per_s(args.record_envs, args.sizes[0], args.record_steps, None)
        recorded = env_steps_per_s(args.record_envs, args.sizes[0], args.record_steps, out_dir)
        print(f"{TASKS[1]} ({args.sizes[0]}x{args.sizes[0]}, {args.record_envs} envs, {args.record_steps} steps):"
              f" {plain:.0f} env-steps/s without recording, {recorded:.0f} recording states, actions and images"
              f" (export and final flush included): {recorded / plain:.2f} of the un-recorded rate")
        storage = PrettyTable(["image storage", "bytes / image sample", "write MB/s (raw)"])
        for name, per_sample, rate in image_storage(os.path.join(out_dir, "bench_cameras.hdf5"), out_dir):
            storage.add_row([name, f"{per_sample:.0f}", "-" if rate != rate else f"{rate:.0f}"])
        print(storage)


def demand_table(args: argparse.Namespace) -> None:
    """Part 3: the eval loop with the observation demand off and on, then push-cube camera against no camera."""
    table = PrettyTable(["task", "envs", "H", "demand off [env-steps/s]", "demand on [env-steps/s]", "on / off"])
    for task in args.demand_tasks:
        for num_envs in args.demand_envs:
            with open_env(task, num_envs) as env:
                for h in args.chunks:
                    off, on = demand_rates(env, task, h, args.demand_steps, args.rounds)
                    table.add_row([task, num_envs, h, f"{off:.0f}", f"{on:.0f}", f"{on / off:.2f}"])
            print(table, flush=True)
    print(f"{TASKS[1]} with the observation demand against {TASKS[0]}, global_clock, 16 envs, H = 16,"
          f" {args.ratio_steps} steps, in turn:")
    for per, (camera, none) in rates_against((TASKS[1], TASKS[0]), 16, 16, args.ratio_steps, args.rounds).items():
        print(f"  active env-steps per {per}: camera {[round(r) for r in camera]}, no camera {[round(r) for r in none]};"
              f" camera / no camera {[round(c / n, 2) for c, n in zip(camera, none)]}, median"
              f" {statistics.median(c / n for c, n in zip(camera, none)):.2f}")


PARTS = {"steps": step_table, "recording": recording_rows, "demand": demand_table}


if __name__ == "__main__":
    main()
