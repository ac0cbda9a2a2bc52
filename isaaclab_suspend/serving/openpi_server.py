"""Serve a chunk model with openpi's websocket protocol, so that openpi clients (``openpi-client``'s
``WebsocketClientPolicy``, robot runtimes, :class:`~isaaclab_suspend.policies.OpenpiChunkModel`) can call it.

The protocol is openpi's ``WebsocketPolicyServer``'s: on connect the server sends one msgpack frame of
metadata; each binary frame is then ONE observation (no batch dim) in :mod:`.msgpack_arrays` encoding, answered
with ``{"actions": (H, action_dim), "server_timing": {...}, "policy_timing": {...}}``; an error is sent back as
the traceback in a text frame, then the connection is closed with code 1011. ``GET /healthz`` answers 200.
With :attr:`~PolicyServerCfg.token` set, a handshake must carry ``Authorization: Api-Key <token>`` (what
``WebsocketClientPolicy(api_key=...)`` sends), else it is refused with 401; the wire limits, connection cap,
time-outs and the loopback rule are :class:`PolicyServerCfg`'s.

A request's keys are observation paths of the model (``group`` or ``group/term``; e.g. ``{"policy": float32
(obs_dim,)}`` for Cartpole), or openpi keys renamed by :attr:`OpenpiPolicyServerCfg.keys`. Strings (the
``prompt``) are not passed to the model. The observations of concurrent requests, one per env, go through
:class:`~isaaclab_suspend.policies.BatchingChunkModel`, so the envs of a global-clock tick share one model call.
"""

from __future__ import annotations

import asyncio
import hmac
import http
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

from ..tensor_tree import flatten_names, unflatten_names
from . import msgpack_arrays
from .batching import BatchingCfg, BatchingChunkModel
from ..policies.model import ChunkModel
from .remote import PolicyServerCfg


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
        self._connections = 0
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

    def close(self) -> None:
        """Close every connection and the listening socket, then stop the batching worker."""
        if self._stopped.is_set():
            return
        self._server.close()
        self._run(self._server.wait_closed())
        self._stop_loop()
        self.batcher.close()

    def __enter__(self) -> OpenpiPolicyServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    async def _listen(self):
        # max_queue=1: the protocol is request-reply, so a client never has more than one frame in flight and the
        # server holds at most one message of max_size per connection
        return await serve(self._handle, self.cfg.host, self.cfg.port, compression=None, max_queue=1,
                           max_size=self.cfg.limits.max_message_bytes, open_timeout=self.cfg.read_timeout_s,
                           backlog=self.cfg.backlog, process_request=self._process_request)

    def _run(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._stopped.set()

    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        """``/healthz`` answers 200; a handshake without the token is refused with 401, beyond ``max_connections``
        clients with 503."""
        if request.path == "/healthz":
            return connection.respond(http.HTTPStatus.OK, "OK\n")
        if self.cfg.token:
            sent = request.headers.get("Authorization", "").encode()
            if not hmac.compare_digest(sent, f"Api-Key {self.cfg.token}".encode()):
                return connection.respond(http.HTTPStatus.UNAUTHORIZED, "Wrong or missing token (api_key).\n")
        if self._connections >= self.cfg.max_connections:
            return connection.respond(http.HTTPStatus.SERVICE_UNAVAILABLE,
                                      f"The server holds its maximum of {self.cfg.max_connections} connections.\n")
        return None

    async def _handle(self, connection: ServerConnection) -> None:
        self._connections += 1
        self.batcher.register_client(1)
        try:
            await connection.send(msgpack_arrays.packb(self.metadata))
            while True:
                try:
                    async with asyncio.timeout(self.cfg.idle_timeout_s):
                        message = await connection.recv()
                except TimeoutError:
                    await connection.close(CloseCode.NORMAL_CLOSURE, f"idle for {self.cfg.idle_timeout_s} s")
                    return
                try:
                    reply = await self._infer(message)
                except Exception:  # openpi's way: the traceback as a text frame, then close with 1011
                    await connection.send(traceback.format_exc())
                    await connection.close(CloseCode.INTERNAL_ERROR, "Internal server error: traceback in the"
                                                                     " previous frame.")
                    return
                await connection.send(msgpack_arrays.packb(reply))
        except websockets.ConnectionClosed:
            pass  # the client left
        finally:
            self.batcher.register_client(-1)
            self._connections -= 1

    async def _infer(self, message: bytes | str) -> dict:
        start = time.monotonic()
        if isinstance(message, str):
            raise ValueError("Send observations as binary msgpack frames (openpi_client.msgpack_numpy), not text.")
        observation = msgpack_arrays.unpackb(message)
        if not isinstance(observation, Mapping):
            raise ValueError(f"An observation must be a map of arrays, got {type(observation).__name__}.")
        rows = self.observation_rows(observation)
        infer_start = time.monotonic()
        chunk = await asyncio.wrap_future(self.batcher.submit(rows, torch.zeros(1, dtype=torch.long)))
        infer_ms = 1e3 * (time.monotonic() - infer_start)
        return {"actions": chunk[0].cpu().numpy(), "policy_timing": {"infer_ms": infer_ms},
                "server_timing": {"infer_ms": infer_ms, "total_ms": 1e3 * (time.monotonic() - start)}}

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
class OpenpiPolicyServerCfg(PolicyServerCfg):
    """Configuration of :class:`OpenpiPolicyServer`: that of :class:`PolicyServer` with openpi's port, the key
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
    """Most clients served at once; the handshake of one more is refused (HTTP 503)."""
    idle_timeout_s: float = 600.0
    """A connection without a request for this long is closed [s]."""
