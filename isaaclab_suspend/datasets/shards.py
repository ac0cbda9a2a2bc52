"""Scale-out evaluation and recording: one run split into K shards, each its own process (on one machine or
several) against a shared policy server, merged back into one report and one dataset afterwards.

Shard ``i/K`` uses seed ``seed + i`` (disjoint episodes), writes ``<stem>-shard<i>of<K><ext>`` files and, for
recording, ``episodes // K`` episodes (the first ``episodes % K`` shards one more). :func:`merge_stats` and
:func:`merge_datasets` combine what the shards wrote; ``scripts/merge_shards.py`` runs both. Start the shards
with any launcher (a cluster scheduler's array job, ssh): each only needs its ``--shard``. Under ``torchrun`` each
rank is a shard and rank 0 merges (:mod:`isaaclab_suspend.cli.distributed`).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

from isaaclab.utils.datasets import HDF5DatasetFileHandler

from .reader import DatasetError, DatasetReader

SUMMED = ("steps", "num_envs", "inference_calls", "rows_inferred", "envs_served", "active_env_steps",
          "suspended_env_steps", "held_env_steps", "episodes_completed", "episodes_scored", "inference_s",
          "simulation_s")
"""Figures of a chunking run that add up over shards (``steps``: over the shards' clocks, each its own)."""


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count`` (0-based)."""

    index: int = 0
    count: int = 1

    @classmethod
    def parse(cls, spec: str) -> Shard:
        """``"i/K"`` with 0 <= i < K.

        Raises:
            ValueError: If ``spec`` is not of that form.
        """
        match = re.fullmatch(r"(\d+)/(\d+)", spec.strip())
        if not match or not int(match[1]) < int(match[2]):
            raise ValueError(f"--shard takes i/K with 0 <= i < K (e.g. 0/4), got '{spec}'.")
        return cls(int(match[1]), int(match[2]))

    def seed(self, seed: int) -> int:
        """This shard's seed: ``seed + index``."""
        return seed + self.index

    def path(self, path: str) -> str:
        """This shard's file: ``<stem>-shard<i>of<K><ext>`` (``path`` itself for one shard)."""
        if self.count == 1:
            return path
        stem, ext = os.path.splitext(path)
        return f"{stem}-shard{self.index}of{self.count}{ext}"

    def unshard(self, path: str) -> str:
        """The run's file of this shard's ``path`` (or a name derived from it): the last ``-shard<i>of<K>`` of its
        file name removed (``path`` itself for one shard)."""
        if self.count == 1:
            return path
        head, tag, tail = path.rpartition(f"-shard{self.index}of{self.count}")
        return head + tail if tag and os.sep not in tail else path

    def episodes(self, total: int) -> int:
        """This shard's part of ``total`` episodes."""
        return total // self.count + int(self.index < total % self.count)


def merge_stats(shards: Sequence[dict]) -> dict:
    """The figures of shards run side by side as one run's: counts summed, ratios recomputed from the sums,
    wall time the longest shard's (they ran in parallel), episode figures weighted by episodes scored."""
    merged = {key: sum(s[key] for s in shards) for key in SUMMED if key in shards[0]}
    merged["wall_s"] = max(s["wall_s"] for s in shards)
    calls, steps = merged["inference_calls"], merged["steps"]
    merged["calls_per_1000_steps"] = 1000.0 * calls / steps if steps else 0.0
    merged["mean_envs_per_call"] = merged["envs_served"] / calls if calls else 0.0
    merged["fetch_efficiency"] = merged["mean_envs_per_call"] * len(shards) / merged["num_envs"]
    env_steps = merged["active_env_steps"] + merged["suspended_env_steps"] + merged["held_env_steps"]
    merged["suspended_fraction"] = merged["suspended_env_steps"] / env_steps if env_steps else 0.0
    merged["active_env_steps_per_s"] = merged["active_env_steps"] / merged["wall_s"] if merged["wall_s"] else 0.0
    for key in ("mean_episode_length", "success_rate"):
        scored = [(s["episodes_scored"], s[key]) for s in shards if s["episodes_scored"] and not math.isnan(s[key])]
        total = sum(n for n, _ in scored)
        merged[key] = sum(n * value for n, value in scored) / total if total else float("nan")
    return merged


def merge_results(shards: Sequence[dict]) -> dict:
    """The figures of shards (each ``{"header": ..., "schedules": {name: figures}}``, as ``eval.py --results``
    writes them) as one run's: :func:`merge_stats` per schedule under the shards' headers.

    Raises:
        ValueError: If the shards ran different schedules.
    """
    schedules = list(shards[0]["schedules"])
    other = [index for index, shard in enumerate(shards) if list(shard["schedules"]) != schedules]
    if other:
        raise ValueError(f"shards {other} ran other schedules than shard 0 ({schedules}): merge shards of one run.")
    headers = "\n".join(f"  {shard['header']}" for shard in shards)
    return {"header": f"{len(shards)} shards run side by side:\n{headers}",
            "schedules": {name: merge_stats([shard["schedules"][name] for shard in shards]) for name in schedules}}


def merge_datasets(paths: Sequence[str], output: str) -> tuple[int, int]:
    """Write the episodes of the HDF5 datasets ``paths``, in order, into one new dataset ``output`` with Isaac
    Lab's file handler (``env_args`` of the first shard); returns (episodes, samples).

    Raises:
        FileNotFoundError: If a shard file is missing.
        DatasetError: If a shard is not a dataset, or the shards were recorded on different tasks.
    """
    shards = []
    for path in paths:
        with DatasetReader(path) as reader:
            if shards and reader.env_name != shards[0][1]["env_name"]:
                raise DatasetError(f"'{path}' was recorded on '{reader.env_name}', '{shards[0][0]}' on"
                                   f" '{shards[0][1]['env_name']}': merge the shards of one task.")
            shards.append((reader.path, reader.env_args, reader.demo_names))
    writer = HDF5DatasetFileHandler()
    writer.create(output)
    writer.add_env_args(shards[0][1])
    episodes = samples = 0
    for path, _, names in shards:
        reader = HDF5DatasetFileHandler()
        reader.open(path)
        for name in names:
            episode = reader.load_episode(name, "cpu")
            writer.write_episode(episode)
            episodes, samples = episodes + 1, samples + len(episode.data["actions"])
        reader.close()
    writer.flush()
    writer.close()
    return episodes, samples
