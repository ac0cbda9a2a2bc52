"""The policy server's arguments (``scripts/serve_policy.py``) and the server they name.

The protocols share the wire limits, time-outs and token of :class:`~isaaclab_suspend.serving.PolicyServerCfg`;
options left unset take the defaults of the protocol's cfg (:class:`~isaaclab_suspend.serving.PolicyServerCfg`,
:class:`~isaaclab_suspend.serving.OpenpiPolicyServerCfg`, :class:`~isaaclab_suspend.serving.Gr00tPolicyServerCfg`),
which the server's first line shows. Building the parser imports nothing heavy; the servers are imported when one
is made.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from ..names import SERVER_PROTOCOLS, TOKEN_ENV
from .errors import user_errors
from .arguments import add_import_arg, device, existing_checkpoint, existing_file, float_in, int_in, key_pair, latency

if TYPE_CHECKING:
    from ..serving import Gr00tPolicyServer, OpenpiPolicyServer, PolicyServer


def protocols() -> dict[str, type]:
    """``--protocol`` choices (:data:`~isaaclab_suspend.names.SERVER_PROTOCOLS`): the cfg of each protocol's
    server."""
    from ..serving import Gr00tPolicyServerCfg, OpenpiPolicyServerCfg, PolicyServerCfg

    return {"gr00t": Gr00tPolicyServerCfg, "openpi": OpenpiPolicyServerCfg, "project": PolicyServerCfg}


def add_server_args(parser: argparse.ArgumentParser) -> None:
    """The served model (``--task --checkpoint --expert --chunk --latency``), the protocol, address, batching, wire
    limits, time-outs and token (unset: the protocol cfg's)."""
    parser.add_argument("--task", default="Isaac-Cartpole-Suspendable",
                        help="task of the embedded model or the expert (ignored with --checkpoint)")
    add_import_arg(parser)
    parser.add_argument("--checkpoint", type=existing_checkpoint, default=None,
                        help="chunk policy checkpoint or LeRobot pretrained_model directory (default: the embedded"
                             " model)")
    parser.add_argument("--expert", nargs="?", const="", default=None, metavar="PATH",
                        help="an rsl_rl or skrl checkpoint of --task as a chunk model with H = 1 (no PATH: the task's"
                             " shipped expert)")
    parser.add_argument("--chunk", type=int_in(1, 4096), default=16, help="H of the embedded model")
    parser.add_argument("--latency", default=None, type=latency,
                        help="emulated inference latency per model call: '0.2', '0.05+0.002n', 'gr1' or 'droid'")
    parser.add_argument("--protocol", default="project", choices=SERVER_PROTOCOLS,
                        help="'project': RemoteChunkModel's TCP protocol; 'openpi': openpi's websocket protocol;"
                             " 'gr00t': GR00T's ZeroMQ protocol (its PolicyClient, or --remote gr00t://)")
    parser.add_argument("--keys", nargs="+", type=key_pair, default=None, metavar="KEY=PATH",
                        help="openpi: request keys renamed to observation paths, e.g. observation/state=policy;"
                             " gr00t: the state/video keys of the modality config, e.g. state.cartpole=policy"
                             " (default state.policy=policy)")
    parser.add_argument("--allow_kill", action="store_true", help="gr00t: let a client stop the server ('kill')")
    parser.add_argument("--host", default=None,
                        help="interface to listen on (default: loopback, 127.0.0.1; 0.0.0.0: all; beyond loopback a"
                             " token is needed)")
    parser.add_argument("--port", type=int_in(0, 65535), default=None,
                        help="TCP port (default: the protocol's; 0: a free one)")
    parser.add_argument("--device", type=device, default="cpu", help="device the model runs on")
    parser.add_argument("--batch_wait_ms", type=float_in(0.0, 60_000.0), default=None,
                        help="merge concurrent requests into one model call, waiting at most this long for more"
                             " (default: the protocol's: openpi batches, project and gr00t do not)")
    parser.add_argument("--max_batch_rows", type=int_in(1), default=None,
                        help="most env rows in one batched model call (default: BatchingCfg's)")
    parser.add_argument("--max_connections", type=int_in(1, 1024), default=None,
                        help="clients served at once, more are refused (default: the protocol's)")
    parser.add_argument("--max_message_mb", type=float_in(0.0, 65536.0, low_open=True), default=None,
                        help="largest request [MiB]; the server holds at most this per connection (default:"
                             " WireLimitsCfg's)")
    parser.add_argument("--read_timeout", type=float_in(0.0, 3600.0, low_open=True), default=None,
                        help="longest time for a request to arrive whole, and for a new client's hello [s] (default:"
                             " the protocol's)")
    parser.add_argument("--idle_timeout", type=float_in(0.0, 86400.0, low_open=True), default=None,
                        help="close a connection idle this long [s] (default: the protocol's)")
    parser.add_argument("--token_file", type=existing_file, default=None,
                        help=f"file holding the shared token clients must send (default: ${TOKEN_ENV} if set;"
                             " openpi clients send it as their api_key)")
    parser.add_argument("--insecure_no_token", action="store_true",
                        help="listen beyond loopback without a token (a trusted network only)")


def resolve_server_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Check the server arguments together and open the served model's source (``parser.error`` on a problem):
    sets ``args.source`` (:class:`~isaaclab_suspend.runs.ChunkModelSource`) and ``args.token``, and makes
    ``args.keys`` a dict."""
    if args.checkpoint and args.expert is not None:
        parser.error("--checkpoint and --expert both name the policy: pass one")
    if args.keys and args.protocol == "project":
        parser.error("--keys needs --protocol openpi or gr00t")
    if args.allow_kill and args.protocol != "gr00t":
        parser.error("--allow_kill needs --protocol gr00t")
    from .. import runs
    from ..lerobot.policy import is_lerobot_checkpoint
    from ..chunking import LatencyCfg
    from .policy import resolve_task

    args.keys = dict(args.keys or ())
    resolve_task(args)
    if args.checkpoint:
        cfg_type = runs.LeRobotModelCfg if is_lerobot_checkpoint(args.checkpoint) else runs.ChunkPolicyModelCfg
        model_cfg = cfg_type(path=args.checkpoint)
    elif args.expert is not None:
        model_cfg = runs.RlActorModelCfg(path=args.expert or None)
    else:
        model_cfg = runs.EmbeddedModelCfg(chunk_length=args.chunk)
    latency = LatencyCfg.parse(args.latency) if args.latency else None
    with user_errors():  # a task without a planner or a bad file stops the server before its env is built
        args.source = runs.ChunkModelSource(model_cfg, args.task, args.device, latency)
    args.token = os.environ.get(TOKEN_ENV) or None
    if args.token_file:
        with open(args.token_file) as file:
            args.token = file.read().strip()
        if not args.token:
            parser.error(f"--token_file '{args.token_file}' is empty")


def make_server(args: argparse.Namespace) -> PolicyServer | OpenpiPolicyServer | Gr00tPolicyServer:
    """The server (of ``args.protocol``) of the resolved ``args``' model
    (:func:`~isaaclab_suspend.runs.make_policy_server`), with the protocol cfg's defaults for the options not given.

    Raises:
        ValueError, OSError: If the model cannot be built, the cfg is invalid or the address cannot be bound.
    """
    from ..runs import make_policy_server
    from ..serving import BatchingCfg

    cfg = protocols()[args.protocol]()
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
    return make_policy_server(args.source, cfg)


def describe_server(args: argparse.Namespace, server: PolicyServer | OpenpiPolicyServer | Gr00tPolicyServer) -> str:
    """What is served where, for the server's first line (``Serving ... at HOST:PORT: metadata``)."""
    policy = args.checkpoint or (f"the expert {args.expert or 'shipped'} of {args.task}" if args.expert is not None
                                 else f"the embedded model of {args.task}")
    batching = f", batching (wait {server.cfg.batching.max_wait_s * 1e3:g} ms)" if server.cfg.batching else ""
    host, port = server.address
    return (f"Serving {policy} ({args.protocol} protocol{batching}) at {host}:{port}: {server.metadata}"
            f"{' (token required)' if server.cfg.token else ''}")
