"""The part files of a dataset written by several writer processes: their names, and their merge into the one file,
written whole (a temporary file renamed once complete) as every merged dataset of this package is."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import threading
import uuid
from collections.abc import Iterator, Sequence

import h5py
from h5py import h5o


def part_paths(path: str, count: int) -> list[str]:
    """The part files of the dataset ``path`` written by ``count`` writer processes: ``<stem>-writer<i>of<count>.hdf5``
    beside it (not named as shards, ``-shard<i>of<K>``, which are separate runs)."""
    stem = path.removesuffix(".hdf5")
    return [f"{stem}-writer{i}of{count}.hdf5" for i in range(count)]


def merge_parts(parts: Sequence[str], output: str) -> int:
    """Merge the part files ``parts`` of one dataset into ``output``, written whole (:func:`whole_file`); returns the
    number of demos. The parts are left as they are.

    The parts number their demos in one sequence (:class:`~isaaclab_suspend.recording.ShardedEpisodeWriter`), so
    each demo keeps its name: the merged file names its demos as one writer process would have. The part holding the
    most demos is copied as a file; the demos of the others are copied into it with HDF5's object copy, stored as
    they were written (compression, chunks, attributes; nothing is decoded), and ``total`` is the parts' sum. The
    parts' ``env_args`` are the same (the writers are handed the same), the copied part's stay.

    Raises:
        ValueError: If two parts hold a demo of the same name.
        OSError: If a part cannot be read or the merge cannot be written (e.g. no space left).
    """
    demos = []
    for part in parts:
        with h5py.File(part, "r") as f:
            demos.append(len(f["data"]))
    base = max(range(len(parts)), key=demos.__getitem__)
    with whole_file(output) as temporary:
        shutil.copyfile(parts[base], temporary)
        with h5py.File(temporary, "r+") as merged:
            data = merged["data"]
            total = int(data.attrs["total"])
            for part in parts[:base] + parts[base + 1:]:
                with h5py.File(part, "r") as f:
                    source = f["data"]
                    for name in source:
                        if name in data:
                            raise ValueError(f"'{part}' and another part both hold '{name}'.")
                        h5o.copy(source.id, name.encode(), data.id, name.encode())
                    total += int(source.attrs["total"])
            data.attrs["total"] = total
    return sum(demos)


@contextlib.contextmanager
def whole_file(path: str) -> Iterator[str]:
    """A temporary path beside ``path`` (a hidden ``.partial`` name with its extension, e.g. ``.partial.hdf5``) for
    the block to write a file at, renamed to ``path`` once the block completes: a failure, Ctrl-C or SIGTERM (raised
    as ``KeyboardInterrupt`` meanwhile) removes it instead, and leaves an existing ``path`` untouched. The block
    closes the file it wrote."""
    directory, name = os.path.split(os.path.abspath(path))
    temporary = os.path.join(directory, f".{name}.{uuid.uuid4().hex[:12]}.partial{os.path.splitext(name)[1]}")
    with terminated_as_interrupt():
        try:
            yield temporary
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.remove(temporary)
            raise


@contextlib.contextmanager
def terminated_as_interrupt() -> Iterator[None]:
    """SIGTERM raises ``KeyboardInterrupt`` in the block (as Ctrl-C does), so that what cleans up after an
    interruption also runs when the process is killed politely; outside the main thread, nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
