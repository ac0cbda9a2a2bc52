"""Call a policy served with openpi's websocket protocol (openpi's ``serve_policy.py``, or
:class:`~isaaclab_suspend.serving.OpenpiPolicyServer`) as a chunk model.

openpi serves one observation per request. :class:`OpenpiChunkModel` turns a schedule's batch of B env rows
into B requests sent at once over a bounded pool of websocket connections, so a global-clock tick of N envs
costs about one round trip (when the server runs requests side by side or batches them), not N; the replies
are stacked in ``env_ids`` order.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
import torch
import websockets
from websockets.asyncio.client import ClientConnection, connect
from websockets.protocol import State

from isaaclab.utils import configclass

from ...names import TOKEN_ENV
from ...tensor_tree import flatten_names
from .. import msgpack_arrays
from ..base import ChunkModelClient, ChunkModelClientCfg, check_observation_paths, describe_reply

if TYPE_CHECKING:
    from isaaclab.envs import ManagerBasedRLEnv

OPENPI_SCHEME = "openpi://"
"""Prefix of the address of a server speaking openpi's websocket protocol."""


class OpenpiServerError(ConnectionError, RuntimeError):
    """The openpi server failed on a request (it sent a text frame, openpi's traceback, and closed with 1011) or
    answered something this client does not take (a reply it cannot decode, actions of the wrong shape or dtype).

    A ``ConnectionError`` like every other failure of the connection, and a ``RuntimeError``, as the failure of a
    model call.
    """


