"""Serve a chunk policy over the ``tcp`` wire for ``scripts/eval.py --remote`` (and any :class:`TcpChunkModel`),
over openpi's (``--wire openpi``) for openpi clients and ``eval.py --remote openpi://``, or over GR00T's
(``--wire gr00t``) for GR00T's ``PolicyClient`` and ``eval.py --remote gr00t://``.

The served model is named as eval.py names it: a checkpoint (``--checkpoint``: a chunk policy of
``scripts/train_chunk_policy.py``, a LeRobot directory or an rsl_rl / skrl actor), ``--model rl_actor`` (the task's
shipped expert, H = 1), the task's embedded chunk model (the default) or any registered source; only an RL actor's
network needs an env (a one-env instance of its task), so the server can run on another machine
(a GPU one). ``--batch_wait_ms`` merges the concurrent requests of several clients into one model call. The
options are those of :mod:`isaaclab_suspend.cli.serving`.

Examples::

    tools/run.sh python scripts/serve_policy.py --task Isaac-Cartpole-Suspendable --port 5555
    tools/run.sh python scripts/eval.py --remote 127.0.0.1:5555 --compare global_clock,async --desync

    # openpi's protocol: openpi_client.WebsocketClientPolicy, or eval.py --remote openpi://HOST:PORT
    tools/run.sh python scripts/serve_policy.py --wire openpi --port 8000 --keys observation/state=policy

    # GR00T's protocol: gr00t.policy.server_client.PolicyClient, or eval.py --remote gr00t://HOST:PORT
    tools/run.sh python scripts/serve_policy.py --wire gr00t --port 5555 --keys state.cartpole=policy \
        --batch_wait_ms 200
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys

from isaaclab_suspend import cli  # light: torch and Isaac Lab are imported after parsing, where they are used
from isaaclab_suspend.cli import serving


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = cli.script_parser(__doc__)
    serving.add_server_args(parser)
    cli.add_quiet_arg(parser)
    args = parser.parse_args(argv)
    serving.resolve_server_args(parser, args)
    return args


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def serve(args: argparse.Namespace) -> None:
    level = logging.WARNING if args.quiet else logging.INFO  # --quiet: no line per connection
    logging.basicConfig(format="%(asctime)s %(message)s", level=level, stream=sys.stderr)
    server = serving.make_server(args)
    try:
        for signum in (signal.SIGINT, signal.SIGTERM):  # Ctrl-C or kill stop it cleanly, also in the background
            signal.signal(signum, _interrupt)
        print(serving.describe_server(args, server), flush=True)
        server.serve_forever()
    except KeyboardInterrupt:
        print("Stopped.")
    finally:
        server.close()


def main(argv: list[str] | None = None) -> int:
    return cli.run(serve, parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
