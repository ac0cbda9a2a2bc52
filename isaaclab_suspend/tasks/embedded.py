"""Each task's embedded chunk model (no training, no download), found through its gym registration.

A task names its planner's cfg in the ``chunk_model_entry_point`` kwarg of ``gym.register``, as it names its
agent cfgs in ``rsl_rl_cfg_entry_point``; the cfg has ``chunk_length`` and ``class_type(cfg)`` builds the
model. Adding a task with a planner touches only that task's package. :class:`EmbeddedModelCfg` is the ``embedded``
chunk-model source (``--model embedded``, the default): the run's task's planner.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import gymnasium as gym
import torch

from isaaclab.utils import configclass
from isaaclab.utils.string import string_to_callable

from ..cfg_overrides import check_planner_field
from ..chunking.model import ChunkModel
from ..chunking.sources import ChunkModelCfg, ChunkModelOpener, register_source
from ..names import DEFAULT_CHUNK
from ..tensor_tree import select_rows

ENTRY_POINT = "chunk_model_entry_point"
"""The gym kwarg naming a task's chunk model cfg (``"module:CfgClass"``)."""


def tasks_with_chunk_model() -> list[str]:
    """The registered gym ids that name an embedded chunk model, sorted (this module lies in the tasks package,
    so importing it registers the project's tasks)."""
    return sorted(task for task, spec in gym.registry.items() if ENTRY_POINT in (spec.kwargs or {}))


def make_default_model(task: str, chunk_length: int, overrides: Sequence[str] = ()) -> ChunkModel:
    """The embedded chunk model of ``task`` planning ``chunk_length`` actions per call, with ``overrides``
    (``KEY=VALUE``) of its cfg's fields, each read as the type of the field's default (e.g. ``grasp_noise=0.01``).

    Raises:
        ValueError: If the task is not registered or names no chunk model, or an override does not fit its cfg.
    """
    spec = gym.registry.get(task) if task in tasks_with_chunk_model() else None
    if spec is None or ENTRY_POINT not in (spec.kwargs or {}):
        raise ValueError(f"No embedded chunk model for '{task}'. Tasks with one: {tasks_with_chunk_model()}"
                         f" (a task registers one with the gym kwarg '{ENTRY_POINT}').")
    cfg = string_to_callable(spec.kwargs[ENTRY_POINT])()
    cfg.chunk_length = chunk_length
    for override in overrides:
        _override(cfg, override)
    return cfg.class_type(cfg)


class EmbeddedOpener(ChunkModelOpener):
    """Opens the run's task's planner: the task must have one and the overrides must fit its cfg; one planner is
    made per env."""

    def bind(self, task: str, chunk_length: int | None) -> None:
        super().bind(task, chunk_length)
        if task not in tasks_with_chunk_model():
            raise ValueError(f"task '{task}' has no embedded chunk model; tasks with one: {tasks_with_chunk_model()}")
        scale = self.cfg.action_scale
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not 0 < scale < math.inf:
            raise ValueError(f"action_scale {scale!r}: expected a positive finite number")
        make_default_model(task, chunk_length or DEFAULT_CHUNK, self.cfg.planner_overrides)  # does the override fit?

    def make(self, env, chunk_length: int) -> ChunkModel:
        model = make_default_model(self.task, chunk_length, self.cfg.planner_overrides)
        return ScaledChunkModel(model, self.cfg.action_scale) if self.cfg.action_scale != 1.0 else model

    def describe(self) -> str:
        parts = [*self.cfg.planner_overrides]
        if self.cfg.action_scale != 1.0:
            parts.append(f"actions x{self.cfg.action_scale:g}")
        return f"embedded model with {', '.join(parts)}" if parts else "embedded model"

    def served_identity(self, model: ChunkModel, env) -> tuple[str | None, int | None]:
        return self.task, None


