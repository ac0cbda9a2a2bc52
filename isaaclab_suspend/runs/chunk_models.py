"""Where a run's chunk model comes from: one ``@configclass`` per source, a registry of them keyed by name, and
:class:`ChunkModelSource`, which opens a source before any env is built (a file read, a server reached: a bad one
fails first) and then makes the model for each env, checked against it.

============ ============================== ===================================================== ==================
name         cfg                            chunk model                                           H
============ ============================== ===================================================== ==================
embedded     :class:`EmbeddedModelCfg`      the task's planner (its ``chunk_model_entry_point``)  ``chunk_length``
chunk_policy :class:`ChunkPolicyModelCfg`   a checkpoint of ``scripts/train_chunk_policy.py``     the checkpoint's
lerobot      :class:`LeRobotModelCfg`       a LeRobot ``pretrained_model`` directory              ``n_action_steps``
rl_actor     :class:`RlActorModelCfg`       an rsl_rl / skrl actor, closed loop                   1
remote       ``RemoteChunkModelCfg``        a policy of ``scripts/serve_policy.py``               the server's
openpi       ``OpenpiChunkModelCfg``        an openpi policy server                               the reply's
gr00t        ``Gr00tChunkModelCfg``         a GR00T policy server                                 the horizon's
============ ============================== ===================================================== ==================
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from isaaclab.utils import configclass

from ..learning import load_chunk_policy
from ..names import DEFAULT_CHUNK, DEFAULT_TASK
from ..chunking import ActionChunkingPolicy, ActionChunkingPolicyCfg, LatencyCfg, LatencyEmulator
from ..rl import load_checkpoint_policy
from ..rl.checkpoint_policy import read_checkpoint, shipped_checkpoint
from ..serving import GR00T_SCHEME, OPENPI_SCHEME, Gr00tChunkModelCfg, OpenpiChunkModelCfg, RemoteChunkModelCfg
from ..serving.common import check_observation_paths
from ..tasks.embedded import make_default_model, tasks_with_chunk_model
from ..tasks.env_factory import quieted, resolve_task_id

if TYPE_CHECKING:
    from ..envs import SuspendableManagerBasedRLEnv
    from ..chunking import ChunkModel



@configclass
class EmbeddedModelCfg:
    """The task's embedded planner (its ``chunk_model_entry_point``: Cartpole's LQR plans, push-cube's PD plans)."""

    chunk_length: int | None = None
    """Actions per chunk H (None: :data:`~isaaclab_suspend.names.DEFAULT_CHUNK`)."""
    planner_overrides: list[str] = []
    """``KEY=VALUE`` overrides of the planner's cfg fields (``--planner_cfg``)."""


@configclass
class ChunkPolicyModelCfg:
    """A chunk policy written by ``scripts/train_chunk_policy.py`` (its task and H are in the file)."""

    path: str = ""
    """The checkpoint file."""
    chunk_length: int | None = None
    """H; None or the checkpoint's own (a chunk policy executes all it plans)."""


@configclass
class LeRobotModelCfg:
    """A LeRobot ``pretrained_model`` directory of ``lerobot-train`` (config.json, model.safetensors)."""

    path: str = ""
    """The ``pretrained_model`` directory."""
    chunk_length: int | None = None
    """Actions executed per chunk (LeRobot's ``n_action_steps``, at most its ``chunk_size``); None: the policy's."""


@configclass
class RlActorModelCfg:
    """An rsl_rl or skrl actor checkpoint, run closed loop (H = 1)."""

    path: str | None = None
    """The checkpoint (None: the task's shipped expert)."""
    chunk_length: int | None = None
    """None or 1: an actor plans one action per observation."""


CHUNK_MODELS: dict[str, type] = {
    "embedded": EmbeddedModelCfg,
    "chunk_policy": ChunkPolicyModelCfg,
    "lerobot": LeRobotModelCfg,
    "rl_actor": RlActorModelCfg,
    "remote": RemoteChunkModelCfg,
    "openpi": OpenpiChunkModelCfg,
    "gr00t": Gr00tChunkModelCfg,
}
"""The cfg of each chunk-model source, by name."""

