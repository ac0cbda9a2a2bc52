"""Hands finished episodes to a writer process that writes Isaac Lab's HDF5 layout, off the step thread."""

from __future__ import annotations

import errno
import fcntl
import os
import pickle
import select
import struct
import subprocess
import sys
import time
from collections import deque
from dataclasses import dataclass
from multiprocessing.connection import Connection

import h5py
import numpy as np
import torch

from isaaclab.managers import DatasetExportMode
from isaaclab.utils import configclass
from isaaclab.utils.datasets.hdf5_dataset_file_handler import DATASET_FORMAT_VERSION

from . import hdf5_writer
from .episode_buffers import EpisodeRows
from .staging_ring import ALIGNMENT, StagingRing, aligned_offsets

if hdf5_writer.FORMAT_VERSION != DATASET_FORMAT_VERSION:
    raise ImportError(f"hdf5_writer writes dataset format {hdf5_writer.FORMAT_VERSION}, Isaac Lab's is"
                      f" {DATASET_FORMAT_VERSION}: update hdf5_writer.FORMAT_VERSION and what it implies.")


PIPE_BYTES = 2**20
"""Capacity asked for the pipe to the writer process (Linux's default limit for unprivileged processes)."""


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
    """Episodes handed to a writer process and not yet flushed to its file, at most (the suspendable recorder
    counts the ended episodes waiting in its buffers too: see its ``unflushed_count``). An export that would
    exceed it waits (back-pressure); one export larger than it alone is taken whole once the writer is idle. It
    bounds what a killed process loses: ``max(queue_size, num_envs)`` episodes per writer process
    (:attr:`num_writers`)."""

    num_writers: int = 1
    """Writer processes. One spends 0.9 ms (the H200 machine's host) to 1.7 ms (2 busy cores) of CPU per short
    episode, whatever its bytes (``scripts/benchmarks/bench_writer.py``, docs/results.rst): where the envs end
    more episodes than one process writes, several share them on cores of their own
    (:class:`~isaaclab_suspend.recording.ShardedEpisodeWriter`), each into its own part file beside the dataset,
    and the parts are merged into the dataset file at close, which then waits for the merge (about 0.5-0.9 ms per
    demo copied). 1: the one process writes the dataset file itself. A run
    (:class:`~isaaclab_suspend.runs.RecordingCfg`) takes at most
    :func:`~isaaclab_suspend.recording.episode_writer.max_writers` (one per core: more only add memory, some 70 MiB
    each)."""

    flush_interval_s: float = 0.1
    """The writer process flushes the file(s) at most this often while episodes keep coming, and as soon as it
    is idle after that; it reports what it flushed then, and the recording process reads its reports at most
    this often. Rarer flushes cost both processes less; what a killed run loses stays bounded by
    :attr:`queue_size`."""

    staging_bytes: int = 2**24
    """Initial size of the shared memory exports are gathered into for the writer process (it doubles when an
    export does not fit in it empty). An export waits while it holds no room for it (back-pressure)."""

    compression: CompressionCfg = CompressionCfg(filter=None)
    """Compression of the datasets that neither :attr:`uint8_compression` nor :attr:`compression_by_key` covers:
    none. State datasets of a few hundred samples do not compress (float32 physics state) and each chunk adds
    overhead: raw, the file is smaller (2.3 against 4.1 MiB for 67 Cartpole episodes) and written a little
    faster (``scripts/benchmarks/bench_hdf5_writes.py``, docs/results.rst)."""

    uint8_compression: CompressionCfg = CompressionCfg(filter="gzip", level=1)
    """Compression of uint8 datasets (camera images) that :attr:`compression_by_key` does not name: gzip level 1
    (64x64 RGB stand-ins: 81x smaller than raw; lzf writes 15 % faster, 1.7x larger)."""

    compression_by_key: dict[str, CompressionCfg] = {}
    """Compression by dataset path or path prefix, e.g. ``{"obs/rgb": CompressionCfg(filter="lzf")}``; the
    longest matching prefix wins."""


