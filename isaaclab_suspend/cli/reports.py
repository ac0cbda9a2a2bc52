"""``eval.py``'s figures beside its table (the arguments: :func:`~.arguments.add_report_args`): one folder per run
(``--output``, by default a new ``outputs/eval/<date>_<task>_<n>``) holding the run log (``episodes.jsonl``), the
HTML report made from it (``report.html``; :func:`isaaclab_suspend.runs.write_evaluation_report`), the timeline PNG
and the figures (``results.json``). Nothing of an earlier run is replaced unless ``--overwrite`` is given."""

from __future__ import annotations

import argparse
import os

from ..runs import ScheduleRun, write_evaluation_report, write_timeline
from ..runs.evaluation import REPORT_LOG, REPORT_PAGE
from ..runs.outputs import check_output, new_run_folder
from .distributed import merged_path
from .episodes import describe_scoring
from .policy import deprecated, describe_policy
from .run_cfgs import evaluation_cfg

TIMELINE = "timeline.png"
"""The timeline's name in a run's folder."""
RESULTS = "results.json"
"""The figures' name in a run's folder."""


def take_report_alias(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """``--report DIR`` (0.4's) as ``--output DIR``, with a deprecation line; ``--report ''`` (no page) stays."""
    if args.report:
        deprecated("--report DIR", "--output DIR (the run's folder)")
        if args.output:
            parser.error("--report DIR and --output DIR both name the run's folder: pass --output only")
        args.output, args.report = args.report, None


def apply_output_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Resolve the run's folder and its files once the task is known (``parser.error`` on a refusal): a new
    default folder where something goes in it, the report there unless ``--report ''``, the timeline and results
    there unless given elsewhere; each file new unless ``--overwrite``
    (:func:`~isaaclab_suspend.runs.outputs.check_output`)."""
    if args.output and os.path.isfile(args.output):
        parser.error(f"--output '{args.output}' is a file: give a folder (it gets {REPORT_PAGE}, {REPORT_LOG},"
                     f" {TIMELINE} and {RESULTS})")
    if not args.output and (args.timeline != "" or args.report != ""):
        args.output = args.shard.path(new_run_folder(args.task))
    folder = args.output = os.path.abspath(args.output) if args.output else None
    args.report = folder if args.report is None else ""
    if args.timeline is None:
        args.timeline = os.path.join(folder, TIMELINE)
    if args.results is None and folder:
        args.results = os.path.join(folder, RESULTS)
    try:
        merged = merged_path(args.results) if args.results else None  # under torchrun: where rank 0 writes them
        for path, what in ((args.timeline, "--timeline"), (args.results, "--results"), (merged, "--results")):
            if path:
                check_output(path, args.overwrite, what, "--overwrite")
        for name in (REPORT_LOG, REPORT_PAGE) if args.report else ():
            check_output(os.path.join(folder, name), args.overwrite, "--output", "--overwrite")
    except ValueError as err:
        parser.error(str(err))


def write_eval_outputs(args: argparse.Namespace, header: str, runs: dict[str, ScheduleRun]) -> list[str]:
    """Write the timeline PNG of ``runs`` and the report (run log and page), those that are asked for; returns the
    files written."""
    written = []
    if args.timeline:
        written.append(write_timeline(runs, args.timeline, header, args.overwrite))
    if args.report:
        page = write_evaluation_report(evaluation_cfg(args), runs, args.report, header, describe_scoring(args),
                                       describe_policy(args))
        written += [page, os.path.join(args.report, REPORT_LOG)]
    return written


def describe_outputs(args: argparse.Namespace, files: list[str]) -> list[str]:
    """Where the run's ``files`` are, printed once: the folder and the names of those in it on one line, each file
    elsewhere on a line of its own."""
    notes = {REPORT_PAGE: " (open it in a browser)", REPORT_LOG: " (the run log)",
             TIMELINE: f" (the first {min(args.timeline_envs, args.num_envs)} envs)"}
    inside = [os.path.basename(f) for f in files if args.output and os.path.dirname(f) == args.output]
    lines = [f"Run folder: {args.output}: {', '.join(n + notes.get(n, '') for n in inside)}"] if inside else []
    return lines + [f"Written: {f}" for f in files if not args.output or os.path.dirname(f) != args.output]
