"""A writer thread that writes finished episodes to Isaac Lab's HDF5 layout, off the step thread."""

from __future__ import annotations

import errno
import json
import os
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import h5py
import torch

from isaaclab.managers import DatasetExportMode
from isaaclab.utils import configclass
from isaaclab.utils.datasets.hdf5_dataset_file_handler import DATASET_FORMAT_VERSION

from .episode_buffers import EpisodeRows


@configclass
class CompressionCfg:
    """How the datasets of a key are compressed (HDF5 filters, readable by any HDF5 reader)."""

    filter: str | None = "gzip"
    """``"gzip"``, ``"lzf"`` or None (stored raw)."""

    level: int | None = 1
    """gzip level (0-9); ignored by the other filters."""

    shuffle: bool = False
    """Whether the byte-shuffle filter runs before the compression."""


@configclass
class EpisodeWriterCfg:
    """Configuration of :class:`EpisodeWriter`."""

    queue_size: int = 256
    """Episodes handed to the writer and not yet flushed to the file, at most. An export that would exceed it
    waits (back-pressure); one export larger than it alone is taken whole once the writer is idle. It bounds
    what a killed process loses: ``max(queue_size, num_envs)`` episodes."""

    compression: CompressionCfg = CompressionCfg()
    """Compression of the datasets that :attr:`compression_by_key` does not name (gzip level 1, measured in
    ``scripts/benchmarks/bench_hdf5_writes.py``)."""

    compression_by_key: dict[str, CompressionCfg] = {}
    """Compression by dataset path or path prefix, e.g. ``{"obs/rgb": CompressionCfg(filter="lzf")}``; the
    longest matching prefix wins."""


@dataclass
class EpisodeBatch:
    """The episodes of one export, handed over by the step thread, which never touches them again."""

    rows: EpisodeRows
    """Their samples, by dataset path."""
    success: torch.Tensor
    """Success of each episode. Shape: (B,)."""
    env_ids: list[int]
    """Env of each episode."""
    demo_ids: list[int] | None = None
    """Custom demo numbers (``demo_{id}``), or None for the file's next ones."""


class _File:
    """One dataset file kept open in Isaac Lab's layout: ``data`` (``total``, ``env_args``) and ``data/demo_N``."""

    def __init__(self, path: str, env_name: str | None):
        self.path = path
        self.h5 = h5py.File(path, "w")
        self.h5.attrs["format_version"] = DATASET_FORMAT_VERSION
        self.data = self.h5.create_group("data")
        self.data.attrs["total"] = 0
        self.data.attrs["env_args"] = json.dumps({"env_name": env_name or "", "type": 2})
        self.demo_count = 0
        self.total = 0