class OpenpiChunkModel(ChunkModelClient):
    """A chunk model served over openpi's protocol: ``model(obs_rows, env_ids) -> (B, H, action_dim)``.

    Each env row becomes one observation ``{openpi key: row of its observation path, "prompt": cfg.prompt}``;
    the reply's ``actions`` (H', D) must be floats with H' >= H (the first H are taken and copied at once, as
    openpi's action chunk broker executes a prefix of the horizon) and D equal to the action dim. The client's
    own limits bound what a server can make it hold: H at most ``cfg.max_chunk_length`` (whatever the metadata
    says), each reply at most ``cfg.max_message_bytes``, at most ``cfg.connections`` replies at once. Connects at construction (metadata) and
    opens up to ``cfg.connections`` connections as the batches need them; a broken one is reopened on the next
    call.

    Raises:
        ConnectionError: If no server answers at the address (or it goes away).
        TimeoutError: If a batch is not answered within ``cfg.timeout_s``.
        OpenpiServerError: If the server failed on a request (its traceback is in the message), or its reply
            cannot be decoded or has no float ``actions`` of a shape that fits H and the action dim.
        ValueError: If H is neither configured nor in the server's metadata, or over ``cfg.max_chunk_length``.
    """

    def __init__(self, cfg: OpenpiChunkModelCfg):
        self.cfg = cfg
        """The client configuration."""
        self._loop = asyncio.new_event_loop()
        self._thread: threading.Thread | None = None
        self._idle: list[ClientConnection] = []
        self._slot: asyncio.Semaphore | None = None
        try:
            self.metadata: dict = self._run(self._first_connection())
            """The server's metadata frame (openpi servers often send ``{}``)."""
        except BaseException:
            self.close()
            raise
        for key in ("chunk_length", "action_dim"):
            value = self.metadata.get(key)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                self.close()
                raise ValueError(f"The openpi server at {self._address} sends {key} = {value!r} in its metadata, not"
                                 " a positive integer.")
        self.chunk_length: int = cfg.chunk_length or self.metadata.get("chunk_length") or 0
        """Actions per chunk H taken from each reply."""
        if self.chunk_length < 1:
            self.close()
            raise ValueError(f"The openpi server at {self._address} does not say its chunk length: set"
                             " OpenpiChunkModelCfg.chunk_length (--model.chunk_length H), the actions per chunk to execute.")
        if self.chunk_length > cfg.max_chunk_length:
            self.close()
            raise ValueError(f"H = {self.chunk_length} actions per chunk (from the openpi server at {self._address}"
                             f" or --model.chunk_length) exceeds this client's limit of {cfg.max_chunk_length}: set --model.chunk_length H"
                             " (OpenpiChunkModelCfg.chunk_length) to the actions per chunk to execute.")
        self.action_dim: int | None = cfg.action_dim or self.metadata.get("action_dim")
        """Action dimension every reply must have (None: not checked until :meth:`check_env`)."""

    def check_env(self, env: ManagerBasedRLEnv) -> None:
        """Raise a ``ValueError`` if the server's task or action dim is known and differs from ``env``'s, or an
        observation path of ``cfg.keys`` is not one of the env's; from then on replies are checked against the
        env's action dim."""
        super().check_env(env)
        check_observation_paths(env, self.cfg.keys or {}, "OpenpiChunkModelCfg.keys")
        self.action_dim = env.action_manager.total_action_dim

    def requests(self, obs_rows: Mapping, num_rows: int) -> list[dict]:
        """The openpi observations of ``num_rows`` env rows, one dict per row.

        Raises:
            KeyError: If an observation path of ``cfg.keys`` is not in ``obs_rows``.
        """
        flat = {path: value.detach().cpu().numpy() for path, value in flatten_names(obs_rows).items()}
        keys = self.cfg.keys or {path: path for path in flat}
        missing = sorted(set(keys.values()) - set(flat))
        if missing:
            raise KeyError(f"OpenpiChunkModelCfg.keys names observations {missing} the env does not have"
                           f" (it has {sorted(flat)}).")
        prompt = {"prompt": self.cfg.prompt} if self.cfg.prompt is not None else {}
        return [{**{key: flat[path][row] for key, path in keys.items()}, **prompt} for row in range(num_rows)]

    def __call__(self, obs_rows: Mapping, env_ids: torch.Tensor) -> torch.Tensor:
        messages = [msgpack_arrays.packb(request) for request in self.requests(obs_rows, len(env_ids))]
        chunks = self._run(self._infer_all(messages), self.cfg.timeout_s)
        return torch.from_numpy(np.stack(chunks)).to(env_ids.device)

    def close(self) -> None:
        """Close every connection and stop the client's event loop thread (the next call starts both again)."""
        if self._thread is not None:
            self._run(self._close_all())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._thread = None

    def _actions(self, reply: bytes) -> np.ndarray:
        """The first H actions of a reply, checked and copied (the reply is freed). Shape: (H, action_dim)."""
        try:
            reply = msgpack_arrays.unpackb(reply)
        except ValueError as err:
            raise OpenpiServerError(f"The openpi server at {self._address} sent a reply this client cannot read:"
                                    f" {err}") from None
        actions = reply.get("actions") if isinstance(reply, Mapping) else None
        if not isinstance(actions, np.ndarray) or actions.ndim != 2 or actions.dtype.kind != "f":
            raise OpenpiServerError(f"The openpi server at {self._address} replied without a float 'actions' array"
                                    f" of shape (H, action_dim): {describe_reply(reply)}.")
        if actions.shape[0] < self.chunk_length:
            raise OpenpiServerError(f"The openpi server at {self._address} returns {actions.shape[0]} actions per chunk;"
                               f" H = {self.chunk_length} are needed: lower the chunk length to at most"
                               f" {actions.shape[0]}.")
        if self.action_dim is not None and actions.shape[1] != self.action_dim:
            raise OpenpiServerError(f"The openpi server at {self._address} returns {actions.shape[1]}-dim actions;"
                                    f" the env takes {self.action_dim} (map them in the server's output transform).")
        return actions[: self.chunk_length].copy()

    def _run(self, coroutine, timeout: float | None = None):
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop.run_forever, name="openpi-client", daemon=True)
            self._thread.start()
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            self._run(self._close_all())  # replies still on the way would answer the wrong requests
            raise TimeoutError(f"The openpi server at {self._address} did not answer the requests of a batch"
                               f" within {timeout} s: raise OpenpiChunkModelCfg.timeout_s"
                               " for a slow model, or check the server.") from None

    async def _connect(self) -> tuple[ClientConnection, object]:
        token = self._token()
        try:
            connection = await connect(f"ws://{self._address}", compression=None,
                                       open_timeout=self.cfg.connect_timeout_s, max_size=self.cfg.max_message_bytes,
                                       additional_headers={"Authorization": f"Api-Key {token}"} if token else None)
        except websockets.InvalidStatus as err:
            if err.response.status_code not in (401, 403):
                raise ConnectionError(f"The server at {self._address} refused the websocket handshake ({err}).") from None
            raise ConnectionError(
                f"The openpi server at {self._address} refused the token (HTTP {err.response.status_code}): "
                + ("set" if token is None else "check") + f" ${TOKEN_ENV} (or OpenpiChunkModelCfg.token) to the token"
                " the server was started with."
            ) from None
        except websockets.InvalidMessage:
            raise ConnectionError(
                f"The server at {self._address} does not answer a websocket handshake: a server of the project's"
                f" protocol is called with --remote {self._address} (no openpi://)."
            ) from None
        except (OSError, TimeoutError, websockets.InvalidHandshake) as err:
            raise ConnectionError(
                f"No openpi policy server at {self._address} ({type(err).__name__}: {err}): start one, e.g."
                f" `tools/run.sh python scripts/serve_policy.py --wire openpi --port {self.cfg.port}`, or fix the"
                " address."
            ) from None
        try:
            metadata = await asyncio.wait_for(connection.recv(), self.cfg.connect_timeout_s)
            metadata = msgpack_arrays.unpackb(metadata if isinstance(metadata, bytes) else b"")
        except (websockets.ConnectionClosed, ValueError, TimeoutError) as err:
            await self._drop(connection)
            raise ConnectionError(f"The server at {self._address} sent no openpi metadata frame within"
                                  f" {self.cfg.connect_timeout_s:g} s: {type(err).__name__} {err}.") from None
        except BaseException:  # cancelled (the batch's time-out): the connection is not kept
            await self._drop(connection)
            raise
        return connection, metadata

    async def _first_connection(self) -> dict:
        self._slot = asyncio.Semaphore(self.cfg.connections)
        connection, metadata = await self._connect()
        self._idle.append(connection)
        return metadata if isinstance(metadata, dict) else {}

    async def _infer_all(self, messages: list[bytes]) -> list:
        missing = min(len(messages), self.cfg.connections) - len(self._idle)
        if missing > 0:  # open them first, so that the server sees every request of the batch as one wave
            opened = await asyncio.gather(*(self._connect() for _ in range(missing)), return_exceptions=True)
            self._idle += [result[0] for result in opened if not isinstance(result, BaseException)]
            errors = [result for result in opened if isinstance(result, BaseException)]
            if errors:  # the ones that opened stay in the pool for the next call
                raise errors[0]
        results = await asyncio.gather(*(self._infer(message) for message in messages), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            raise errors[0]
        return results

    async def _infer(self, message: bytes):
        async with self._slot:
            connection = self._idle.pop() if self._idle else None
            if connection is not None and connection.state is not State.OPEN:  # closed by the server while idle
                await self._drop(connection)
                connection = None
            if connection is None:
                connection = (await self._connect())[0]
            try:
                await connection.send(message)
                reply = await connection.recv()
            except websockets.ConnectionClosed as err:
                await self._drop(connection)
                raise ConnectionError(f"Lost the openpi server at {self._address}: {err}.") from None
            except BaseException:
                await self._drop(connection)
                raise
            if isinstance(reply, str):
                await self._drop(connection)
                raise OpenpiServerError(f"The openpi server at {self._address} failed:\n{reply}")
            self._idle.append(connection)
        return self._actions(reply)  # in the loop's thread: replies are decoded one at a time, then freed

    async def _drop(self, connection: ClientConnection) -> None:
        await connection.close()

    async def _close_all(self) -> None:
        idle, self._idle = self._idle, []
        for connection in idle:
            await self._drop(connection)


@configclass
class OpenpiChunkModelCfg(ChunkModelClientCfg):
    """Configuration of :class:`OpenpiChunkModel`: that of every client with openpi's port, and what to send
    (keys, prompt), how many connections and the largest reply."""

    class_type: type = OpenpiChunkModel
    """The class this cfg configures."""
    port: int = 8000
    """TCP port of the server (openpi's default 8000)."""
    chunk_length: int | None = None
    """Actions H taken from each reply (None: the server's metadata ``chunk_length``)."""
    action_dim: int | None = None
    """Action dim every reply must have (None: the metadata's, else the env's after ``check_env``)."""
    keys: dict[str, str] | None = None
    """openpi key -> observation path of the env (``group`` or ``group/term``), e.g. ``{"observation/state":
    "policy"}``; None: every observation path under its own name."""
    prompt: str | None = None
    """Text sent as ``prompt`` with every observation (None: no prompt)."""
    connections: int = 64
    """Most connections open at once, hence most requests (and replies held) in flight; a batch of more rows
    queues for them."""
    max_message_bytes: int = 2**20
    """Largest reply accepted [bytes] (a larger one closes the connection, code 1009): with ``connections`` it
    bounds what the replies of a batch hold at once (64 x 1 MiB). pi0's 50 x 32 float32 actions take 6.4 kB."""
