"""An evaluation: one or several chunk models (arms) run under one or several chunk schedules, each pair on a fresh
env with the same seed, with its figures, the records of the episodes it counted, the timeline of the first envs
and, on a camera task, frames of a few episodes; optionally each run's episodes recorded to HDF5 and the run's HTML
report. Every two runs get a verdict (:mod:`.paired`): which is better, by how much, how sure.

Example::

    from isaaclab_suspend.runs import EmbeddedModelCfg, EvaluationCfg, RunEnvCfg, evaluate, verdicts

    runs = evaluate(EvaluationCfg(env=RunEnvCfg(task="Isaac-Cartpole-Suspendable", num_envs=32, desync=True),
                                  model=EmbeddedModelCfg(chunk_length=16), schedules=["any", "global_clock"]))
    print(runs["global_clock"].figures["inference_calls"])

    # two policies on the same (env, episode) grid: the planner and the planner at 0.6x its actions
    runs = evaluate(EvaluationCfg(env=RunEnvCfg(task="Isaac-PushCube-Suspendable", num_envs=8, desync=True),
                                  models={"A": EmbeddedModelCfg(), "B": EmbeddedModelCfg(action_scale=0.6)},
                                  steps=None, episodes_per_env=2))
    print(verdicts(runs)[0]["sentence"])
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tqdm import tqdm

from isaaclab.utils import configclass

from ..chunking import ActionChunkingPolicyCfg, ChunkScheduleCfg, LatencyCfg, schedule_name
from ..chunking.schedules import SCHEDULES
from ..datasets.shards import check_figures, merge_results
from .report import (ChunkTimeline, EpisodeFrames, EvalReportCfg, plot_timelines, read_run_log, run_provenance,
                     write_report, write_run_log)
from .chunk_models import ChunkModelSource, EmbeddedModelCfg, ModelCfg, make_chunking_policy
from .outputs import check_output, new_file
from .paired import has_success, run_verdicts
from .recording import check_chunks, check_datasets, dataset_recorder_cfg
from .rollout import rollout, start_episodes
from .run_env import RunEnvCfg, check_int, make_ledger, open_run_env

REPORT_LOG = "episodes.jsonl"
"""The run log's name in a report folder."""
REPORT_PAGE = "report.html"
"""The page's name in a report folder."""
FRAME_ENVS = 4
"""Envs whose camera frames a report keeps (the first ones)."""
FRAMES_PER_EPISODE = 12
"""Frames kept per episode of the task's full length (the stride between two is the episode length over this)."""


