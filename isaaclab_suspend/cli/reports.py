"""``eval.py``'s figures beside its table (the arguments: :func:`~.arguments.add_report_args`): the timeline PNG,
and with ``--report DIR`` the run log (``DIR/episodes.jsonl``) and the HTML report made from it
(``DIR/report.html``; :mod:`isaaclab_suspend.policies.evaluation.report`)."""

from __future__ import annotations

import argparse
import math
import os

from ..policies.evaluation import EvalReportCfg, plot_timelines, provenance, write_report, write_run_log
from .arguments import env_overrides
from .episodes import describe_scoring
from .policy import describe_policy

LOG_NAME = "episodes.jsonl"
"""The run log's name in the report folder."""


def write_eval_outputs(args: argparse.Namespace, header: str, runs: dict) -> list[str]:
    """Write the ``--timeline`` PNG of ``runs`` (per schedule its figures, episode records and timeline) and the
    ``--report`` (run log and page), those that are asked for; returns a line per file saying where it is."""
    written = []
    if args.timeline:
        plot_timelines({name: run[2] for name, run in runs.items()}, args.timeline, title=header)
        written.append(f"Timeline of the first {min(args.timeline_envs, args.num_envs)} envs: {args.timeline}")
    if args.report:
        written.append(f"Report (open it in a browser): {write_eval_report(args, header, runs)}")
    return written


def write_eval_report(args: argparse.Namespace, header: str, runs: dict) -> str:
    """Write the run log of ``runs`` and its report into ``args.report``; returns the page's path."""
    has_success = any(not math.isnan(figures.get("success_rate", math.nan)) for figures, _, _ in runs.values())
    run = {"header": header, "scoring": describe_scoring(args), "per_env": args.episodes_per_env,
           "num_envs": args.num_envs, "has_success": has_success,
           "provenance": provenance(args.task, env_overrides(args), args.seed, args.device, describe_policy(args))}
    log = write_run_log(os.path.join(args.report, LOG_NAME), run, runs)
    return write_report(EvalReportCfg(log_path=log))
