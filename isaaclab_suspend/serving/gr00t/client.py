"""Call a policy served with GR00T's ZeroMQ protocol (Isaac-GR00T's ``run_gr00t_server.py``, or
:class:`~isaaclab_suspend.serving.Gr00tPolicyServer`) as a chunk model.

GR00T serves a batch per request: :class:`Gr00tChunkModel` sends the B env rows of a schedule's call as ONE
``get_action`` (state float32 (B, T, D), video uint8 (B, T, H, W, 3), the prompt as B strings), so a
global-clock tick costs one round trip. What to send comes from the server's ``get_modality_config``: the
state and video keys with their ``delta_indices`` (past steps, kept per env by
:class:`~isaaclab_suspend.chunking.ObservationHistories` through the model's ``observe_step`` hook), the
language key, and the action keys, whose arrays are concatenated in that order into the env's action.

With :attr:`Gr00tChunkModelCfg.rtc_options` the model takes the committed prefix of the ``rtc`` schedule and sends
it as GR00T N1.7's real-time chunking options (:mod:`~isaaclab_suspend.serving.gr00t.rtc`): a server whose
policy forwards them (this project's :class:`~isaaclab_suspend.serving.Gr00tPolicyServer` with a model that
accepts a prefix, or a GR00T server patched to pass ``options`` and the previous chunk to N1.7's action head)
plans a chunk that continues it; a stock GR00T server ignores them.
"""

from __future__ import annotations

import hmac
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import zmq

from isaaclab.utils import configclass

from ...chunking.observation_history import MAX_STEPS, ObservationHistories
from ...tensor_tree import flatten_names
from . import codec, rtc
from ..base import ChunkModelClient, ChunkModelClientCfg, check_observation_paths, describe_reply

if TYPE_CHECKING:
    from isaaclab.envs import ManagerBasedRLEnv

GR00T_SCHEME = "gr00t://"
"""Prefix of the address of a server speaking GR00T's ZeroMQ protocol."""

HISTORY_KEY = "gr00t_history"
"""Entry that :meth:`Gr00tChunkModel.observe_step` adds to the observation: ``{gr00t key: (N, T, ...)}``."""
FORMS = ("flat", "nested")
"""Observation forms: flat keys ``state.x`` (GR00T's sim wrapper) or ``{"state": {"x": ...}}`` (its policy)."""
MODALITIES = ("state", "video")
"""The observation modalities read from the env."""


class Gr00tServerError(RuntimeError):
    """The GR00T server failed a request (it replied ``{"error": ...}`` or ``b"ERROR"``), or its reply does not fit."""