@configclass
class EvaluationCfg:
    """An evaluation of a chunk model under chunk schedules (:func:`evaluate`)."""

    env: RunEnvCfg = RunEnvCfg()
    """The env each schedule runs on (a fresh one each)."""
    model: ModelCfg = EmbeddedModelCfg()
    """Where the chunk model comes from (:data:`~.chunk_models.CHUNK_MODELS`); unused when :attr:`models` names
    arms."""
    models: dict[str, ModelCfg] = {}
    """Arms compared on the same (env, episode) grid, by name (e.g. ``{"A": ..., "B": ...}``), each run under every
    schedule on the same task; empty: :attr:`model` alone. Give ``episodes_per_env`` (and ``steps`` None) to
    score the same episodes in every arm, which the verdict needs to pair them."""
    chunking: ActionChunkingPolicyCfg = ActionChunkingPolicyCfg(chunk_length=None, schedule=None,
                                                                observation_demand=True)
    """The chunking policy around the model (aggregator, refill threshold, RTC overlap, TensorBoard directory:
    one sub-directory per schedule, observation demand: cameras render at model calls only); its ``schedule``
    is each of :attr:`schedules` and its ``chunk_length`` the model's: others are refused."""
    schedules: list[str | ChunkScheduleCfg] = ["global_clock"]
    """Chunk schedules, run one after the other: names (each schedule's default cfg) or cfgs
    (:mod:`~isaaclab_suspend.chunking.schedules`)."""
    latency: str | None = None
    """Emulated inference latency (``"0.2"``, ``"0.05+0.002n"``, ``"gr1"``, ``"droid"``; None: none)."""
    virtual_latency: bool = False
    """Account the latency without sleeping."""
    steps: int | None = 600
    """Steps per schedule (None: until every env ended ``episodes_per_env`` episodes)."""
    episodes_per_env: int | None = None
    """Score exactly this many episodes from every env, not the first to finish (give ``steps`` None)."""
    record: str | None = None
    """HDF5 file of each schedule's completed episodes, active env-steps only (``<stem>_<schedule>.hdf5`` with
    several schedules); None: no recording."""
    timeline_envs: int = 16
    """Envs kept in each schedule's timeline."""
    frames: bool = False
    """On a camera task, keep frames of the first envs' episodes (for the report's strips); the frames are taken
    between model calls, so the cameras render every step (no observation demand)."""
    show_progress: bool = True
    """A progress bar per run."""
    overwrite: bool = False
    """Replace files that exist: the ``record`` datasets, and the report and timeline written for the run
    (:func:`write_evaluation_report`, :func:`write_timeline`); else they are refused."""

    def validate_config(self) -> None:
        """Check every field before any env is built; Isaac Lab's ``validate()`` calls it after the env's
        (:meth:`~.run_env.RunEnvCfg.validate_config`), and :func:`evaluate` calls that first: known ``schedules``,
        one of ``steps`` and ``episodes_per_env`` (each >= 1), ``timeline_envs`` >= 1, the ``latency``, the chunk
        queues' memory where a model cfg sets H (:func:`~isaaclab_suspend.runs.recording.check_chunks`) and the
        ``record`` datasets.

        Raises:
            ValueError: One line naming the field, its value and what it must be.
        """
        names = [schedule_name(s) for s in self.schedules] if isinstance(self.schedules, list) else []
        if not names or any(name not in SCHEDULES for name in names):
            raise ValueError(f"EvaluationCfg.schedules must be a non-empty list of {sorted(SCHEDULES)} (names or"
                             f" their cfgs), got {self.schedules!r}.")
        if (self.steps is None) == (self.episodes_per_env is None):
            raise ValueError("EvaluationCfg: give one of steps and episodes_per_env (the other None).")
        check_int("EvaluationCfg.steps" if self.steps is not None else "EvaluationCfg.episodes_per_env",
                  self.steps if self.steps is not None else self.episodes_per_env, 1)
        check_int("EvaluationCfg.timeline_envs", self.timeline_envs, 1)
        if self.latency is not None:
            LatencyCfg.parse(self.latency)
        for model in self.models.values() if self.models else [self.model]:
            check_chunks(getattr(model, "chunk_length", None), self.env.num_envs)
        if self.record:
            for suffix in schedule_suffixes(list(run_names(list(self.models), names))).values():
                check_datasets(self.record, self.overwrite, "EvaluationCfg.record", suffix)


@dataclass
class ScheduleRun:
    """What an evaluation keeps of one run: one arm (model) under one schedule."""

    figures: dict
    """The chunking policy's figures and those of the counted episodes (success rate, lengths, ...)."""
    episodes: list[dict]
    """A record per counted episode (:meth:`~isaaclab_suspend.runs.EpisodeLedger.records`)."""
    timeline: ChunkTimeline
    """What the first envs did at each step."""
    frames: EpisodeFrames | None
    """Frames of the first envs' episodes (camera tasks with ``frames``), else None."""
    schedule: str = ""
    """The chunk schedule it ran under."""
    policy: str = ""
    """Its model in a few words (:meth:`~.chunk_models.ChunkModelSource.describe`)."""

    def strips(self) -> list[dict]:
        """Frame strips of a few episodes (none without frames)."""
        return self.frames.strips(self.episodes) if self.frames is not None else []

    def verdict_record(self) -> dict:
        """What a verdict reads of this run besides its figures, named as a run log's schedule record names it:
        ``episodes``, ``policy``, ``chunk_schedule`` (``paired.run_verdicts``; a torchrun rank hands it to
        rank 0)."""
        return {"episodes": self.episodes, "policy": self.policy, "chunk_schedule": self.schedule}


def schedule_suffixes(names: Sequence[str]) -> dict[str, str]:
    """The suffix of each run's files (its name, :func:`run_names`): ``_<name>`` when there are several, else
    none."""
    return {s: f"_{s}" if len(names) > 1 else "" for s in names}


def run_names(arms: Sequence[str], schedules: Sequence[str]) -> dict[str, tuple[str | None, str]]:
    """The name of each run of ``arms`` (empty: one model) crossed with ``schedules``, and its ``(arm,
    schedule)``: the schedule alone with one model, the arm alone with one schedule, else ``<arm>_<schedule>``."""
    if not arms:
        return {s: (None, s) for s in schedules}
    if len(schedules) == 1:
        return {a: (a, schedules[0]) for a in arms}
    return {f"{a}_{s}": (a, s) for a in arms for s in schedules}


