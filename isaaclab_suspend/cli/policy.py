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
import os
import sys
from typing import TYPE_CHECKING

import torch

from ..learning import load_chunk_policy
from ..policies import ActionChunkingPolicy, LatencyCfg, LatencyEmulator
from ..serving import GR00T_SCHEME, OPENPI_SCHEME, connect_remote
from ..serving.common import check_observation_paths
from ..tasks.embedded import make_default_model, tasks_with_chunk_model
from ..rl import load_checkpoint_policy
from ..rl.checkpoint_policy import read_checkpoint, shipped_checkpoint
from ..tasks.env_factory import import_task_modules, quieted, resolve_task_id
from .errors import prog, user_errors
from .arguments import DEFAULT_CHUNK, DEFAULT_TASK

if TYPE_CHECKING:
    from ..envs import SuspendableManagerBasedRLEnv
    from ..policies import ChunkModel


def resolve_policy(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Check the policy arguments together and open the policy's file or server (``parser.error`` on a problem).

    Sets ``args.policy``, ``args.model`` (the loaded bc or remote model, else None), ``args.task`` and
    ``args.chunk`` (the policy's H where it has one).
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
    args.model = None
    with user_errors(RuntimeError):  # a file, server or task that fails: one line, no usage
        import_task_modules(args.modules)
        if args.policy == "bc":
            args.model = load_chunk_policy(args.checkpoint, args.device)
            args.task = args.task or args.model.task or None
        elif args.policy == "remote":
            keys = dict(args.gr00t_keys or args.openpi_keys or ())
            args.model = connect_remote(args.remote, args.chunk, keys, args.prompt, args.gr00t_form, args.gr00t_rtc)
            args.task = args.task or args.model.metadata.get("task")
        args.task = resolve_task_id(args.task or DEFAULT_TASK)
        if args.policy == "checkpoint":
            args.checkpoint = args.checkpoint or shipped_checkpoint(args.task)
            read_checkpoint(args.checkpoint)  # a bad file stops the script before an env or output file exists
        if args.policy == "chunk" and args.task not in tasks_with_chunk_model():
            raise ValueError(f"task '{args.task}' has no embedded chunk model; tasks with one:"
                             f" {tasks_with_chunk_model()}")
        if args.policy == "chunk":  # a planner override that does not fit fails before the env is built
            make_default_model(args.task, args.chunk or DEFAULT_CHUNK, args.planner_cfg)
    planned = 1 if args.policy == "checkpoint" else getattr(args.model, "chunk_length", None)
    if planned is not None:
        shorten = getattr(args.model, "set_chunk_length", None)  # a LeRobot policy may execute fewer than it plans
        if args.chunk is not None and args.chunk != planned:
            if shorten is None:
                parser.error(f"--chunk {args.chunk}: the {args.policy} policy '{args.checkpoint or args.remote}'"
                             f" plans {planned} actions per chunk")
            try:
                shorten(args.chunk)
            except ValueError as err:
                parser.error(f"--chunk {args.chunk}: {err}")
        args.chunk = args.chunk or planned
    args.chunk = args.chunk or DEFAULT_CHUNK


def resolve_task(args: argparse.Namespace, default: str | None = DEFAULT_TASK) -> None:
    """Import ``args.modules`` (``--import``), then set ``args.task`` (``default`` when not given; left None if both
    are) to the registered id it names (:func:`~isaaclab_suspend.tasks.env_factory.resolve_task_id`). A module that does not
    import or an unknown task ends the script with one line and exit status 2."""
    with user_errors():
        import_task_modules(args.modules)
        if args.task or default:
            args.task = resolve_task_id(args.task or default)


def make_chunk_model(args: argparse.Namespace, env: SuspendableManagerBasedRLEnv) -> ChunkModel | None:
    """The chunk model that the resolved ``args`` name, checked against ``env``, with the emulated latency if any.

    Returns None for ``--policy random`` (no model).

    Raises:
        ValueError: If the policy does not fit the env (another task, other dims, observation paths it lacks).
    """
    if args.policy == "random":
        return None
    if args.policy == "chunk":
        model = make_default_model(args.task, args.chunk, getattr(args, "planner_cfg", ()))
    elif args.policy == "checkpoint":
        with quieted():  # Isaac Lab's and rsl_rl's lines about the agent cfg
            model = load_checkpoint_policy(args.checkpoint, env, task=args.task)
    else:
        model = args.model
    for option in ("--gr00t_keys", "--openpi_keys"):  # paths the env lacks would fail at the first call
        check_observation_paths(env, dict(getattr(args, option[2:], None) or ()), option)
    check_env = getattr(model, "check_env", None)  # optional in the ChunkModel contract
    if check_env is not None:
        check_env(env)
    chunk_warning = getattr(model, "chunk_warning", None)  # a LeRobot policy's H against the episodes
    if chunk_warning is not None and (text := chunk_warning(env)):
        print(f"{prog()}: warning: {text}", file=sys.stderr)
    if getattr(args, "latency", None):
        model = LatencyEmulator(model, LatencyCfg.parse(args.latency, virtual=args.virtual_latency))
    return model


def describe_policy(args: argparse.Namespace) -> str:
    """The policy of the resolved ``args`` in a few words, for the scripts' reports."""
    overrides = getattr(args, "planner_cfg", None)
    planner = f"embedded model with {', '.join(overrides)}" if overrides else "embedded model"
    return {"chunk": planner, "bc": f"chunk policy {args.checkpoint}",
            "remote": f"remote policy {args.remote}", "checkpoint": f"checkpoint {args.checkpoint}",
            "random": "random actions"}[args.policy]


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
    """The step policy of the resolved ``args`` on ``env``: :class:`RandomPolicy` for ``--policy random``, else an
    :class:`ActionChunkingPolicy` around :func:`make_chunk_model` under ``schedule`` (default ``args.schedule``),
    with TensorBoard logs in ``<args.log_dir>/<schedule>`` where the script has ``--log_dir``."""
    model = make_chunk_model(args, env)
    if model is None:
        return RandomPolicy(env, generator)
    schedule = schedule or args.schedule
    log_dir = getattr(args, "log_dir", None)
    return ActionChunkingPolicy(model, env, chunk_length=args.chunk, schedule=schedule, aggregator=args.aggregator,
                                refill_threshold=args.refill_threshold, overlap_steps=args.overlap_steps,
                                log_dir=os.path.join(log_dir, schedule) if log_dir else None)


class RandomPolicy:
    """Uniform actions in [-1, 1] from a seeded generator, as a policy of the rollout loop (``record.py``)."""

    def __init__(self, env: SuspendableManagerBasedRLEnv, generator: torch.Generator):
        self.env = env
        self.generator = generator

    def act(self, obs: dict) -> torch.Tensor:
        """Shape: (num_envs, action_dim)."""
        shape = (self.env.num_envs, self.env.action_manager.total_action_dim)
        return 2.0 * torch.rand(shape, generator=self.generator, device=self.env.device) - 1.0

    def observe(self, dones: torch.Tensor) -> None:
        """Nothing to drop."""


class ConstantPolicy:
    """The same action in every env at every step (0: do nothing; 1: push all the time), as a policy of the rollout
    loop: a baseline that a task's success criterion must not credit (docs/chunking.rst)."""

    def __init__(self, env: SuspendableManagerBasedRLEnv, value: float):
        self.env = env
        self.value = value

    def act(self, obs: dict) -> torch.Tensor:
        """Shape: (num_envs, action_dim); a new tensor each step."""
        shape = (self.env.num_envs, self.env.action_manager.total_action_dim)
        return torch.full(shape, self.value, device=self.env.device)

    def observe(self, dones: torch.Tensor) -> None:
        """Nothing to drop."""


class HoldPosePolicy(ConstantPolicy):
    """Joint targets = the joints' positions now (the ``policy`` term ``term``): an arm that stays where it starts,
    a baseline of joint-target tasks (the SO-101 follower's action space)."""

    def __init__(self, env: SuspendableManagerBasedRLEnv, term: str):
        super().__init__(env, 0.0)
        self.term = term

    def act(self, obs: dict) -> torch.Tensor:
        """Shape: (num_envs, action_dim); a new tensor each step."""
        return obs["policy"][self.term].clone()
