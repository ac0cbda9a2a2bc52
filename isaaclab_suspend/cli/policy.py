"""The policy every script runs: the policy arguments checked together and the one factory of the chunk model they
name (the arguments themselves: :func:`~.arguments.add_policy_args`).

``--policy`` picks the source; by default it follows from the other arguments (``--remote``: remote,
``--checkpoint``: bc, else the task's embedded planner):

========== ===================================================================== ====================
policy     chunk model                                                           H
========== ===================================================================== ====================
chunk      the task's embedded planner (its ``chunk_model_entry_point``)        ``--chunk`` (16)
bc         a chunk policy of ``scripts/train_chunk_policy.py`` (``--checkpoint``) the checkpoint's
           or a LeRobot ``pretrained_model`` directory of ``lerobot-train``      (``n_action_steps``)
remote     the policy served at ``--remote``: ``HOST:PORT`` of                  the server's (openpi:
           ``scripts/serve_policy.py``, ``openpi://HOST:PORT`` of an openpi     ``--chunk`` or the
           server (``--openpi_keys``, ``--prompt``), ``gr00t://HOST:PORT`` of   metadata's; GR00T: the
           a GR00T server (``--gr00t_keys``, ``--gr00t_form``, ``--prompt``,    action horizon or less)
           ``--gr00t_rtc``)
checkpoint an rsl_rl / skrl actor (``--checkpoint``, default the shipped expert)  1 (closed loop)
random     uniform actions in [-1, 1], no chunk model (``record.py``)           -
========== ===================================================================== ====================

Files and servers are opened while parsing, so a bad one stops the script before any env is built.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

import torch

from ..lerobot.policy import is_lerobot_checkpoint
from ..chunking import ActionChunkingPolicyCfg, LatencyCfg
from ..runs import (ChunkLengthError, ChunkModelSource, ChunkPolicyModelCfg, EmbeddedModelCfg, LeRobotModelCfg,
                    RandomPolicy, RlActorModelCfg, make_chunking_policy)
from ..serving import GR00T_SCHEME, OPENPI_SCHEME, remote_model_cfg
from ..tasks.env_factory import import_task_modules, resolve_task_id
from .errors import prog, user_errors
from .arguments import DEFAULT_CHUNK, DEFAULT_TASK

if TYPE_CHECKING:
    from ..envs import SuspendableManagerBasedRLEnv
    from ..chunking import ActionChunkingPolicy, ChunkModel
    from ..runs.chunk_models import ModelCfg


def resolve_policy(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Check the policy arguments together and open the policy's file or server (``parser.error`` on a problem).

    Sets ``args.policy``, ``args.source`` (the opened :class:`~isaaclab_suspend.runs.ChunkModelSource`, None for
    ``--policy random``), ``args.model`` (the loaded bc or remote model, else None), ``args.task`` and ``args.chunk``.
    """
    args.policy = args.policy or ("remote" if args.remote else "bc" if args.checkpoint else "chunk")
    if args.policy == "remote" and args.remote is None:
        parser.error("--policy remote needs --remote HOST:PORT (a server of scripts/serve_policy.py)")
    if args.remote is not None and args.policy != "remote":
        parser.error("--remote needs --policy remote")
    remote = args.remote or ""
    if args.openpi_keys and not remote.startswith(OPENPI_SCHEME):
        parser.error(f"--openpi_keys is an option of --remote {OPENPI_SCHEME}HOST:PORT")
    if (args.gr00t_keys or args.gr00t_form != "flat" or args.gr00t_rtc) and not remote.startswith(GR00T_SCHEME):
        parser.error(f"--gr00t_keys, --gr00t_form and --gr00t_rtc are options of --remote {GR00T_SCHEME}HOST:PORT")
    if args.prompt is not None and not remote.startswith((OPENPI_SCHEME, GR00T_SCHEME)):
        parser.error(f"--prompt is an option of --remote {OPENPI_SCHEME}HOST:PORT or {GR00T_SCHEME}HOST:PORT")
    if args.policy == "bc" and args.checkpoint is None:
        parser.error("--policy bc needs --checkpoint (a chunk policy checkpoint of scripts/train_chunk_policy.py)")
    if args.checkpoint is not None and args.policy not in ("bc", "checkpoint"):
        parser.error("--checkpoint needs --policy checkpoint or bc")
    if args.planner_cfg and args.policy != "chunk":
        parser.error("--planner_cfg is an option of --policy chunk (the task's embedded planner)")
    args.source = args.model = None
    latency = getattr(args, "latency", None)
    latency = LatencyCfg.parse(latency, virtual=args.virtual_latency) if latency else None
    keys_label = "--gr00t_keys" if remote.startswith(GR00T_SCHEME) else "--openpi_keys"
    try:
        with user_errors(RuntimeError):  # a file, server or task that fails: one line, no usage
            import_task_modules(args.modules)
            if args.policy == "random":
                args.task, args.chunk = resolve_task_id(args.task or DEFAULT_TASK), args.chunk or DEFAULT_CHUNK
                return
            args.source = ChunkModelSource(model_cfg(args), args.task, args.device, latency, keys_label, args.chunk)
    except ChunkLengthError as err:
        parser.error(f"--chunk {err.asked}: {err.reason}")
    args.model, args.task, args.chunk = args.source.model, args.source.task, args.source.chunk_length