@register_source("embedded", EmbeddedOpener)
@configclass
class EmbeddedModelCfg(ChunkModelCfg):
    """The task's embedded planner (its ``chunk_model_entry_point``: Cartpole's LQR plans, push-cube's PD plans)."""

    class_type: type = EmbeddedOpener
    """The opener of this source."""
    planner_overrides: list[str] = []
    """``KEY=VALUE`` overrides of the planner's cfg fields."""
    action_scale: float = 1.0
    """Factor on every planned action (below 1: a weaker planner, e.g. a degraded arm of a comparison)."""


class ScaledChunkModel:
    """A chunk model whose planned actions are multiplied by ``scale`` (a committed prefix is handed to the inner
    model unscaled, so the prefix part of the plan stays the prefix)."""

    def __init__(self, model: ChunkModel, scale: float):
        self.model, self.scale = model, scale
        self.accepts_prefix = getattr(model, "accepts_prefix", False)

    def __call__(self, obs_rows: dict, env_ids: torch.Tensor, prefix: torch.Tensor | None = None,
                 delay: torch.Tensor | None = None) -> torch.Tensor:
        """Shape: (B, H, action_dim), the inner model's plan times ``scale``."""
        if prefix is None:
            return self.model(obs_rows, env_ids) * self.scale
        return self.model(obs_rows, env_ids, prefix / self.scale, delay) * self.scale

    def __getattr__(self, name: str):  # the inner model's other attributes (chunk_length, check_env, ...)
        if name == "model":
            raise AttributeError(name)
        return getattr(self.model, name)


def _override(cfg, override: str) -> None:
    """Set the field ``KEY`` of ``cfg`` to ``VALUE`` (``override``), read as the type of its default and in its range
    (:func:`~isaaclab_suspend.cfg_overrides.check_planner_field`)."""
    key, _, text = override.partition("=")
    fields = [name for name in cfg.to_dict() if name not in ("class_type", "chunk_length")]
    if key == "chunk_length":
        raise ValueError(f"planner override '{override}': the planner's H is --model.chunk_length, not a planner override")
    if key not in fields:
        raise ValueError(f"planner override '{override}': {type(cfg).__name__} has no field '{key}'; its fields:"
                         f" {fields}")
    old = getattr(cfg, key)
    if not isinstance(old, (int, float, str)) or isinstance(old, bool):
        raise ValueError(f"planner override '{override}': only number and text fields can be set here, '{key}' is"
                         f" {type(old).__name__}")
    try:
        value = type(old)(text)
    except ValueError:
        value = None
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        raise ValueError(f"planner override '{override}': '{key}' is {type(old).__name__} ({old!r}), got '{text}'")
    if not isinstance(value, str):
        check_planner_field(type(cfg).__name__, key, old, value)
    setattr(cfg, key, value)


def planner_actions(task: str, chunk_length: int = 16):
    """``actions(obs, env) -> (num_envs, action_dim)``: each env runs chunks of ``task``'s embedded chunk model
    planned from its own observation every ``chunk_length`` of its own active steps (a suspended env's count stands
    still), so an env's actions depend on nothing but its own history, e.g. for
    :func:`~isaaclab_suspend.tasks.audit.audit_suspension`.

    Raises:
        ValueError: If the task names no chunk model.
    """
    model = make_default_model(task, chunk_length)
    state = {}

    def actions(obs: dict, env) -> torch.Tensor:
        if state.get("env") is not env:  # a new env (the audit's second run) starts from scratch
            state["env"] = env
            state["count"] = torch.zeros(env.num_envs, dtype=torch.long, device=env.device)
            state["chunk"] = torch.zeros(env.num_envs, chunk_length, env.action_manager.total_action_dim,
                                         device=env.device)
        count, chunk, active = state["count"], state["chunk"], env.active_mask
        due = torch.nonzero(active & (count % chunk_length == 0)).flatten()
        if due.numel():
            chunk[due] = model(select_rows(obs, due), due).to(chunk.dtype)
        action = chunk[torch.arange(env.num_envs, device=env.device), count % chunk_length]
        count += active.long()
        return action

    return actions

