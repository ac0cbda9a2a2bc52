"""Seeded defects: proves that the fast test tier still catches the bugs it exists to catch.

A test suite can go quiet without anyone noticing: a test is marked slow, an assertion loosened, a fixture made
to skip. This tool plants one realistic one-line bug at a time in a scratch copy of the project (a suspended env's
joint velocities not restored, the recorder writing a suspended step, a NaN action let through, ...) and runs the
fast tier (``pytest -m "not slow" -x``) against it. Every defect must make some test fail: a defect that survives
means the suite no longer guards that behaviour.

The scratch copy holds what git tracks plus the untracked files git does not ignore (a new test not committed yet),
committed to a throwaway git repository (the run report names its commit), and nothing ignored: not ``.venv``,
``.git``, ``.warp_cache`` nor ``outputs``. The generated robot USDs live in the venv
(``isaaclab_suspend.assets.robots.GENERATED_DIR``, under ``sys.prefix``), which the scratch runs share; so do the
compiled Warp kernels (``WARP_CACHE_PATH`` is this checkout's ``.warp_cache``). The package is installed editable
from this checkout, so the runs put the scratch copy first on ``PYTHONPATH`` (inherited by the subprocesses the
tests start) and the tool checks once, from outside the copy, that ``import isaaclab_suspend`` resolves there.

Each defect names the test files to run first: with ``-x`` the run stops at the first failure, so the catching test
comes early; the rest of ``tests/`` follows, so the whole fast tier is still what runs. The runs are serial
(``-n 0`` where pytest-xdist is installed, overriding the workers ``pytest.ini`` may ask for), since with workers
the files given first are not the first to fail; ``--pytest-args "-n 2"`` asks for workers anyway. Each run's
``tmp_path`` lives in the scratch directory (``--basetemp``), apart from other pytest runs on the machine.

Usage (from the checkout)::

    bash tools/run.sh python tools/seeded_defects.py                 # baseline, then every defect
    bash tools/run.sh python tools/seeded_defects.py --list
    bash tools/run.sh python tools/seeded_defects.py --only nan-action,replay-device --skip-baseline
    bash tools/run.sh python tools/seeded_defects.py --pytest-args "-n 2"

Exit status: 0 when the baseline passes and every defect is caught; 1 when a defect survives (or its run times out
or ends without a verdict) or the baseline fails; 2 for a bad flag, a defect whose line is not found exactly once
(the table must stay in step with the code), or runs that would not import the scratch copy.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
"""The checkout the scratch copy is made from."""

PACKAGE = "isaaclab_suspend"
FAST_TIER = ("-m", "not slow", "-x", "-q", "-p", "no:cacheprovider", "-rfE")
"""The fast tier's pytest options (``-rfE``: the summary names the failing tests, which the verdict reads)."""


@dataclass(frozen=True)
class Defect:
    """One one-line bug: the line ``old`` of ``path`` (indentation aside) becomes ``new`` (indented as ``old``)."""

    id: str
    description: str
    path: str
    """File, relative to the project root."""
    old: str
    """The exact line as it is in the code, without its indentation; it must occur exactly once in ``path``."""
    new: str
    """The line that replaces it, without indentation."""
    first: tuple[str, ...] = ()
    """Test files (relative to the project root) to run before the rest of ``tests/``: those that catch it."""


