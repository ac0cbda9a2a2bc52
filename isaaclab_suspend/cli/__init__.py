"""The scripts' flag-to-cfg layer: argument types with ranges, the env and policy arguments as the library's cfgs
(:mod:`isaaclab_suspend.runs`), which episodes are counted (quotas, episode log), output checks, shards and torchrun
ranks, and how a script ends (the policy server's arguments: :mod:`.serving`). A script is then: parse, build,
run, report.

The names below are imported from their modules on first use: ``from isaaclab_suspend import cli`` and building a
parser with :mod:`.arguments` (and the choices of :mod:`isaaclab_suspend.names`) import no torch, Warp or Isaac Lab,
so ``--help`` and a malformed argument answer at once; the first call that needs an env or a policy imports them.
"""

from __future__ import annotations

import importlib

_MODULES = {
    ".app": ("run",),
    ".arguments": ("add_deterministic_arg", "add_env_args", "add_episode_args", "add_import_arg", "add_model_args", "add_policy_args", "add_quiet_arg",
        "add_report_args", "add_shard_args", "address", "cfg_override", "DEFAULT_TASK", "device", "env_override",
        "env_overrides", "env_seed", "existing_file", "float_in", "fraction", "int_in", "key_pair", "latency", "non_negative_float",
        "non_negative_int", "POLICIES", "positive_int", "schedules", "script_parser", "shard", "suspension_window"),
    ".distributed": ("apply_distributed_training", "gather_datasets", "gather_replay", "gather_results",
        "is_other_rank", "rank_device", "run_ranks", "share"),
    ".envs": ("env_cfg", "env_opener", "open_env"),
    ".episodes": ("apply_episode_args", "check_episode_logs", "describe_scoring", "log_episodes", "make_ledger",
        "recording_summary",
        "write_episode_log"),
    ".errors": ("fail", "USER_ERRORS", "user_errors"),
    ".outputs": ("check_new_datasets", "check_output_args", "check_writable", "dataset_table"),
    ".policy": ("arm_names", "chunking_cfg", "deprecated", "describe_policy", "describe_run", "make_chunk_model",
        "model_cfg", "resolve_arms", "resolve_policy", "resolve_task", "set_fields", "warn"),
    "..names": ("AGGREGATOR_NAMES", "EXPORT_MODE_NAMES", "MAX_REPLAY_ENVS", "RL_LIBRARIES", "SCHEDULE_NAMES",
        "MODEL_NAMES", "SO101_ROBOT", "WIRE_NAMES", "TOKEN_ENV", "VCODECS"),
    ".reports": ("apply_output_args", "describe_outputs", "take_report_alias", "write_eval_outputs"),
    ".run_cfgs": ("check_run_cfg", "evaluation_cfg", "recording_cfg"),
    ".sharding": ("apply_shard", "describe_shard", "write_results"),
}
"""The module of each name this package exports (no name is also a submodule's: importing the submodule would
shadow it)."""
_WHERE = {name: module for module, names in _MODULES.items() for name in names}


def __getattr__(name: str) -> object:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_WHERE[name], __name__), name)
    globals()[name] = value  # found once
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])


__all__ = sorted(_WHERE)
