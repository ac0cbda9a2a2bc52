"""Per-env rows of many tensors, held for suspended envs in two fused passes.

A :class:`FrozenRows` group gathers every per-env tensor (or Warp array) that one phase of the step changes.
Its rows of suspended envs are written back with two ``torch._foreach_*`` ops over the whole group, whatever
the number of tensors: each live tensor is viewed as integers of its width (bit-exact for any dtype) and
updated as ``live = live * keep + put``, where ``keep`` is 1 on active rows and ``put`` holds the frozen
values on suspended rows (0 elsewhere). ``keep`` and ``put`` change only when the mask or a snapshot changes
(:meth:`FrozenRows.set_mask`, :meth:`FrozenRows.capture`), never per step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import warp as wp

_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
"""Integer dtype of each element width: restores run on integer views, so every bit pattern survives."""


_UNSIGNED = (torch.uint16, torch.uint32, torch.uint64)
"""Unsigned dtypes most torch ops lack (Warp's index arrays): viewed as signed integers of their width."""


def bits(t: torch.Tensor) -> torch.Tensor:
    """``t`` viewed as integers of its element width (the same memory)."""
    if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool or t.dtype in _UNSIGNED:
        return t.view(_BITS[t.element_size()])
    return t


@dataclass
class FrozenTensor:
    """One tensor (or Warp array) whose rows along :attr:`dim` belong to envs."""

    name: str
    """Name shown in the start-up table and in error messages."""
    getter: Callable[[], torch.Tensor | wp.array | None]
    """Returns the live tensor or Warp array (None while its owner has not allocated it yet). A getter, not
    the tensor, because some owners rebind their buffers (e.g. ``ActuatorNetMLP`` rolls its histories)."""
    dim: int = 0
    """Dimension along which rows belong to envs."""
    row_env: torch.Tensor | None = None
    """Env id of each row along :attr:`dim` (``num_envs`` for rows owned by no env), or None if row i is env i.
    Shape: (num_rows,)."""
    fill: float | bool | None = None
    """Value held on suspended rows instead of a captured snapshot (e.g. 0 for a reward, +inf for a timer)."""
    ring_write_index: Callable[[], torch.Tensor | wp.array] | None = None
    """For a ring buffer whose slots (dim 0) all envs advance together (:class:`~isaaclab.utils.DelayBuffer`):
    returns the shared write index. The frozen ring is then rotated by the pushes made since capture, so the
    env's history keeps its order relative to the write index. Shape of the index: (1,)."""
    snapshot: torch.Tensor | None = field(default=None, repr=False)
    """Frozen values, as integers. Same shape as the live tensor."""
    keep: torch.Tensor | None = field(default=None, repr=False)
    """1 on rows of active envs, 0 on suspended ones, as integers of the live tensor's width."""
    put: torch.Tensor | None = field(default=None, repr=False)
    """``snapshot`` on rows of suspended envs, 0 elsewhere. For a ring, one such tensor per value of the write
    index (the snapshot rotated to match it), stacked along a new leading dim: a restore selects one."""
    captured_write_index: torch.Tensor | None = field(default=None, repr=False)
    """Ring write index at each env's capture. Shape: (num_envs,)."""
    views: dict = field(default_factory=dict, repr=False)
    """Integer views of the live objects seen so far, by ``id`` (an owner may alternate two buffers)."""
    alias: bool = field(default=False, repr=False)
    """Whether an earlier tensor of the group is the same memory (two actuators of one articulation share their
    gain views): its restore is that tensor's, since a second ``live * keep + put`` would add ``put`` twice."""


class FrozenRows:
    """A group of per-env tensors whose suspended rows are held constant.

    :meth:`capture` copies the rows of newly suspended envs; :meth:`set_mask` prepares the fused update for
    the current suspended mask; :meth:`restore` writes the frozen rows back (two foreach ops, plus one
    ``index_select`` per ring buffer to pick its frozen rows rotated to the current write index). All are device ops without host synchronisation. They run in inference mode, since some
    owners (actuator nets) produce their buffers in inference mode, which only allows in-place updates there.
    """

    def __init__(self, name: str, num_envs: int, device: str | torch.device):
        self.name = name
        self.num_envs = num_envs
        self.device = device
        self.tensors: list[FrozenTensor] = []
        self._mask = torch.zeros(num_envs, dtype=torch.bool, device=device)
        self._false = torch.zeros(1, dtype=torch.bool, device=device)

    def __len__(self) -> int:
        return len(self.tensors)

    def add(
        self,
        name: str,
        getter: Callable[[], torch.Tensor | wp.array | None],
        dim: int = 0,
        row_env: torch.Tensor | None = None,
        fill: float | bool | None = None,
        ring_write_index: Callable[[], torch.Tensor] | None = None,
    ) -> None:
        """Register a tensor. With ``row_env`` None its size along ``dim`` must be ``num_envs``."""
        if row_env is not None:
            row_env = torch.where(row_env < 0, self.num_envs, row_env).to(device=self.device, dtype=torch.long)
        if ring_write_index is not None and dim != 1:
            raise ValueError(f"'{name}': a ring buffer must have its slots along dim 0 and its envs along dim 1.")
        self.tensors.append(FrozenTensor(name, getter, dim, row_env, fill, ring_write_index))

    def live(self, t: FrozenTensor, unsqueeze: bool = False) -> torch.Tensor | None:
        """The live tensor of ``t`` viewed as integers (with a leading dim of 1 if ``unsqueeze``), or None if
        not allocated yet. Views are cached per live object, so a restore creates none for stable buffers."""
        obj = t.getter()
        if obj is None:
            return None
        cached = t.views.get(id(obj))
        if cached is None or cached[0] is not obj:
            if len(t.views) > 4:
                t.views.clear()
            tensor = bits(wp.to_torch(obj) if isinstance(obj, wp.array) else obj)
            cached = [obj, tensor, None]
            t.views[id(obj)] = cached
        if unsqueeze and cached[2] is None:
            cached[2] = cached[1].unsqueeze(0)
        return cached[2] if unsqueeze else cached[1]

    def write_index(self, t: FrozenTensor) -> torch.Tensor:
        """The shared write index of the ring ``t`` as a tensor (a cached view of a Warp array). Shape: (1,)."""
        obj = t.ring_write_index()
        if not isinstance(obj, wp.array):
            return obj
        cached = t.views.get(("index", id(obj)))
        if cached is None or cached[0] is not obj:
            cached = (obj, wp.to_torch(obj))
            t.views[("index", id(obj))] = cached
        return cached[1]

    @torch.inference_mode()
    def capture(self, env_mask: torch.Tensor) -> None:
        """Copy the rows of the envs in ``env_mask`` (bool, shape (num_envs,)) into the snapshots."""
        for t in self.tensors:
            live = self.live(t)
            if live is None:
                continue
            if t.snapshot is None or t.snapshot.shape != live.shape:
                if t.row_env is None and live.shape[t.dim] != self.num_envs:
                    raise ValueError(f"'{t.name}' has {live.shape[t.dim]} rows along dim {t.dim}, expected {self.num_envs}.")
                if t.fill is None:
                    t.snapshot = live.clone()
                else:
                    held = torch.full(live.shape, t.fill, dtype=self._dtype(t), device=live.device)
                    t.snapshot = bits(held)
            elif t.fill is None:
                torch.where(self._rows(t, env_mask, live), live, t.snapshot, out=t.snapshot)
            if t.ring_write_index is not None:
                index = self.write_index(t).to(torch.long).expand(self.num_envs)
                if t.captured_write_index is None:
                    t.captured_write_index = index.clone()
                torch.where(env_mask, index, t.captured_write_index, out=t.captured_write_index)

    @torch.inference_mode()
    def set_mask(self, suspended: torch.Tensor) -> None:
        """Prepare :meth:`restore` for the envs in ``suspended`` (bool, shape (num_envs,))."""
        self._mask = suspended.clone()
        seen = set()
        for t in self.tensors:
            t.keep = t.put = None
            live = self.live(t)
            if live is None or t.snapshot is None:
                continue
            memory = (live.data_ptr(), live.shape, live.stride(), live.dtype)
            t.alias = memory in seen
            seen.add(memory)
            rows = self._rows(t, self._mask, live).expand_as(live)
            t.keep = (~rows).to(live.dtype).contiguous()
            if t.ring_write_index is None:
                t.put = torch.where(rows, t.snapshot, 0).contiguous()
            else:
                slots = live.shape[0]
                t.keep = t.keep.unsqueeze(0)
                t.put = torch.stack([torch.where(rows, self._rotated(t, live, w), 0) for w in range(slots)])

    @torch.inference_mode()
    def restore(self) -> None:
        """Write the frozen rows of the suspended envs back into the live tensors."""
        lives, keeps, puts = [], [], []
        for t in self.tensors:
            live = self.live(t)
            if live is None or t.snapshot is None:
                continue
            if t.keep is None or t.keep.shape[-live.ndim:] != live.shape:
                self.set_mask(self._mask)
            if t.alias:
                continue
            if t.ring_write_index is None:
                lives.append(live)
                puts.append(t.put)
            else:  # the frozen ring rotated to the current write index: one index_select
                lives.append(self.live(t, unsqueeze=True))
                puts.append(t.put.index_select(0, self.write_index(t)))
            keeps.append(t.keep)
        if lives:
            torch._foreach_mul_(lives, keeps)
            torch._foreach_add_(lives, puts)

    def value(self, t: FrozenTensor) -> torch.Tensor | None:
        """The live tensor of ``t`` in its own dtype, or None if not allocated yet."""
        obj = t.getter()
        return wp.to_torch(obj) if isinstance(obj, wp.array) else obj

    def _dtype(self, t: FrozenTensor) -> torch.dtype:
        return self.value(t).dtype

    def _rotated(self, t: FrozenTensor, live: torch.Tensor, write_index: int) -> torch.Tensor:
        """The captured ring of each env moved forward by the slots written between its capture and the time
        the shared write index reads ``write_index``."""
        slots = live.shape[0]
        shift = (write_index - t.captured_write_index) % slots  # (num_envs,)
        if t.row_env is not None:
            shift = torch.cat((shift, shift[:1])).gather(0, t.row_env)  # (num_rows,)
        source = (torch.arange(slots, device=live.device).unsqueeze(1) - shift.unsqueeze(0)) % slots
        source = source.view(*source.shape, *([1] * (live.ndim - 2))).expand_as(live)
        return t.snapshot.gather(0, source)

    def _rows(self, t: FrozenTensor, env_mask: torch.Tensor, live: torch.Tensor) -> torch.Tensor:
        """The env mask mapped onto the rows of ``t`` and shaped to broadcast against ``live``."""
        rows = env_mask if t.row_env is None else torch.cat((env_mask, self._false))[t.row_env]
        shape = [1] * live.ndim
        shape[t.dim] = rows.shape[0]
        return rows.view(shape)
