"""Serve a chunk policy over TCP for ``scripts/eval.py --remote`` (and any :class:`RemoteChunkModel`), or
with openpi's websocket protocol (``--protocol openpi``) for openpi clients.

The served model is a chunk-policy checkpoint of ``scripts/train_chunk_policy.py`` (``--checkpoint``), an rsl_rl
or skrl expert (``--expert``, H = 1) or the task's embedded chunk model; no env is created for the first and
the last (the expert's network is built on a one-env instance of its task), so the server can run on another
machine (a GPU one). ``--batch_wait_ms`` merges the concurrent requests of several clients into one model call.

Examples::

    tools/run.sh python scripts/serve_policy.py --task Isaac-Cartpole-Suspendable --port 5555
    tools/run.sh python scripts/eval.py --remote 127.0.0.1:5555 --compare global_clock,async --desync

    # openpi's protocol: openpi_client.WebsocketClientPolicy, or eval.py --remote openpi://HOST:PORT
    tools/run.sh python scripts/serve_policy.py --protocol openpi --port 8000 --keys observation/state=policy
"""

from __future__ import annotations

import argparse
import signal
import sys

from isaaclab_suspend.learning import load_chunk_policy
from isaaclab_suspend.policies import (
    BatchingCfg,
    LatencyCfg,
    LatencyEmulator,
    OpenpiPolicyServer,
    OpenpiPolicyServerCfg,
    PolicyServer,
    PolicyServerCfg,
    parse_key_pairs,
)
from isaaclab_suspend.policies.embedded import DEFAULT_MODELS, make_default_model


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", default="Isaac-Cartpole-Suspendable", choices=sorted(DEFAULT_MODELS),
                        help="task of the embedded model (ignored with --checkpoint)")
    parser.add_argument("--checkpoint", default=None, help="chunk policy checkpoint (default: the embedded model)")
    parser.add_argument("--expert", nargs="?", const="", default=None, metavar="PATH",
                        help="an rsl_rl or skrl checkpoint of --task as a chunk model with H = 1 (no PATH: the"
                             " task's shipped expert)")
    parser.add_argument("--chunk", type=int, default=16, help="H of the embedded model")
    parser.add_argument("--protocol", default="project", choices=("project", "openpi"),
                        help="'project': RemoteChunkModel's TCP protocol; 'openpi': openpi's websocket protocol")
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (0.0.0.0: all)")
    parser.add_argument("--port", type=int, default=None,
                        help="TCP port (default 5555, openpi: 8000; 0: a free one)")
    parser.add_argument("--device", default="cpu", help="device the model runs on")
    parser.add_argument("--batch_wait_ms", type=float, default=None,
                        help="merge concurrent requests into one model call, waiting at most this long for more"
                             " (default: project: off, openpi: 5 ms)")
    parser.add_argument("--max_batch_rows", type=int, default=4096, help="most env rows in one batched model call")
    parser.add_argument("--keys", nargs="+", default=None, metavar="OPENPI_KEY=PATH",
                        help="openpi: request keys renamed to observation paths, e.g. observation/state=policy")
    parser.add_argument("--latency", default=None,
                        help="emulated inference latency per model call: '0.2', '0.05+0.002n', 'gr1' or 'droid'")
    args = parser.parse_args(argv)
    if args.chunk < 1:
        parser.error("--chunk must be positive")
    if args.checkpoint and args.expert is not None:
        parser.error("--checkpoint and --expert both name the policy: pass one")
    if args.keys and args.protocol != "openpi":
        parser.error("--keys needs --protocol openpi")
    try:
        args.keys = parse_key_pairs(args.keys or ())
        args.latency = LatencyCfg.parse(args.latency) if args.latency else None
    except ValueError as err:
        parser.error(str(err))
    if args.port is None:
        args.port = 8000 if args.protocol == "openpi" else 5555
    return args


def load_expert(path: str, task: str):
    """The rsl_rl or skrl expert at ``path`` (empty: the task's shipped one), built on a one-env instance."""
    from isaaclab_suspend.rl import load_checkpoint_policy
    from isaaclab_suspend.rl.checkpoint_policy import shipped_checkpoint
    from isaaclab_suspend.utils import open_env

    with open_env(task, 1) as env:
        return load_checkpoint_policy(path or shipped_checkpoint(task), env, task=task), \
            env.action_manager.total_action_dim


def make_server(args: argparse.Namespace) -> PolicyServer | OpenpiPolicyServer:
    """The server (of ``args.protocol``) of the checkpoint, expert or embedded model that ``args`` name."""
    cfg = OpenpiPolicyServerCfg(keys=args.keys or None) if args.protocol == "openpi" else PolicyServerCfg()
    if args.checkpoint:
        model = load_chunk_policy(args.checkpoint, args.device)
        cfg.chunk_length, cfg.action_dim, cfg.task = model.chunk_length, model.net.action_dim, model.task or None
    elif args.expert is not None:
        model, cfg.action_dim = load_expert(args.expert, args.task)
        cfg.chunk_length, cfg.task = 1, args.task
    else:
        model = make_default_model(args.task, args.chunk)
        cfg.chunk_length, cfg.task = args.chunk, args.task
    if args.latency is not None:
        model = LatencyEmulator(model, args.latency)
    if args.batch_wait_ms is not None:
        cfg.batching = BatchingCfg(max_wait_s=args.batch_wait_ms / 1e3, max_rows=args.max_batch_rows)
    cfg.host, cfg.port, cfg.device = args.host, args.port, args.device
    return cfg.class_type(model, cfg)


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
    policy = args.checkpoint or (f"the expert {args.expert or 'shipped'} of {args.task}" if args.expert is not None
                                 else f"the embedded model of {args.task}")
    batching = f", batching (wait {server.cfg.batching.max_wait_s * 1e3:g} ms)" if server.cfg.batching else ""
    print(f"Serving {policy} ({args.protocol} protocol{batching}) at {host}:{port}: {server.metadata}", flush=True)
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
