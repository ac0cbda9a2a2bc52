"""``eval.py --report DIR``: the run log (``DIR/episodes.jsonl``) and the HTML report made from it
(``DIR/report.html``; :mod:`isaaclab_suspend.policies.evaluation.report`)."""

from __future__ import annotations

import argparse
import math
import os

from ..policies.evaluation import EvalReportCfg, provenance, write_report, write_run_log
from .arguments import env_overrides
from .episodes import describe_scoring
from .policy import describe_policy

LOG_NAME = "episodes.jsonl"
"""The run log's name in the report folder."""


def write_eval_report(args: argparse.Namespace, header: str, runs: dict) -> str:
    """Write the run log of ``runs`` (per schedule its figures, episode records and timeline) and its report into
    ``args.report``; returns the page's path."""
    run = {"header": header, "scoring": describe_scoring(args), "per_env": args.episodes_per_env,
           "num_envs": args.num_envs, "has_success": any(not math.isnan(r[0].get("success_rate", math.nan)) for r in runs.values()),
           "provenance": provenance(args.task, env_overrides(args), args.seed, args.device, describe_policy(args))}
    log = write_run_log(os.path.join(args.report, LOG_NAME), run, runs)
    return write_report(EvalReportCfg(log_path=log))
