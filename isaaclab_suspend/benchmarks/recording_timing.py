"""Per-step recording cost of SuspendableRecorderManager against Isaac Lab's stock RecorderManager, both on the
same env, hook by hook: what ``scripts/benchmarks/bench_recording.py`` and ``scripts/benchmarks/gpu_suite.py``
measure (the script's docstring says what each figure holds); and a recording end to end, env-steps per second
recorded against unrecorded, every episode on disk (``gpu_suite.py``)."""

from __future__ import annotations

import os
import resource
import time
from collections import defaultdict

import h5py
import torch

from isaaclab.envs.mdp.recorders.recorders_cfg import ActionStateRecorderManagerCfg
from isaaclab.managers import RecorderManager

from ..runs import dataset_recorder_cfg, desync_episodes, start_episodes
from ..tasks.env_factory import open_env
from .step_timing import random_actions, synchronize, time_block

STEP_HOOKS = ("record_pre_step", "record_post_physics_decimation_step", "record_post_step")
RESET_HOOKS = ("record_pre_reset", "record_post_reset", "reset")


class TimedRecorders:
    """Stands in for ``env.recorder_manager``: forwards each hook to every manager (in an order that alternates at
    every ``record_pre_step``) and times each call, the device's work included (a sync before and after)."""

    def __init__(self, managers: dict[str, RecorderManager], device: str = "cpu"):
        self.managers = managers
        self.device = device
        self.seconds: dict[str, dict[str, float]] = {name: defaultdict(float) for name in managers}
        self._order = list(managers)

    @property
    def active_terms(self) -> list[str]:
        return next(iter(self.managers.values())).active_terms

    def __getattr__(self, hook: str):
        if hook not in STEP_HOOKS + RESET_HOOKS:
            raise AttributeError(hook)

        def forward(*args, **kwargs):
            if hook == "record_pre_step":
                self._order.reverse()
            out = {}
            for name in self._order:
                synchronize(self.device)
                start = time.perf_counter()
                out = getattr(self.managers[name], hook)(*args, **kwargs)
                synchronize(self.device)
                self.seconds[name][hook] += time.perf_counter() - start
            return out  # reset() returns a log dict: both managers return {}

        return forward

    def time_calls(self, name: str, obj, methods: tuple[str, ...], key: str) -> None:
        """Time the calls of ``obj.<methods>`` for manager ``name`` under ``key``."""
        for method in methods:
            original = getattr(obj, method)

            def timed(*args, _original=original, **kwargs):
                start = time.perf_counter()
                out = _original(*args, **kwargs)
                self.seconds[name][key] += time.perf_counter() - start
                return out

            setattr(obj, method, timed)


def measure_recording(
    task: str, num_envs: int, steps: int, warmup: int, out_dir: str, device: str = "cpu"
) -> list[dict]:
    """Both recorders on one env of ``task`` for ``warmup + steps`` steps of random actions from desynchronised
    episodes; one row per recorder of ms per measured step: step hooks, episode ends, HDF5 write on the step thread,
    total (and the writer process's CPU time for ours)."""
    def cfg(name: str) -> ActionStateRecorderManagerCfg:
        return ActionStateRecorderManagerCfg(dataset_export_dir_path=out_dir, dataset_filename=f"{name}_{num_envs}")

    with open_env(task, num_envs, device, recorders=cfg("suspendable")) as env:
        managers = {"Isaac Lab RecorderManager": RecorderManager(cfg("stock"), env),
                    "SuspendableRecorderManager": env.recorder_manager}
        timed = env.recorder_manager = TimedRecorders(managers, device)
        stock, ours = managers.values()
        timed.time_calls("Isaac Lab RecorderManager", stock._dataset_file_handler,
                         ("add_env_args", "write_episode", "flush"), "hdf5")
        timed.time_calls("SuspendableRecorderManager", ours, ("export_episodes",), "hdf5")
        # inside record_pre_step: the hand-over of the episodes due and the writer's check
        timed.time_calls("SuspendableRecorderManager", ours.hand_over, ("poll",), "check")
        children_cpu = sum(resource.getrusage(resource.RUSAGE_CHILDREN)[:2])  # user + system seconds
        gen, resets = torch.Generator().manual_seed(0), torch.zeros((), dtype=torch.long, device=env.device)
        env.reset()
        desync_episodes(env, gen)  # so that some episodes end (and are exported) at most steps
        for step in range(warmup + steps):
            if step == warmup:
                for seconds in timed.seconds.values():
                    seconds.clear()
                resets.zero_()
            _, _, term, trunc, _ = env.step(random_actions(env, gen, 1)[0])
            resets += (term | trunc).sum()
        start, ours_seconds = time.perf_counter(), timed.seconds["SuspendableRecorderManager"]
        ours.close()  # what is still queued counts as written on the step thread
        ours_seconds["drain"] = time.perf_counter() - start
        ours_seconds["writer"] = sum(resource.getrusage(resource.RUSAGE_CHILDREN)[:2]) - children_cpu
        env.recorder_manager = ours
        managers["Isaac Lab RecorderManager"].close()
    rows = []
    for name, seconds in timed.seconds.items():
        hooks = (sum(seconds[h] for h in STEP_HOOKS) - seconds["check"]) / steps
        ends = (sum(seconds[h] for h in RESET_HOOKS) - seconds["hdf5"]) / steps
        write = (seconds["hdf5"] + seconds["check"] + seconds["drain"]) / steps
        total = hooks + ends + write
        rows.append({"num_envs": num_envs, "manager": name, "hooks_ms": 1e3 * hooks, "ends_ms": 1e3 * ends,
                     "write_ms": 1e3 * write, "drain_ms": 1e3 * seconds["drain"] / steps, "share": write / total,
                     "total_ms": 1e3 * total, "writer_ms": 1e3 * seconds["writer"] / steps, "episodes": int(resets)})
    stock, ours = rows
    for key in ("hooks", "total"):
        ours[f"{key}_x"] = stock[f"{key}_ms"] / ours[f"{key}_ms"]
    return rows




