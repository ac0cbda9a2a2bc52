"""The ``tcp`` wire's client (the project's own): a chunk model that forwards each call to a :class:`~.server.TcpPolicyServer` over TCP.

:class:`TcpChunkModel` is a chunk model like any other, so
:class:`~isaaclab_suspend.chunking.ActionChunkingPolicy` runs a remote policy under any schedule (``async``
overlaps the network round trip with the simulation). The requests and their format:
:mod:`~.server` and :mod:`~.protocol`.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping

import torch

from isaaclab.utils import configclass

from ..base import ChunkModelClient, ChunkModelClientCfg, WireLimitsCfg
from .protocol import PROTOCOL_VERSION, ProtocolError, receive_message, send_message


TCP_SCHEME = "tcp://"
"""The prefix of a ``tcp`` address (optional: ``HOST:PORT`` is the ``tcp`` wire's too)."""


class TcpServerError(ConnectionError, RuntimeError):
    """The policy server refused or failed a request, or answered something the client cannot read.

    A ``ConnectionError`` (an ``OSError``) like every other failure of :class:`TcpChunkModel`, so a caller
    catches one type; also a ``RuntimeError``, as the failure of a model call.
    """


class TcpChunkModel(ChunkModelClient):
    """A chunk model that runs on a policy server (:class:`~.server.TcpPolicyServer`):
    ``model(obs_rows, env_ids) -> (B, H, action_dim)``.

    Connects at construction (handshake: protocol version, token, :attr:`chunk_length`) and again, lazily, on
    the call after a connection failure or after the server closed an idle connection. Replies are checked
    against ``cfg.limits`` before anything is allocated, and chunks against the batch and the server's H.

    Raises:
        ConnectionError: Every failure, naming the server: no server at the address, the server went away,
            refused the connection (busy, wrong token) or sent something this client cannot read
            (:class:`TcpServerError`).
        TimeoutError: If the server does not answer within ``cfg.timeout_s`` (also an ``OSError``).
        TcpServerError: Also a ``RuntimeError``: another protocol version, or the model failed on the server.
    """

    def __init__(self, cfg: TcpChunkModelCfg):
        self.cfg = cfg
        """The client configuration."""
        cfg.validate()
        self._sock: socket.socket | None = None
        self.metadata = self._connect()
        """The server's ``hello``: version, chunk_length, action_dim, task."""
        self.chunk_length: int = self.metadata["chunk_length"]
        """Actions per chunk H of the served model."""
        self.accepts_prefix: bool = bool(self.metadata.get("accepts_prefix", False))
        """Whether the served model takes a prefix (the optional ``accepts_prefix`` of the chunk-model contract)."""

    def __call__(self, obs_rows: Mapping, env_ids: torch.Tensor, **prefix) -> torch.Tensor:
        """The served model's chunk for the rows; ``prefix``: the optional ``prefix=`` and ``delay=`` of the
        contract, sent only to a server that accepts them (raises ``ValueError`` otherwise)."""
        if prefix and not self.accepts_prefix:
            raise ValueError(f"The policy server at {self._address} takes no prefix (its model has no accepts_prefix).")
        if self._sock is None or self._closed_by_server():
            self.close()
            self._connect()
        header, arrays = self._request({"type": "infer"}, {**obs_rows, "env_ids": env_ids, **prefix})
        if header.get("type") == "error":
            raise TcpServerError(f"The policy server at {self._address} failed: {str(header.get('message'))}")
        chunk = arrays.get("chunk")
        shape = (len(env_ids), self.chunk_length, self.metadata.get("action_dim"))
        if (header.get("type") != "chunk" or not isinstance(chunk, torch.Tensor) or chunk.ndim != 3
                or not chunk.is_floating_point() or chunk.shape[:2] != shape[:2]
                or shape[2] not in (None, chunk.shape[2])):
            got = f"a {tuple(chunk.shape)} {chunk.dtype} chunk" if isinstance(chunk, torch.Tensor) else "no chunk"
            self._fail(f"answered {str(header.get('type'))[:40]!r} with {got}, expected a float chunk of shape"
                       f" {shape} (batch, H, action_dim)")
        return chunk.to(env_ids.device)

    def close(self) -> None:
        """Close the connection (the next call reconnects)."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    """
    Internals.
    """

    def _fail(self, what: str) -> None:
        self.close()
        raise TcpServerError(f"The policy server at {self._address} {what}.")

    def _closed_by_server(self) -> bool:
        """Whether the server closed the connection (idle time-out) or sent something unasked since the last
        reply: either way the connection cannot carry the next request."""
        self._sock.setblocking(False)
        try:
            self._sock.recv(1, socket.MSG_PEEK)  # data or b"" (closed): either way it cannot go on
            return True
        except BlockingIOError:
            return False
        except OSError:
            return True

    def _connect(self) -> dict:
        try:
            self._sock = socket.create_connection((self.cfg.host, self.cfg.port), timeout=self.cfg.connect_timeout_s)
        except OSError as err:
            raise ConnectionError(
                f"No policy server at {self._address} ({err}): start one, e.g. `tools/run.sh python"
                f" scripts/serve_policy.py --task <task> --port {self.cfg.port}`, or fix the address."
            ) from None
        hello = {"type": "hello", "version": PROTOCOL_VERSION}
        token = self._token()
        if token:
            hello["token"] = token
        try:
            header, _ = self._request(hello, http_stop=True)
        except ConnectionError:
            if self._speaks_http():
                raise TcpServerError(f"The server at {self._address} speaks HTTP (websockets): this is an openpi"
                                        f" server: use --remote openpi://{self._address}.") from None
            raise
        if header.get("type") == "error":
            self._fail(f"refused the connection: {str(header.get('message'))}")
        if header.get("version") != PROTOCOL_VERSION:
            self._fail(f"speaks protocol {str(header.get('version'))[:20]}, this client {PROTOCOL_VERSION}: use the"
                       " same isaaclab_suspend version on both sides")
        chunk_length, action_dim, task = (header.get(k) for k in ("chunk_length", "action_dim", "task"))
        if (type(chunk_length) is not int or chunk_length < 1 or not (action_dim is None or type(action_dim) is int)
                or not (task is None or isinstance(task, str))
                or not isinstance(header.get("accepts_prefix", False), bool)):
            self._fail(f"sent invalid metadata {str(header)[:200]}")
        if chunk_length > self.cfg.max_chunk_length:
            self._fail(f"announces H = {chunk_length} actions per chunk, over this client's limit of"
                       f" {self.cfg.max_chunk_length} (TcpChunkModelCfg.max_chunk_length)")
        return header

    def _speaks_http(self) -> bool:
        """Whether the server answers an HTTP request (an openpi server: websockets answers ``HTTP/1.1 4xx``)."""
        try:
            with socket.create_connection((self.cfg.host, self.cfg.port), timeout=self.cfg.connect_timeout_s) as probe:
                probe.sendall(f"GET / HTTP/1.1\r\nHost: {self.cfg.host}\r\n\r\n".encode())
                return probe.recv(5) == b"HTTP/"
        except OSError:
            return False

    def _request(self, header: dict, arrays: Mapping | None = None, http_stop: bool = False) -> tuple[dict, dict]:
        try:
            self._sock.settimeout(self.cfg.timeout_s)
            send_message(self._sock, header, arrays, http_stop)
            return receive_message(self._sock, self.cfg.limits, self.cfg.timeout_s, self.cfg.timeout_s)
        except socket.timeout:
            self.close()
            raise TimeoutError(
                f"The policy server at {self._address} did not answer within {self.cfg.timeout_s} s: raise"
                " TcpChunkModelCfg.timeout_s for a slow model, or check the server."
            ) from None
        except ProtocolError as err:
            self._fail(f"sent a reply this client cannot read ({err})")
        except EOFError:
            self.close()
            raise ConnectionError(f"Lost the policy server at {self._address}: it closed the connection.") from None
        except OSError as err:  # ConnectionError included: reset, broken pipe, closed mid-message
            self.close()
            raise ConnectionError(f"Lost the policy server at {self._address}: {err}.") from None


@configclass
class TcpChunkModelCfg(ChunkModelClientCfg):
    """Configuration of :class:`TcpChunkModel`: that of every client, and the wire limits of its replies."""

    class_type: type = TcpChunkModel
    """The class this cfg configures."""
    limits: WireLimitsCfg = WireLimitsCfg()
    """Largest reply the client reads."""
