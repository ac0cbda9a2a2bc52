"""A user error as one line and exit status 2, no traceback.

Isaac Lab's ``launch_simulation`` prints the traceback of any exception that leaves its block, so a user error
raised while the env exists (a server that goes away, a policy that does not fit the env) must become a
``SystemExit`` inside the block: :func:`user_errors` does that.
"""

from __future__ import annotations

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
def user_errors(*extra: type[BaseException], note: Callable[[], str | None] | None = None) -> Iterator[None]:
    """Turn :data:`USER_ERRORS` (and ``extra``) raised in the block into one line and exit status 2; ``note()``,
    asked when the error happens, ends the line if it says something (e.g. where the episodes recorded before the
    error are kept)."""
    try:
        yield
    except (*USER_ERRORS, *extra) as err:
        said = note() if note is not None else None
        raise fail(f"{err} {said}" if said else err) from None
