"""Inference-latency emulation: make a cheap chunk model cost what a real policy costs.

Large chunking policies take about 200 ms per call (GR00T on GR1) or 700 ms (DROID), often growing with the
batch size. :class:`LatencyEmulator` wraps any chunk model and makes each call last ``fixed_s + per_row_s *
batch_size`` seconds, so that a benchmark on a CPU reproduces the trade-off between inference calls and
simulation time. In virtual mode it does not sleep: it only reports the latency, and the chunking policy's
clock counts it, so tests stay fast while the figures stay those of the emulated policy.
"""

from __future__ import annotations

import math
import time

import torch

from isaaclab.utils import configclass

from .model import ChunkModel, accepts_prefix

PRESETS: dict[str, tuple[float, float]] = {"gr1": (0.2, 0.0), "droid": (0.7, 0.0)}
"""Named latencies ``(fixed_s, per_row_s)``: GR00T N1 on GR1 (about 200 ms) and DROID (about 700 ms)."""


@configclass
class LatencyCfg:
    """Emulated inference latency ``fixed_s + per_row_s * batch_size`` [s] per model call."""

    fixed_s: float = 0.0
    """Latency of a call, whatever its batch size [s]."""
    per_row_s: float = 0.0
    """Extra latency per env row in the batch [s]."""
    virtual: bool = False
    """If True, do not sleep: report the latency through :attr:`LatencyEmulator.virtual_s` so the chunking
    policy accounts it as inference time. If False, sleep until the call has lasted the latency."""

    def latency(self, batch_size: int) -> float:
        """Emulated latency of a call on ``batch_size`` rows [s]."""
        return self.fixed_s + self.per_row_s * batch_size

    @classmethod
    def parse(cls, spec: str, virtual: bool = False) -> LatencyCfg:
        """Parse ``"0.2"`` (fixed), ``"0.05+0.002n"`` (fixed + per row), ``"gr1"`` or ``"droid"`` (see ``PRESETS``).

        Raises:
            ValueError: If ``spec`` is none of these forms or a latency is negative.
        """
        text = spec.strip().lower().replace(" ", "")
        if text in PRESETS:
            fixed, per_row = PRESETS[text]
        else:
            fixed = per_row = 0.0
            try:
                for term in text.split("+"):
                    if term.endswith("n"):
                        per_row += float(term[:-1])
                    else:
                        fixed += float(term)
            except ValueError:
                raise ValueError(
                    f"Cannot parse latency '{spec}': use seconds per call ('0.2'), seconds per call plus seconds"
                    f" per env row ('0.05+0.002n', or '0.002n'), or a preset {sorted(PRESETS)}."
                ) from None
        if not (0.0 <= fixed < math.inf and 0.0 <= per_row < math.inf):
            raise ValueError(f"Latencies must be finite and >= 0, got '{spec}'.")
        return cls(fixed_s=fixed, per_row_s=per_row, virtual=virtual)


class LatencyEmulator:
    """A chunk model that lasts :meth:`LatencyCfg.latency` seconds per call (at least its own compute time).

    Args:
        model: The wrapped chunk model, ``model(obs_rows, env_ids) -> chunk`` of shape (B, H, action_dim).
        cfg: The latency to emulate.
    """

    def __init__(self, model: ChunkModel, cfg: LatencyCfg):
        self.model = model
        """The wrapped chunk model."""
        self.cfg = cfg
        """The emulated latency."""
        hook = getattr(model, "observe_step", None)
        if hook is not None:  # the optional per-step hook of the contract passes through
            self.observe_step = hook
        self.virtual_s = 0.0
        """Virtual mode: emulated latency of the last call not spent sleeping [s]; 0 in sleeping mode. The
        optional ``virtual_s`` of the :class:`~isaaclab_suspend.chunking.model.ChunkModel` contract."""

    @property
    def accepts_prefix(self) -> bool:
        """Whether the wrapped model takes a prefix (the optional ``accepts_prefix`` of the contract)."""
        return accepts_prefix(self.model)

    def __call__(self, obs_rows: dict, env_ids: torch.Tensor, **prefix) -> torch.Tensor:
        """The wrapped model's chunk (``prefix``: its optional ``prefix=`` and ``delay=``), after the latency."""
        start = time.perf_counter()
        chunk = self.model(obs_rows, env_ids, **prefix)
        remaining = self.cfg.latency(len(env_ids)) - (time.perf_counter() - start)
        if self.cfg.virtual:
            self.virtual_s = max(remaining, 0.0)
        elif remaining > 0:
            time.sleep(remaining)
        return chunk

    def __repr__(self) -> str:
        mode = "virtual" if self.cfg.virtual else "sleeping"
        return f"LatencyEmulator({self.model!r}, {self.cfg.fixed_s:g} s + {self.cfg.per_row_s:g} s/row, {mode})"
