"""Where a run writes: each output path checked before any env is built, the files written whole, and the folder of
an evaluation.

A run replaces nothing that exists unless it is asked to (``overwrite``), never writes through a symbolic link (the
file it points to may be anyone's) and never takes a folder where a file is meant. A file written at once (a run
log, a page, a timeline, figures) goes to a temporary file beside it, renamed once complete (:func:`new_file`), so
a failed or interrupted write leaves the file that was there whole. A dataset is written in place instead: a killed
recording keeps the episodes it flushed (:mod:`isaaclab_suspend.recording`), so it is refused when it exists, and
replaced only with ``overwrite``.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import re
from collections.abc import Iterator, Sequence
from typing import IO

from ..recording.part_files import whole_file

__all__ = ["check_output", "check_writable", "new_file", "new_run_folder"]

RUNS_FOLDER = os.path.join("outputs", "eval")
"""Where an evaluation's folders go by default (:func:`new_run_folder`)."""


def check_writable(path: str, what: str) -> str:
    """``path`` made absolute, after checking that it (a file or folder to write) can be created there.

    Missing folders are fine (the writer creates them) as long as the nearest existing one is a writable folder.

    Raises:
        ValueError: Naming ``what`` (e.g. ``"--timeline"``), the path and the reason.
    """
    path = os.path.abspath(path)
    parent = os.path.dirname(path)
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise ValueError(f"{what} '{path}': '{parent}' is a file, not a folder.")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"{what} '{path}': the folder '{parent}' is not writable; choose another path.")
    return path


def check_output(path: str, overwrite: bool, what: str, flag: str = "overwrite=True") -> str:
    """``path`` made absolute, after checking that a run may write the file there: its folder can be made (see
    :func:`check_writable`), it is not a folder or a symbolic link (a dangling one too), and it is new unless
    ``overwrite``.

    Args:
        what: The path's name in the message (a cfg field, ``RecordingCfg.output``, or a script's flag).
        flag: What asks to replace it (a script's ``--overwrite``).

    Raises:
        ValueError: One line naming ``what``, the path and what to do.
    """
    path = check_writable(path, what)
    if os.path.islink(path):
        raise ValueError(f"{what}: '{path}' is a symbolic link; a run does not write through one: give the path of"
                         " a file.")
    if os.path.isdir(path):
        raise ValueError(f"{what}: '{path}' is a directory; give the path of a file.")
    if os.path.lexists(path) and not overwrite:
        raise ValueError(f"{what}: '{path}' exists: pass {flag} to replace it.")
    return path


@contextlib.contextmanager
def new_file(path: str, overwrite: bool, what: str, mode: str = "w", keep: Sequence[str] = ()) -> Iterator[IO]:
    """The file ``path`` open for the block to write (``mode`` ``"w"`` or ``"wb"``), written whole: into a temporary
    file beside it, renamed to ``path`` once the block completes (a failure removes it, and ``path`` stays as it
    was). ``path`` is checked first (:func:`check_output`), its folder made.

    Args:
        keep: Files the block reads from (a run log its page is made from): ``path`` may not be one of them.

    Raises:
        ValueError: If ``path`` is refused (:func:`check_output`) or is one of ``keep``.
    """
    path = check_output(path, overwrite, what)
    for source in keep:
        if os.path.exists(path) and os.path.exists(source) and os.path.samefile(path, source):
            raise ValueError(f"{what}: '{path}' is the file it is made from; give another path.")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with whole_file(path) as temporary, open(temporary, mode) as file:
        yield file


def new_run_folder(task: str, root: str = RUNS_FOLDER, today: datetime.date | None = None) -> str:
    """A folder for an evaluation that no earlier run has: ``<root>/<date>_<task>_<n>`` with ``n`` one more than the
    largest of that date and task under ``root`` (1 for the first); made absolute, not created."""
    date = (today or datetime.date.today()).isoformat()
    stem = f"{date}_{re.sub(r'[^A-Za-z0-9.-]+', '-', task)}_"
    taken = [int(m[1]) for name in (os.listdir(root) if os.path.isdir(root) else [])
             if (m := re.match(rf"{re.escape(stem)}(\d+)(?:-shard\d+of\d+)?$", name))]
    return os.path.abspath(os.path.join(root, f"{stem}{max(taken, default=0) + 1}"))
