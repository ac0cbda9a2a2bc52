"""``-Suspendable`` variants of Isaac Lab's own tasks: the same cfgs, on the suspendable env, opened kitless.

Isaac Lab registers its tasks in the ``__init__`` of each task's config package. A variant is registered from
that package's registration: Isaac Lab's gym kwargs (agent entry points) plus the project's (a chunk model), on
:class:`~isaaclab_suspend.envs.SuspendableManagerBasedRLEnv`, with an env cfg entry point
(:func:`kitless_cfg_entry_point`) that makes the parent's cfg open here as it is: Newton physics, local assets,
suspension enabled. So Isaac Lab's plain API opens every variant::

    env_cfg = parse_env_cfg("Isaac-Lift-Franka-Suspendable", device="cpu", num_envs=4)
    with launch_simulation(env_cfg, {}):
        env = gym.make("Isaac-Lift-Franka-Suspendable", cfg=env_cfg)
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable

import gymnasium as gym

from isaaclab.utils.string import string_to_callable

from isaaclab_tasks.utils import PresetCfg

from ..assets.asset_map import localize_scene
from ..suspension.suspend_cfg import SuspendCfg

SUSPENDABLE_ENTRY_POINT = "isaaclab_suspend.envs:SuspendableManagerBasedRLEnv"
"""The gym entry point of every ``-Suspendable`` task: such a task runs with suspension enabled."""

KITLESS_PHYSICS_PRESET = "newton_mjwarp"
"""The physics preset chosen for a task whose default physics is PhysX (which needs Isaac Sim) when no
``presets=`` / ``physics=`` override names one."""


def suspendable_id(isaaclab_id: str) -> str:
    """``IsaacContrib-Stack-Cube-SO101-v0`` -> ``IsaacContrib-Stack-Cube-SO101-Suspendable``."""
    return isaaclab_id.removesuffix("-v0") + "-Suspendable"


def _nodes(node: object, seen: set[int]):
    """Every cfg object in a cfg tree (dataclass fields, dicts, lists; preset alternatives included)."""
    if id(node) in seen:
        return
    seen.add(id(node))
    yield node
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        children = [getattr(node, f.name, None) for f in dataclasses.fields(node)]
    elif isinstance(node, dict):
        children = list(node.values())
    elif isinstance(node, (list, tuple)):
        children = list(node)
    else:
        return
    for child in children:
        if not isinstance(child, (str, bytes, int, float, bool, type(None))):
            yield from _nodes(child, seen)


def make_kitless(cfg) -> None:
    """Make a task cfg (presets not yet resolved) open kitless, in place: where its physics defaults to PhysX,
    every preset with a :data:`KITLESS_PHYSICS_PRESET` alternative defaults to that one (what the override
    ``presets=newton_mjwarp`` picks; other ``presets=`` overrides still apply), and the scene's assets on NVIDIA's
    asset server point at their local files (:func:`~isaaclab_suspend.assets.asset_map.localize_scene`).
    MuJoCo-Warp copies Newton's state into its data every step (``update_data_interval = 1``), which suspension
    needs."""
    from isaaclab_newton.physics import NewtonCfg

    physics = cfg.sim.physics
    default = physics.default if isinstance(physics, PresetCfg) else physics
    if not isinstance(default, NewtonCfg):
        for preset in (node for node in _nodes(cfg, set()) if isinstance(node, PresetCfg)):
            alternative = getattr(preset, KITLESS_PHYSICS_PRESET, None)
            if alternative is not None:
                preset.default = alternative
    for node in _nodes(cfg.sim.physics, set()):
        if hasattr(getattr(node, "solver_cfg", None), "update_data_interval"):
            node.solver_cfg.update_data_interval = 1
    localize_scene(cfg.scene)


def kitless_cfg_entry_point(entry_point: str | type) -> Callable[[], object]:
    """A gym ``env_cfg_entry_point`` (Isaac Lab's ``load_cfg_from_registry`` calls it) building the cfg that
    ``entry_point`` (``"module:CfgClass"``, or the class) names, made kitless (:func:`make_kitless`), with suspension enabled
    where the cfg has no :class:`SuspendCfg` of its own."""

    def env_cfg():
        cfg = (string_to_callable(entry_point) if isinstance(entry_point, str) else entry_point)()
        make_kitless(cfg)
        if not isinstance(getattr(cfg, "suspend", None), SuspendCfg):
            cfg.suspend = SuspendCfg(enabled=True)
        return cfg

    env_cfg.__qualname__ = env_cfg.__name__ = f"kitless({getattr(entry_point, '__name__', entry_point)})"
    return env_cfg


def register_suspendable(isaaclab_id: str, module: str, **kwargs) -> str:
    """Register the ``-Suspendable`` variant of Isaac Lab's ``isaaclab_id``, which ``module`` (its config package)
    registers; ``kwargs`` are added to (or replace) Isaac Lab's gym kwargs, and the env cfg entry point (Isaac
    Lab's, or one in ``kwargs``) is made kitless (:func:`kitless_cfg_entry_point`).

    Returns:
        The variant's gym id.
    """
    importlib.import_module(module)
    task = suspendable_id(isaaclab_id)
    kwargs = {**gym.spec(isaaclab_id).kwargs, **kwargs}
    kwargs["env_cfg_entry_point"] = kitless_cfg_entry_point(kwargs["env_cfg_entry_point"])
    gym.register(id=task, entry_point=SUSPENDABLE_ENTRY_POINT, disable_env_checker=True, kwargs=kwargs)
    return task
