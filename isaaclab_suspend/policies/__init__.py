"""Action-chunking policies on suspendable envs.

What a reader looks for, where:

* the core: :class:`ActionChunkingPolicy` (``chunking_policy``), the chunk-model contract
  :class:`~.model.ChunkModel` (``model``), schedules, per-env chunk queues, aggregators, the inference cost
  model, and the ``async`` schedule's worker thread (``async_inference``);
* latency emulation (``latency``), a model wrapper; transports (TCP, openpi, batching) live in
  :mod:`isaaclab_suspend.serving` and nothing here imports them;
* evaluation reporting (``evaluation``): figures, episode outcomes, fair episode accounting, the timeline;
* chunk provenance (``provenance``): which model call, chunk index and age each action came from;
* each task's embedded planner lives in its task package and is found by :func:`make_default_model`.
"""

from .aggregators import AGGREGATORS, blend, replace, resolve_aggregator, soft_mask, temporal_ensemble
from .chunk_queues import ChunkQueues
from .chunking_policy import ActionChunkingPolicy, ActionChunkingPolicyCfg, StepStatus
from .cost_model import InferenceCostModel
from .embedded import make_default_model, tasks_with_chunk_model
from .evaluation import ChunkingStats, ChunkTimeline, EpisodeLedger, EpisodeOutcomes, plot_timelines, stats_table
from .latency import LatencyCfg, LatencyEmulator
from .model import ChunkModel
from .observation_history import ObservationHistories, ObservationHistory
from .provenance import ChunkProvenance
from .schedules import SCHEDULES, ChunkSchedule, SchedulePlan, make_schedule

_TASK_MODELS = {
    "CartpoleLQRCfg": "isaaclab_suspend.tasks.cartpole.chunk_model",
    "CartpoleLQRChunkModel": "isaaclab_suspend.tasks.cartpole.chunk_model",
    "PushCubeChunkCfg": "isaaclab_suspend.tasks.push_cube.chunk_model",
    "PushCubeChunkModel": "isaaclab_suspend.tasks.push_cube.chunk_model",
}
"""Planners that moved to their task packages, still importable from here (resolved on first access)."""


def __getattr__(name: str):
    if name in _TASK_MODELS:
        import importlib

        return getattr(importlib.import_module(_TASK_MODELS[name]), name)
    if name == "DEFAULT_MODELS":
        from . import embedded

        return embedded.DEFAULT_MODELS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AGGREGATORS",
    "DEFAULT_MODELS",
    "SCHEDULES",
    "ActionChunkingPolicy",
    "ActionChunkingPolicyCfg",
    "CartpoleLQRCfg",
    "CartpoleLQRChunkModel",
    "ChunkModel",
    "ChunkProvenance",
    "ChunkQueues",
    "ChunkSchedule",
    "ChunkTimeline",
    "ChunkingStats",
    "EpisodeLedger",
    "EpisodeOutcomes",
    "InferenceCostModel",
    "ObservationHistories",
    "ObservationHistory",
    "LatencyCfg",
    "LatencyEmulator",
    "PushCubeChunkCfg",
    "PushCubeChunkModel",
    "SchedulePlan",
    "StepStatus",
    "blend",
    "make_default_model",
    "make_schedule",
    "plot_timelines",
    "replace",
    "resolve_aggregator",
    "soft_mask",
    "stats_table",
    "tasks_with_chunk_model",
    "temporal_ensemble",
]
