"""Step time of the push-cube task with cameras against without, render share, and image recording cost.

Part 1, step time: for each env count, ``Isaac-PushCube-Suspendable`` (no camera) is timed beside the camera
variants (``-Camera-``: one camera, ``-TwoCamera-``: two) at each image size, with the same random actions.
Cameras render once per policy step (lazily, when the observations are computed). The render share is the
part of a camera step that the cameras add: ``(camera step - no-camera step) / camera step``.

Part 2, recording: the one-camera task steps with and without ``DatasetRecorderManagerCfg`` (states, actions,
images), the same random actions and desynchronised episodes; reported are both env-step rates and their
ratio (recording, the export and the writer's final flush included) and the bytes per image sample stored,
then the same images rewritten with h5py without compression, with gzip (level 2, as Isaac Lab writes) and
with lzf, one frame per chunk.

Example::

    tools/run.sh python scripts/benchmarks/bench_cameras.py --num_envs 16 64 --sizes 64 128 --steps 30
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import h5py
import torch
from prettytable import PrettyTable

from isaaclab_suspend.recording import DatasetRecorderManagerCfg
from isaaclab_suspend.tasks.env_factory import open_env

TASKS = {0: "Isaac-PushCube-Suspendable", 1: "Isaac-PushCube-Camera-Suspendable", 2: "Isaac-PushCube-TwoCamera-Suspendable"}
"""Task per number of cameras."""


def camera_attrs(cameras: int, size: int) -> dict:
    """Cfg overrides setting every camera of the task to ``size`` x ``size``."""
    names = ("scene_camera", "pusher_camera")[:cameras]
    return {f"scene__{n}__{dim}": size for n in names for dim in ("height", "width")}


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
    """Env-steps per second of the one-camera task under random actions and desynchronised episodes; with
    ``out_dir``, recorded by ``DatasetRecorderManagerCfg`` (states, actions, images) into
    ``out_dir/bench_cameras.hdf5``, the export of the episodes still open and the writer's final flush included."""
    recorders = (DatasetRecorderManagerCfg(dataset_export_dir_path=out_dir, dataset_filename="bench_cameras")
                 if out_dir else None)
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
    parser.add_argument("--num_envs", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 128])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--record_envs", type=int, default=64)
    parser.add_argument("--record_steps", type=int, default=300)
    args = parser.parse_args()

    table = PrettyTable(["envs", "size", "cameras", "step [ms]", "x no camera", "render share"])
    for num_envs in args.num_envs:
        base = step_ms(0, num_envs, 0, args.steps, args.warmup)
        table.add_row([num_envs, "-", 0, f"{base:.1f}", "1.00", "-"])
        for size in args.sizes:
            for cameras in (1, 2):
                ms = step_ms(cameras, num_envs, size, args.steps, args.warmup)
                table.add_row([num_envs, f"{size}x{size}", cameras, f"{ms:.1f}", f"{ms / base:.2f}", f"{(ms - base) / ms:.0%}"])
        print(table, flush=True)

    with tempfile.TemporaryDirectory() as out_dir:
        plain = env_steps_per_s(args.record_envs, args.sizes[0], args.record_steps, None)
        recorded = env_steps_per_s(args.record_envs, args.sizes[0], args.record_steps, out_dir)
        print(f"{TASKS[1]} ({args.sizes[0]}x{args.sizes[0]}, {args.record_envs} envs, {args.record_steps} steps):"
              f" {plain:.0f} env-steps/s without recording, {recorded:.0f} recording states, actions and images"
              f" (export and final flush included): {recorded / plain:.2f} of the un-recorded rate")
        path = os.path.join(out_dir, "bench_cameras.hdf5")
        storage = PrettyTable(["image storage", "bytes / image sample", "write MB/s (raw)"])
        for name, per_sample, rate in image_storage(path, out_dir):
            storage.add_row([name, f"{per_sample:.0f}", "-" if rate != rate else f"{rate:.0f}"])
        print(storage)


if __name__ == "__main__":
    main()
