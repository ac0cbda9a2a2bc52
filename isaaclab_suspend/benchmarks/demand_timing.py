"""The eval loop of a camera task with the observation demand off and on, and against the task without a camera:
what ``scripts/benchmarks/bench_cameras.py`` and ``scripts/benchmarks/gpu_suite.py`` measure of
:attr:`~isaaclab_suspend.chunking.ActionChunkingPolicyCfg.observation_demand`."""

from __future__ import annotations

import statistics

from ..tasks.embedded import make_default_model
from ..tasks.env_factory import open_env
from .step_timing import measure_policy


def eval_rate(env, task: str, chunk_length: int, steps: int, demand: bool) -> float:
    """Active env-steps/s of ``task``'s planner under ``global_clock`` on ``env`` (:func:`~.measure_policy`)."""
    model = make_default_model(task, chunk_length)
    return measure_policy(env, model, "global_clock", chunk_length, steps,
                          observation_demand=demand)["active_env_steps_per_s"]


def demand_rates(env, task: str, chunk_length: int, steps: int, rounds: int) -> tuple[float, float]:
    """Median eval rates with the demand off and on, measured in turn (off, on) ``rounds`` times on ``env``."""
    rates = {False: [], True: []}
    for _ in range(rounds):
        for demand in (False, True):
            rates[demand].append(eval_rate(env, task, chunk_length, steps, demand))
    return statistics.median(rates[False]), statistics.median(rates[True])


def rates_against(tasks: tuple[str, str], num_envs: int, chunk_length: int, steps: int, rounds: int,
                  device: str = "cpu") -> dict[str, tuple[list[float], list[float]]]:
    """Eval rates (demand on) of two tasks, e.g. a camera task and the same task without a camera, their envs opened
    in turn ``rounds`` times in this process: per wall second (``"s"``) and per CPU second (``"cpu_s"``), each a
    list of rounds per task."""
    out = {per: ([], []) for per in ("s", "cpu_s")}
    for _ in range(rounds):
        for i, task in enumerate(tasks):
            with open_env(task, num_envs, device) as env:
                loop = measure_policy(env, make_default_model(task, chunk_length), "global_clock", chunk_length,
                                      steps, observation_demand=True)
            for per, rates in out.items():
                rates[i].append(loop[f"active_env_steps_per_{per}"])
    return out
