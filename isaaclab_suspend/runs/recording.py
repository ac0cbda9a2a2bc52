"""A recording: episodes of a policy written to an Isaac Lab HDF5 dataset, active env-steps only, exactly the
number asked for (an env whose next episode would exceed them waits suspended); episodes still open when the run
stops are dropped, and every exported one is already in the file.

Example::

    from isaaclab_suspend.runs import EmbeddedModelCfg, RecordingCfg, RunEnvCfg, record

    result = record(RecordingCfg(env=RunEnvCfg(task="Isaac-PushCube-Suspendable", num_envs=16),
                                 model=EmbeddedModelCfg(), episodes=100, output="datasets/push_cube.hdf5"))
    print(result.written, result.paths)
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from tqdm import tqdm

from isaaclab.managers import DatasetExportMode
from isaaclab.utils import configclass

from ..chunking import ActionChunkingPolicyCfg
from ..chunking.chunk_queues import check_queue_memory
from ..recording import DatasetRecorderManagerCfg, EpisodeWriterCfg, SuspendableRecorderManager
from ..recording.episode_writer import check_writer_count
from ..recording.part_files import part_paths
from ..recording.recorder_manager import dataset_file_paths
from ..tasks.env_factory import StopAfterStep
from .baselines import RandomPolicy
from .chunk_models import ChunkModelSource, ModelCfg, make_chunking_policy
from .outputs import check_output
from .rollout import rollout, start_episodes
from .run_env import RunEnvCfg, check_int, make_ledger, open_run_env

EXPORT_MODES = {
    "all": DatasetExportMode.EXPORT_ALL,
    "succeeded": DatasetExportMode.EXPORT_SUCCEEDED_ONLY,
    "separate": DatasetExportMode.EXPORT_SUCCEEDED_FAILED_IN_SEPARATE_FILES,
}
"""Which episodes a recording exports: Isaac Lab's export modes by name."""


def dataset_recorder_cfg(path: str, suffix: str = "", export: str = "all", writers: int = 1
                         ) -> DatasetRecorderManagerCfg:
    """The recorder of replayable HDF5 episodes (active env-steps only) into ``<stem><suffix>.hdf5`` beside
    ``path`` (``<stem>.hdf5`` or ``<stem>``), exporting as :data:`EXPORT_MODES` ``[export]``, written by ``writers``
    processes (:attr:`~isaaclab_suspend.recording.EpisodeWriterCfg.num_writers`)."""
    directory, name = os.path.split(os.path.abspath(path))
    return DatasetRecorderManagerCfg(dataset_export_dir_path=directory, dataset_filename=name.removesuffix(".hdf5")
                                     + suffix, dataset_export_mode=EXPORT_MODES[export],
                                     writer=EpisodeWriterCfg(num_writers=writers))


def check_datasets(path: str, overwrite: bool, what: str, suffix: str = "", export: str = "all", writers: int = 1,
                   flag: str = "overwrite=True") -> list[str]:
    """The dataset files a recording into ``path`` writes (:func:`dataset_recorder_cfg`), after checking that each
    may be written (:func:`~isaaclab_suspend.runs.outputs.check_output`: new unless ``overwrite``, no symbolic link
    or folder), that ``path`` is no folder (whose ``<folder>.hdf5`` beside it would be written) and that no part
    file of an earlier recording with ``writers`` processes is in the way (they are a killed run's episodes: merged
    or removed by hand, never overwritten). A dataset is written in place, so that a killed run keeps what it
    flushed; with ``overwrite`` the recording replaces the file there.

    Raises:
        ValueError: One line naming ``what`` (a cfg field or a flag), the path and what to do.
    """
    if os.path.isdir(path) or os.path.islink(path):
        check_output(path, overwrite, what, flag)  # says which
    paths = dataset_file_paths(dataset_recorder_cfg(path, suffix, export, writers))
    for file in paths:
        check_output(file, overwrite, what, flag)
        parts = [part for part in part_paths(file, writers) if os.path.lexists(part)] if writers > 1 else []
        if parts:
            raise ValueError(f"{what}: part files of an earlier recording are in the way: {parts}; merge them"
                             f" (scripts/merge_shards.py --datasets {' '.join(parts)} --output {file}) or remove them.")
    return paths