ModelCfg = (EmbeddedModelCfg | ChunkPolicyModelCfg | LeRobotModelCfg | RlActorModelCfg | RemoteChunkModelCfg
            | OpenpiChunkModelCfg | Gr00tChunkModelCfg)
"""Any cfg of :data:`CHUNK_MODELS`."""
_REMOTE = (RemoteChunkModelCfg, OpenpiChunkModelCfg, Gr00tChunkModelCfg)


def source_name(cfg: ModelCfg) -> str:
    """The registry name of ``cfg``'s source.

    Raises:
        TypeError: If ``cfg`` is no cfg of :data:`CHUNK_MODELS`.
    """
    for name, cfg_type in CHUNK_MODELS.items():
        if type(cfg) is cfg_type:
            return name
    raise TypeError(f"A chunk model cfg must be one of {', '.join(t.__name__ for t in CHUNK_MODELS.values())};"
                    f" got {type(cfg).__name__}.")


class ChunkLengthError(ValueError):
    """A chunk length H that the model cannot execute."""

    def __init__(self, asked: int, reason: str):
        super().__init__(f"chunk_length {asked}: {reason}")
        self.asked, self.reason = asked, reason


class ChunkModelSource:
    """A chunk-model cfg opened: its file read or its server reached, the task it runs on and its H.

    Opening checks everything that needs no env (a file that is no checkpoint, a server that does not answer, a
    planner override that does not fit, an H the model cannot execute), so a run fails before it builds one;
    :meth:`make` then gives the model for an env, checked against it.
    """

    def __init__(self, cfg: ModelCfg, task: str | None = None, device: str = "cpu",
                 latency: LatencyCfg | None = None, keys_label: str = "keys", chunk_length: int | None = None):
        """Open ``cfg``'s source for ``task`` (None: the model's own, else
        :data:`~isaaclab_suspend.names.DEFAULT_TASK`) on ``device``.

        Args:
            latency: Emulated inference latency around every model made (None: none).
            keys_label: What a key map's errors call it (a script: its flag).
            chunk_length: H asked for (None: the cfg's ``chunk_length`` where it has one, else the model's); a
                served policy's H is the server's, so another is refused.

        Raises:
            ValueError: If the source, the task or the chunk length is refused (one line saying why).
            FileNotFoundError, ConnectionError, TimeoutError, RuntimeError: If a file or server cannot be opened.
        """
        self.cfg, self.device, self.latency, self.keys_label = cfg, device, latency, keys_label
        self.name = source_name(cfg)
        self.model = None
        """The model opened once for every env (a checkpoint, a server's client); None where made per env."""
        if isinstance(cfg, (ChunkPolicyModelCfg, LeRobotModelCfg)):
            self.model = load_chunk_policy(cfg.path, device)
            task = task or self.model.task or None
        elif isinstance(cfg, _REMOTE):
            self.model = cfg.class_type(cfg)
            task = task or self.model.metadata.get("task")
        self.task = resolve_task_id(task or DEFAULT_TASK)
        if isinstance(cfg, RlActorModelCfg):
            self.path = cfg.path or shipped_checkpoint(self.task)
            read_checkpoint(self.path)  # a bad file fails before an env or an output file exists
        asked = chunk_length if chunk_length is not None else getattr(cfg, "chunk_length", None)
        if isinstance(cfg, EmbeddedModelCfg):
            if self.task not in tasks_with_chunk_model():
                raise ValueError(f"task '{self.task}' has no embedded chunk model; tasks with one:"
                                 f" {tasks_with_chunk_model()}")
            make_default_model(self.task, asked or DEFAULT_CHUNK, cfg.planner_overrides)  # does the override fit?
        self.chunk_length = self._chunk_length(asked)

    def _chunk_length(self, asked: int | None) -> int:
        """H: ``asked``, or the model's; a LeRobot policy may execute fewer than it plans."""
        planned = 1 if isinstance(self.cfg, RlActorModelCfg) else getattr(self.model, "chunk_length", None)
        if planned is None:
            return asked or DEFAULT_CHUNK
        if asked is not None and asked != planned:
            shorten = getattr(self.model, "set_chunk_length", None)
            if shorten is None:
                raise ChunkLengthError(asked, f"the {self.name} policy '{self.describe_where()}' plans {planned}"
                                              " actions per chunk")
            try:
                shorten(asked)
            except ValueError as err:
                raise ChunkLengthError(asked, str(err)) from None
        return asked or planned

    def describe_where(self) -> str:
        """The file or address of the source ('' for the embedded planner)."""
        if isinstance(self.cfg, _REMOTE):
            scheme = {"openpi": OPENPI_SCHEME, "gr00t": GR00T_SCHEME}.get(self.name, "")
            return f"{scheme}{self.cfg.host}:{self.cfg.port}"
        return getattr(self, "path", None) or getattr(self.cfg, "path", "")

    def make(self, env: SuspendableManagerBasedRLEnv | None = None, warn: Callable[[str], None] | None = None
             ) -> ChunkModel:
        """The chunk model for ``env``, checked against it, with the emulated latency if any; ``warn`` gets a
        line about an H that does not suit the env's episodes (default: printed on stderr). ``env`` None: the
        model unchecked, to serve it (an RL actor is built on its env and needs one).

        Raises:
            ValueError: If the model does not fit the env (another task, other dims, observation paths it lacks).
        """
        if isinstance(self.cfg, EmbeddedModelCfg):
            model = make_default_model(self.task, self.chunk_length, self.cfg.planner_overrides)
        elif isinstance(self.cfg, RlActorModelCfg):
            if env is None:
                raise ValueError(f"The RL actor '{self.path}' is built on an env of its task: pass one.")
            with quieted():  # Isaac Lab's and rsl_rl's lines about the agent cfg
                model = load_checkpoint_policy(self.path, env, task=self.task)
        else:
            model = self.model
        if env is not None:
            self._check(model, env, warn or _print_warning)
        return LatencyEmulator(model, self.latency) if self.latency is not None else model

    def _check(self, model: ChunkModel, env: SuspendableManagerBasedRLEnv, warn: Callable[[str], None]) -> None:
        if isinstance(self.cfg, (OpenpiChunkModelCfg, Gr00tChunkModelCfg)):  # paths the env lacks: the first call
            check_observation_paths(env, dict(self.cfg.keys or ()), self.keys_label)
        check_env = getattr(model, "check_env", None)  # optional in the ChunkModel contract
        if check_env is not None:
            check_env(env)
        chunk_warning = getattr(model, "chunk_warning", None)  # a LeRobot policy's H against the episodes
        if chunk_warning is not None and (text := chunk_warning(env)):
            warn(text)

    def describe(self) -> str:
        """The source in a few words, for a run's report."""
        if isinstance(self.cfg, EmbeddedModelCfg):
            overrides = self.cfg.planner_overrides
            return f"embedded model with {', '.join(overrides)}" if overrides else "embedded model"
        what = {"chunk_policy": "chunk policy", "lerobot": "chunk policy", "rl_actor": "checkpoint"}
        return f"{what.get(self.name, 'remote policy')} {self.describe_where()}"


def make_chunking_policy(cfg: ActionChunkingPolicyCfg, source: ChunkModelSource, env, schedule: str
                         ) -> ActionChunkingPolicy:
    """An :class:`ActionChunkingPolicy` of ``source``'s model on ``env`` under ``schedule`` (TensorBoard logs in
    ``<cfg.log_dir>/<schedule>`` where ``cfg`` has a log directory)."""
    log_dir = os.path.join(cfg.log_dir, schedule) if cfg.log_dir else None
    return ActionChunkingPolicy(source.make(env), env, cfg.replace(schedule=schedule,
                                                                  chunk_length=source.chunk_length, log_dir=log_dir))


def _print_warning(text: str) -> None:
    print(f"warning: {text}", file=sys.stderr)