def measure_recorded_throughput(
    task: str, num_envs: int, steps: int, warmup: int, out_dir: str, device: str = "cpu",
    episode_length_s: float | None = None
) -> dict:
    """Env-steps per second of ``task`` with random actions from desynchronised episodes, on one env: unrecorded,
    then recorded with the project's dataset recorder (:func:`~isaaclab_suspend.runs.dataset_recorder_cfg`,
    ``env.start_recording``, as ``record.py`` records), and the episodes that reached the file.

    Unrecorded: ``warmup`` steps, then ``steps`` timed. Recorded: the episodes restarted and desynchronised (the
    first ones, cut short, are dropped, as a recording drops them), ``max_episode_length`` steps of warm-up, by
    whose end every env's first episode has ended and the writer has the steady load of full episodes, then
    ``steps`` timed, then the recorder closed (every exported episode written: timed too). Each timed block has
    one device sync, at its end; the episodes that end are counted on the device.

    Args:
        episode_length_s: The task's episode length; None: the task's own (a short one makes episodes end within
            a few steps, for a run at a small size).

    Returns:
        ``unrecorded_env_steps_per_s``, ``recorded_env_steps_per_s`` (the step loop), ``close_s`` (writing what
        was still queued), ``recorded_over_unrecorded`` (end to end: the recorded loop and the close against the
        unrecorded loop), ``episodes_ended`` (every episode that ended while recording), ``episodes_to_write``
        (those less the dropped first ones) and ``episodes_written`` (demos in the file after the close).
    """
    attrs = {} if episode_length_s is None else {"episode_length_s": episode_length_s}
    with open_env(task, num_envs, device, suspendable=True, **attrs) as env:
        gen = torch.Generator().manual_seed(0)
        ended = torch.zeros(num_envs, dtype=torch.long, device=env.device)

        def step(env, action: torch.Tensor) -> None:
            _, _, terminated, truncated, _ = env.step(action)
            ended.add_(terminated | truncated)

        start_episodes(env, None, True, gen)
        time_block(step, env, random_actions(env, gen, warmup))
        unrecorded = time_block(step, env, random_actions(env, gen, steps))
        manager = env.start_recording(dataset_recorder_cfg(os.path.join(out_dir, f"{task}_{num_envs}")))
        start_episodes(env, None, True, gen)
        ended.zero_()
        time_block(step, env, random_actions(env, gen, int(env.max_episode_length)))
        recorded = time_block(step, env, random_actions(env, gen, steps))
        start = time.perf_counter()
        manager.close()
        close_s = time.perf_counter() - start
        episodes = {"episode_steps": int(env.max_episode_length), "episodes_ended": int(ended.sum()),
                    "episodes_to_write": int((ended - 1).clamp(min=0).sum())}
    written = 0
    for path in manager.dataset_file_paths:
        with h5py.File(path, "r") as f:
            written += len(f["data"])
    return {"num_envs": num_envs, "steps": steps, "unrecorded_env_steps_per_s": num_envs / unrecorded,
            "recorded_env_steps_per_s": num_envs / recorded, "close_s": close_s,
            "recorded_over_unrecorded": unrecorded * steps / (recorded * steps + close_s), **episodes,
            "episodes_written": written}
