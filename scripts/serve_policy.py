"""Serve a chunk policy over TCP for ``scripts/eval.py --remote`` (and any :class:`RemoteChunkModel`).

The served model is a chunk-policy checkpoint of ``scripts/train_chunk_policy.py`` (``--checkpoint``) or the
task's embedded chunk model; no env is created here, so the server can run on another machine (a GPU one).

Examples::

    tools/run.sh python scripts/serve_policy.py --task Isaac-Cartpole-Suspendable --port 5555
    tools/run.sh python scripts/eval.py --remote 127.0.0.1:5555 --compare global_clock,async --desync
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys

from isaaclab_suspend.cli_types import device, existing_file, float_in, int_in
from isaaclab_suspend.learning import load_chunk_policy
from isaaclab_suspend.policies import PolicyServer, PolicyServerCfg, WireLimitsCfg
from isaaclab_suspend.policies.embedded import DEFAULT_MODELS, make_default_model
from isaaclab_suspend.policies.remote import TOKEN_ENV


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    defaults, limits = PolicyServerCfg(), WireLimitsCfg()
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", default="Isaac-Cartpole-Suspendable", choices=sorted(DEFAULT_MODELS),
                        help="task of the embedded model (ignored with --checkpoint)")
    parser.add_argument("--checkpoint", type=existing_file, default=None,
                        help="chunk policy checkpoint (default: the embedded model)")
    parser.add_argument("--chunk", type=int_in(1, 4096), default=16, help="H of the embedded model")
    parser.add_argument("--host", default=defaults.host,
                        help="interface to listen on (0.0.0.0: all; beyond loopback a token is needed)")
    parser.add_argument("--port", type=int_in(0, 65535), default=defaults.port, help="TCP port (0: a free one)")
    parser.add_argument("--device", type=device, default="cpu", help="device the model runs on")
    parser.add_argument("--max_connections", type=int_in(1, 1024), default=defaults.max_connections,
                        help="clients served at once; more are refused with a 'busy' reply")
    parser.add_argument("--max_message_mb", type=float_in(0.0, 65536.0, low_open=True),
                        default=limits.max_message_bytes / 2**20,
                        help="largest request [MiB]; the server holds at most this per connection")
    parser.add_argument("--read_timeout", type=float_in(0.0, 3600.0, low_open=True), default=defaults.read_timeout_s,
                        help="longest time for a request to arrive whole, and for a new client's hello [s]")
    parser.add_argument("--idle_timeout", type=float_in(0.0, 86400.0, low_open=True),
                        default=defaults.idle_timeout_s, help="close a connection idle this long [s]")
    parser.add_argument("--token_file", type=existing_file, default=None,
                        help=f"file holding the shared token clients must send (default: ${TOKEN_ENV} if set)")
    parser.add_argument("--insecure_no_token", action="store_true",
                        help="listen beyond loopback without a token (a trusted network only)")
    args = parser.parse_args(argv)
    args.token = os.environ.get(TOKEN_ENV) or None
    if args.token_file:
        with open(args.token_file) as file:
            args.token = file.read().strip()
        if not args.token:
            parser.error(f"--token_file '{args.token_file}' is empty")
    return args


def make_server(args: argparse.Namespace) -> PolicyServer:
    """The server of the checkpoint or embedded model that ``args`` name."""
    if args.checkpoint:
        model = load_chunk_policy(args.checkpoint, args.device)
        cfg = PolicyServerCfg(chunk_length=model.chunk_length, action_dim=model.net.action_dim, task=model.task or None)
    else:
        model = make_default_model(args.task, args.chunk)
        cfg = PolicyServerCfg(chunk_length=args.chunk, task=args.task)
    cfg.host, cfg.port, cfg.device = args.host, args.port, args.device
    cfg.max_connections, cfg.read_timeout_s = args.max_connections, args.read_timeout
    cfg.idle_timeout_s = args.idle_timeout
    cfg.limits.max_message_bytes = max(1, int(args.max_message_mb * 2**20))
    cfg.token, cfg.insecure_no_token = args.token, args.insecure_no_token
    return PolicyServer(model, cfg)


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(format="%(asctime)s %(message)s", level=logging.INFO, stream=sys.stderr)
    server = None
    try:
        server = make_server(args)
        for signum in (signal.SIGINT, signal.SIGTERM):  # Ctrl-C or kill stop it cleanly, also in the background
            signal.signal(signum, _interrupt)
        host, port = server.address
        print(f"Serving {args.checkpoint or f'the embedded model of {args.task}'} at {host}:{port}:"
              f" {server.metadata}{' (token required)' if server.cfg.token else ''}", flush=True)
        server.serve_forever()
    except KeyboardInterrupt:
        print("Stopped.")
    except (FileNotFoundError, ValueError, OSError) as err:
        print(f"serve_policy.py: error: {err}", file=sys.stderr)
        return 2
    finally:
        if server is not None:
            server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
