"""Serve a chunk policy over TCP for ``scripts/eval.py --remote`` (and any :class:`RemoteChunkModel`).

The served model is a chunk-policy checkpoint of ``scripts/train_chunk_policy.py`` (``--checkpoint``) or the
task's embedded chunk model; no env is created here, so the server can run on another machine (a GPU one).

Examples::

    tools/run.sh python scripts/serve_policy.py --task Isaac-Cartpole-Suspendable --port 5555
    tools/run.sh python scripts/eval.py --remote 127.0.0.1:5555 --compare global_clock,async --desync
"""

from __future__ import annotations

import argparse
import signal
import sys

from isaaclab_suspend.learning import load_chunk_policy
from isaaclab_suspend.policies import PolicyServer, PolicyServerCfg
from isaaclab_suspend.policies.embedded import DEFAULT_MODELS, make_default_model


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", default="Isaac-Cartpole-Suspendable", choices=sorted(DEFAULT_MODELS),
                        help="task of the embedded model (ignored with --checkpoint)")
    parser.add_argument("--checkpoint", default=None, help="chunk policy checkpoint (default: the embedded model)")
    parser.add_argument("--chunk", type=int, default=16, help="H of the embedded model")
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (0.0.0.0: all)")
    parser.add_argument("--port", type=int, default=5555, help="TCP port (0: a free one)")
    parser.add_argument("--device", default="cpu", help="device the model runs on")
    args = parser.parse_args(argv)
    if args.chunk < 1:
        parser.error("--chunk must be positive")
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
    return PolicyServer(model, cfg)


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        server = make_server(args)
    except (FileNotFoundError, ValueError, OSError) as err:
        print(f"serve_policy.py: error: {err}", file=sys.stderr)
        return 2
    host, port = server.address
    print(f"Serving {args.checkpoint or f'the embedded model of {args.task}'} at {host}:{port}: {server.metadata}",
          flush=True)
    for signum in (signal.SIGINT, signal.SIGTERM):  # Ctrl-C or kill stop it cleanly, also as a background job
        signal.signal(signum, _interrupt)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("Stopped.")
    finally:
        server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
