"""Action-chunking policies on suspendable envs.

What a reader looks for, where:

* the core: :class:`ActionChunkingPolicy` (``chunking_policy``), the chunk-model contract
  :class:`~.model.ChunkModel` (``model``), schedules, per-env chunk queues, aggregators, the inference cost
  model, and the ``async`` schedule's worker thread (``async_inference``);
* latency emulation (``latency``), a model wrapper; transports (TCP, openpi, batching) live in
  :mod:`isaaclab_suspend.serving` and nothing here imports them;
* the figures of a run (``stats``); episode accounting and the run report live in :mod:`isaaclab_suspend.runs`;
* chunk provenance (``provenance``): which model call, chunk index and age each action came from;
* each task's embedded planner lives in its task package and is found by
  :func:`isaaclab_suspend.tasks.embedded.make_default_model` (the chunking core imports no task).
"""

from .aggregators import AGGREGATORS, blend, replace, resolve_aggregator, soft_mask, temporal_ensemble
from .chunk_queues import ChunkQueues
from .chunking_policy import ActionChunkingPolicy, ActionChunkingPolicyCfg, StepStatus
from .cost_model import InferenceCostModel
from .latency import LatencyCfg, LatencyEmulator
from .model import ChunkModel
from .observation_history import ObservationHistories, ObservationHistory
from .provenance import ChunkProvenance
from .schedules import (SCHEDULE_CFGS, SCHEDULES, AnyScheduleCfg, AsyncScheduleCfg, AutoScheduleCfg, ChunkSchedule,
                        ChunkScheduleCfg, GlobalClockScheduleCfg, HoldScheduleCfg, PartialBatchScheduleCfg,
                        RtcScheduleCfg, SchedulePlan, make_schedule, schedule_cfg, schedule_name)
from .stats import ChunkingStats, stats_table

__all__ = [
    "AGGREGATORS",
    "SCHEDULES",
    "SCHEDULE_CFGS",
    "ActionChunkingPolicy",
    "ActionChunkingPolicyCfg",
    "AnyScheduleCfg",
    "AsyncScheduleCfg",
    "AutoScheduleCfg",
    "ChunkModel",
    "ChunkProvenance",
    "ChunkQueues",
    "ChunkSchedule",
    "ChunkScheduleCfg",
    "GlobalClockScheduleCfg",
    "HoldScheduleCfg",
    "PartialBatchScheduleCfg",
    "RtcScheduleCfg",
    "ChunkingStats",
    "InferenceCostModel",
    "ObservationHistories",
    "ObservationHistory",
    "LatencyCfg",
    "LatencyEmulator",
    "SchedulePlan",
    "StepStatus",
    "blend",
    "make_schedule",
    "schedule_cfg",
    "schedule_name",
    "replace",
    "resolve_aggregator",
    "soft_mask",
    "stats_table",
    "temporal_ensemble",
]
