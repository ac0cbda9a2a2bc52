"""Remote chunk models: serve a chunk model over TCP and call it from the simulation process.

Large chunking policies run on a GPU server while the simulator runs elsewhere (openpi, GR00T and LeRobot
each ship a policy server). :class:`PolicyServer` hosts any chunk model ``model(obs_rows, env_ids)``;
:class:`RemoteChunkModel` is a chunk model that forwards each call to it, so
:class:`~isaaclab_suspend.policies.ActionChunkingPolicy` runs a remote policy under any schedule (``async``
overlaps the network round trip with the simulation).

Wire format, both ways: a 4-byte big-endian header length, a JSON header, then the raw bytes of the arrays
the header lists (name, dtype, shape), nested observation groups named ``group/term``. No pickle: a
message can only carry numbers. Requests are ``hello`` (the server answers its metadata) and ``infer``
(observation rows and ``env_ids`` in, ``chunk`` or ``error`` out).
"""

from __future__ import annotations

import json
import socket
import socketserver
import struct
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
import torch

from isaaclab.utils import configclass

from .batching import BatchingCfg, BatchingChunkModel
from .latency import ChunkModel

if TYPE_CHECKING:
    from isaaclab.envs import ManagerBasedRLEnv

PROTOCOL_VERSION = 1
"""Version of the wire format; client and server must agree."""

_LENGTH = struct.Struct(">I")


def _flatten(tree: Mapping, prefix: str = "") -> dict[str, torch.Tensor]:
    flat = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(_flatten(value, f"{name}/"))
        else:
            flat[name] = value
    return flat


def _unflatten(flat: Mapping[str, torch.Tensor]) -> dict:
    tree: dict = {}
    for name, value in flat.items():
        *groups, leaf = name.split("/")
        node = tree
        for group in groups:
            node = node.setdefault(group, {})
        node[leaf] = value
    return tree


def send_message(sock: socket.socket, header: dict, arrays: Mapping[str, torch.Tensor] | None = None) -> None:
    """Send ``header`` and the (possibly nested) ``arrays`` as one message."""
    arrays = {name: value.detach().cpu().contiguous().numpy() for name, value in _flatten(arrays or {}).items()}
    header = {**header, "arrays": [[name, a.dtype.str, list(a.shape)] for name, a in arrays.items()]}
    encoded = json.dumps(header).encode()
    sock.sendall(b"".join([_LENGTH.pack(len(encoded)), encoded, *(a.tobytes() for a in arrays.values())]))


def _receive_exactly(sock: socket.socket, size: int) -> bytearray:
    buffer = bytearray(size)
    view, received = memoryview(buffer), 0
    while received < size:
        count = sock.recv_into(view[received:])
        if count == 0:
            raise ConnectionError("the peer closed the connection")
        received += count
    return buffer


def receive_message(sock: socket.socket, device: str | torch.device = "cpu") -> tuple[dict, dict]:
    """Receive one message: its header and its arrays as tensors on ``device``, nested again by ``/``."""
    header = json.loads(_receive_exactly(sock, _LENGTH.unpack(_receive_exactly(sock, _LENGTH.size))[0]))
    arrays = {}
    for name, dtype, shape in header.pop("arrays"):
        dtype = np.dtype(dtype)
        data = _receive_exactly(sock, dtype.itemsize * int(np.prod(shape, dtype=np.int64)))
        arrays[name] = torch.from_numpy(np.frombuffer(data, dtype=dtype).reshape(shape)).to(device)
    return header, _unflatten(arrays)


