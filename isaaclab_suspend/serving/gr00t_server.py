"""Serve a chunk model with GR00T's ZeroMQ protocol, to GR00T's own ``PolicyClient`` (either generation) and
:class:`~isaaclab_suspend.serving.Gr00tChunkModel`.

GR00T's server is a REP socket answering one request at a time. This one is a ROUTER socket: the requests of
several clients are read as they come, each ``get_action`` goes to
:class:`~isaaclab_suspend.serving.BatchingChunkModel` (with :attr:`~PolicyServerCfg.batching`, the requests of
a global-clock tick share one model call) and each reply goes back to its client as soon as it is ready.
Endpoints: ``ping``, ``get_modality_config`` (state / video keys of :attr:`Gr00tPolicyServerCfg.keys` with
``delta_indices`` ``[0]``, the action key with H of them, the language key if set), ``get_action`` (flat or
nested observation, answered in the same form and array encoding), ``reset`` (``{}``) and ``kill`` (refused
unless :attr:`Gr00tPolicyServerCfg.allow_kill`). Errors are GR00T's ``{"error": message}``.

Real-time chunking: a ``get_action`` whose ``options`` carry N1.7's inpainting options and the previous chunk
(:mod:`~isaaclab_suspend.serving.gr00t_rtc`) passes the model the committed prefix and each row's delay when
the model accepts a prefix; a model that does not ignores the options, as GR00T's own policy does. Batched
requests keep each row's prefix (:class:`~isaaclab_suspend.serving.BatchingChunkModel`).
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
import zmq
import zmq.asyncio

from isaaclab.utils import configclass

from ..policies.model import ChunkModel
from ..tensor_tree import unflatten_names
from . import gr00t_codec
from .gr00t_rtc import options_prefix
from .batching import BatchingCfg, BatchingChunkModel
from .remote import PolicyServerCfg

logger = logging.getLogger(__name__)


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
        for option, value in ((zmq.LINGER, 0), (zmq.MAXMSGSIZE, cfg.limits.max_message_bytes)):
            self._socket.setsockopt(option, value)
        try:
            port = self._socket.bind_to_random_port(f"tcp://{cfg.host}") if cfg.port == 0 else cfg.port
            if cfg.port:
                self._socket.bind(f"tcp://{cfg.host}:{cfg.port}")
        except BaseException as err:
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
        config = {m: gr00t_codec.modality_config([0], [k.partition(".")[2] for k in self.cfg.keys if
                                                        k.startswith(m + ".")]) for m in ("state", "video")}
        config = {m: c for m, c in config.items() if c["as_json"]["modality_keys"]}
        config["action"] = gr00t_codec.modality_config(list(range(self.cfg.chunk_length)), [self.cfg.action_key])
        if self.cfg.language_key:
            config["language"] = gr00t_codec.modality_config([0], [self.cfg.language_key])
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
        self._socket.close()
        self._context.term()
        self.batcher.close()

    def __enter__(self) -> Gr00tPolicyServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    """
    Internals.
    """

    async def _serve(self) -> None:
        tasks = set()
        while not self._stopped.is_set():
            if not await self._socket.poll(100):
                continue
            frames = await self._socket.recv_multipart(copy=False)
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
        for task in list(tasks):
            task.cancel()
        for identity in list(self._clients):
            self.batcher.forget_client(identity)
            del self._clients[identity]

    async def _send(self, identity: bytes, reply: Any, encoding: str = gr00t_codec.NPY) -> None:
        await self._socket.send_multipart([identity, b"", gr00t_codec.packb(reply, encoding)])

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
        encoding = gr00t_codec.NPY
        try:
            request, encoding = gr00t_codec.unpackb(bytes(message))
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
        rows, batch, flat = observation_rows(data["observation"], self.cfg.keys, self.cfg.device)
        env_ids = torch.arange(batch, device=self.cfg.device)
        prefix = options_prefix(data.get("options"), [self.cfg.action_key], batch, self.cfg.chunk_length,
                                self.cfg.action_dim, self.cfg.device) if self.batcher.accepts_prefix else {}
        chunk = await asyncio.wrap_future(self.batcher.submit(rows, env_ids, identity, **prefix))
        self.requests += 1
        actions = chunk.detach().cpu().numpy().astype(np.float32)
        key = f"action.{self.cfg.action_key}" if flat else self.cfg.action_key
        return [{key: actions}, {}]

def observation_rows(observation: Mapping, keys: Mapping[str, str], device: str = "cpu") -> tuple[dict, int, bool]:
    """A GR00T observation as a model's ``obs_rows``: the latest step of each GR00T key of ``keys`` under its
    observation path (nested by ``/``), with the batch size B and whether it came flat. Shape of each term: (B, ...).

    Raises:
        KeyError: If a key of ``keys`` is missing.
        ValueError: If an array is not (B, T, ...) with T >= 1 and one B for all.
    """
    flat = not any(isinstance(observation.get(m), Mapping) for m in ("state", "video"))
    rows, batch = {}, None
    for key, path in keys.items():
        modality, _, name = key.partition(".")
        value = observation.get(key) if flat else (observation.get(modality) or {}).get(name)
        if value is None:
            raise KeyError(f"The observation lacks '{key}' (it has {sorted(observation)}).")
        if not isinstance(value, np.ndarray) or value.ndim < 3 or value.shape[1] < 1 \
                or batch not in (None, value.shape[0]):
            raise ValueError(f"'{key}' must be an array of shape (B, T, ...) with one B for all keys, got"
                             f" {getattr(value, 'shape', type(value).__name__)}.")
        batch = value.shape[0]
        rows[path] = torch.tensor(value[:, -1], device=device)
    if not batch:
        raise ValueError("An observation of no env (B = 0).")
    return unflatten_names(rows), batch, flat


@configclass
class Gr00tPolicyServerCfg(PolicyServerCfg):
    """Configuration of :class:`Gr00tPolicyServer`: that of :class:`PolicyServer` with the GR00T keys."""

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
    idle_timeout_s: float = 600.0
    """A client without a request for this long no longer counts for closing batches [s]."""

    def validate_config(self) -> None:
        """Raise a ``ValueError`` naming the first invalid field."""
        super().validate_config()
        bad = [k for k in self.keys or {} if k.partition(".")[0] not in ("state", "video") or not k.partition(".")[2]]
        if not self.keys or bad:
            raise ValueError(f"Gr00tPolicyServerCfg.keys must map 'state.<name>' or 'video.<name>' keys to"
                             f" observation paths, got {bad or self.keys} (--keys state.cartpole=policy).")
