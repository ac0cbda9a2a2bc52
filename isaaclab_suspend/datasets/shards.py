"""Scale-out evaluation and recording: one run split into K shards, each its own process (on one machine or
several) against a shared policy server, merged back into one report and one dataset afterwards.

Shard ``i/K`` uses seed ``seed + i`` (disjoint episodes), writes ``<stem>-shard<i>of<K><ext>`` files and, for
recording, ``episodes // K`` episodes (the first ``episodes % K`` shards one more). :func:`merge_stats` and
:func:`merge_datasets` combine what the shards wrote (and :func:`isaaclab_suspend.runs.merge_shard_logs` their run
logs, with the paired verdicts over all their episodes); ``scripts/merge_shards.py`` runs them. Start the shards
with any launcher (a cluster scheduler's array job, ssh): each only needs its ``--shard``. Under ``torchrun`` each
rank is a shard and rank 0 merges (:mod:`isaaclab_suspend.cli.distributed`).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

from isaaclab.utils.datasets import HDF5DatasetFileHandler

from ..recording.part_files import whole_file
from .reader import DatasetError, DatasetReader

SUMMED = ("num_envs", "inference_calls", "rows_inferred", "envs_served", "active_env_steps",
          "suspended_env_steps", "held_env_steps", "episodes_completed", "episodes_scored", "inference_s",
          "simulation_s", "overlap_bound")
"""Figures of a chunking run that add up over shards (``overlap_bound``: shards side by side add their
throughput)."""
ROUGHNESS = ("roughness", "boundary_roughness", "within_chunk_roughness")
"""Per-step figures of a chunking run, merged as means weighted by the shards' active env-steps."""


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
    ``steps`` and wall time the longest shard's (they ran in parallel, each on its own clock), episode figures
    weighted by episodes scored, roughness by active env-steps."""
    merged = {key: sum(s[key] for s in shards) for key in SUMMED if key in shards[0]}
    merged["steps"] = max(s["steps"] for s in shards)
    merged["wall_s"] = max(s["wall_s"] for s in shards)
    calls, steps = merged["inference_calls"], sum(s["steps"] for s in shards)
    merged["calls_per_1000_steps"] = 1000.0 * calls / steps if steps else 0.0
    merged["mean_envs_per_call"] = merged["envs_served"] / calls if calls else 0.0
    merged["fetch_efficiency"] = merged["mean_envs_per_call"] * len(shards) / merged["num_envs"]
    env_steps = merged["active_env_steps"] + merged["suspended_env_steps"] + merged["held_env_steps"]
    merged["suspended_fraction"] = merged["suspended_env_steps"] / env_steps if env_steps else 0.0
    merged["active_env_steps_per_s"] = merged["active_env_steps"] / merged["wall_s"] if merged["wall_s"] else 0.0
    weights = {key: "episodes_scored" for key in ("mean_episode_length", "success_rate")}
    weights.update({key: "active_env_steps" for key in ROUGHNESS if key in shards[0]})
    for key, weight in weights.items():
        scored = [(s[weight], s[key]) for s in shards if s[weight] and not math.isnan(s[key])]
        total = sum(n for n, _ in scored)
        merged[key] = sum(n * value for n, value in scored) / total if total else float("nan")
    return merged


SHARD_NAME = re.compile(r"(.*)-shard(\d+)of(\d+)(\.[^./]*)?")
"""A shard's file name, :meth:`Shard.path`: groups stem, index, count, extension."""


def missing_shards(paths: Sequence[str]) -> list[str]:
    """The files of the shard sets among ``paths`` that are not there: a file named ``<stem>-shard<i>of<K><ext>``
    (as :meth:`Shard.path` names them) belongs to the set of K shards of ``<stem><ext>``, whose other files must
    be among ``paths`` too. Files named otherwise belong to no set."""
    sets: dict[tuple[str, int, str], set[int]] = {}
    for path in paths:
        match = SHARD_NAME.fullmatch(os.path.abspath(path))
        if match:
            sets.setdefault((match[1], int(match[3]), match[4]), set()).add(int(match[2]))
    return [f"{stem}-shard{i}of{count}{ext}" for (stem, count, ext), present in sets.items()
            for i in range(count) if i not in present]


def same_file(path: str, other: str) -> bool:
    """Whether two paths name one file: the same path, or, where both exist, the same inode and device (a
    symlink or hard link to it)."""
    if os.path.abspath(path) == os.path.abspath(other):
        return True
    return os.path.exists(path) and os.path.exists(other) and os.path.samefile(path, other)


def check_shard_set(paths: Sequence[str], partial: bool = False) -> None:
    """Raise if a file is named twice (by identity: a link to another counts), or, unless ``partial``, if a
    shard of a set among ``paths`` is missing (see :func:`missing_shards`).

    Raises:
        ValueError: Naming the files.
    """
    for i, path in enumerate(paths):
        for other in paths[:i]:
            if same_file(path, other):
                raise ValueError(f"'{path}' and '{other}' are the same file: name each shard once.")
    missing = [] if partial else missing_shards(paths)
    if missing:
        raise ValueError(f"{len(missing)} shards of the set are missing: {missing}. Merge every shard, or pass"
                         " --partial to merge the ones given.")


