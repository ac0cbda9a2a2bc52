"""Runs as a library: what the scripts do, configurable with cfgs and no argument parsing. An evaluation
(:func:`evaluate`) and a recording (:func:`record`) of a chunk model from any source (:data:`CHUNK_MODELS`, a
``@configclass`` each), the rollout loop they share, baseline policies and the env of a run."""

from .baselines import ConstantPolicy, HoldPosePolicy, RandomPolicy
from .chunk_models import (CHUNK_MODELS, ChunkLengthError, ChunkModelSource, ChunkPolicyModelCfg, EmbeddedModelCfg,
                           Gr00tChunkModelCfg, LeRobotModelCfg, OpenpiChunkModelCfg, RlActorModelCfg,
                           TcpChunkModelCfg, infer_model_cfg, make_chunking_policy)
from .episode_ledger import EpisodeLedger
from .evaluation import (EvaluationCfg, ScheduleRun, evaluate, merge_shard_logs, run_names, schedule_suffixes,
                         verdicts, write_evaluation_report, write_timeline)
from .outcomes import EpisodeOutcomes
from .policy_serving import make_policy_server
from .recording import EXPORT_MODES, RecordingCfg, RecordingResult, dataset_recorder_cfg, record
from .rollout import Transition, desync_episodes, rollout, score, start_episodes
from .run_env import RunEnvCfg, make_ledger, open_run_env

__all__ = ["CHUNK_MODELS", "ChunkLengthError", "ChunkModelSource", "ChunkPolicyModelCfg", "ConstantPolicy",
           "EXPORT_MODES", "EmbeddedModelCfg", "EpisodeLedger", "EpisodeOutcomes", "EvaluationCfg",
           "Gr00tChunkModelCfg", "HoldPosePolicy", "LeRobotModelCfg", "OpenpiChunkModelCfg", "TcpChunkModelCfg",
           "infer_model_cfg", "RandomPolicy", "RecordingCfg", "RecordingResult", "RlActorModelCfg", "RunEnvCfg",
           "ScheduleRun", "Transition", "dataset_recorder_cfg", "desync_episodes", "evaluate", "make_chunking_policy",
           "make_ledger", "make_policy_server", "merge_shard_logs", "open_run_env", "record", "rollout", "run_names",
           "schedule_suffixes", "score", "start_episodes", "verdicts", "write_evaluation_report", "write_timeline"]