@configclass
class RecordingCfg:
    """A recording of a policy's episodes (:func:`record`)."""

    env: RunEnvCfg = RunEnvCfg()
    """The env; with ``desync`` its first episodes, cut short, are not written."""
    model: ModelCfg | None = None
    """Where the chunk model comes from (:data:`~.chunk_models.CHUNK_MODELS`); None: uniform random actions."""
    chunking: ActionChunkingPolicyCfg = ActionChunkingPolicyCfg(chunk_length=None)
    """The chunking policy around the model, under its ``schedule``; its ``chunk_length`` is the model's (another
    is refused)."""
    output: str = "outputs/datasets/recording.hdf5"
    """The dataset file (with ``export`` ``separate``: ``<stem>.hdf5`` and ``<stem>_failed.hdf5``)."""
    export: str = "all"
    """``all`` episodes, ``succeeded`` only, or succeeded and failed in ``separate`` files."""
    episodes: int | None = 32
    """Episodes to write, exactly (successes only with ``export`` ``succeeded``)."""
    episodes_per_env: int | None = None
    """Instead of ``episodes``: this many from every env (give ``episodes`` None)."""
    max_steps: int = 100_000
    """Stop after this many steps in any case."""
    writers: int = 1
    """Writer processes that share the episodes; their part files are merged into ``output`` at close."""
    show_progress: bool = True
    """A progress bar of the episodes written."""
    overwrite: bool = False
    """Replace dataset files that exist (else they are refused before any env is built)."""

    def validate_config(self) -> None:
        """Check every field before any env is built; Isaac Lab's ``validate()`` calls it after the env's
        (:meth:`~.run_env.RunEnvCfg.validate_config`), and :func:`record` calls that first: one of ``episodes``
        and ``episodes_per_env`` (each >= 1), ``max_steps`` >= 1, ``export`` one of :data:`EXPORT_MODES`,
        ``writers`` in [1, cores], the chunk queues' memory where the model cfg sets H
        (:func:`~isaaclab_suspend.runs.recording.check_chunks`) and the dataset files
        (:func:`~isaaclab_suspend.runs.recording.check_datasets`).

        Raises:
            ValueError: One line naming the field, its value and what it must be.
        """
        if (self.episodes is None) == (self.episodes_per_env is None):
            raise ValueError("RecordingCfg: give one of episodes and episodes_per_env (the other None).")
        check_int("RecordingCfg.episodes" if self.episodes is not None else "RecordingCfg.episodes_per_env",
                  self.episodes if self.episodes is not None else self.episodes_per_env, 1)
        check_int("RecordingCfg.max_steps", self.max_steps, 1)
        if self.export not in EXPORT_MODES:
            raise ValueError(f"RecordingCfg.export must be one of {list(EXPORT_MODES)}, got {self.export!r}.")
        check_writer_count("RecordingCfg.writers", self.writers)
        check_chunks(getattr(self.model, "chunk_length", None), self.env.num_envs)
        check_datasets(self.output, self.overwrite, "RecordingCfg.output", export=self.export, writers=self.writers)


def check_chunks(chunk_length: int | None, num_envs: int) -> None:
    """Check a run's chunk length H (None: the model's own, checked once the model is open) and the memory of its
    chunk queues on ``num_envs`` envs, with at least one action dim
    (:func:`~isaaclab_suspend.chunking.chunk_queues.check_queue_memory`): before any env is built.

    Raises:
        ValueError: If H is not an integer >= 1 or the queues would pass their bound.
    """
    if chunk_length is not None:
        check_int("chunk_length", chunk_length, 1)
        check_queue_memory(num_envs, chunk_length)


@dataclass
class RecordingResult:
    """What a recording wrote."""

    paths: list[str]
    """The dataset files."""
    written: int
    """Episodes written (successes only with ``export`` ``succeeded``)."""
    expected: int
    """Episodes asked for."""
    steps: int
    """Steps run."""
    seconds: float
    """Wall time of the run, env set-up included."""
    figures: dict
    """The counted episodes' figures (success rate, mean length, ...)."""
    episodes: list[dict]
    """A record per counted episode."""
    finished: bool
    """Whether every episode asked for ended (False: ``max_steps`` or an interrupt stopped the run first)."""
    interrupted: bool
    """Whether a Ctrl-C stopped the run (after its step: no export was cut)."""
    has_success: bool
    """Whether the task has a ``success`` termination term."""


