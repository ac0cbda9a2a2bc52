"""Any Isaac Lab task freezes exactly: stateful actuators, sensors and class-based terms, discovered not listed.

The task (tests/stateful_task.py) is built only from stock Isaac Lab parts and registered with Isaac Lab's own
``ManagerBasedRLEnv``; the test runs it in the suspendable env. Each env's action is a function of its own
active-step count, so a suspended-then-resumed env must retrace the never-suspended run, bit for bit: its
observations and every discovered per-env buffer (physics, actuator delays and nets, contact air time and
history, IMU, observation history and delay, the class-based term).
"""

import os
import sys

import pytest
import torch

from isaaclab.app.sim_launcher import launch_simulation

from isaaclab_suspend.envs import SuspendableManagerBasedRLEnv
from isaaclab_suspend.suspension import SuspendCfg
from isaaclab_suspend.suspension.frozen_rows import bits
from isaaclab_tasks.utils import parse_env_cfg

sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))
import stateful_task  # noqa: E402

NUM_ENVS = 3
STEPS = 30
SUSPEND_AT, SUSPEND_FOR = 8, 11  # 11 is prime to every ring length here (2, 3)


def _actions(count: torch.Tensor, dim: int) -> torch.Tensor:
    """Each env's action depends only on its own number of active steps. Shape: (num_envs, dim)."""
    return 0.8 * torch.sin(0.37 * count.unsqueeze(1) + 0.9 * torch.arange(dim))


def _rollout(schedule) -> tuple[list[list[dict]], dict]:
    """Per env, its state after each of its active steps: obs row and every frozen buffer's rows."""
    # buffers allocated with torch.empty (ring slots not pushed yet) are filled with NaN, not garbage
    torch.use_deterministic_algorithms(True, warn_only=True)
    cfg = parse_env_cfg(stateful_task.TASK_ID, device="cpu", num_envs=NUM_ENVS)
    cfg.suspend = SuspendCfg(enabled=True)
    with launch_simulation(cfg, {}):
        env = SuspendableManagerBasedRLEnv(cfg)
        try:
            obs, _ = env.reset()
            sm = env.suspension_manager
            count = torch.zeros(NUM_ENVS)
            trajectory = [[] for _ in range(NUM_ENVS)]
            stats = {"suspended_steps": 0, "frozen": sorted(sm.env_state(0))}
            for step in range(STEPS):
                schedule(env, step)
                active = env.active_mask
                before = [sm.env_state(e) for e in range(NUM_ENVS)]
                obs_before = obs["policy"].clone()
                obs, _, term, trunc, _ = env.step(_actions(count, env.action_manager.total_action_dim))
                assert not (term | trunc).any()
                for e in range(NUM_ENVS):
                    state = sm.env_state(e)
                    state["obs"] = obs["policy"][e].clone()
                    if active[e]:
                        trajectory[e].append(state)
                    else:  # a suspended env keeps every bit of every frozen buffer and its observation
                        stats["suspended_steps"] += 1
                        assert torch.equal(state.pop("obs"), obs_before[e]), f"step {step}: env {e} obs moved"
                        for name, value in state.items():
                            assert torch.equal(bits(value), bits(before[e][name])), f"step {step}: env {e} '{name}' moved"
                count += active
            return trajectory, stats
        finally:
            env.close()
            torch.use_deterministic_algorithms(False)


def _assert_retraces(ours: list[list[dict]], reference: list[list[dict]]) -> None:
    for e in range(NUM_ENVS):
        for i, state in enumerate(ours[e]):
            for name, value in state.items():
                assert torch.equal(bits(value), bits(reference[e][i][name])), (
                    f"env {e}, active step {i}: '{name}' differs from the never-suspended run by"
                    f" {(value.double() - reference[e][i][name].double()).abs().max():.3g}"
                )


@pytest.fixture(scope="module")
def reference():
    return _rollout(lambda env, step: None)


def test_discovers_every_stateful_part(reference):
    frozen = reference[1]["frozen"]
    expected = {
        "delayed PD and remotized PD delay rings": "delay_state.buffer_pos",
        "actuator-net MLP histories": "drive_state.pos_error_history",
        "actuator-net LSTM hidden state": "drive_state.hidden",
        "contact air time": "sensor.contact._data._current_air_time",
        "contact history": "sensor.contact._data._net_forces_w_history",
        "IMU": "sensor.imu._data._lin_acc_b",
        "class-based observation term": "obs.CubeHeightMean.total",
        "observation history": "_group_obs_term_history_buffer.policy.cube_pos._buffer",
        "observation delay": "_group_obs_term_delay_buffer.policy.arm2_pos._buffer",
        "MuJoCo-Warp warm start": "mujoco_warp.qacc_warmstart",
    }
    for part, name in expected.items():
        assert any(name in f for f in frozen), f"{part} ('{name}') is not frozen; frozen: {frozen}"
    assert sum("delay_state.buffer_pos" in f for f in frozen) == 2


def test_resume_retraces_never_suspended_run(reference):
    def schedule(env, step):
        if step == SUSPEND_AT:
            env.suspend_envs([0])
        if step == SUSPEND_AT + SUSPEND_FOR:
            env.resume_envs([0])

    ours, stats = _rollout(schedule)
    assert stats["suspended_steps"] == SUSPEND_FOR
    assert len(ours[0]) == STEPS - SUSPEND_FOR
    _assert_retraces(ours, reference[0])
    # the cube fell and landed while env 0 was frozen in the other run: air time and contact both exercised
    air = [s["sensor.contact._data._current_air_time"].item() for s in reference[0][0]]
    contact = [s["sensor.contact._data._current_contact_time"].item() for s in reference[0][0]]
    assert max(air[:SUSPEND_AT + 2]) > 0 and contact[-1] > 0


def test_random_schedule_keeps_and_retraces(reference):
    gen = torch.Generator().manual_seed(3)

    def schedule(env, step):
        flip = torch.rand(NUM_ENVS, generator=gen) < 0.3
        suspended = env.suspended_mask
        env.suspend_envs(flip & ~suspended)
        env.resume_envs(flip & suspended)

    ours, stats = _rollout(schedule)
    assert stats["suspended_steps"] > 10, stats
    _assert_retraces(ours, reference[0])
