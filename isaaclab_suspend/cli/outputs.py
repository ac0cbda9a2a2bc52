"""Output paths of the scripts: checked for writability before any env is built (the rules:
:mod:`isaaclab_suspend.runs.outputs`), new dataset files, the datasets' table."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

import h5py
from prettytable import PrettyTable

from ..recording.recorder_manager import dataset_file_paths
from ..runs.outputs import check_output, check_writable
from .distributed import merged_path

if TYPE_CHECKING:
    from isaaclab.managers import RecorderManagerBaseCfg


def check_output_args(parser: argparse.ArgumentParser, args: argparse.Namespace, *names: str) -> None:
    """Stop the script with ``parser.error`` unless each output argument ``--<name>`` that is given is a path
    this process can write (see :func:`~isaaclab_suspend.runs.outputs.check_writable`)."""
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
        ValueError: If a path is not writable, is a folder or a symbolic link, or exists and ``overwrite`` is False
            (:func:`~isaaclab_suspend.runs.outputs.check_output`).
    """
    paths = dataset_file_paths(cfg)
    for path in paths:
        merged = merged_path(path)
        if merged not in (None, path) and os.path.exists(merged) and not overwrite:
            raise ValueError(f"{what}: '{merged}', where the ranks' files are merged, exists: pass --overwrite to"
                             " replace it.")
    for path in paths:
        check_output(path, overwrite, what, "--overwrite")
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
        except OSError as err:
            raise ValueError(f"{what} '{path}': cannot create its folder: {err.strerror}.") from None
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
