"""``eval.py``'s figures beside its table (the arguments: :func:`~.arguments.add_report_args`): the timeline PNG,
and with ``--report DIR`` the run log (``DIR/episodes.jsonl``) and the HTML report made from it
(``DIR/report.html``; :func:`isaaclab_suspend.runs.write_evaluation_report`)."""

from __future__ import annotations

import argparse

from ..runs import ScheduleRun, write_evaluation_report, write_timeline
from .episodes import describe_scoring
from .policy import describe_policy
from .run_cfgs import evaluation_cfg


def write_eval_outputs(args: argparse.Namespace, header: str, runs: dict[str, ScheduleRun]) -> list[str]:
    """Write the ``--timeline`` PNG of ``runs`` and the ``--report`` (run log and page), those that are asked for;
    returns a line per file saying where it is."""
    written = []
    if args.timeline:
        write_timeline(runs, args.timeline, header)
        written.append(f"Timeline of the first {min(args.timeline_envs, args.num_envs)} envs: {args.timeline}")
    if args.report:
        page = write_evaluation_report(evaluation_cfg(args), runs, args.report, header, describe_scoring(args),
                                       describe_policy(args))
        written.append(f"Report (open it in a browser): {page}")
    return written
