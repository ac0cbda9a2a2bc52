"""The policy every script runs: the model arguments read into a chunk-model source cfg, opened, and the one
factory of the chunk model (the arguments themselves: :func:`~.arguments.add_model_args`).

``--model NAME`` picks a registered source (:data:`~isaaclab_suspend.chunking.sources.SOURCES`) and
``--model.FIELD VALUE`` sets its cfg's fields; ``--checkpoint PATH`` and ``--remote ADDRESS`` infer the source
(:func:`~isaaclab_suspend.runs.chunk_models.infer_model_cfg`, :func:`~isaaclab_suspend.serving.parse_address`).
Files and servers are opened while parsing, so a bad one stops the script before any env is built. The flags of
0.3 (``--policy``, ``--chunk``, ``--planner_cfg``, ``--openpi_keys``, ``--gr00t_keys``, ``--gr00t_form``,
``--gr00t_rtc``, ``--prompt``) still parse, each with a deprecation line, until 0.5.0.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import typing
from typing import TYPE_CHECKING

from ..chunking import ActionChunkingPolicyCfg, LatencyCfg, RtcScheduleCfg
from ..chunking.sources import SOURCES, ChunkModelCfg
from ..names import DEFAULT_CHUNK, DEFAULT_TASK
from ..runs import ChunkLengthError, ChunkModelSource
from ..runs.chunk_models import infer_model_cfg
from ..serving import parse_address
from ..tasks.env_factory import import_task_modules, resolve_task_id
from .errors import prog, user_errors

if TYPE_CHECKING:
    from ..chunking import ChunkModel
    from ..envs import SuspendableManagerBasedRLEnv

OLD_FLAGS = {"chunk": "chunk_length", "planner_cfg": "planner_overrides", "openpi_keys": "keys", "gr00t_keys": "keys",
             "gr00t_form": "form", "gr00t_rtc": "rtc_options", "prompt": "prompt"}
"""Each 0.3 flag and the model cfg field it set (``--model.FIELD``)."""
OLD_POLICIES = {"chunk": "embedded", "checkpoint": "rl_actor", "random": "random"}
"""Each 0.3 ``--policy`` and the ``--model`` it is (``bc`` and ``remote``: inferred from the file or address)."""
ARM_NAMES = "ABCDEFGH"
"""The names of the arms of a comparison, in the order they are given (at most this many)."""


def arm_specs(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[dict]:
    """``eval.py``'s models to compare, in order: each ``--checkpoint``, each ``--remote``, then each item
    ``NAME[:FIELD=VALUE...]`` of ``--models``; each as ``{model, checkpoint, remote, fields}`` (``fields``: its own
    ``(FIELD, VALUE)`` pairs). ``parser.error`` on a malformed item or too many arms."""
    specs = [{"model": args.model, "checkpoint": path, "remote": None, "fields": []} for path in args.checkpoint or []]
    specs += [{"model": args.model, "checkpoint": None, "remote": a, "fields": []} for a in args.remote or []]
    for item in (args.models.split(",") if args.models else []):
        name, *pairs = item.strip().split(":")
        fields = [pair.partition("=")[::2] for pair in pairs]
        if not name or any(not f.isidentifier() or not v for f, v in fields):
            parser.error(f"--models item '{item}': expected NAME or NAME:FIELD=VALUE[:FIELD=VALUE...]")
        specs.append({"model": name, "checkpoint": None, "remote": None, "fields": fields})
    if args.models and args.model:
        parser.error("--models names each arm's model: leave --model out")
    if len(specs) > len(ARM_NAMES):
        parser.error(f"{len(specs)} models to compare: at most {len(ARM_NAMES)}")
    return specs


def arm_names(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    """The names of ``eval.py``'s arms (``arm_specs``), none for a single model. With arms and neither ``--steps``
    nor ``--episodes_per_env``, every env scores 2 episodes: the arms score the same (env, episode) grid, paired."""
    specs = arm_specs(parser, args)
    if len(specs) > 1 and args.episodes_per_env is None and args.steps is None:
        args.episodes_per_env = 2
    return list(ARM_NAMES[: len(specs)]) if len(specs) > 1 else []


def resolve_arms(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """:func:`resolve_policy` for each of ``eval.py``'s models (``arm_specs``): sets ``args.sources`` (each
    arm's opened source by name, ``{}`` for one model) and, from the first arm, what :func:`resolve_policy` sets.
    ``parser.error`` if an arm is ``random`` or the arms run on different tasks."""
    specs = arm_specs(parser, args)
    if len(specs) <= 1:
        spec = specs[0] if specs else {"model": args.model, "checkpoint": None, "remote": None, "fields": []}
        args.model, args.checkpoint, args.remote = spec["model"], spec["checkpoint"], spec["remote"]
        args.model_fields = [*getattr(args, "model_fields", []), *spec["fields"]]
        args.sources = {}
        resolve_policy(parser, args)
        return
    args.sources = {}
    for name, spec in zip(ARM_NAMES, specs):
        arm = argparse.Namespace(**{**vars(args), "model": spec["model"], "checkpoint": spec["checkpoint"],
                                    "remote": spec["remote"],
                                    "model_fields": [*getattr(args, "model_fields", []), *spec["fields"]]})
        resolve_policy(parser, arm)
        if arm.source is None:
            parser.error(f"arm {name}: --model random has no chunk model to compare")
        args.sources[name] = arm.source
    tasks = {source.task for source in args.sources.values()}
    if len(tasks) > 1:
        parser.error(f"the models to compare run on different tasks ({', '.join(sorted(tasks))}): give --task")
    first = args.sources[ARM_NAMES[0]]
    args.source, args.model, args.task, args.chunk = first, first.model, first.task, first.chunk_length
    args.checkpoint = [s["checkpoint"] for s in specs if s["checkpoint"]] or None  # what the script reads of them
    args.remote = [s["remote"] for s in specs if s["remote"]] or None


def resolve_policy(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Read the model arguments into a source cfg and open it (``parser.error`` on a problem).

    Sets ``args.source`` (the opened :class:`~isaaclab_suspend.runs.ChunkModelSource`, None for ``--model
    random``), ``args.model`` (the model opened once for every env, else None), ``args.task`` and ``args.chunk``
    (H).
    """
    latency = getattr(args, "latency", None)
    latency = LatencyCfg.parse(latency, virtual=args.virtual_latency) if latency else None
    with user_errors(RuntimeError):  # a file, server or task that fails: one line, no usage
        import_task_modules(args.modules)
        cfg = model_cfg(parser, args)
        args.source = args.model = None
        if cfg is None:  # --model random
            args.task, args.chunk = resolve_task_id(args.task or DEFAULT_TASK), DEFAULT_CHUNK
            return
        try:
            args.source = ChunkModelSource(cfg, args.task, args.device, latency, keys_label="--model.keys")
        except ChunkLengthError as err:
            parser.error(f"--model.chunk_length {err.asked}: {err.reason}")
    args.model, args.task, args.chunk = args.source.model, args.source.task, args.source.chunk_length


