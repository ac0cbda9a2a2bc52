"""Chunk aggregators: how a new action chunk is merged with the actions left over from the previous one.

An env that receives a new chunk while actions of its previous chunk are still queued (a refill before the
queue ran dry, or an ``auto`` env served between two clock ticks) has two predictions for the overlapping
steps. An aggregator merges them; the choice matters for smoothness at chunk boundaries (jerky boundaries are
a common complaint of chunked policies). The strategies are LeRobot's async-inference aggregators and ACT's
temporal ensembling, as a small registry of named functions: adding one is one line in :data:`AGGREGATORS`.

Every aggregator has the signature ``fn(old, new, count) -> (merged, merged_count)`` where, for B envs,
H steps and A action dims:

* ``old``: the leftover actions aligned with the new chunk (``old[:, j]`` is the queued action for the
  same step as ``new[:, j]``). Shape: (B, H, A).
* ``new``: the new chunk. Shape: (B, H, A).
* ``count``: how many predictions were already merged into ``old[:, j]``; 0 where nothing is left over
  (beyond the end of the old chunk, or the env was reset), so those steps must take ``new``. Shape: (B, H).

It returns the merged chunk, shape (B, H, A), and the merged prediction counts, shape (B, H).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

Aggregator = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]
"""``fn(old, new, count) -> (merged, merged_count)``, see the module docstring."""


def replace(old: torch.Tensor, new: torch.Tensor, count: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Take the new chunk and drop the leftovers (LeRobot ``latest_only``, IsaacLab-Arena's chunk copy)."""
    return new.clone(), torch.ones_like(count)


def blend(
    old: torch.Tensor, new: torch.Tensor, count: torch.Tensor, old_weight: float = 0.3
) -> tuple[torch.Tensor, torch.Tensor]:
    """Weighted average on the overlap: ``old_weight * old + (1 - old_weight) * new`` (LeRobot
    ``weighted_average``, 0.3 old / 0.7 new by default); the new chunk alone elsewhere."""
    overlap = (count > 0).unsqueeze(-1)
    merged = torch.where(overlap, old_weight * old + (1.0 - old_weight) * new, new)
    return merged, count + 1


def temporal_ensemble(
    old: torch.Tensor, new: torch.Tensor, count: torch.Tensor, coeff: float = 0.01
) -> tuple[torch.Tensor, torch.Tensor]:
    """ACT's temporal ensembling: every step's action is the weighted mean of all predictions made for it,
    with weight ``w_i = exp(-coeff * i)`` for the i-th prediction (i = 0 the oldest).

    Computed online like LeRobot's ``ACTTemporalEnsembler``: with ``c = count`` predictions averaged so far
    under total weight ``W_c = sum_{i<c} w_i``, the mean becomes ``(old * W_c + w_c * new) / W_{c+1}``.
    """
    c = count.to(new.dtype)
    decay = math.exp(-coeff)
    # geometric sums W_c = (1 - decay^c) / (1 - decay); with coeff = 0 every weight is 1 and W_c = c
    total_old = c if coeff == 0.0 else (1.0 - decay**c) / (1.0 - decay)
    w_new = decay**c
    merged = (old * total_old.unsqueeze(-1) + new * w_new.unsqueeze(-1)) / (total_old + w_new).unsqueeze(-1)
    return merged, count + 1


def soft_mask(
    old: torch.Tensor, new: torch.Tensor, count: torch.Tensor, exponential: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Real-time chunking's soft masking as a merge (Black et al. 2025): over the W steps where leftovers of the
    previous chunk meet the new one (``count > 0``: under ``rtc`` with ``overlap_steps``, the actions after the
    committed prefix that the previous chunk had planned), the weight on the leftover falls from near 1 to near 0,
    so the executed actions move from the previous plan to the new one over W steps instead of jumping at the first.

    At the p-th overlapping step (p = 0 the first) the weight is ``c = (W - p) / (W + 1)``, or RTC's guidance
    weight ``c (e^c - 1) / (e - 1)`` with ``exponential`` (it leaves the leftover faster at the start); the new
    chunk alone elsewhere. The overlap must be one run of steps per row, as :meth:`ChunkQueues.merge` makes it.
    """
    overlap = count > 0
    width = overlap.sum(1, keepdim=True)
    position = overlap.cumsum(1) - 1
    weight = ((width - position) / (width + 1)).to(new.dtype) * overlap
    if exponential:
        weight = weight * torch.expm1(weight) / (math.e - 1.0)
    return torch.lerp(new, old, weight.unsqueeze(-1)), count + 1


AGGREGATORS: dict[str, Aggregator] = {
    "replace": replace,
    "blend": blend,
    "temporal_ensemble": temporal_ensemble,
    "soft_mask": soft_mask,
}
"""Aggregators by name. A callable with the same signature can be used in place of a name."""


def resolve_aggregator(aggregator: str | Aggregator) -> Aggregator:
    """Look up an aggregator by name, or pass a callable through.

    Raises:
        ValueError: If the name is not in :data:`AGGREGATORS`.
        TypeError: If ``aggregator`` is neither a string nor a callable.
    """
    if isinstance(aggregator, str):
        if aggregator not in AGGREGATORS:
            raise ValueError(
                f"Unknown aggregator '{aggregator}'. Choose one of {sorted(AGGREGATORS)} or pass a callable"
                " fn(old, new, count) -> (merged, merged_count)."
            )
        return AGGREGATORS[aggregator]
    if callable(aggregator):
        return aggregator
    raise TypeError(f"aggregator must be a name or a callable, got {type(aggregator).__name__}.")
