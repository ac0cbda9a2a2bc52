"""The scripts' argument types (ranges, files, devices, addresses, shards) and the arguments the scripts share
(env, policy, episodes, shards): a bad value stops ``parse_args`` with exit status 2 and one line, before any env
is built.

Nothing heavy is imported here (no torch, Warp or Isaac Lab): a script builds its parser and answers ``--help`` or
a malformed argument at once. A type that needs a heavy module (a device, a latency, an address, a shard) imports
it when a value is given; the names the choices list come from :mod:`isaaclab_suspend.names`."""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable

from ..cfg_overrides import Bound, check_form
from ..devices import check_device
from ..names import AGGREGATOR_NAMES, DEFAULT_TASK, DETERMINISM, MAX_SEED, MODEL_NAMES, SCHEDULE_NAMES

class DefaultsHelpFormatter(argparse.HelpFormatter):
    """``--help`` that shows every option's default: an option whose text does not state it gets ``(default: X)``
    (a switch is off by default; an option unset by default says what that means in its own text)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        unset = action.default is None or action.default is argparse.SUPPRESS or action.default == []
        if not action.option_strings or action.nargs == 0 or "default" in text or unset:
            return text
        return f"{text} (default: %(default)s)".lstrip()


def script_parser(doc: str) -> argparse.ArgumentParser:
    """A script's parser: its description the first line of ``doc`` (the script's docstring), every default shown in
    ``--help``."""
    return argparse.ArgumentParser(description=doc.split("\n")[0], formatter_class=DefaultsHelpFormatter)


POLICIES = ("chunk", "bc", "remote", "checkpoint", "random")
"""The deprecated ``--policy`` choices (see :mod:`.policy`); ``random`` is for recording only."""
MODEL_FIELD = "--model."
"""The prefix of a model cfg field given as a flag: ``--model.chunk_length 8``."""


def _number(kind: type, low: float, high: float = math.inf, low_open: bool = False) -> Callable[[str], int | float]:
    """An argparse type: ``kind(text)``, finite and within ``[low, high]`` (``(low, high]`` with ``low_open``).

    A bad value is a one-line usage error naming the range, e.g. ``0 is out of range: must be >= 1``.
    """
    bound = Bound(low, high, low_open, integer=kind is int)
    what = f"must be {'a finite number ' if kind is float else ''}{bound.range_text()}"

    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not {'an integer' if kind is int else 'a number'}") from None
        if not bound.holds(value):
            raise argparse.ArgumentTypeError(f"{text} is out of range: {what}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


def int_in(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer in ``[low, high]`` (no upper bound when ``high`` is None)."""
    return _number(int, low, math.inf if high is None else high)


