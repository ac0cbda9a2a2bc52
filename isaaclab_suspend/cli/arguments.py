"""The scripts' argument types (ranges, files, devices, addresses, shards) and the env arguments every script
shares: a bad value stops ``parse_args`` with exit status 2 and one line, before any env is built."""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable

import torch

from ..policies.latency import LatencyCfg
from ..policies.schedules import SCHEDULES
from ..serving.remote_address import parse_address
from ..datasets.shards import Shard


def _bound(value: float) -> str:
    return f"{value:g}"


def _number(kind: type, low: float, high: float = math.inf, low_open: bool = False) -> Callable[[str], int | float]:
    """An argparse type: ``kind(text)``, finite and within ``[low, high]`` (``(low, high]`` with ``low_open``).

    A bad value is a one-line usage error naming the range, e.g. ``0 is out of range: must be >= 1``.
    """
    if high == math.inf:
        bounds = f"{'>' if low_open else '>='} {_bound(low)}"
    else:
        bounds = f"in {'(' if low_open else '['}{_bound(low)}, {_bound(high)}]"
    what = f"must be {'a finite number ' if kind is float else ''}{bounds}"

    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not {'an integer' if kind is int else 'a number'}") from None
        if not (low <= value <= high) or (low_open and value == low) or (kind is float and not math.isfinite(value)):
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


def existing_file(text: str) -> str:
    """An argparse type: the absolute path of a readable file."""
    path = os.path.abspath(text)
    if not os.path.isfile(path) or not os.access(path, os.R_OK):
        raise argparse.ArgumentTypeError(f"'{path}' is not a readable file")
    return path


def existing_checkpoint(text: str) -> str:
    """An argparse type: the absolute path of a readable file or of a directory (a LeRobot ``pretrained_model``)."""
    path = os.path.abspath(text)
    if os.path.isdir(path):
        return path
    return existing_file(text)


def device(text: str) -> str:
    """An argparse type: a torch device this machine has (``cpu``, ``cuda``, ``cuda:1``)."""
    try:
        parsed = torch.device(text)
    except RuntimeError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a torch device (e.g. cpu, cuda:0)") from None
    if parsed.type not in ("cpu", "cuda"):
        raise argparse.ArgumentTypeError(f"'{text}': only cpu and cuda devices are supported")
    if parsed.type == "cuda" and (not torch.cuda.is_available() or (parsed.index or 0) >= torch.cuda.device_count()):
        raise argparse.ArgumentTypeError(f"'{text}': this machine has {torch.cuda.device_count()} CUDA devices")
    return text


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


def _suspension_window(text: str) -> tuple[int, int, int]:
    parts = text.split(":")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise ValueError(f"'{text}' is not ENV:STEP:STEPS (e.g. 1:30:8: env 1 suspended at step 30 for 8 steps)")
    return tuple(int(p) for p in parts)


latency = _parsed_by(LatencyCfg.parse, "latency", keep_text=True)
"""An emulated latency spec that :meth:`LatencyCfg.parse` accepts (kept as text for the report)."""
address = _parsed_by(parse_address, "address", keep_text=True)
"""A policy server address: ``host:port``, ``openpi://host:port`` or ``gr00t://host:port``."""
key_pair = _parsed_by(_key_pair, "key pair")
"""``KEY=PATH`` as ``(key, path)``: an openpi or GR00T request key and the env's observation path it holds."""
shard = _parsed_by(Shard.parse, "shard")
"""``I/K`` as a :class:`~isaaclab_suspend.datasets.shards.Shard`."""
suspension_window = _parsed_by(_suspension_window, "suspension window")
"""``ENV:STEP:STEPS`` as ``(env, step, steps)``: a suspension of the audit."""


def add_env_args(parser: argparse.ArgumentParser, num_envs: int = 16, seed: int | None = 42, desync: bool = True,
                 tasks: list[str] | None = None) -> None:
    """``--task --num_envs --device --seed --presets`` and, if ``desync``, ``--desync``.

    ``--task`` defaults to None: the script (or the policy it loads) chooses; ``tasks`` restricts the choices.
    """
    parser.add_argument("--task", default=None, choices=tasks,
                        help="task id (default: the policy's, else the script's)")
    parser.add_argument("--num_envs", type=positive_int, default=num_envs, help="parallel envs")
    parser.add_argument("--device", type=device, default="cpu", help="simulation and policy device")
    parser.add_argument("--seed", type=non_negative_int, default=seed, help="env (and policy) seed")
    parser.add_argument("--presets", default=None, metavar="NAME[,NAME]",
                        help="Isaac Lab cfg presets, e.g. newton_featherstone (default: the task's, newton_mjwarp)")
    if desync:
        parser.add_argument("--desync", action="store_true",
                            help="start every env at a random point of its episode (Isaac Lab's init_at_random_ep_len),"
                                 " so episodes end at different steps, as when tasks succeed or fail at different"
                                 " times")


def add_quiet_arg(parser: argparse.ArgumentParser) -> None:
    """``--quiet``: only the result and errors (:func:`~isaaclab_suspend.utils.set_quiet`)."""
    parser.add_argument("--quiet", action="store_true",
                        help="print only the result and errors: no set-up tables, info log or progress bars")


def env_overrides(args: argparse.Namespace) -> list[str]:
    """The Hydra-style overrides of ``--presets`` for :func:`~isaaclab_suspend.utils.open_env`."""
    return [f"presets={args.presets}"] if args.presets else []


def _schedules(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in SCHEDULES]
    if not names or unknown:
        raise ValueError(f"unknown schedules {unknown or [text]}; choose from {sorted(SCHEDULES)}")
    return names


schedules = _parsed_by(_schedules, "comma-separated schedules", keep_text=False)
"""A comma-separated list of known chunk schedules."""
