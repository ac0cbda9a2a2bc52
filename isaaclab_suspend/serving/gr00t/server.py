"""Serve a chunk model with GR00T's ZeroMQ protocol, to GR00T's own ``PolicyClient`` (either generation) and
:class:`~isaaclab_suspend.serving.Gr00tChunkModel`.

GR00T's server is a REP socket answering one request at a time. This one is a ROUTER socket: the requests of
several clients are read as they come, each ``get_action`` goes to
:class:`~isaaclab_suspend.serving.BatchingChunkModel` (with :attr:`~ServerCfg.batching`, the requests of
a global-clock tick share one model call) and each reply goes back to its client as soon as it is ready.
Endpoints: ``ping``, ``get_modality_config`` (state / video keys of :attr:`Gr00tPolicyServerCfg.keys` with
``delta_indices`` ``[0]``, the action key with H of them, the language key if set), ``get_action`` (flat or
nested observation, answered in the same form and array encoding), ``reset`` (``{}``) and ``kill`` (refused
unless :attr:`Gr00tPolicyServerCfg.allow_kill`). Errors are GR00T's ``{"error": message}``.

Real-time chunking: a ``get_action`` whose ``options`` carry N1.7's inpainting options and the previous chunk
(:mod:`~isaaclab_suspend.serving.gr00t.rtc`) passes the model the committed prefix and each row's delay when
the model accepts a prefix; a model that does not ignores the options, as GR00T's own policy does. Batched
requests keep each row's prefix (:class:`~isaaclab_suspend.serving.BatchingChunkModel`).

What hostile peers can make it hold is bounded: every array of a request is checked against
:attr:`Gr00tPolicyServerCfg.max_batch` and the wire limits before anything is built from it, a message is
decoded in a worker thread with its objects counted first (modality configs are never decoded here), and the
bytes of messages not yet whole are measured per TCP connection from the kernel (``TCP_INFO``, through
ZeroMQ's monitor): past :attr:`Gr00tPolicyServerCfg.max_buffered_bytes` for all together, or not whole within
``read_timeout_s``, a connection is closed and ZeroMQ frees what it held.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import os
import socket
import struct
import threading
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
import zmq
import zmq.asyncio
import zmq.utils.monitor

from isaaclab.utils import configclass

from ...chunking.model import ChunkModel
from ...tensor_tree import unflatten_names
from . import codec
from .rtc import options_prefix
from ..batching import BatchingCfg, BatchingChunkModel
from ..base import ServerCfg

logger = logging.getLogger(__name__)

UNFINISHED_BYTES = 4096
"""Bytes a connection may have sent since its last whole message before they count as an unfinished message (the
ZeroMQ greeting and handshake take about 100)."""

SWEEP_S = 0.02
"""How often the connections' unfinished messages are measured [s]: what a peer can add past the budget is what
arrives meanwhile (a sweep of 256 connections takes about 1 ms)."""


class _Peer:
    """One TCP connection of the ROUTER socket, seen through a duplicate of its descriptor: the kernel's count of
    the bytes it received (``TCP_INFO``) tells how much of an unfinished message ZeroMQ holds for it, and a
    shutdown makes ZeroMQ close it and free that message."""

    __slots__ = ("sock", "address", "mark", "started", "held")

    def __init__(self, sock: socket.socket, address: str):
        self.sock, self.address = sock, address
        self.mark = 0  # bytes received when its last whole message was read
        self.started: float | None = None  # when its unfinished message began (as first seen)
        self.held = 0  # bytes received since its last whole message, at the last sweep

    def received(self) -> int:
        """Bytes the kernel received on the connection so far (``tcpi_bytes_received``)."""
        return struct.unpack_from("<Q", self.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 232), 128)[0]


class Gr00tPolicyServer:
    """Serves a chunk model to GR00T clients; the socket runs in an event loop of its own thread, the model in
    the batching worker thread.

    Args:
        model: The chunk model, ``model(obs_rows, env_ids) -> (B, H, action_dim)`` (with ``accepts_prefix``,
            also called with the ``prefix=`` and ``delay=`` of real-time chunking options).
        cfg: Address, keys, batching, limits and token.

    Raises:
        ValueError: If the cfg is invalid, or the server would listen beyond loopback without a token.
        OSError: If the address cannot be bound (a port in use), as the other servers raise it.
    """

    def __init__(self, model: ChunkModel, cfg: Gr00tPolicyServerCfg):
        cfg.validate()
        cfg.check_exposure(cfg.host)
        self.cfg = cfg
        """The server configuration."""
        self.batcher = BatchingChunkModel(model, cfg.batching or BatchingCfg(max_wait_s=0.0, max_rows=1))
        """The model behind its batcher (``batcher.calls``: model calls so far)."""
        self.requests = 0
        """``get_action`` requests answered so far."""
        self._clients: dict[bytes, float] = {}
        self._pending = 0
        self._stopped = threading.Event()
        self._context = zmq.asyncio.Context()
        self._socket = self._context.socket(zmq.ROUTER)
        for option, value in ((zmq.LINGER, 0), (zmq.MAXMSGSIZE, cfg.limits.max_message_bytes),
                              (zmq.HANDSHAKE_IVL, max(1, int(cfg.read_timeout_s * 1e3)))):
            self._socket.setsockopt(option, value)
        self._peers: dict[int, _Peer] = {}  # ZeroMQ's descriptor of each TCP connection -> the connection
        self._budget = cfg.max_buffered_bytes or 4 * cfg.limits.max_message_bytes
        self._monitor = self._socket.get_monitor_socket(zmq.EVENT_ACCEPTED | zmq.EVENT_DISCONNECTED)
        try:
            port = self._socket.bind_to_random_port(f"tcp://{cfg.host}") if cfg.port == 0 else cfg.port
            if cfg.port:
                self._socket.bind(f"tcp://{cfg.host}:{cfg.port}")
        except BaseException as err:
            self._monitor.close()
            self._socket.close()
            self.batcher.close()
            if isinstance(err, zmq.ZMQError):
                raise OSError(err.errno, f"cannot listen at {cfg.host}:{cfg.port}: {err.strerror}") from None
            raise
        self.address: tuple[str, int] = (cfg.host, port)
        """``(host, port)`` the server listens on (the bound port when ``cfg.port`` is 0)."""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_until_complete, args=(self._serve(),),
                                        name="gr00t-server", daemon=True)
        self._thread.start()

    @property
    def metadata(self) -> dict:
        """What the first line of ``serve_policy.py`` shows: task, H and the key mapping."""
        return {"task": self.cfg.task, "chunk_length": self.cfg.chunk_length, "keys": dict(self.cfg.keys)}

    def modality_config(self) -> dict:
        """The reply of ``get_modality_config``: one config per modality with keys."""
        config = {m: codec.modality_config([0], [k.partition(".")[2] for k in self.cfg.keys if
                                                        k.startswith(m + ".")]) for m in ("state", "video")}
        config = {m: c for m, c in config.items() if c["as_json"]["modality_keys"]}
        config["action"] = codec.modality_config(list(range(self.cfg.chunk_length)), [self.cfg.action_key])
        if self.cfg.language_key:
            config["language"] = codec.modality_config([0], [self.cfg.language_key])
        return config

    def serve_forever(self) -> None:
        """Block until :meth:`close`, a ``kill`` (if allowed) or Ctrl-C in the calling thread."""
        while not self._stopped.wait(0.2):
            pass

    def start(self) -> Gr00tPolicyServer:
        """The server already serves from its own thread; returns it (for ``with``)."""
        return self

    def close(self) -> None:
        """Stop serving, close the socket and stop the batching worker."""
        if not self._thread.is_alive() and self._socket.closed:
            return
        self._stopped.set()
        self._thread.join()
        self._socket.disable_monitor()
        self._monitor.close()
        self._socket.close()
        self._context.term()
        for peer in self._peers.values():
            peer.sock.close()
        self.batcher.close()

    def __enter__(self) -> Gr00tPolicyServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    """
    Internals.
    """

    @property
    def buffered_bytes(self) -> int:
        """Bytes of unfinished messages the connections held at the last sweep, all together."""
        return sum(peer.held for peer in self._peers.values())

    async def _serve(self) -> None:
        tasks = set()
        watcher = asyncio.ensure_future(self._watch())
        next_sweep = 0.0
        while not self._stopped.is_set():
            if time.monotonic() >= next_sweep:
                self._sweep()
                next_sweep = time.monotonic() + SWEEP_S
            if not await self._socket.poll(min(100, max(1, int(1e3 * (next_sweep - time.monotonic()))))):
                continue
            frames = await self._socket.recv_multipart(copy=False)
            self._finished(frames[-1].get(zmq.SRCFD))
            if len(frames) != 3 or frames[1].bytes != b"":  # not a REQ envelope: nothing can be answered
                logger.warning("GR00T server: dropped a message of %d frames (not a REQ client)", len(frames))
                continue
            identity = frames[0].bytes
            if self._pending >= self.cfg.max_connections:
                await self._send(identity, {"error": f"busy: {self._pending} requests in flight, try again later"})
                continue
            self._pending += 1
            task = asyncio.ensure_future(self._answer(identity, frames[2].buffer))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        watcher.cancel()
        for task in list(tasks):
            task.cancel()
        for identity in list(self._clients):
            self.batcher.forget_client(identity)
            del self._clients[identity]

    async def _watch(self) -> None:
        """Follow the ROUTER socket's TCP connections (ZeroMQ's monitor events)."""
        while True:
            event = zmq.utils.monitor.parse_monitor_message(await self._monitor.recv_multipart())
            fd = event["value"]
            if fd in self._peers:  # disconnected, or its descriptor taken by a new connection
                self._peers.pop(fd).sock.close()
            if event["event"] == zmq.EVENT_ACCEPTED:
                try:
                    sock = socket.socket(fileno=os.dup(fd))
                except OSError:  # already closed by ZeroMQ
                    continue
                try:
                    self._peers[fd] = _Peer(sock, "%s:%d" % sock.getpeername()[:2])
                except OSError:  # not connected any more
                    sock.close()

    def _finished(self, fd: int) -> None:
        """A whole message came from the connection of ``fd``: what it sent so far is no unfinished message."""
        peer = self._peers.get(fd)
        if peer is not None:
            with contextlib.suppress(OSError):
                peer.mark, peer.started, peer.held = peer.received(), None, 0

    def _sweep(self) -> None:
        """Drop connections whose unfinished message is not whole within ``read_timeout_s``, then, past the
        budget of :attr:`Gr00tPolicyServerCfg.max_buffered_bytes`, those whose unfinished message began first."""
        now = time.monotonic()
        for peer in list(self._peers.values()):
            try:
                peer.held = peer.received() - peer.mark
            except OSError:
                peer.held = 0
                continue
            if peer.held < UNFINISHED_BYTES:
                peer.held = 0
                continue
            peer.started = peer.started or now
            if now - peer.started > self.cfg.read_timeout_s:
                self._drop(peer, f"a message stalled: {peer.held} bytes arrived, not whole within"
                                 f" {self.cfg.read_timeout_s:g} s")
        while (held := self.buffered_bytes) > self._budget:
            self._drop(min((p for p in self._peers.values() if p.held), key=lambda p: p.started),
                       f"unfinished messages hold {held} bytes, over the server's budget of {self._budget}; its"
                       " began first")

    def _drop(self, peer: _Peer, reason: str) -> None:
        """Close a connection (ZeroMQ frees what it holds of it), with one log line."""
        logger.warning("GR00T server: dropped %s: %s", peer.address, reason)
        peer.held, peer.started = 0, None
        with contextlib.suppress(OSError):
            peer.sock.shutdown(socket.SHUT_RDWR)

    async def _send(self, identity: bytes, reply: Any, encoding: str = codec.NPY) -> None:
        await self._socket.send_multipart([identity, b"", codec.packb(reply, encoding)])

    def _count_client(self, identity: bytes) -> None:
        """Register a client (its ROUTER identity: ZeroMQ tells no connection apart otherwise) with the batcher
        at its first message, so that a batch closes once every client has a request waiting, and forget it
        after ``idle_timeout_s`` without one."""
        now = time.monotonic()
        if identity not in self._clients:
            self.batcher.register_client(identity)
            logger.info("GR00T server: client %s connected (its first request)", identity.hex())
        self._clients[identity] = now
        for idle in [i for i, seen in self._clients.items() if now - seen > self.cfg.idle_timeout_s]:
            del self._clients[idle]
            self.batcher.forget_client(idle)
            logger.info("GR00T server: client %s gone (no request for %g s)", idle.hex(), self.cfg.idle_timeout_s)

    async def _answer(self, identity: bytes, message: memoryview) -> None:
        encoding = codec.NPY
        try:
            # in a worker thread, never in the loop that reads the other clients' requests; no copy of the message
            request, encoding = await asyncio.to_thread(codec.unpackb, message)
            reply = await self._dispatch(identity, request)
        except Exception as err:  # GR00T's way: the error as a map, the server lives on
            reply = {"error": f"{type(err).__name__}: {err}"}
        finally:
            self._pending -= 1
        try:
            await self._send(identity, reply, encoding)
        except zmq.ZMQError as err:
            logger.warning("GR00T server: could not reply: %s", err)

    async def _dispatch(self, identity: bytes, request: Any) -> Any:
        if not isinstance(request, Mapping):
            raise ValueError(f"A request must be a map, got {type(request).__name__}.")
        if self.cfg.token:
            token = request.get("api_token")
            if not isinstance(token, str) or not hmac.compare_digest(token.encode(), self.cfg.token.encode()):
                return {"error": "Unauthorized: Invalid API token"}
        self._count_client(identity)
        endpoint = request.get("endpoint", "get_action")
        data = request.get("data") or {}
        if endpoint == "ping":
            return {"status": "ok", "message": "Server is running", "task": self.cfg.task}
        if endpoint == "get_modality_config":
            return self.modality_config()
        if endpoint == "reset":
            return {}
        if endpoint == "kill":
            if not self.cfg.allow_kill:
                return {"error": "kill is refused: this server was started without --allow_kill"}
            self._stopped.set()
            return None
        if endpoint != "get_action":
            return {"error": f"Unknown endpoint: {str(endpoint)[:40]}"}
        if not isinstance(data, Mapping) or not isinstance(data.get("observation"), Mapping):
            raise ValueError("get_action needs data {'observation': {...}, 'options': ...}.")
        rows, batch, flat = observation_rows(data["observation"], self.cfg.keys, self.cfg.device, self.cfg.max_batch,
                                             self.cfg.limits.max_array_elements)
        env_ids = torch.arange(batch, device=self.cfg.device)
        prefix = options_prefix(data.get("options"), [self.cfg.action_key], batch, self.cfg.chunk_length,
                                self.cfg.action_dim, self.cfg.device) if self.batcher.accepts_prefix else {}
        chunk = await asyncio.wrap_future(self.batcher.submit(rows, env_ids, identity, **prefix))
        self.requests += 1
        actions = chunk.detach().cpu().numpy().astype(np.float32)
        key = f"action.{self.cfg.action_key}" if flat else self.cfg.action_key
        return [{key: actions}, {}]

def observation_rows(observation: Mapping, keys: Mapping[str, str], device: str = "cpu", max_batch: int = 1024,
                     max_elements: int = 64 * 2**20) -> tuple[dict, int, bool]:
    """A GR00T observation as a model's ``obs_rows``: the latest step of each GR00T key of ``keys`` under its
    observation path (nested by ``/``), with the batch size B and whether it came flat. Shape of each term: (B, ...).

    Every array is checked before anything is built from it: B in 1 .. ``max_batch`` and one B for all keys, at
    least one step T, no zero-size feature, at most ``max_elements`` elements (a zero-width array passes a byte
    check with any B, and the server would then build B rows).

    Raises:
        KeyError: If a key of ``keys`` is missing.
        ValueError: If an array is not (B, T, ...) within those bounds.
    """
    flat = not any(isinstance(observation.get(m), Mapping) for m in ("state", "video"))
    arrays, batch = {}, None
    for key, path in keys.items():
        modality, _, name = key.partition(".")
        value = observation.get(key) if flat else (observation.get(modality) or {}).get(name)
        if value is None:
            raise KeyError(f"The observation lacks '{key}' (it has {sorted(observation)[:20]}).")
        if not isinstance(value, np.ndarray) or value.ndim < 3 or batch not in (None, value.shape[0]):
            raise ValueError(f"'{key}' must be an array of shape (B, T, ...) with one B for all keys, got"
                             f" {getattr(value, 'shape', type(value).__name__)}.")
        if not (0 < value.shape[0] <= max_batch and value.size and value.size <= max_elements):
            raise ValueError(f"'{key}' has shape {value.shape}: B must be 1 to {max_batch} (max_batch), no dimension"
                             f" 0, at most {max_elements} elements (limits.max_array_elements).")
        batch = value.shape[0]
        arrays[path] = value
    if not batch:
        raise ValueError("An observation of no key.")
    rows = {path: torch.tensor(value[:, -1], device=device) for path, value in arrays.items()}
    return unflatten_names(rows), batch, flat


@configclass
class Gr00tPolicyServerCfg(ServerCfg):
    """Configuration of :class:`Gr00tPolicyServer`: that of :class:`TcpPolicyServer` with the GR00T keys."""

    class_type: type = Gr00tPolicyServer
    """The class this cfg configures."""
    keys: dict[str, str] = {"state.policy": "policy"}
    """GR00T key (``state.<name>`` or ``video.<name>``) -> observation path of the model (``group`` or
    ``group/term``), e.g. ``{"state.cartpole": "policy"}``."""
    action_key: str = "action"
    """The one action key of the modality config (flat replies: ``action.<action_key>``)."""
    language_key: str | None = None
    """A language key to announce (its strings are not passed to the model); None: no language modality."""
    allow_kill: bool = False
    """Whether the ``kill`` endpoint stops the server (else it is refused)."""
    max_connections: int = 256
    """Most requests in flight at once; one more is answered with a ``busy`` error."""
    max_batch: int = 1024
    """Most env rows B of one ``get_action``; a request with more is refused before anything is built from it."""
    max_buffered_bytes: int | None = None
    """Bytes of unfinished messages held for all connections together; past it the connection whose unfinished
    message began first is closed (None: 4x ``limits.max_message_bytes``)."""
    idle_timeout_s: float = 600.0
    """A client without a request for this long no longer counts for closing batches [s]."""

    def validate_config(self) -> None:
        """Raise a ``ValueError`` naming the first invalid field."""
        super().validate_config()
        bad = [k for k in self.keys or {} if k.partition(".")[0] not in ("state", "video") or not k.partition(".")[2]]
        if not self.keys or bad:
            raise ValueError(f"Gr00tPolicyServerCfg.keys must map 'state.<name>' or 'video.<name>' keys to"
                             f" observation paths, got {bad or self.keys} (--keys state.cartpole=policy).")
        if isinstance(self.max_batch, bool) or not isinstance(self.max_batch, int) or self.max_batch < 1:
            raise ValueError(f"Gr00tPolicyServerCfg.max_batch must be a positive integer, got {self.max_batch!r}.")
        budget = self.max_buffered_bytes
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int)
                                   or budget < self.limits.max_message_bytes):
            raise ValueError(f"Gr00tPolicyServerCfg.max_buffered_bytes must be None or an integer of at least"
                             f" limits.max_message_bytes ({self.limits.max_message_bytes}), got {budget!r}.")
