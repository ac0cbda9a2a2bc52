"""Which episodes a script counts: ``--episodes_per_env`` (the same number from every env), the run's
:class:`~isaaclab_suspend.runs.EpisodeLedger` and ``--episode_log`` (one JSON line per counted episode); the
arguments: :func:`~.arguments.add_episode_args`."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .. import runs
from ..runs import EpisodeLedger
from ..runs.outputs import check_output, check_writable, new_file
from ..chunking.stats import format_figure
from .envs import env_cfg

if TYPE_CHECKING:
    from ..envs import SuspendableManagerBasedRLEnv


def apply_episode_args(parser: argparse.ArgumentParser, args: argparse.Namespace, other: str, default: int) -> None:
    """Check ``--episodes_per_env`` against the argument ``other`` that also ends the run (``steps``,
    ``episodes``), which gets ``default`` when neither is given, and ``--episode_log`` (``parser.error``)."""
    if args.episodes_per_env is not None and getattr(args, other) is not None:
        parser.error(f"--episodes_per_env and --{other} both say when the run ends: give one of them")
    if args.episodes_per_env is None and getattr(args, other) is None:
        setattr(args, other, default)
    if args.episode_log:
        try:
            args.episode_log = check_writable(args.episode_log, "--episode_log")
        except ValueError as err:
            parser.error(str(err))


def check_episode_logs(parser: argparse.ArgumentParser, args: argparse.Namespace, suffixes: Sequence[str] = ("",)
                       ) -> None:
    """Stop the script with ``parser.error`` unless each file of ``--episode_log`` (one per suffix, as
    :func:`write_episode_log` names it; the shard's once sharded) is new or ``--overwrite`` is given."""
    try:
        for suffix in suffixes if args.episode_log else ():
            check_output(episode_log_path(args.episode_log, suffix), args.overwrite, "--episode_log", "--overwrite")
    except ValueError as err:
        parser.error(str(err))


def make_ledger(args: argparse.Namespace, env: SuspendableManagerBasedRLEnv, policy, total: int | None = None,
                export: str | None = None) -> EpisodeLedger:
    """:func:`~isaaclab_suspend.runs.make_ledger` of the env arguments and ``--episodes_per_env``."""
    return runs.make_ledger(env_cfg(args), env, policy, per_env=args.episodes_per_env, total=total, export=export)


def log_episodes(path: str | None, records: list[dict], suffix: str = "", overwrite: bool = False) -> None:
    """Write ``records`` to the ``--episode_log`` ``path`` (with ``suffix``, see :func:`write_episode_log`) if
    given, and say where."""
    if path:
        print(f"Episode log: {write_episode_log(path, records, suffix, overwrite)}")


def describe_scoring(args: argparse.Namespace, finished: bool = True) -> str:
    """Which episodes the figures of a run are of, in a few words; ``finished`` False: the run stopped before its
    quota or total ended (``--max_steps``), so they are those that ended by then."""
    first = "; the first episode of each env started at a random point, so it is not scored" if args.desync else ""
    if not finished:
        return (f"those that ended before --max_steps {args.max_steps} stopped the run, NOT the"
                f" {args.episodes or args.episodes_per_env * args.num_envs} asked for: the figures lean toward the"
                f" shorter episodes{first}")
    if args.episodes_per_env:
        return f"{args.episodes_per_env} from every env{first}"
    if getattr(args, "episodes", None):
        return f"the first {args.episodes} to start in the run{first}"
    return f"those that started and ended in the run{first}"


def episode_log_path(path: str, suffix: str = "") -> str:
    """The episode log ``path`` of a run's part (``<stem><suffix><ext>`` with a ``suffix``), absolute."""
    stem, ext = os.path.splitext(os.path.abspath(path))
    return f"{stem}{suffix}{ext}"


def write_episode_log(path: str, records: list[dict], suffix: str = "", overwrite: bool = False) -> str:
    """Write ``records`` as JSON lines to ``path`` (``<stem><suffix><ext>`` with a ``suffix``), whole, replacing a
    file there only with ``overwrite`` (:func:`~isaaclab_suspend.runs.outputs.new_file`); returns the path."""
    path = episode_log_path(path, suffix)
    with new_file(path, overwrite, "--episode_log") as file:
        file.writelines(json.dumps(record) + "\n" for record in records)
    return path


def recording_summary(args: argparse.Namespace, written: int, steps: int, seconds: float, figures: dict,
                      finished: bool = True) -> str:
    """The closing line of a recording run: task, policy, steps and rate, episodes written (``finished`` False:
    fewer than asked for, see :func:`describe_scoring`) and their figures."""
    from .policy import describe_policy
    from .sharding import describe_shard

    chunks = f" ({args.schedule}, H = {args.chunk})" if args.policy != "random" else ""
    return (f"\n{args.task}{describe_shard(args)}: {args.num_envs} envs, {describe_policy(args)}{chunks}, {steps} steps"
            f" in {seconds:.1f} s ({steps * args.num_envs / max(seconds, 1e-9):.0f} env-steps/s). {written} episodes"
            f" written ({describe_scoring(args, finished)}), open ones dropped; success rate"
            f" {format_figure('{:.3f}', figures['success_rate'])}, mean length"
            f" {format_figure('{:.1f}', figures['mean_episode_length'])} steps.")
