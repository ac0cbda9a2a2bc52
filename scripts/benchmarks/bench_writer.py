"""Throughput of the episode writer, without a sim: episodes/s and MB/s of 1 against N writer processes.

Hands synthetic episodes shaped as Cartpole's recorded ones (``actions``, ``obs/policy``, the articulation's
joint and root state every step, one ``initial_state`` sample; ``--samples`` per episode, float32) in batches of
``--batch`` episodes, as the recorder does at many envs, to the writer the recorder opens for
``EpisodeWriterCfg(num_writers=N)`` (:func:`~isaaclab_suspend.recording.sharded_writer.open_episode_writer`): one
:class:`~isaaclab_suspend.recording.EpisodeWriter` for N = 1, else a
:class:`~isaaclab_suspend.recording.ShardedEpisodeWriter` whose N processes write part files that its ``close``
merges into the one dataset file. The write is timed from the first hand-over to the last episode flushed, the merge
separately; MB are those of the dataset file; the writer CPU is that of the writer processes (all of them, their start
left out) per episode: on free cores, N processes write about N / (that CPU) episodes/s.

Example::

    tools/run.sh python scripts/benchmarks/bench_writer.py --episodes 4000 --writers 1 2 4
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time

import numpy as np
from prettytable import PrettyTable

from isaaclab.managers import DatasetExportMode

from isaaclab_suspend.recording.episode_buffers import EpisodeRows
from isaaclab_suspend.recording import EpisodeBatch, EpisodeWriterCfg, ShardedEpisodeWriter
from isaaclab_suspend.recording.sharded_writer import open_episode_writer

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


def cpu_s(pid: int) -> float:
    """CPU seconds (user and system) the live process ``pid`` has used so far (Linux's ``/proc``)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(writers: int, episodes: int, size: int, samples: int, out_dir: str) -> dict:
    """Hand ``episodes`` over to the writer of ``writers`` processes in batches of ``size``; figures of the run."""
    rng = np.random.default_rng(0)
    batches = [batch(size, samples, rng) for _ in range(max(episodes // size, 1))]
    path = os.path.join(out_dir, f"w{writers}.hdf5")
    writer = open_episode_writer(EpisodeWriterCfg(num_writers=writers), [path], DatasetExportMode.EXPORT_ALL)
    processes = [w._process for w in getattr(writer, "writers", [writer])]
    started = sum(cpu_s(p.pid) for p in processes)  # their start (imports), left out
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    for b in batches:
        writer.put(b)
        writer.check()
    handed = time.perf_counter() - start
    writer.close()  # the processes end and are waited for: their CPU is the children's
    merge = writer.merge_s if isinstance(writer, ShardedEpisodeWriter) else 0.0
    seconds = time.perf_counter() - start - merge
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime - started
    written = writer.written_count(False)
    mb = os.path.getsize(path) / 2**20
    return {"writers": writers, "episodes": written, "seconds": seconds, "episodes_per_s": written / seconds,
            "mb_per_s": mb / seconds, "cpu_ms_per_episode": 1e3 * cpu / written, "hand_over_s": handed,
            "merge_s": merge, "overall_per_s": written / (seconds + merge)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=4000)
    parser.add_argument("--batch", type=int, default=200, help="episodes per hand-over")
    parser.add_argument("--samples", type=int, default=30, help="steps per episode")
    parser.add_argument("--writers", type=int, nargs="+", default=[1, 2, 4])
    args = parser.parse_args()
    load = os.getloadavg()[0]  # what else the machine ran: the writers share its cores
    table = PrettyTable(["writers", "episodes", "write s", "episodes/s", "MB/s", "writer CPU ms/episode",
                         "hand-over s", "merge s", "episodes/s with merge"])
    with tempfile.TemporaryDirectory() as out_dir:
        for n in args.writers:
            r = run(n, args.episodes, args.batch, args.samples, out_dir)
            table.add_row([n, r["episodes"], f"{r['seconds']:.2f}", f"{r['episodes_per_s']:.0f}",
                           f"{r['mb_per_s']:.1f}", f"{r['cpu_ms_per_episode']:.2f}", f"{r['hand_over_s']:.2f}",
                           f"{r['merge_s']:.2f}", f"{r['overall_per_s']:.0f}"])
    print(f"{args.batch} episodes per hand-over, {args.samples} samples each, {os.cpu_count()} CPU cores, load"
          f" average {load:.2f} before the run")
    print(table)


if __name__ == "__main__":
    main()