class Gr00tChunkModel(ChunkModelClient):
    """A chunk model served over GR00T's protocol: ``model(obs_rows, env_ids) -> (B, H, action_dim)``.

    Pings the server and reads its modality config at construction. H is the length of the action modality's
    ``delta_indices`` unless ``cfg.chunk_length`` asks for fewer. Every state and video key of the server must
    map to an observation path of the env (``cfg.keys``); where a modality asks for past steps, the model needs
    its ``observe_step`` hook called every step (:class:`~isaaclab_suspend.chunking.ActionChunkingPolicy` does).

    Raises:
        ConnectionError: If no server answers the ping within ``cfg.connect_timeout_s``.
        TimeoutError: If a request is not answered within ``cfg.timeout_s`` (the socket is then re-created).
        Gr00tServerError: If the server fails a request, or a reply has other action keys, a non-finite
            action, too few actions or another action dim than the env's.
        ValueError: If the modality config does not fit the cfg (keys, prompt, H) or cannot be read.
    """

    def __init__(self, cfg: Gr00tChunkModelCfg):
        if cfg.form not in FORMS:
            raise ValueError(f"Gr00tChunkModelCfg.form must be one of {FORMS}, got {cfg.form!r}.")
        if not rtc.is_ramp_rate(cfg.rtc_ramp_rate):
            raise ValueError("Gr00tChunkModelCfg.rtc_ramp_rate must be a finite number > 0, got"
                             f" {cfg.rtc_ramp_rate!r}.")
        self.cfg = cfg
        """The client configuration."""
        self.calls = 0
        """``get_action`` requests sent so far."""
        self._context = zmq.Context()
        self._socket: zmq.Socket | None = None
        try:
            ping = self._request({"endpoint": "ping"}, cfg.connect_timeout_s, connecting=True)
            config = self._request({"endpoint": "get_modality_config"}, cfg.timeout_s, configs=True)
            self._read_config(config)
        except BaseException:
            self.close()
            raise
        self.metadata: dict = {"task": ping.get("task") if isinstance(ping, Mapping) else None,
                               "modality_config": config}
        """The server's task (when it says one, as the project's server does in its ping) and modality config."""
        self.accepts_prefix: bool = cfg.rtc_options
        """Whether the model takes the ``rtc`` prefix (the optional ``accepts_prefix`` of the chunk-model
        contract): with ``cfg.rtc_options``, sent as real-time chunking options."""
        self._action_dims: dict[str, int] = {}  # action key -> its dim, from the last reply

    def _read_config(self, config: Any) -> None:
        if not isinstance(config, Mapping) or not isinstance(config.get("action"), Mapping):
            raise ValueError(f"The GR00T server at {self._address} sent a modality config without an 'action'"
                             f" modality: {str(config)[:200]}.")
        for name, modality in config.items():
            indices, keys = (modality.get(k) if isinstance(modality, Mapping) else None
                             for k in ("delta_indices", "modality_keys"))
            if not (isinstance(indices, list) and indices and all(type(i) is int for i in indices)
                    and isinstance(keys, list) and keys and all(isinstance(k, str) for k in keys)):
                raise ValueError(f"The GR00T server at {self._address} sent an unreadable '{name}' modality config"
                                 f" (delta_indices and modality_keys must be non-empty lists): {str(modality)[:200]}.")
        widest = max(len(m["modality_keys"]) for m in config.values())
        oldest = min((min(config[m]["delta_indices"]) for m in MODALITIES if m in config), default=0)
        horizon = len(config["action"]["delta_indices"])
        for what, value, limit, field in (("past steps of an observation", 1 - oldest, self.cfg.max_history_steps,
                                           "max_history_steps"),
                                          ("actions per chunk", horizon, self.cfg.max_chunk_length, "max_chunk_length"),
                                          ("keys of a modality", widest, self.cfg.max_keys, "max_keys")):
            if value > limit:
                raise ValueError(f"The GR00T server at {self._address} asks for {value} {what}, over this client's"
                                 f" limit of {limit} (Gr00tChunkModelCfg.{field}): is it the server you meant?")
        self.chunk_length: int = self.cfg.chunk_length or horizon
        """Actions per chunk H taken from each reply."""
        if not 0 < self.chunk_length <= horizon:
            raise ValueError(f"The GR00T server at {self._address} plans {horizon} actions per chunk; --model.chunk_length"
                             f" {self.chunk_length} asks for more: pass at most {horizon}.")
        self.action_keys: list[str] = list(config["action"]["modality_keys"])
        """The action keys, in the order their arrays are concatenated."""
        self.offsets: dict[str, list[int]] = {f"{m}.{k}": list(config[m]["delta_indices"])
                                              for m in MODALITIES if m in config for k in config[m]["modality_keys"]}
        """GR00T key (``state.x``, ``video.y``) -> the steps it takes, relative to the current one (each <= 0)."""
        future = sorted(key for key, offsets in self.offsets.items() if max(offsets) > 0)
        if future:
            raise ValueError(f"The GR00T server at {self._address} asks for future observations of {future}.")
        keys = self.cfg.keys or {key: key.partition(".")[2] for key in self.offsets}
        unknown, missing = sorted(set(keys) - set(self.offsets)), sorted(set(self.offsets) - set(keys))
        if unknown or missing:
            raise ValueError(f"The GR00T server at {self._address} takes the observation keys {sorted(self.offsets)};"
                             f" --model.keys {'names ' + str(unknown) + ' it does not take' if unknown else ''}"
                             f"{' and ' if unknown and missing else ''}{'lacks ' + str(missing) if missing else ''}"
                             " (pass one GR00T_KEY=OBS_PATH per key).")
        self.keys: dict[str, str] = dict(keys)
        """GR00T key -> observation path of the env (``group`` or ``group/term``)."""
        self._histories = ObservationHistories({key: o for key, o in self.offsets.items() if o != [0]})
        """The rings of the keys that take past steps, fed by :meth:`observe_step`."""
        language = config.get("language")
        self.language_key: str | None = language["modality_keys"][0] if language else None
        """The key the prompt is sent under (None: the server takes no language)."""
        if self.language_key is not None and self.cfg.prompt is None:
            raise ValueError(f"The GR00T server at {self._address} takes a language instruction"
                             f" ('{self.language_key}'): pass --model.prompt.")
        self.action_dim: int | None = self.cfg.action_dim
        """Action dim the concatenated action keys must have (None: not checked until :meth:`check_env`)."""

    def check_env(self, env: ManagerBasedRLEnv) -> None:
        """Raise a ``ValueError`` if an observation path of ``keys`` is not one of the env's, or the server's
        task is known and is not the env's; from then on replies are checked against the env's action dim."""
        check_observation_paths(env, self.keys, "Gr00tChunkModelCfg.keys")
        super().check_env(env)
        self.action_dim = env.action_manager.total_action_dim

    def observe_step(self, obs: Mapping, moved: torch.Tensor, restarted: torch.Tensor | None) -> Mapping:
        """The chunk-model hook: advance the history of every key that takes past steps; returns ``obs`` with
        ``HISTORY_KEY`` ``{gr00t key: (N, T, ...)}`` added (``obs`` itself when no key takes past steps)."""
        if not self._histories.offsets:
            return obs
        flat = flatten_names(obs)
        current = {key: flat[self.keys[key]] for key in self._histories.offsets}
        return {**obs, HISTORY_KEY: self._histories.step(current, moved, restarted)}

    def observation(self, obs_rows: Mapping, batch: int) -> dict:
        """The GR00T observation of ``batch`` env rows, in ``cfg.form``.

        Raises:
            KeyError: If an observation path of ``keys`` is not in ``obs_rows``.
            RuntimeError: If a key takes past steps and ``obs_rows`` lacks them (no ``observe_step`` hook call).
            ValueError: If a video is not uint8 (B, H, W, 3).
        """
        history = obs_rows.get(HISTORY_KEY, {})
        flat = flatten_names({k: v for k, v in obs_rows.items() if k != HISTORY_KEY})
        arrays = {}
        for key, path in self.keys.items():
            if key in history:
                value = history[key]
            elif self.offsets[key] == [0]:
                if path not in flat:
                    raise KeyError(f"--model.keys names the observation '{path}' the env does not have (it has"
                                   f" {sorted(flat)}).")
                value = flat[path].unsqueeze(1)
            else:
                raise RuntimeError(f"'{key}' takes the past steps {self.offsets[key]}: call the model through"
                                   " ActionChunkingPolicy, whose observe_step hook keeps each env's history.")
            if key.startswith("video.") and (value.dtype != torch.uint8 or value.ndim != 5 or value.shape[-1] != 3):
                raise ValueError(f"'{key}' ({path}) must be uint8 images of shape (H, W, 3), got"
                                 f" {value.dtype} of shape {tuple(value.shape[2:])}.")
            arrays[key] = (value if key.startswith("video.") else value.float()).detach().cpu().numpy()
        prompts = [self.cfg.prompt] * batch
        if self.cfg.form == "flat":
            return {**arrays, **({self.language_key: prompts} if self.language_key else {})}
        nested = {m: {k.partition(".")[2]: v for k, v in arrays.items() if k.startswith(m + ".")} for m in MODALITIES}
        if self.language_key:
            nested["language"] = {self.language_key: [[p] for p in prompts]}
        return nested

    def __call__(self, obs_rows: Mapping, env_ids: torch.Tensor, prefix: torch.Tensor | None = None,
                 delay: torch.Tensor | None = None) -> torch.Tensor:
        """The served policy's chunk for the rows. Shape: (B, H, action_dim). ``prefix`` (B, d, action_dim) and
        ``delay`` (B,): the committed prefix of the contract, sent as :meth:`rtc_options` (only with
        ``cfg.rtc_options``, else a ``ValueError``)."""
        observation = self.observation(obs_rows, len(env_ids))
        options = None
        if prefix is not None:
            if not self.accepts_prefix:
                raise ValueError("This GR00T client sends no prefix: set Gr00tChunkModelCfg.rtc_options (--model.rtc_options true).")
            options = self.rtc_options(prefix, delay)
        self.calls += 1
        reply = self._request({"endpoint": "get_action", "data": {"observation": observation, "options": options}},
                              self.cfg.timeout_s)
        return torch.from_numpy(self._actions(reply, len(env_ids))).to(env_ids.device)

    def rtc_options(self, prefix: torch.Tensor, delay: torch.Tensor) -> dict | None:
        """The real-time chunking options of a request continuing ``prefix`` (see :mod:`.rtc`): the prefix split
        per action key (each key's dim from the last reply; one key takes them all), keyed as replies are in
        ``cfg.form``. None for an empty prefix.

        Raises:
            ValueError: If there are several action keys and no reply has told their dims yet.
        """
        dims = [self._action_dims.get(k) for k in self.action_keys] if len(self.action_keys) > 1 else [prefix.shape[2]]
        if None in dims:
            raise ValueError(f"The GR00T server at {self._address} has the action keys {self.action_keys}: their dims"
                             " are known from its first reply; call the model once without a prefix first.")
        names = [f"action.{k}" if self.cfg.form == "flat" else k for k in self.action_keys]
        return rtc.request_options(prefix, delay, list(zip(names, dims)), self.cfg.rtc_ramp_rate)

    def close(self) -> None:
        """Close the socket (the next call opens a new one)."""
        if self._socket is not None:
            self._socket.close(linger=0)
            self._socket = None

    def __del__(self) -> None:
        if hasattr(self, "_context"):  # not when the cfg was refused
            self.close()
            self._context.term()

    def _actions(self, reply: Any, batch: int) -> np.ndarray:
        """The first H actions of every action key, concatenated in the modality config's order. Shape: (B, H, D)."""
        actions = reply[0] if isinstance(reply, list) and len(reply) == 2 else None
        if not isinstance(actions, Mapping):
            self._fail(f"answered get_action with {describe_reply(reply)}, not [actions, info]")
        parts = []
        for key in self.action_keys:
            value = actions.get(f"action.{key}", actions.get(key))
            if not (isinstance(value, np.ndarray) and value.ndim == 3 and value.dtype.kind == "f"
                    and value.shape[0] == batch):
                self._fail(f"sent no float (B = {batch}, T, D) array for the action key '{key}' (reply: "
                           f"{describe_reply(actions)})")
            if value.shape[1] < self.chunk_length:
                self._fail(f"sent {value.shape[1]} actions of '{key}' per chunk, fewer than H = {self.chunk_length}")
            parts.append(value[:, : self.chunk_length])
            self._action_dims[key] = value.shape[2]
        chunk = np.concatenate(parts, axis=2).astype(np.float32)
        if self.action_dim is not None and chunk.shape[2] != self.action_dim:
            self._fail(f"sends {chunk.shape[2]}-dim actions ({' + '.join(str(p.shape[2]) for p in parts)} over"
                       f" {self.action_keys}); the env takes {self.action_dim}")
        if not np.isfinite(chunk).all():
            self._fail("sent non-finite actions (NaN or inf)")
        return chunk

    def _fail(self, what: str) -> None:
        raise Gr00tServerError(f"The GR00T server at {self._address} {what}.")

    def _request(self, request: dict, timeout_s: float, connecting: bool = False, configs: bool = False) -> Any:
        token = self._token()
        if token:
            request["api_token"] = token
        if self._socket is None:
            self._socket = self._context.socket(zmq.REQ)
            for option, value in ((zmq.LINGER, 0), (zmq.MAXMSGSIZE, self.cfg.max_message_bytes)):
                self._socket.setsockopt(option, value)
            self._socket.connect(f"tcp://{self._address}")
        timeout_ms = max(1, math.ceil(timeout_s * 1e3))
        self._socket.setsockopt(zmq.SNDTIMEO, timeout_ms)
        self._socket.setsockopt(zmq.RCVTIMEO, timeout_ms)
        try:
            self._socket.send(codec.packb(request))
            message = self._socket.recv()
        except zmq.Again:
            self.close()  # a REQ socket that missed its reply cannot send again
            if connecting:
                raise ConnectionError(
                    f"No GR00T policy server answers at {self._address} within {timeout_s:g} s: start one (Isaac-GR00T's"
                    f" run_gr00t_server.py, or `tools/run.sh python scripts/serve_policy.py --wire gr00t --port"
                    f" {self.cfg.port}`), or fix the address.") from None
            raise TimeoutError(f"The GR00T server at {self._address} did not answer {request['endpoint']} within"
                               f" {timeout_s:g} s: raise Gr00tChunkModelCfg.timeout_s for a slow model, or check the"
                               " server.") from None
        if hmac.compare_digest(message, b"ERROR"):
            self._fail("failed the request (b'ERROR'): is it a GR00T policy server?")
        try:
            reply, _ = codec.unpackb(message, configs)
        except ValueError as err:
            self._fail(f"sent a reply this client cannot read ({err})")
        if isinstance(reply, Mapping) and "error" in reply:
            self._fail(f"failed {request['endpoint']}: {str(reply['error'])[:500]}")
        return reply


