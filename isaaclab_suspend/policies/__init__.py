"""Action-chunking policies on suspendable envs: schedules, aggregators, latency emulation, embedded models."""

from .aggregators import AGGREGATORS, blend, replace, resolve_aggregator, temporal_ensemble
from .cartpole_lqr import CartpoleLQRCfg, CartpoleLQRChunkModel
from .chunk_queues import ChunkQueues
from .chunking_policy import ActionChunkingPolicy, ActionChunkingPolicyCfg, StepStatus
from .cost_model import InferenceCostModel
from .latency import LatencyCfg, LatencyEmulator
from .schedules import SCHEDULES, ChunkSchedule, SchedulePlan, make_schedule
from .stats import ChunkingStats, stats_table
