"""Preallocated per-env episode storage on the env device, written with a per-env write index."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

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


class _Retired(NamedTuple):
    """The episodes of one :meth:`EpisodeBuffers.retire`."""

    slots: np.ndarray
    """Their slots."""
    index: torch.Tensor | None
    """The same slots on the device (GPU), the hand-over's gather index."""
    counts: torch.Tensor | np.ndarray
    """Samples of each key (at the retire) and episode. Shape: (K, B)."""
    bounds: list[int] | None
    """Host-side bound of those samples, by key (GPU)."""
    info: object
    """What the caller handed to :meth:`EpisodeBuffers.retire`."""


class _Stream:
    """The tensors recorded under one key: one leaf buffer per tensor of the value, one write index per env.

    Its write index and first rows are rows of tensors that :class:`EpisodeBuffers` shares between all keys
    (bound by :meth:`EpisodeBuffers._stream`), so that clearing or counting episodes is one op for all keys.
    """

    def __init__(self, key: str, capacity: int, per_step: bool, num_slots: int):
        self.key = key
        """Key the recorder term returned (``actions``, ``states``, ``initial_state``, ...)."""
        self.per_step = per_step
        """Whether the key is recorded at every step (masked appends) rather than at resets (row appends)."""
        self.capacity = capacity
        """Samples per episode slot the leaf buffers hold."""
        self.num_slots = num_slots
        """Episode slots of the leaf buffers: one per env, plus the spare ones (:class:`EpisodeBuffers`)."""
        self.leaves: dict[tuple[str, ...], torch.Tensor] = {}
        """Leaf buffers by path inside the value. Shape: (num_slots, capacity, ...)."""
        self.flat: dict[tuple[str, ...], torch.Tensor] = {}
        """The same buffers viewed as (num_slots * capacity, ...): sample t of slot s is row ``s * capacity + t``."""
        self._host: dict[tuple[str, ...], np.ndarray] = {}  # numpy views of the CPU buffers, made at first use
        self.names: dict[tuple[str, ...], str] = {}
        """Dataset path of each leaf (``key/path``)."""
        self.row_start: torch.Tensor
        """Flat row of each env's first sample, ``slot * capacity`` (the slot of its open episode). Shape: (num_envs,)."""
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
        shape = (self.num_slots, self.capacity, *like.shape[1:])
        self._set(path, torch.zeros(shape, dtype=like.dtype, device=self.row.device))

    def write(self, leaves: dict[tuple[str, ...], torch.Tensor], rows: torch.Tensor) -> None:
        """Copy each leaf's rows into the flat buffer rows ``rows`` (one per leaf row). Shape of ``rows``: (B,)."""
        for path, leaf in leaves.items():
            target = self.flat[path]
            if leaf.ndim == 0 or leaf.shape[0] != rows.shape[0]:
                name = "/".join((self.key, *path))
                raise ValueError(f"Recorded '{name}' must have {rows.shape[0]} rows, got shape {tuple(leaf.shape)}.")
            target.index_copy_(0, rows, leaf if leaf.dtype == target.dtype else leaf.to(target.dtype))

    def grow(self, capacity: int, slots: torch.Tensor) -> None:
        """Reallocate every leaf with room for ``capacity`` samples per slot, keeping the recorded ones (those of
        ended episodes still in their slots too); ``slots`` is each env's slot. Shape: (num_envs,)."""
        for path, old in list(self.leaves.items()):
            new = torch.zeros((old.shape[0], capacity, *old.shape[2:]), dtype=old.dtype, device=old.device)
            new[:, : self.capacity] = old
            self._set(path, new)
        count = self.count
        torch.mul(slots, capacity, out=self.row_start)
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
    """The open episode of every env, stored in device tensors allocated once per recorded key, and the ended
    episodes not taken yet.

    Each key a recorder term returns (a tensor or a nested dict of tensors with one row per env) gets one
    buffer per tensor of shape (num_slots, capacity, ...) and a write index per env: the row of its next sample
    in the buffers viewed as (num_slots * capacity, ...), the first row of its episode slot plus the samples of
    its open episode. Recording a step for a bool mask of envs is one ``index_copy_`` per tensor that writes
    *every* env's row at its write index, followed by ``index += mask``: the rows of envs outside the mask land
    in the slot after their last sample and are overwritten by their next sample, so nothing is selected,
    nothing is synchronised with the host and no Python loop runs over envs. Episodes leave the buffers as
    copies gathered for many episodes at once: those of given envs (:meth:`take`), or the ended episodes that
    :meth:`retire` left in their slots while moving their envs to spare ones (:meth:`take_retired`), so that
    the exports of many steps cost one gather per tensor.

    A buffer that fills up doubles. Whether it may be full is known from a host-side upper bound of the write
    indices, so the device is read only when the bound reaches the capacity; with the capacity a little
    above the longest episode that happens once every few dozen steps at most.

    Args:
        num_envs: Number of envs.
        capacity: Initial samples per slot of the buffers of per-step keys (keys recorded at resets start at 1).
        device: Device of the buffers (the env device).
        spare_slots: Episode slots beyond one per env, for :meth:`retire`: they add ``spare_slots / num_envs``
            to the memory of the buffers.
    """

    def __init__(self, num_envs: int, capacity: int, device: str | torch.device, spare_slots: int = 0):
        if capacity < 1:
            raise ValueError(f"The episode buffers need a capacity of at least 1 sample, got {capacity}.")
        if spare_slots < 0:
            raise ValueError(f"The episode buffers need 0 or more spare slots, got {spare_slots}.")
        self.num_envs = num_envs
        self.capacity = capacity
        self.device = device
        self.num_slots = num_envs + spare_slots
        """Episode slots of every buffer: one per env, plus the spare ones."""
        self._on_cpu = torch.device(device).type == "cpu"
        self._streams: dict[str, _Stream] = {}
        self._rows = torch.zeros(0, num_envs, dtype=torch.long, device=device)
        """Write index of each key (in creation order) and env. Shape: (num_keys, num_envs)."""
        self._row_starts = torch.zeros(0, num_envs, dtype=torch.long, device=device)
        """First row of each key and env. Shape: (num_keys, num_envs)."""
        self._host_views: tuple[np.ndarray, np.ndarray] | None = None  # _rows, _row_starts by numpy (CPU)
        self._slot_starts = np.zeros((0, self.num_slots), dtype=np.int64)
        """First row of each key and slot: the slot times the key's capacity. Shape: (num_keys, num_slots)."""
        self._slots = np.arange(num_envs, dtype=np.int64)
        """Slot of each env's open episode. Shape: (num_envs,)."""
        self._env_slots = torch.arange(num_envs, dtype=torch.long, device=device)
        """:attr:`_slots` on the device, kept in step by :meth:`retire`, so that a stream's first use and a growth
        compute their rows there instead of copying host slots to the device (a sync on a GPU). Shape:
        (num_envs,)."""
        self._free = np.arange(num_envs, self.num_slots, dtype=np.int64)
        """The free spare slots, a stack: the first :attr:`free_slots` entries."""
        self.free_slots = spare_slots
        """Spare slots free for :meth:`retire`."""
        self._retired: list[_Retired] = []
        """The episodes of each :meth:`retire` not released yet."""
        self.retired_count = 0
        """Ended episodes left in their slots by :meth:`retire` and not released yet."""
        self._appends = np.zeros(0, dtype=np.int64)
        """Samples appended to each key so far (host side): each raised every count by at most one."""
        self._appends_at_clear = np.zeros((0, num_envs), dtype=np.int64)
        """:attr:`_appends` when each env's episode was last emptied by host ids, so that ``_appends[k] -
        _appends_at_clear[k, i]`` bounds env i's count of key k from the host. Shape: (num_keys, num_envs)."""
        self._leaf_keys: dict[tuple[str, ...], str] = {}
        """Key owning each full leaf path, to refuse two keys writing the same dataset."""
        self._sources: list[tuple[str, int, _Stream, tuple[str, ...]]] | None = None
        """(dataset path, key row, stream, path in the value) of every leaf, in gather order; None when stale."""

    def __str__(self) -> str:
        lines = []
        for stream in self._streams.values():
            for path, leaf in stream.leaves.items():
                lines.append(f"{'/'.join((stream.key, *path))}: {tuple(leaf.shape[2:])} {leaf.dtype}")
        return "\n".join(lines)

    @property
    def capacities(self) -> dict[str, int]:
        """Samples per slot each key's buffers hold now, by key."""
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
                self._grow(stream, 2 * stream.capacity)
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
            self._grow(stream, max(needed, 2 * stream.capacity))
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

    def retire(self, env_ids: torch.Tensor | None, host_ids: Sequence[int], info: object = None) -> None:
        """End the open episodes of ``host_ids`` without copying them: they stay in their slots, for
        :meth:`take_retired`, and their envs go on with empty episodes in free spare slots. No device read; on
        a GPU one host-to-device copy of the new slots' rows (exports run at resets, which read the ids).

        Args:
            env_ids: The ids, on the device (on the CPU: unused, may be None). Shape: (B,), integer.
            host_ids: The same unique ids, on the host; at most :attr:`free_slots` of them.
            info: Anything to hand back with these episodes by :meth:`take_retired`.
        """
        host_ids = np.asarray(host_ids, dtype=np.int64)
        size = host_ids.size
        if size > self.free_slots:
            raise RuntimeError(f"{size} episodes to retire and {self.free_slots} free spare slots: take and"
                               " release the retired episodes first.")
        free = self.free_slots - size
        fresh = self._free[free : self.free_slots]  # overwritten only by the release of these episodes
        starts = self._slot_starts[:, fresh]
        slots = self._slots[host_ids]
        if self._on_cpu:
            rows, row_starts = self._host_rows()
            retired = _Retired(slots, None, rows[:, host_ids] - row_starts[:, host_ids], None, info)
        else:  # the gather's index goes to the device now: the hand-over copies nothing to it
            counts = self._rows[:, env_ids] - self._row_starts[:, env_ids]
            index = torch.as_tensor(slots, device=self.device)
            retired = _Retired(slots, index, counts, self._bounds(host_ids), info)
            starts = torch.as_tensor(starts, device=self.device)
            self._env_slots[env_ids] = torch.as_tensor(fresh, device=self.device)
        # recorded first: an interrupt before the envs move leaves an episode both retired and open, written once
        # (the open one is dropped at close), never lost
        self._retired.append(retired)
        self.retired_count += size
        self.free_slots = free
        if self._on_cpu:
            row_starts[:, host_ids] = starts
            rows[:, host_ids] = starts
            self._env_slots[host_ids] = torch.from_numpy(fresh)
        else:
            self._row_starts[:, env_ids] = starts
            self._rows[:, env_ids] = starts
            self._appends_at_clear[:, host_ids] = self._appends[:, None]
        self._slots[host_ids] = fresh

    def take_retired(self, allocate: Callable[[int], tuple[np.ndarray, int]] | None = None
                     ) -> tuple[EpisodeRows, list]:
        """Copies of the episodes :meth:`retire` left (in retire order, gathered as :meth:`take` gathers), and the
        ``info`` of each :meth:`retire`. They stay in their slots until :meth:`release_retired`."""
        num_keys, retired = len(self._streams), self._retired
        counts = [_padded(r.counts, num_keys) for r in retired]
        if self._on_cpu:
            slots = np.concatenate([r.slots for r in retired] or [np.zeros(0, np.int64)])
            counts = np.concatenate(counts, axis=1) if counts else np.zeros((num_keys, 0), dtype=np.int64)
            samples = None
        else:  # device slots and counts: no host sync in the hand-over
            slots = torch.cat([r.index for r in retired] or [self._rows.new_zeros(0)])
            counts = torch.cat(counts, dim=1) if counts else self._rows[:, :0]
            samples = [max((r.bounds[k] for r in retired if k < len(r.bounds)), default=0) for k in range(num_keys)]
        return self._gather(slots, counts, samples, allocate), [r.info for r in retired]

    def release_retired(self) -> None:
        """Free the slots of the retired episodes (taken by :meth:`take_retired`) for the next :meth:`retire`."""
        retired, self._retired, self.retired_count = self._retired, [], 0  # first: an interrupt never frees twice
        for r in retired:
            self._free[self.free_slots : self.free_slots + r.slots.size] = r.slots
            self.free_slots += r.slots.size

    def episode(self, env_id: int) -> EpisodeTree:
        """A copy of the open episode of ``env_id``, tensors of shape (num_samples, ...); ``{}`` before it steps.

        Reads the device once.
        """
        streams = list(self._streams.values())
        counts = (self._rows[:, env_id] - self._row_starts[:, env_id]).tolist()
        if not any(n > 0 for stream, n in zip(streams, counts) if stream.per_step):
            return {}
        slot = int(self._slots[env_id])
        return unflatten_tree({
            (*stream.key.split("/"), *path): leaf[slot, :n].clone()
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

        Each leaf is copied in one gather of the slots of ``env_ids``, up to the samples these episodes may hold;
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
        host_ids = np.asarray(host_ids, dtype=np.int64)
        if self._on_cpu:
            rows, row_starts = self._host_rows()
            counts, samples = rows[:, host_ids] - row_starts[:, host_ids], None
        else:
            counts, samples = self._rows[:, env_ids] - self._row_starts[:, env_ids], self._bounds(host_ids)
        return self._gather(self._slots[host_ids], counts, samples, allocate)

    """
    Internals.
    """

    def _gather(
        self,
        slots: np.ndarray | torch.Tensor,
        counts: torch.Tensor | np.ndarray,
        samples: list[int] | None,
        allocate: Callable[[int], tuple[np.ndarray, int]] | None,
    ) -> EpisodeRows:
        """Copies of the episodes in ``slots`` (on a GPU, host or device ids) up to ``samples`` per key (on the CPU:
        up to the longest of ``counts``, read from the host), one gather per leaf (see :meth:`take`)."""
        if self._sources is None:
            self._sources = [(stream.names[path], k, stream, path)
                             for k, stream in enumerate(self._streams.values()) for path in stream.leaves]
        keys = list(self._streams)
        key_of = {name: k for name, k, _, _ in self._sources}
        per_step = np.array([stream.per_step for stream in self._streams.values()], dtype=bool)
        if not self._on_cpu:
            index = torch.as_tensor(slots, device=self.device)  # a device tensor stays as it is
            leaves = {name: stream.leaves[path][index, : samples[k]] for name, k, stream, path in self._sources}
            return EpisodeRows(leaves, keys, key_of, per_step, counts)
        samples = counts.max(axis=1).tolist() if slots.size else [0] * len(keys)
        sources = [(name, stream.host(path), samples[k]) for name, k, stream, path in self._sources]
        if allocate is None:
            leaves = {name: leaf[slots, :n] for name, leaf, n in sources}
            return EpisodeRows(leaves, keys, key_of, per_step, counts)
        shapes = [(slots.size, n, *leaf.shape[2:]) for _, leaf, n in sources]
        starts, size = aligned_offsets([math.prod(shape) * leaf.itemsize for shape, (_, leaf, _) in zip(shapes, sources)])
        memory, offset = allocate(size)
        leaves, offsets = {}, {}
        for (name, leaf, n), shape, start in zip(sources, shapes, starts):
            offsets[name] = offset + start
            out = leaves[name] = np.ndarray(shape, leaf.dtype, memory, offset + start)
            out[...] = leaf[slots, :n]
        return EpisodeRows(leaves, keys, key_of, per_step, counts, offsets)

    def _bounds(self, host_ids: np.ndarray) -> list[int]:
        """Host-side bound, by key, of the samples of the open episodes of ``host_ids``: those appended since
        they were last emptied by host ids, at most the largest count of any env."""
        cleared = self._appends_at_clear[:, host_ids].min(axis=1) if host_ids.size else self._appends
        since_clear = (self._appends - cleared).tolist()
        return [min(s.bound, s.capacity, since_clear[k]) for k, s in enumerate(self._streams.values())]

    def _grow(self, stream: _Stream, capacity: int) -> None:
        stream.grow(capacity, self._env_slots)
        self._slot_starts[stream.index] = capacity * np.arange(self.num_slots)

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
            stream = self._streams[key] = _Stream(key, capacity, per_step, self.num_slots)
            start = (self._env_slots * capacity).unsqueeze(0)
            self._row_starts = torch.cat((self._row_starts, start))
            self._rows = torch.cat((self._rows, start))
            self._slot_starts = np.concatenate((self._slot_starts, capacity * np.arange(self.num_slots)[None]))
            self._appends = np.append(self._appends, 0)
            self._appends_at_clear = np.concatenate((self._appends_at_clear, np.zeros((1, self.num_envs), np.int64)))
            for k, s in enumerate(self._streams.values()):
                s.index, s.row, s.row_start = k, self._rows[k], self._row_starts[k]
            self._host_views = None
            self._sources = None
        for path, leaf in leaves.items():
            if path in stream.leaves:
                continue
            full_path = (*key.split("/"), *path)
            owner = self._leaf_keys.setdefault(full_path, key)
            if owner != key:
                raise ValueError(f"'{'/'.join(full_path)}' is recorded under both '{owner}' and '{key}'.")
            stream.add_leaf(path, leaf)
            self._sources = None
        return stream


def _padded(counts: torch.Tensor | np.ndarray, num_keys: int) -> torch.Tensor | np.ndarray:
    """``counts`` (K, B) with zero rows up to ``num_keys`` rows (for the keys first recorded after them)."""
    missing = num_keys - counts.shape[0]
    if missing == 0:
        return counts
    if isinstance(counts, np.ndarray):
        return np.concatenate((counts, np.zeros((missing, counts.shape[1]), counts.dtype)))
    return torch.cat((counts, counts.new_zeros(missing, counts.shape[1])))


def _leaves(value: torch.Tensor | wp.array | Mapping) -> dict[tuple[str, ...], torch.Tensor]:
    """The leaves of a recorded value by path (a plain tensor, the common case, without walking a tree)."""
    return {(): value} if isinstance(value, torch.Tensor) else dict(flatten_tree(value))
