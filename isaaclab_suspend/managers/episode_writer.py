"""Hands finished episodes to a writer process that writes Isaac Lab's HDF5 layout, off the step thread."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import threading
from collections import deque
from dataclasses import dataclass
from multiprocessing.connection import Connection

import torch

from isaaclab.managers import DatasetExportMode
from isaaclab.utils import configclass
from isaaclab.utils.datasets.hdf5_dataset_file_handler import DATASET_FORMAT_VERSION

from .. import hdf5_writer
from .episode_buffers import EpisodeRows

if hdf5_writer.FORMAT_VERSION != DATASET_FORMAT_VERSION:
    raise ImportError(f"hdf5_writer writes dataset format {hdf5_writer.FORMAT_VERSION}, Isaac Lab's is"
                      f" {DATASET_FORMAT_VERSION}: update hdf5_writer.FORMAT_VERSION and what it implies.")


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


class EpisodeWriter:
    """Writes finished episodes to Isaac Lab's HDF5 layout in a child process, so that the step thread only hands
    them over.

    :meth:`put` queues the episodes of one export (an :class:`EpisodeBatch` of tensors the caller will not touch
    again) and returns at once, unless :attr:`EpisodeWriterCfg.queue_size` episodes are already waiting to be
    flushed: then it waits (back-pressure; nothing is dropped, nothing grows without bound). A forwarding thread
    copies them to the host (the only device read, off the step thread), routes them by export mode and success
    and sends them to the writer process (:mod:`isaaclab_suspend.hdf5_writer`), which keeps the file(s) open,
    writes every demo it has been sent (``data/demo_N`` with ``num_samples``, ``seed``, ``success`` and one
    dataset per tensor, ``data.attrs["total"]``) and flushes once. The file is valid after every flush:
    ``total`` and the demos change together. The process, not a thread, does the writing because h5py holds
    the GIL: in a thread every write would stall the step thread's Python code.

    A write that fails (disk full, file removed) removes the demo it was writing, stops the writer and is raised
    by the next :meth:`put`, :meth:`check` or :meth:`close` on the caller's thread; the demos written before
    stay readable. :meth:`close` writes everything handed over, then closes the files. The writer process
    ignores Ctrl-C, and if the recording process dies it writes what it was sent before it ends.

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
        self.paths = paths
        self.seed: int | None = None
        """Seed stored with each demo."""
        self.env_args: dict | None = None
        """Episode metadata merged into every file's ``env_args`` with the next batch, then reset to None."""
        self.written: dict[bool, dict[int, int]] = {True: {}, False: {}}
        """Episodes flushed to the file(s) (or dropped by the export mode), by success, then by env id."""
        self.error: BaseException | None = None
        """The error that stopped the writer, if one did."""
        self._raised = False  # whether the error was raised on the caller's thread already
        self._queue: deque[EpisodeBatch | tuple] = deque()  # batches, and fault messages for tests
        self._pending = 0  # episodes handed over and not yet flushed
        self._closing = False
        self._cond = threading.Condition()
        self._process, self._send, self._recv = _start_process()
        compression = {"default": _options(cfg.compression) if compress else None,
                       "by_key": {k: _options(c) for k, c in cfg.compression_by_key.items()} if compress else {}}
        self._send.send(("open", paths, env_name, compression))
        self._forwarder = threading.Thread(target=self._forward, name="EpisodeWriter-forward")
        self._reader = threading.Thread(target=self._read, name="EpisodeWriter-read", daemon=True)
        self._forwarder.start()
        self._reader.start()

    @property
    def pending(self) -> int:
        """Episodes handed over and not yet flushed: at most what a killed writer process would lose."""
        return self._pending

    def written_count(self, success: bool, env_id: int | None = None) -> int:
        """Episodes of that success flushed (or dropped by the export mode), of ``env_id`` or of all envs."""
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
                raise RuntimeError(f"The episode writer of {self.paths} is closed.")
            self._queue.append(batch)
            self._pending += size
            self._cond.notify_all()

    def inject_fault(self, point: str, nth: int, action: str) -> None:
        """For tests: make the writer process act at the ``nth`` time it reaches ``point`` (``"demo"``,
        ``"datasets"``, ``"flush"``); ``action`` is ``"sigkill"``, ``"enospc"`` or ``"pause"`` (see
        :mod:`isaaclab_suspend.hdf5_writer`)."""
        with self._cond:
            self._queue.append(("fault", point, nth, action))
            self._cond.notify_all()

    def check(self) -> None:
        """Raise the writer's error on the caller's thread, if the writer stopped on one."""
        if self.error is not None:
            with self._cond:
                self._raise_error()

    def close(self) -> None:
        """Write everything handed over and close the files; raises the writer's error if no call raised it yet."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._forwarder.join()
        self._reader.join()
        self._process.wait()
        with self._cond:
            if not self._raised:
                self._raise_error()

    """
    Internals.
    """

    def _forward(self) -> None:
        """Forwarding thread: copy each batch to the host and send its demos; at close, tell the process."""
        try:
            while True:
                with self._cond:
                    while not self._queue and not self._closing and threading.main_thread().is_alive():
                        self._cond.wait(timeout=0.5)
                    if self.error is not None or not self._queue:
                        break
                    item = self._queue.popleft()
                    env_args, self.env_args = self.env_args, None
                if env_args:
                    self._send.send(("env_args", env_args))
                if isinstance(item, tuple):
                    self._send.send(item)
                    continue
                demos, dropped = self._demos(item)
                if demos:
                    self._send.send(("demos", demos))
                with self._cond:
                    for succeeded, env_id in dropped:
                        self.written[succeeded][env_id] = self.written[succeeded].get(env_id, 0) + 1
                    self._pending -= len(item.env_ids) - len(demos)
                    self._cond.notify_all()
            self._send.send(("close",))
        except OSError as err:  # the process is gone: the reader reports why
            with self._cond:
                self.error = self.error or err
                self._cond.notify_all()
        finally:
            self._send.close()

    def _demos(self, batch: EpisodeBatch) -> tuple[list[tuple], list[tuple[bool, int]]]:
        """The demos of ``batch`` to send (file index, demo id, arrays by path, success, num_samples, seed, env),
        and the (success, env) of the episodes the export mode drops. Episodes without a step sample are
        neither."""
        rows = batch.rows
        if not rows.per_step.any():
            return [], []
        counts = rows.counts.cpu()
        step_counts = counts[rows.per_step]
        has_steps = (step_counts > 0).any(dim=0).tolist()
        # Isaac Lab's num_samples is the number of actions
        num_samples = (counts[rows.keys.index("actions")] if "actions" in rows.keys else step_counts.amax(0)).tolist()
        success = batch.success.cpu().tolist()
        arrays = {path: leaf.cpu().numpy() for path, leaf in rows.leaves.items()}
        counts = counts.tolist()
        demos, dropped = [], []
        for b, env_id in enumerate(batch.env_ids):
            if not has_steps[b]:
                continue
            file_index = self._file_index(success[b])
            if file_index is None:
                dropped.append((success[b], env_id))
                continue
            demo = {}
            for path, array in arrays.items():
                n = counts[rows.key_of[path]][b]
                if n > 0:
                    demo[path] = array[b, :n]
            demo_id = None if batch.demo_ids is None else batch.demo_ids[b]
            demos.append((file_index, demo_id, demo, success[b], num_samples[b], self.seed, env_id))
        return demos, dropped

    def _read(self) -> None:
        """Reader thread: count what the process flushed, take its error, notice its end."""
        try:
            while True:
                message = self._recv.recv()
                with self._cond:
                    if message[0] in ("flushed", "error"):
                        for succeeded, env_id in message[-1]:
                            self.written[succeeded][env_id] = self.written[succeeded].get(env_id, 0) + 1
                        self._pending -= len(message[-1])
                    if message[0] == "error":
                        code, text = message[1], message[2]
                        self.error = OSError(code, text) if code is not None else RuntimeError(text)
                    self._cond.notify_all()
                if message[0] in ("closed", "error"):
                    return
        except (EOFError, OSError):
            with self._cond:
                if self.error is None:
                    self.error = RuntimeError(f"the writer process ended (exit status {self._process.poll()})")
                self._cond.notify_all()

    def _file_index(self, success: bool) -> int | None:
        if self.mode == DatasetExportMode.EXPORT_ALL:
            return 0
        if self.mode == DatasetExportMode.EXPORT_SUCCEEDED_ONLY:
            return 0 if success else None
        if self.mode == DatasetExportMode.EXPORT_SUCCEEDED_FAILED_IN_SEPARATE_FILES:
            return 0 if success else 1
        return None

    def _raise_error(self) -> None:
        """Raise :attr:`error` as a clear error (call with the lock held)."""
        err = self.error
        if err is None:
            return
        self._raised = True
        if isinstance(err, OSError):
            raise OSError(
                err.errno or errno.EIO,
                f"Could not write episodes to {self.paths}: {err.strerror or err}. The episodes exported before are"
                " in the file; free some space or choose another dataset_export_dir_path.",
            ) from err
        raise RuntimeError(f"The episode writer of {self.paths} stopped: {err}. The episodes exported before are"
                           " in the file.") from err


def _options(cfg: CompressionCfg) -> dict | None:
    """``create_dataset`` options of a compression cfg."""
    if cfg.filter is None:
        return None
    if cfg.filter not in ("gzip", "lzf"):
        raise ValueError(f"CompressionCfg.filter must be 'gzip', 'lzf' or None, got {cfg.filter!r}.")
    options = {"compression": cfg.filter, "shuffle": cfg.shuffle}
    if cfg.filter == "gzip":
        options["compression_opts"] = cfg.level
    return options


def _start_process() -> tuple[subprocess.Popen, Connection, Connection]:
    """Start :func:`isaaclab_suspend.hdf5_writer.main` in a child process; returns it and the two pipe ends."""
    to_child, from_parent = os.pipe()[::-1]
    from_child, to_parent = os.pipe()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    code = f"import sys; sys.path.insert(0, {root!r}); from isaaclab_suspend.hdf5_writer import main; main(*map(int, sys.argv[1:]))"
    process = subprocess.Popen([sys.executable, "-c", code, str(from_parent), str(to_parent)],
                               pass_fds=(from_parent, to_parent))
    os.close(from_parent)
    os.close(to_parent)
    return process, Connection(to_child, readable=False), Connection(from_child, writable=False)
