"""Action-chunking policies on suspendable envs: schedules, aggregators, latency emulation, embedded and remote
models (the project's protocol and openpi's), batching policy servers."""

from .aggregators import AGGREGATORS, blend, replace, resolve_aggregator, temporal_ensemble
from .batching import BatchingCfg, BatchingChunkModel
from .cartpole_lqr import CartpoleLQRCfg, CartpoleLQRChunkModel
from .chunk_queues import ChunkQueues
from .chunking_policy import ActionChunkingPolicy, ActionChunkingPolicyCfg, StepStatus
from .cost_model import InferenceCostModel
from .embedded import DEFAULT_MODELS, make_default_model
from .latency import LatencyCfg, LatencyEmulator
from .openpi_client import OpenpiChunkModel, OpenpiChunkModelCfg, OpenpiServerError
from .openpi_server import OpenpiPolicyServer, OpenpiPolicyServerCfg
from .outcomes import EpisodeOutcomes
from .push_cube_scripted import PushCubeChunkCfg, PushCubeChunkModel
from .remote import PolicyServer, PolicyServerCfg, RemoteChunkModel, RemoteChunkModelCfg
from .remote_address import add_openpi_arguments, connect_remote, parse_key_pairs
from .schedules import SCHEDULES, ChunkSchedule, SchedulePlan, make_schedule
from .stats import ChunkingStats, stats_table
from .timeline import ChunkTimeline, plot_timelines

__all__ = [
    "AGGREGATORS",
    "DEFAULT_MODELS",
    "SCHEDULES",
    "ActionChunkingPolicy",
    "ActionChunkingPolicyCfg",
    "BatchingCfg",
    "BatchingChunkModel",
    "CartpoleLQRCfg",
    "CartpoleLQRChunkModel",
    "ChunkQueues",
    "ChunkSchedule",
    "ChunkTimeline",
    "ChunkingStats",
    "EpisodeOutcomes",
    "InferenceCostModel",
    "LatencyCfg",
    "LatencyEmulator",
    "OpenpiChunkModel",
    "OpenpiChunkModelCfg",
    "OpenpiPolicyServer",
    "OpenpiPolicyServerCfg",
    "OpenpiServerError",
    "PushCubeChunkCfg",
    "PolicyServer",
    "PolicyServerCfg",
    "PushCubeChunkModel",
    "RemoteChunkModel",
    "RemoteChunkModelCfg",
    "SchedulePlan",
    "StepStatus",
    "add_openpi_arguments",
    "blend",
    "connect_remote",
    "make_default_model",
    "make_schedule",
    "parse_key_pairs",
    "plot_timelines",
    "replace",
    "resolve_aggregator",
    "stats_table",
    "temporal_ensemble",
]
