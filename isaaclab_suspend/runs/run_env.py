"""The env of a run: the task and how it is opened (envs, device, seed, Hydra overrides, random streams,
reproducible physics), and the ledger that counts its episodes."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from isaaclab.utils import configclass

from .episode_ledger import EpisodeLedger
from ..devices import check_device
from ..names import DETERMINISM, MAX_SEED
from ..tasks.env_factory import make_env_cfg, open_env

if TYPE_CHECKING:
    from ..envs import SuspendableManagerBasedRLEnv


@configclass
class RunEnvCfg:
    """The env a run opens, kitless, with :func:`~isaaclab_suspend.tasks.env_factory.open_env`."""

    task: str | None = None
    """Registered gym id (None: the model's task, else Cartpole)."""
    num_envs: int = 16
    """Parallel envs."""
    device: str = "cpu"
    """Simulation and policy device."""
    seed: int | None = 42
    """Env (and policy) seed, in [0, 2**32); None: the task cfg's own."""
    overrides: list[str] = []
    """Hydra overrides of the task cfg, as Isaac Lab's scripts take them (``env.KEY=VALUE``, ``presets=NAME``)."""
    per_env_random: bool = True
    """Each env draws from its own random stream (:attr:`~isaaclab_suspend.suspension.SuspendCfg.per_env_random`)."""
    deterministic: str = "off"
    """Isaac Lab's reproducible physics: ``auto`` (on a CUDA device), ``on`` or ``off``."""
    desync: bool = False
    """Start every env at a random point of its episode, so episodes end at different steps; these first
    episodes, cut short, are not counted."""
    verbose: bool = False
    """Print Isaac Lab's set-up tables and the suspension manager's report."""

    def validate_config(self) -> None:
        """Check the fields' types and ranges, before any env is built: Isaac Lab's ``validate()`` of this cfg, or
        of a run cfg holding it, calls this (a run calls it first).

        Raises:
            ValueError: One line naming the field, its value and what it must be.
        """
        check_int("RunEnvCfg.num_envs", self.num_envs, 1)
        if self.seed is not None:  # None is the task cfg's seed; no negative seed means "random"
            check_int("RunEnvCfg.seed", self.seed, 0, MAX_SEED)
        check_device(self.device)
        if self.deterministic not in DETERMINISM:
            raise ValueError(f"RunEnvCfg.deterministic must be one of {list(DETERMINISM)}, got {self.deterministic!r}.")
        if self.task is not None and not isinstance(self.task, str):
            raise ValueError(f"RunEnvCfg.task must be a registered gym id or None, got {self.task!r}.")
        if not isinstance(self.overrides, (list, tuple)) or not all(isinstance(o, str) for o in self.overrides):
            raise ValueError(f"RunEnvCfg.overrides must be a list of 'env.KEY=VALUE' texts, got {self.overrides!r}.")


def check_int(name: str, value: object, low: int, high: int | None = None) -> None:
    """Raise a one-line ``ValueError`` unless ``value`` is an int (not a bool) in ``[low, high]``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        bound = f"in [{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be an integer {bound}, got {value!r}.")


@contextlib.contextmanager
def open_run_env(cfg: RunEnvCfg, **attrs) -> Iterator[SuspendableManagerBasedRLEnv]:
    """Open ``cfg``'s env (``cfg.task`` must be set) and close it on exit; ``attrs`` set more fields of the task
    cfg (``__`` for nesting, as :func:`~isaaclab_suspend.tasks.env_factory.make_env_cfg` takes them)."""
    env_cfg = make_env_cfg(cfg.task, cfg.num_envs, cfg.device, cfg.overrides, deterministic=cfg.deterministic,
                           verbose=cfg.verbose, **attrs)
    if cfg.seed is not None:
        env_cfg.seed = cfg.seed
    if cfg.per_env_random:
        env_cfg.suspend.per_env_random = True
    with open_env(cfg.task, cfg=env_cfg, verbose=cfg.verbose) as env:
        yield env


def make_ledger(cfg: RunEnvCfg, env: SuspendableManagerBasedRLEnv, policy, per_env: int | None = None,
                total: int | None = None, export: str | None = None) -> EpisodeLedger:
    """The ledger of a run of ``policy`` (whose ``retire`` takes envs out; else they are suspended): a quota of
    ``per_env`` episodes from every env or ``total`` episodes (successes only if ``export`` is ``succeeded``),
    the first episodes counted unless ``cfg.desync``; when recording (``export``), episodes that do not count are
    not written and each record names its demo."""
    return EpisodeLedger(env, per_env=per_env, total=total, count_first=not cfg.desync,
                         only_successes=export == "succeeded" and total is not None,
                         retire=getattr(policy, "retire", env.suspend_envs),
                         discard=getattr(env.recorder_manager, "discard_open_episodes", None), export=export,
                         seed=cfg.seed)
