"""The process that writes recorded episodes to Isaac Lab's HDF5 layout; it imports only h5py and numpy.

:class:`~isaaclab_suspend.managers.EpisodeWriter` starts it with :func:`main` and talks to it over a pair of
pipes. It runs in its own process so that neither h5py nor compression ever holds the recording process's
GIL, and it ignores SIGINT: a Ctrl-C stops the recording, and the writer writes what it was handed. On Linux
it runs under ``SCHED_BATCH``, so that a message does not wake it ahead of the recording process (measured
at 512 envs on 2 busy cores: the pipe writes went from 1.77 to 0.04 ms per step).

Messages (pickled tuples), from the recording process:

* ``("open", paths, env_name, compression)``: create the file(s); ``compression`` is
  ``{"default": options, "uint8": options, "by_key": {path prefix: options}}``, options None (raw) or as
  for ``create_dataset`` (``compression``, ``compression_opts``, ``shuffle``);
* ``("env_args", dict)``: merge into every file's ``data.attrs["env_args"]``;
* ``("demos", {path: (dtype, shape, bytes)}, {path: samples}, [(row, file index, demo id | None, success,
  num_samples, seed | None, env id)])``: each array (its numpy dtype string, shape and raw bytes) holds one
  demo per row, padded (shape (demos, max samples, ...)), and ``samples[path][row]`` says how many of a row's
  samples are the demo's (0: the demo has no such dataset);
* ``("fault", point, nth, action)``: for tests, act at the ``nth`` time the writer reaches ``point``
  (``"demo"``, ``"datasets"``, ``"flush"``): ``"sigkill"`` kills the recording process group, ``"enospc"``
  raises a disk-full error, ``"pause"`` creates ``<first file>.paused`` and waits until it is removed (10 s
  at most);
* ``("close",)``: write what is left, close the files, answer and end.

Answers: ``("flushed", [(success, env id), ...])`` after each flush, for the demos written since the last;
``("error", errno | None, message, [(success, env id), ...])`` when a write fails (the demos listed were
written before the failure and are in the file); ``("closed",)``.
"""

from __future__ import annotations

import errno
import json
import os
import queue
import signal
import sys
import threading
import time
from multiprocessing.connection import Connection

import h5py
import numpy as np

FORMAT_VERSION = 1
"""Isaac Lab's ``DATASET_FORMAT_VERSION`` (XYZW quaternions); ``EpisodeWriter`` checks that they agree."""


class _File:
    """One dataset file kept open: ``data`` (``total``, ``env_args``) and ``data/demo_N``."""

    def __init__(self, path: str, env_name: str | None):
        self.path = path
        self.h5 = h5py.File(path, "w")
        self.h5.attrs["format_version"] = FORMAT_VERSION
        self.data = self.h5.create_group("data")
        self.data.attrs["total"] = 0
        self.data.attrs["env_args"] = json.dumps({"env_name": env_name or "", "type": 2})
        self.demo_count = 0
        self.total = 0


class _Writer:
    """Writes what one recording sends into its file(s), flushing whenever no message is waiting."""

    def __init__(self, conn_in: Connection, conn_out: Connection, open_message: tuple):
        _, paths, env_name, compression = open_message
        self.conn_in, self.conn_out = conn_in, conn_out
        self.compression = compression
        self.files: list[_File] = []  # for close(), should opening the second file fail
        self.written: list[tuple[bool, int]] = []  # demos written since the last answer
        self.fault: tuple[str, int, str] | None = None
        self.hits: dict[str, int] = {}
        self.files = [_File(path, env_name) for path in paths]

    def run(self) -> None:
        """Handle messages until told to close; flush whenever no message is waiting. A thread empties the pipe
        into an inbox meanwhile, so that the recording process never waits on a write to send."""
        inbox: queue.SimpleQueue[tuple | BaseException | None] = queue.SimpleQueue()
        threading.Thread(target=_receive_all, args=(self.conn_in, inbox), daemon=True).start()
        while True:
            message = inbox.get()
            if isinstance(message, BaseException):
                raise message
            if message is None:  # the recording process ended without closing: what it sent is written
                self.flush()
                return
            if message[0] == "close":
                self.flush()
                self.close()
                self.answer(("closed",))
                return
            self.handle(message)
            if inbox.empty():
                self.flush()

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
            _, raw, samples, demos = message
            arrays = {path: np.frombuffer(data, dtype).reshape(shape) for path, (dtype, shape, data) in raw.items()}
            for row, file_index, demo_id, success, num_samples, seed, env_id in demos:
                demo = {path: array[row, : samples[path][row]] for path, array in arrays.items() if samples[path][row]}
                self.write_demo(self.files[file_index], demo_id, demo, success, num_samples, seed)
                self.written.append((success, env_id))
        elif kind == "fault":
            self.fault = message[1:]

    def flush(self) -> None:
        self.point("flush")
        for file in self.files:
            file.h5.flush()
        if self.written:
            self.answer(("flushed", self.written))
            self.written = []

    def close(self) -> None:
        for file in self.files:
            try:
                file.h5.close()
            except Exception:  # noqa: BLE001 - closing after a failure: the flushed demos are on disk
                pass

    def write_demo(self, file: _File, demo_id: int | None, arrays: dict, success: bool, num_samples: int,
                   seed: int | None) -> None:
        """Write one demo; on failure remove what was written of it, so that the file holds whole demos only."""
        self.point("demo")
        name = f"demo_{file.demo_count if demo_id is None else demo_id}"
        if name in file.data:
            raise ValueError(f"Episode group '{name}' already exists in {file.path}.")
        group = file.data.create_group(name)
        try:
            for path, array in arrays.items():
                group.create_dataset(path, data=array, **self.filters(path, array))
            self.point("datasets")
            group.attrs["num_samples"] = num_samples
            if seed is not None:
                group.attrs["seed"] = seed
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
            raise OSError(errno.ENOSPC, "No space left on device")
        elif action == "pause":
            marker = f"{self.files[0].path}.paused"
            open(marker, "w").close()
            deadline = time.monotonic() + 10.0
            while os.path.exists(marker) and time.monotonic() < deadline:
                time.sleep(0.01)


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


def main(read_fd: int, write_fd: int) -> None:
    """Serve one recording: open the files, write the demos it sends, close them when told or when it ends."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(os, "SCHED_BATCH"):  # Linux: a message must not wake this process ahead of the recording's step
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    conn_in, conn_out = Connection(read_fd, writable=False), Connection(write_fd, readable=False)
    writer = None
    try:
        writer = _Writer(conn_in, conn_out, conn_in.recv())
        writer.answer(("opened",))
        writer.run()
    except BaseException as err:  # noqa: BLE001 - reported to the recording process
        code = err.errno if isinstance(err, OSError) else None
        written = writer.written if writer is not None else []
        try:
            conn_out.send(("error", code, f"{type(err).__name__}: {err}", written))
        except OSError:
            pass
    finally:
        if writer is not None:
            writer.close()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
