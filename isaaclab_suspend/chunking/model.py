"""The chunk-model contract: what :class:`~isaaclab_suspend.chunking.ActionChunkingPolicy` calls, and nothing else.

Task planners (``chunk_model_entry_point`` of each task), trained chunk policies, RL checkpoints (H = 1),
remote models and latency emulators all fulfil it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

import torch


@runtime_checkable
class ChunkModel(Protocol):
    """``model(obs_rows, env_ids) -> chunk``: plans the next H actions of the envs ``env_ids``.

    ``obs_rows`` is the env's observation dict with every tensor sliced to the B envs of ``env_ids`` (a 1-D long
    tensor on the env device); the chunk is a float tensor of shape (B, H, action_dim). Plain callables and
    ``torch.nn.Module`` both fit. The policy calls the model under ``torch.no_grad()``, and under the ``async``
    schedule from a worker thread, so the model must not share mutable state with the env loop.

    Optional members a model may have (read with ``getattr``, never an ``isinstance`` check):

    * ``chunk_length: int``: the H the model always plans (trained and served models); the scripts take it.
    * ``check_env(env)``: raises ``ValueError`` saying why when the env does not fit (another task, other dims).
    * ``virtual_s: float``: seconds of emulated latency of the last call that were not spent (0 otherwise);
      the policy counts them as inference time, see ``virtual_seconds``.
    * ``observe_step(obs, moved, restarted) -> obs``: called by the policy once per step, before it plans, with
      the observation of EVERY env (the model itself only sees the rows it serves), ``moved`` (bool (N,): the
      envs whose observation advanced in the last step, i.e. were not suspended) and ``restarted`` (bool (N,):
      the envs whose episode began since the last call, all of them at the first call and after a full reset;
      None when none did, known from a host-side counter). It returns the observation dict the model's rows are
      sliced from this step: ``obs`` itself, or a new dict with extra entries (e.g. past observations, see
      :class:`~isaaclab_suspend.chunking.observation_history.ObservationHistory`). The entries are cut to rows
      like the rest, so a model called later (the ``async`` worker) still gets this step's. Models without the
      hook are not affected.
    * ``accepts_prefix: bool``: True if the model plans a chunk that continues a committed prefix (real-time
      chunking, see below); read with ``accepts_prefix``.

    The prefix. Under the ``rtc`` schedule a chunk is planned while the envs still run the last d actions of
    their current chunk; those d actions are committed (they execute before the new chunk can land). A model
    with ``accepts_prefix = True`` is then called as ``model(obs_rows, env_ids, prefix=prefix, delay=delay)``:

    * ``prefix``: the committed actions, ``prefix[:, k]`` executed k steps after ``obs_rows`` was observed.
      Shape: (B, d, action_dim), float, on the env device; d is the delay in env steps.
    * ``delay``: how many of them each row executes before the new chunk takes over: d for an env that is
      running, 0 for an env that waits suspended (its time stands still, so it starts the new chunk from its
      observation as if there were no prefix). Shape: (B,), long.

    The model returns a full chunk of H actions whose first ``delay[b]`` actions of row b are the prefix itself
    and whose others continue it (the policy installs the chunk from index ``delay`` on). A model without the
    attribute is never passed a prefix and is called as before. Adapters of other stacks map the two arrays to
    their own names (LeRobot's RTC: ``prev_chunk_left_over`` and ``inference_delay``).
    """

    def __call__(self, obs_rows: dict, env_ids: torch.Tensor) -> torch.Tensor:
        """Chunks for the envs ``env_ids``. Shape: (len(env_ids), H, action_dim)."""
        ...


def virtual_seconds(model: ChunkModel) -> float:
    """Emulated latency of the model's last call that was not spent, from its optional ``virtual_s`` [s]."""
    return float(getattr(model, "virtual_s", 0.0))


def accepts_prefix(model: ChunkModel) -> bool:
    """Whether the model takes ``prefix=`` and ``delay=`` (its optional ``accepts_prefix``, see :class:`ChunkModel`)."""
    return bool(getattr(model, "accepts_prefix", False))


def prefix_problem(prefix: Mapping, rows: int) -> str | None:
    """Why the optional ``prefix=`` and ``delay=`` of a call of ``rows`` rows do not fit the contract (None: they
    do, or neither is given). For transports and batchers that check a prefix before it reaches the model."""
    if not prefix:
        return None
    actions, delay = prefix.get("prefix"), prefix.get("delay")
    if (set(prefix) != {"prefix", "delay"} or not isinstance(actions, torch.Tensor)
            or not isinstance(delay, torch.Tensor) or actions.ndim != 3 or not actions.is_floating_point()
            or delay.ndim != 1 or delay.is_floating_point() or delay.dtype == torch.bool
            or actions.shape[0] != rows or delay.shape[0] != rows):
        return (f"'prefix' and 'delay' go together: a float (B, d, action_dim) and an integer (B,) array with B ="
                f" {rows} rows, as env_ids")
    return None


def prefix_plan(prefix: torch.Tensor, delay: torch.Tensor, step: int, planned: torch.Tensor) -> torch.Tensor:
    """Action ``step`` of a chunk that continues ``prefix``: the prefix's own action for rows still in it
    (``step < delay``), ``planned`` for the others. For planners that roll a model forward step by step.

    Args:
        prefix: Committed actions. Shape: (B, d, A).
        delay: Prefix actions each row executes. Shape: (B,), long.
        step: Index of the action in the chunk.
        planned: The planner's own action for this step. Shape: (B, A).

    Returns:
        The step's actions, shape (B, A).
    """
    if step >= prefix.shape[1]:
        return planned
    return torch.where((step < delay).unsqueeze(1), prefix[:, step].to(planned.dtype), planned)