MERGED_FROM = ("steps", "num_envs", "inference_calls", "envs_served", "active_env_steps", "suspended_env_steps",
               "held_env_steps", "wall_s", "episodes_scored", "mean_episode_length", "success_rate")
"""Figures :func:`merge_stats` reads from every shard."""


def read_results(path: str) -> dict:
    """The figures a shard's ``eval.py --results`` wrote to ``path``: ``{"header": str, "schedules": {name:
    figures}}``, each figures dict holding the numbers of :data:`MERGED_FROM`.

    Raises:
        FileNotFoundError: If there is no such file.
        ValueError: Naming the file and what it lacks, if it is not such a file.
    """
    with open(path) as f:
        try:
            results = json.load(f)
        except ValueError as err:
            raise ValueError(f"'{path}' is not a JSON file of eval.py --results ({err}).") from None
    schedules = results.get("schedules") if isinstance(results, dict) else None
    if not (isinstance(schedules, dict) and schedules and isinstance(results.get("header"), str)):
        raise ValueError(f"'{path}' is not a JSON file of eval.py --results (a 'header' text and the figures of each"
                         " of its 'schedules').")
    check_figures(path, schedules)
    return results


def check_figures(path: str, schedules: dict, files: str = "the --results files of eval.py") -> None:
    """Raise unless ``schedules`` (run name -> figures, read from ``path``) holds runs whose figures have the
    numbers of :data:`MERGED_FROM`; ``files`` names what to merge instead.

    Raises:
        ValueError: Naming the file, the run and the numbers it lacks.
    """
    if not schedules:
        raise ValueError(f"'{path}' holds no run's figures; merge {files}.")
    for name, figures in schedules.items():
        missing = [key for key in MERGED_FROM if not isinstance(figures, dict) or isinstance(figures.get(key), bool)
                   or not isinstance(figures.get(key), (int, float))]
        if missing:
            raise ValueError(f"'{path}': the figures of schedule '{name}' lack the numbers {missing}; merge {files}.")


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

    Every demo is read through :meth:`DatasetReader.load_episode` (checked: nothing from outside its file, no NaN
    or inf, as replay and export refuse them). The merge is written to a temporary file beside ``output`` and
    renamed to it once complete (:func:`~isaaclab_suspend.recording.part_files.whole_file`), so a failure, Ctrl-C
    or SIGTERM (raised as ``KeyboardInterrupt`` meanwhile) leaves no partial output and an existing ``output``
    untouched; an ``output`` that is one of ``paths`` (the same file under any name: a symlink or hard link) is
    refused.

    Raises:
        FileNotFoundError: If a shard file is missing.
        DatasetError: If a shard is not a dataset, a demo is refused (a NaN or inf among them) or cannot be read
            or written (naming the file and the demo), ``output`` is one of ``paths`` or its folder cannot be made,
            or the shards were recorded on different tasks.
        KeyboardInterrupt: On Ctrl-C or SIGTERM (the temporary file removed).
    """
    output = os.path.abspath(output)
    for path in paths:
        if same_file(path, output):
            raise DatasetError(f"The output '{output}' is the shard '{path}' (the same file): write the merge to a"
                               " new file.")
    shards = []
    for path in paths:
        with DatasetReader(path) as reader:
            if shards and reader.env_name != shards[0][1]["env_name"]:
                raise DatasetError(f"'{path}' was recorded on '{reader.env_name}', '{shards[0][0]}' on"
                                   f" '{shards[0][1]['env_name']}': merge the shards of one task.")
            shards.append((reader.path, reader.env_args, reader.demo_names))
    try:
        os.makedirs(os.path.dirname(output), exist_ok=True)
    except OSError as err:  # e.g. a file on the way: "File exists" alone would not say which or why
        raise DatasetError(f"Cannot make the folder of the output '{output}': {err.strerror} ('{err.filename}');"
                           " choose another path.") from None
    writer = HDF5DatasetFileHandler()
    with whole_file(output) as temporary:
        try:
            writer.create(temporary)
            writer.add_env_args(shards[0][1])
            episodes = samples = 0
            for path, _, names in shards:
                with DatasetReader(path) as reader:
                    for demo in names:
                        episode = reader.load_episode(demo, "cpu")
                        try:
                            writer.write_episode(episode)
                        except (OSError, ValueError, TypeError, KeyError) as err:
                            raise DatasetError(f"'{output}': demo '{demo}' of '{path}' cannot be written:"
                                               f" {err}") from err
                        episodes, samples = episodes + 1, samples + len(episode.data["actions"])
            writer.flush()
        except BaseException:
            with contextlib.suppress(Exception):
                writer.close()
            raise
        writer.close()
    return episodes, samples
