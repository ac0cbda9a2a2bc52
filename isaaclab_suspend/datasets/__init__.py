"""Clean datasets: recorder terms for exact replay, a dataset reader and a parallel, state-exact replayer."""

from .reader import DatasetError, DatasetReader, Demo
from .recorders import InitialEnvOriginRecorder, PreStepStatesRecorder
from .recorders_cfg import DatasetRecorderManagerCfg, InitialEnvOriginRecorderCfg, PreStepStatesRecorderCfg
from .replay import (
    MAX_REPLAY_ENVS,
    DatasetReplayer,
    ReplayResult,
    check_replay_fits,
    make_replay_env_cfg,
    write_scene_state,
)

__all__ = [
    "MAX_REPLAY_ENVS",
    "DatasetError",
    "DatasetReader",
    "DatasetRecorderManagerCfg",
    "DatasetReplayer",
    "Demo",
    "InitialEnvOriginRecorder",
    "InitialEnvOriginRecorderCfg",
    "PreStepStatesRecorder",
    "PreStepStatesRecorderCfg",
    "ReplayResult",
    "check_replay_fits",
    "make_replay_env_cfg",
    "write_scene_state",
]
