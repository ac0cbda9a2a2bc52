"""How a script ends: one line and exit status 2 for a user error, one line and 130 for Ctrl-C, no traceback.

Isaac Lab's ``launch_simulation`` prints the traceback of any exception that leaves its block, so a user error
raised while the env exists (a server that goes away, a policy that does not fit the env) must become a
``SystemExit`` inside the block: :func:`user_errors` does that.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Iterator

USER_ERRORS: tuple[type[BaseException], ...] = (OSError, ValueError)
"""Errors a user causes (bad files, paths, addresses, a policy that does not fit the env, a full disk); they
include ``FileNotFoundError``, ``ConnectionError`` and ``TimeoutError``."""


def prog() -> str:
    """The script's name as argparse prints it."""
    return os.path.basename(sys.argv[0])


def fail(message: object, code: int = 2) -> SystemExit:
    """Print ``<script>: error: <message>`` on stderr; returns the ``SystemExit(code)`` to raise."""
    print(f"{prog()}: error: {message}", file=sys.stderr)
    return SystemExit(code)


@contextlib.contextmanager
def user_errors(*extra: type[BaseException], note: str | None = None) -> Iterator[None]:
    """Turn :data:`USER_ERRORS` (and ``extra``) raised in the block into one line and exit status 2; ``note`` ends
    the line (e.g. where the episodes recorded before the error are kept)."""
    try:
        yield
    except (*USER_ERRORS, *extra) as err:
        raise fail(f"{err} {note}" if note else err) from None


def run(body: Callable[[argparse.Namespace], object], args: argparse.Namespace) -> int:
    """Run a script's ``body(args)``: its status (an int; 0 if it returns anything else), 2 with one line on a
    user error, 130 on Ctrl-C with the one line ``args.on_interrupt`` (e.g. where the results so far are), if the
    script set it, else ``Interrupted.``. Under torchrun a sharded script (one with ``args.shard``) hands its
    status to rank 0 and returns the run's (:mod:`.distributed`); training leaves torch.distributed to its library."""
    from .distributed import run_ranks

    return run_ranks(lambda: _run(body, args)) if hasattr(args, "shard") else _run(body, args)


def _run(body: Callable[[argparse.Namespace], object], args: argparse.Namespace) -> int:
    try:
        with user_errors():
            status = body(args)
            return status if isinstance(status, int) else 0
    except KeyboardInterrupt:
        print(f"\n{getattr(args, 'on_interrupt', 'Interrupted.')}")
        return 130
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else int(exit_.code is not None)
