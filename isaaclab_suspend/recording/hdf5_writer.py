"""The process that writes recorded episodes to Isaac Lab's HDF5 layout; it imports only h5py and numpy.

:class:`~isaaclab_suspend.recording.EpisodeWriter` starts it with :func:`main` and talks to it over a pair of
pipes. It runs in its own process so that neither h5py nor compression ever holds the recording process's
GIL, and it ignores SIGINT: a Ctrl-C stops the recording, and the writer writes what it was handed. On Linux
it runs under ``SCHED_BATCH``, so that a message does not wake it ahead of the recording process (measured
at 512 envs on 2 busy cores: the pipe writes went from 1.77 to 0.04 ms per step).

Messages (pickled tuples), from the recording process:

* ``("open", paths, env_name, compression, ring size, flush interval)``: create the file(s) and map the
  shared memory the arrays are in (its first ``ring size`` bytes); ``compression`` is
  ``{"default": options, "uint8": options, "by_key": {path prefix: options}}``, options None (raw) or as
  for ``create_dataset`` (``compression``, ``compression_opts``, ``shuffle``); flush at most every
  ``flush interval`` seconds while messages keep coming;
* ``("ring", size)``: the shared memory grew to ``size`` bytes;
* ``("env_args", dict)``: merge into every file's ``data.attrs["env_args"]``;
* ``("demos", {path: (dtype, shape, offset)}, {path: key}, counts, [(row, file index, demo id | None, success,
  num_samples, seed | None, env id)])``: each array (its numpy dtype string, shape and offset in the shared
  memory) holds one demo per row, padded (shape (rows, max samples, ...)), and ``counts[key[path]][row]``
  says how many of a row's samples are the demo's (0: the demo has no such dataset); once written, the memory
  of the message is the recording process's again;
* ``("fault", point, nth, action)``: for tests, act at the ``nth`` time the writer reaches ``point``
  (``"demo"``, ``"datasets"``, ``"flush"``): ``"sigkill"`` kills the recording process group, ``"enospc"``
  raises a disk-full error, ``"pause"`` creates ``<first file>.paused`` and waits until it is removed (10 s
  at most);
* ``("close",)``: write what is left, close the files, answer and end;
* ``("many", [message, ...])``: the messages, in order (the recording process sends the demos of several
  exports together).

Answers: ``("flushed", [(success, env id), ...], messages)`` after a flush, for the demos written and the
``"demos"`` messages done since the last;
``("error", errno | None, message, [(success, env id), ...])`` when a write fails (the demos listed were
written before the failure and are in the file; the message names the file and how many demos are safe in it);
``("closed",)``.

A full disk: before each demo the writer checks that the disk keeps :data:`RESERVE_BYTES` beside the demo's
arrays, and stops before writing it otherwise, closing the file whole (HDF5 never meets ``ENOSPC``). Should a
write of HDF5 fail all the same (another process took the reserve meanwhile), HDF5 is asked nothing more
(undoing the demo or closing a file whose writes fail can crash it): the file keeps what its last flush wrote,
and the message says how many demos that is. HDF5 itself may still crash in a flush whose metadata writes fail
(measured under a file-size limit: a segfault inside ``H5Fflush``); the recording process then reports the
death with the demos read back from the file. The writer's stderr goes to /dev/null (h5py prints an "Exception
ignored" block for every object it frees after a failed write); every error it meets goes to the recording
process.
"""

from __future__ import annotations

import errno
import json
import mmap
import os
import queue
import re
import signal
import sys
import threading
import time
from multiprocessing.connection import Connection

import h5py
import numpy as np
from h5py import h5d, h5p, h5s, h5t

_LINKS = h5p.create(h5p.LINK_CREATE)  # as h5py's groups create links: intermediate groups, UTF-8 names
_LINKS.set_create_intermediate_group(True)
_LINKS.set_char_encoding(h5t.CSET_UTF8)
_RAW = h5p.create(h5p.DATASET_CREATE)  # as h5py's create_dataset makes a raw dataset: no timestamps
_RAW.set_obj_track_times(False)

