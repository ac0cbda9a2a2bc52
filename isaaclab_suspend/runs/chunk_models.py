"""Where a run's chunk model comes from: the registry of sources gathered (importing each source's package
registers it) and :class:`ChunkModelSource`, which opens a source cfg before any env is built (a file read, a
server reached: a bad one fails first) and then makes the model for each env, checked against it.

============ ===================================================== ============================ ==================
name         cfg (beside what it builds)                           chunk model                  H
============ ===================================================== ============================ ==================
embedded     :class:`~isaaclab_suspend.tasks.embedded.EmbeddedModelCfg`  the task's planner     ``chunk_length``
chunk_policy :class:`~isaaclab_suspend.learning.ChunkPolicyModelCfg`     ``train_chunk_policy`` the checkpoint's
lerobot      :class:`~isaaclab_suspend.lerobot.policy.LeRobotModelCfg`   ``pretrained_model``   ``n_action_steps``
rl_actor     :class:`~isaaclab_suspend.rl.RlActorModelCfg`              rsl_rl / skrl actor     1
tcp          :class:`~isaaclab_suspend.serving.TcpChunkModelCfg`        ``serve_policy.py``     the server's
openpi       :class:`~isaaclab_suspend.serving.OpenpiChunkModelCfg`     an openpi server        the reply's
gr00t        :class:`~isaaclab_suspend.serving.Gr00tChunkModelCfg`      a GR00T server          the horizon's
============ ===================================================== ============================ ==================

A new source needs no change here: register its cfg (:func:`~isaaclab_suspend.chunking.sources.register_source`,
or a row of :data:`~isaaclab_suspend.serving.wires.WIRES` for a wire).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..chunking import (ActionChunkingPolicy, ActionChunkingPolicyCfg, ChunkScheduleCfg, LatencyCfg, LatencyEmulator,
                        schedule_name)
from ..chunking.chunk_queues import check_queue_memory
from ..chunking.sources import OPENERS, SOURCES, ChunkModelCfg, source_name
from ..learning import ChunkPolicyModelCfg
from ..lerobot.policy import LeRobotModelCfg
from ..names import DEFAULT_CHUNK, DEFAULT_TASK
from ..rl import RlActorModelCfg
from ..serving import Gr00tChunkModelCfg, OpenpiChunkModelCfg, TcpChunkModelCfg
from ..tasks.embedded import EmbeddedModelCfg
from ..tasks.env_factory import resolve_task_id

if TYPE_CHECKING:
    from ..chunking import ChunkModel
    from ..envs import SuspendableManagerBasedRLEnv

CHUNK_MODELS = SOURCES
"""The cfg of each chunk-model source, by name (:data:`isaaclab_suspend.chunking.sources.SOURCES`; importing this
module registers the project's own)."""

ModelCfg = ChunkModelCfg
"""Any registered source cfg."""

__all__ = ["CHUNK_MODELS", "ChunkLengthError", "ChunkModelSource", "ChunkPolicyModelCfg", "EmbeddedModelCfg",
           "Gr00tChunkModelCfg", "LeRobotModelCfg", "ModelCfg", "OpenpiChunkModelCfg", "RlActorModelCfg",
           "TcpChunkModelCfg", "infer_model_cfg", "make_chunking_policy", "source_name"]


def infer_model_cfg(path: str) -> ChunkModelCfg:
    """The cfg of the source that recognizes the file or directory at ``path`` (each source whose opener has a
    ``recognizes(path)`` says; ``--checkpoint PATH``).

    Raises:
        FileNotFoundError: If ``path`` does not exist.
        ValueError: If no source recognizes it.
    """
    if not os.path.exists(path):
        raise FileNotFoundError(f"Checkpoint '{path}' does not exist.")
    for name, cfg_type in SOURCES.items():
        recognizes = getattr(OPENERS[cfg_type], "recognizes", None)
        if recognizes is not None and recognizes(path):
            return cfg_type(path=path)
    readers = [name for name, cfg_type in SOURCES.items() if hasattr(OPENERS[cfg_type], "recognizes")]
    raise ValueError(f"'{path}' is a checkpoint of none of the sources that read files ({', '.join(readers)}): a"
                     " chunk policy of scripts/train_chunk_policy.py, a LeRobot pretrained_model directory or an"
                     " rsl_rl / skrl checkpoint.")


class ChunkLengthError(ValueError):
    """A chunk length H that the model cannot execute."""

    def __init__(self, asked: int, reason: str):
        super().__init__(f"chunk_length {asked}: {reason}")
        self.asked, self.reason = asked, reason


class ChunkModelSource:
    """A chunk-model cfg opened: its file read or its server reached, the task it runs on and its H.

    Opening checks everything that needs no env (a file that is no checkpoint, a server that does not answer, a
    planner override that does not fit, an H the model cannot execute), so a run fails before it builds one;
    :meth:`make` then gives the model for an env, checked against it. What differs between sources is the
    opener's (:class:`~isaaclab_suspend.chunking.sources.ChunkModelOpener`), which the cfg's registration names.
    """

    def __init__(self, cfg: ChunkModelCfg, task: str | None = None, device: str = "cpu",
                 latency: LatencyCfg | None = None, keys_label: str = "keys"):
        """Open ``cfg``'s source for ``task`` (None: the model's own, else
        :data:`~isaaclab_suspend.names.DEFAULT_TASK`) on ``device``; H is ``cfg.chunk_length`` (None: the model's).

        Args:
            latency: Emulated inference latency around every model made (None: none).
            keys_label: What a key map's errors call it (a script: its flag).

        Raises:
            ValueError: If the source, the task or the chunk length is refused (one line saying why).
            FileNotFoundError, ConnectionError, TimeoutError, RuntimeError: If a file or server cannot be opened.
        """
        self.name = source_name(cfg)
        h = cfg.chunk_length
        if h is not None and (isinstance(h, bool) or not isinstance(h, int) or h < 1):
            raise ChunkLengthError(h, "must be a positive integer")
        self.cfg, self.device, self.latency, self.keys_label = cfg, device, latency, keys_label
        self.opener = OPENERS[type(cfg)](cfg, device)
        """What opens this kind of source (:class:`~isaaclab_suspend.chunking.sources.ChunkModelOpener`)."""
        self.model = self.opener.model
        """The model opened once for every env (a checkpoint, a server's client); None where made per env."""
        self.task = resolve_task_id(task or self.opener.own_task or DEFAULT_TASK)
        self.opener.bind(self.task, cfg.chunk_length)
        self.chunk_length = self._chunk_length(cfg.chunk_length)

    def _chunk_length(self, asked: int | None) -> int:
        """H: ``asked``, or the model's; a model with ``set_chunk_length`` (LeRobot's) may execute fewer than it
        plans."""
        planned = self.opener.planned_chunk_length
        if planned is None:
            return asked or DEFAULT_CHUNK
        if asked is not None and asked != planned:
            shorten = getattr(self.model, "set_chunk_length", None)
            if shorten is None:
                raise ChunkLengthError(asked, f"the {self.name} policy '{self.opener.where()}' plans {planned}"
                                              " actions per chunk")
            try:
                shorten(asked)
            except ValueError as err:
                raise ChunkLengthError(asked, str(err)) from None
        return asked or planned

    def describe_where(self) -> str:
        """The file or address of the source ('' for the embedded planner)."""
        return self.opener.where()

    def make(self, env: SuspendableManagerBasedRLEnv | None = None, warn: Callable[[str], None] | None = None
             ) -> ChunkModel:
        """The chunk model for ``env``, checked against it, with the emulated latency if any; ``warn`` gets a
        line about an H that does not suit the env's episodes (default: printed on stderr). ``env`` None: the
        model unchecked, to serve it (an RL actor is built on its env and needs one).

        Raises:
            ValueError: If the model does not fit the env (another task, other dims, observation paths it lacks).
        """
        model = self.opener.make(env, self.chunk_length)
        if env is not None:
            self.opener.check(model, env, self.keys_label)
            check_env = getattr(model, "check_env", None)  # optional in the ChunkModel contract
            if check_env is not None:
                check_env(env)
            chunk_warning = getattr(model, "chunk_warning", None)  # a LeRobot policy's H against the episodes
            if chunk_warning is not None and (text := chunk_warning(env)):
                (warn or _print_warning)(text)
        return LatencyEmulator(model, self.latency) if self.latency is not None else model

    def describe(self) -> str:
        """The source in a few words, for a run's report."""
        return self.opener.describe()


def make_chunking_policy(cfg: ActionChunkingPolicyCfg, source: ChunkModelSource, env,
                         schedule: str | ChunkScheduleCfg) -> ActionChunkingPolicy:
    """An :class:`~isaaclab_suspend.chunking.ActionChunkingPolicy` of ``source``'s model on ``env`` under ``schedule`` (TensorBoard logs in
    ``<cfg.log_dir>/<schedule>`` where ``cfg`` has a log directory). H is the source's and the schedule the run's
    (a name or a cfg; a name that ``cfg.schedule`` also names takes ``cfg.schedule``'s parameters): a ``cfg`` asking
    for others is refused, never overwritten.

    Raises:
        ValueError: If ``cfg.chunk_length`` or ``cfg.schedule`` is set and differs from the source's H or from
            ``schedule``, or the chunk queues would pass their memory bound (checked before the model is made).
    """
    if cfg.chunk_length not in (None, source.chunk_length):
        raise ValueError(f"ActionChunkingPolicyCfg.chunk_length is {cfg.chunk_length} but the {source.name} source"
                         f" executes H = {source.chunk_length}: set H on the source cfg (chunk_length), not here.")
    name = schedule_name(schedule)
    if cfg.schedule is not None and schedule_name(cfg.schedule) != name:
        raise ValueError(f"ActionChunkingPolicyCfg.schedule is '{schedule_name(cfg.schedule)}' but the run's schedule"
                         f" is '{name}': name schedules in EvaluationCfg.schedules (leave chunking.schedule None).")
    if isinstance(schedule, str) and cfg.schedule is not None:
        schedule = cfg.schedule
    check_queue_memory(env.num_envs, source.chunk_length, env.action_manager.total_action_dim)
    log_dir = os.path.join(cfg.log_dir, name) if cfg.log_dir else None
    return ActionChunkingPolicy(source.make(env), env, cfg.replace(schedule=schedule,
                                                                  chunk_length=source.chunk_length, log_dir=log_dir))


def _print_warning(text: str) -> None:
    print(f"warning: {text}", file=sys.stderr)
