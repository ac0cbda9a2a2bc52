"""HDF5 writing choices for recorded episodes: compression filter and level, chunk shape, libver, track_order.

Records Cartpole episodes (random actions) with the project's recorder, loads them, and writes them again
with each choice, one demo group per episode and one dataset per tensor as the episode writer does, flushing
every ``--per_flush`` episodes into one file kept open. Reports the write time per episode (flush included),
the file size and the time to read every demo back. uint8 images are stand-ins drawn from the recorded
states (64x64 RGB, flat background, the cart as a box, the pole tip as a dot), until a camera task exists.

Example::

    tools/run.sh python scripts/benchmarks/bench_hdf5_writes.py --num_envs 64 --steps 300
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import h5py
import numpy as np
import torch
from prettytable import PrettyTable

from isaaclab_suspend.recording import DatasetRecorderManagerCfg
from isaaclab_suspend.tasks.env_factory import open_env

STATE = {
    "raw": {},
    "gzip 1": {"compression": "gzip", "compression_opts": 1},
    "gzip 2 (Isaac Lab)": {"compression": "gzip", "compression_opts": 2},
    "gzip 4": {"compression": "gzip", "compression_opts": 4},
    "gzip 1 + shuffle": {"compression": "gzip", "compression_opts": 1, "shuffle": True},
    "lzf": {"compression": "lzf"},
    "lzf + shuffle": {"compression": "lzf", "shuffle": True},
}


def record(task: str, num_envs: int, steps: int, out_dir: str) -> list[dict[str, np.ndarray]]:
    """Episodes of a random-action run, as dicts of arrays by dataset path."""
    recorders = DatasetRecorderManagerCfg(dataset_export_dir_path=out_dir, dataset_filename="source")
    gen = torch.Generator().manual_seed(0)
    with open_env(task, num_envs, recorders=recorders) as env:
        env.reset()
        env.episode_length_buf[:] = torch.randint(0, int(env.max_episode_length), (num_envs,), generator=gen)
        for _ in range(steps):
            env.step(2.0 * torch.rand(num_envs, 1, generator=gen) - 1.0)
    episodes = []
    with h5py.File(os.path.join(out_dir, "source.hdf5"), "r") as f:
        for demo in f["data"].values():
            arrays = {}
            demo.visititems(lambda name, obj: arrays.__setitem__(name, obj[()]) if isinstance(obj, h5py.Dataset) else None)
            episodes.append(arrays)
    return episodes


def images(episode: dict[str, np.ndarray], size: int = 64) -> np.ndarray:
    """Stand-in camera frames of an episode, drawn from its joint positions. Shape: (T, size, size, 3), uint8."""
    joints = episode["states/articulation/robot/joint_position"]
    frames = np.full((len(joints), size, size, 3), (40, 60, 90), dtype=np.uint8)
    cart = np.clip(((joints[:, 0] + 3.0) / 6.0 * size).astype(int), 4, size - 5)
    tip_x = np.clip(cart + (np.sin(joints[:, 1]) * size / 3).astype(int), 1, size - 2)
    tip_y = np.clip(size // 2 - (np.cos(joints[:, 1]) * size / 3).astype(int), 1, size - 2)
    for t in range(len(joints)):
        frames[t, size // 2 : size // 2 + 4, cart[t] - 4 : cart[t] + 4] = (200, 120, 40)
        frames[t, tip_y[t] - 1 : tip_y[t] + 2, tip_x[t] - 1 : tip_x[t] + 2] = (230, 230, 230)
    return frames


def write(path: str, episodes: list[dict], options: dict, chunks: str, per_flush: int, **file_kwargs) -> float:
    """Write the episodes as the episode writer does; returns the seconds taken (flushes and close included)."""
    start = time.perf_counter()
    with h5py.File(path, "w", **file_kwargs) as f:
        data = f.create_group("data")
        for i, episode in enumerate(episodes):
            group = data.create_group(f"demo_{i}")
            for key, array in episode.items():
                chunk = array.shape if chunks == "episode" and options else (True if options else None)
                group.create_dataset(key, data=array, chunks=chunk, **options)
            group.attrs["num_samples"] = len(episode["actions"])
            if (i + 1) % per_flush == 0:
                f.flush()
    return time.perf_counter() - start


def read(path: str) -> float:
    start = time.perf_counter()
    with h5py.File(path, "r") as f:
        f["data"].visititems(lambda name, obj: obj[()] if isinstance(obj, h5py.Dataset) else None)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", default="Isaac-Cartpole-Suspendable")
    parser.add_argument("--num_envs", type=int, default=64)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--per_flush", type=int, default=4, help="episodes per flush")
    args = parser.parse_args()

    table = PrettyTable(["data", "filter", "chunks", "file options", "write ms / episode", "MiB", "read ms / episode"])
    with tempfile.TemporaryDirectory() as out:
        state = record(args.task, args.num_envs, args.steps, out)
        pixels = [{"actions": e["actions"], "obs/rgb": images(e)} for e in state]
        cases = [("state", name, opts, "episode", {}) for name, opts in STATE.items()]
        cases += [("state", "gzip 1", STATE["gzip 1"], "h5py auto", {})]
        cases += [("state", "gzip 1", STATE["gzip 1"], "episode", kw) for kw in
                  ({"libver": "latest"}, {"track_order": True})]
        cases += [("uint8 64x64x3", name, STATE[name], "episode", {})
                  for name in ("raw", "gzip 1", "gzip 4", "gzip 1 + shuffle", "lzf")]
        for data, name, opts, chunks, file_kwargs in cases:
            episodes = state if data == "state" else pixels
            path = os.path.join(out, "case.hdf5")
            seconds = min(write(path, episodes, opts, chunks, args.per_flush, **file_kwargs) for _ in range(3))
            table.add_row([data, name, chunks, ", ".join(f"{k}={v}" for k, v in file_kwargs.items()) or "default",
                           f"{1e3 * seconds / len(episodes):.3f}", f"{os.path.getsize(path) / 2**20:.2f}",
                           f"{1e3 * read(path) / len(episodes):.3f}"])
    print(f"\n{len(state)} episodes of {args.task} ({args.num_envs} envs, {args.steps} steps, random actions),"
          f" {args.per_flush} per flush, best of 3 writes.")
    print(table)


if __name__ == "__main__":
    main()
