"""The project's env factory: open a task (the project's or another package's) the standard Isaac Lab way, kitless on
Newton, after checking that its USD assets can be opened here; resolve task ids; quiet set-up output; stop on Ctrl-C."""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import importlib
import importlib.util
import io
import logging
import os
import re
import signal
import warnings
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING
from urllib.parse import urlparse

import gymnasium as gym

from isaaclab.app.sim_launcher import launch_simulation
from isaaclab_newton.physics import NewtonCfg

import isaaclab_suspend.tasks  # noqa: F401  (registers the gym ids)
from isaaclab_suspend.assets.asset_map import localize_scene
from isaaclab_suspend.cfg_overrides import SELECTOR_KEYS, check_data_overrides, check_form, check_overrides
from isaaclab_suspend.envs import SuspendableManagerBasedRLEnv
from isaaclab_suspend.names import CFG_OVERRIDES_ATTR, DETERMINISM
from isaaclab_suspend.solver_notices import say_linesearch_notice_once, without_linesearch_notice
from isaaclab_suspend.suspension import SuspendCfg
from isaaclab_suspend.suspension.newton_state import unsupported_solver_setting
from isaaclab_suspend.suspension.suspend_cfg import check_suspend_cfg
from isaaclab_suspend.tasks.deterministic import check_deterministic_contacts
from isaaclab_suspend.tasks.physics_cfg import scale_contact_buffer
from isaaclab_suspend.tasks.registration import KITLESS_PHYSICS_PRESET, SUSPENDABLE_ENTRY_POINT
from isaaclab_tasks.utils import parse_env_cfg

if TYPE_CHECKING:
    from isaaclab.envs import ManagerBasedRLEnvCfg


def set_quiet(quiet: bool = True) -> None:
    """Deprecated (removed in 0.5.0): building an env is quiet unless asked, ``open_env(..., verbose=True)``."""
    warnings.warn("set_quiet() is deprecated and has no effect since 0.4.0; it goes in 0.5.0: envs are built quietly"
                  " unless asked, open_env(..., verbose=True) or RunEnvCfg(verbose=True).", DeprecationWarning,
                  stacklevel=2)


@contextlib.contextmanager
def quieted(quiet: bool = True) -> Iterator[None]:
    """Stdout, logging below error and Python warnings of the block dropped if ``quiet`` (what building an env,
    loading an agent cfg or a library's training loop prints). Errors still reach stderr."""
    if not quiet:
        yield
        return
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(previous)


def _parse_env_cfg(task: str, device: str, overrides: list[str]):
    """Isaac Lab's ``parse_env_cfg``; an override that does not fit the task's cfg is a one-line ``ValueError``
    naming it."""
    try:
        return parse_env_cfg(task, device=device, overrides=overrides)
    except Exception as err:  # Hydra's errors for a key the cfg lacks or a value it cannot take vary in type
        if not overrides:
            raise
        reason = str(err).strip().splitlines()[0] if str(err).strip() else ""  # Isaac Lab lists the presets below
        raise ValueError(f"the cfg overrides {' '.join(overrides)} do not apply ({type(err).__name__}: {reason})."
                         " Each is env.<field of the task's cfg>=VALUE or presets=NAME.") from None


