"""The policy server's arguments (``scripts/serve_policy.py``) and the server they name.

Both protocols share the wire limits, time-outs and token of :class:`~isaaclab_suspend.policies.PolicyServerCfg`;
options left unset take the defaults of the protocol's cfg (openpi: port 8000, 256 connections, 600 s idle).
"""

from __future__ import annotations

import argparse
import os

from ..learning import load_chunk_policy
from ..policies import LatencyCfg, LatencyEmulator
from ..serving import (
    BatchingCfg,
    Gr00tPolicyServer,
    Gr00tPolicyServerCfg,
    OpenpiPolicyServer,
    OpenpiPolicyServerCfg,
    PolicyServer,
    PolicyServerCfg,
    WireLimitsCfg,
)
from ..policies.embedded import make_default_model, tasks_with_chunk_model
from ..serving.remote import TOKEN_ENV
from .errors import user_errors
from .policy import resolve_task
from .arguments import add_import_arg, device, existing_checkpoint, existing_file, float_in, int_in, key_pair, latency

PROTOCOLS = {"project": PolicyServerCfg, "openpi": OpenpiPolicyServerCfg, "gr00t": Gr00tPolicyServerCfg}
"""``--protocol`` choices: the cfg of each protocol's server."""


def add_server_args(parser: argparse.ArgumentParser) -> None:
    """The served model (``--task --checkpoint --expert --chunk --latency``), the protocol, address, batching, wire
    limits, time-outs and token."""
    project, openpi = PolicyServerCfg(), OpenpiPolicyServerCfg()
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
    parser.add_argument("--protocol", default="project", choices=sorted(PROTOCOLS),
                        help="'project': RemoteChunkModel's TCP protocol; 'openpi': openpi's websocket protocol;"
                             " 'gr00t': GR00T's ZeroMQ protocol (its PolicyClient, or --remote gr00t://)")
    parser.add_argument("--keys", nargs="+", type=key_pair, default=None, metavar="KEY=PATH",
                        help="openpi: request keys renamed to observation paths, e.g. observation/state=policy;"
                             " gr00t: the state/video keys of the modality config, e.g. state.cartpole=policy"
                             " (default state.policy=policy)")
    parser.add_argument("--allow_kill", action="store_true", help="gr00t: let a client stop the server ('kill')")
    parser.add_argument("--host", default=project.host,
                        help="interface to listen on (0.0.0.0: all; beyond loopback a token is needed)")
    parser.add_argument("--port", type=int_in(0, 65535), default=None,
                        help=f"TCP port (default {project.port}, openpi: {openpi.port}; 0: a free one)")
    parser.add_argument("--device", type=device, default="cpu", help="device the model runs on")
    parser.add_argument("--batch_wait_ms", type=float_in(0.0, 60_000.0), default=None,
                        help="merge concurrent requests into one model call, waiting at most this long for more"
                             f" (default: project: off, openpi: {openpi.batching.max_wait_s * 1e3:g} ms)")
    parser.add_argument("--max_batch_rows", type=int_in(1), default=openpi.batching.max_rows,
                        help="most env rows in one batched model call")
    parser.add_argument("--max_connections", type=int_in(1, 1024), default=None,
                        help=f"clients served at once, more are refused (default {project.max_connections}, openpi:"
                             f" {openpi.max_connections})")
    parser.add_argument("--max_message_mb", type=float_in(0.0, 65536.0, low_open=True),
                        default=WireLimitsCfg().max_message_bytes / 2**20,
                        help="largest request [MiB]; the server holds at most this per connection")
    parser.add_argument("--read_timeout", type=float_in(0.0, 3600.0, low_open=True), default=project.read_timeout_s,
                        help="longest time for a request to arrive whole, and for a new client's hello [s]")
    parser.add_argument("--idle_timeout", type=float_in(0.0, 86400.0, low_open=True), default=None,
                        help=f"close a connection idle this long [s] (default {project.idle_timeout_s:g}, openpi:"
                             f" {openpi.idle_timeout_s:g})")
    parser.add_argument("--token_file", type=existing_file, default=None,
                        help=f"file holding the shared token clients must send (default: ${TOKEN_ENV} if set;"
                             " openpi clients send it as their api_key)")
    parser.add_argument("--insecure_no_token", action="store_true",
                        help="listen beyond loopback without a token (a trusted network only)")


