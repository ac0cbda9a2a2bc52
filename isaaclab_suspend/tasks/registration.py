"""``-Suspendable`` variants of Isaac Lab's own tasks: the same cfg entry points, on the suspendable env.

Isaac Lab registers its tasks in the ``__init__`` of each task's config package. A variant is registered from
that package's registration: Isaac Lab's gym kwargs (cfg and agent entry points) plus the project's (a chunk
model), on :class:`~isaaclab_suspend.envs.SuspendableManagerBasedRLEnv`. Opening it
(:func:`isaaclab_suspend.tasks.env_factory.open_env`) points its assets at local files and enables suspension
(:func:`isaaclab_suspend.tasks.env_factory.make_env_cfg`), so the variant needs no cfg of its own.
"""

from __future__ import annotations

import importlib

import gymnasium as gym

SUSPENDABLE_ENTRY_POINT = "isaaclab_suspend.envs:SuspendableManagerBasedRLEnv"
"""The gym entry point of every ``-Suspendable`` task: such a task runs with suspension enabled."""


def suspendable_id(isaaclab_id: str) -> str:
    """``IsaacContrib-Stack-Cube-SO101-v0`` -> ``IsaacContrib-Stack-Cube-SO101-Suspendable``."""
    return isaaclab_id.removesuffix("-v0") + "-Suspendable"


def register_suspendable(isaaclab_id: str, module: str, **kwargs) -> str:
    """Register the ``-Suspendable`` variant of Isaac Lab's ``isaaclab_id``, which ``module`` (its config package)
    registers; ``kwargs`` are added to (or replace) Isaac Lab's gym kwargs.

    Returns:
        The variant's gym id.
    """
    importlib.import_module(module)
    task = suspendable_id(isaaclab_id)
    spec = gym.spec(isaaclab_id)
    gym.register(
        id=task, entry_point=SUSPENDABLE_ENTRY_POINT, disable_env_checker=True, kwargs={**spec.kwargs, **kwargs}
    )
    return task