DEFECTS: tuple[Defect, ...] = (
    Defect(
        "joint-velocity",
        "a suspended env's joint velocities are not restored (only positions and body states are)",
        "isaaclab_suspend/suspension/newton_state.py",
        'for name, row_world in (("joint_q", coord_world), ("joint_qd", dof_world), ("body_q", body_world),'
        ' ("body_qd", body_world)):',
        'for name, row_world in (("joint_q", coord_world), ("body_q", body_world), ("body_qd", body_world)):',
        ("tests/suspension/test_suspend_invariants.py",),
    ),
    Defect(
        "record-suspended",
        "the recorder appends a sample for suspended envs too (the active mask is dropped)",
        "isaaclab_suspend/recording/recorder_manager.py",
        "self.buffers.append(key, value, env_mask)",
        "self.buffers.append(key, value, None)",
        ("tests/suspension/test_suspend_invariants.py",),
    ),
    Defect(
        "rng-stream",
        "a suspended env's random stream advances while it waits (its draws after resuming differ)",
        "isaaclab_suspend/suspension/per_env_rng.py",
        "self.steps += active",
        "self.steps += 1",
        ("tests/suspension/test_random_streams.py",),
    ),
    Defect(
        "clock-tick",
        "the global clock ticks one step late (step H - 1, 2H - 1, ... instead of 0, H, 2H)",
        "isaaclab_suspend/chunking/schedules.py",
        "return step % queues.chunk_length == 0",
        "return (step + 1) % queues.chunk_length == 0",
        ("tests/chunking/test_chunking_logic.py",),
    ),
    Defect(
        "episode-length",
        "episode_length_buf advances for suspended envs too (they age and time out while waiting)",
        "isaaclab_suspend/envs/suspendable_env.py",
        "self.episode_length_buf += sm.active  # suspended envs do not age",
        "self.episode_length_buf += 1",
        ("tests/suspension/test_suspend_invariants.py",),
    ),
    Defect(
        "nan-action",
        "the action check lets NaN through (a comparison that is False for NaN refuses too little)",
        "isaaclab_suspend/chunking/chunking_policy.py",
        "valid = (actions.abs() <= bound).flatten(1).all(dim=1)  # False for NaN",
        "valid = ~(actions.abs() > bound).flatten(1).any(dim=1)",
        ("tests/chunking/test_chunking_policy_errors.py",),
    ),
    Defect(
        "replay-device",
        "replay moves only the root pose to the scene's device; joint states reach the writers on the CPU",
        "isaaclab_suspend/datasets/replay.py",
        "value = value.to(scene.device)",
        'value = value.to(scene.device) if key == "root_pose" else value',
        ("tests/datasets/test_replayer.py",),
    ),
    Defect(
        "quota-cut-episode",
        "the per-env quota counts the first episode after a desynchronised start, whose time budget was cut",
        "isaaclab_suspend/runs/run_env.py",
        "return EpisodeLedger(env, per_env=per_env, total=total, count_first=not cfg.desync,",
        "return EpisodeLedger(env, per_env=per_env, total=total, count_first=True,",
        ("tests/runs/test_episode_ledger.py",),
    ),
    Defect(
        "queue-index",
        "the chunk queue hands out the action after the one due (index off by one)",
        "isaaclab_suspend/chunking/chunk_queues.py",
        "index = self.cursor.clamp(max=self.chunk_length - 1)",
        "index = (self.cursor + 1).clamp(max=self.chunk_length - 1)",
        ("tests/chunking/test_chunking_logic.py",),
    ),
    Defect(
        "blend-weight",
        "the blend aggregator swaps its weights (0.7 on the old chunk, 0.3 on the new)",
        "isaaclab_suspend/chunking/aggregators.py",
        "merged = torch.where(overlap, old_weight * old + (1.0 - old_weight) * new, new)",
        "merged = torch.where(overlap, (1.0 - old_weight) * old + old_weight * new, new)",
        ("tests/chunking/test_chunking_logic.py",),
    ),
    Defect(
        "resume-mask",
        "resume_envs does not clear the suspended mask of the envs it resumes (a missing ~)",
        "isaaclab_suspend/suspension/suspension_manager.py",
        "self._set(self.suspended & ~mask)",
        "self._set(self.suspended & mask)",
        ("tests/envs/test_suspendable_env.py",),
    ),
    Defect(
        "writer-last-step",
        "the HDF5 writer drops the last step of every episode",
        "isaaclab_suspend/recording/hdf5_writer.py",
        "demo = {path: array[row, : samples[path]] for path, array in arrays.items() if samples[path]}",
        "demo = {path: array[row, : samples[path] - 1] for path, array in arrays.items() if samples[path]}",
        ("tests/recording/test_recorder_manager.py",),
    ),
    Defect(
        "override-refusal",
        "the data-only checks of cfg overrides run for command-line overrides instead of a dataset's (inverted)",
        "isaaclab_suspend/cfg_overrides.py",
        "if from_file:",
        "if not from_file:",
        ("tests/test_cfg_overrides.py",),
    ),
    Defect(
        "weights-only",
        "checkpoints are unpickled with weights_only=False: a pickled object in a file runs code",
        "isaaclab_suspend/weights_only.py",
        "return torch.load(path, map_location=device, weights_only=True)",
        "return torch.load(path, map_location=device, weights_only=False)",
        ("tests/hardening/test_checkpoint_safety.py",),
    ),
)
"""The seeded defects, in the order they run."""


