"""The steps of the junk experiment that its benchmarks share: an expert recorded under a schedule with
``scripts/record.py``, and a chunk model evaluated under the global clock on a fresh env. Importing it imports
nothing heavy (its benchmarks parse their arguments first); the evaluation imports the env and the policy."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from prettytable import PrettyTable

if TYPE_CHECKING:
    from ..chunking import ChunkModel

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
"""The checkout, whose scripts/record.py records the expert."""
SCHEDULES = ("hold", "global_clock")
"""Recording schedules compared: ``hold`` records junk (the held zero action after a mid-chunk reset),
``global_clock`` records none."""


def record_expert(task: str, schedule: str, expert: Sequence[str], path: str, chunk: int, num_envs: int,
                  episodes: int, seed: int) -> str:
    """Record the expert (``record.py`` model arguments, e.g. ``["--checkpoint", path]``; none: the task's
    embedded planner) under ``schedule`` with desynchronised starts into ``path`` (replaced); returns the absolute
    path."""
    path = os.path.abspath(path)
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "record.py"), "--task", task, *expert,
                    "--schedule", schedule, "--model.chunk_length", str(chunk), "--num_envs", str(num_envs),
                    "--episodes", str(episodes), "--desync", "--seed", str(seed), "--output", path,
                    "--overwrite"], check=True)
    return path


def evaluate_under_global_clock(task: str, model: ChunkModel, chunk: int, num_envs: int, steps: int, seed: int,
                                label: str) -> dict:
    """Run ``model`` under ``global_clock`` on a fresh env (seeded, desynchronised starts): the scored episodes'
    figures, the cube's final distance to its target on push-cube (NaN elsewhere), and the inference calls."""
    from ..runs import rollout, start_episodes
    from ..chunking import ActionChunkingPolicy
    from ..runs import EpisodeOutcomes
    from ..tasks.env_factory import open_env

    with open_env(task, num_envs, seed=seed) as env:
        if hasattr(model, "check_env"):
            model.check_env(env)
        policy = ActionChunkingPolicy(model, env, chunk_length=chunk, schedule="global_clock")
        outcomes = EpisodeOutcomes(env, score_first=False, final_term="cube_to_target")  # push-cube: what is left
        for t in rollout(env, policy, start_episodes(env, seed, desync=True), steps):
            outcomes.update(t.dones, ~policy.last_step.suspended, t.obs)
        figures = outcomes.as_dict()
        result = {**figures, "final_distance": figures.get("final_cube_to_target", float("nan")),
                  "has_success": outcomes.has_success, "inference_calls": policy.stats["inference_calls"]}
        policy.close()
    print(f"[{label}] {result}")
    return result


def means_table(rows: Sequence[dict], schedules: Sequence[str] = SCHEDULES) -> PrettyTable:
    """Per recording schedule, the mean (min-max) over training seeds of success, episode length, final distance."""
    means = PrettyTable(["BC on", "success rate (mean, min-max)", "mean episode length (mean, min-max)",
                         "final distance [m] (mean, min-max)"])
    for schedule in schedules:
        columns = [([r[key] for r in rows if r["dataset"] == schedule], f) for key, f in
                   (("success_rate", "{:.3f}"), ("mean_episode_length", "{:.1f}"), ("final_distance", "{:.4f}"))]
        means.add_row([f"{schedule} data", *(f"{f.format(sum(v) / len(v))} ({f.format(min(v))}-{f.format(max(v))})"
                                             for v, f in columns)])
    return means
