"""Junk in recorded datasets: the same chunk-policy rollout recorded under ``hold`` and under ``global_clock``.

Under ``hold`` an env that was reset mid-chunk waits for the next clock tick while still stepping (holding
its last action, zero after a reset), and every such step is recorded; under ``global_clock`` it waits
suspended and records nothing. Each run uses a fresh env with the same task, seed, chunk model and
desynchronised episode starts. The script follows every env-step through the chunking policy's step
status (executing a chunk action, holding, suspended) and reports, per file:

* junk steps: samples taken while the env was only waiting (holding), over all exported episodes;
* junk episodes: exported episodes with at least one junk step (their first samples are not the
  policy's, and their initial state is not the state the policy started from);

and checks that the file holds exactly the executing and holding steps of its episodes.

Example::

    tools/run.sh python scripts/benchmarks/bench_junk.py --task Isaac-PushCube-Suspendable --num_envs 16 --steps 600
"""

from __future__ import annotations

import argparse
import os
import tempfile

import h5py
import torch
from prettytable import PrettyTable

from isaaclab_suspend import cli, runs
from isaaclab_suspend.recording import DatasetRecorderManagerCfg
from isaaclab_suspend.chunking import ActionChunkingPolicy
from isaaclab_suspend.tasks.embedded import make_default_model, tasks_with_chunk_model
from isaaclab_suspend.tasks.env_factory import open_env


def record(task: str, schedule: str, num_envs: int, steps: int, chunk: int, seed: int, out_dir: str) -> dict:
    """Record one rollout; returns its figures, read back from the file and checked against the step statuses."""
    recorders = DatasetRecorderManagerCfg(dataset_export_dir_path=out_dir, dataset_filename=schedule)
    with open_env(task, num_envs, seed=seed, recorders=recorders) as env:
        policy = ActionChunkingPolicy(make_default_model(task, chunk), env, chunk_length=chunk, schedule=schedule)
        samples = torch.zeros(num_envs, dtype=torch.long)  # recorded steps of each open episode
        junk = torch.zeros(num_envs, dtype=torch.long)  # of which holding
        episodes = []  # (samples, junk) of each ended episode, in export order
        first = torch.ones(num_envs, dtype=torch.bool)  # in its first episode, cut short by the start: not a demo
        for t in runs.rollout(env, policy, runs.start_episodes(env, seed, desync=True), steps):
            status, dones = policy.last_step, t.dones
            samples += (~status.suspended).long()
            junk += (~status.executing & ~status.suspended).long()
            for i in (dones & ~first).nonzero().flatten().tolist():
                episodes.append((int(samples[i]), int(junk[i])))
            samples[dones] = 0
            junk[dones] = 0
            first &= ~dones
        stats = policy.stats
    with h5py.File(os.path.join(out_dir, f"{schedule}.hdf5"), "r") as f:
        data = f["data"]
        names = sorted(data, key=lambda name: int(name.split("_")[1]))
        lengths = [int(data[name].attrs["num_samples"]) for name in names]
        total = int(data.attrs["total"])
    expected = [n for n, _ in episodes if n > 0]
    if lengths != expected:
        raise RuntimeError(f"{schedule}: the file's demo lengths differ from the recorded steps of its episodes.")
    return {
        "schedule": schedule,
        "episodes": len(names),
        "samples": total,
        "junk_steps": sum(j for n, j in episodes if n > 0),
        "junk_episodes": sum(1 for n, j in episodes if n > 0 and j > 0),
        "suspended_env_steps": stats["suspended_env_steps"],
        "inference_calls": stats["inference_calls"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", default="Isaac-PushCube-Suspendable", choices=tasks_with_chunk_model())
    parser.add_argument("--num_envs", type=cli.positive_int, default=16)
    parser.add_argument("--steps", type=cli.positive_int, default=600)
    parser.add_argument("--chunk", type=cli.positive_int, default=16)
    parser.add_argument("--seed", type=cli.env_seed, default=42)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as out_dir:
        rows = [record(args.task, s, args.num_envs, args.steps, args.chunk, args.seed, out_dir)
                for s in ("hold", "global_clock")]
    table = PrettyTable(["schedule", "episodes", "samples", "junk steps", "junk %", "junk episodes",
                         "suspended env-steps", "inference calls"])
    for r in rows:
        table.add_row([r["schedule"], r["episodes"], r["samples"], r["junk_steps"],
                       f"{100 * r['junk_steps'] / max(r['samples'], 1):.1f} %", r["junk_episodes"],
                       r["suspended_env_steps"], r["inference_calls"]])
    print(f"\n{args.task}: {args.num_envs} envs, {args.steps} steps, H = {args.chunk}, seed {args.seed},"
          " desynchronised episode starts; file contents checked against the step statuses.")
    print(table)


if __name__ == "__main__":
    main()
