"""The ``tcp`` wire's server (the project's own): serve a chunk model over TCP to :class:`~.client.TcpChunkModel` clients.

Large chunking policies run on a GPU server while the simulator runs elsewhere (openpi, GR00T and LeRobot
each ship a policy server). :class:`TcpPolicyServer` hosts any chunk model ``model(obs_rows, env_ids)``;
:class:`~.client.TcpChunkModel` is the chunk model that forwards each call to it.

Messages use the format of :mod:`~.protocol`, checked against :class:`~..base.WireLimitsCfg` on
both sides. Requests are ``hello`` (protocol version and, where the server wants one, its token; the server
answers its metadata) and ``infer`` (observation rows and ``env_ids`` in, ``chunk`` or ``error`` out). For real-time
chunking an ``infer`` may also carry the optional ``prefix`` (B, d, action_dim) and ``delay`` (B,) arrays of the
:class:`~isaaclab_suspend.chunking.model.ChunkModel` contract, bit for bit; a client sends them only to a server
whose metadata says ``accepts_prefix`` (its model takes them), so older peers keep working. ``env_ids``,
``prefix`` and ``delay`` are reserved names: an observation group may not be called so.
"""

from __future__ import annotations

import hmac
import logging
import socket
import socketserver
import sys
import threading
import time

import torch

from isaaclab.utils import configclass

from ...chunking.model import ChunkModel, accepts_prefix, prefix_problem
from ..batching import BatchingChunkModel
from ..base import ServerCfg, peer_name
from .protocol import PROTOCOL_VERSION, ProtocolError, encode_message, receive_message, send_message

PREFIX_ARRAYS = ("prefix", "delay")
"""Optional arrays of an ``infer`` request: the committed prefix and each row's delay (real-time chunking)."""


logger = logging.getLogger(__name__)


class _Dropped(Exception):
    """A connection the server drops; the message says why (logged as one line, sent to the client)."""


_HELLO, _IDLE, _RECEIVING, _SERVING, _EVICTED = range(5)
"""States of a connection: waiting for its ``hello``, waiting for a request, receiving one, serving it, closed
to admit another."""


class _Peer:
    """One connection, as the server sees it to choose which to close when it is full."""

    __slots__ = ("sock", "address", "state", "since")

    def __init__(self, sock: socket.socket, address):
        self.sock, self.address, self.state, self.since = sock, address, _HELLO, time.monotonic()


