"""Reading a checkpoint file without running code from it: ``torch.load(weights_only=True)`` with a one-line error.

Every checkpoint the project writes or reads (chunk policies, rsl_rl and skrl agents, the shipped experts) holds
tensors and plain containers (dicts, lists, numbers, strings) only, which ``weights_only=True`` loads. A file that
needs more holds a pickled Python object: unpickling it could run any code, so it is refused, naming what it holds.
"""

from __future__ import annotations

import os
import pickle
import re

import torch


def load_weights(path: str, device: str | torch.device = "cpu", what: str = "checkpoint"):
    """The contents of the ``torch.save`` file at ``path`` (tensors on ``device``), read with ``weights_only=True``.

    Raises:
        ValueError: In one line, if the file holds a pickled object other than tensors and plain containers
            (naming its class, e.g. ``posix.system``) or is not a readable ``torch.save`` file.
    """
    try:
        return torch.load(path, map_location=device, weights_only=True)
    except pickle.UnpicklingError as err:
        found = re.search(r"GLOBAL ([\w.]+)", str(err))
        if found is None:
            raise ValueError(f"'{path}' is not a readable {what} (a torch.save file of weights): {_one_line(err)}"
                             ) from None
        raise ValueError(
            f"'{path}' holds more than tensors and plain containers (a pickled {found[1]}): loading it could run"
            f" code from the file, so this {what} is refused. Only weights-only files load (state dicts, tensors,"
            " numbers and strings in dicts and lists): re-save them from a trusted copy."
        ) from None
    except Exception as err:  # torch raises many types (KeyError, RuntimeError, EOFError, ...) for a non-checkpoint
        raise ValueError(f"'{path}' is not a readable {what} (a torch.save file): {_one_line(err)}") from None


def _one_line(err: BaseException) -> str:
    """The gist of torch's (many-line) error: its last line naming the problem, at most 200 characters."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip() and "documentation" not in line]
    return f"{type(err).__name__}: {lines[-1] if lines else ''}"[:200]


def peek_weights(path: str) -> object | None:
    """The contents of the file at ``path`` read weights only, None if no file is there: what a chunk-model source
    looks at to recognize its checkpoints. A file holding more than tensors raises: it is refused, not passed over."""
    return load_weights(path, "cpu", "checkpoint") if os.path.isfile(path) else None