def model_cfg(parser: argparse.ArgumentParser, args: argparse.Namespace) -> ChunkModelCfg | None:
    """The source cfg the model arguments name (None: ``--model random``), its fields set; a 0.3 flag prints its
    deprecation line. ``parser.error`` if the name, a field or a value is refused."""
    fields = list(getattr(args, "model_fields", []))
    name = args.model
    if args.policy is not None:
        new = OLD_POLICIES.get(args.policy)
        deprecated(f"--policy {args.policy}", f"--model {new}" if new else "--checkpoint PATH or --remote ADDRESS"
                                                                            " alone (the model is inferred)")
        name = name or new
        needs = {"remote": ("--remote ADDRESS", args.remote), "bc": ("--checkpoint PATH", args.checkpoint)}
        if args.policy in needs and needs[args.policy][1] is None:
            parser.error(f"--policy {args.policy} needs {needs[args.policy][0]}")
    for flag, field in OLD_FLAGS.items():
        value = getattr(args, flag, None)
        if value not in (None, [], False):
            deprecated(f"--{flag}", f"--model.{field}")
            values = value if isinstance(value, list) else [value]
            fields += [(field, v) for v in values]
    if name == "random":
        if fields or args.checkpoint or args.remote:
            parser.error("--model random takes no model fields, --checkpoint or --remote")
        return None
    if args.remote is not None and args.checkpoint is not None:
        parser.error("--remote and --checkpoint both name the model: pass one")
    if name is not None and name not in SOURCES:
        parser.error(f"--model {name}: no such chunk-model source; the sources are {', '.join(sorted(SOURCES))}")
    if args.remote is not None:
        cfg = parse_address(args.remote)
        if name not in (None, cfg.source_name):
            parser.error(f"--remote names a {cfg.source_name} server, not --model {name}")
    elif args.checkpoint is not None:
        with user_errors():
            cfg = SOURCES[name](path=args.checkpoint) if name else infer_model_cfg(args.checkpoint)
    else:
        cfg = SOURCES[name or "embedded"]()
    try:
        set_fields(cfg, fields)
    except ValueError as err:
        parser.error(str(err))
    return cfg


