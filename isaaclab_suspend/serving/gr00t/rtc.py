"""Real-time chunking over GR00T's wire: the ``options`` of a ``get_action`` that carry the committed prefix.

What the options mean follows GR00T N1.7's action head (NVIDIA/Isaac-GR00T,
``gr00t/model/gr00t_n1d7/gr00t_n1d7.py``, ``Gr00tN1d7ActionHead.get_action_with_features``): when the model
inputs hold a previous chunk (``action``, which GR00T's processor builds from per-key actions in physical units,
normalised and padded to the model's horizon), the head inpaints. The new chunk's first ``rtc_overlap_steps``
actions start from the previous chunk's actions that END at index ``action_horizon`` (the previous chunk's
length before padding), the first ``rtc_frozen_steps`` of them stay as given (the inference delay), and those
between are released along an exponential ramp of rate ``rtc_ramp_rate``.

The previous chunk itself has no name on GR00T's wire: the stock ``Gr00tPolicy`` neither forwards ``options`` to
the model nor takes past actions, and the forks that add it differ (a keyword of their own ``get_action``, or an
already normalised array in ``options``). Here it travels in ``options`` under :data:`PREVIOUS_ACTION`: one
float32 (B, action_horizon, D_key) array per action key, in physical units and keyed as the reply's actions are
(``action.<key>`` flat, ``<key>`` nested), as GR00T's ``VLAStepData.actions`` holds them, so that a server can
hand them to its processor. The client sends the committed prefix (B, d, A) of the chunk-model contract as that
chunk with ``action_horizon = rtc_overlap_steps = rtc_frozen_steps = d``. :data:`ROW_FROZEN_STEPS` (B,) int64
adds the contract's per-row delay (0 for an env that waited suspended), which N1.7's head does not have: it
freezes every row alike, so a server that ignores the key freezes those rows too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from ..base import describe_reply

HORIZON, OVERLAP, FROZEN, RAMP_RATE = "action_horizon", "rtc_overlap_steps", "rtc_frozen_steps", "rtc_ramp_rate"
"""N1.7's option names: the previous chunk's length, the steps inpainted from it, the steps frozen to it, the ramp."""
PREVIOUS_ACTION = "previous_action"
"""Option holding the previous chunk: ``{action key: float32 (B, action_horizon, D_key)}`` (this project's name)."""
ROW_FROZEN_STEPS = "rtc_row_frozen_steps"
"""Option holding each row's frozen steps, int64 (B,), each in [0, rtc_frozen_steps] (this project's name)."""
OPTION_KEYS = (HORIZON, OVERLAP, FROZEN, RAMP_RATE, PREVIOUS_ACTION, ROW_FROZEN_STEPS)
"""Every option of real-time chunking; all but :data:`ROW_FROZEN_STEPS` are required once one is sent."""


def is_ramp_rate(value: Any) -> bool:
    """Whether ``value`` can be an ``rtc_ramp_rate``: a finite number > 0 (not a bool)."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def request_options(prefix: torch.Tensor, delay: torch.Tensor, parts: Sequence[tuple[str, int]],
                    ramp_rate: float) -> dict | None:
    """The options of a ``get_action`` whose chunk continues ``prefix`` (None when it is empty: d = 0).

    Args:
        prefix: The committed actions of the chunk-model contract. Shape: (B, d, A).
        delay: Prefix actions each row executes before the new chunk (d, or 0). Shape: (B,).
        parts: ``(action key as the reply names it, D_key)`` in the modality config's order; the D_key sum to A.
        ramp_rate: ``rtc_ramp_rate``.
    """
    steps = prefix.shape[1]
    if steps == 0:
        return None
    actions = prefix.detach().to("cpu", torch.float32).numpy()
    split = np.split(actions, np.cumsum([dim for _, dim in parts])[:-1], axis=2)
    return {HORIZON: steps, OVERLAP: steps, FROZEN: steps, RAMP_RATE: float(ramp_rate),
            PREVIOUS_ACTION: {key: np.ascontiguousarray(part) for (key, _), part in zip(parts, split)},
            ROW_FROZEN_STEPS: delay.detach().to("cpu", torch.int64).numpy()}


def options_prefix(options: Any, action_keys: Sequence[str], batch: int, chunk_length: int,
                   action_dim: int | None = None, device: str = "cpu") -> dict:
    """The ``prefix=`` and ``delay=`` of the chunk-model contract from a request's options: the previous chunk's
    last ``rtc_overlap_steps`` actions (keys concatenated in ``action_keys``' order), with ``rtc_frozen_steps``
    (or each row's :data:`ROW_FROZEN_STEPS`) of them executed. Empty when the options hold none of
    :data:`OPTION_KEYS` or overlap no step.

    Args:
        options: The request's ``options`` (anything: it came over the wire).
        action_keys: The action keys of the modality config (each read as ``action.<key>`` or ``<key>``).
        batch: Rows B of the request's observation.
        chunk_length: Actions H of the served model's chunk (the overlap may not exceed it).
        action_dim: The model's action dim the keys must add up to (None: not checked).
        device: Device of the returned tensors.

    Returns:
        ``{"prefix": float32 (B, rtc_overlap_steps, A), "delay": int64 (B,)}``, or ``{}``.

    Raises:
        ValueError: Saying which option is missing or wrong (type, range, shape, dtype, non-finite values).
    """
    if not isinstance(options, Mapping) or not set(OPTION_KEYS) & options.keys():
        return {}
    missing = [key for key in OPTION_KEYS[:-1] if key not in options]
    if missing:
        raise ValueError(f"Real-time chunking options lack {missing}: send all of {list(OPTION_KEYS[:-1])}.")
    horizon, overlap, frozen, ramp = (options[key] for key in (HORIZON, OVERLAP, FROZEN, RAMP_RATE))
    if not (all(isinstance(v, int) and not isinstance(v, bool) for v in (horizon, overlap, frozen))
            and 0 <= frozen <= overlap <= horizon and overlap <= chunk_length):
        raise ValueError(f"'{FROZEN}' <= '{OVERLAP}' <= '{HORIZON}' must be integers >= 0, with '{OVERLAP}' at most"
                         f" this server's H = {chunk_length}; got {str(frozen)[:20]}, {str(overlap)[:20]},"
                         f" {str(horizon)[:20]}.")
    if not is_ramp_rate(ramp):
        raise ValueError(f"'{RAMP_RATE}' must be a finite number > 0, got {str(ramp)[:20]}.")
    previous = options[PREVIOUS_ACTION]
    if not isinstance(previous, Mapping):
        raise ValueError(f"'{PREVIOUS_ACTION}' must map each action key {list(action_keys)} to an array.")
    parts = []
    for key in action_keys:
        value = previous.get(f"action.{key}", previous.get(key))
        if not (isinstance(value, np.ndarray) and value.dtype == np.float32 and value.ndim == 3
                and value.shape[:2] == (batch, horizon)):
            raise ValueError(f"'{PREVIOUS_ACTION}' must hold a float32 array of shape (B = {batch}, {HORIZON} ="
                             f" {horizon}, D) for the action key '{key}', got {describe_reply({key: value})}.")
        parts.append(value)
    actions = np.concatenate(parts, axis=2)
    if action_dim is not None and actions.shape[2] != action_dim:
        raise ValueError(f"'{PREVIOUS_ACTION}' holds {actions.shape[2]}-dim actions; this server's model takes"
                         f" {action_dim}.")
    if not np.isfinite(actions).all():
        raise ValueError(f"'{PREVIOUS_ACTION}' holds non-finite actions (NaN or inf).")
    rows = options.get(ROW_FROZEN_STEPS)
    if rows is None:
        rows = np.full(batch, frozen, dtype=np.int64)
    elif not (isinstance(rows, np.ndarray) and rows.dtype.kind in "iu" and rows.shape == (batch,)
              and ((rows >= 0) & (rows <= frozen)).all()):
        raise ValueError(f"'{ROW_FROZEN_STEPS}' must be an integer array of shape (B = {batch},) with values in"
                         f" [0, {FROZEN} = {frozen}], got {describe_reply({ROW_FROZEN_STEPS: rows})}.")
    if overlap == 0:
        return {}
    return {"prefix": torch.tensor(actions[:, horizon - overlap: horizon], device=device),
            "delay": torch.tensor(rows, dtype=torch.int64, device=device)}

