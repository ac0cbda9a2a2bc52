"""Reading clean datasets: the reader, the parallel state-exact replayer, image checks and shard merging."""

from .reader import DatasetError, DatasetReader, Demo
from .replay import (
    MAX_REPLAY_ENVS,
    DatasetReplayer,
    ReplayResult,
    check_replay_fits,
    check_replay_task,
    make_replay_env_cfg,
    replay_table,
    replay_warnings,
    write_scene_state,
)

__all__ = [
    "MAX_REPLAY_ENVS",
    "DatasetError",
    "DatasetReader",
    "DatasetReplayer",
    "Demo",
    "ReplayResult",
    "check_replay_fits",
    "check_replay_task",
    "make_replay_env_cfg",
    "replay_table",
    "replay_warnings",
    "write_scene_state",
]