def evaluate(cfg: EvaluationCfg, source: ChunkModelSource | dict[str, ChunkModelSource] | None = None,
             open_env: Callable = open_run_env) -> dict[str, ScheduleRun]:
    """Run each of ``cfg``'s models under each of its schedules; the runs by name (:func:`run_names`).

    Args:
        source: ``cfg.model`` already opened, or with :attr:`EvaluationCfg.models` each arm's by name (a script
            opens them while parsing); None: opened here.
        open_env: Opens a :class:`~.run_env.RunEnvCfg`'s env as a context manager (a script's adds its error lines).

    Raises:
        ValueError: If ``cfg`` is refused (:meth:`EvaluationCfg.validate_config`, before any env is built), a model
            does not fit the env (see :meth:`~.chunk_models.ChunkModelSource.make`) or the arms run on different
            tasks.
    """
    cfg.validate()
    sources = source if isinstance(source, dict) else open_sources(cfg) if source is None else {None: source}
    for opened in sources.values():
        check_chunks(opened.chunk_length, cfg.env.num_envs)
    tasks = {s.task for s in sources.values()}
    if len(tasks) > 1:
        raise ValueError(f"The arms of an evaluation run on one task; these run on {sorted(tasks)}.")
    env_cfg = cfg.env.replace(task=tasks.pop())
    schedules = {schedule_name(s): s for s in cfg.schedules}
    names = run_names([a for a in sources if a is not None], list(schedules))
    suffixes = schedule_suffixes(list(names))
    return {name: _run_schedule(cfg, env_cfg, sources[arm], schedules[schedule], suffixes[name], open_env)
            for name, (arm, schedule) in names.items()}


def open_source(cfg: EvaluationCfg, model: ModelCfg | None = None) -> ChunkModelSource:
    """``model`` (default ``cfg.model``) opened for ``cfg.env.task`` with ``cfg``'s latency."""
    latency = LatencyCfg.parse(cfg.latency, virtual=cfg.virtual_latency) if cfg.latency else None
    return ChunkModelSource(model or cfg.model, cfg.env.task, cfg.env.device, latency)


def open_sources(cfg: EvaluationCfg) -> dict[str | None, ChunkModelSource]:
    """Each arm of :attr:`EvaluationCfg.models` opened, by name; ``{None: cfg.model opened}`` without arms."""
    if not cfg.models:
        return {None: open_source(cfg)}
    return {name: open_source(cfg, model) for name, model in cfg.models.items()}


def verdicts(runs: dict[str, ScheduleRun]) -> list[dict]:
    """The verdict on every two of ``runs`` that differ in their policy or in their schedule, not both
    (``paired.run_verdicts``, the later against the earlier). ``runs`` are one shard's: over every shard of a run
    split into several, see :func:`merge_shard_logs` (under torchrun ``eval.py``'s rank 0 gathers them itself)."""
    return run_verdicts([{name: run.verdict_record() for name, run in runs.items()}],
                        {name: run.figures for name, run in runs.items()})


def merge_shard_logs(paths: Sequence[str]) -> tuple[str, dict[str, dict], list[dict]]:
    """The run logs of an evaluation's shards (each a run folder, holding its log ``episodes.jsonl``, or the log
    itself; ``eval.py --shard I/K``'s or torchrun's ranks', in shard order) as one run's: the shards' headers, each
    run's figures merged (``datasets.shards.merge_results``) and the verdicts over every shard's episodes, each
    paired within its shard (``paired.run_verdicts``: the same env index in two shards is two envs).

    Raises:
        FileNotFoundError: If a log is not there.
        ValueError: If a log is not a run log of ``eval.py`` (one line naming it), its figures lack a number the
            merge reads, or the shards ran different runs.
    """
    logs = [os.path.join(path, REPORT_LOG) if os.path.isdir(path) else path for path in paths]
    for log in logs:
        if not os.path.isfile(log):
            raise FileNotFoundError(f"'{log}' is not there: give each shard's run folder of eval.py (its --output,"
                                    f" which holds the run log {REPORT_LOG} unless --report '') or that log.")
    shards = [read_run_log(log) for log in logs]
    results = [{"header": run["header"], "schedules": {name: s["figures"] for name, s in schedules.items()}}
               for run, schedules in shards]
    for log, shard in zip(logs, results):
        check_figures(log, shard["schedules"], "the run logs of eval.py")
    merged = merge_results(results)
    success = any(run["has_success"] for run, _ in shards)
    return merged["header"], merged["schedules"], run_verdicts([s for _, s in shards], merged["schedules"], success)