def resolve_server_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Check the server arguments together and read an ``--expert`` file (weights only) (``parser.error`` on a
    problem); sets ``args.token`` and makes ``args.keys`` a dict."""
    if args.checkpoint and args.expert is not None:
        parser.error("--checkpoint and --expert both name the policy: pass one")
    if args.keys and args.protocol == "project":
        parser.error("--keys needs --protocol openpi or gr00t")
    if args.allow_kill and args.protocol != "gr00t":
        parser.error("--allow_kill needs --protocol gr00t")
    args.keys = dict(args.keys or ())
    resolve_task(args)
    with user_errors():  # a task without a planner or a bad file stops the server before its env is built
        if not args.checkpoint and args.expert is None and args.task not in tasks_with_chunk_model():
            raise ValueError(f"task '{args.task}' has no embedded chunk model; tasks with one:"
                             f" {tasks_with_chunk_model()} (or serve --checkpoint, --expert)")
        if args.expert:
            from ..rl.checkpoint_policy import read_checkpoint

            read_checkpoint(args.expert)
    args.token = os.environ.get(TOKEN_ENV) or None
    if args.token_file:
        with open(args.token_file) as file:
            args.token = file.read().strip()
        if not args.token:
            parser.error(f"--token_file '{args.token_file}' is empty")


def load_expert(path: str, task: str, device: str = "cpu"):
    """The rsl_rl or skrl expert at ``path`` (empty: the task's shipped one), built on a one-env instance of
    ``task`` on ``device`` (where the served requests' observations go), and its action dim."""
    from ..rl import load_checkpoint_policy
    from ..rl.checkpoint_policy import shipped_checkpoint
    from ..utils import open_env

    with open_env(task, 1, device=device) as env:
        model = load_checkpoint_policy(path or shipped_checkpoint(task), env, task=task)
        return model, env.action_manager.total_action_dim


def make_server(args: argparse.Namespace) -> PolicyServer | OpenpiPolicyServer | Gr00tPolicyServer:
    """The server (of ``args.protocol``) of the checkpoint, expert or embedded model that the resolved ``args``
    name.

    Raises:
        ValueError, OSError: If the model cannot be loaded, the cfg is invalid or the address cannot be bound.
    """
    cfg = PROTOCOLS[args.protocol]()
    if args.checkpoint:
        model = load_chunk_policy(args.checkpoint, args.device)
        cfg.chunk_length, cfg.action_dim, cfg.task = model.chunk_length, model.action_dim, model.task or None
    elif args.expert is not None:
        model, cfg.action_dim = load_expert(args.expert, args.task, args.device)
        cfg.chunk_length, cfg.task = 1, args.task
    else:
        model = make_default_model(args.task, args.chunk)
        cfg.chunk_length, cfg.task = args.chunk, args.task
    if args.latency:
        model = LatencyEmulator(model, LatencyCfg.parse(args.latency))
    if args.batch_wait_ms is not None:
        cfg.batching = BatchingCfg(max_wait_s=args.batch_wait_ms / 1e3, max_rows=args.max_batch_rows)
    elif cfg.batching is not None:
        cfg.batching.max_rows = args.max_batch_rows
    if args.keys:
        cfg.keys = args.keys
    if args.allow_kill:
        cfg.allow_kill = True
    cfg.host, cfg.device, cfg.read_timeout_s = args.host, args.device, args.read_timeout
    for name, value in (("port", args.port), ("max_connections", args.max_connections),
                        ("idle_timeout_s", args.idle_timeout)):
        if value is not None:
            setattr(cfg, name, value)
    cfg.limits.max_message_bytes = max(1, int(args.max_message_mb * 2**20))
    cfg.token, cfg.insecure_no_token = args.token, args.insecure_no_token
    return cfg.class_type(model, cfg)


def describe_server(args: argparse.Namespace, server: PolicyServer | OpenpiPolicyServer | Gr00tPolicyServer) -> str:
    """What is served where, for the server's first line (``Serving ... at HOST:PORT: metadata``)."""
    policy = args.checkpoint or (f"the expert {args.expert or 'shipped'} of {args.task}" if args.expert is not None
                                 else f"the embedded model of {args.task}")
    batching = f", batching (wait {server.cfg.batching.max_wait_s * 1e3:g} ms)" if server.cfg.batching else ""
    host, port = server.address
    return (f"Serving {policy} ({args.protocol} protocol{batching}) at {host}:{port}: {server.metadata}"
            f"{' (token required)' if server.cfg.token else ''}")