class TableError(Exception):
    """A defect's line is not in its file exactly once: the table is out of step with the code."""


@dataclass
class Outcome:
    """What one pytest run of the fast tier said."""

    returncode: int | None
    """pytest's exit status (None: killed at the time-out)."""
    first_failure: str | None
    """Node id of the first failing (or erroring) test, from the summary."""
    seconds: float
    output: str


"""
The scratch copy.
"""


def project_files(root: Path) -> list[str]:
    """Files of the project: git-tracked ones that exist, plus untracked ones git does not ignore."""
    listed = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True, check=True,
    ).stdout.decode()
    files = sorted({name for name in listed.split("\0") if name})
    return [name for name in files if os.path.lexists(root / name)]


def make_scratch(root: Path, where: Path) -> Path:
    """Copy the project into the directory ``where``, committed to a throwaway git repository (the run report names
    its commit, and a test checks it against ``git rev-parse HEAD``); returns the copy's root."""
    scratch = where / root.name
    for name in project_files(root):
        target = scratch / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, target, follow_symlinks=False)
    git = ["git", "-C", str(scratch), "-c", "user.name=seeded_defects", "-c", "user.email=seeded_defects@localhost",
           "-c", "commit.gpgsign=false", "-c", "core.hooksPath=/dev/null"]
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-q", "--no-verify", "-m", "scratch copy"]):
        subprocess.run([*git, *command], check=True, capture_output=True)
    return scratch


def run_env(scratch: Path) -> dict[str, str]:
    """The environment of the runs: the scratch copy first on the import path, the shared Warp kernels."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(scratch), *filter(None, [env.get("PYTHONPATH")])])
    env["WARP_CACHE_PATH"] = str(ROOT / ".warp_cache")
    return env


def venv_python() -> str:
    """The project venv's Python (``ISAACLAB_SUSPEND_VENV`` as ``tools/run.sh`` reads it), else this one."""
    python = Path(os.environ.get("ISAACLAB_SUSPEND_VENV", ROOT / ".venv")) / "bin" / "python"
    return str(python) if python.exists() else sys.executable


def probe_runs(python: str, scratch: Path) -> bool:
    """Check that ``import isaaclab_suspend`` in a run's environment resolves to the scratch copy; returns whether
    pytest-xdist is installed.

    Raises:
        RuntimeError: If the package would be imported from elsewhere (the editable install in the checkout).
    """
    code = (f"import importlib.util, {PACKAGE}; print({PACKAGE}.__file__);"
            " print(importlib.util.find_spec('xdist') is not None)")
    probe = subprocess.run(  # run outside the copy, as a test's subprocess in its tmp_path is: PYTHONPATH decides
        [python, "-c", code], cwd=scratch.parent, env=run_env(scratch), capture_output=True, text=True,
    )
    where, _, xdist = probe.stdout.strip().partition("\n")
    if probe.returncode != 0 or not Path(where).resolve().is_relative_to(scratch.resolve()):
        raise RuntimeError(f"the runs would import {PACKAGE} from '{where or probe.stderr.strip()[-300:]}', not from"
                           f" the scratch copy {scratch}")
    print(f"Runs import {PACKAGE} from {where}")
    return xdist == "True"


"""
Defects.
"""


def find_line(text: str, old: str, path: str) -> int:
    """Index of the one line of ``text`` that reads ``old`` once its indentation is stripped.

    Raises:
        TableError: If no line or several lines read ``old``.
    """
    hits = [i for i, line in enumerate(text.split("\n")) if line.strip() == old.strip()]
    if len(hits) != 1:
        raise TableError(f"{path}: the line '{old.strip()}' occurs {len(hits)} times, expected exactly once")
    return hits[0]


