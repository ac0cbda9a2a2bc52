"""What the scripts share: env and policy arguments with ranges, the chunk-model factory, the rollout loop,
output checks and how a script ends. A script is then: parse, build, run, report."""

from .app import USER_ERRORS, fail, run, user_errors
from .arguments import (
    add_env_args,
    address,
    env_overrides,
    fraction,
    latency,
    non_negative_float,
    non_negative_int,
    positive_int,
)
from .outputs import check_new_datasets, check_space, check_writable, dataset_table
from .policy import (
    DEFAULT_TASK,
    POLICIES,
    RandomPolicy,
    add_policy_args,
    describe_policy,
    make_chunk_model,
    resolve_policy,
)
from .rollout import Transition, desync_episodes, open_env, rollout, start_episodes

__all__ = [
    "DEFAULT_TASK",
    "POLICIES",
    "USER_ERRORS",
    "RandomPolicy",
    "Transition",
    "add_env_args",
    "add_policy_args",
    "address",
    "check_new_datasets",
    "check_space",
    "check_writable",
    "dataset_table",
    "describe_policy",
    "desync_episodes",
    "env_overrides",
    "fail",
    "fraction",
    "latency",
    "make_chunk_model",
    "non_negative_float",
    "non_negative_int",
    "open_env",
    "positive_int",
    "resolve_policy",
    "rollout",
    "run",
    "start_episodes",
    "user_errors",
]
