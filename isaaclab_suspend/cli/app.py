"""How a script ends: its status, one line and exit status 2 for a user error (:mod:`.errors`), one line and 130
for Ctrl-C, no traceback; under torchrun the run's status (:mod:`.distributed`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from .errors import user_errors


def run(body: Callable[[argparse.Namespace], object], args: argparse.Namespace) -> int:
    """Run a script's ``body(args)``: its status (an int; 0 if it returns anything else), 2 with one line on a
    user error, 130 on Ctrl-C with one line: the interrupt's own message where it has one (what the library knows
    it left: e.g. part files not merged), else ``args.on_interrupt`` (e.g. where the results so far are), if the
    script set it, else ``Interrupted.``. Under torchrun a sharded script (one with
    ``args.shard``) hands its status to rank 0 and returns the run's (:mod:`.distributed`); training leaves
    torch.distributed to its library."""
    from .distributed import run_ranks  # torch: imported once the script has parsed its arguments

    return run_ranks(lambda: _run(body, args)) if hasattr(args, "shard") else _run(body, args)


def _run(body: Callable[[argparse.Namespace], object], args: argparse.Namespace) -> int:
    try:
        with user_errors():
            status = body(args)
            return status if isinstance(status, int) else 0
    except KeyboardInterrupt as interrupt:  # its message, where it has one, says what it left (e.g. parts not merged)
        print(f"\n{interrupt if str(interrupt) else getattr(args, 'on_interrupt', 'Interrupted.')}")
        return 130
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else int(exit_.code is not None)
