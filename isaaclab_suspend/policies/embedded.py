"""Each task's embedded chunk model (no training, no download), found through its gym registration.

A task names its planner's cfg in the ``chunk_model_entry_point`` kwarg of ``gym.register``, as it names its
agent cfgs in ``rsl_rl_cfg_entry_point``; the cfg has ``chunk_length`` and ``class_type(cfg)`` builds the
model. Adding a task with a planner touches only that task's package.
"""

from __future__ import annotations

import gymnasium as gym
import torch

from isaaclab.utils.string import string_to_callable

from .model import ChunkModel

ENTRY_POINT = "chunk_model_entry_point"
"""The gym kwarg naming a task's chunk model cfg (``"module:CfgClass"``)."""


def tasks_with_chunk_model() -> list[str]:
    """The registered gym ids that name an embedded chunk model, sorted."""
    return sorted(task for task, spec in gym.registry.items() if ENTRY_POINT in (spec.kwargs or {}))


def make_default_model(task: str, chunk_length: int) -> ChunkModel:
    """The embedded chunk model of ``task`` planning ``chunk_length`` actions per call.

    Raises:
        ValueError: If the task is not registered or names no chunk model.
    """
    spec = gym.registry.get(task)
    if spec is None or ENTRY_POINT not in (spec.kwargs or {}):
        raise ValueError(f"No embedded chunk model for '{task}'. Tasks with one: {tasks_with_chunk_model()}"
                         f" (a task registers one with the gym kwarg '{ENTRY_POINT}').")
    cfg = string_to_callable(spec.kwargs[ENTRY_POINT])()
    cfg.chunk_length = chunk_length
    return cfg.class_type(cfg)


def planner_actions(task: str):
    """``actions(obs, env) -> (num_envs, action_dim)``: the first action of ``task``'s embedded chunk model planned
    for every env from its own observation (H = 1), e.g. for :func:`~isaaclab_suspend.suspension.audit_suspension`.

    Raises:
        ValueError: If the task names no chunk model.
    """
    model = make_default_model(task, 1)

    def actions(obs: dict, env) -> torch.Tensor:
        return model(obs, torch.arange(env.num_envs, device=env.device))[:, 0]

    return actions


def __getattr__(name: str):
    if name == "DEFAULT_MODELS":  # the registry at the time of access: factories ``chunk_length -> model``
        return {task: (lambda h, task=task: make_default_model(task, h)) for task in tasks_with_chunk_model()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
