"""Recorder manager that records only the active envs, into preallocated device buffers."""

from __future__ import annotations

import errno
import math
import os
import shutil
from collections.abc import Sequence
from dataclasses import fields
from typing import TYPE_CHECKING

import numpy as np
import torch

from isaaclab.managers import (
    DatasetExportMode,
    RecorderManager,
    RecorderManagerBaseCfg,
    RecorderTerm,
    RecorderTermCfg,
)
from isaaclab.utils import configclass
from isaaclab.utils.datasets import EpisodeData

from ..names import CFG_OVERRIDES_ATTR
from .episode_buffers import EpisodeBuffers
from .episode_writer import EpisodeWriter, EpisodeWriterCfg, check_setting
from .hand_over import EpisodeHandOver
from .sharded_writer import ShardedEpisodeWriter, open_episode_writer

if TYPE_CHECKING:
    from isaaclab.envs import ManagerBasedRLEnv


class SuspendableRecorderManager(RecorderManager):
    """Isaac Lab's :class:`~isaaclab.managers.RecorderManager` that records a bool mask of envs per step.

    It runs Isaac Lab's recorder terms (e.g. those of
    :class:`~isaaclab.envs.mdp.recorders.recorders_cfg.ActionStateRecorderManagerCfg`) and writes Isaac Lab's
    HDF5 layout (that of Isaac Lab's :class:`~isaaclab.utils.datasets.HDF5DatasetFileHandler`), so every reader
    of Isaac Lab datasets reads its files. What changes is where the open episodes live, who records and who
    writes:

    * The step hooks (:meth:`record_pre_step`, :meth:`record_post_physics_decimation_step`,
      :meth:`record_post_step`) take an optional device bool mask of the envs that record the sample; the
      suspendable env passes its active mask, so a suspended env records nothing. The samples go into
      :class:`EpisodeBuffers` (one preallocated tensor of shape (num_slots, capacity, ...) per recorded tensor,
      a slot per env plus spare ones, and a write index per env): a few tensor ops per key and step, no host
      sync, no Python loop over envs.
      The stock manager appends every env's row to a Python list, env by env, every step.
    * An export leaves the ended episodes where they were recorded and moves their envs to spare episode slots
      (:attr:`SuspendableRecorderManagerCfg.spare_slots`). The ended episodes leave the buffers together, as
      copies gathered in one op per tensor, when the spare slots run out, at the first step
      :attr:`SuspendableRecorderManagerCfg.handover_interval_s` after the first of them ended, or at close: a
      large run ends episodes at almost every step, and pays the fixed cost of a hand-over every few steps
      instead. They go to an :class:`EpisodeWriter`, which routes them (export modes, success split) to a
      writer process that writes and flushes them (or to the least loaded of several, each writing part files
      merged into the dataset at close: :attr:`EpisodeWriterCfg.num_writers`); the step thread reads nothing back
      from the device and waits only when :attr:`EpisodeWriterCfg.queue_size` episodes are waiting to be flushed.
    * An episode without a single step sample (reset before it stepped) is never exported: no demo has
      length 0. Its success is the ``success`` termination term at its reset, where the task has one.
    * An open episode marked by :meth:`discard_open_episodes` (one that did not start from its reset with its
      full time budget, e.g. a desynchronised first episode, or one past a quota) is dropped when it ends.

    Guarantees on the written file: every demo has ``num_samples == len(actions) == len(states)`` (with the
    stock action and state terms), ``data.attrs["total"]`` is the number of active env-steps of the written
    episodes, and the file is valid after every flush (with several writers: each part file, and the dataset once
    merged). :meth:`close` (``env.close()``, also after an exception or Ctrl-C) writes every exported episode
    before it returns; a killed process loses at most the episodes not yet flushed (:attr:`unflushed_count`, at
    most ``max(queue_size, num_envs)`` per writer process). Episodes still
    open when the manager closes are dropped (they have no end), which is why ``export_in_close`` must stay
    False.

    Raises:
        ValueError: If ``export_in_close`` is True.
        OSError: If the dataset directory cannot be created or written, or has less free space than
            :attr:`SuspendableRecorderManagerCfg.min_free_space_mb`, or part files of an earlier recording are in
            the way; or, from a later call, if a writer could not write or the parts could not be merged (the
            episodes written before stay readable; the error says where).
    """

    cfg: SuspendableRecorderManagerCfg

    def __init__(self, cfg: RecorderManagerBaseCfg | dict | None, env: ManagerBasedRLEnv):
        cfg = SuspendableRecorderManagerCfg.from_cfg(cfg)
        self._term_names, self._terms = [], {}  # read by close() if a check below raises
        self.writer: EpisodeWriter | ShardedEpisodeWriter | None = None
        """Writes the exported episodes, in child processes (:attr:`EpisodeWriterCfg.num_writers`)."""
        if cfg is not None and _has_terms(cfg):
            if cfg.export_in_close:
                raise ValueError(
                    "SuspendableRecorderManager drops the episodes still open at close (they have no end): set"
                    " export_in_close = False."
                )
            if cfg.dataset_export_mode != DatasetExportMode.EXPORT_NONE:
                _check_output_dir(cfg.dataset_export_dir_path, cfg.min_free_space_mb)
        if cfg is not None:
            # the writer owns the files: the parent must not create them, and its __init__ does so from the export
            # mode with no hook to skip it (a handler class that creates nothing would stub its eight methods)
            mode, cfg.dataset_export_mode = cfg.dataset_export_mode, DatasetExportMode.EXPORT_NONE
        try:
            super().__init__(cfg, env)
        finally:
            if cfg is not None:
                cfg.dataset_export_mode = mode
        if len(self.active_terms) == 0:
            return
        self.cfg.dataset_export_mode = mode
        capacity = cfg.buffer_length or _default_capacity(env)
        spare = cfg.spare_slots if cfg.spare_slots is not None else max(4, env.num_envs // 4)
        check_setting("SuspendableRecorderManagerCfg.spare_slots", spare, 0)
        check_setting("SuspendableRecorderManagerCfg.handover_interval_s", cfg.handover_interval_s, 0, integer=False)
        self.buffers = EpisodeBuffers(env.num_envs, capacity, env.device, spare_slots=spare)
        """The open episode of every env, and the ended episodes not handed to the writer yet."""
        self._step_terms = {
            hook: [t for t in self._terms.values() if getattr(type(t), hook) is not getattr(RecorderTerm, hook)]
            for hook in ("record_pre_step", "record_post_physics_decimation_step", "record_post_step")
        }
        """The terms that record something at each step hook (the others return nothing there)."""
        self._success = torch.zeros(env.num_envs, dtype=torch.bool, device=env.device)
        """Success of each env's open episode, set at its reset. Shape: (num_envs,)."""
        self._host_success = self._success.numpy() if self._success.device.type == "cpu" else None
        """:attr:`_success` viewed by numpy, on the CPU (host ids and numpy's indexing: a fraction of torch's)."""
        self._discarded = np.zeros(env.num_envs, dtype=bool)
        """Host flags: the open episode of each env is dropped, not exported, when it ends. Shape: (num_envs,)."""
        self.writer = open_episode_writer(
            cfg.writer, self.dataset_file_paths, cfg.dataset_export_mode, getattr(env.cfg, "env_name", None),
            compress=cfg.dataset_compression,
        )
        self.hand_over = EpisodeHandOver(self.buffers, self.writer, cfg.writer.queue_size, cfg.handover_interval_s)
        """Retires ended episodes, hands them to the writer and waits on it: the recording's one back-pressure."""
        self._env_args_written = False

    def __str__(self) -> str:
        return super().__str__().replace("<RecorderManager>", "<SuspendableRecorderManager>", 1)

    """
    Properties.
    """

    @property
    def dataset_file_paths(self) -> list[str]:
        """Paths of the files the manager writes: the dataset, then the failed-episode file if there is one."""
        return dataset_file_paths(self.cfg) if len(self.active_terms) else []

    @property
    def unflushed_count(self) -> int:
        """Episodes exported and not flushed to the file(s) yet: at most what a killed run loses."""
        return self.hand_over.unflushed_count if self.writer is not None else 0

    @property
    def exported_successful_episode_count(self) -> int:
        """Succeeded episodes the writer wrote (or dropped by the export mode)."""
        return self.writer.written_count(True) if self.writer is not None else 0

    @property
    def exported_failed_episode_count(self) -> int:
        """Failed episodes the writer wrote (or dropped by the export mode)."""
        return self.writer.written_count(False) if self.writer is not None else 0

    """
    Operations - recording.
    """

    def record_pre_step(self, env_mask: torch.Tensor | None = None) -> None:
        """Record the terms' pre-step values for the envs in ``env_mask`` (bool, shape (num_envs,); None: all).

        Raises:
            OSError: If the writer failed since the last call (the episodes written before stay readable).
        """
        if self.writer is not None:
            self.hand_over.poll()
        self._record_step("record_pre_step", env_mask)

    def record_post_physics_decimation_step(self, env_mask: torch.Tensor | None = None) -> None:
        """Record the terms' post-physics values for the envs in ``env_mask`` (None: all)."""
        self._record_step("record_post_physics_decimation_step", env_mask)

    def record_post_step(self, env_mask: torch.Tensor | None = None) -> None:
        """Record the terms' post-step values for the envs in ``env_mask`` (None: all)."""
        self._record_step("record_post_step", env_mask)

    def add_to_episodes(self, key: str, value: torch.Tensor | dict, env_ids: Sequence[int] | slice | None = None):
        """Append a sample to the open episodes of ``env_ids`` (all envs if None), as the parent does.

        Args:
            key: The key; ``/`` separates nested keys.
            value: A tensor or nested dict of tensors with one row per env in ``env_ids``. Shape: (len(env_ids), ...).
            env_ids: The env ids (a sequence, a 1-D integer tensor or a slice); None for all envs.
        """
        if len(self.active_terms) == 0 or key is None:
            return
        if env_ids is None or (isinstance(env_ids, slice) and env_ids == slice(None)):
            self.buffers.append(key, value, None)
        else:
            self.buffers.append_rows(key, value, self._ids_tensor(env_ids))

    def set_success_to_episodes(self, env_ids: Sequence[int] | slice | None, success_values: torch.Tensor):
        """Set the success of the open episodes of ``env_ids`` (a device write, no host sync).

        Args:
            env_ids: The env ids; None for all envs.
            success_values: Success per env in ``env_ids``. Shape: (len(env_ids),) or (len(env_ids), 1).
        """
        if len(self.active_terms) == 0:
            return
        ids = slice(None) if env_ids is None else self._ids_tensor(env_ids)
        self._success[ids] = success_values.reshape(-1).to(device=self._success.device, dtype=torch.bool)

    def discard_open_episodes(self, env_ids: Sequence[int] | torch.Tensor | slice | None = None) -> None:
        """Drop the open episodes of ``env_ids`` (all envs if None) when they end, instead of exporting them.

        For episodes that are not demos: one whose time budget a desynchronised start cut short, or one an env
        runs past its quota. The flags are host-side and read at the export (a host-side event already), so the
        step costs nothing; a flag holds until its episode is exported or dropped.
        """
        if len(self.active_terms) > 0:
            self._discarded[self._ids_list(env_ids)] = True

    def reset(self, env_ids: Sequence[int] | torch.Tensor | slice | None = None) -> dict[str, torch.Tensor]:
        """Start new episodes for ``env_ids`` (all envs if None): their open episodes are emptied."""
        if len(self.active_terms) == 0:
            return {}
        for term in self._terms.values():
            term.reset(env_ids=env_ids)
        if env_ids is None or isinstance(env_ids, slice):
            ids = host_ids = slice(None) if env_ids is None else env_ids
        else:  # device ids (the env's resets) stay on the device: the host-side bounds stay loose
            ids, host_ids = self._ids_tensor(env_ids), None if isinstance(env_ids, torch.Tensor) else env_ids
        self.buffers.clear(ids, host_ids)
        self._success[ids] = False
        return {}

    """
    Operations - episodes.
    """

    def get_episode(self, env_id: int) -> EpisodeData:
        """A copy of the open episode of ``env_id`` (tensors of shape (num_samples, ...)); empty before it steps."""
        episode = EpisodeData()
        if len(self.active_terms) == 0:
            return episode
        tree = self.buffers.episode(env_id)
        if tree:
            episode.data = tree
            episode.success = bool(self._success[env_id])
            episode.seed = getattr(self._env.cfg, "seed", None)  # Isaac Lab's own tests use cfgs without one
        return episode

    def export_episodes(
        self, env_ids: Sequence[int] | slice | None = None, demo_ids: Sequence[int] | None = None
    ) -> None:
        """End the open episodes of ``env_ids`` (all envs if None) for the writer; their envs start empty ones.

        The episodes stay in the buffers and are handed to the writer with those of later exports (see the
        class). When the spare slots or the writer's queue bound have no room for them, the waiting episodes are
        handed over first, and these wait in the slots that frees or, if they still do not fit, go with them. The writer routes them by export mode and success and writes them in a child process
        (episodes without a step sample are not written). Device ids are read once on the host (exports run at
        resets, which read them already); the episodes are not: no other host sync. Waits only while the
        writer's queue is full.

        The episodes marked by :meth:`discard_open_episodes` are emptied instead (their envs start empty ones).

        Args:
            env_ids: The env ids; None for all envs.
            demo_ids: Custom demo numbers (``demo_{id}``), one per env id; None for the file's next ones.

        Raises:
            ValueError: If the env ids are not unique ids of envs, or ``demo_ids`` are not one unique id per env.
            OSError: If the writer could not write (disk full, file removed); the episodes written before stay.
        """
        if len(self.active_terms) == 0:
            return
        env_list = self._ids_list(env_ids)
        if not env_list:
            return
        n = self._env.num_envs
        if (min(env_list) < 0 or max(env_list) >= n or len(set(env_list)) != len(env_list)):
            raise ValueError(f"export_episodes takes unique env ids in [0, {n}), got {env_list}.")
        if demo_ids is not None:
            demo_ids = demo_ids.tolist() if isinstance(demo_ids, torch.Tensor) else list(demo_ids)
            if len(demo_ids) != len(env_list) or len(set(demo_ids)) != len(demo_ids):
                raise ValueError(f"demo_ids must be {len(env_list)} unique ids, one per env id; got {demo_ids}.")
        discarded = self._discarded[env_list]
        if discarded.any():
            self._drop_discarded([i for i, d in zip(env_list, discarded) if d])
            demo_ids = None if demo_ids is None else [d for d, x in zip(demo_ids, discarded) if not x]
            env_list = [i for i, d in zip(env_list, discarded) if not d]
            if not env_list:
                return
        if not self._env_args_written:
            self.writer.seed = getattr(self._env.cfg, "seed", None)
            self.writer.add_env_args(self.get_ep_meta())
            self._env_args_written = True
        on_cpu = self._host_success is not None
        ids = None if on_cpu else self._ids_tensor(env_list)
        success = self._host_success[env_list] if on_cpu else self._success[ids]
        self.hand_over.export(ids, env_list, success, demo_ids)
        if on_cpu:
            self._host_success[env_list] = False
        else:
            self._success[ids] = False

    def close(self) -> None:
        """Write every exported episode, close the file(s), then close the terms as the parent does.

        Idempotent (the env closes it, and the parent's ``__del__`` again).

        Raises:
            OSError: If the writer could not write and no earlier call raised it.
        """
        if getattr(self, "_closed", False):
            return
        self._closed = True
        try:
            if self.writer is not None:
                try:
                    self.hand_over.flush()
                finally:
                    self.writer.close()
        finally:
            super().close()

    def get_ep_meta(self) -> dict:
        """The parent's episode metadata, plus the task id, the interval events that ran while recording, the
        control period ``step_dt`` [s], the Hydra overrides the task's cfg was made with and the widths of the ``policy`` observation terms and of the action terms
        (``{name: width}`` in order: what an export names the columns by)."""
        meta = super().get_ep_meta()
        env = self._env
        spec = getattr(env, "spec", None)
        env_name = getattr(env.cfg, "env_name", None) or getattr(spec, "id", None)
        if env_name:
            meta.setdefault("env_name", env_name)
        meta.setdefault("interval_events", list(env.event_manager.active_terms.get("interval", [])))
        meta.setdefault("step_dt", env.step_dt)
        meta.setdefault("cfg_overrides", list(getattr(env.cfg, CFG_OVERRIDES_ATTR, None) or []))
        obs = env.observation_manager
        if "policy" in obs.active_terms and not isinstance(obs.group_obs_dim["policy"], list):
            widths = [math.prod(dims) for dims in obs.group_obs_term_dim["policy"]]
            meta.setdefault("policy_terms", dict(zip(obs.active_terms["policy"], widths)))
        actions = env.action_manager
        meta.setdefault("action_terms", dict(zip(actions.active_terms, actions.action_term_dim)))
        return meta

    """
    Internals.
    """

    def _drop_discarded(self, env_list: list[int]) -> None:
        """Empty the open episodes of ``env_list`` (marked by :meth:`discard_open_episodes`) and unmark them."""
        self._discarded[env_list] = False
        ids = self._ids_tensor(env_list)
        self.buffers.clear(ids, env_list)
        self._success[ids] = False

    def _record_step(self, hook: str, env_mask: torch.Tensor | None) -> None:
        if len(self.active_terms) == 0:
            return
        for term in self._step_terms[hook]:
            key, value = getattr(term, hook)()
            if key is not None:
                self.buffers.append(key, value, env_mask)

    def _ids_tensor(self, env_ids: Sequence[int] | torch.Tensor | slice) -> torch.Tensor:
        if isinstance(env_ids, torch.Tensor):
            return env_ids.to(device=self.buffers.device, dtype=torch.long).reshape(-1)
        return torch.as_tensor(self._ids_list(env_ids), dtype=torch.long, device=self.buffers.device)

    def _ids_list(self, env_ids: Sequence[int] | torch.Tensor | slice | None) -> list[int]:
        if env_ids is None:
            env_ids = slice(None)
        if isinstance(env_ids, slice):
            return list(range(self._env.num_envs)[env_ids])
        if isinstance(env_ids, torch.Tensor):
            return env_ids.reshape(-1).tolist()
        return list(env_ids)

    def _prepare_terms(self):
        """Hand the parent a dict of the cfg's terms only, so that this cfg's settings are not parsed as terms
        (Isaac Lab's parser skips a fixed list of its own settings and refuses any other field that is no term)."""
        cfg = self.cfg
        settings = {f.name for f in fields(SuspendableRecorderManagerCfg)}
        self.cfg = {name: value for name, value in vars(cfg).items() if name not in settings}
        try:
            super()._prepare_terms()
        finally:
            self.cfg = cfg


@configclass
class SuspendableRecorderManagerCfg(RecorderManagerBaseCfg):
    """Configuration of :class:`SuspendableRecorderManager`: Isaac Lab's recorder settings plus buffer sizing.

    Recorder terms are added as fields, as on any :class:`~isaaclab.managers.RecorderManagerBaseCfg`
    (see :class:`~isaaclab_suspend.recording.DatasetRecorderManagerCfg`).
    """

    writer: EpisodeWriterCfg = EpisodeWriterCfg()
    """The episode writer: its processes, queue bound and compression."""

    spare_slots: int | None = None
    """Episode slots of the buffers beyond one per env, where exported episodes wait to be handed to the writer
    together (see :class:`SuspendableRecorderManager`); they add ``spare_slots / num_envs`` to the buffers'
    memory. None: a quarter of ``num_envs``, at least 4. 0: every export is handed over at once."""

    handover_interval_s: float = 0.1
    """Exported episodes are handed to the writer at the first step this long after the first of them was
    exported, at the latest (sooner when the spare slots or the writer's queue have no room for an export)."""

    buffer_length: int | None = None
    """Samples per slot the per-step buffers hold before they grow (they double when full). None: the env's
    max episode length plus a quarter (at least 16, at most 4096: an unbounded episode, e.g.
    ``episode_length_s=1e6``, starts small and grows), so that the device is read about once every
    ``max_episode_length / 4`` steps to check the room left."""

    min_free_space_mb: float = 64.0
    """Free space [MiB] the dataset directory must have when the manager starts, else it raises at once
    rather than failing on a later export."""

    @classmethod
    def from_cfg(cls, cfg: RecorderManagerBaseCfg | dict | None) -> SuspendableRecorderManagerCfg | None:
        """``cfg`` itself if it is one, else a cfg of this class holding every field (terms included) of ``cfg``.

        Raises:
            TypeError: If ``cfg`` is a non-empty dict (Isaac Lab's recorder manager needs a cfg object too).
        """
        if cfg is None or isinstance(cfg, cls):
            return cfg
        if isinstance(cfg, dict):
            if cfg:
                raise TypeError("Recorder terms must be fields of a RecorderManagerBaseCfg, not a dict.")
            return None
        converted = cls()
        for name, value in vars(cfg).items():
            setattr(converted, name, value)
        return converted


def dataset_file_paths(cfg: RecorderManagerBaseCfg) -> list[str]:
    """Paths of the files a recorder with ``cfg`` writes: the dataset, then the failed-episode file if there is
    one (none with ``EXPORT_NONE``); named as the parent names them and as ``HDF5DatasetFileHandler.create``
    completes them."""
    mode = cfg.dataset_export_mode
    if mode == DatasetExportMode.EXPORT_NONE:
        return []
    names = [cfg.dataset_filename]
    if mode == DatasetExportMode.EXPORT_SUCCEEDED_FAILED_IN_SEPARATE_FILES:
        names.append(f"{cfg.dataset_filename}_failed")
    paths = [os.path.abspath(os.path.join(cfg.dataset_export_dir_path, name)) for name in names]
    return [p if p.endswith(".hdf5") else f"{p}.hdf5" for p in paths]


def _has_terms(cfg: RecorderManagerBaseCfg) -> bool:
    return any(isinstance(value, RecorderTermCfg) for value in vars(cfg).values())


def _default_capacity(env: ManagerBasedRLEnv) -> int:
    length = int(getattr(env, "max_episode_length", 0)) or 1000
    return min(length + max(16, length // 4), 4096)


def _check_output_dir(path: str, min_free_space_mb: float) -> None:
    """Raise a clear error now if the dataset directory cannot be created, is not writable or is (nearly) full."""
    path = os.path.abspath(path)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as err:
        raise OSError(err.errno, f"Cannot create the dataset directory '{path}': {err.strerror}.") from err
    if not os.access(path, os.W_OK | os.X_OK):
        raise PermissionError(errno.EACCES, f"The dataset directory '{path}' is not writable.")
    free_mb = shutil.disk_usage(path).free / 2**20
    if free_mb < min_free_space_mb:
        raise OSError(
            errno.ENOSPC,
            f"Only {free_mb:.1f} MiB free in '{path}'; the recorder needs at least {min_free_space_mb:g} MiB"
            " (SuspendableRecorderManagerCfg.min_free_space_mb). Free some space or choose another"
            " dataset_export_dir_path.",
        )