@dataclass
class EpisodeBatch:
    """The episodes of one export, handed over by the step thread, which never touches them again."""

    rows: EpisodeRows
    """Their samples, by dataset path."""
    success: torch.Tensor | np.ndarray
    """Success of each episode. Shape: (B,), bool."""
    env_ids: list[int]
    """Env of each episode."""
    demo_ids: list[int | None] | None = None
    """Custom demo numbers (``demo_{id}``), one per episode; None (for all, or in place of an episode's number)
    for the file's next ones."""


class EpisodeWriter:
    """Writes finished episodes to Isaac Lab's HDF5 layout in a child process, so that the step thread only hands
    them over.

    :meth:`put` takes the episodes of one export (an :class:`EpisodeBatch` of tensors the caller will not touch
    again), routes them by export mode and success, and hands them to the writer process
    (:mod:`isaaclab_suspend.recording.hdf5_writer`), which keeps the file(s) open, writes every demo it has been sent
    (``data/demo_N`` with ``num_samples``, ``seed``, ``success`` and one dataset per tensor,
    ``data.attrs["total"]``) and flushes at most every :attr:`EpisodeWriterCfg.flush_interval_s`; the file is
    valid after every flush (``total`` and the demos change together). The tensors travel through shared
    memory (:class:`StagingRing`): on the CPU the export gathers them straight into it (:meth:`allocate`), and
    the pipe carries only where they are. On a GPU the batch is first copied to pinned host memory without
    waiting, and copied into the shared memory by a later :meth:`put`, :meth:`check` or :meth:`close` once the
    device copy is done, so the step thread never waits for the device. The step thread waits only when
    :attr:`EpisodeWriterCfg.queue_size` episodes are handed over and not yet flushed, or the shared memory has
    no room (back-pressure; nothing is dropped, nothing grows without bound). A process, not a thread, writes:
    h5py holds the GIL, and a writer thread stalls the step thread's Python code. No thread is added to the
    recording process either: the writer's reports are read by :meth:`check`, without waiting.

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
        numbering: The next demo number of each file, shared by the writers of one dataset's parts, which number
            their demos in one sequence; None: each file numbers its own (``demo_0``, ``demo_1``, ...).
    """

    def __init__(
        self,
        cfg: EpisodeWriterCfg,
        paths: list[str],
        mode: DatasetExportMode,
        env_name: str | None = None,
        compress: bool = True,
        numbering: list[int] | None = None,
    ):
        check_setting("EpisodeWriterCfg.queue_size", cfg.queue_size, 1)
        check_setting("EpisodeWriterCfg.flush_interval_s", cfg.flush_interval_s, 0, integer=False)
        check_setting("EpisodeWriterCfg.staging_bytes", cfg.staging_bytes, ALIGNMENT)
        self.cfg = cfg
        self.mode = mode
        self.paths = paths
        self.seed: int | None = None
        """Seed stored with each demo."""
        self.written: dict[bool, dict[int, int]] = {True: {}, False: {}}
        """Episodes flushed to the file(s) (or dropped by the export mode), by success, then by env id."""
        self.error: BaseException | None = None
        """The error that stopped the writer, if one did."""
        self.pending = 0
        """Episodes handed over and not yet flushed: at most what a killed writer process loses."""
        self.batches = 0
        """Batches handed over by :meth:`put` so far."""
        self.numbering = numbering
        """The next demo number of each file, where several writers share the numbering (see the class)."""
        self._raised = False  # whether the error was raised on the caller's thread already
        self._closed = False
        self._copying: deque[tuple[EpisodeBatch, torch.cuda.Event | None]] = deque()  # device -> host copies
        self._ring = StagingRing(cfg.staging_bytes)
        self._process, self._fd, self._recv = _start_process(self._ring.fd)
        self._next_poll = 0.0  # when check() next reads the writer's reports
        self._allocated = False  # whether the newest region of the ring is allocated and not handed over yet
        self._outbox = bytearray()  # framed messages the pipe had no room for yet
        self._unsent: list[tuple] = []  # "demos" messages not framed yet: sent together, at most once per poll
        compression = {"default": None, "uint8": None, "by_key": {}}
        if compress:
            compression = {"default": _options(cfg.compression), "uint8": _options(cfg.uint8_compression),
                           "by_key": {key: _options(c) for key, c in cfg.compression_by_key.items()}}
        self._send_message(("open", paths, env_name, compression, self._ring.size, cfg.flush_interval_s))
        # the file exists when the recorder does (as with Isaac Lab's), and a path that cannot be created fails here
        if self._receive(wait=True) != "opened":
            self._raise_error()

    def written_count(self, success: bool, env_id: int | None = None) -> int:
        """Episodes of that success flushed (or dropped by the export mode), of ``env_id`` or of all envs, as of
        the writer's last report."""
        self._poll()
        counts = self.written[success]
        return counts.get(env_id, 0) if env_id is not None else sum(counts.values())

    def add_env_args(self, env_args: dict) -> None:
        """Merge ``env_args`` into every file's ``data.attrs["env_args"]``."""
        self._send_message(("env_args", env_args))

    def allocate(self, nbytes: int) -> tuple[np.ndarray, int]:
        """A region of ``nbytes`` bytes of the shared memory the writer process reads, for the next :meth:`put`
        to hand over: the memory (a uint8 array) and the region's offset in it. Waits while it has no room."""
        self._raise_error()
        if self._closed:
            raise RuntimeError(f"The episode writer of {self.paths} is closed.")
        if self._allocated:  # the last region was never handed over (an interrupt in between): no message frees it
            self._ring.unreserve()
            self._allocated = False
        offset = self._reserve(nbytes, wait=True)
        self._allocated = True
        return self._ring.buffer, offset

    def put(self, batch: EpisodeBatch) -> None:
        """Hand over the episodes of ``batch``; waits while the queue is full. Raises the writer's error, if any.

        ``batch`` was gathered into the regions of :meth:`allocate` if ``batch.rows.offsets`` says where."""
        size = len(batch.env_ids)
        self._raise_error()  # the writer's reports are taken by check(), and below when full
        while self.pending > 0 and self.pending + size > self.cfg.queue_size:
            self._send_copied(wait=True)  # then every pending episode is with the process, which will flush
            self._write_out(wait=True)
            if self.pending > 0 and self.pending + size > self.cfg.queue_size:
                self._receive(wait=True)
            self._raise_error()
        if self._closed:
            raise RuntimeError(f"The episode writer of {self.paths} is closed.")
        self.pending += size
        event = None
        if isinstance(batch.success, torch.Tensor) and batch.success.is_cuda:
            batch = _to_host(batch)
            event = torch.cuda.Event()
            event.record()
        self._copying.append((batch, event))
        self.batches += 1
        self._allocated = False
        self._send_copied(wait=False)

    def check(self) -> None:
        """Take the writer's reports (at most every :attr:`EpisodeWriterCfg.flush_interval_s`) and send what is
        ready, without waiting (no device tensor is touched: cheap enough for every step); raise the writer's
        error."""
        self._poll()
        self._raise_error()

    def inject_fault(self, point: str, nth: int, action: str) -> None:
        """For tests: make the writer process act at the ``nth`` time it reaches ``point`` (``"demo"``,
        ``"datasets"``, ``"flush"``); ``action`` is ``"sigkill"``, ``"enospc"`` or ``"pause"`` (see
        :mod:`isaaclab_suspend.recording.hdf5_writer`)."""
        self._send_message(("fault", point, nth, action))

    def close(self) -> None:
        """Write everything handed over and close the files; raises the writer's error if no call raised it yet."""
        if not self._closed:
            self._closed = True
            if self.error is None:
                self._send_copied(wait=True)
                self._send_message(("close",))
                self._write_out(wait=True)
                while self.error is None and self._receive(wait=True) != "closed":
                    pass
            os.close(self._fd)
            self._recv.close()
            self._process.wait()
            self._ring.close()
        if not self._raised:
            self._raise_error()

    """
    Internals.
    """

    def _poll(self) -> None:
        """Take the writer's reports if :attr:`EpisodeWriterCfg.flush_interval_s` passed since the last look, and
        send what is ready, without waiting."""
        if self.error is None and not self._closed:
            now = time.perf_counter()
            if self._copying:
                self._send_copied(wait=False)
            if now >= self._next_poll:
                self._next_poll = now + self.cfg.flush_interval_s
                self._receive(wait=False)
                self._send_unsent()
            if self._outbox:
                self._write_out(wait=False)

    def _send_unsent(self) -> None:
        """Send the ``"demos"`` messages not sent yet, as one ``"many"`` message."""
        if self._unsent:
            self._send_message(("many", self._take_unsent()))

    def _take_unsent(self) -> list[tuple]:
        unsent, self._unsent = self._unsent, []
        return unsent

    def _send_message(self, message: tuple) -> None:
        """Frame ``message`` (after the messages not sent yet, so that the writer sees them in order) as
        ``multiprocessing.connection`` does and write what the pipe takes now (the pickle is copied into the
        outbox only if the pipe does not take it whole)."""
        if self._unsent:
            message = ("many", [*self._take_unsent(), message])
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        # as multiprocessing.connection frames it: a 64-bit length after -1 beyond 2 GiB
        header = struct.pack("!i", len(data)) if len(data) <= 0x7FFFFFFF else struct.pack("!iQ", -1, len(data))
        if not self._outbox and self.error is None:
            try:
                written = os.writev(self._fd, (header, data))
            except OSError:  # a full pipe, or the process is gone (which _write_out reports)
                written = 0
            if written == len(header) + len(data):
                return
            self._outbox += (header + data)[written:]
        else:
            self._outbox += header
            self._outbox += data
        self._write_out(wait=False)

    def _write_out(self, wait: bool) -> None:
        """Write the outbox to the pipe (non-blocking), all of it and every message not sent yet if ``wait``: the
        step thread never waits on a full pipe, only on a full queue."""
        if wait:
            self._send_unsent()
        while self._outbox and self.error is None:
            try:
                del self._outbox[: os.write(self._fd, self._outbox)]
            except BlockingIOError:
                if not wait:
                    return
                select.select([], [self._fd], [])
            except OSError:  # the process is gone: its answer, if any, says why
                self._receive(wait=False)
                self.error = self.error or self._ended()

    def _send_copied(self, wait: bool) -> None:
        """Send the batches whose host copy is done, in order (all of them if ``wait``)."""
        while self._copying and self.error is None:
            batch, event = self._copying[0]
            if event is not None and not event.query():
                if not wait:
                    return
                event.synchronize()
            layout = self._layout(batch.rows, wait)
            if layout is None:
                return
            self._copying.popleft()
            message, dropped = self._demos(batch, layout)
            for succeeded, env_id in dropped:
                self.written[succeeded][env_id] = self.written[succeeded].get(env_id, 0) + 1
            self.pending -= len(batch.env_ids) - len(message[-1])
            self._unsent.append(message)

    def _receive(self, wait: bool) -> str | None:
        """Handle the writer's answers (one at least if ``wait``); returns the kind of the last one."""
        kind = None
        try:
            while (wait and kind is None) or select.select([self._recv], [], [], 0)[0]:
                message = self._recv.recv()
                kind = message[0]
                if kind == "flushed":
                    self._ring.release(message[2])
                if kind in ("flushed", "error"):
                    written = message[1] if kind == "flushed" else message[-1]
                    for succeeded, env_id in written:
                        self.written[succeeded][env_id] = self.written[succeeded].get(env_id, 0) + 1
                    self.pending -= len(written)
                if kind == "error":
                    code, text = message[1], message[2]
                    self.error = OSError(code, text) if code is not None else RuntimeError(text)
                if kind in ("error", "closed"):
                    break
        except (EOFError, OSError):
            self.error = self.error or self._ended()
        return kind

    def _ended(self) -> ChildProcessError:
        """The error of a writer process that ended without a word: how, and how many demos each file holds (read
        back: what its last flush wrote)."""
        try:
            status = self._process.wait(timeout=5.0)
            how = f"killed by signal {-status}" if status < 0 else f"exit status {status}"
        except subprocess.TimeoutExpired:
            how = "its pipe closed"
        return ChildProcessError(errno.ECHILD, f"the writer process ended ({how}); demos safe:"
                                               f" {', '.join(f'{_demos_in(path)} in {path}' for path in self.paths)}")

    def _demos(self, batch: EpisodeBatch, layout: dict) -> tuple[tuple, list[tuple[bool, int]]]:
        """The ``"demos"`` message of ``batch``, whose tensors are in the shared memory at ``layout``, and the
        (success, env) of the episodes the export mode drops. The message carries where each tensor is (once for
        all demos, padded) and the samples of each demo: the writer process cuts the demos out, the step thread
        builds nothing per demo and per tensor. Episodes without a step sample are neither written nor dropped.
        It is sent even without a demo to write: the writer frees the memory in hand-over order."""
        rows = batch.rows
        if not rows.per_step.any():
            return ("demos", layout, {}, [], []), []
        counts = np.asarray(rows.counts)
        step_counts = counts[rows.per_step]
        has_steps = (step_counts > 0).any(axis=0).tolist()
        # Isaac Lab's num_samples is the number of actions
        num_samples = (counts[rows.keys.index("actions")] if "actions" in rows.keys else step_counts.max(axis=0))
        num_samples = num_samples.tolist()
        success = batch.success.tolist()
        demos, dropped = [], []
        for b, env_id in enumerate(batch.env_ids):
            if not has_steps[b]:
                continue
            file_index = self._file_index(success[b])
            if file_index is None:
                dropped.append((success[b], env_id))
                continue
            demo_id = None if batch.demo_ids is None else batch.demo_ids[b]
            if demo_id is None and self.numbering is not None:  # the number this file's writer would have given
                demo_id = self.numbering[file_index]
                self.numbering[file_index] += 1
            demos.append((b, file_index, demo_id, success[b], num_samples[b], self.seed, env_id))
        return ("demos", layout, rows.key_of, counts.tolist(), demos), dropped

    def _layout(self, rows: EpisodeRows, wait: bool) -> dict[str, tuple[str, tuple, int]] | None:
        """Where each tensor of ``rows`` is in the shared memory (numpy dtype string, shape, offset), copying them
        there unless :meth:`EpisodeBuffers.take` gathered them there; None if it has no room and not ``wait``."""
        if rows.offsets is not None:
            return {path: (leaf.dtype.str, leaf.shape, rows.offsets[path]) for path, leaf in rows.leaves.items()}
        arrays = [np.asarray(leaf) for leaf in rows.leaves.values()]
        starts, size = aligned_offsets([array.nbytes for array in arrays])
        offset = self._reserve(size, wait)
        if offset is None:
            return None
        for array, start in zip(arrays, starts):
            self._ring.array(offset + start, array.shape, array.dtype)[...] = array
        return {path: (array.dtype.str, array.shape, offset + start)
                for path, array, start in zip(rows.leaves, arrays, starts)}

    def _reserve(self, nbytes: int, wait: bool) -> int | None:
        """Offset of a region of the shared memory for a hand-over of ``nbytes`` bytes (None if it has no room
        and not ``wait``); the memory grows when one hand-over does not fit in it empty."""
        while True:
            offset = self._ring.reserve(nbytes)
            if offset is not None:
                return offset
            if self._ring.empty:
                self._ring.grow(nbytes)
                self._send_message(("ring", self._ring.size))
            elif not wait:
                return None
            else:  # the regions in use are in messages sent: the writer frees them as it writes them
                self._write_out(wait=True)
                self._receive(wait=True)
                self._raise_error()

    def _file_index(self, success: bool) -> int | None:
        if self.mode == DatasetExportMode.EXPORT_ALL:
            return 0
        if self.mode == DatasetExportMode.EXPORT_SUCCEEDED_ONLY:
            return 0 if success else None
        if self.mode == DatasetExportMode.EXPORT_SUCCEEDED_FAILED_IN_SEPARATE_FILES:
            return 0 if success else 1
        return None

    def _raise_error(self) -> None:
        """Raise :attr:`error` as a clear error."""
        err = self.error
        if err is None:
            return
        self._raised = True
        if isinstance(err, OSError):
            advice = " Free some space or choose another dataset_export_dir_path." if err.errno == errno.ENOSPC else ""
            raise OSError(err.errno or errno.EIO,
                          f"Could not write episodes to {self.paths}: {err.strerror or err}.{advice}") from err
        raise RuntimeError(f"The episode writer of {self.paths} stopped: {err}. The episodes exported before are"
                           " in the file.") from err


