"""Per-env rows of tensors captured when envs are suspended and written back while they stay suspended."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch


@dataclass
class FrozenTensor:
    """One tensor whose rows along :attr:`dim` belong to envs."""

    name: str
    """Name shown in error messages and in :meth:`FrozenRows.__str__`."""
    getter: Callable[[], torch.Tensor]
    """Returns the live tensor. A getter (not the tensor) because some owners rebind their buffers."""
    dim: int = 0
    """Dimension along which rows belong to envs."""
    row_env: torch.Tensor | None = None
    """Env id of each row along :attr:`dim` (``-1`` for rows owned by no env), or None if row i is env i.
    Shape: (num_rows,)."""
    ring_write_index: Callable[[], torch.Tensor] | None = None
    """For a ring buffer whose slots (dim 0) all envs advance together: returns the shared write index.
    Restoring then rotates each env's captured ring by the pushes made since its capture, so the env's
    history keeps its order relative to the write index. Shape of the index: (1,)."""
    snapshot: torch.Tensor | None = field(default=None, repr=False)
    """Captured values, allocated on the first capture."""
    captured_write_index: torch.Tensor | None = field(default=None, repr=False)
    """Ring write index at each env's capture. Shape: (num_envs,)."""


class FrozenRows:
    """A set of per-env tensors whose suspended rows are held constant.

    :meth:`capture` copies the rows of newly suspended envs; :meth:`restore` writes the captured rows back
    into the live tensors for every suspended env. Both are device ops without host synchronisation, so
    they can run every step on a GPU.
    """

    def __init__(self, num_envs: int, device: str | torch.device):
        self.num_envs = num_envs
        self.device = device
        self._tensors: list[FrozenTensor] = []
        self._false = torch.zeros(1, dtype=torch.bool, device=device)

    def __len__(self) -> int:
        return len(self._tensors)

    def __str__(self) -> str:
        return ", ".join(t.name for t in self._tensors)

    def add(
        self,
        name: str,
        getter: Callable[[], torch.Tensor],
        dim: int = 0,
        row_env: torch.Tensor | None = None,
        ring_write_index: Callable[[], torch.Tensor] | None = None,
    ) -> None:
        """Register a tensor. With ``row_env`` None its size along ``dim`` must be ``num_envs``.

        The getter is first called by :meth:`capture`, so tensors that their owner allocates lazily (the
        observation buffers, the history buffers) can be registered before they exist.
        """
        if row_env is not None:
            # rows owned by no env index the appended False entry of the mask
            row_env = torch.where(row_env < 0, self.num_envs, row_env).to(device=self.device, dtype=torch.long)
        if ring_write_index is not None and dim != 1:
            raise ValueError(f"'{name}': a ring buffer must have its slots along dim 0 and its envs along dim 1.")
        self._tensors.append(FrozenTensor(name, getter, dim, row_env, ring_write_index))

    def capture(self, env_mask: torch.Tensor) -> None:
        """Copy the rows of the envs in ``env_mask`` (bool, shape (num_envs,)) into the snapshot."""
        for t in self._tensors:
            live = t.getter()
            if t.snapshot is None or t.snapshot.shape != live.shape:
                if t.row_env is None and live.shape[t.dim] != self.num_envs:
                    raise ValueError(f"'{t.name}' has {live.shape[t.dim]} rows along dim {t.dim}, expected {self.num_envs}.")
                t.snapshot = live.clone()
            else:
                torch.where(self._row_mask(t, env_mask, live), live, t.snapshot, out=t.snapshot)
            if t.ring_write_index is not None:
                index = t.ring_write_index().expand(self.num_envs)
                if t.captured_write_index is None:
                    t.captured_write_index = index.clone()
                torch.where(env_mask, index, t.captured_write_index, out=t.captured_write_index)

    def restore(self, env_mask: torch.Tensor) -> None:
        """Write the captured rows of the envs in ``env_mask`` back into the live tensors."""
        for t in self._tensors:
            live = t.getter()
            frozen = t.snapshot if t.ring_write_index is None else self._rotated(t, live)
            torch.where(self._row_mask(t, env_mask, live), frozen, live, out=live)

    def _rotated(self, t: FrozenTensor, live: torch.Tensor) -> torch.Tensor:
        """The captured ring of each env moved forward by the slots written since its capture."""
        slots = live.shape[0]
        shift = (t.ring_write_index() - t.captured_write_index) % slots  # (num_envs,)
        source = (torch.arange(slots, device=live.device).unsqueeze(1) - shift.unsqueeze(0)) % slots  # (slots, num_envs)
        source = source.view(*source.shape, *([1] * (live.ndim - 2))).expand_as(live)
        return t.snapshot.gather(0, source)

    def _row_mask(self, t: FrozenTensor, env_mask: torch.Tensor, live: torch.Tensor) -> torch.Tensor:
        """The env mask mapped onto the rows of ``t`` and shaped to broadcast against ``live``."""
        rows = env_mask if t.row_env is None else torch.cat((env_mask, self._false))[t.row_env]
        shape = [1] * live.ndim
        shape[t.dim] = rows.shape[0]
        return rows.view(shape)
