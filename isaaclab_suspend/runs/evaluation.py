"""An evaluation: a chunk model run under one or several chunk schedules, each on a fresh env with the same seed,
with its figures, the records of the episodes it counted, the timeline of the first envs and, on a camera task,
frames of a few episodes; optionally each schedule's episodes recorded to HDF5 and the run's HTML report.

Example::

    from isaaclab_suspend.runs import EmbeddedModelCfg, EvaluationCfg, RunEnvCfg, evaluate

    runs = evaluate(EvaluationCfg(env=RunEnvCfg(task="Isaac-Cartpole-Suspendable", num_envs=32, desync=True),
                                  model=EmbeddedModelCfg(chunk_length=16), schedules=["any", "global_clock"]))
    print(runs["global_clock"].figures["inference_calls"])
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tqdm import tqdm

from isaaclab.utils import configclass

from ..chunking import ActionChunkingPolicyCfg, LatencyCfg
from .report import (ChunkTimeline, EpisodeFrames, EvalReportCfg, plot_timelines, run_provenance, write_report,
                     write_run_log)
from .chunk_models import ChunkModelSource, EmbeddedModelCfg, ModelCfg, make_chunking_policy
from .recording import dataset_recorder_cfg
from .rollout import rollout, start_episodes
from .run_env import RunEnvCfg, make_ledger, open_run_env

REPORT_LOG = "episodes.jsonl"
"""The run log's name in a report folder."""
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
    """Where the chunk model comes from (:data:`~.chunk_models.CHUNK_MODELS`)."""
    chunking: ActionChunkingPolicyCfg = ActionChunkingPolicyCfg(chunk_length=None, schedule=None,
                                                                observation_demand=True)
    """The chunking policy around the model (aggregator, refill threshold, RTC overlap, TensorBoard directory:
    one sub-directory per schedule, observation demand: cameras render at model calls only); its ``schedule``
    is each of :attr:`schedules` and its ``chunk_length`` the model's: others are refused."""
    schedules: list[str] = ["global_clock"]
    """Chunk schedules, run one after the other."""
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
    """A progress bar per schedule."""


@dataclass
class ScheduleRun:
    """What an evaluation keeps of one schedule."""

    figures: dict
    """The chunking policy's figures and those of the counted episodes (success rate, lengths, ...)."""
    episodes: list[dict]
    """A record per counted episode (:meth:`~isaaclab_suspend.runs.EpisodeLedger.records`)."""
    timeline: ChunkTimeline
    """What the first envs did at each step."""
    frames: EpisodeFrames | None
    """Frames of the first envs' episodes (camera tasks with ``frames``), else None."""

    def strips(self) -> list[dict]:
        """Frame strips of a few episodes (none without frames)."""
        return self.frames.strips(self.episodes) if self.frames is not None else []


def schedule_suffixes(schedules: Sequence[str]) -> dict[str, str]:
    """The suffix of each schedule's files: ``_<schedule>`` when there are several, else none."""
    return {s: f"_{s}" if len(schedules) > 1 else "" for s in schedules}


def evaluate(cfg: EvaluationCfg, source: ChunkModelSource | None = None,
             open_env: Callable = open_run_env) -> dict[str, ScheduleRun]:
    """Run ``cfg``'s model under each of its schedules; the runs by schedule name.

    Args:
        source: ``cfg.model`` already opened (a script opens it while parsing); None: opened here.
        open_env: Opens a :class:`~.run_env.RunEnvCfg`'s env as a context manager (a script's adds its error lines).

    Raises:
        ValueError: If the model does not fit the env (see :meth:`~.chunk_models.ChunkModelSource.make`).
    """
    source = source or open_source(cfg)
    env_cfg = cfg.env.replace(task=source.task)
    suffixes = schedule_suffixes(cfg.schedules)
    return {s: _run_schedule(cfg, env_cfg, source, s, suffixes[s], open_env) for s in cfg.schedules}


def open_source(cfg: EvaluationCfg) -> ChunkModelSource:
    """``cfg.model`` opened for ``cfg.env.task`` with ``cfg``'s latency."""
    latency = LatencyCfg.parse(cfg.latency, virtual=cfg.virtual_latency) if cfg.latency else None
    return ChunkModelSource(cfg.model, cfg.env.task, cfg.env.device, latency)


def _run_schedule(cfg: EvaluationCfg, env_cfg: RunEnvCfg, source: ChunkModelSource, schedule: str, suffix: str,
                  open_env: Callable) -> ScheduleRun:
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
        with tqdm(total=cfg.steps, desc=f"{schedule:>13}", unit="step", disable=not cfg.show_progress) as bar:
            for t in rollout(env, policy, obs, cfg.steps, ledger):
                timeline.record(policy.last_step, t.dones)
                if frames is not None:
                    frames.record(t.step, t.obs)
                bar.update()
                if t.step % 20 == 0:
                    bar.set_postfix(calls=policy.stats_counters.inference_calls)
        policy.close()
        records = ledger.records()
        return ScheduleRun({**policy.stats, **ledger.as_dict(records)}, records, timeline, frames)


def write_timeline(runs: dict[str, ScheduleRun], path: str, title: str) -> str:
    """Plot the runs' timelines side by side into the PNG ``path``; returns it."""
    plot_timelines({name: run.timeline for name, run in runs.items()}, path, title=title)
    return path


def write_evaluation_report(cfg: EvaluationCfg, runs: dict[str, ScheduleRun], folder: str, header: str,
                            scoring: str, policy: str) -> str:
    """Write the run log of ``runs`` (``folder/episodes.jsonl``) and the HTML report made from it
    (``folder/report.html``); returns the page's path. ``header``, ``scoring`` (which episodes were counted) and
    ``policy`` are the run's words for the page."""
    has_success = any(not math.isnan(run.figures.get("success_rate", math.nan)) for run in runs.values())
    schedules = {name: (run.figures, run.episodes, run.timeline, run.strips()) for name, run in runs.items()}
    run = {"header": header, "scoring": scoring, "per_env": cfg.episodes_per_env, "num_envs": cfg.env.num_envs,
           "has_success": has_success,
           "provenance": run_provenance(cfg.env.task, cfg.env.overrides, cfg.env.seed, cfg.env.device, policy)}
    log = write_run_log(os.path.join(folder, REPORT_LOG), run, schedules)
    return write_report(EvalReportCfg(log_path=log))
