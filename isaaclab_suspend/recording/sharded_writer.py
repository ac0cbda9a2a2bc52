"""Several writer processes sharing the episodes of one recording, merged into its dataset file(s) at close."""

from __future__ import annotations

import contextlib
import errno
import os
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, NoReturn

from isaaclab.managers import DatasetExportMode

from .episode_writer import EpisodeBatch, EpisodeWriter, EpisodeWriterCfg, check_setting
from .part_files import merge_parts, part_paths

if TYPE_CHECKING:
    import numpy as np


class ShardedEpisodeWriter:
    """:class:`EpisodeWriter`'s interface over :attr:`EpisodeWriterCfg.num_writers` writer processes, for episode
    rates one process cannot write (its cost is per episode: a process per core scales it).

    Each export goes whole to the writer process with the fewest episodes pending (the next one in turn among
    equals), which writes it into its own part files beside the dataset file(s) (``part_files.part_paths``), in Isaac
    Lab's layout like one writer's. The writers number their demos in one sequence, in hand-over order, so that
    :meth:`close` merges the parts (``part_files.merge_parts``) into the dataset file(s) named as one writer process names
    them, then removes the parts. Each writer applies its own :attr:`EpisodeWriterCfg.queue_size` (back-pressure:
    an export waits for the writer it goes to; nothing is dropped), so a killed run loses at most that many
    unflushed episodes per writer.

    A writer's failure is raised on the caller's thread as with one writer, and so is a merge that fails; then no
    part is removed, and the error names the part files and the ``scripts/merge_shards.py`` command that merges
    them. An interrupt (Ctrl-C, SIGTERM) during the merge leaves them too, and says so in its message, and so does a
    killed process: the parts of a dataset are valid files, each of the demos it flushed.

    Args:
        cfg: The writers' configuration (:attr:`EpisodeWriterCfg.num_writers` of them).
        paths: The dataset file(s), as for :class:`EpisodeWriter`.
        mode: Which episodes go to which file.
        env_name: Name stored in ``env_args`` at creation.
        compress: False stores every dataset raw.

    Raises:
        FileExistsError: If a part file exists (left by a run whose merge did not run): it is neither merged nor
            overwritten.
    """

    def __init__(self, cfg: EpisodeWriterCfg, paths: list[str], mode: DatasetExportMode, env_name: str | None = None,
                 compress: bool = True):
        self.paths = paths
        self.parts = {path: part_paths(path, cfg.num_writers) for path in paths}
        """The part files of each dataset file, one per writer."""
        if any(os.path.lexists(part) for parts in self.parts.values() for part in parts):
            raise FileExistsError(errno.EEXIST, f"Part files of an earlier recording are in the way: {self._left()}."
                                  " Merge or remove them.")
        numbering = [0] * len(paths)
        self.writers: list[EpisodeWriter] = []
        """The writer processes; writer ``i`` writes part ``i`` of each dataset file."""
        try:
            for i in range(cfg.num_writers):
                self.writers.append(EpisodeWriter(cfg, [parts[i] for parts in self.parts.values()], mode, env_name,
                                                  compress, numbering))
        except BaseException:
            for writer in self.writers:  # nothing was handed over yet: their empty parts go too
                with contextlib.suppress(Exception):
                    writer.close()
                self._remove_parts(writer.paths)
            raise
        self.merge_s: float | None = None
        """Seconds the merge of :meth:`close` took (None before it ran)."""
        self._next = 0  # the writer first in turn among those with the fewest episodes pending
        self._allocated: int | None = None  # the writer whose memory the next put's episodes were gathered into
        self._closed = False

    @property
    def seed(self) -> int | None:
        """Seed stored with each demo."""
        return self.writers[0].seed

    @seed.setter
    def seed(self, seed: int | None) -> None:
        for writer in self.writers:
            writer.seed = seed

    @property
    def error(self) -> BaseException | None:
        """The error that stopped a writer, if one did."""
        return next((writer.error for writer in self.writers if writer.error is not None), None)

    @property
    def pending(self) -> int:
        """Episodes handed over and not yet flushed, by all writers."""
        return sum(writer.pending for writer in self.writers)

    @property
    def batches(self) -> int:
        """Batches handed over by :meth:`put` so far."""
        return sum(writer.batches for writer in self.writers)

    def written_count(self, success: bool, env_id: int | None = None) -> int:
        """Episodes of that success flushed (or dropped by the export mode) by all writers, of ``env_id`` or of all
        envs, as of their last reports."""
        return sum(writer.written_count(success, env_id) for writer in self.writers)

    def add_env_args(self, env_args: dict) -> None:
        """Merge ``env_args`` into every part's ``data.attrs["env_args"]``."""
        for writer in self.writers:
            writer.add_env_args(env_args)

    def allocate(self, nbytes: int) -> tuple[np.ndarray, int]:
        """A region of ``nbytes`` bytes of the shared memory of the writer the next :meth:`put` hands over to (see
        :meth:`EpisodeWriter.allocate`): the least loaded, or the one of an allocation never handed over, which
        frees it."""
        if self._allocated is None:
            self._allocated = self._least_loaded()
        with self._parts_kept():
            return self.writers[self._allocated].allocate(nbytes)

    def put(self, batch: EpisodeBatch) -> None:
        """Hand ``batch`` over to the writer whose memory it was gathered into, else to the least loaded one; waits
        while that writer's queue is full. Raises a writer's error, if any."""
        index = self._allocated if self._allocated is not None else self._least_loaded()
        with self._parts_kept():
            self.writers[index].put(batch)
        self._allocated = None
        self._next = (index + 1) % len(self.writers)

    def check(self) -> None:
        """Take the writers' reports and send what is ready, without waiting; raise a writer's error."""
        with self._parts_kept():
            for writer in self.writers:
                writer.check()

    def close(self) -> None:
        """Close the writers (each writes everything handed over), then merge the parts of each dataset file into
        it and remove them. Raises a writer's error if no call raised it yet, or the merge's, the parts kept.

        Raises:
            KeyboardInterrupt: On Ctrl-C or SIGTERM before the merge ends, whose message says which dataset files
                were not written, where their episodes are (the part files) and the command that merges them."""
        if self._closed:
            return
        self._closed = True
        try:
            failures = []
            for writer in self.writers:  # all of them, whatever one raises
                try:
                    writer.close()
                except (OSError, RuntimeError) as err:
                    failures.append(err)
            if failures:
                self._raise_kept(failures[0])
            if self.error is not None:  # raised already, saying where the parts are
                return
            start = time.perf_counter()
            for path, parts in self.parts.items():
                try:
                    merge_parts(parts, path)
                except (OSError, ValueError) as err:
                    self._raise_kept(err, f"Could not merge the part files into '{path}': {err}.")
                self._remove_parts(parts)
            self.merge_s = time.perf_counter() - start
        except KeyboardInterrupt as interrupt:
            unmerged = [path for path, parts in self.parts.items() if any(map(os.path.lexists, parts))]
            raise KeyboardInterrupt(f"Interrupted before the part files were merged: {unmerged} not written; the"
                                    f" episodes written are in the part files {self._left()}.") from interrupt

    """
    Internals.
    """

    def _least_loaded(self) -> int:
        """The writer with the fewest episodes pending, the first in turn among equals (round robin while they keep
        up)."""
        count = len(self.writers)
        turn = [(self._next + k) % count for k in range(count)]
        return min(turn, key=lambda i: self.writers[i].pending)

    @contextlib.contextmanager
    def _parts_kept(self) -> Iterator[None]:
        """Raise a writer's error saying where the parts are and how to merge them."""
        try:
            yield
        except (OSError, RuntimeError) as err:
            if self.error is None:  # not a writer's failure (e.g. a call after close)
                raise
            self._raise_kept(err)

    def _raise_kept(self, err: Exception, text: str | None = None) -> NoReturn:
        """Raise an error of ``err``'s kind (an OSError with its errno, else a RuntimeError): ``text`` (None:
        ``err``'s), then where the episodes written are."""
        if text is None:
            text = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        text = f"{text} The episodes written are in the part files {self._left()}."
        raise (OSError(err.errno, text) if isinstance(err, OSError) else RuntimeError(text)) from err

    def _left(self) -> str:
        """The part files there are, and the ``scripts/merge_shards.py`` command(s) that merge them into their
        dataset file(s)."""
        left = {path: [part for part in parts if os.path.lexists(part)] for path, parts in self.parts.items()}
        commands = "; ".join(f"scripts/merge_shards.py --datasets {' '.join(parts)} --output {path}"
                             for path, parts in left.items() if parts)
        return f"{[part for parts in left.values() for part in parts]} ({commands} merges them)"

    @staticmethod
    def _remove_parts(parts: list[str]) -> None:
        for part in parts:
            with contextlib.suppress(FileNotFoundError):
                os.remove(part)


def open_episode_writer(cfg: EpisodeWriterCfg, paths: list[str], mode: DatasetExportMode, env_name: str | None = None,
                        compress: bool = True) -> EpisodeWriter | ShardedEpisodeWriter:
    """The writer of :attr:`EpisodeWriterCfg.num_writers` processes: one :class:`EpisodeWriter` (which writes the
    dataset file(s) itself), or a :class:`ShardedEpisodeWriter` of several.

    Raises:
        ValueError: If :attr:`EpisodeWriterCfg.num_writers` is not an integer of at least 1.
    """
    check_setting("EpisodeWriterCfg.num_writers", cfg.num_writers, 1)
    kind = EpisodeWriter if cfg.num_writers == 1 else ShardedEpisodeWriter
    return kind(cfg, paths, mode, env_name, compress)