def max_writers() -> int:
    """The most writer processes a run records with: the cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def check_writer_count(name: str, value: object) -> None:
    """Raise a clear error unless ``value`` (writer processes) is an integer in [1, :func:`max_writers`]."""
    check_setting(name, value, 1)
    if value > max_writers():
        raise ValueError(f"{name} is {value}, more than the {max_writers()} cores this process may run on: at most one"
                         " writer process per core (each adds some 70 MiB and no speed past that).")


def check_setting(name: str, value: object, minimum: float, integer: bool = True) -> None:
    """Raise a clear error if the setting ``name`` is not a number (an int if ``integer``) of at least ``minimum``."""
    kinds = int if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not value >= minimum:
        kind = "an integer" if integer else "a number"
        raise ValueError(f"{name} must be {kind} of at least {minimum}, got {value!r}.")


def _demos_in(path: str) -> str:
    """How many demos the dataset file at ``path`` holds, read back (``"no readable"`` if it cannot be read)."""
    try:
        with h5py.File(path, "r") as f:
            return str(len(f["data"]))
    except (OSError, KeyError):
        return "no readable"


def _to_host(batch: EpisodeBatch) -> EpisodeBatch:
    """``batch`` with every tensor copied to pinned host memory, without waiting for the copies."""
    rows = batch.rows

    def host(t: torch.Tensor) -> torch.Tensor:
        return t.to("cpu", non_blocking=True)

    rows = EpisodeRows({p: host(t) for p, t in rows.leaves.items()}, rows.keys, rows.key_of, rows.per_step,
                       host(rows.counts))
    return EpisodeBatch(rows, host(batch.success), batch.env_ids, batch.demo_ids)


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


def _start_process(ring_fd: int) -> tuple[subprocess.Popen, int, Connection]:
    """Start :func:`isaaclab_suspend.recording.hdf5_writer.main` in a child process that maps the shared memory ``ring_fd``;
    returns it, the (non-blocking) file descriptor to write to it and the connection to read its answers."""
    to_child, from_parent = os.pipe()[::-1]
    from_child, to_parent = os.pipe()
    if hasattr(fcntl, "F_SETPIPE_SZ"):  # Linux: room for many exports, so that a send never waits on a write
        try:
            fcntl.fcntl(to_child, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        except OSError:  # above /proc/sys/fs/pipe-max-size: the default (64 KiB) stays
            pass
    # the module alone, not through this package, which imports torch and Isaac Lab (hdf5_writer imports h5py and
    # numpy only): a process starts in 0.5 s against 5 s on a busy core. main() returns with the files
    # closed; os._exit skips the interpreter's teardown (about 40 ms), which close() would otherwise wait for
    code = ("import importlib.util, os, sys; spec = importlib.util.spec_from_file_location('hdf5_writer', sys.argv[1]);"
            " module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module);"
            " module.main(*map(int, sys.argv[2:])); os._exit(0)")
    process = subprocess.Popen([sys.executable, "-c", code, hdf5_writer.__file__, str(from_parent), str(to_parent),
                                str(ring_fd)], pass_fds=(from_parent, to_parent, ring_fd))
    os.close(from_parent)
    os.close(to_parent)
    os.set_blocking(to_child, False)
    return process, to_child, Connection(from_child, writable=False)
