"""Preallocated per-env episode storage on the env device, written with a per-env write index."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import torch
import warp as wp

EpisodeTree = dict[str, "torch.Tensor | EpisodeTree"]
"""A nested dict of tensors, as Isaac Lab's recorder terms return them and :class:`EpisodeData` stores them."""


class _Stream:
    """The tensors recorded under one key: one leaf buffer per tensor of the value, one write index per env."""

    def __init__(self, key: str, num_envs: int, capacity: int, per_step: bool, device: str | torch.device):
        self.key = key
        """Key the recorder term returned (``actions``, ``states``, ``initial_state``, ...)."""
        self.per_step = per_step
        """Whether the key is recorded at every step (masked appends) rather than at resets (row appends)."""
        self.capacity = capacity
        """Samples per env the leaf buffers hold."""
        self.leaves: dict[tuple[str, ...], torch.Tensor] = {}
        """Leaf buffers by path inside the value. Shape: (num_envs, capacity, ...)."""
        self.count = torch.zeros(num_envs, dtype=torch.long, device=device)
        """Samples of the open episode of each env, which is also where its next sample goes. Shape: (num_envs,)."""
        self.bound = 0
        """Host-side upper bound of ``count.max()``: the device is read only when it reaches :attr:`capacity`."""
        self.row_start = torch.arange(num_envs, device=device) * capacity
        """Flat index of each env's first sample in a leaf viewed as (num_envs * capacity, ...). Shape: (num_envs,)."""

    def grow(self, capacity: int) -> None:
        """Reallocate every leaf with room for ``capacity`` samples per env, keeping the recorded ones."""
        for path, old in self.leaves.items():
            new = torch.zeros((old.shape[0], capacity, *old.shape[2:]), dtype=old.dtype, device=old.device)
            new[:, : self.capacity] = old
            self.leaves[path] = new
        self.row_start = torch.arange(self.count.shape[0], device=self.count.device) * capacity
        self.capacity = capacity


