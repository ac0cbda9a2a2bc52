"""A short hash of each env's state, computed on the device for a batch of envs: what an episode started from.

Two runs that start an env's episode from the same state (same bits in every hashed tensor) get the same hash,
whatever the other envs hold; a paired comparison of two policies checks its episodes' hashes agree.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import warp as wp

from .frozen_rows import bits
from .per_env_rng import _GAMMA, _mix_, _mix_int, _s64, stable_hash

HEX_DIGITS = 12
"""Hex digits of a hash as records show it (its top 48 bits)."""


class StateHash:
    """Hashes, per env, the rows of a few tensors (or Warp arrays) whose rows belong to envs.

    Each tensor's elements of env ``e`` (its rows, in order, as integers of their width) are hashed with
    SplitMix64's mixer at a position salted by the tensor's name, summed, and the sums of all tensors mixed once
    more: a vectorised hash over the requested envs, in integer ops on the device, without a host sync.

    Args:
        num_envs: Envs of the env.
        device: Device of the tensors.
    """

    def __init__(self, num_envs: int, device: str | torch.device):
        self.num_envs = num_envs
        self.device = torch.device(device)
        self.names: list[str] = []
        """Names of the hashed tensors, in order."""
        self._parts: list[dict] = []

    def add(self, name: str, getter: Callable[[], torch.Tensor | wp.array | None],
            row_env: torch.Tensor | None = None) -> None:
        """Hash the tensor ``getter()`` returns: row ``i`` (dim 0) belongs to env ``i``, or to env ``row_env[i]``
        (``row_env`` of shape (num_rows,); a value outside [0, num_envs) for rows of no env, which are left out)."""
        part = {"name": name, "getter": getter, "rows": None, "valid": None, "salt": None}
        if row_env is not None:
            row_env = row_env.to(device=self.device, dtype=torch.long)
            row_env = torch.where((row_env >= 0) & (row_env < self.num_envs), row_env, self.num_envs)
            counts = torch.bincount(row_env, minlength=self.num_envs + 1)[: self.num_envs]
            width = max(int(counts.max()), 1)  # set-up: one read
            order = torch.argsort(row_env, stable=True)
            position = torch.arange(width, device=self.device)
            index = (counts.cumsum(0) - counts).unsqueeze(1) + position
            part["rows"] = order[index.clamp(max=order.numel() - 1)]  # (num_envs, width): env e's rows
            part["valid"] = (position < counts.unsqueeze(1)).to(torch.int64)
        self.names.append(name)
        self._parts.append(part)

    def __call__(self, env_ids: torch.Tensor) -> torch.Tensor:
        """The hash of each env of ``env_ids`` (int, on the device). Shape: (len(env_ids),), int64."""
        env_ids = env_ids.to(device=self.device, dtype=torch.long)
        total = torch.zeros(env_ids.shape[0], dtype=torch.int64, device=self.device)
        for part in self._parts:
            value = part["getter"]()
            if value is None:
                continue
            value = bits(wp.to_torch(value) if isinstance(value, wp.array) else value)
            if part["rows"] is None:
                x = value.index_select(0, env_ids)
                valid = None
            else:  # (B, width, ...) of the envs' rows, padding masked
                x = value.index_select(0, part["rows"].index_select(0, env_ids).flatten())
                x = x.view(env_ids.shape[0], part["rows"].shape[1], *value.shape[1:])
                valid = part["valid"].index_select(0, env_ids).view(*x.shape[:2], *([1] * (x.ndim - 2)))
                x = x * valid
            x = x.reshape(env_ids.shape[0], -1).to(torch.int64)
            salt = part["salt"]
            if salt is None or salt.shape[0] != x.shape[1]:
                position = torch.arange(x.shape[1], dtype=torch.int64, device=self.device) * _s64(_GAMMA)
                salt = part["salt"] = _mix_(position + _s64(_mix_int(stable_hash(part["name"]))))
            total += _mix_(x + salt).sum(dim=1)
        return _mix_(total)


def hash_hex(value: int) -> str:
    """A hash as records show it: its top 48 bits in 12 hex digits."""
    return f"{value & ((1 << 64) - 1):016x}"[:HEX_DIGITS]