def check_table(root: Path, defects: Sequence[Defect]) -> None:
    """Raise :class:`TableError` unless every defect's line is in its file exactly once and its tests exist."""
    for d in defects:
        source = root / d.path
        if not source.is_file():
            raise TableError(f"defect '{d.id}': no file {d.path}")
        find_line(source.read_text(encoding="utf-8"), d.old, d.path)
        if d.old.strip() == d.new.strip():
            raise TableError(f"defect '{d.id}': the new line is the old one")
        missing = [t for t in d.first if not (root / t).is_file()]
        if missing:
            raise TableError(f"defect '{d.id}': no test file {missing[0]}")


def mutate(scratch: Path, defect: Defect) -> str:
    """Apply ``defect`` in the scratch copy; returns the file's original text (for :func:`restore`)."""
    source = scratch / defect.path
    text = source.read_text(encoding="utf-8")
    lines = text.split("\n")
    i = find_line(text, defect.old, defect.path)
    indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
    lines[i] = indent + defect.new.strip()
    write_source(source, "\n".join(lines))
    return text


def restore(scratch: Path, defect: Defect, original: str) -> None:
    """Put back the text of the file :func:`mutate` changed."""
    write_source(scratch / defect.path, original)


def write_source(path: Path, text: str) -> None:
    """Write a module and drop its cached bytecode: an edit within the same second and of the same size as the
    cached source would otherwise leave the stale bytecode in use."""
    path.write_text(text, encoding="utf-8")
    for cached in (path.parent / "__pycache__").glob(f"{path.stem}.*.pyc"):
        cached.unlink()


"""
Running the fast tier.
"""


def test_files(scratch: Path, first: Sequence[str]) -> list[str]:
    """``first``, then every other test file of ``tests/``, each once."""
    rest = sorted(str(p.relative_to(scratch)) for p in (scratch / "tests").glob("test_*.py"))
    return list(dict.fromkeys([*first, *rest]))


FAILURE = re.compile(r"^(?:FAILED|ERROR) (.+?)(?: - .*)?$")
"""A line of pytest's short summary: ``FAILED <node id>[ - <message>]`` (a node id may hold spaces: ``[a class]``)."""


def run_tier(python: str, scratch: Path, first: Sequence[str], options: Sequence[str], timeout: float | None
             ) -> Outcome:
    """Run the fast tier in the scratch copy, ``first`` files first, with extra pytest ``options``; stops at the first
    failure (``-x``)."""
    basetemp = scratch.parent / "pytest-tmp"  # the tests' tmp_path: inside the scratch directory, wiped per run
    command = [python, "-m", "pytest", *FAST_TIER, f"--basetemp={basetemp}", *options, *test_files(scratch, first)]
    start = time.monotonic()
    process = subprocess.Popen(command, cwd=scratch, env=run_env(scratch), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=timeout)
        returncode = process.returncode
    except subprocess.TimeoutExpired:
        stop(process)
        output, _ = process.communicate()
        returncode = None
    except BaseException:  # Ctrl-C: the run is in a session of its own, which the terminal's signal does not reach
        stop(process)
        raise
    seconds = time.monotonic() - start
    failures = [m.group(1) for m in map(FAILURE.match, output.splitlines()) if m]
    return Outcome(returncode, failures[0] if failures else None, seconds, output)


