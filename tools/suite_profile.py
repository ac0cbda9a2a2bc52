"""Run the test suite and print what each test file costs, as the table in docs/results.rst.

Usage (from the project root)::

    bash tools/run.sh python tools/suite_profile.py            # the whole suite, as the README runs it
    bash tools/run.sh python tools/suite_profile.py -m "not slow"   # the fast tier

Extra arguments go to pytest. Per file: seconds (set-up, call and tear-down of its tests, summed over the xdist
workers that ran them), tests, Isaac Lab envs opened in the test process, Python processes started (scripts,
torchrun, ``lerobot-*``), and whether the file is in the fast tier. The wall time of the run comes last.
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def file_of(case: ET.Element) -> str:
    """``tests/<path>.py`` of a JUnit test case (its classname is the dotted module path, then any class)."""
    parts = case.get("classname", "").split(".")
    for end in range(len(parts), 0, -1):
        path = os.path.join(*parts[:end]) + ".py"
        if os.path.isfile(os.path.join(ROOT, path)):
            return path
    return ".".join(parts)


def slowest(junit: str, count: int) -> list[tuple[float, str]]:
    """The ``count`` costliest tests: (seconds, ``file::name``)."""
    cases = ET.parse(junit).getroot().iter("testcase")
    return sorted(((float(c.get("time", 0)), f"{file_of(c)}::{c.get('name')}") for c in cases), reverse=True)[:count]


def collect(junit: str, profile: str) -> dict[str, dict]:
    """Per test file: seconds, tests, failures, envs opened and processes started."""
    rows: dict[str, dict] = collections.defaultdict(lambda: dict(seconds=0.0, tests=0, failed=0, envs=0, processes=0))
    for case in ET.parse(junit).getroot().iter("testcase"):
        row = rows[file_of(case)]
        row["seconds"] += float(case.get("time", 0))
        row["tests"] += 1
        row["failed"] += any(child.tag in ("failure", "error") for child in case)
    for part in glob.glob(f"{profile}.*.json"):
        with open(part) as f:
            counts = json.load(f)
        for key in ("envs", "processes"):
            for path, n in counts[key].items():
                if path in rows:
                    rows[path][key] += n
    return dict(rows)


def table(rows: dict[str, dict], fast: set[str]) -> str:
    """An RST grid of the rows, costliest first, with a total line."""
    header = ("file", "seconds", "tests", "envs", "processes", "fast tier")
    body = [(path.removeprefix("tests/"), f"{r['seconds']:.0f}", str(r["tests"]), str(r["envs"]), str(r["processes"]),
             "yes" if path in fast else "")
            for path, r in sorted(rows.items(), key=lambda kv: -kv[1]["seconds"])]
    total = {key: sum(r[key] for r in rows.values()) for key in ("seconds", "tests", "envs", "processes")}
    body.append(("total", f"{total['seconds']:.0f}", str(total["tests"]), str(total["envs"]), str(total["processes"]),
                 str(sum(1 for p in rows if p in fast))))
    widths = [max(len(row[i]) for row in (header, *body)) for i in range(len(header))]
    rule = "  ".join("=" * w for w in widths)
    line = lambda row: "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip()  # noqa: E731
    return "\n".join([rule, line(header), rule, *map(line, body[:-1]), rule, line(body[-1]), rule])


def fast_tier_files() -> set[str]:
    """The files with at least one test outside ``slow`` (pytest's own collection)."""
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only", "-m", "not slow", "-p",
                           "no:cacheprovider"], cwd=ROOT, capture_output=True, text=True)
    return {line.split("::")[0] for line in done.stdout.splitlines() if "::" in line}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog="Other arguments go to pytest.")
    parser.add_argument("--slowest", type=int, default=15, metavar="N", help="also list the N costliest tests")
    args, pytest_args = parser.parse_known_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        junit, profile = os.path.join(scratch, "junit.xml"), os.path.join(scratch, "profile")
        start = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", f"--junitxml={junit}",
                               f"--suite-profile={profile}", *pytest_args], cwd=ROOT)
        wall = time.monotonic() - start
        if not os.path.isfile(junit):
            print(f"pytest exited {done.returncode} before writing its report", file=sys.stderr)
            return 2
        rows = collect(junit, profile)
        costliest = slowest(junit, args.slowest)
    print(table(rows, fast_tier_files()))
    print(f"\nThe {len(costliest)} costliest tests:", *(f"{s:7.1f} s  {name}" for s, name in costliest), sep="\n")
    failed = sum(r["failed"] for r in rows.values())
    print(f"\nWall time {wall:.0f} s ({wall / 60:.1f} min), {failed} failed; pytest exit {done.returncode}.")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
