"""What the scripts share: argument types with ranges, env and policy arguments, the chunk-model factory, the
rollout loop, output checks, shards and how a script ends (the policy server's arguments: :mod:`.serving`).
A script is then: parse, build, run, report."""

from .app import USER_ERRORS, fail, run, user_errors
from .arguments import (
    add_env_args,
    address,
    device,
    env_overrides,
    existing_file,
    float_in,
    fraction,
    int_in,
    key_pair,
    latency,
    non_negative_float,
    non_negative_int,
    positive_int,
    shard,
)
from .outputs import (
    EXPORT_MODES,
    check_new_datasets,
    check_space,
    check_writable,
    dataset_recorder_cfg,
    dataset_table,
)
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
from .sharding import add_shard_args, apply_shard, describe_shard, write_results

__all__ = [
    "DEFAULT_TASK",
    "EXPORT_MODES",
    "POLICIES",
    "RandomPolicy",
    "Transition",
    "USER_ERRORS",
    "add_env_args",
    "add_policy_args",
    "add_shard_args",
    "address",
    "apply_shard",
    "check_new_datasets",
    "check_space",
    "check_writable",
    "dataset_recorder_cfg",
    "dataset_table",
    "describe_policy",
    "describe_shard",
    "desync_episodes",
    "device",
    "env_overrides",
    "existing_file",
    "fail",
    "float_in",
    "fraction",
    "int_in",
    "key_pair",
    "latency",
    "make_chunk_model",
    "non_negative_float",
    "non_negative_int",
    "open_env",
    "positive_int",
    "resolve_policy",
    "rollout",
    "run",
    "shard",
    "start_episodes",
    "user_errors",
    "write_results",
]
