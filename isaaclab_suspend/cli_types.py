"""Argument types for the scripts' ``argparse`` parsers: a bad value is a one-line usage error (exit status 2)
before anything is built, never a traceback."""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable

import torch


def int_in(low: int, high: int | None = None) -> Callable[[str], int]:
    """An integer in ``[low, high]`` (no upper bound when ``high`` is None)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not an integer") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"{value} is not in [{low}, {'inf' if high is None else high}]")
        return value

    return parse


def float_in(low: float, high: float = math.inf, low_open: bool = False) -> Callable[[str], float]:
    """A finite float in ``[low, high]`` (``(low, high]`` with ``low_open``); NaN and inf are refused."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
        if not math.isfinite(value) or value < low or (low_open and value == low) or value > high:
            raise argparse.ArgumentTypeError(
                f"{text} is not a finite number in {'(' if low_open else '['}{low:g}, {high:g}]"
            )
        return value

    return parse


def existing_file(text: str) -> str:
    """The absolute path of a readable file."""
    path = os.path.abspath(text)
    if not os.path.isfile(path) or not os.access(path, os.R_OK):
        raise argparse.ArgumentTypeError(f"'{path}' is not a readable file")
    return path


def device(text: str) -> str:
    """A torch device this machine has (``cpu``, ``cuda``, ``cuda:1``)."""
    try:
        parsed = torch.device(text)
    except RuntimeError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a torch device (e.g. cpu, cuda:0)") from None
    if parsed.type == "cuda" and (not torch.cuda.is_available() or (parsed.index or 0) >= torch.cuda.device_count()):
        raise argparse.ArgumentTypeError(f"'{text}': this machine has {torch.cuda.device_count()} CUDA devices")
    if parsed.type not in ("cpu", "cuda"):
        raise argparse.ArgumentTypeError(f"'{text}': only cpu and cuda devices are supported")
    return text
