"""Serve a chunk model with openpi's websocket protocol, so that openpi clients (``openpi-client``'s
``WebsocketClientPolicy``, robot runtimes, :class:`~isaaclab_suspend.serving.OpenpiChunkModel`) can call it.

The protocol is openpi's ``WebsocketPolicyServer``'s: on connect the server sends one msgpack frame of
metadata; each binary frame is then ONE observation (no batch dim) in :mod:`.msgpack_arrays` encoding, answered
with ``{"actions": (H, action_dim), "server_timing": {...}, "policy_timing": {...}}``; an error is sent back as
the traceback in a text frame, then the connection is closed with code 1011. ``GET /healthz`` answers 200.
With :attr:`~ServerCfg.token` set, a handshake must carry one ``Authorization: Api-Key <token>`` (what
``WebsocketClientPolicy(api_key=...)`` sends), else it is refused with 401 (400 for two of them); the wire
limits, connection cap, time-outs and the loopback rule are :class:`ServerCfg`'s.

What hostile peers can make it hold is bounded: a connection's reading pauses while its request is served (no
pipelined messages pile up), every byte received and not yet answered counts against one budget
(:attr:`OpenpiPolicyServerCfg.max_buffered_bytes`; past it the connection whose unfinished message began
first is closed), a message begun must arrive whole within ``read_timeout_s``, a full server closes its
idlest connection to admit a new one, and a message is decoded (its objects counted first, see
:mod:`.msgpack_arrays`) in a worker thread, never in the event loop that serves the other clients.

A request's keys are observation paths of the model (``group`` or ``group/term``; e.g. ``{"policy": float32
(obs_dim,)}`` for Cartpole), or openpi keys renamed by :attr:`OpenpiPolicyServerCfg.keys`. Strings (the
``prompt``) are not passed to the model. The observations of concurrent requests, one per env, go through
:class:`~isaaclab_suspend.serving.BatchingChunkModel`, so the envs of a global-clock tick share one model call.
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import http
import logging
import threading
import time
import traceback
from collections.abc import Mapping

import numpy as np
import torch
import websockets
from websockets.asyncio.server import ServerConnection, serve
from websockets.frames import CloseCode
from websockets.http11 import Request, Response

from isaaclab.utils import configclass

from ...tensor_tree import flatten_names, unflatten_names
from .. import msgpack_arrays
from ..batching import BatchingCfg, BatchingChunkModel
from ...chunking.model import ChunkModel
from ..base import ServerCfg, peer_name

logger = logging.getLogger(__name__)


class _Connection(ServerConnection):
    """A websocket connection that reports every received chunk to its server, which accounts the bytes it
    holds: ``pending`` (in the frame parser and queue), ``serving`` (the message being answered)."""

    def __init__(self, *args, owner: OpenpiPolicyServer, **kwargs):
        super().__init__(*args, **kwargs)
        self.owner = owner
        self.pending = self.serving = 0
        self.started: float | None = None  # when its unfinished message began
        self.since = time.monotonic()  # when it last became idle
        self.released = False

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self.owner._all.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.owner._all.discard(self)
        self.owner._release(self)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self.owner._account(self)

    def held_bytes(self) -> int:
        """Bytes received and not yet taken by ``recv()``: the parser's buffer and the queued frames."""
        return len(self.protocol.reader.buffer) + sum(len(frame.data) for frame in self.recv_messages.frames.queue)


