"""The policy server's arguments (``scripts/serve_policy.py``) and the server they name.

The model is named as every script names it (``--model NAME --model.FIELD VALUE``, ``--checkpoint PATH``:
:func:`~.arguments.add_model_args`); ``--wire`` picks the wire (:data:`~isaaclab_suspend.serving.wires.WIRES`).
The wires share the limits, time-outs and token of :class:`~isaaclab_suspend.serving.ServerCfg`; options left
unset take the defaults of the wire's server cfg, which the server's first line shows. Building the parser imports
nothing heavy; the servers are imported when one is made. ``--protocol`` (``project``: ``tcp``), ``--expert`` and
``--chunk`` of 0.3 still parse, each with a deprecation line, until 0.5.0.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from ..names import TOKEN_ENV, WIRE_NAMES
from .arguments import (add_import_arg, add_model_args, device, existing_file, float_in, int_in, key_pair,
                        latency)

if TYPE_CHECKING:
    from ..serving import Gr00tPolicyServer, OpenpiPolicyServer, TcpPolicyServer


def add_server_args(parser: argparse.ArgumentParser) -> None:
    """The served model (``--task``, the model arguments, ``--latency``), the wire, address, batching, wire limits,
    time-outs and token (unset: the wire's server cfg's)."""
    parser.add_argument("--task", default="Isaac-Cartpole-Suspendable",
                        help="task of the embedded model or the RL actor (a checkpoint names its own)")
    add_import_arg(parser)
    add_model_args(parser)
    parser.add_argument("--expert", nargs="?", const="", default=None, help=argparse.SUPPRESS)  # 0.3
    parser.add_argument("--latency", default=None, type=latency,
                        help="emulated inference latency per model call: '0.2', '0.05+0.002n', 'gr1' or 'droid'")
    parser.add_argument("--wire", default=None, choices=WIRE_NAMES,
                        help="'tcp' (default): the project's wire (eval.py --remote HOST:PORT); 'openpi': openpi's"
                             " websocket protocol; 'gr00t': GR00T's ZeroMQ protocol (its PolicyClient, or --remote"
                             " gr00t://)")
    parser.add_argument("--protocol", default=None, choices=(*WIRE_NAMES, "project"), help=argparse.SUPPRESS)  # 0.3
    parser.add_argument("--keys", nargs="+", type=key_pair, default=None, metavar="KEY=PATH",
                        help="openpi: request keys renamed to observation paths, e.g. observation/state=policy;"
                             " gr00t: the state/video keys of the modality config, e.g. state.cartpole=policy"
                             " (default state.policy=policy)")
    parser.add_argument("--allow_kill", action="store_true", help="gr00t: let a client stop the server ('kill')")
    parser.add_argument("--host", default=None,
                        help="interface to listen on (default: loopback, 127.0.0.1; 0.0.0.0: all; beyond loopback a"
                             " token is needed)")
    parser.add_argument("--port", type=int_in(0, 65535), default=None,
                        help="TCP port (default: the wire's; 0: a free one)")
    parser.add_argument("--device", type=device, default="cpu", help="device the model runs on")
    parser.add_argument("--batch_wait_ms", type=float_in(0.0, 60_000.0), default=None,
                        help="merge concurrent requests into one model call, waiting at most this long for more"
                             " (default: the wire's: openpi batches, tcp and gr00t do not)")
    parser.add_argument("--max_batch_rows", type=int_in(1), default=None,
                        help="most env rows in one batched model call (default: BatchingCfg's)")
    parser.add_argument("--max_connections", type=int_in(1, 1024), default=None,
                        help="clients served at once, more are refused (default: the wire's)")
    parser.add_argument("--max_message_mb", type=float_in(0.0, 65536.0, low_open=True), default=None,
                        help="largest request [MiB]; the server holds at most this per connection (default:"
                             " WireLimitsCfg's)")
    parser.add_argument("--read_timeout", type=float_in(0.0, 3600.0, low_open=True), default=None,
                        help="longest time for a request to arrive whole, and for a new client's hello [s] (default:"
                             " the wire's)")
    parser.add_argument("--idle_timeout", type=float_in(0.0, 86400.0, low_open=True), default=None,
                        help="close a connection idle this long [s] (default: the wire's)")
    parser.add_argument("--token_file", type=existing_file, default=None,
                        help=f"file holding the shared token clients must send (default: ${TOKEN_ENV} if set;"
                             " openpi clients send it as their api_key)")
    parser.add_argument("--insecure_no_token", action="store_true",
                        help="listen beyond loopback without a token (a trusted network only)")


def resolve_server_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Check the server arguments together and open the served model's source (``parser.error`` on a problem):
    sets ``args.source`` (:class:`~isaaclab_suspend.runs.ChunkModelSource`), ``args.wire`` and ``args.token``,
    and makes ``args.keys`` a dict."""
    from .policy import deprecated, resolve_policy

    if args.protocol is not None:
        deprecated(f"--protocol {args.protocol}", f"--wire {'tcp' if args.protocol == 'project' else args.protocol}")
        args.wire = args.wire or ("tcp" if args.protocol == "project" else args.protocol)
    args.wire = args.wire or "tcp"
    if args.expert is not None:
        deprecated("--expert", "--model rl_actor (and --checkpoint PATH for another than the shipped expert)")
        if args.checkpoint and args.expert:
            parser.error("--checkpoint and --expert PATH both name the file: pass one")
        args.model, args.checkpoint = args.model or "rl_actor", args.checkpoint or args.expert or None
    if args.keys and args.wire == "tcp":
        parser.error("--keys needs --wire openpi or gr00t")
    if args.allow_kill and args.wire != "gr00t":
        parser.error("--allow_kill needs --wire gr00t")
    args.keys = dict(args.keys or ())
    args.virtual_latency = False  # resolve_policy reads it beside --latency
    resolve_policy(parser, args)
    args.token = os.environ.get(TOKEN_ENV) or None
    if args.token_file:
        with open(args.token_file) as file:
            args.token = file.read().strip()
        if not args.token:
            parser.error(f"--token_file '{args.token_file}' is empty")