def stop(process: subprocess.Popen) -> None:
    """Kill the process group of a run (pytest, its xdist workers and the processes its tests started)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def verdict(outcome: Outcome, first: Sequence[str]) -> tuple[bool, str]:
    """(caught, text) of a mutant's run; a failure outside the defect's ``first`` files is flagged (it may be a test
    failing for a reason of its own, e.g. one that needs a quiet machine)."""
    timing = f"({outcome.seconds:.0f} s)"
    if outcome.returncode is None:
        return False, f"TIMEOUT, nothing failed before it {timing}"
    if outcome.returncode == 0:
        return False, f"SURVIVED {timing}"
    if outcome.first_failure is not None:
        elsewhere = not any(outcome.first_failure.split("::")[0] == f for f in first)
        note = " [not one of its first files: check that this failure is the defect's]" if elsewhere else ""
        return True, f"CAUGHT by {outcome.first_failure} {timing}{note}"
    return False, f"NO VERDICT: pytest exited {outcome.returncode} without naming a failing test {timing}"


def tail(output: str, lines: int = 30) -> str:
    return "\n".join(output.rstrip().splitlines()[-lines:])


"""
Command line.
"""


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="seeded_defects.py",
        description="Plant one-line defects in a scratch copy of the project, one at a time, and check that the"
                    " fast test tier (pytest -m 'not slow' -x) catches each.",
    )
    parser.add_argument("--only", metavar="ID[,ID]", help="run these defects only (see --list)")
    parser.add_argument("--list", action="store_true", help="list the defects and exit")
    parser.add_argument("--pytest-args", default="", metavar='"..."',
                        help='extra pytest arguments for every run, e.g. "-n 2" (pytest-xdist)')
    parser.add_argument("--skip-baseline", action="store_true",
                        help="do not run the unmodified copy's fast tier first")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    parser.add_argument("--timeout", type=float, default=3600.0, metavar="SECONDS",
                        help="time limit of each pytest run (default 3600; a run past it is killed)")
    args = parser.parse_args(argv)
    try:
        args.extra = shlex.split(args.pytest_args)
    except ValueError as err:
        parser.error(f"--pytest-args: {err}")
    if not args.timeout > 0:
        parser.error(f"--timeout must be a positive number of seconds, got {args.timeout:g}")
    args.defects = list(DEFECTS)
    if args.only is not None:
        wanted = [i.strip() for i in args.only.split(",") if i.strip()]
        known = {d.id for d in DEFECTS}
        unknown = [i for i in wanted if i not in known]
        if not wanted or unknown:
            parser.error(f"--only: unknown defect {unknown[0] if unknown else repr(args.only)}; known: "
                         + ", ".join(sorted(known)))
        args.defects = [d for d in DEFECTS if d.id in wanted]
    return args


def list_defects(defects: Sequence[Defect]) -> None:
    for d in defects:
        print(f"{d.id}: {d.description}\n    {d.path}: '{d.old.strip()}'\n    -> '{d.new.strip()}'"
              f"\n    caught first in: {', '.join(d.first) or '-'}")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.list:
        list_defects(args.defects)
        return 0
    try:
        check_table(ROOT, args.defects)
    except TableError as err:
        print(f"seeded_defects.py: error: {err}", file=sys.stderr)
        return 2
    python = venv_python()
    where = Path(tempfile.mkdtemp(prefix="seeded_defects_"))
    try:
        scratch = make_scratch(ROOT, where)
        print(f"Scratch copy: {scratch}{' (kept)' if args.keep else ''}")
        xdist = probe_runs(python, scratch)
        # serial unless --pytest-args says otherwise (-n N comes later and wins): with workers, the files given first
        # are not the first to fail, and other files keep running after the first failure
        options = ["-n", "0", *args.extra] if xdist else args.extra
        if not args.skip_baseline:
            print("baseline: ", end="", flush=True)
            outcome = run_tier(python, scratch, (), options, args.timeout)
            if outcome.returncode != 0:
                what = outcome.first_failure or (f"pytest exit {outcome.returncode}" if outcome.returncode is not None
                                                 else "timed out")
                print(f"FAILED\n{tail(outcome.output)}\nBASELINE FAILED ({what}, {outcome.seconds:.0f} s): the"
                      " unmodified fast tier must pass before defects mean anything")
                return 1
            print(f"passed ({outcome.seconds:.0f} s)")
        missed = []
        for d in args.defects:
            print(f"{d.id}: ", end="", flush=True)
            original = mutate(scratch, d)
            try:
                outcome = run_tier(python, scratch, d.first, options, args.timeout)
            finally:
                restore(scratch, d, original)
            caught, text = verdict(outcome, d.first)
            print(text, flush=True)
            if not caught:
                missed.append(d.id)
                if outcome.returncode not in (0, None):
                    print(tail(outcome.output))
        print(f"{len(args.defects) - len(missed)} of {len(args.defects)} defects caught"
              + (f"; not caught: {', '.join(missed)}" if missed else ""))
        return 1 if missed else 0
    except (TableError, RuntimeError, subprocess.CalledProcessError) as err:
        print(f"seeded_defects.py: error: {err}", file=sys.stderr)
        return 2
    finally:
        if not args.keep:
            shutil.rmtree(where, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
