"""The env arguments (``--task --num_envs --device --seed --presets``, overrides, ``--desync``, random streams,
``--deterministic``, ``--quiet`` / ``--verbose``) as a :class:`~isaaclab_suspend.runs.RunEnvCfg`, and the env
opened with the scripts' error lines."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from ..recording import SuspendableRecorderManager
from ..runs import RunEnvCfg, open_run_env
from ..tasks.deterministic import cost_line
from .arguments import env_overrides
from .errors import user_errors

if TYPE_CHECKING:
    from ..envs import SuspendableManagerBasedRLEnv


def env_cfg(args: argparse.Namespace) -> RunEnvCfg:
    """The env of the env arguments; a script with ``--verbose`` prints the env's set-up output only with it."""
    verbose = not getattr(args, "quiet", False) and getattr(args, "verbose", True)
    return RunEnvCfg(task=args.task, num_envs=args.num_envs, device=args.device, seed=args.seed,
                     overrides=env_overrides(args), per_env_random=getattr(args, "per_env_random", False),
                     deterministic=getattr(args, "deterministic", "off"), desync=getattr(args, "desync", False),
                     verbose=verbose)


def env_opener(*errors: type[BaseException], quiet: bool = False) -> Callable:
    """:func:`open_env` of a :class:`~isaaclab_suspend.runs.RunEnvCfg`, for the library's runs (``open_env=``)."""
    return lambda cfg: open_env(cfg, *errors, quiet=quiet)


@contextlib.contextmanager
def open_env(args: argparse.Namespace | RunEnvCfg, *errors: type[BaseException], quiet: bool | None = None,
             **attrs) -> Iterator[SuspendableManagerBasedRLEnv]:
    """:func:`~isaaclab_suspend.runs.open_run_env` of the env arguments (:func:`env_cfg`) or of a cfg; ``attrs``
    set more fields of the task cfg. Unless ``quiet`` (default: ``args.quiet``), an env with deterministic physics
    on prints one line with its contact self-check and its cost
    (:func:`~isaaclab_suspend.tasks.deterministic.cost_line`).

    User errors (and ``errors``) raised in the block end the script with one line and exit status 2, without the
    traceback that ``launch_simulation`` would print. Once the env records (a dataset recorder, e.g. attached by
    :meth:`~isaaclab_suspend.envs.SuspendableManagerBasedRLEnv.start_recording` after the policy was checked) the
    line also says where the episodes exported before the error are kept (closing the env still hands them to the
    file).
    """
    cfg = args if isinstance(args, RunEnvCfg) else env_cfg(args)
    quiet = getattr(args, "quiet", False) if quiet is None else quiet
    with open_run_env(cfg, **attrs) as env:
        if not quiet and (line := cost_line(env.cfg)) is not None:
            print(line)
        with user_errors(*errors, note=lambda: _kept_note(env)):
            yield env


def _kept_note(env: SuspendableManagerBasedRLEnv) -> str | None:
    """Where a recording's exported episodes are kept, for an error line; None while the env writes no dataset."""
    recorder = getattr(env, "recorder_manager", None)
    paths = recorder.dataset_file_paths if isinstance(recorder, SuspendableRecorderManager) else []
    if not paths:
        return None
    return f"The episodes exported so far are kept in {', '.join(paths)}; open episodes were dropped."