def make_env_cfg(
    task: str, num_envs: int, device: str = "cpu", overrides: Sequence[str] = (), suspendable: bool = False,
    overrides_are_data: bool = False, deterministic: str = "off", verbose: bool = False, **attrs
):
    """``parse_env_cfg`` for ``task`` with ``num_envs`` envs, made to open kitless; ``attrs`` set dotted cfg fields
    (e.g. ``seed=3``). A total contact buffer the cfg sizes for its own number of envs is scaled to ``num_envs``
    (:func:`~isaaclab_suspend.tasks.physics_cfg.scale_contact_buffer`).

    ``overrides`` are checked before they reach Hydra and after (:mod:`isaaclab_suspend.cfg_overrides`): a user's
    must make sense (supported forms, finite numbers, durations and sizes in range); with ``overrides_are_data``
    (a file's, e.g. a dataset's ``env_args.cfg_overrides``) each may also only set a number or a boolean the task's
    cfg (with the file's presets) has. ``deterministic`` (``auto``, ``on``, ``off``) turns on Isaac Lab 3.0's
    reproducible physics where :func:`deterministic_physics` says so. What parsing the cfg prints is dropped unless
    ``verbose``.

    Kitless: a task whose default physics is PhysX gets :data:`KITLESS_PHYSICS_PRESET` (unless ``overrides`` pick a
    preset), and the scene's assets on NVIDIA's asset server are pointed at their local files
    (:func:`~isaaclab_suspend.assets.asset_map.localize_scene`). With ``suspendable``, or for a task registered on
    the suspendable env, a cfg without a :class:`SuspendCfg` gets one with suspension enabled, and MuJoCo-Warp
    copies Newton's state into its data every step (``update_data_interval = 1``, which suspension needs; another
    value set through ``attrs`` is kept, and :func:`open_env` refuses it before building the env).

    Raises:
        ValueError: If ``task`` is not a registered gym id, or an override is refused or does not fit its cfg
            (one line, prefixed with the task).
    """
    task = resolve_task_id(task)
    given = list(overrides)
    selectors = [o for o in given if o.partition("=")[0] in SELECTOR_KEYS]
    try:
        for override in given:
            check_form(override, overrides_are_data)
        with quieted(not verbose):
            base = _parse_env_cfg(task, device, selectors)  # the task's cfg with the presets the overrides pick
            kitless = []
            if not selectors and not isinstance(base.sim.physics, NewtonCfg):  # PhysX needs Isaac Sim
                kitless = [f"presets={KITLESS_PHYSICS_PRESET}"]
                base = _parse_env_cfg(task, device, kitless)
            if overrides_are_data:
                check_data_overrides(base, given)
            cfg = _parse_env_cfg(task, device, given + kitless) if len(given) > len(selectors) else base
            check_overrides(base, cfg, given)
    except ValueError as err:
        raise ValueError(f"{task}: {err}") from None
    setattr(cfg, CFG_OVERRIDES_ATTR, given)
    if num_envs is not None:
        scale_contact_buffer(cfg.sim.physics, num_envs / cfg.scene.num_envs)
        cfg.scene.num_envs = num_envs
    localize_scene(cfg.scene)
    suspendable = suspendable or gym.spec(task).entry_point == SUSPENDABLE_ENTRY_POINT
    if suspendable and not isinstance(getattr(cfg, "suspend", None), SuspendCfg):
        cfg.suspend = SuspendCfg(enabled=True)
    if suspendable and hasattr(getattr(cfg.sim.physics, "solver_cfg", None), "update_data_interval"):
        cfg.sim.physics.solver_cfg.update_data_interval = 1
    if deterministic_physics(device, deterministic):
        cfg.sim.physics.deterministic = True
    for dotted, value in attrs.items():
        owner = cfg
        *path, leaf = dotted.split("__")
        for part in path:
            owner = getattr(owner, part)
        setattr(owner, leaf, value)
    return cfg


def deterministic_physics(device: str, mode: str) -> bool:
    """Whether an env on ``device`` runs with Isaac Lab 3.0's reproducible physics (``PhysicsCfg.deterministic``:
    Warp's ``RUN_TO_RUN`` mode in Newton, MuJoCo-Warp's own sensor stage off) under ``mode``: ``on``, ``off``, or
    ``auto``, on a CUDA device only. There Newton's contact and solver kernels use floating-point atomics, so two
    runs of a contact task differ and a resumed env cannot retrace the run that never suspended it; the CPU's
    physics is reproducible already. A suspension freezes an env's rows exactly either way.

    Raises:
        ValueError: If ``mode`` is not one of :data:`~isaaclab_suspend.names.DETERMINISM`.
    """
    if mode not in DETERMINISM:
        raise ValueError(f"deterministic must be one of {', '.join(DETERMINISM)}, got {mode!r}.")
    return mode == "on" or (mode == "auto" and str(device).startswith("cuda"))


