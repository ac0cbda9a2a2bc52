"""What the clients and servers of every wire share: the base class of the clients and its cfg (the server's
address, the token, the time-outs, the largest H and the check of the env against what the server serves), the
observation paths a client may send, and how a reply and a peer are named in messages.

Each wire (the project's TCP protocol, openpi's websockets, GR00T's ZeroMQ) keeps its client and its server in
modules of their own, which import what they share from here; the servers' cfgs share
:class:`~.policy_server.PolicyServerCfg` (address, wire limits, time-outs, token, the loopback rule).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import MISSING
from typing import TYPE_CHECKING

import numpy as np

from isaaclab.utils import configclass

from ..names import TOKEN_ENV

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
class ChunkModelClientCfg:
    """Configuration of a :class:`ChunkModelClient`: what the clients of every wire take."""

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
    """Raise a ``ValueError`` naming ``option`` (e.g. ``"--gr00t_keys"``) if a value of ``keys`` (a client's key ->
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
