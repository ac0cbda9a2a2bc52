"""What the clients and servers of every wire share: the base of the clients and its cfg (the server's address,
the token, the time-outs, the largest H and the check of the env against what the server serves), the base cfg of
the servers (:class:`ServerCfg`: address, wire limits, connection cap, time-outs, token, the loopback rule), the
limits and dtypes a message may carry, the observation paths a client may send, and ``host:port`` parsing.

Each wire (``tcp``: the project's own, ``openpi``: openpi's websockets, ``gr00t``: GR00T's ZeroMQ) keeps its client
and server in a subpackage of its own, which imports what they share from here; :mod:`.wires` lists them.
"""

from __future__ import annotations

import ipaddress
import math
import os
from collections.abc import Mapping
from dataclasses import MISSING
from typing import TYPE_CHECKING

import numpy as np

from isaaclab.utils import configclass

from ..chunking.sources import ChunkModelCfg, ChunkModelOpener
from ..names import TOKEN_ENV
from .batching import BatchingCfg

if TYPE_CHECKING:
    from isaaclab.envs import ManagerBasedRLEnv


class ChunkModelClient:
    """Base of the chunk models that call a policy served over a wire: the server's address and the token sent
    to it, both from :attr:`cfg`, and the check of the env against what the server says it serves."""

    cfg: ChunkModelClientCfg
    """The client configuration."""
    metadata: dict
    """What the server says of its model on connecting (``task`` and ``action_dim`` where it knows them)."""

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

    @property
    def _address(self) -> str:
        return f"{self.cfg.host}:{self.cfg.port}"

    def _token(self) -> str | None:
        """The token sent to the server: the cfg's, else ``$ISAACLAB_SUSPEND_POLICY_TOKEN``'s (None: none)."""
        return self.cfg.token or os.environ.get(TOKEN_ENV)