class EpisodeBuffers:
    """The open episode of every env, stored in device tensors allocated once per recorded key.

    Each key a recorder term returns (a tensor or a nested dict of tensors with one row per env) gets one
    buffer per tensor of shape (num_envs, capacity, ...) and a write index per env, the number of samples of
    the env's open episode. Recording a step for a bool mask of envs is one ``index_copy_`` per tensor that
    writes *every* env's row at its write index, followed by ``count += mask``: the rows of envs outside the
    mask land in the slot after their last sample and are overwritten by their next sample, so nothing is
    selected, nothing is synchronised with the host and no Python loop runs over envs. Episodes become
    nested dicts of tensors only when they are taken out (:meth:`episodes`), at export.

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
        self._streams: dict[str, _Stream] = {}
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

    @property
    def nbytes(self) -> int:
        """Bytes allocated by all buffers."""
        return sum(leaf.numel() * leaf.element_size() for s in self._streams.values() for leaf in s.leaves.values())

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
        leaves = dict(flatten_tree(value))
        stream = self._stream(key, leaves, per_step=True)
        if stream.bound >= stream.capacity:
            stream.bound = int(stream.count.max())
            if stream.bound >= stream.capacity:
                stream.grow(2 * stream.capacity)
        index = stream.row_start + stream.count
        for path, leaf in leaves.items():
            _check_rows(key, path, leaf, self.num_envs)
            buffer = stream.leaves[path]
            buffer.view(-1, *buffer.shape[2:]).index_copy_(0, index, leaf.to(buffer.dtype))
        if env_mask is None:
            stream.count += 1
        else:
            stream.count += env_mask
        stream.bound += 1

    def append_rows(self, key: str, value: torch.Tensor | wp.array | Mapping, env_ids: torch.Tensor) -> None:
        """Append one sample to the open episode of each env in ``env_ids`` (reads the device once).

        Args:
            key: The key (``/`` separates nested keys).
            value: A tensor (or warp array) with one row per id, or a nested dict of them. Shape: (len(env_ids), ...).
            env_ids: Unique env ids. Shape: (B,), integer, on the device.
        """
        leaves = dict(flatten_tree(value))
        stream = self._stream(key, leaves, per_step=False)
        if env_ids.numel() == 0:
            return
        needed = int(stream.count[env_ids].max()) + 1
        if needed > stream.capacity:
            stream.grow(max(needed, 2 * stream.capacity))
        index = stream.row_start[env_ids] + stream.count[env_ids]
        for path, leaf in leaves.items():
            _check_rows(key, path, leaf, env_ids.shape[0])
            buffer = stream.leaves[path]
            buffer.view(-1, *buffer.shape[2:]).index_copy_(0, index, leaf.to(buffer.dtype))
        stream.count[env_ids] += 1
        stream.bound += 1

    def clear(self, env_ids: torch.Tensor | slice) -> None:
        """Empty the open episodes of ``env_ids`` (a 1-D integer tensor on the device, or a slice)."""
        for stream in self._streams.values():
            stream.count[env_ids] = 0

    def num_steps(self, env_ids: torch.Tensor) -> torch.Tensor:
        """Samples of the longest per-step key of each env's open episode (0: nothing recorded). Shape: (B,)."""
        counts = [s.count[env_ids] for s in self._streams.values() if s.per_step]
        if not counts:
            return torch.zeros(len(env_ids), dtype=torch.long, device=self.device)
        return torch.stack(counts).amax(dim=0)

    def episodes(self, env_ids: Sequence[int]) -> list[EpisodeTree]:
        """Copies of the open episodes of ``env_ids`` as nested dicts of tensors of shape (num_samples, ...).

        An episode without a single per-step sample is returned empty (``{}``): it was reset before it
        stepped, and a demo of length 0 is of no use to anyone. Reads the device once.
        """
        streams = list(self._streams.values())
        if not streams:
            return [{} for _ in env_ids]
        ids = torch.as_tensor(list(env_ids), dtype=torch.long, device=self.device)
        counts = torch.stack([s.count[ids] for s in streams], dim=1).tolist()
        episodes = []
        for env_id, env_counts in zip(env_ids, counts):
            if not any(n > 0 for s, n in zip(streams, env_counts) if s.per_step):
                episodes.append({})
                continue
            leaves = {
                (*stream.key.split("/"), *path): leaf[env_id, :n].clone()
                for stream, n in zip(streams, env_counts)
                if n > 0
                for path, leaf in stream.leaves.items()
            }
            episodes.append(unflatten_tree(leaves))
        return episodes

    """
    Internals.
    """

    def _stream(self, key: str, leaves: dict[tuple[str, ...], torch.Tensor], per_step: bool) -> _Stream:
        """The stream of ``key``, created with its leaf buffers on first use."""
        stream = self._streams.get(key)
        if stream is None:
            capacity = self.capacity if per_step else 1
            stream = self._streams[key] = _Stream(key, self.num_envs, capacity, per_step, self.device)
        for path, leaf in leaves.items():
            if path in stream.leaves:
                continue
            full_path = (*key.split("/"), *path)
            owner = self._leaf_keys.setdefault(full_path, key)
            if owner != key:
                raise ValueError(f"'{'/'.join(full_path)}' is recorded under both '{owner}' and '{key}'.")
            stream.leaves[path] = torch.zeros(
                (self.num_envs, stream.capacity, *leaf.shape[1:]), dtype=leaf.dtype, device=self.device
            )
        return stream


def flatten_tree(
    value: torch.Tensor | wp.array | Mapping, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], torch.Tensor]]:
    """Leaves of a nested dict of tensors (warp arrays are viewed as tensors), with their key paths."""
    if isinstance(value, Mapping):
        for key, sub in value.items():
            yield from flatten_tree(sub, (*path, key))
    elif isinstance(value, wp.array):
        yield path, wp.to_torch(value)
    else:
        yield path, value


def _check_rows(key: str, path: tuple[str, ...], leaf: torch.Tensor, rows: int) -> None:
    if leaf.ndim == 0 or leaf.shape[0] != rows:
        name = "/".join((key, *path))
        raise ValueError(f"Recorded value '{name}' must have {rows} rows (one per env), got shape {tuple(leaf.shape)}.")


def unflatten_tree(leaves: Mapping[tuple[str, ...], torch.Tensor]) -> EpisodeTree:
    """The nested dict of tensors whose leaves and key paths are ``leaves`` (the inverse of :func:`flatten_tree`)."""
    tree: EpisodeTree = {}
    for path, value in leaves.items():
        node = tree
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value
    return tree