def written_count(manager: SuspendableRecorderManager, export: str) -> int:
    """Episodes ``manager`` has written so far (successes only with ``export`` ``succeeded``; also after the env
    closed)."""
    succeeded = manager.exported_successful_episode_count
    return succeeded if export == "succeeded" else succeeded + manager.exported_failed_episode_count


def check_space(env, episodes: int) -> None:
    """Raise if ``episodes`` full-length episodes may not fit beside the env's dataset (uncompressed bound; twice
    that with several writer processes, whose part files stay until their merge is written).

    Raises:
        OSError: Saying how much is needed and free.
    """
    manager = env.recorder_manager
    path = manager.dataset_file_paths[0]
    bytes_per_episode = manager.buffers.bytes_per_step * env.max_episode_length + 8192
    copies = 1 if manager.cfg.writer.num_writers == 1 else 2
    needed_mb = copies * episodes * bytes_per_episode / 2**20
    free_mb = shutil.disk_usage(os.path.dirname(path)).free / 2**20
    if needed_mb > free_mb:
        raise OSError(
            f"{episodes} episodes of up to {env.max_episode_length} steps may need {needed_mb:.0f} MiB"
            f" (uncompressed{', and their merge' if copies > 1 else ''}), but only {free_mb:.0f} MiB are free for"
            f" '{path}'."
        )


def record(cfg: RecordingCfg, source: ChunkModelSource | None = None,
           open_env: Callable = open_run_env) -> RecordingResult:
    """Record ``cfg``'s episodes. A first Ctrl-C stops the run after its step (``interrupted``), a second at once.

    Args:
        source: ``cfg.model`` already opened (a script opens it while parsing); None: opened here.
        open_env: Opens a :class:`~.run_env.RunEnvCfg`'s env as a context manager (a script's adds its error lines).

    Raises:
        ValueError: If ``cfg`` is refused (:meth:`RecordingCfg.validate_config`, before any env is built) or the model
            does not fit the env.
        OSError: If the episodes may not fit on the disk.
    """
    cfg.validate()
    if source is None and cfg.model is not None:
        source = ChunkModelSource(cfg.model, cfg.env.task, cfg.env.device)
    if source is not None:
        check_chunks(source.chunk_length, cfg.env.num_envs)
    env_cfg = cfg.env.replace(task=source.task if source is not None else cfg.env.task)
    start, steps = time.perf_counter(), 0
    with open_env(env_cfg) as env:
        generator = torch.Generator(device=env.device).manual_seed(env_cfg.seed or 0)
        has_success = "success" in env.termination_manager.active_terms
        if source is None:
            policy = RandomPolicy(env, generator)
        else:
            policy = make_chunking_policy(cfg.chunking, source, env, cfg.chunking.schedule)  # before any file
        manager = env.start_recording(dataset_recorder_cfg(cfg.output, export=cfg.export, writers=cfg.writers))
        if source is not None:  # the file says how its chunks were scheduled (the LeRobot export reads it)
            manager.writer.add_env_args({"schedule": policy.schedule.name, "chunk_length": source.chunk_length})
        obs = start_episodes(env, env_cfg.seed, env_cfg.desync, generator)
        ledger = make_ledger(env_cfg, env, policy, per_env=cfg.episodes_per_env, total=cfg.episodes,
                             export=cfg.export)
        expected = cfg.episodes or cfg.episodes_per_env * env.num_envs
        with tqdm(total=expected, desc="episodes", unit="ep", disable=not cfg.show_progress) as bar, \
                StopAfterStep() as stop:
            for _ in rollout(env, policy, obs, ledger=ledger):
                steps += 1
                if steps == 1:
                    check_space(env, expected)
                bar.update(min(written_count(manager, cfg.export), expected) - bar.n)
                if steps >= cfg.max_steps or stop.requested:
                    break
        records = ledger.records()
    return RecordingResult(manager.dataset_file_paths, written_count(manager, cfg.export), expected, steps,
                           time.perf_counter() - start, ledger.as_dict(records), records, ledger.finished,
                           stop.requested, has_success)
