"""``eval.py``'s figures beside its table (the arguments: :func:`~.arguments.add_report_args`): the timeline PNG,
and with ``--report DIR`` the run log (``DIR/episodes.jsonl``) and the HTML report made from it
(``DIR/report.html``; :mod:`isaaclab_suspend.policies.evaluation.report`)."""

from __future__ import annotations

import argparse
import math
import os

from ..policies.evaluation import (ChunkTimeline, EpisodeFrames, EvalReportCfg, plot_timelines, provenance,
                                   write_report, write_run_log)
from .arguments import env_overrides
from .episodes import describe_scoring
from .policy import describe_policy

LOG_NAME = "episodes.jsonl"
"""The run log's name in the report folder."""
FRAME_ENVS = 4
"""Envs whose camera frames a report keeps (the first ones)."""
FRAMES_PER_EPISODE = 12
"""Frames kept per episode of the task's full length (the stride between two is the episode length over this)."""


class RunFigures:
    """What ``eval.py`` keeps of a run beside its figures: the timeline of the first ``--timeline_envs`` envs and,
    on a camera task with ``--report``, the frames of the first :data:`FRAME_ENVS` envs (first camera)."""

    def __init__(self, args: argparse.Namespace, env, obs: dict):
        self.timeline = ChunkTimeline(min(args.timeline_envs, env.num_envs))
        images = obs.get("images") if args.report else None
        stride = max(int(env.max_episode_length) // FRAMES_PER_EPISODE, 1)
        self.frames = EpisodeFrames(next(iter(images)), min(FRAME_ENVS, env.num_envs), stride) if images else None

    def record(self, status, step: int, obs: dict, dones) -> None:
        """Account step ``step``: the policy's ``last_step`` status, the observation it acted on, the step's dones."""
        self.timeline.record(status, dones)
        if self.frames is not None:
            self.frames.record(step, obs)

    def strips(self, episodes: list[dict]) -> list[dict]:
        """Frame strips of a few of ``episodes`` (none without a camera)."""
        return self.frames.strips(episodes) if self.frames is not None else []


def write_eval_outputs(args: argparse.Namespace, header: str, runs: dict) -> list[str]:
    """Write the ``--timeline`` PNG of ``runs`` (per schedule its figures, episode records and
    :class:`RunFigures`) and the ``--report`` (run log and page), those that are asked for; returns a line per file saying where it is."""
    written = []
    if args.timeline:
        plot_timelines({name: run[2].timeline for name, run in runs.items()}, args.timeline, title=header)
        written.append(f"Timeline of the first {min(args.timeline_envs, args.num_envs)} envs: {args.timeline}")
    if args.report:
        written.append(f"Report (open it in a browser): {write_eval_report(args, header, runs)}")
    return written


def write_eval_report(args: argparse.Namespace, header: str, runs: dict) -> str:
    """Write the run log of ``runs`` and its report into ``args.report``; returns the page's path."""
    has_success = any(not math.isnan(figures.get("success_rate", math.nan)) for figures, _, _ in runs.values())
    schedules = {name: (figures, episodes, kept.timeline, kept.strips(episodes))
                 for name, (figures, episodes, kept) in runs.items()}
    run = {"header": header, "scoring": describe_scoring(args), "per_env": args.episodes_per_env,
           "num_envs": args.num_envs, "has_success": has_success,
           "provenance": provenance(args.task, env_overrides(args), args.seed, args.device, describe_policy(args))}
    log = write_run_log(os.path.join(args.report, LOG_NAME), run, schedules)
    return write_report(EvalReportCfg(log_path=log))
