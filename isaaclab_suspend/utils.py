"""Helpers for scripts: create the project's envs the standard Isaac Lab way (kitless, Newton), stop on Ctrl-C."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Sequence
from typing import TYPE_CHECKING

import gymnasium as gym

from isaaclab.app.sim_launcher import launch_simulation

import isaaclab_suspend.tasks  # noqa: F401  (registers the gym ids)
from isaaclab_tasks.utils import parse_env_cfg

if TYPE_CHECKING:
    from isaaclab.envs import ManagerBasedRLEnvCfg


def make_env_cfg(task: str, num_envs: int, device: str = "cpu", overrides: Sequence[str] = (), **attrs):
    """``parse_env_cfg`` for ``task`` with ``num_envs`` envs; ``attrs`` set dotted cfg fields (e.g. ``seed=3``).

    Raises:
        ValueError: If ``task`` is not a registered gym id.
    """
    if task not in gym.registry:
        known = sorted(k for k in gym.registry if k.endswith("-Suspendable"))
        raise ValueError(f"Unknown task '{task}'. Registered suspendable tasks: {known}.")
    cfg = parse_env_cfg(task, device=device, num_envs=num_envs, overrides=list(overrides))
    for dotted, value in attrs.items():
        owner = cfg
        *path, leaf = dotted.split("__")
        for part in path:
            owner = getattr(owner, part)
        setattr(owner, leaf, value)
    return cfg


@contextlib.contextmanager
def open_env(task: str, num_envs: int | None = None, device: str = "cpu", overrides: Sequence[str] = (),
             cfg: ManagerBasedRLEnvCfg | None = None, **attrs):
    """Create ``task`` inside ``launch_simulation`` and close it on exit. Yields the unwrapped env.

    The cfg is :func:`make_env_cfg` of the arguments (``attrs`` use ``__`` for nesting, e.g.
    ``suspend__enabled=False``), or ``cfg`` as it is (then give no other cfg argument).
    """
    if cfg is None:
        cfg = make_env_cfg(task, num_envs, device, overrides, **attrs)
    elif num_envs is not None or overrides or attrs:
        raise TypeError("open_env takes either a ready cfg or num_envs, overrides and attrs to make one, not both.")
    with launch_simulation(cfg, {}):
        env = gym.make(task, cfg=cfg)
        try:
            yield env.unwrapped
        finally:
            env.close()


class StopAfterStep:
    """Context manager for a step loop: a first Ctrl-C only sets :attr:`requested`, so the loop can stop
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