def model_cfg(args: argparse.Namespace) -> ModelCfg:
    """The chunk-model cfg of the policy arguments (``--policy`` set, not ``random``)."""
    if args.policy == "chunk":
        return EmbeddedModelCfg(chunk_length=args.chunk, planner_overrides=list(args.planner_cfg))
    if args.policy == "checkpoint":
        return RlActorModelCfg(path=args.checkpoint, chunk_length=args.chunk)
    if args.policy == "bc":
        cfg_type = LeRobotModelCfg if is_lerobot_checkpoint(args.checkpoint) else ChunkPolicyModelCfg
        return cfg_type(path=args.checkpoint, chunk_length=args.chunk)
    return remote_model_cfg(args.remote, args.chunk, dict(args.gr00t_keys or args.openpi_keys or ()), args.prompt,
                            args.gr00t_form, args.gr00t_rtc)


def chunking_cfg(args: argparse.Namespace) -> ActionChunkingPolicyCfg:
    """The chunking policy's cfg of the policy arguments (``--schedule --aggregator --refill_threshold
    --overlap_steps``, ``--log_dir`` where the script has it)."""
    return ActionChunkingPolicyCfg(schedule=args.schedule, aggregator=args.aggregator,
                                   refill_threshold=args.refill_threshold, overlap_steps=args.overlap_steps,
                                   log_dir=getattr(args, "log_dir", None))


def resolve_task(args: argparse.Namespace, default: str | None = DEFAULT_TASK) -> None:
    """Import ``args.modules`` (``--import``), then set ``args.task`` (``default`` when not given; left None if both
    are) to the registered id it names (:func:`~isaaclab_suspend.tasks.env_factory.resolve_task_id`). A module that does not
    import or an unknown task ends the script with one line and exit status 2."""
    with user_errors():
        import_task_modules(args.modules)
        if args.task or default:
            args.task = resolve_task_id(args.task or default)


def warn(text: str) -> None:
    """A script's warning line on stderr."""
    print(f"{prog()}: warning: {text}", file=sys.stderr)


def make_chunk_model(args: argparse.Namespace, env: SuspendableManagerBasedRLEnv) -> ChunkModel | None:
    """The chunk model of the resolved ``args`` for ``env`` (:meth:`~isaaclab_suspend.runs.ChunkModelSource.make`);
    None for ``--policy random`` (no model).

    Raises:
        ValueError: If the policy does not fit the env (another task, other dims, observation paths it lacks).
    """
    return None if args.source is None else args.source.make(env, warn)


def describe_policy(args: argparse.Namespace) -> str:
    """The policy of the resolved ``args`` in a few words, for the scripts' reports."""
    return "random actions" if args.source is None else args.source.describe()


def describe_run(args: argparse.Namespace, steps: int | None = None) -> str:
    """The header of a run's report: task, policy, envs, steps, chunk length, seed, shard, desync, latency."""
    from .sharding import describe_shard

    latency = f", latency {args.latency}{' (virtual)' if args.virtual_latency else ''}" if args.latency else ""
    desync = ", desynchronised episodes" if args.desync else ""
    length = f" {steps} steps," if steps else ""
    return (f"{args.task}, {describe_policy(args)}: {args.num_envs} envs,{length} H = {args.chunk},"
            f" seed {args.seed}{describe_shard(args)}{desync}{latency}")


def make_policy(args: argparse.Namespace, env: SuspendableManagerBasedRLEnv, schedule: str | None = None,
                generator: torch.Generator | None = None) -> ActionChunkingPolicy | RandomPolicy:
    """The step policy of the resolved ``args`` on ``env``: :class:`~isaaclab_suspend.runs.RandomPolicy` for
    ``--policy random``, else the chunking policy of ``args.source`` under ``schedule`` (default
    ``args.schedule``)."""
    if args.source is None:
        return RandomPolicy(env, generator)
    return make_chunking_policy(chunking_cfg(args), args.source, env, schedule or args.schedule)
