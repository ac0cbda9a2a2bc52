"""Throughput of the episode writer, without a sim: episodes/s and MB/s of 1 against N writer processes.

Hands synthetic episodes shaped as Cartpole's recorded ones (``actions``, ``obs/policy``, the articulation's
joint and root state every step, one ``initial_state`` sample; ``--samples`` per episode, float32) to
:class:`~isaaclab_suspend.recording.EpisodeWriter` in batches of ``--batch`` episodes, as the recorder does at
many envs, and times from the first hand-over to the last episode flushed (``close``). With N writers each has
its own process and file and the batches go round robin: the layout that shards the writing.

Example::

    tools/run.sh python scripts/benchmarks/bench_writer.py --episodes 4000 --writers 1 2 4
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np
from prettytable import PrettyTable

from isaaclab.managers import DatasetExportMode

from isaaclab_suspend.recording.episode_buffers import EpisodeRows
from isaaclab_suspend.recording.episode_writer import EpisodeBatch, EpisodeWriter, EpisodeWriterCfg

STEP_LEAVES = {"actions": 1, "obs/policy": 4, "states/articulation/robot/joint_position": 2,
               "states/articulation/robot/joint_velocity": 2, "states/articulation/robot/root_pose": 7,
               "states/articulation/robot/root_velocity": 6}
"""Per-step datasets of a Cartpole recording and their widths; each is also stored once under ``initial_state``."""


def batch(size: int, samples: int, rng: np.random.Generator) -> EpisodeBatch:
    """``size`` episodes of ``samples`` steps (and one initial state each), as the recorder hands them over."""
    leaves, key_of, keys = {}, {}, ["actions", "obs", "states", "initial_state"]
    for path, width in STEP_LEAVES.items():
        leaves[path] = rng.standard_normal((size, samples, width), dtype=np.float32)
        key_of[path] = keys.index(path.split("/")[0])
        if path.startswith("states/"):
            initial = "initial_state/" + path.removeprefix("states/")
            leaves[initial] = rng.standard_normal((size, 1, width), dtype=np.float32)
            key_of[initial] = keys.index("initial_state")
    counts = np.full((len(keys), size), samples, dtype=np.int64)
    counts[keys.index("initial_state")] = 1
    rows = EpisodeRows(leaves, keys, key_of, np.array([True, True, True, False]), counts)
    return EpisodeBatch(rows, np.zeros(size, dtype=bool), list(range(size)))


def run(writers: int, episodes: int, size: int, samples: int, out_dir: str) -> dict:
    """Hand ``episodes`` over to ``writers`` writer processes in batches of ``size``; figures of the run."""
    rng = np.random.default_rng(0)
    batches = [batch(size, samples, rng) for _ in range(max(episodes // size, 1))]
    paths = [os.path.join(out_dir, f"w{writers}-{i}.hdf5") for i in range(writers)]
    group = [EpisodeWriter(EpisodeWriterCfg(), [path], DatasetExportMode.EXPORT_ALL) for path in paths]
    start = time.perf_counter()
    for i, b in enumerate(batches):
        group[i % writers].put(b)
        for writer in group:
            writer.check()
    handed = time.perf_counter() - start
    for writer in group:
        writer.close()
    seconds = time.perf_counter() - start
    written = sum(w.written_count(False) for w in group)
    mb = sum(os.path.getsize(p) for p in paths) / 2**20
    return {"writers": writers, "episodes": written, "seconds": seconds, "episodes_per_s": written / seconds,
            "mb_per_s": mb / seconds, "ms_per_episode": 1e3 * seconds / written, "hand_over_s": handed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=4000)
    parser.add_argument("--batch", type=int, default=200, help="episodes per hand-over")
    parser.add_argument("--samples", type=int, default=30, help="steps per episode")
    parser.add_argument("--writers", type=int, nargs="+", default=[1, 2, 4])
    args = parser.parse_args()
    table = PrettyTable(["writers", "episodes", "s", "episodes/s", "MB/s", "ms/episode", "hand-over s"])
    with tempfile.TemporaryDirectory() as out_dir:
        for n in args.writers:
            r = run(n, args.episodes, args.batch, args.samples, out_dir)
            table.add_row([n, r["episodes"], f"{r['seconds']:.2f}", f"{r['episodes_per_s']:.0f}",
                           f"{r['mb_per_s']:.1f}", f"{r['ms_per_episode']:.3f}", f"{r['hand_over_s']:.2f}"])
    print(f"{args.batch} episodes per hand-over, {args.samples} samples each, {os.cpu_count()} CPU cores")
    print(table)


if __name__ == "__main__":
    main()