class EpisodeWriter:
    """Writes finished episodes to Isaac Lab's HDF5 layout in a thread, so that the step thread only hands them over.

    :meth:`put` queues the episodes of one export (an :class:`EpisodeBatch` of tensors the caller will not touch
    again) and returns at once, unless :attr:`EpisodeWriterCfg.queue_size` episodes are already waiting: then it
    waits for the writer (back-pressure; nothing is dropped, nothing grows without bound). The writer takes
    every batch waiting, writes their episodes (``data/demo_N`` with ``num_samples``, ``seed``, ``success``
    and one dataset per tensor, ``data.attrs["total"]``) and flushes once, so that a busy writer flushes many
    episodes at a time. The files stay valid between flushes: ``total`` and the demos change together.

    A write that fails (disk full, file removed) removes the demo it was writing, stops the writer and is raised
    by the next :meth:`put`, :meth:`check` or :meth:`close`, on the caller's thread; the episodes flushed before
    stay readable. :meth:`close` writes everything queued, then closes the files. If the main thread ends without
    closing the writer, the writer writes what is queued, closes the files and ends.

    Args:
        cfg: The writer's configuration.
        paths: The dataset file(s): the main one, then the file of failed episodes for
            ``EXPORT_SUCCEEDED_FAILED_IN_SEPARATE_FILES``.
        mode: Which episodes go to which file.
        env_name: Name stored in ``env_args`` at creation.
        compress: False stores every dataset raw (Isaac Lab's ``dataset_compression``).
    """

    def __init__(
        self,
        cfg: EpisodeWriterCfg,
        paths: list[str],
        mode: DatasetExportMode,
        env_name: str | None = None,
        compress: bool = True,
    ):
        if cfg.queue_size < 1:
            raise ValueError(f"EpisodeWriterCfg.queue_size must be at least 1, got {cfg.queue_size}.")
        self.cfg = cfg
        self.mode = mode
        self.compress = compress
        self.files = [_File(path, env_name) for path in paths]
        self.seed: int | None = None
        """Seed stored with each demo."""
        self.env_args: dict | None = None
        """Episode metadata merged into every file's ``env_args`` with the next batch, then reset to None."""
        self.written: dict[bool, dict[int, int]] = {True: {}, False: {}}
        """Episodes written to the file(s) (or dropped by the export mode), by success, then by env id. Those
        not flushed yet (:attr:`pending`) are in the file once the writer flushes or closes it."""
        self.on_write_point: Callable[[str], None] | None = None
        """Called with ``"batch"``, ``"demo"``, ``"datasets"`` and ``"flush"`` at those points of the write path
        (before each), on the writer thread: lets tests interrupt a write where they choose."""
        self.error: BaseException | None = None
        """The error that stopped the writer, if one did."""
        self._raised = False  # whether the error was raised on the caller's thread already
        self._queue: deque[EpisodeBatch] = deque()
        self._pending = 0  # episodes queued or being written, not yet flushed
        self._closing = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="EpisodeWriter")
        self._thread.start()

    @property
    def pending(self) -> int:
        """Episodes handed over and not yet flushed: what a killed process would lose."""
        return self._pending

    def written_count(self, success: bool, env_id: int | None = None) -> int:
        """Episodes of that success written (or dropped by the export mode), of ``env_id`` or of all envs."""
        with self._cond:
            counts = self.written[success]
            return counts.get(env_id, 0) if env_id is not None else sum(counts.values())

    def put(self, batch: EpisodeBatch) -> None:
        """Queue the episodes of ``batch``; waits while the queue is full. Raises the writer's error, if any."""
        size = len(batch.env_ids)
        with self._cond:
            while self.error is None and self._pending > 0 and self._pending + size > self.cfg.queue_size:
                self._cond.wait()
            self._raise_error()
            if self._closing:
                raise RuntimeError("The episode writer is closed.")
            self._queue.append(batch)
            self._pending += size
            self._cond.notify_all()

    def check(self) -> None:
        """Raise the writer's error on the caller's thread, if the writer stopped on one."""
        if self.error is not None:
            with self._cond:
                self._raise_error()

    def close(self) -> None:
        """Write everything queued and close the files; raises the writer's error if no call raised it yet."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join()
        with self._cond:
            if not self._raised:
                self._raise_error()

    """
    Internals - writer thread.
    """

    def _run(self) -> None:
        try:
            while True:
                with self._cond:
                    while not self._queue and not self._closing and threading.main_thread().is_alive():
                        self._cond.wait(timeout=0.5)
                    batches = list(self._queue)
                    self._queue.clear()
                    env_args, self.env_args = self.env_args, None
                if not batches:
                    break
                self._write(batches, env_args)
        except BaseException as err:  # noqa: BLE001 - any failure is handed to the caller's thread
            with self._cond:
                self.error = err
                self._queue.clear()
                self._cond.notify_all()
        finally:
            for file in self.files:
                try:
                    file.h5.close()
                except Exception:  # noqa: BLE001 - keep the first error; the flushed demos are on disk
                    pass

    def _write(self, batches: list[EpisodeBatch], env_args: dict | None) -> None:
        self._point("batch")
        if env_args:
            for file in self.files:
                merged = json.loads(file.data.attrs["env_args"])
                merged.update(env_args)
                file.data.attrs["env_args"] = json.dumps(merged)
        for batch in batches:
            rows = batch.rows
            if not rows.per_step.any():
                continue  # nothing recorded per step yet: no episode has a sample
            counts = rows.counts.cpu()
            step_counts = counts[rows.per_step]
            has_steps = (step_counts > 0).any(dim=0).tolist()
            # Isaac Lab's num_samples is the number of actions
            num_samples = (counts[rows.keys.index("actions")] if "actions" in rows.keys else step_counts.amax(0)).tolist()
            success = batch.success.cpu().tolist()
            arrays = {path: leaf.cpu().numpy() for path, leaf in rows.leaves.items()}
            counts = counts.tolist()
            for b, env_id in enumerate(batch.env_ids):
                if not has_steps[b]:
                    continue
                file = self._target(success[b])
                if file is not None:
                    demo = {}
                    for path, array in arrays.items():
                        n = counts[rows.key_of[path]][b]
                        if n > 0:
                            demo[path] = array[b, :n]
                    demo_id = None if batch.demo_ids is None else batch.demo_ids[b]
                    self._write_demo(file, demo_id, demo, success[b], num_samples[b])
                with self._cond:
                    self.written[success[b]][env_id] = self.written[success[b]].get(env_id, 0) + 1
        self._point("flush")
        for file in self.files:
            file.h5.flush()
        with self._cond:
            self._pending -= sum(len(batch.env_ids) for batch in batches)
            self._cond.notify_all()

    def _target(self, success: bool) -> _File | None:
        if self.mode == DatasetExportMode.EXPORT_ALL:
            return self.files[0]
        if self.mode == DatasetExportMode.EXPORT_SUCCEEDED_ONLY:
            return self.files[0] if success else None
        if self.mode == DatasetExportMode.EXPORT_SUCCEEDED_FAILED_IN_SEPARATE_FILES:
            return self.files[0] if success else self.files[1]
        return None

    def _write_demo(self, file: _File, demo_id: int | None, arrays: dict, success: bool, num_samples: int) -> None:
        """Write one demo; on failure remove what was written of it, so the file holds whole demos only."""
        self._point("demo")
        name = f"demo_{file.demo_count if demo_id is None else demo_id}"
        if name in file.data:
            raise ValueError(f"Episode group '{name}' already exists in {file.path}.")
        group = file.data.create_group(name)
        try:
            for path, array in arrays.items():
                group.create_dataset(path, data=array, **self._filters(path, array))
            self._point("datasets")
            group.attrs["num_samples"] = num_samples
            if self.seed is not None:
                group.attrs["seed"] = self.seed
            group.attrs["success"] = success
            file.data.attrs["total"] = file.total + num_samples
        except BaseException:
            try:
                del file.data[name]
                file.h5.flush()
            except Exception:  # noqa: BLE001 - keep the original error
                pass
            raise
        file.total += num_samples
        if demo_id is None:
            file.demo_count += 1

    def _filters(self, path: str, array) -> dict:
        """``create_dataset`` options of a dataset: its compression, one chunk per episode."""
        if not self.compress or array.size == 0:
            return {}
        matches = [key for key in self.cfg.compression_by_key if path == key or path.startswith(f"{key}/")]
        cfg = self.cfg.compression_by_key[max(matches, key=len)] if matches else self.cfg.compression
        if cfg.filter is None:
            return {}
        options = {"compression": cfg.filter, "shuffle": cfg.shuffle, "chunks": array.shape}
        if cfg.filter == "gzip":
            options["compression_opts"] = cfg.level
        return options

    def _point(self, name: str) -> None:
        if self.on_write_point is not None:
            self.on_write_point(name)

    def _raise_error(self) -> None:
        """Raise :attr:`error` as a clear error (call with the lock held)."""
        err = self.error
        if err is None:
            return
        self._raised = True
        paths = [file.path for file in self.files]
        if isinstance(err, OSError):
            raise OSError(
                err.errno or errno.EIO,
                f"Could not write episodes to {paths}: {err}. The episodes exported before are in the file; free"
                " some space or choose another dataset_export_dir_path.",
            ) from err
        raise RuntimeError(f"The episode writer of {paths} stopped: {err!r}. The episodes exported before are in"
                           " the file.") from err