RESERVE_BYTES = 2**20 + 2**18
"""Free space each demo must leave on the disk (beside its arrays and :data:`DEMO_OVERHEAD_BYTES`), so that the
file can still be flushed and closed whole: the metadata cache (:data:`METADATA_CACHE_BYTES`) and a margin."""

DEMO_OVERHEAD_BYTES = 2**16
"""HDF5 metadata one demo may add (its group, dataset headers and attributes; a few KiB in practice)."""

FORMAT_VERSION = 1
"""Isaac Lab's ``DATASET_FORMAT_VERSION`` (XYZW quaternions); ``EpisodeWriter`` checks that they agree."""


METADATA_CACHE_BYTES = 2**18
"""Size of each file's HDF5 metadata cache, fixed. HDF5's adaptive cache keeps the headers of every demo written:
writing 250 Cartpole demos took 0.6 ms each and closing the file 8-9 ms; with 256 KiB, 0.43 ms and 0.9 ms (3000
demos: 0.45 ms each, and 6.6 ms against 14 ms to close). Closing is what a recording's end waits for."""


def _fix_metadata_cache(h5: h5py.File, size: int) -> None:
    config = h5.id.get_mdc_config()
    config.set_initial_size = True
    config.initial_size = config.min_size = config.max_size = size
    config.incr_mode = config.flash_incr_mode = config.decr_mode = 0  # off: the size stays
    h5.id.set_mdc_config(config)


class _File:
    """One dataset file kept open: ``data`` (``total``, ``env_args``) and ``data/demo_N``."""

    def __init__(self, path: str, env_name: str | None):
        self.path = path
        self.h5 = h5py.File(path, "w")
        _fix_metadata_cache(self.h5, METADATA_CACHE_BYTES)
        self.h5.attrs["format_version"] = FORMAT_VERSION
        self.data = self.h5.create_group("data")
        self.data.attrs["total"] = 0
        self.data.attrs["env_args"] = json.dumps({"env_name": env_name or "", "type": 2})
        self.demo_count = 0
        self.total = 0
        self.demos = 0  # demos written
        self.flushed = 0  # demos written as of the last flush