class OpenpiPolicyServer:
    """Serves a chunk model to openpi clients, each observation of a batch of concurrent ones a row.

    The websocket server runs in an event loop of its own thread; the model runs in the batching worker thread.

    Args:
        model: The chunk model, ``model(obs_rows, env_ids) -> (B, H, action_dim)``.
        cfg: Address, metadata, key mapping, batching and wire limits.
    """

    def __init__(self, model: ChunkModel, cfg: OpenpiPolicyServerCfg):
        cfg.validate()
        self.cfg = cfg
        """The server configuration."""
        self.batcher = BatchingChunkModel(model, cfg.batching or BatchingCfg(max_wait_s=0.0, max_rows=1))
        """The model behind its batcher (``batcher.calls``: model calls so far)."""
        self._all: set[_Connection] = set()  # every TCP connection, its handshake done or not
        self._live: set[_Connection] = set()  # connections past their handshake
        self._buffered = 0
        self._budget = cfg.max_buffered_bytes or 4 * cfg.limits.max_message_bytes
        self._stopped = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="openpi-server", daemon=True)
        self._thread.start()
        try:
            self._server = self._run(self._listen())
        except BaseException:
            self._stop_loop()
            self.batcher.close()
            raise
        try:
            cfg.check_exposure(self.address[0])
        except ValueError:
            self.close()
            raise

    @property
    def address(self) -> tuple[str, int]:
        """``(host, port)`` the server listens on (the bound port when ``cfg.port`` is 0)."""
        return next(iter(self._server.sockets)).getsockname()[:2]

    @property
    def metadata(self) -> dict:
        """The frame sent on connect: chunk length, action dim, task (None when unknown) and key mapping."""
        return {"chunk_length": self.cfg.chunk_length, "action_dim": self.cfg.action_dim, "task": self.cfg.task,
                "keys": dict(self.cfg.keys or {})}

    def serve_forever(self) -> None:
        """Block until :meth:`close` (or Ctrl-C in the calling thread)."""
        while not self._stopped.wait(0.2):
            pass

    def start(self) -> OpenpiPolicyServer:
        """The server already serves from its own thread; returns it (for ``with``)."""
        return self

    @property
    def buffered_bytes(self) -> int:
        """Bytes received from clients and not yet answered, all connections together (at most the budget)."""
        return self._buffered

    def close(self) -> None:
        """Drop every connection (half-sent messages are not waited for), close the listening socket, then stop
        the batching worker."""
        if self._stopped.is_set():
            return
        self._run(self._shut())
        self._stop_loop()
        self.batcher.close()

    def __enter__(self) -> OpenpiPolicyServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    async def _listen(self):
        # max_queue=1: the protocol is request-reply, so a client has one message in flight
        server = await serve(self._handle, self.cfg.host, self.cfg.port, compression=None, max_queue=1,
                             max_size=self.cfg.limits.max_message_bytes, open_timeout=self.cfg.read_timeout_s,
                             close_timeout=1.0, backlog=self.cfg.backlog, process_request=self._process_request,
                             create_connection=functools.partial(_Connection, owner=self))
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep())
        return server

    async def _shut(self) -> None:
        self._sweeper.cancel()
        self._server.close(close_connections=False)
        for connection in list(self._all):
            connection.transport.abort()
        await self._server.wait_closed()

    def _drop(self, connection: _Connection, reason: str) -> None:
        """Close a connection at once (its buffers are freed), with one log line."""
        logger.warning("openpi server: dropped %s: %s", peer_name(connection.remote_address), reason)
        self._release(connection)
        self._live.discard(connection)
        connection.transport.abort()

    def _release(self, connection: _Connection) -> None:
        if not connection.released:
            connection.released = True
            self._buffered -= connection.pending + connection.serving
            connection.pending = connection.serving = 0

    def _serve(self, connection: _Connection, size: int) -> None:
        """A message of ``size`` bytes was taken: count it until answered, and read nothing more till then
        (request-reply: pipelined messages stay in the kernel's buffer)."""
        if not connection.released:
            connection.transport.pause_reading()
            connection.serving = size
            self._buffered += size
            self._account(connection)

    def _served(self, connection: _Connection) -> None:
        if not connection.released:
            self._buffered -= connection.serving
            connection.serving = 0
            connection.started = time.monotonic() if connection.pending else None
            connection.transport.resume_reading()

    def _account(self, connection: _Connection) -> None:
        """Count what ``connection`` holds now; past the budget, drop the connection whose unfinished message
        began first (a slow or stalled one: a well-formed message arrives at network speed)."""
        if connection.released:
            return
        held = connection.held_bytes()
        self._buffered += held - connection.pending
        connection.pending = held
        connection.started = (connection.started or time.monotonic()) if held else None
        while self._buffered > self._budget:
            unfinished = [c for c in self._live if c.pending and not c.serving]
            if connection.pending and not connection.serving and connection not in self._live:
                unfinished.append(connection)  # still in its handshake
            if not unfinished:
                return
            self._drop(min(unfinished, key=lambda c: c.started),
                       f"the server's {self._budget} bytes of receive buffers are full; its unfinished message"
                       " began first")

    async def _sweep(self) -> None:
        """Drop connections whose message has not arrived whole within ``read_timeout_s``."""
        while True:
            await asyncio.sleep(min(1.0, self.cfg.read_timeout_s / 4))
            now = time.monotonic()
            for connection in list(self._live):
                if connection.started and not connection.serving and now - connection.started > self.cfg.read_timeout_s:
                    self._drop(connection, f"a message stalled: {connection.pending} bytes arrived, not whole"
                                           f" within {self.cfg.read_timeout_s:g} s")

    def _evict_idlest(self) -> bool:
        """Close the connection idle longest (else the one whose unfinished message began first) to admit a new
        one; False if every connection is being served."""
        waiting = [c for c in self._live if not c.serving]
        if not waiting:
            return False
        victim = min(waiting, key=lambda c: (c.pending > 0, c.started or c.since))
        self._drop(victim, f"the server holds its maximum of {self.cfg.max_connections} connections: closed the"
                           f" idlest (for {time.monotonic() - (victim.started or victim.since):.1f} s) to admit a new"
                           " one")
        return True

    def _run(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._stopped.set()

    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        """``/healthz`` answers 200; a handshake without the token is refused with 401 (two ``Authorization``
        headers: 400); at ``max_connections`` the idlest connection is closed, and if all are being served the
        handshake is refused with 503."""
        if request.path == "/healthz":
            return connection.respond(http.HTTPStatus.OK, "OK\n")
        if self.cfg.token:
            sent = request.headers.get_all("Authorization")
            if len(sent) > 1:
                return connection.respond(http.HTTPStatus.BAD_REQUEST, "Send one Authorization header.\n")
            if not hmac.compare_digest((sent or [""])[0].encode(), f"Api-Key {self.cfg.token}".encode()):
                return connection.respond(http.HTTPStatus.UNAUTHORIZED, "Wrong or missing token (api_key).\n")
        if len(self._live) >= self.cfg.max_connections and not self._evict_idlest():
            return connection.respond(http.HTTPStatus.SERVICE_UNAVAILABLE, f"The server holds its maximum of"
                                      f" {self.cfg.max_connections} connections, all being served.\n")
        return None

    async def _handle(self, connection: _Connection) -> None:
        self._live.add(connection)
        self.batcher.register_client(connection)
        logger.info("openpi server: %s connected", peer_name(connection.remote_address))
        try:
            await connection.send(msgpack_arrays.packb(self.metadata))
            while True:
                connection.since = time.monotonic()
                try:
                    async with asyncio.timeout(self.cfg.idle_timeout_s):
                        message = await connection.recv()
                except TimeoutError:
                    await connection.close(CloseCode.NORMAL_CLOSURE, f"idle for {self.cfg.idle_timeout_s} s")
                    return
                self._serve(connection, len(message))
                try:
                    reply = await self._infer(message, connection)
                except Exception:  # openpi's way: the traceback as a text frame, then close with 1011
                    await connection.send(traceback.format_exc())
                    await connection.close(CloseCode.INTERNAL_ERROR, "Internal server error: traceback in the"
                                                                     " previous frame.")
                    return
                del message
                await connection.send(msgpack_arrays.packb(reply))
                self._served(connection)
        except websockets.ConnectionClosed:
            pass  # the client left, or was dropped
        finally:
            self._release(connection)
            self._live.discard(connection)
            self.batcher.forget_client(connection)
            logger.info("openpi server: %s disconnected", peer_name(connection.remote_address))

    async def _infer(self, message: bytes | str, client: _Connection) -> dict:
        start = time.monotonic()
        if isinstance(message, str):
            raise ValueError("Send observations as binary msgpack frames (openpi_client.msgpack_numpy), not text.")
        rows = await asyncio.to_thread(self._rows, message)  # never in the loop: the other clients go on
        infer_start = time.monotonic()
        chunk = await asyncio.wrap_future(self.batcher.submit(rows, torch.zeros(1, dtype=torch.long), client))
        infer_ms = 1e3 * (time.monotonic() - infer_start)
        return {"actions": chunk[0].cpu().numpy(), "policy_timing": {"infer_ms": infer_ms},
                "server_timing": {"infer_ms": infer_ms, "total_ms": 1e3 * (time.monotonic() - start)}}

    def _rows(self, message: bytes) -> dict:
        """The model's ``obs_rows`` of one binary request (see :meth:`observation_rows`)."""
        observation = msgpack_arrays.unpackb(message)
        if not isinstance(observation, Mapping):
            raise ValueError(f"An observation must be a map of arrays, got {type(observation).__name__}.")
        return self.observation_rows(observation)

    def observation_rows(self, observation: Mapping) -> dict:
        """One openpi observation as the model's ``obs_rows`` of one env: renamed by ``cfg.keys`` (only those
        keys are taken when it is set), nested by ``/``, strings left out. Shape of each term: (1, ...).

        Raises:
            KeyError: If a key of ``cfg.keys`` is missing.
            ValueError: If nothing in the observation is an array or a number.
        """
        flat = flatten_names(observation)
        if self.cfg.keys:
            missing = sorted(set(self.cfg.keys) - set(flat))
            if missing:
                raise KeyError(f"The observation lacks the keys {missing} (it has {sorted(flat)}).")
            flat = {path: flat[key] for key, path in self.cfg.keys.items()}
        rows = {path: torch.from_numpy(np.array(value)).unsqueeze(0).to(self.cfg.device)
                for path, value in flat.items() if not isinstance(value, (str, bytes))}
        if not rows:
            raise ValueError(f"The observation holds no arrays (keys {sorted(flat)}).")
        return unflatten_names(rows)


@configclass
class OpenpiPolicyServerCfg(ServerCfg):
    """Configuration of :class:`OpenpiPolicyServer`: that of :class:`TcpPolicyServer` with openpi's port, the key
    mapping, batching on by default and the wire limits."""

    class_type: type = OpenpiPolicyServer
    """The class this cfg configures."""
    port: int = 8000
    """TCP port (openpi's default 8000; 0: a free one, see :attr:`OpenpiPolicyServer.address`)."""
    keys: dict[str, str] | None = None
    """openpi key -> observation path of the model (``group`` or ``group/term``), e.g. ``{"observation/state":
    "policy"}``; None: the request's keys are the paths."""
    batching: BatchingCfg | None = BatchingCfg()
    """When the observations of concurrent requests are merged into one model call (None: one call each)."""
    max_connections: int = 256
    """Most clients served at once; one more closes the connection idle longest, or is refused (HTTP 503) when
    all are being served."""
    max_buffered_bytes: int | None = None
    """Most bytes received and not yet answered, all connections together [bytes]; past it the connection
    whose unfinished message began first is dropped (None: 4x ``limits.max_message_bytes``). A message being
    answered counts once; decoding copies it about twice more."""

    def validate_config(self) -> None:
        """Those of :class:`ServerCfg`, and a budget that holds at least one message."""
        super().validate_config()
        budget = self.max_buffered_bytes
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int)
                                   or budget < self.limits.max_message_bytes):
            raise ValueError(f"OpenpiPolicyServerCfg.max_buffered_bytes must be None or an integer of at least"
                             f" limits.max_message_bytes ({self.limits.max_message_bytes}), got {budget!r}.")
    idle_timeout_s: float = 600.0
    """A connection without a request for this long is closed [s]."""
