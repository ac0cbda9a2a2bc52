"""Preallocated per-env episode storage on the env device, written with a per-env write index."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import warp as wp

from ..tensor_tree import flatten_tree, unflatten_tree
from .staging_ring import aligned_offsets

EpisodeTree = dict[str, "torch.Tensor | EpisodeTree"]
"""A nested dict of tensors, as Isaac Lab's recorder terms return them and :class:`EpisodeData` stores them."""


@dataclass
class EpisodeRows:
    """Episodes taken out of :class:`EpisodeBuffers`: copies, padded to a common number of samples; device
    tensors, or numpy arrays when the buffers are on the CPU."""

    leaves: dict[str, torch.Tensor | np.ndarray]
    """Samples by dataset path (``states/articulation/robot/joint_position``); row b holds episode b, of which
    only the first ``counts[key_of[path], b]`` samples are valid. Shape: (B, samples, ...)."""
    keys: list[str]
    """Recorded key (``actions``, ``initial_state``, ...) of each row of :attr:`counts`."""
    key_of: dict[str, int]
    """Row of :attr:`counts` of each path of :attr:`leaves`."""
    per_step: np.ndarray
    """Whether each key is recorded every step; an episode without such a sample was reset before it
    stepped. Shape: (K,), bool."""
    counts: torch.Tensor | np.ndarray
    """Samples of each key (row) and episode (column). Shape: (K, B)."""
    offsets: dict[str, int] | None = None
    """Offset of each leaf in the memory :meth:`EpisodeBuffers.take` gathered it into, when it was given one."""


class _Stream:
    """The tensors recorded under one key: one leaf buffer per tensor of the value, one write index per env.

    Its write index and first rows are rows of tensors that :class:`EpisodeBuffers` shares between all keys
    (bound by :meth:`EpisodeBuffers._stream`), so that clearing or counting episodes is one op for all keys.
    """

    def __init__(self, key: str, capacity: int, per_step: bool):
        self.key = key
        """Key the recorder term returned (``actions``, ``states``, ``initial_state``, ...)."""
        self.per_step = per_step
        """Whether the key is recorded at every step (masked appends) rather than at resets (row appends)."""
        self.capacity = capacity
        """Samples per env the leaf buffers hold."""
        self.leaves: dict[tuple[str, ...], torch.Tensor] = {}
        """Leaf buffers by path inside the value. Shape: (num_envs, capacity, ...)."""
        self.flat: dict[tuple[str, ...], torch.Tensor] = {}
        """The same buffers viewed as (num_envs * capacity, ...): sample t of env i is row ``i * capacity + t``."""
        self._host: dict[tuple[str, ...], np.ndarray] = {}  # numpy views of the CPU buffers, made at first use
        self.names: dict[tuple[str, ...], str] = {}
        """Dataset path of each leaf (``key/path``)."""
        self.row_start: torch.Tensor
        """Flat row of each env's first sample, ``env_id * capacity``. Shape: (num_envs,)."""
        self.row: torch.Tensor
        """Flat row of each env's next sample, its write index: ``row_start + count``. Shape: (num_envs,)."""
        self.bound = 0
        """Host-side upper bound of ``count.max()``: the device is read only when it reaches :attr:`capacity`."""
        self.index: int
        """Row of the key in the per-key tensors :class:`EpisodeBuffers` shares between all keys."""

    @property
    def count(self) -> torch.Tensor:
        """Samples of each env's open episode. Shape: (num_envs,)."""
        return self.row - self.row_start

    def add_leaf(self, path: tuple[str, ...], like: torch.Tensor) -> None:
        """Allocate the buffer of a leaf with the sample shape and dtype of ``like`` (shape (rows, ...))."""
        shape = (self.row.shape[0], self.capacity, *like.shape[1:])
        self._set(path, torch.zeros(shape, dtype=like.dtype, device=self.row.device))

    def write(self, leaves: dict[tuple[str, ...], torch.Tensor], rows: torch.Tensor) -> None:
        """Copy each leaf's rows into the flat buffer rows ``rows`` (one per leaf row). Shape of ``rows``: (B,)."""
        for path, leaf in leaves.items():
            target = self.flat[path]
            if leaf.ndim == 0 or leaf.shape[0] != rows.shape[0]:
                name = "/".join((self.key, *path))
                raise ValueError(f"Recorded '{name}' must have {rows.shape[0]} rows, got shape {tuple(leaf.shape)}.")
            target.index_copy_(0, rows, leaf if leaf.dtype == target.dtype else leaf.to(target.dtype))

    def grow(self, capacity: int) -> None:
        """Reallocate every leaf with room for ``capacity`` samples per env, keeping the recorded ones."""
        for path, old in list(self.leaves.items()):
            new = torch.zeros((old.shape[0], capacity, *old.shape[2:]), dtype=old.dtype, device=old.device)
            new[:, : self.capacity] = old
            self._set(path, new)
        count = self.count
        torch.mul(torch.arange(self.row.shape[0], device=self.row.device), capacity, out=self.row_start)
        torch.add(self.row_start, count, out=self.row)
        self.capacity = capacity

    def _set(self, path: tuple[str, ...], buffer: torch.Tensor) -> None:
        self.leaves[path] = buffer
        self.flat[path] = buffer.view(-1, *buffer.shape[2:])
        self.names[path] = "/".join((self.key, *path))
        self._host.pop(path, None)

    def host(self, path: tuple[str, ...]) -> np.ndarray:
        """The buffer of a leaf viewed by numpy (a CPU buffer)."""
        view = self._host.get(path)
        if view is None:
            view = self._host[path] = self.leaves[path].numpy()
        return view