@configclass
class ChunkModelClientCfg(ChunkModelCfg):
    """Configuration of a :class:`ChunkModelClient`: what the clients of every wire take. Each wire's client cfg is
    the chunk-model source of that wire's name (``--model openpi``), registered by its row in
    :data:`~.wires.WIRES`; H (``chunk_length``, None: the server's) is refused where the server plans another."""

    class_type: type[ChunkModelClient] = MISSING
    """The class this cfg configures."""
    host: str = "127.0.0.1"
    """Address of the policy server."""
    port: int = 5555
    """TCP port of the policy server."""
    token: str | None = None
    """Token the server requires, sent the wire's way (the project's ``hello``, openpi's ``api_key``, GR00T's
    ``api_token``); None: ``$ISAACLAB_SUSPEND_POLICY_TOKEN`` if set, else none."""
    timeout_s: float = 30.0
    """Longest wait for the answer of one model call [s] (openpi: all the replies of its batch)."""
    connect_timeout_s: float = 5.0
    """Longest wait to connect [s] (GR00T: for the reply of the first ping)."""
    max_chunk_length: int = 4096
    """Largest H the server may announce, or the cfg ask for (the caller sizes its buffers by it)."""

    def check_fields(self) -> None:
        """Raise a ``ValueError`` naming the first field every client shares that is out of range (a flag can set
        them: ``--model.timeout_s``), before anything is connected."""
        if isinstance(self.port, bool) or not isinstance(self.port, int) or not 0 < self.port < 65536:
            raise ValueError(f"{type(self).__name__}.port must be in 1-65535, got {self.port!r}.")
        for name in ("timeout_s", "connect_timeout_s"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise ValueError(f"{type(self).__name__}.{name} must be a positive number of seconds, got {value!r}.")
        if isinstance(self.max_chunk_length, bool) or not isinstance(self.max_chunk_length, int) \
                or self.max_chunk_length < 1:
            raise ValueError(f"{type(self).__name__}.max_chunk_length must be a positive integer, got"
                             f" {self.max_chunk_length!r}.")


class ClientOpener(ChunkModelOpener):
    """Opens a wire's client cfg: the server reached (its metadata may name the task and H), one client for every
    env; a key map the cfg has (``keys``) is checked against the env's observation paths."""

    def __init__(self, cfg: ChunkModelClientCfg, device: str):
        super().__init__(cfg, device)
        cfg.check_fields()
        self.model = cfg.class_type(cfg)

    @property
    def own_task(self) -> str | None:
        return self.model.metadata.get("task") or None

    def check(self, model, env: ManagerBasedRLEnv, keys_label: str) -> None:
        keys = getattr(self.cfg, "keys", None)
        if keys:  # paths the env lacks would fail at the first call
            check_observation_paths(env, dict(keys), keys_label)

    def where(self) -> str:
        return f"{getattr(self.cfg, 'scheme', '')}{self.cfg.host}:{self.cfg.port}"  # the scheme: its wire's row

    def describe(self) -> str:
        return f"remote policy {self.where()}"


def split_address(address: str, scheme: str, server: str) -> tuple[str, int]:
    """``(host, port)`` of ``"host:port"``, with or without the wire's ``scheme`` (``openpi://``) in front: what
    each client cfg's ``parse`` reads.

    Raises:
        ValueError: Naming the wire's ``server``, if ``address`` is not of that form with a port in 1-65535.
    """
    host, _, port = address.removeprefix(scheme).rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{server} address must be '{scheme}host:port' with a port in 1-65535, got '{address}'.")
    return host, int(port)


def observation_paths(env: ManagerBasedRLEnv) -> list[str]:
    """The observation paths a client can send: each concatenated group by its name, each term of a group whose
    terms stay apart as ``group/term`` (the tensors of the env's observation dict, named as
    :func:`~isaaclab_suspend.tensor_tree.flatten_names` names them)."""
    om = env.observation_manager
    return [group if om.group_obs_concatenate[group] else f"{group}/{term}"
            for group, terms in om.active_terms.items()
            for term in (terms[:1] if om.group_obs_concatenate[group] else terms)]


def check_observation_paths(env: ManagerBasedRLEnv, keys: Mapping[str, str], option: str) -> None:
    """Raise a ``ValueError`` naming ``option`` (e.g. ``"--model.keys"``) if a value of ``keys`` (a client's key ->
    observation path) is not one of :func:`observation_paths` of ``env``: a concatenated group's term (or a group
    whose terms stay apart) is no tensor of the observation, and would fail at the first call instead."""
    paths = observation_paths(env)
    for key, path in keys.items():
        if path not in paths:
            raise ValueError(f"{option} maps '{key}' to '{path}', not an observation of the env: pass one of {paths}"
                             " (a concatenated group by its name, a term of another group as group/term).")


def describe_reply(reply) -> str:
    """A decoded reply in a line, for an error: its keys with each array's dtype and shape, else its type."""
    if isinstance(reply, Mapping):
        return "{" + ", ".join(f"{k!r}: " + (f"{v.dtype} {v.shape}" if isinstance(v, np.ndarray) else type(v).__name__)
                               for k, v in reply.items()) + "}"
    return type(reply).__name__


def peer_name(address) -> str:
    """``host:port`` of a peer's socket address (a tuple), else the address as text, for a server's log."""
    return f"{address[0]}:{address[1]}" if isinstance(address, tuple) and len(address) >= 2 else str(address)


ALLOWED_DTYPES = frozenset(np.dtype(t).str for t in (
    "bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64",
))
"""Array dtypes a message may carry (numpy dtype strings, native byte order): numbers only."""


@configclass
class WireLimitsCfg:
    """Largest message a peer accepts; each limit is checked before the reader allocates.

    The defaults fit 256 envs of 3x224x224 uint8 images per message; raise them for more.
    """

    max_header_bytes: int = 64 * 1024
    """Largest JSON header [bytes]."""
    max_message_bytes: int = 64 * 2**20
    """Largest message, header and arrays together [bytes]: what one connection can make the reader hold."""
    max_arrays: int = 256
    """Most arrays in one message."""
    max_array_elements: int = 64 * 2**20
    """Most elements in one array."""
    max_dims: int = 8
    """Most dimensions of one array."""
    max_name_chars: int = 256
    """Longest array name (``group/term``)."""

    def validate_config(self) -> None:
        """Raise a ``ValueError`` if a limit is not a positive integer (run by ``validate()``)."""
        for name in ("max_header_bytes", "max_message_bytes", "max_arrays", "max_array_elements", "max_dims",
                     "max_name_chars"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"WireLimitsCfg.{name} must be a positive integer, got {value!r}.")


@configclass
class ServerCfg:
    """What the server of every wire takes: the address, the model's identity sent to clients, wire limits,
    connection cap, time-outs, token and the loopback rule (:meth:`check_exposure`); each wire's server cfg
    subclasses it (see :data:`~.wires.WIRES`)."""

    class_type: type = MISSING
    """The class this cfg configures."""
    host: str = "127.0.0.1"
    """Interface to listen on (``0.0.0.0`` for every interface: needs :attr:`token`)."""
    port: int = 5555
    """TCP port (0: a free one, see :attr:`TcpPolicyServer.address`)."""
    chunk_length: int = 16
    """Actions per chunk H the model returns (sent to clients)."""
    action_dim: int | None = None
    """Action dimension of the model, checked by clients against their env (None: not checked)."""
    task: str | None = None
    """Task the model was made for, checked by clients against their env (None: not checked)."""
    device: str = "cpu"
    """Device the observation rows are moved to for the model call."""
    limits: WireLimitsCfg = WireLimitsCfg()
    """Largest request the server reads; each connection can make it hold up to ``limits.max_message_bytes``."""
    max_connections: int = 8
    """Connections served at once; when full, a new one closes the connection waiting longest for its ``hello``
    or idle longest, and is refused with an error reply only if all are receiving or being served."""
    backlog: int = 64
    """Connections the OS queues before the server accepts them."""
    read_timeout_s: float = 10.0
    """Longest time for a message to arrive whole once begun, and for a new connection's ``hello`` [s]."""
    idle_timeout_s: float = 120.0
    """A connection without a request for this long is closed (the client reconnects on its next call) [s]."""
    token: str | None = None
    """Shared secret every client must send in its ``hello`` (compared in constant time); None: none. Required
    to listen beyond loopback unless :attr:`insecure_no_token` is set."""
    insecure_no_token: bool = False
    """Allow listening beyond loopback without a token (a trusted network only)."""
    batching: BatchingCfg | None = None
    """Merge the concurrent requests of several clients into one model call (None: one call per request)."""

    def validate_config(self) -> None:
        """Raise a ``ValueError`` naming the first invalid field (run by ``validate()``, after the limits')."""
        for name in ("max_connections", "backlog", "chunk_length"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{type(self).__name__}.{name} must be a positive integer, got {value!r}.")
        for name in ("read_timeout_s", "idle_timeout_s"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise ValueError(f"{type(self).__name__}.{name} must be a positive number of seconds, got {value!r}.")
        if self.token is not None and (not isinstance(self.token, str) or not self.token):
            raise ValueError(f"{type(self).__name__}.token must be a non-empty string or None.")

    def check_exposure(self, host: str) -> None:
        """Raise a ``ValueError`` if a server bound to ``host`` would listen beyond loopback without a token (and
        :attr:`insecure_no_token` is not set)."""
        if not self.token and not self.insecure_no_token and not _is_loopback(host):
            raise ValueError(
                f"The policy server would listen on {host}, beyond loopback, without a token: set"
                f" {type(self).__name__}.token (serve_policy.py: ${TOKEN_ENV} or --token_file), or"
                " insecure_no_token=True (--insecure_no_token) on a trusted network."
            )


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