def float_in(low: float, high: float = math.inf, low_open: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite float in ``[low, high]`` (``(low, high]`` with ``low_open``)."""
    return _number(float, low, high, low_open)


positive_int = int_in(1)
"""An integer >= 1."""
non_negative_int = int_in(0)
"""An integer >= 0."""
non_negative_float = float_in(0.0)
"""A finite float >= 0."""
fraction = float_in(0.0, 1.0)
"""A float in [0, 1]."""
env_seed = int_in(0, MAX_SEED)
"""A seed: an integer in [0, 2**32 - 1] (Isaac Lab seeds numpy with it)."""


def existing_file(text: str) -> str:
    """An argparse type: the absolute path of a readable file."""
    path = os.path.abspath(text)
    if not os.path.isfile(path) or not os.access(path, os.R_OK):
        raise argparse.ArgumentTypeError(f"'{path}' is not a readable file")
    return path


def device(text: str) -> str:
    """An argparse type: a device this machine has, ``cpu``, ``cuda`` or ``cuda:N``
    (:func:`~isaaclab_suspend.devices.check_device`)."""
    try:
        return check_device(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _parsed_by(parse: Callable[[str], object], what: str, keep_text: bool = False) -> Callable[[str], object]:
    """An argparse type: ``parse(text)`` (or, with ``keep_text``, the text itself once ``parse`` accepts it); its
    ``ValueError`` is the message."""

    def check(text: str) -> object:
        try:
            value = parse(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
        return text if keep_text else value

    check.__name__ = what
    return check


def _key_pair(text: str) -> tuple[str, str]:
    key, _, path = text.partition("=")
    if not key or not path:
        raise ValueError(f"'{text}' is not KEY=PATH (e.g. observation/state=policy or state.cartpole=policy)")
    return key, path


def _cfg_override(text: str) -> str:
    key, _, value = text.partition("=")
    if not key or not value or key.startswith("-"):
        raise ValueError(f"'{text}' is not a cfg override KEY=VALUE (e.g. env.episode_length_s=4.0 or"
                         " env.events.randomize_joint_state.params.std=0.2)")
    return text


def _env_override(text: str) -> str:
    """A user's ``env.KEY=VALUE`` or ``presets=NAME``, in a form this package applies
    (:func:`~isaaclab_suspend.cfg_overrides.check_form`); the seed is ``--seed``."""
    _cfg_override(text)
    check_form(text)
    if text.partition("=")[0] == "env.seed":
        raise ValueError(f"'{text}': set the seed with --seed (it seeds the env and the policy)")
    return text


def _suspension_window(text: str) -> tuple[int, int, int]:
    parts = text.split(":")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise ValueError(f"'{text}' is not ENV:STEP:STEPS (e.g. 1:30:8: env 1 suspended at step 30 for 8 steps)")
    return tuple(int(p) for p in parts)


def _latency(text: str) -> object:
    from ..chunking.latency import LatencyCfg  # torch and Isaac Lab: imported when a latency is given

    return LatencyCfg.parse(text)


def _address(text: str) -> object:
    from ..serving.wires import parse_address  # the clients: imported when an address is given

    return parse_address(text)


def _shard(text: str) -> object:
    from ..datasets.shards import Shard  # h5py and Isaac Lab's file handler: imported when a shard is given

    return Shard.parse(text)


latency = _parsed_by(_latency, "latency", keep_text=True)
"""An emulated latency spec that :meth:`LatencyCfg.parse` accepts (kept as text for the report)."""
address = _parsed_by(_address, "address", keep_text=True)
"""A policy server address: ``host:port``, or ``SCHEME://host:port`` of a wire (``tcp://``, ``openpi://``,
``gr00t://``)."""
key_pair = _parsed_by(_key_pair, "key pair")
"""``KEY=PATH`` as ``(key, path)``: an openpi or GR00T request key and the env's observation path it holds."""
shard = _parsed_by(_shard, "shard")
"""``I/K`` as a :class:`~isaaclab_suspend.datasets.shards.Shard`."""
suspension_window = _parsed_by(_suspension_window, "suspension window")
"""``ENV:STEP:STEPS`` as ``(env, step, steps)``: a suspension of the audit."""


def add_env_args(parser: argparse.ArgumentParser, num_envs: int = 16, seed: int | None = 42, desync: bool = True,
                 tasks: list[str] | None = None, per_env_random: bool | None = None,
                 deterministic: str | None = None) -> None:
    """``--task --import --num_envs --device --seed --presets``, Hydra overrides of the task cfg as trailing
    ``env.KEY=VALUE`` arguments (as Isaac Lab's own scripts take them), if ``desync`` ``--desync``, and with
    ``per_env_random`` True ``--shared_rng`` (per-env random streams by default), False ``--per_env_rng``
    (Isaac Lab's generator by default): ``args.per_env_random`` (:attr:`~isaaclab_suspend.suspension.SuspendCfg.per_env_random`),
    and with ``deterministic`` (its default) ``--deterministic`` (:func:`add_deterministic_arg`).

    ``--task`` defaults to None: the script (or the policy it loads) chooses; ``tasks`` restricts the choices.
    """
    parser.add_argument("--task", default=None, choices=tasks,
                        help="task id (default: the policy's, else the script's)")
    add_import_arg(parser)
    parser.add_argument("--num_envs", type=positive_int, default=num_envs, help="parallel envs")
    parser.add_argument("--device", type=device, default="cpu", help="simulation and policy device")
    parser.add_argument("--seed", type=env_seed, default=seed, help="env (and policy) seed, in [0, 2**32)")
    parser.add_argument("--presets", default=None, metavar="NAME[,NAME]",
                        help="Isaac Lab cfg presets, e.g. newton_featherstone (default: the task's, newton_mjwarp)")
    parser.add_argument("overrides", nargs="*", type=env_override, metavar="env.KEY=VALUE",
                        help="Hydra overrides of the task cfg, as Isaac Lab's scripts take them, e.g."
                             " env.events.randomize_joint_state.params.std=0.2")
    if desync:
        parser.add_argument("--desync", action="store_true",
                            help="start every env at a random point of its episode (Isaac Lab's init_at_random_ep_len),"
                                 " so episodes end at different steps, as when tasks succeed or fail at different"
                                 " times")
    if per_env_random:
        parser.add_argument("--shared_rng", dest="per_env_random", action="store_false",
                            help="draw from Isaac Lab's one shared generator instead of per-env random streams (then an"
                                 " env's noise and events depend on which other envs were suspended)")
    elif per_env_random is not None:
        parser.add_argument("--per_env_rng", dest="per_env_random", action="store_true",
                            help="each env draws from its own random stream (SuspendCfg.per_env_random)")
    if deterministic is not None:
        add_deterministic_arg(parser, deterministic)


def add_deterministic_arg(parser: argparse.ArgumentParser, default: str) -> None:
    """``--deterministic {auto,on,off}``: Isaac Lab 3.0's reproducible physics
    (:func:`~isaaclab_suspend.tasks.env_factory.deterministic_physics`)."""
    parser.add_argument("--deterministic", choices=DETERMINISM, default=default,
                        help="Isaac Lab's reproducible physics (PhysicsCfg.deterministic): auto turns it on for a"
                             " CUDA device, where contact physics is not reproducible without it, so that a resumed"
                             " env retraces the run that never suspended it; on a GPU it may cost several times the"
                             " step time (the start-up line says its cost; an env whose contacts it loses is"
                             f" refused) (default: {default})")


def add_import_arg(parser: argparse.ArgumentParser) -> None:
    """``--import MODULE ...``: modules imported before the task is looked up, e.g. another package's tasks (they
    register their gym ids when imported)."""
    parser.add_argument("--import", dest="modules", nargs="+", default=[], metavar="MODULE",
                        help="modules that register the task (another package's, e.g. my_tasks; on PYTHONPATH)")


def add_quiet_arg(parser: argparse.ArgumentParser) -> None:
    """``--quiet`` (only the result and errors) and ``--verbose`` (everything: Isaac Lab's configuration and
    manager tables, its info log, the suspension manager's report); by default what runs, progress and the
    result, the set-up output dropped (``verbose`` of :func:`~isaaclab_suspend.tasks.env_factory.open_env`)."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--quiet", action="store_true",
                       help="print only the result and errors: no set-up tables, info log or progress bars")
    group.add_argument("--verbose", action="store_true",
                       help="also print the set-up: Isaac Lab's configuration and manager tables, its info log and"
                            " the suspension manager's report of what it freezes")


def add_model_args(parser: argparse.ArgumentParser, random: bool = False, arms: bool = False) -> None:
    """``--model NAME`` with its cfg's fields as ``--model.FIELD VALUE`` flags, and the shorthands ``--checkpoint
    PATH`` and ``--remote ADDRESS`` that infer the model (``random``: ``--model random``, uniform actions); the
    flags of 0.3 parse too, each with a deprecation line (:func:`.policy.resolve_policy` reads them all). With
    ``arms`` (``eval.py``) several models are compared: ``--models NAME[:FIELD=VALUE...],...`` and repeated
    ``--checkpoint`` / ``--remote`` (:func:`.policy.resolve_arms` reads them).

    The fields are read when the model is opened (the registry of sources imports Isaac Lab), so ``--help`` stays
    light: ``parse_args`` collects each ``--model.FIELD VALUE`` (or ``--model.FIELD=VALUE``, repeatable for a list
    or key map) into ``args.model_fields`` as ``(FIELD, VALUE)``."""
    extra = " or 'random' (uniform actions in [-1, 1], no chunk model)" if random else ""
    parser.add_argument("--model", default=None, metavar="NAME",
                        help=f"chunk-model source: {', '.join(MODEL_NAMES)} or another registered one{extra}"
                             " (default: the source of --remote or --checkpoint, else 'embedded', the task's"
                             " planner); its cfg fields are flags: --model.FIELD VALUE, e.g. --model.chunk_length 8,"
                             " --model.planner_overrides grasp_noise=0.015, --model.keys observation/state=policy")
    repeat = {"action": "append"} if arms else {}
    again = " (repeat it to compare several)" if arms else ""
    parser.add_argument("--checkpoint", default=None, **repeat,
                        help="a file or directory the model is inferred from: a chunk policy of"
                             " scripts/train_chunk_policy.py, a LeRobot pretrained_model directory or an rsl_rl /"
                             f" skrl actor (its --model.path){again}")
    parser.add_argument("--remote", default=None, type=address, metavar="ADDRESS", **repeat,
                        help="a served policy, its wire inferred: HOST:PORT or tcp://HOST:PORT"
                             f" (scripts/serve_policy.py), openpi://HOST:PORT, gr00t://HOST:PORT{again}")
    if arms:
        parser.add_argument("--models", default=None, metavar="NAME[:FIELD=VALUE...],...",
                            help="compare several models (arms A, B, ... in this order, after those of --checkpoint"
                                 " and --remote) on the same (env, episode) grid, each under every schedule, e.g."
                                 " 'embedded,embedded:action_scale=0.6'; --model.FIELD flags apply to every arm;"
                                 " without --steps each env scores --episodes_per_env episodes (default 2), which"
                                 " pairs the arms' episodes for the verdict (default: one model)")
    hidden = argparse.SUPPRESS  # the 0.3 flags: parsed, with a deprecation line, until 0.5.0
    parser.add_argument("--policy", default=None, choices=POLICIES if random else POLICIES[:-1], help=hidden)
    parser.add_argument("--chunk", type=positive_int, default=None, help=hidden)
    parser.add_argument("--planner_cfg", action="append", default=[], type=cfg_override, help=hidden)
    parser.add_argument("--openpi_keys", nargs="+", type=key_pair, default=None, help=hidden)
    parser.add_argument("--gr00t_keys", nargs="+", type=key_pair, default=None, help=hidden)
    parser.add_argument("--gr00t_form", default=None, choices=("flat", "nested"), help=hidden)
    parser.add_argument("--gr00t_rtc", action="store_true", help=hidden)
    parser.add_argument("--prompt", default=None, help=hidden)
    parse_known_args = parser.parse_known_args

    def parse_with_model_fields(args=None, namespace=None):
        rest, fields = _model_fields(parser, list(sys.argv[1:] if args is None else args))
        namespace, extras = parse_known_args(rest, namespace)
        namespace.model_fields = fields
        return namespace, extras

    parser.parse_known_args = parse_with_model_fields


def _model_fields(parser: argparse.ArgumentParser, argv: list[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """``argv`` without its ``--model.FIELD VALUE`` flags, and those as ``(FIELD, VALUE)``."""
    rest, fields, i = [], [], 0
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith(MODEL_FIELD):
            rest.append(arg)
        else:
            field, eq, value = arg[len(MODEL_FIELD):].partition("=")
            if not eq:
                if i + 1 >= len(argv):
                    parser.error(f"argument {arg}: expected a value")
                i += 1
                value = argv[i]
            if not field.isidentifier():
                parser.error(f"argument {arg}: '{field}' is not a field name")
            fields.append((field, value))
        i += 1
    return rest, fields


def add_policy_args(parser: argparse.ArgumentParser, random: bool = False, latency_args: bool = False,
                    arms: bool = False) -> None:
    """The model (:func:`add_model_args`, several with ``arms``), ``--schedule --aggregator --refill_threshold
    --overlap_steps`` (and, if ``latency_args``, ``--latency --virtual_latency``)."""
    add_model_args(parser, random, arms)
    parser.add_argument("--schedule", default="global_clock", choices=SCHEDULE_NAMES, help="chunk schedule")
    parser.add_argument("--aggregator", default="replace", choices=AGGREGATOR_NAMES,
                        help="how a new chunk is merged with leftover actions")
    parser.add_argument("--refill_threshold", type=fraction, default=0.0,
                        help="any/partial_batch: request a chunk at <= g*H actions left, g in [0, 1]")
    parser.add_argument("--overlap_steps", type=non_negative_int, default=0,
                        help="rtc: leftover actions a new chunk meets when it lands, merged by the aggregator"
                             " (soft_mask: RTC's soft masking)")
    if latency_args:
        parser.add_argument("--latency", default=None, type=latency,
                            help="emulated inference latency: '0.2', '0.05+0.002n', 'gr1' or 'droid'")
        parser.add_argument("--virtual_latency", action="store_true", help="account the latency without sleeping")


def add_episode_args(parser: argparse.ArgumentParser) -> None:
    """``--episodes_per_env --episode_log``."""
    parser.add_argument("--episodes_per_env", type=positive_int, default=None, metavar="K",
                        help="every env runs exactly K episodes from its first reset (with --desync the cut-short"
                             " first one is not among them); an env that has run its K waits suspended (holding under"
                             " 'hold'/'any', its steps not counted) until all have, then the run ends by itself:"
                             " figures over num_envs x K episodes, not over the first to finish")
    parser.add_argument("--episode_log", default=None, metavar="PATH",
                        help="JSON lines file, one record per counted episode: env_id, episode (index within the"
                             " env), seed, success, length, suspended_steps, calls, return (the sum of its rewards)"
                             " and, when recording, demo")


def add_report_args(parser: argparse.ArgumentParser) -> None:
    """``--output --timeline --timeline_envs --report``: the folder of an evaluation and the figures it holds
    beside the printed table (resolved by :func:`~.reports.apply_output_args`)."""
    parser.add_argument("--output", default=None, metavar="DIR",
                        help="the run's folder: report.html (one self-contained page of the run), episodes.jsonl (the"
                             " run log it is made from, scripts/report.py), timeline.png and results.json (default: a"
                             " new outputs/eval/<date>_<task>_<n>); files of an earlier run are replaced only with"
                             " --overwrite")
    parser.add_argument("--timeline", default=None, help="PNG path (default: timeline.png in the run's folder; '' for"
                                                         " none)")
    parser.add_argument("--timeline_envs", type=positive_int, default=16, help="envs shown in the timeline")
    parser.add_argument("--report", default=None, metavar="DIR",
                        help="'' for no report page and run log; a DIR is the deprecated spelling of --output DIR")


def add_shard_args(parser: argparse.ArgumentParser, results: bool = False) -> None:
    """``--shard`` and, if ``results``, ``--results``."""
    parser.add_argument("--shard", type=shard, default=None, metavar="I/K",
                        help="run shard I of K (0 <= I < K): seed + I, files <stem>-shardIofK.* (merge them with"
                             " scripts/merge_shards.py)")
    if results:
        parser.add_argument("--results", default=None,
                            help="JSON file of the figures per schedule (scripts/merge_shards.py merges the shards')")


def env_overrides(args: argparse.Namespace) -> list[str]:
    """The Hydra-style overrides (``env.KEY=VALUE`` arguments, ``--presets``) for
    :func:`~isaaclab_suspend.tasks.env_factory.open_env`."""
    return [*getattr(args, "overrides", []), *([f"presets={args.presets}"] if args.presets else [])]


def _schedules(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in SCHEDULE_NAMES]
    if not names or unknown:
        raise ValueError(f"unknown schedules {unknown or [text]}; choose from {list(SCHEDULE_NAMES)}")
    return names


cfg_override = _parsed_by(_cfg_override, "cfg override", keep_text=True)
"""``KEY=VALUE``: an override of a cfg's field (``--model.planner_overrides``)."""
env_override = _parsed_by(_env_override, "cfg override", keep_text=True)
"""``env.KEY=VALUE`` or ``presets=NAME``: a Hydra override of the task cfg, in a form this package applies."""
schedules = _parsed_by(_schedules, "comma-separated schedules", keep_text=False)
"""A comma-separated list of known chunk schedules."""