class EpisodeBuffers:
    """The open episode of every env, stored in device tensors allocated once per recorded key.

    Each key a recorder term returns (a tensor or a nested dict of tensors with one row per env) gets one
    buffer per tensor of shape (num_envs, capacity, ...) and a write index per env: the row of its next sample
    in the buffers viewed as (num_envs * capacity, ...), its first row plus the samples of its open episode.
    Recording a step for a bool mask of envs is one ``index_copy_`` per tensor that writes *every* env's row
    at its write index, followed by ``index += mask``: the rows of envs outside the mask land in the slot
    after their last sample and are overwritten by their next sample, so nothing is selected, nothing is
    synchronised with the host and no Python loop runs over envs. Episodes leave the buffers at export, as
    copies gathered for all exported envs at once (:meth:`take`).

    A buffer that fills up doubles. Whether it may be full is known from a host-side upper bound of the write
    indices, so the device is read only when the bound reaches the capacity; with the capacity a little
    above the longest episode that happens once every few dozen steps at most.

    Args:
        num_envs: Number of envs.
        capacity: Initial samples per env of the buffers of per-step keys (keys recorded at resets start at 1).
        device: Device of the buffers (the env device).
    """

    def __init__(self, num_envs: int, capacity: int, device: str | torch.device):
        if capacity < 1:
            raise ValueError(f"The episode buffers need a capacity of at least 1 sample, got {capacity}.")
        self.num_envs = num_envs
        self.capacity = capacity
        self.device = device
        self._on_cpu = torch.device(device).type == "cpu"
        self._streams: dict[str, _Stream] = {}
        self._rows = torch.zeros(0, num_envs, dtype=torch.long, device=device)
        """Write index of each key (in creation order) and env. Shape: (num_keys, num_envs)."""
        self._row_starts = torch.zeros(0, num_envs, dtype=torch.long, device=device)
        """First row of each key and env. Shape: (num_keys, num_envs)."""
        self._host_views: tuple[np.ndarray, np.ndarray] | None = None  # _rows, _row_starts by numpy (CPU)
        self._appends = np.zeros(0, dtype=np.int64)
        """Samples appended to each key so far (host side): each raised every count by at most one."""
        self._appends_at_clear = np.zeros((0, num_envs), dtype=np.int64)
        """:attr:`_appends` when each env's episode was last emptied by host ids, so that ``_appends[k] -
        _appends_at_clear[k, i]`` bounds env i's count of key k from the host. Shape: (num_keys, num_envs)."""
        self._leaf_keys: dict[tuple[str, ...], str] = {}
        """Key owning each full leaf path, to refuse two keys writing the same dataset."""

    def __str__(self) -> str:
        lines = []
        for stream in self._streams.values():
            for path, leaf in stream.leaves.items():
                lines.append(f"{'/'.join((stream.key, *path))}: {tuple(leaf.shape[2:])} {leaf.dtype}")
        return "\n".join(lines)

    @property
    def capacities(self) -> dict[str, int]:
        """Samples per env each key's buffers hold now, by key."""
        return {key: stream.capacity for key, stream in self._streams.items()}

    @property
    def bytes_per_step(self) -> int:
        """Bytes one step of one env adds to the per-step buffers (0 before the first step is recorded)."""
        return sum(
            leaf[0, 0].numel() * leaf.element_size()
            for stream in self._streams.values()
            if stream.per_step
            for leaf in stream.leaves.values()
        )

    """
    Operations.
    """

    def append(self, key: str, value: torch.Tensor | wp.array | Mapping, env_mask: torch.Tensor | None) -> None:
        """Append one sample to the open episode of the envs in ``env_mask`` (all envs if None).

        No host synchronisation unless the host-side bound says the buffer may be full.

        Args:
            key: The key (``/`` separates nested keys, as in :meth:`RecorderManager.add_to_episodes`).
            value: A tensor (or warp array) with one row per env, or a nested dict of them. Shape: (num_envs, ...).
            env_mask: The envs that record this sample. Shape: (num_envs,), bool, on the device.
        """
        leaves = _leaves(value)
        stream = self._stream(key, leaves, per_step=True)
        if stream.bound >= stream.capacity:
            stream.bound = int(stream.count.max())
            if stream.bound >= stream.capacity:
                stream.grow(2 * stream.capacity)
        stream.write(leaves, stream.row)
        if env_mask is None:
            stream.row += 1
        else:
            stream.row += env_mask
        stream.bound += 1
        self._appends[stream.index] += 1

    def append_rows(self, key: str, value: torch.Tensor | wp.array | Mapping, env_ids: torch.Tensor) -> None:
        """Append one sample to the open episode of each env in ``env_ids`` (reads the device once).

        Args:
            key: The key (``/`` separates nested keys).
            value: A tensor (or warp array) with one row per id, or a nested dict of them. Shape: (len(env_ids), ...).
            env_ids: Unique env ids. Shape: (B,), integer, on the device.
        """
        leaves = _leaves(value)
        stream = self._stream(key, leaves, per_step=False)
        if env_ids.numel() == 0:
            return
        rows = stream.row[env_ids]
        needed = int((rows - stream.row_start[env_ids]).max()) + 1
        if needed > stream.capacity:
            stream.grow(max(needed, 2 * stream.capacity))
            rows = stream.row[env_ids]
        stream.write(leaves, rows)
        stream.row.index_copy_(0, env_ids, rows + 1)
        stream.bound += 1
        self._appends[stream.index] += 1

    def clear(self, env_ids: torch.Tensor | slice | None, host_ids: Sequence[int] | slice | None = None) -> None:
        """Empty the open episodes of ``env_ids`` (a 1-D integer tensor on the device, or a slice; on the CPU
        None with ``host_ids``, which are then the ones used).

        ``host_ids``, the same ids known on the host (or the slice), tightens the host-side bounds of their
        counts that :meth:`take` copies up to; without them the bounds stay valid, only looser.
        """
        if host_ids is not None:
            host_ids = host_ids if isinstance(host_ids, slice) else np.asarray(host_ids, dtype=np.int64)
            self._appends_at_clear[:, host_ids] = self._appends[:, None]
        if self._on_cpu and host_ids is not None:  # numpy's indexing: a fraction of torch's
            rows, row_starts = self._host_rows()
            rows[:, host_ids] = row_starts[:, host_ids]
        else:
            self._rows[:, env_ids] = self._row_starts[:, env_ids]

    def episode(self, env_id: int) -> EpisodeTree:
        """A copy of the open episode of ``env_id``, tensors of shape (num_samples, ...); ``{}`` before it steps.

        Reads the device once.
        """
        streams = list(self._streams.values())
        counts = (self._rows[:, env_id] - self._row_starts[:, env_id]).tolist()
        if not any(n > 0 for stream, n in zip(streams, counts) if stream.per_step):
            return {}
        return unflatten_tree({
            (*stream.key.split("/"), *path): leaf[env_id, :n].clone()
            for stream, n in zip(streams, counts)
            if n > 0
            for path, leaf in stream.leaves.items()
        })

    def take(
        self,
        env_ids: torch.Tensor | None,
        host_ids: Sequence[int],
        allocate: Callable[[int], tuple[np.ndarray, int]] | None = None,
    ) -> EpisodeRows:
        """Copies of the open episodes of ``env_ids``, without a host sync (:meth:`clear` empties them).

        Each leaf is copied in one gather of the rows of ``env_ids``, up to the samples these episodes may hold;
        the copies are the caller's (the buffers never write them). On a GPU that is the host-side bound of the
        samples appended since they were last cleared by host ids. On the CPU it is their exact counts, read
        from the host, and the gathers are numpy's (a quarter of the time of torch's indexing for the few rows an
        export takes) which, with ``allocate``, write straight into the memory it returns.

        Args:
            env_ids: Unique env ids. Shape: (B,), integer, on the device (on the CPU: unused, may be None).
            host_ids: The same ids, on the host.
            allocate: On the CPU, where the copies go: called once with the bytes they need, it returns a uint8
                array and the offset of a region of that many bytes in it; :attr:`EpisodeRows.offsets` says where
                in the array each copy is. Ignored on other devices.
        """
        streams = list(self._streams.values())
        host_ids = np.asarray(host_ids, dtype=np.int64)
        keys, key_of, per_step = [s.key for s in streams], {}, np.array([s.per_step for s in streams], dtype=bool)
        if not self._on_cpu:
            cleared = self._appends_at_clear[:, host_ids].min(axis=1) if host_ids.size else self._appends
            since_clear = (self._appends - cleared).tolist()
            leaves = {}
            for k, stream in enumerate(streams):
                samples = min(stream.bound, stream.capacity, since_clear[k])
                for path, leaf in stream.leaves.items():
                    leaves[stream.names[path]] = leaf[env_ids, :samples]
                    key_of[stream.names[path]] = k
            counts = self._rows[:, env_ids] - self._row_starts[:, env_ids]
            return EpisodeRows(leaves, keys, key_of, per_step, counts)
        rows, row_starts = self._host_rows()
        counts = rows[:, host_ids] - row_starts[:, host_ids]
        samples = counts.max(axis=1).tolist() if host_ids.size else [0] * len(streams)
        sources = [(stream.names[path], k, stream.host(path), samples[k])
                   for k, stream in enumerate(streams) for path in stream.leaves]
        for name, k, _, _ in sources:
            key_of[name] = k
        if allocate is None:
            leaves = {name: leaf[host_ids, :n] for name, _, leaf, n in sources}
            return EpisodeRows(leaves, keys, key_of, per_step, counts)
        shapes = [(host_ids.size, n, *leaf.shape[2:]) for _, _, leaf, n in sources]
        starts, size = aligned_offsets([math.prod(shape) * leaf.itemsize
                                        for shape, (_, _, leaf, _) in zip(shapes, sources)])
        memory, offset = allocate(size)
        leaves, offsets = {}, {}
        for (name, _, leaf, n), shape, start in zip(sources, shapes, starts):
            offsets[name] = offset + start
            out = leaves[name] = np.ndarray(shape, leaf.dtype, memory, offset + start)
            out[...] = leaf[host_ids, :n]
        return EpisodeRows(leaves, keys, key_of, per_step, counts, offsets)

    """
    Internals.
    """

    def _host_rows(self) -> tuple[np.ndarray, np.ndarray]:
        """:attr:`_rows` and :attr:`_row_starts` viewed by numpy (CPU buffers)."""
        if self._host_views is None:
            self._host_views = (self._rows.numpy(), self._row_starts.numpy())
        return self._host_views

    def _stream(self, key: str, leaves: dict[tuple[str, ...], torch.Tensor], per_step: bool) -> _Stream:
        """The stream of ``key``, created with its leaf buffers on first use."""
        stream = self._streams.get(key)
        if stream is None:
            capacity = self.capacity if per_step else 1
            stream = self._streams[key] = _Stream(key, capacity, per_step)
            start = torch.arange(self.num_envs, device=self.device).unsqueeze(0) * capacity
            self._row_starts = torch.cat((self._row_starts, start))
            self._rows = torch.cat((self._rows, start))
            self._appends = np.append(self._appends, 0)
            self._appends_at_clear = np.concatenate((self._appends_at_clear, np.zeros((1, self.num_envs), np.int64)))
            for k, s in enumerate(self._streams.values()):
                s.index, s.row, s.row_start = k, self._rows[k], self._row_starts[k]
            self._host_views = None
        for path, leaf in leaves.items():
            if path in stream.leaves:
                continue
            full_path = (*key.split("/"), *path)
            owner = self._leaf_keys.setdefault(full_path, key)
            if owner != key:
                raise ValueError(f"'{'/'.join(full_path)}' is recorded under both '{owner}' and '{key}'.")
            stream.add_leaf(path, leaf)
        return stream


def _leaves(value: torch.Tensor | wp.array | Mapping) -> dict[tuple[str, ...], torch.Tensor]:
    """The leaves of a recorded value by path (a plain tensor, the common case, without walking a tree)."""
    return {(): value} if isinstance(value, torch.Tensor) else dict(flatten_tree(value))