class _Writer:
    """Writes what one recording sends into its file(s), flushing whenever no message is waiting."""

    def __init__(self, conn_in: Connection, conn_out: Connection, ring_fd: int, open_message: tuple):
        _, paths, env_name, compression, ring_size, self.flush_interval = open_message
        self.conn_in, self.conn_out = conn_in, conn_out
        self.compression = compression
        self.ring_fd = ring_fd
        self.ring = mmap.mmap(ring_fd, ring_size, access=mmap.ACCESS_READ)
        self.released = 0  # "demos" messages done since the last answer
        self.files: list[_File] = []  # for close(), should opening the second file fail
        self.written: list[tuple[bool, int]] = []  # demos written since the last answer
        self.fault: tuple[str, int, str] | None = None
        self.broken = False  # HDF5 failed to undo a failed write: the files are not touched again
        self.hits: dict[str, int] = {}
        self.files = [_File(path, env_name) for path in paths]

    def run(self) -> None:
        """Handle messages until told to close; flush when no message is waiting and the flush interval is over
        (or as soon as it is, if none came since). A thread empties the pipe into an inbox meanwhile, so that the
        recording process never waits on a write to send."""
        inbox: queue.SimpleQueue[tuple | BaseException | None] = queue.SimpleQueue()
        threading.Thread(target=_receive_all, args=(self.conn_in, inbox), daemon=True).start()
        last_flush, unflushed = time.monotonic(), False
        while True:
            try:
                timeout = max(0.0, last_flush + self.flush_interval - time.monotonic()) if unflushed else None
                message = inbox.get(timeout=timeout)
            except queue.Empty:  # idle since the last message, and the interval is over
                self.flush()
                last_flush, unflushed = time.monotonic(), False
                continue
            if isinstance(message, BaseException):
                raise message
            if message is None:  # the recording process ended without closing: what it sent is written
                self.flush()
                return
            for item in message[1] if message[0] == "many" else (message,):
                if item[0] == "close":
                    self.flush()
                    self.close()
                    self.answer(("closed",))
                    return
                self.handle(item)
            unflushed = True
            if inbox.empty() and time.monotonic() >= last_flush + self.flush_interval:
                self.flush()
                last_flush, unflushed = time.monotonic(), False

    def answer(self, message: tuple) -> None:
        try:
            self.conn_out.send(message)
        except OSError:  # the recording process is gone; the file is what matters
            pass

    def handle(self, message: tuple) -> None:
        kind = message[0]
        if kind == "env_args":
            for file in self.files:
                merged = json.loads(file.data.attrs["env_args"])
                merged.update(message[1])
                file.data.attrs["env_args"] = json.dumps(merged)
        elif kind == "demos":
            _, layout, key_of, counts, demos = message
            arrays = {path: np.ndarray(shape, dtype, buffer=self.ring, offset=offset)
                      for path, (dtype, shape, offset) in layout.items()}
            for row, file_index, demo_id, success, num_samples, seed, env_id in demos:
                samples = {path: counts[key_of[path]][row] for path in arrays}
                demo = {path: array[row, : samples[path]] for path, array in arrays.items() if samples[path]}
                self.write_demo(self.files[file_index], demo_id, demo, success, num_samples, seed)
                self.written.append((success, env_id))
            self.released += 1
        elif kind == "ring":
            self.ring = mmap.mmap(self.ring_fd, message[1], access=mmap.ACCESS_READ)
        elif kind == "fault":
            self.fault = message[1:]

    def flush(self) -> None:
        self.point("flush")
        for file in self.files:
            try:
                file.h5.flush()
            except BaseException:
                self.broken = True  # a flush that fails leaves the file as its last one wrote it
                raise
            file.flushed = file.demos
        if self.written or self.released:
            self.answer(("flushed", self.written, self.released))
            self.written, self.released = [], 0

    def close(self) -> None:
        if self.broken:
            return
        for file in self.files:
            try:
                file.h5.close()
            except Exception:  # noqa: BLE001 - closing after a failure: the flushed demos are on disk
                pass

    def write_demo(self, file: _File, demo_id: int | None, arrays: dict, success: bool, num_samples: int,
                   seed: int | None) -> None:
        """Write one demo. On an injected fault (a test's stand-in for a full disk) remove what was written of it, so
        that the file holds whole demos only; on a failure of HDF5 itself ask HDF5 nothing more (undoing or closing
        after a failed write can crash it): the file keeps what its last flush wrote."""
        self.point("demo")
        check_space(file, sum(array.nbytes for array in arrays.values()))
        name = f"demo_{file.demo_count if demo_id is None else demo_id}"
        if name in file.data:
            raise ValueError(f"Episode group '{name}' already exists in {file.path}.")
        try:
            group = file.data.create_group(name)
            for path, array in arrays.items():
                options = self.filters(path, array)
                if options:
                    group.create_dataset(path, data=array, **options)
                else:  # what create_dataset does for raw data, in half its time (per demo, in place)
                    dataset = h5d.create(group.id, path.encode(), h5t.py_create(array.dtype, logical=True),
                                         h5s.create_simple(array.shape), dcpl=_RAW, lcpl=_LINKS)
                    if array.size:
                        dataset.write(h5s.ALL, h5s.ALL, np.ascontiguousarray(array))
            self.point("datasets")
            group.attrs["num_samples"] = num_samples
            if seed is not None:
                group.attrs["seed"] = seed
            group.attrs["success"] = success
            file.data.attrs["total"] = file.total + num_samples
        except InjectedFault:
            try:
                del file.data[name]
                file.h5.flush()
                file.flushed = file.demos
            except Exception:  # noqa: BLE001 - keep the original error
                self.broken = True
            raise
        except BaseException:
            self.broken = True
            raise
        file.total += num_samples
        file.demos += 1
        if demo_id is None:
            file.demo_count += 1

    def failure(self, err: BaseException) -> tuple[int | None, str]:
        """The errno of what stopped the writer (also where h5py says it only in its text) and one line: what (for
        a full disk: its free space) and how many demos are safe in each file."""
        code = err.errno if isinstance(err, OSError) else None
        if code is None and (said := re.search(r"errno = (\d+)", str(err))):  # h5py's text of a failed write
            code = int(said[1])
        safe = ", ".join(f"{file.flushed if self.broken else file.demos} in {file.path}" for file in self.files)
        if code == errno.ENOSPC:
            stat = os.statvfs(os.path.dirname(os.path.abspath(self.files[0].path)))
            free = stat.f_bavail * stat.f_frsize / 2**20
            code, what = errno.ENOSPC, f"no space left on its disk ({free:.2f} MiB free)"
        else:
            what = " ".join(f"{type(err).__name__}: {err}".split())[:300]
        how = "as of the last flush" if self.broken else "the file closed whole"
        return code, f"{what}; demos safe: {safe} ({how})"

    def filters(self, path: str, array) -> dict:
        """``create_dataset`` options of a dataset: the compression of the longest matching key, else by dtype;
        a compressed dataset is one chunk (it is written once, whole)."""
        by_key = self.compression["by_key"]
        matches = [key for key in by_key if path == key or path.startswith(f"{key}/")]
        if matches:
            options = by_key[max(matches, key=len)]
        else:
            options = self.compression["uint8" if array.dtype == np.uint8 else "default"]
        if not options or array.size == 0:
            return {}
        return {**options, "chunks": array.shape}

    def point(self, name: str) -> None:
        if self.fault is None or self.fault[0] != name:
            return
        self.hits[name] = self.hits.get(name, 0) + 1
        if self.hits[name] != self.fault[1]:
            return
        action = self.fault[2]
        if action == "sigkill":
            os.killpg(os.getpgid(os.getppid()), signal.SIGKILL)
        elif action == "enospc":
            raise InjectedFault(errno.ENOSPC, "No space left on device")
        elif action == "pause":
            marker = f"{self.files[0].path}.paused"
            open(marker, "w").close()
            deadline = time.monotonic() + 10.0
            while os.path.exists(marker) and time.monotonic() < deadline:
                time.sleep(0.01)