class PolicyServer:
    """Serves a chunk model to :class:`RemoteChunkModel` clients, one thread per connection, one model call at
    a time, under ``torch.no_grad()`` with the observation rows on ``cfg.device``. A model exception is sent
    back as an error and the server keeps serving. With ``cfg.batching``, the concurrent requests of several
    clients are merged into one model call (:class:`~isaaclab_suspend.policies.BatchingChunkModel`).

    Args:
        model: The chunk model, ``model(obs_rows, env_ids) -> (B, H, action_dim)``.
        cfg: Address and metadata.
    """

    def __init__(self, model: ChunkModel, cfg: PolicyServerCfg):
        self.model = model
        """The served chunk model."""
        self.cfg = cfg
        """The server configuration."""
        self.batcher = BatchingChunkModel(model, cfg.batching) if cfg.batching is not None else None
        """The model behind its batcher with ``cfg.batching`` (``batcher.calls``: model calls so far), else None."""
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._connections: set[socket.socket] = set()
        server = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                server._serve_connection(self.request)

        self._server = socketserver.ThreadingTCPServer((cfg.host, cfg.port), Handler, bind_and_activate=False)
        self._server.daemon_threads = True
        self._server.allow_reuse_address = True
        self._server.server_bind()
        self._server.server_activate()

    @property
    def address(self) -> tuple[str, int]:
        """``(host, port)`` the server listens on (the bound port when ``cfg.port`` is 0)."""
        return self._server.server_address[:2]

    @property
    def metadata(self) -> dict:
        """What ``hello`` answers: protocol version, chunk length, action dim and task (None when unknown)."""
        return {"version": PROTOCOL_VERSION, "chunk_length": self.cfg.chunk_length, "action_dim": self.cfg.action_dim,
                "task": self.cfg.task}

    def serve_forever(self) -> None:
        """Serve until :meth:`close` (or Ctrl-C in the calling thread)."""
        self._server.serve_forever()

    def start(self) -> PolicyServer:
        """Serve in a background thread; returns the server."""
        self._thread = threading.Thread(target=self.serve_forever, name="policy-server", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving, close the listening socket and every open connection."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.server_close()
        for sock in list(self._connections):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already gone
        if self.batcher is not None:
            self.batcher.close()

    def __enter__(self) -> PolicyServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def _serve_connection(self, sock: socket.socket) -> None:
        self._connections.add(sock)
        if self.batcher is not None:
            self.batcher.register_client(1)
        try:
            self._serve_requests(sock)
        except (OSError, ValueError, KeyError, TypeError):
            pass  # the client left or sent a malformed message: drop the connection, keep serving the others
        finally:
            self._connections.discard(sock)
            if self.batcher is not None:
                self.batcher.register_client(-1)

    def _serve_requests(self, sock: socket.socket) -> None:
        while True:
            header, arrays = receive_message(sock, self.cfg.device)
            if header.get("type") == "hello":
                send_message(sock, {"type": "hello", **self.metadata})
            elif header.get("type") == "infer":
                env_ids = arrays.pop("env_ids")
                try:
                    if self.batcher is not None:
                        chunk = self.batcher(arrays, env_ids)
                    else:
                        with self._lock, torch.no_grad():
                            chunk = self.model(arrays, env_ids)
                    send_message(sock, {"type": "chunk"}, {"chunk": chunk})
                except Exception as err:  # the model's error goes back to the client, the server lives on
                    send_message(sock, {"type": "error", "message": f"{type(err).__name__}: {err}"})
            else:
                send_message(sock, {"type": "error", "message": f"unknown request type {header.get('type')!r}"})


@configclass
class PolicyServerCfg:
    """Configuration of :class:`PolicyServer`."""

    class_type: type = PolicyServer
    """The class this cfg configures."""
    host: str = "127.0.0.1"
    """Interface to listen on (``0.0.0.0`` for every interface)."""
    port: int = 5555
    """TCP port (0: a free one, see :attr:`PolicyServer.address`)."""
    chunk_length: int = 16
    """Actions per chunk H the model returns (sent to clients)."""
    action_dim: int | None = None
    """Action dimension of the model, checked by clients against their env (None: not checked)."""
    task: str | None = None
    """Task the model was made for, checked by clients against their env (None: not checked)."""
    device: str = "cpu"
    """Device the observation rows are moved to for the model call."""
    batching: BatchingCfg | None = None
    """Merge the concurrent requests of several clients into one model call (None: one call per request)."""


class RemoteChunkModel:
    """A chunk model that runs on a :class:`PolicyServer`: ``model(obs_rows, env_ids) -> (B, H, action_dim)``.

    Connects at construction (handshake: protocol version, :attr:`chunk_length`) and again, lazily, on the
    call after a connection failure.

    Raises:
        ConnectionError: If no server answers at the address (or it goes away).
        TimeoutError: If the server does not answer within ``cfg.timeout_s``.
        RuntimeError: If the server speaks another protocol version, or the model failed on the server.
    """

    def __init__(self, cfg: RemoteChunkModelCfg):
        self.cfg = cfg
        """The client configuration."""
        self._sock: socket.socket | None = None
        self.metadata = self._connect()
        """The server's ``hello``: version, chunk_length, action_dim, task."""
        self.chunk_length: int = self.metadata["chunk_length"]
        """Actions per chunk H of the served model."""

    def check_env(self, env: ManagerBasedRLEnv) -> None:
        """Raise a ``ValueError`` if the server's task or action dim is known and differs from ``env``'s."""
        task = getattr(env.cfg, "env_name", None) or getattr(getattr(env, "spec", None), "id", None)
        action_dim = self.metadata.get("action_dim")
        if self.metadata.get("task") and task and task != self.metadata["task"]:
            raise ValueError(f"The policy server at {self._address} serves a policy of '{self.metadata['task']}';"
                             f" the env is '{task}'.")
        if action_dim is not None and action_dim != env.action_manager.total_action_dim:
            raise ValueError(
                f"The policy server at {self._address} returns {action_dim}-dim actions; the env takes"
                f" {env.action_manager.total_action_dim}."
            )

    def __call__(self, obs_rows: Mapping, env_ids: torch.Tensor) -> torch.Tensor:
        if self._sock is None:
            self._connect()
        header, arrays = self._request({"type": "infer"}, {**obs_rows, "env_ids": env_ids})
        if header.get("type") == "error":
            raise RuntimeError(f"The policy server at {self._address} failed: {header.get('message')}")
        return arrays["chunk"].to(env_ids.device)

    def close(self) -> None:
        """Close the connection (the next call reconnects)."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    @property
    def _address(self) -> str:
        return f"{self.cfg.host}:{self.cfg.port}"

    def _connect(self) -> dict:
        try:
            self._sock = socket.create_connection((self.cfg.host, self.cfg.port), timeout=self.cfg.connect_timeout_s)
        except OSError as err:
            raise ConnectionError(
                f"No policy server at {self._address} ({err}): start one, e.g. `tools/run.sh python"
                f" scripts/serve_policy.py --task <task> --port {self.cfg.port}`, or fix the address."
            ) from None
        self._sock.settimeout(self.cfg.timeout_s)
        header, _ = self._request({"type": "hello", "version": PROTOCOL_VERSION})
        if header.get("version") != PROTOCOL_VERSION:
            self.close()
            raise RuntimeError(
                f"The policy server at {self._address} speaks protocol {header.get('version')}, this client"
                f" {PROTOCOL_VERSION}: use the same isaaclab_suspend version on both sides."
            )
        return header

    def _request(self, header: dict, arrays: Mapping | None = None) -> tuple[dict, dict]:
        try:
            send_message(self._sock, header, arrays)
            return receive_message(self._sock)
        except socket.timeout:
            self.close()
            raise TimeoutError(
                f"The policy server at {self._address} did not answer within {self.cfg.timeout_s} s: raise"
                " RemoteChunkModelCfg.timeout_s for a slow model, or check the server."
            ) from None
        except OSError as err:  # ConnectionError included: reset, broken pipe, closed by the server
            self.close()
            raise ConnectionError(f"Lost the policy server at {self._address}: {err}.") from None


@configclass
class RemoteChunkModelCfg:
    """Configuration of :class:`RemoteChunkModel`."""

    class_type: type = RemoteChunkModel
    """The class this cfg configures."""
    host: str = "127.0.0.1"
    """Address of the policy server."""
    port: int = 5555
    """TCP port of the policy server."""
    timeout_s: float = 30.0
    """Longest wait for an answer [s]."""
    connect_timeout_s: float = 5.0
    """Longest wait to connect [s]."""

    @classmethod
    def parse(cls, address: str, **kwargs) -> RemoteChunkModelCfg:
        """A cfg from ``"host:port"``.

        Raises:
            ValueError: If ``address`` is not ``host:port`` with an integer port.
        """
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"Policy server address must be 'host:port', got '{address}'.")
        return cls(host=host, port=int(port), **kwargs)
