"""Output paths of the scripts: checked for writability before any env is built, new dataset files, the
datasets' table."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

import h5py
from prettytable import PrettyTable

from ..recording.recorder_manager import dataset_file_paths
from .distributed import merged_path

if TYPE_CHECKING:
    from isaaclab.managers import RecorderManagerBaseCfg


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


def check_output_args(parser: argparse.ArgumentParser, args: argparse.Namespace, *names: str) -> None:
    """Stop the script with ``parser.error`` unless each output argument ``--<name>`` that is given is a path
    this process can write (see :func:`check_writable`)."""
    try:
        for name in names:
            if getattr(args, name):
                check_writable(getattr(args, name), f"--{name}")
    except ValueError as err:
        parser.error(str(err))


def check_new_datasets(cfg: RecorderManagerBaseCfg, overwrite: bool, what: str = "--output") -> list[str]:
    """The files a recorder with ``cfg`` will write, after checking that each can be written and is new, and
    creating their folder (a folder that cannot be made, e.g. under ``/sys`` where even root cannot write, fails
    here with one line rather than in the env's construction, whose launcher prints a traceback).

    Under torchrun the files rank 0 merges the ranks' into are checked too, so that an existing one stops the run
    now rather than after it.

    Raises:
        ValueError: If a path is not writable, is a folder, or exists and ``overwrite`` is False.
    """
    paths = dataset_file_paths(cfg)
    for path in paths:
        merged = merged_path(path)
        if merged not in (None, path) and os.path.exists(merged) and not overwrite:
            raise ValueError(f"{what}: '{merged}', where the ranks' files are merged, exists: pass --overwrite to"
                             " replace it.")
    for path in paths:
        check_writable(path, what)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
        except OSError as err:
            raise ValueError(f"{what} '{path}': cannot create its folder: {err.strerror}.") from None
        if os.path.isdir(path):
            raise ValueError(f"{what}: '{path}' is a directory.")
        if os.path.exists(path) and not overwrite:
            raise ValueError(f"{what}: '{path}' exists: pass --overwrite to replace it.")
    return paths


def dataset_table(paths: list[str], has_success: bool = True) -> PrettyTable:
    """Episodes, successes (``n/a`` for a task without a ``success`` termination term: ``has_success`` False),
    samples and size of each dataset file, as a table."""
    table = PrettyTable(["file", "episodes", "successes", "samples", "size [MiB]"])
    table.align["file"] = "l"
    for path in paths:
        with h5py.File(path, "r") as f:
            data = f["data"]
            successes = sum(bool(data[name].attrs.get("success", False)) for name in data) if has_success else "n/a"
            size_mb = os.path.getsize(path) / 2**20
            table.add_row([path, len(data), successes, int(data.attrs["total"]), f"{size_mb:.2f}"])
    return table