@configclass
class Gr00tChunkModelCfg(ChunkModelClientCfg):
    """Configuration of :class:`Gr00tChunkModel`: that of every client, what to send (keys, prompt, form), the
    client's limits on the server's modality config and the real-time chunking options."""

    class_type: type = Gr00tChunkModel
    """The class this cfg configures."""
    port: int = 5555
    """TCP port of the server (GR00T's default 5555)."""
    chunk_length: int | None = None
    """Actions H taken from each reply (None: all the action modality's ``delta_indices``)."""
    action_dim: int | None = None
    """Action dim the concatenated action keys must have (None: the env's after ``check_env``)."""
    keys: dict[str, str] | None = None
    """GR00T key -> observation path of the env, e.g. ``{"state.cartpole": "policy", "video.scene":
    "images/scene_camera"}``; None: each key's name after the modality (``state.policy`` -> ``policy``)."""
    prompt: str | None = None
    """Text sent under the server's language key (required when it has one)."""
    form: str = "flat"
    """``flat`` keys (``state.x``, as GR00T's sim wrapper takes them) or ``nested`` (``{"state": {"x": ...}}``)."""
    max_message_bytes: int = 64 * 2**20
    """Largest reply accepted [bytes] (ZeroMQ drops a larger one, and the request times out)."""
    max_history_steps: int = MAX_STEPS
    """Most steps the observation-history ring of a key keeps (1 - the oldest ``delta_indices``): the ring takes
    N x steps x D of the env device, so a server asking for more is refused."""
    max_keys: int = 64
    """Most keys one modality of the server's config may have."""
    rtc_options: bool = False
    """Take the ``rtc`` schedule's committed prefix (``accepts_prefix``) and send it as GR00T N1.7's real-time
    chunking options (:mod:`~isaaclab_suspend.serving.gr00t.rtc`); off: no prefix, ``options`` None."""
    rtc_ramp_rate: float = 5.0
    """``rtc_ramp_rate`` sent with the options: how fast N1.7 releases the inpainted steps after the frozen ones."""