def make_server(args: argparse.Namespace) -> TcpPolicyServer | OpenpiPolicyServer | Gr00tPolicyServer:
    """The server (of ``args.wire``) of the resolved ``args``' model
    (:func:`~isaaclab_suspend.runs.make_policy_server`), with the wire's server cfg's defaults for the options not
    given.

    Raises:
        ValueError, OSError: If the model cannot be built, the cfg is invalid or the address cannot be bound.
    """
    from ..runs import make_policy_server
    from ..serving import BatchingCfg, wire

    cfg = wire(args.wire).server_cfg()
    if args.batch_wait_ms is not None:
        cfg.batching = BatchingCfg(max_wait_s=args.batch_wait_ms / 1e3)
    if cfg.batching is not None and args.max_batch_rows is not None:
        cfg.batching.max_rows = args.max_batch_rows
    if args.keys:
        cfg.keys = args.keys
    if args.allow_kill:
        cfg.allow_kill = True
    for name, value in (("host", args.host), ("port", args.port), ("max_connections", args.max_connections),
                        ("read_timeout_s", args.read_timeout), ("idle_timeout_s", args.idle_timeout)):
        if value is not None:
            setattr(cfg, name, value)
    if args.max_message_mb is not None:
        cfg.limits.max_message_bytes = max(1, int(args.max_message_mb * 2**20))
    cfg.token, cfg.insecure_no_token = args.token, args.insecure_no_token
    return make_policy_server(args.source, cfg, verbose=getattr(args, "verbose", False))


def describe_server(args: argparse.Namespace, server: TcpPolicyServer | OpenpiPolicyServer | Gr00tPolicyServer
                    ) -> str:
    """What is served where, for the server's first line (``Serving ... at HOST:PORT: metadata``)."""
    batching = f", batching (wait {server.cfg.batching.max_wait_s * 1e3:g} ms)" if server.cfg.batching else ""
    host, port = server.address
    return (f"Serving {args.source.describe()} of {args.source.task} ({args.wire} wire{batching}) at {host}:{port}:"
            f" {server.metadata}{' (token required)' if server.cfg.token else ''}")
