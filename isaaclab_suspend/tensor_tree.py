"""Nested dicts of tensors (observation groups, scene states): select rows, flatten to key paths, and back.

One place for what the chunking policy (observation rows of the served envs), the recorder's episode buffers,
the remote transport (``group/term`` names on the wire) and the replay (scene-state paths) each need. Written
by hand rather than with ``tensordict``: on the chunking policy's inference path ``TensorDict(obs)[env_ids]``
measured 1.5-2.5x slower at 16-256 envs and flattening 5-10x slower
(``scripts/benchmarks/bench_tensor_tree.py``, docs/results.rst).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import torch
import warp as wp

TensorTree = Mapping[str, "torch.Tensor | TensorTree"]
"""A dict whose values are tensors or dicts of the same kind."""


def select_rows(tree: TensorTree, env_ids: torch.Tensor) -> dict:
    """``tree`` with every tensor sliced to the rows ``env_ids`` (new tensors, safe to keep).

    Args:
        tree: Tensors of shape (N, ...), possibly nested.
        env_ids: Row indices. Shape: (B,), long, on the tensors' device.

    Raises:
        TypeError: If a leaf is not a tensor.
    """
    rows = {}
    for key, value in tree.items():
        if isinstance(value, Mapping):
            rows[key] = select_rows(value, env_ids)
        elif isinstance(value, torch.Tensor):
            rows[key] = value.index_select(0, env_ids)
        else:
            raise TypeError(f"Observation '{key}' must be a tensor or a dict of tensors, got {type(value).__name__}.")
    return rows


def flatten_tree(tree: TensorTree | torch.Tensor | wp.array, path: tuple[str, ...] = ()
                 ) -> Iterator[tuple[tuple[str, ...], torch.Tensor]]:
    """The leaves of ``tree`` with their key paths, depth first in insertion order (warp arrays viewed as
    tensors; a bare tensor is the one leaf of path ``path``)."""
    if isinstance(tree, Mapping):
        for key, value in tree.items():
            yield from flatten_tree(value, (*path, key))
    elif isinstance(tree, wp.array):
        yield path, wp.to_torch(tree)
    else:
        yield path, tree


def unflatten_tree(leaves: Mapping[tuple[str, ...], torch.Tensor]) -> dict:
    """The nested dict whose leaves and key paths are ``leaves`` (the inverse of :func:`flatten_tree`)."""
    tree: dict = {}
    for path, value in leaves.items():
        node = tree
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value
    return tree


def flatten_names(tree: TensorTree, sep: str = "/") -> dict[str, torch.Tensor]:
    """The leaves of ``tree`` by their key paths joined with ``sep`` (``group/term``, as the wire names them)."""
    return {sep.join(path): value for path, value in flatten_tree(tree)}


def unflatten_names(flat: Mapping[str, torch.Tensor], sep: str = "/") -> dict:
    """The inverse of :func:`flatten_names`."""
    return unflatten_tree({tuple(name.split(sep)): value for name, value in flat.items()})