def set_fields(cfg: ChunkModelCfg, fields: list[tuple[str, object]]) -> None:
    """Set ``cfg``'s fields from ``(FIELD, VALUE)`` pairs, a text value read as the field's type: a list field
    gathers its values, a key map ``KEY=VALUE`` pairs, a bool ``true``/``false``; an optional field ``none``.

    Raises:
        ValueError: If a field is not one of ``cfg``'s or a value does not read as its type.
    """
    hints = typing.get_type_hints(type(cfg))
    names = [f.name for f in dataclasses.fields(cfg) if f.name != "class_type"]
    gathered: dict[str, object] = {}
    for field, value in fields:
        if field not in names:
            others = sorted(n for n, t in SOURCES.items() if field in {f.name for f in dataclasses.fields(t)})
            raise ValueError(f"--model.{field}: not a field of the {cfg.source_name} source ({type(cfg).__name__});"
                             f" its fields are {', '.join(names)}"
                             + (f"; it is a field of the {' and '.join(others)} sources" if others else ""))
        kind = hints[field]
        try:
            value = _read(kind, value, gathered.get(field))
        except ValueError as err:
            raise ValueError(f"--model.{field} {value}: {err}") from None
        gathered[field] = value
    for field, value in gathered.items():
        setattr(cfg, field, value)


def _read(kind: object, value: object, before: object) -> object:
    """``value`` (text, or already typed by a 0.3 flag) as the type ``kind``, added to ``before`` for a list or a
    key map."""
    args = [a for a in typing.get_args(kind) if a is not type(None)]
    optional = type(None) in typing.get_args(kind)
    if optional and len(args) == 1:
        if value == "none":
            return None
        kind = args[0]
    origin = typing.get_origin(kind) or kind
    if origin is list:
        return [*(before or []), value]
    if origin is dict:
        if isinstance(value, tuple):  # a 0.3 flag's KEY=PATH, read already
            key, path = value
        else:
            key, sep, path = value.partition("=")
            if not sep or not key or not path:
                raise ValueError("expected KEY=VALUE")
        return {**(before or {}), key: path}
    if origin is bool:
        if isinstance(value, bool):
            return value
        if value.lower() not in ("true", "false", "1", "0"):
            raise ValueError("expected true or false")
        return value.lower() in ("true", "1")
    if origin in (int, float, str):
        try:
            return origin(value)
        except (TypeError, ValueError):
            raise ValueError(f"expected {'an integer' if origin is int else 'a number' if origin is float else 'text'}"
                             ) from None
    raise ValueError(f"a field of type {kind} cannot be given as a flag; set it in a cfg")


def deprecated(old: str, new: str) -> None:
    """A script's deprecation line for a 0.3 flag."""
    warn(f"{old} is deprecated and goes in 0.5.0: use {new}")


def schedule_arg(args: argparse.Namespace, name: str) -> str | RtcScheduleCfg:
    """The schedule ``name`` with the schedule flags (``--overlap_steps`` for ``rtc``); a name stands for its
    defaults."""
    return RtcScheduleCfg(overlap_steps=args.overlap_steps) if name == "rtc" else name


def chunking_cfg(args: argparse.Namespace) -> ActionChunkingPolicyCfg:
    """The chunking policy's cfg of the policy arguments (``--schedule --aggregator --refill_threshold
    --overlap_steps``, ``--log_dir`` where the script has it)."""
    return ActionChunkingPolicyCfg(chunk_length=None, schedule=schedule_arg(args, args.schedule),
                                   aggregator=args.aggregator, refill_threshold=args.refill_threshold,
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
    None for ``--model random`` (no model).

    Raises:
        ValueError: If the policy does not fit the env (another task, other dims, observation paths it lacks).
    """
    return None if args.source is None else args.source.make(env, warn)


def describe_policy(args: argparse.Namespace) -> str:
    """The policy of the resolved ``args`` (each arm's, when several are compared) in a few words, for the
    scripts' reports."""
    if getattr(args, "sources", None):
        return "; ".join(f"{name}: {source.describe()}" for name, source in args.sources.items())
    return "random actions" if args.source is None else args.source.describe()


def describe_run(args: argparse.Namespace, steps: int | None = None) -> str:
    """The header of a run's report: task, policy, envs, steps, chunk length, seed, shard, desync, latency."""
    from .sharding import describe_shard

    latency = f", latency {args.latency}{' (virtual)' if args.virtual_latency else ''}" if args.latency else ""
    desync = ", desynchronised episodes" if args.desync else ""
    length = f" {steps} steps," if steps else ""
    return (f"{args.task}, {describe_policy(args)}: {args.num_envs} envs,{length} H = {args.chunk},"
            f" seed {args.seed}{describe_shard(args)}{desync}{latency}")
