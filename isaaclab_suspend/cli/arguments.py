"""Argument types with ranges and the env arguments every script shares: a bad value stops ``parse_args`` with
exit status 2 and one line, before any env is built."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from ..policies.latency import LatencyCfg
from ..policies.remote import RemoteChunkModelCfg


def _number(kind: type, low: float, high: float = math.inf, what: str = "") -> Callable[[str], int | float]:
    """An argparse type: ``kind(text)``, finite and within ``[low, high]``."""

    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not {'an integer' if kind is int else 'a number'}") from None
        if not (low <= value <= high) or (kind is float and not math.isfinite(value)):
            raise argparse.ArgumentTypeError(f"{text} is out of range: {what}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


positive_int = _number(int, 1, what="must be >= 1")
"""An integer >= 1."""
non_negative_int = _number(int, 0, what="must be >= 0")
"""An integer >= 0."""
non_negative_float = _number(float, 0.0, what="must be a finite number >= 0")
"""A finite float >= 0."""
fraction = _number(float, 0.0, 1.0, what="must lie in [0, 1]")
"""A float in [0, 1]."""


def _accepted_by(parse: Callable[[str], object], what: str) -> Callable[[str], str]:
    """An argparse type: the text itself, once ``parse(text)`` accepts it (its ``ValueError`` is the message)."""

    def check(text: str) -> str:
        try:
            parse(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
        return text

    check.__name__ = what
    return check


latency = _accepted_by(LatencyCfg.parse, "latency")
"""An emulated latency spec that :meth:`LatencyCfg.parse` accepts (kept as text for the report)."""
address = _accepted_by(RemoteChunkModelCfg.parse, "address")
"""A ``host:port`` policy server address."""


def add_env_args(parser: argparse.ArgumentParser, num_envs: int = 16, seed: int | None = 42, desync: bool = True,
                 tasks: list[str] | None = None) -> None:
    """``--task --num_envs --device --seed --presets`` and, if ``desync``, ``--desync``.

    ``--task`` defaults to None: the script (or the policy it loads) chooses; ``tasks`` restricts the choices.
    """
    parser.add_argument("--task", default=None, choices=tasks,
                        help="task id (default: the policy's, else Isaac-Cartpole-Suspendable)")
    parser.add_argument("--num_envs", type=positive_int, default=num_envs, help="parallel envs")
    parser.add_argument("--device", default="cpu", help="simulation and policy device")
    parser.add_argument("--seed", type=non_negative_int, default=seed, help="env (and policy) seed")
    parser.add_argument("--presets", default=None, metavar="NAME[,NAME]",
                        help="Isaac Lab cfg presets, e.g. newton_featherstone (default: the task's, newton_mjwarp)")
    if desync:
        parser.add_argument("--desync", action="store_true",
                            help="start every env at a random point of its episode (Isaac Lab's init_at_random_ep_len),"
                                 " so episodes end at different steps, as when tasks succeed or fail at different"
                                 " times")


def env_overrides(args: argparse.Namespace) -> list[str]:
    """The Hydra-style overrides of ``--presets`` for :func:`~isaaclab_suspend.utils.open_env`."""
    return [f"presets={args.presets}"] if args.presets else []