class _TCPServer(socketserver.ThreadingTCPServer):
    """A threading TCP server with a bounded number of connections. When it is full, a new connection makes the
    server close the connection that waits longest for its ``hello``, else the one idle the longest; if every
    connection is receiving or being served, the new one gets an error reply and is closed at once, in the
    accepting thread, so it costs no thread."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, policy_server: TcpPolicyServer, cfg: TcpPolicyServerCfg):
        self.request_queue_size = cfg.backlog
        self._policy_server = policy_server
        self._slots = threading.BoundedSemaphore(cfg.max_connections)
        super().__init__((cfg.host, cfg.port), _Handler, bind_and_activate=False)

    def process_request(self, request: socket.socket, client_address) -> None:
        if not self._slots.acquire(blocking=False) and not (self._policy_server._evict(client_address)
                                                            and self._slots.acquire(timeout=1.0)):
            self._policy_server._refuse(request, client_address)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:  # no thread started (out of threads): free the slot
            self._slots.release()
            raise

    def process_request_thread(self, request: socket.socket, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request, client_address) -> None:
        error = sys.exc_info()[1]  # called inside the except block of socketserver
        logger.error("Policy server: dropped %s: unexpected %s: %s", peer_name(client_address), type(error).__name__,
                     error)


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.server._policy_server._serve_connection(self.request, self.client_address)


class TcpPolicyServer:
    """Serves a chunk model to :class:`~.client.TcpChunkModel` clients, one thread per connection (at most
    ``cfg.max_connections``), one model call at a time, under ``torch.no_grad()`` with the observation rows on
    ``cfg.device``. A model exception is sent back as an error and the server keeps serving. With ``cfg.batching``,
    the concurrent requests of several clients are merged into one model call
    (:class:`~isaaclab_suspend.serving.BatchingChunkModel`).

    A connection is dropped, with one log line saying why and, where it can still be read, an error reply, when
    its message breaks the format or ``cfg.limits``, when its first message is not a valid ``hello`` within
    ``cfg.read_timeout_s``, when a message does not arrive whole within ``cfg.read_timeout_s``, when it
    stays idle longer than ``cfg.idle_timeout_s`` (the client reconnects on its next call), and when the server
    is full and a new client comes while it waits for its ``hello`` or between requests (the one waiting
    longest goes first), so idle peers cannot keep a client out. Batched calls wait only for clients that
    have sent requests (:class:`~isaaclab_suspend.serving.BatchingChunkModel`).

    Args:
        model: The chunk model, ``model(obs_rows, env_ids) -> (B, H, action_dim)``.
        cfg: Address, limits, token and metadata.

    Raises:
        ValueError: If the cfg is invalid, or the server would listen beyond loopback without a token (and
            ``cfg.insecure_no_token`` is not set).
        OSError: If the address cannot be bound.
    """

    def __init__(self, model: ChunkModel, cfg: TcpPolicyServerCfg):
        cfg.validate()
        self.model = model
        """The served chunk model."""
        self.cfg = cfg
        """The server configuration."""
        self.batcher = BatchingChunkModel(model, cfg.batching) if cfg.batching is not None else None
        """The model behind its batcher with ``cfg.batching`` (``batcher.calls``: model calls so far), else None."""
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._peers: dict[socket.socket, _Peer] = {}
        self._peers_lock = threading.Lock()
        self._server = _TCPServer(self, cfg)
        try:
            self._server.server_bind()
            cfg.check_exposure(self.address[0])
            self._server.server_activate()
        except BaseException:
            self._server.server_close()
            raise

    @property
    def address(self) -> tuple[str, int]:
        """``(host, port)`` the server listens on (the bound port when ``cfg.port`` is 0)."""
        return self._server.server_address[:2]

    @property
    def metadata(self) -> dict:
        """What ``hello`` answers: protocol version, chunk length, action dim, task (None when unknown) and whether
        the model takes a prefix (the batcher keeps each row's)."""
        return {"version": PROTOCOL_VERSION, "chunk_length": self.cfg.chunk_length, "action_dim": self.cfg.action_dim,
                "task": self.cfg.task, "accepts_prefix": accepts_prefix(self.model)}

    @property
    def num_connections(self) -> int:
        """Connections being served now."""
        return len(self._peers)

    def serve_forever(self) -> None:
        """Serve until :meth:`close` (or Ctrl-C in the calling thread)."""
        self._server.serve_forever()

    def start(self) -> TcpPolicyServer:
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
        for sock in list(self._peers):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already gone
        if self.batcher is not None:
            self.batcher.close()

    def __enter__(self) -> TcpPolicyServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    """
    Internals.
    """

    def _refuse(self, sock: socket.socket, address) -> None:
        """Tell a connection over ``cfg.max_connections`` that the server is busy; never blocks."""
        message = (f"busy: it serves at most {self.cfg.max_connections} connections at a time and all are receiving"
                   " or being served, try again later")
        logger.warning("Policy server: refused %s: %s", peer_name(address), message)
        try:
            sock.setblocking(False)
            sock.send(encode_message({"type": "error", "message": message}))
            sock.recv(65536)  # what the client sent already: closing with unread data would reset the reply
        except OSError:
            pass  # the client is gone or sent nothing yet

    def _evict(self, address) -> bool:
        """Close the connection that waits longest for its ``hello``, else the one idle longest, to admit a new
        one from ``address``; False if every connection is receiving or being served."""
        with self._peers_lock:
            waiting = [peer for peer in self._peers.values() if peer.state in (_HELLO, _IDLE)]
            if not waiting:
                return False
            peer = min(waiting, key=lambda p: (p.state, p.since))
            what = "waiting for its hello" if peer.state == _HELLO else "idle"
            peer.state = _EVICTED
        logger.warning("Policy server: closed %s (%s for %.1f s) to admit %s: the server holds its maximum of %d"
                       " connections", peer_name(peer.address), what, time.monotonic() - peer.since, peer_name(address),
                       self.cfg.max_connections)
        try:
            peer.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # already gone
        return True

    def _mark(self, peer: _Peer, state: int) -> None:
        with self._peers_lock:
            if peer.state != _EVICTED:
                peer.state, peer.since = state, time.monotonic()

    def _serve_connection(self, sock: socket.socket, address) -> None:
        peer = _Peer(sock, address)
        with self._peers_lock:
            self._peers[sock] = peer
        logger.info("Policy server: %s connected", peer_name(address))
        try:
            self._serve_requests(peer)
        except EOFError:
            pass  # the client closed the connection between messages (or it was closed to admit another)
        except _Dropped as err:
            self._drop(sock, address, str(err), reply=True)
        except ProtocolError as err:
            self._drop(sock, address, f"malformed message: {err}", reply=True)
        except TimeoutError as err:
            self._drop(sock, address, f"timed out: {err}", reply=False)
        except OSError as err:
            self._drop(sock, address, f"connection lost: {err}", reply=False)
        finally:
            with self._peers_lock:
                self._peers.pop(sock, None)
            if self.batcher is not None:
                self.batcher.forget_client(sock)
            logger.info("Policy server: %s disconnected", peer_name(address))

    def _drop(self, sock: socket.socket, address, reason: str, reply: bool) -> None:
        logger.warning("Policy server: dropped %s: %s", peer_name(address), reason)
        if reply:
            try:
                self._send(sock, {"type": "error", "message": reason})
            except OSError:
                pass  # the client is gone

    def _receive(self, peer: _Peer, wait_s: float) -> tuple[dict, dict]:
        started = None if peer.state == _HELLO else lambda: self._mark(peer, _RECEIVING)
        header, arrays = receive_message(peer.sock, self.cfg.limits, wait_s, self.cfg.read_timeout_s, self.cfg.device,
                                         started)
        self._mark(peer, _SERVING)
        return header, arrays

    def _serve_requests(self, peer: _Peer) -> None:
        cfg, sock = self.cfg, peer.sock
        header, _ = self._receive(peer, cfg.read_timeout_s)
        if header.get("type") != "hello":
            raise _Dropped(f"the first request must be 'hello', got {str(header.get('type'))[:40]!r}")
        if cfg.token:
            token = header.get("token")
            if not isinstance(token, str) or not hmac.compare_digest(token.encode(), cfg.token.encode()):
                raise _Dropped("wrong or missing token")
        self._send(sock, {"type": "hello", **self.metadata})
        if self.batcher is not None:  # from its hello on, not before: a silent connection is never waited for
            self.batcher.register_client(sock)
        while True:
            self._mark(peer, _IDLE)
            header, arrays = self._receive(peer, cfg.idle_timeout_s)
            kind = header.get("type")
            if kind == "infer":
                self._infer(sock, arrays)
            elif kind == "hello":
                self._send(sock, {"type": "hello", **self.metadata})
            else:
                self._send(sock, {"type": "error", "message": f"unknown request type {str(kind)[:40]!r}"})

    def _infer(self, sock: socket.socket, arrays: dict) -> None:
        env_ids = arrays.pop("env_ids", None)
        if not isinstance(env_ids, torch.Tensor) or env_ids.ndim != 1:
            self._send(sock, {"type": "error", "message": "'infer' needs a 1-D 'env_ids' array"})
            return
        prefix = {name: arrays.pop(name) for name in PREFIX_ARRAYS if name in arrays}
        problem = self._check_prefix(prefix, len(env_ids))
        if problem:
            self._send(sock, {"type": "error", "message": problem})
            return
        try:
            if self.batcher is not None:
                chunk = self.batcher.submit(arrays, env_ids, sock, **prefix).result()
            else:
                with self._lock, torch.no_grad():
                    chunk = self.model(arrays, env_ids, **prefix)
            reply = encode_message({"type": "chunk"}, {"chunk": chunk})
        except Exception as err:  # the model's error goes back to the client, the server lives on
            reply = encode_message({"type": "error", "message": f"{type(err).__name__}: {err}"})
        sock.settimeout(self.cfg.read_timeout_s)
        sock.sendall(reply)

    def _check_prefix(self, prefix: dict, batch: int) -> str | None:
        """Why the optional prefix arrays of an ``infer`` cannot go to the model (None: they can, or are absent)."""
        if not prefix:
            return None
        if not self.metadata["accepts_prefix"]:
            return "this server's model takes no prefix (its hello says accepts_prefix false): send none"
        return prefix_problem(prefix, batch)

    def _send(self, sock: socket.socket, header: dict) -> None:
        """Send a reply; a client that does not read it within ``cfg.read_timeout_s`` is dropped."""
        sock.settimeout(self.cfg.read_timeout_s)
        send_message(sock, header)


@configclass
class TcpPolicyServerCfg(ServerCfg):
    """Configuration of :class:`TcpPolicyServer`: those of every server
    (:class:`~isaaclab_suspend.serving.base.ServerCfg`)."""

    class_type: type = TcpPolicyServer
    """The class this cfg configures."""
