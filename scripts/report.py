"""Rebuild the HTML report of an evaluation from its run log alone (``eval.py --output DIR`` writes both).

The log is read as untrusted data (bounded in size and counts, every field checked, images re-encoded): a
malformed one ends in one line and exit status 2, and an existing page stays as it was.

Examples::

    tools/run.sh python scripts/report.py outputs/report/episodes.jsonl
    tools/run.sh python scripts/report.py shared/episodes.jsonl --output /tmp/report.html
"""

from __future__ import annotations

import argparse
import os
import sys

from isaaclab_suspend import cli  # light: Isaac Lab is imported after parsing, where it is used


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = cli.script_parser(__doc__)
    parser.add_argument("log", type=cli.existing_file, help="run log (episodes.jsonl of eval.py --output DIR)")
    parser.add_argument("--output", default=None, help="HTML page (default: report.html beside the log)")
    parser.add_argument("--overwrite", action="store_true", help="replace the page if it exists")
    args = parser.parse_args(argv)
    cli.check_output_args(parser, args, "output")
    if args.output and os.path.abspath(args.output) == os.path.abspath(args.log):
        parser.error(f"--output '{args.output}' is the log itself: the page would replace it; give another file")
    page = args.output or os.path.join(os.path.dirname(os.path.abspath(args.log)), "report.html")
    if os.path.isfile(page) and not os.path.islink(page) and not args.overwrite:  # a link: refused by the library
        parser.error(f"the page '{page}' exists: pass --overwrite to replace it")
    return args


def rebuild(args: argparse.Namespace) -> None:
    from isaaclab_suspend.runs.report import EvalReportCfg, write_report

    print(f"Report: {write_report(EvalReportCfg(log_path=args.log, output_path=args.output, overwrite=args.overwrite))}")  # a bad log: one line


def main(argv: list[str] | None = None) -> int:
    return cli.run(rebuild, parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