def resolve_task_id(task: str) -> str:
    """The registered gym id ``task`` names: itself, or without a gym version suffix (``Isaac-Cartpole-v0`` is
    ``Isaac-Cartpole`` since Isaac Lab 3.0).

    Raises:
        ValueError: If neither is registered, naming the closest registered ids.
    """
    if task in gym.registry:
        return task
    unversioned = re.sub(r"-v\d+$", "", task)
    if unversioned in gym.registry:
        return unversioned
    close = difflib.get_close_matches(unversioned, list(gym.registry), n=1, cutoff=0.5)
    known = sorted(k for k in gym.registry if k.endswith("-Suspendable"))
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise ValueError(f"Unknown task '{task}'.{hint} Registered suspendable tasks: {known}; a task of another"
                     " package: --import MODULE.")


def _asset_paths(node: object, where: str, seen: set[int]) -> Iterator[tuple[str, str]]:
    """``(dotted field, path)`` of every ``usd_path`` / ``mdl_path`` string under a cfg (configclasses are
    dataclasses; dicts, lists and tuples are walked too). Debug-visualisation markers
    (:class:`~isaaclab.markers.VisualizationMarkersCfg`) are skipped: they are only spawned with ``debug_vis``,
    which a kitless run has no viewer for."""
    from isaaclab.markers import VisualizationMarkersCfg

    if id(node) in seen or isinstance(node, VisualizationMarkersCfg):
        return
    seen.add(id(node))
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        items = ((f.name, getattr(node, f.name, None)) for f in dataclasses.fields(node))
    elif isinstance(node, dict):
        items = ((str(k), v) for k, v in node.items())
    elif isinstance(node, (list, tuple)):
        items = ((str(i), v) for i, v in enumerate(node))
    else:
        return
    for name, value in items:
        field = f"{where}.{name}" if where else name
        if isinstance(value, str) and name in ("usd_path", "mdl_path"):
            yield field, value
        elif not isinstance(value, (str, bytes, int, float, bool, type(None))):
            yield from _asset_paths(value, field, seen)


def check_local_assets(cfg: ManagerBasedRLEnvCfg, task: str) -> None:
    """Refuse, before any env is built, a task whose USD (or MDL) assets cannot be opened here: files on NVIDIA's
    asset server (a URL) without Omniverse's client (``omni.client``, which a kitless install skips), or local
    files that do not exist. Isaac Lab would fail deep inside the scene's construction with a long traceback.

    Raises:
        ValueError: Naming the assets and what to do.
    """
    try:
        has_client = importlib.util.find_spec("omni.client") is not None
    except ImportError:  # no 'omni' package at all
        has_client = False
    remote, missing = [], []
    for field, path in _asset_paths(getattr(cfg, "scene", None), "scene", set()):
        if len(urlparse(path).scheme) > 1 and not os.path.isabs(path):
            if not has_client:
                remote.append((field, path))
        elif not os.path.isfile(path):
            missing.append((field, path))
    if remote:
        fields, host = ", ".join(field for field, _ in remote), urlparse(remote[0][1]).netloc
        raise ValueError(
            f"Task '{task}' loads {fields} from NVIDIA's asset server ({host}), which needs Omniverse's client"
            " (omni.client), not part of this kitless install, and isaaclab_suspend.assets.asset_map has no local"
            " counterpart: give the task local USD files (a row of that map, or a cfg subclass: docs/your_task.rst)."
        )
    if missing:
        field, path = missing[0]
        raise ValueError(f"Task '{task}': {field} = '{path}' does not exist; point it at a USD file.")


