"""The one check of a device string a user gives (a script's ``--device``, the LeRobot plugin's ``--env.device``, a
run cfg's ``device``), made before anything is built on it.

Imports nothing at import time; torch is imported only to count the CUDA devices of a ``cuda`` string.
"""

from __future__ import annotations

import re

_CUDA = re.compile(r"cuda(:(0|[1-9][0-9]{0,3}))?")


def check_device(device: object) -> str:
    """``device`` if it is a device this machine has, written as Isaac Lab and Warp take it: ``cpu``, ``cuda`` or
    ``cuda:N`` with N below ``torch.cuda.device_count()``. Anything else is refused: another torch form (``cpu:7``,
    ``cuda:01``, ``CUDA``, a ``torch.device``), another kind of device (``mps``, ``meta``), a CUDA device this
    machine lacks.

    Raises:
        ValueError: Saying what was given and what is accepted, in one line.
    """
    accepted = "give cpu, cuda or cuda:N"
    if device == "cpu":
        return device
    if not isinstance(device, str) or not _CUDA.fullmatch(device):
        shown = repr(device[:40]) if isinstance(device, str) else f"a {type(device).__name__}"
        raise ValueError(f"{shown} is not a device this package runs on: {accepted}")
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    index = int(device.partition(":")[2] or 0)
    if index >= count:
        raise ValueError(f"'{device}': this machine has {count} CUDA devices"
                         f"{f' (cuda:0 to cuda:{count - 1})' if count else ''}; {accepted}")
    return device
