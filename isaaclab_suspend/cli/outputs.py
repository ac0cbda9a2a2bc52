"""Output paths of the scripts: checked for writability before any env is built, dataset names, disk space."""

from __future__ import annotations

import argparse

import os
import shutil
from typing import TYPE_CHECKING

import h5py
from prettytable import PrettyTable

from isaaclab.managers import DatasetExportMode

from ..recording import DatasetRecorderManagerCfg, EpisodeWriterCfg
from ..recording.recorder_manager import dataset_file_paths
from .distributed import merged_path

if TYPE_CHECKING:
    from isaaclab.managers import RecorderManagerBaseCfg

    from ..envs import SuspendableManagerBasedRLEnv
    from ..recording import SuspendableRecorderManager


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


EXPORT_MODES = {
    "all": DatasetExportMode.EXPORT_ALL,
    "succeeded": DatasetExportMode.EXPORT_SUCCEEDED_ONLY,
    "separate": DatasetExportMode.EXPORT_SUCCEEDED_FAILED_IN_SEPARATE_FILES,
}
"""``--export`` choices of ``record.py``: Isaac Lab's export modes."""


def check_output_args(parser: argparse.ArgumentParser, args: argparse.Namespace, *names: str) -> None:
    """Stop the script with ``parser.error`` unless each output argument ``--<name>`` that is given is a path
    this process can write (see :func:`check_writable`)."""
    try:
        for name in names:
            if getattr(args, name):
                check_writable(getattr(args, name), f"--{name}")
    except ValueError as err:
        parser.error(str(err))


def dataset_recorder_cfg(path: str, suffix: str = "", export: str = "all", writers: int = 1
                         ) -> DatasetRecorderManagerCfg:
    """The recorder of replayable HDF5 episodes (active env-steps only) into ``<stem><suffix>.hdf5`` beside
    ``path`` (``<stem>.hdf5`` or ``<stem>``), exporting as :data:`EXPORT_MODES` ``[export]``, written by ``writers``
    processes (:attr:`~isaaclab_suspend.recording.EpisodeWriterCfg.num_writers`)."""
    directory, name = os.path.split(os.path.abspath(path))
    return DatasetRecorderManagerCfg(dataset_export_dir_path=directory, dataset_filename=name.removesuffix(".hdf5")
                                     + suffix, dataset_export_mode=EXPORT_MODES[export],
                                     writer=EpisodeWriterCfg(num_writers=writers))


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


def written_count(manager: SuspendableRecorderManager, export: str) -> int:
    """Episodes ``manager`` has written so far (successes only with ``export`` ``succeeded``; also after the env
    closed)."""
    succeeded = manager.exported_successful_episode_count
    return succeeded if export == "succeeded" else succeeded + manager.exported_failed_episode_count


def check_space(env: SuspendableManagerBasedRLEnv, episodes: int) -> None:
    """Raise if ``episodes`` full-length episodes may not fit beside the env's dataset (uncompressed bound; twice
    that with several writer processes, whose part files stay until their merge is written).

    Raises:
        OSError: Saying how much is needed and free.
    """
    manager = env.recorder_manager
    path = manager.dataset_file_paths[0]
    bytes_per_episode = manager.buffers.bytes_per_step * env.max_episode_length + 8192
    copies = 1 if manager.cfg.writer.num_writers == 1 else 2
    needed_mb = copies * episodes * bytes_per_episode / 2**20
    free_mb = shutil.disk_usage(os.path.dirname(path)).free / 2**20
    if needed_mb > free_mb:
        raise OSError(
            f"{episodes} episodes of up to {env.max_episode_length} steps may need {needed_mb:.0f} MiB"
            f" (uncompressed{', and their merge' if copies > 1 else ''}), but only {free_mb:.0f} MiB are free for"
            f" '{path}'."
        )


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
