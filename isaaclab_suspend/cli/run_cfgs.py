"""The scripts' flags as the library's run cfgs: ``eval.py``'s as an
:class:`~isaaclab_suspend.runs.EvaluationCfg`, ``record.py``'s as a :class:`~isaaclab_suspend.runs.RecordingCfg`
(the flags are the cfgs' fields), checked while parsing by the cfgs' own ``validate()`` (the rules live there once)."""

from __future__ import annotations

import argparse

from ..runs import EvaluationCfg, RecordingCfg
from ..runs.recording import check_chunks
from .distributed import is_other_rank
from .envs import env_cfg
from .policy import chunking_cfg, schedule_arg


def evaluation_cfg(args: argparse.Namespace) -> EvaluationCfg:
    """``eval.py``'s resolved arguments as an evaluation (the model: ``args.source``'s cfg; the arms compared:
    ``args.sources``')."""
    return EvaluationCfg(env=env_cfg(args), model=args.source.cfg,
                         models={name: source.cfg for name, source in getattr(args, "sources", {}).items()},
                         chunking=chunking_cfg(args).replace(schedule=None, observation_demand=True),
                         schedules=[schedule_arg(args, name) for name in args.schedules], latency=args.latency,
                         virtual_latency=args.virtual_latency,
                         steps=args.steps, episodes_per_env=args.episodes_per_env, record=args.record,
                         timeline_envs=args.timeline_envs, frames=bool(args.report),
                         show_progress=not (args.quiet or is_other_rank()), overwrite=args.overwrite)


def recording_cfg(args: argparse.Namespace) -> RecordingCfg:
    """``record.py``'s resolved arguments as a recording (the model: ``args.source``'s cfg, None for random)."""
    return RecordingCfg(env=env_cfg(args), model=None if args.source is None else args.source.cfg,
                        chunking=chunking_cfg(args), output=args.output, export=args.export, episodes=args.episodes,
                        episodes_per_env=args.episodes_per_env, max_steps=args.max_steps, writers=args.writers,
                        show_progress=not (args.quiet or is_other_rank()), overwrite=args.overwrite)


def check_run_cfg(parser: argparse.ArgumentParser, cfg: EvaluationCfg | RecordingCfg,
                  args: argparse.Namespace) -> None:
    """Stop the script with ``parser.error`` (one line, exit status 2) unless ``cfg.validate()`` accepts ``cfg``
    (its ``validate_config``) and the opened model's H (``args.source``, none for random actions) fits the env
    count: before any env is built."""
    try:
        cfg.validate()
        if args.source is not None:
            check_chunks(args.source.chunk_length, cfg.env.num_envs)
    except ValueError as err:
        parser.error(str(err))