def _run_schedule(cfg: EvaluationCfg, env_cfg: RunEnvCfg, source: ChunkModelSource, schedule: str | ChunkScheduleCfg,
                  suffix: str, open_env: Callable) -> ScheduleRun:
    with open_env(env_cfg) as env:
        chunking = cfg.chunking.replace(observation_demand=False) if cfg.frames else cfg.chunking
        policy = make_chunking_policy(chunking, source, env, schedule)  # does not fit: before any file
        if cfg.record:
            env.start_recording(dataset_recorder_cfg(cfg.record, suffix))
        obs = start_episodes(env, env_cfg.seed, env_cfg.desync)
        timeline = ChunkTimeline(min(cfg.timeline_envs, env.num_envs))
        images = obs.get("images") if cfg.frames else None
        stride = max(int(env.max_episode_length) // FRAMES_PER_EPISODE, 1)
        frames = EpisodeFrames(next(iter(images)), min(FRAME_ENVS, env.num_envs), stride) if images else None
        ledger = make_ledger(env_cfg, env, policy, per_env=cfg.episodes_per_env,
                             export="all" if cfg.record else None)
        name = f"{suffix[1:] or policy.schedule.name:>13}"
        with tqdm(total=cfg.steps, desc=name, unit="step", disable=not cfg.show_progress) as bar:
            for t in rollout(env, policy, obs, cfg.steps, ledger):
                timeline.record(policy.last_step, t.dones)
                if frames is not None:
                    frames.record(t.step, t.obs)
                bar.update()
                if t.step % 20 == 0:
                    bar.set_postfix(calls=policy.stats_counters.inference_calls)
            policy.close()
            figures = policy.stats
            bar.total = bar.n  # a quota met before the last step ends the bar full, with the table's call count
            bar.set_postfix(calls=figures["inference_calls"])
        records = ledger.records()
        return ScheduleRun({**figures, **ledger.as_dict(records)}, records, timeline, frames, policy.schedule.name,
                           source.describe())


def write_timeline(runs: dict[str, ScheduleRun], path: str, title: str, overwrite: bool = False) -> str:
    """Plot the runs' timelines side by side into the PNG ``path``, written whole
    (:func:`~isaaclab_suspend.runs.outputs.new_file`); returns its absolute path.

    Raises:
        ValueError: If ``path`` exists and not ``overwrite``, or is a symbolic link or a folder.
    """
    with new_file(path, overwrite, "timeline", mode="wb") as file:
        plot_timelines({name: run.timeline for name, run in runs.items()}, file, title=title)
    return os.path.abspath(path)


def write_evaluation_report(cfg: EvaluationCfg, runs: dict[str, ScheduleRun], folder: str, header: str,
                            scoring: str, policy: str) -> str:
    """Write the run log of ``runs`` (``folder/episodes.jsonl``) and the HTML report made from it
    (``folder/report.html``), each written whole; returns the page's path. ``header``, ``scoring`` (which episodes
    were counted) and ``policy`` are the run's words for the page.

    Raises:
        ValueError: If either file exists and not ``cfg.overwrite``, or is a symbolic link or a folder (nothing
            is written then).
    """
    for name in (REPORT_LOG, REPORT_PAGE):
        check_output(os.path.join(folder, name), cfg.overwrite, "report")
    schedules = {name: (run.figures, run.episodes, run.timeline, run.strips(),
                        {"chunk_schedule": run.schedule, "policy": run.policy}) for name, run in runs.items()}
    success = has_success(run.figures for run in runs.values())
    run = {"header": header, "scoring": scoring, "per_env": cfg.episodes_per_env, "num_envs": cfg.env.num_envs,
           "has_success": success, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "latency": cfg.latency, "virtual_latency": cfg.virtual_latency,
           "provenance": run_provenance(cfg.env.task, cfg.env.overrides, cfg.env.seed, cfg.env.device, policy)}
    log = write_run_log(os.path.join(folder, REPORT_LOG), run, schedules)
    return write_report(EvalReportCfg(log_path=log, overwrite=True))  # checked above