def check_suspension_settings(cfg: ManagerBasedRLEnvCfg, task: str) -> None:
    """Refuse, before the env is built, a suspendable cfg whose physics settings suspension cannot freeze under
    (``suspension.newton_state.unsupported_solver_setting``) or whose :class:`SuspendCfg` holds a value the env
    cannot run with (``suspension.suspend_cfg.check_suspend_cfg``).

    Raises:
        ValueError: Naming the setting and the task.
    """
    suspend = getattr(cfg, "suspend", None)
    if isinstance(suspend, SuspendCfg):
        try:
            check_suspend_cfg(suspend)
        except ValueError as err:
            raise ValueError(f"Task '{task}': {err}") from None
    if isinstance(suspend, SuspendCfg) and suspend.enabled and suspend.freeze_solver_state:
        reason = unsupported_solver_setting(getattr(cfg.sim.physics, "solver_cfg", None))
        if reason is not None:
            raise ValueError(f"Task '{task}': {reason}")


def import_task_modules(modules: Sequence[str]) -> None:
    """Import modules that register gym task ids (e.g. another package's tasks).

    Raises:
        ValueError: If a module cannot be imported.
    """
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as err:
            hint = " (a cfg override after --import is read as a module: put it before --import)" if "=" in module else ""
            raise ValueError(f"Cannot import '{module}' ({err}); is it on PYTHONPATH?{hint}") from err


@contextlib.contextmanager
def open_env(
    task: str,
    num_envs: int | None = None,
    device: str = "cpu",
    overrides: Sequence[str] = (),
    suspendable: bool = False,
    cfg: ManagerBasedRLEnvCfg | None = None,
    verbose: bool = False,
    **attrs,
):
    """Create ``task`` inside ``launch_simulation`` and close it on exit. Yields the unwrapped env.

    The cfg is :func:`make_env_cfg` of the arguments (``attrs`` use ``__`` for nesting, e.g.
    ``suspend__enabled=False``), or ``cfg`` as it is (then give no other cfg argument). With ``suspendable`` the
    cfg runs in a :class:`~isaaclab_suspend.envs.SuspendableManagerBasedRLEnv` with suspension enabled, whatever
    the task's registered entry point (any ``ManagerBasedRLEnvCfg`` task, also of another package). Assets that
    cannot be opened here, settings that suspension cannot honour and deterministic physics that loses contacts
    raise first (:func:`check_local_assets`, :func:`check_suspension_settings`,
    :func:`~isaaclab_suspend.tasks.deterministic.check_deterministic_contacts`). An exception
    of the block is re-raised after ``launch_simulation`` has closed, which would otherwise print its traceback:
    a script that handles it (a lost policy server: exit status 2 and the reason) prints no traceback.

    Quiet unless ``verbose``: Isaac Lab's configuration and manager tables, its info and warning log and the Python
    warnings of the set-up, and the suspension manager's report of what it freezes are dropped, and MuJoCo-Warp's
    per-step linesearch notice is said once when the env closes (:mod:`isaaclab_suspend.solver_notices`).
    """
    task = resolve_task_id(task)
    if cfg is None:
        cfg = make_env_cfg(task, num_envs, device, overrides, suspendable, verbose=verbose, **attrs)
    elif num_envs is not None or overrides or attrs:
        raise TypeError("open_env takes either a ready cfg or num_envs, overrides and attrs to make one, not both.")
    check_local_assets(cfg, task)
    check_suspension_settings(cfg, task)
    check_deterministic_contacts(cfg, task)
    error = None
    with launch_simulation(cfg, {}), contextlib.nullcontext() if verbose else without_linesearch_notice():
        with quieted(not verbose):
            env = SuspendableManagerBasedRLEnv(cfg) if suspendable else gym.make(task, cfg=cfg).unwrapped
        try:
            yield env
        except Exception as err:  # re-raised below, unchanged
            error = err
        finally:
            if not verbose:
                say_linesearch_notice_once()
            env.close()
    if error is not None:
        raise error


class StopAfterStep:
    """Context manager for a step loop: a first Ctrl-C only sets ``requested``, so the loop can stop
    after its step instead of in the middle of a file write; a second one raises ``KeyboardInterrupt`` at once."""

    def __init__(self):
        self.requested = False

    def _handle(self, signum, frame) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True

    def __enter__(self) -> StopAfterStep:
        self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        signal.signal(signal.SIGINT, self._previous)
