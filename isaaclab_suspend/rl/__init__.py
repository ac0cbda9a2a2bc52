"""RL training on the suspendable tasks: agent configs from the registry, runners, checkpoint policies."""

from .checkpoint_policy import CheckpointPolicy, RlActorModelCfg, load_checkpoint_policy
from .runners import LIBRARIES, load_agent_cfg, make_log_dir, train

__all__ = ["LIBRARIES", "CheckpointPolicy", "RlActorModelCfg", "load_agent_cfg", "load_checkpoint_policy", "make_log_dir", "train"]