class InjectedFault(OSError):
    """The disk-full error a test injects (``("fault", point, nth, "enospc")``), HDF5 itself intact."""


def check_space(file: _File, nbytes: int) -> None:
    """Raise ``ENOSPC`` if a demo of ``nbytes`` bytes of arrays would leave less than :data:`RESERVE_BYTES` free
    on the disk of ``file``."""
    stat = os.statvfs(os.path.dirname(os.path.abspath(file.path)))
    free, needed = stat.f_bavail * stat.f_frsize, nbytes + DEMO_OVERHEAD_BYTES + RESERVE_BYTES
    if free < needed:
        raise OSError(errno.ENOSPC, "No space left on device")


def _silence_stderr() -> None:
    """Send stderr to /dev/null: a failing HDF5 makes h5py print an "Exception ignored" block for every object it
    frees, from inside the failing call already; every error of the writer goes to the recording process."""
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    os.close(null)


def _receive_all(conn: Connection, inbox: queue.SimpleQueue) -> None:
    """Move every message of ``conn`` to ``inbox``; then None once the recording process has closed its end, or
    the error that stopped the reading."""
    try:
        while True:
            inbox.put(conn.recv())
    except (EOFError, OSError):
        inbox.put(None)
    except BaseException as err:  # noqa: BLE001 - raised by the writer, which reports it
        inbox.put(err)


def main(read_fd: int, write_fd: int, ring_fd: int) -> None:
    """Serve one recording: open the files, write the demos it sends (their arrays in the shared memory
    ``ring_fd``), close them when told or when it ends."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _silence_stderr()
    if hasattr(os, "SCHED_BATCH"):  # Linux: a message must not wake this process ahead of the recording's step
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    conn_in, conn_out = Connection(read_fd, writable=False), Connection(write_fd, readable=False)
    writer = None
    try:
        writer = _Writer(conn_in, conn_out, ring_fd, conn_in.recv())
        writer.answer(("opened",))
        writer.run()
    except BaseException as err:  # noqa: BLE001 - reported to the recording process
        if writer is not None:
            writer.close()
        written = writer.written if writer is not None else []
        code, message = writer.failure(err) if writer is not None else (getattr(err, "errno", None), str(err))
        try:
            conn_out.send(("error", code, message, written))
        except OSError:
            pass
    else:
        writer.close()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
