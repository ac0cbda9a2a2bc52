"""Gym registration, the standard creation path, the suspension API and its bad-input errors."""

import gymnasium as gym
import pytest
import torch

from isaaclab.app.sim_launcher import launch_simulation

from isaaclab_suspend.envs import SuspendableManagerBasedRLEnv
from isaaclab_suspend.tasks.env_factory import check_suspension_settings, make_env_cfg, open_env
from isaaclab_tasks.utils import parse_env_cfg
from isaaclab_tasks.utils.parse_cfg import load_cfg_from_registry

TASKS = ["Isaac-Cartpole-Suspendable", "Isaac-PushCube-Suspendable"]
NUM_ENVS = 4


@pytest.mark.parametrize("task", TASKS)
def test_registration_and_agent_cfgs(task):
    import isaaclab_suspend.tasks  # noqa: F401

    spec = gym.spec(task)
    assert spec.entry_point == "isaaclab_suspend.envs:SuspendableManagerBasedRLEnv"
    rsl_rl_cfg = load_cfg_from_registry(task, "rsl_rl_cfg_entry_point")
    skrl_cfg = load_cfg_from_registry(task, "skrl_cfg_entry_point")
    assert rsl_rl_cfg.max_iterations > 0
    assert skrl_cfg["agent"]["class"] == "PPO"


@pytest.mark.parametrize("task", TASKS)
def test_standard_creation_path(task):
    """parse_env_cfg + gym.make inside launch_simulation, with no extra overrides."""
    import isaaclab_suspend.tasks  # noqa: F401

    cfg = parse_env_cfg(task, device="cpu", num_envs=NUM_ENVS)
    assert cfg.suspend.enabled
    with launch_simulation(cfg, {}):
        env = gym.make(task, cfg=cfg)
        try:
            assert isinstance(env.unwrapped, SuspendableManagerBasedRLEnv)
            obs, _ = env.reset()
            obs, rew, term, trunc, _ = env.step(torch.zeros(NUM_ENVS, 1))
            assert obs["policy"].shape[0] == NUM_ENVS and torch.isfinite(obs["policy"]).all()
            assert rew.shape == (NUM_ENVS,)
        finally:
            env.close()


@pytest.fixture(scope="module")
def cartpole():
    with open_env("Isaac-Cartpole-Suspendable", NUM_ENVS) as env:
        with pytest.raises(RuntimeError, match="reset"):
            env.suspend_envs([0])  # nothing to freeze before the first reset
        env.reset()
        yield env


def test_ids_tensor_list_and_mask_are_equivalent(cartpole):
    env = cartpole
    env.suspend_envs(torch.tensor([1]))
    env.suspend_envs([2])
    env.suspend_envs(torch.tensor([False, False, False, True]))
    assert env.suspended_mask.tolist() == [False, True, True, True]
    assert env.num_suspended == 3
    env.suspend_envs((1, 2))  # suspending suspended envs is a no-op
    assert env.num_suspended == 3
    env.resume_envs([0, 1])  # resuming an active env is a no-op
    assert env.suspended_mask.tolist() == [False, False, True, True]
    env.resume_envs(torch.ones(NUM_ENVS, dtype=torch.bool))
    assert env.num_suspended == 0
    env.step(torch.zeros(NUM_ENVS, 1))
    assert env.num_suspended == 0


def test_suspended_mask_is_a_copy(cartpole):
    mask = cartpole.suspended_mask
    mask[:] = True
    assert cartpole.num_suspended == 0
    assert not cartpole.suspended_mask.any()


@pytest.mark.parametrize(
    "env_ids, error, message",
    [
        (torch.tensor([NUM_ENVS]), ValueError, "must lie in"),
        (torch.tensor([-1]), ValueError, "must lie in"),
        ([0, 7], ValueError, "must lie in"),
        ([-2], ValueError, "must lie in"),
        (torch.tensor([0.0, 1.0]), TypeError, "integers or a bool mask"),
        ([0.5], TypeError, "must be ints"),
        ([True, False], TypeError, "must be ints"),
        (torch.zeros(NUM_ENVS + 1, dtype=torch.bool), ValueError, "must have shape"),
        (torch.zeros(NUM_ENVS, dtype=torch.bool, device="meta"), ValueError, "move it there"),
        (torch.tensor([[0, 1]]), ValueError, "1-D"),
        ("0", TypeError, "must be a tensor"),
    ],
)
def test_bad_env_ids(cartpole, env_ids, error, message):
    with pytest.raises(error, match=message):
        cartpole.suspend_envs(env_ids)
    with pytest.raises(error, match=message):
        cartpole.resume_envs(env_ids)
    assert cartpole.num_suspended == 0


@pytest.mark.parametrize(
    "action, error, message",
    [
        (torch.zeros(NUM_ENVS, 2), ValueError, "shape"),
        (torch.zeros(NUM_ENVS + 1, 1), ValueError, "shape"),
        (torch.zeros(NUM_ENVS), ValueError, "shape"),
        (torch.zeros(NUM_ENVS, 1, dtype=torch.long), TypeError, "floating-point"),
        ([[0.0]] * NUM_ENVS, TypeError, "torch.Tensor"),
        (torch.zeros(NUM_ENVS, 1, device="meta"), ValueError, "action is on meta, the env runs on cpu"),
    ],
)
def test_bad_actions(cartpole, action, error, message):
    with pytest.raises(error, match=message):
        cartpole.step(action)


def test_cpu_step_runs_on_the_cfg_threads(cartpole, monkeypatch):
    """On the CPU an env steps, resets, suspends and resumes envs with ``suspend.cpu_step_threads`` torch threads,
    and the caller's count is back after each call (a model called between steps keeps it); None leaves the
    caller's count."""
    env = cartpole.unwrapped
    seen = []
    for owner, name in ((env.scene, "update"), (env.suspension_manager, "suspend"), (env.suspension_manager, "resume")):
        method = getattr(owner, name)
        monkeypatch.setattr(owner, name, lambda *a, m=method, **k: (seen.append(torch.get_num_threads()), m(*a, **k))[1])
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        env.step(torch.zeros(NUM_ENVS, 1))
        env.reset()
        env.suspend_envs([1])
        env.resume_envs([1])
        assert len(seen) > 2 and set(seen) == {1} and torch.get_num_threads() == 2
        seen.clear()
        monkeypatch.setattr(env.suspend_cfg, "cpu_step_threads", None)
        env.step(torch.zeros(NUM_ENVS, 1))
        assert set(seen) == {2}
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("threads", [0, -1, 1.5, True])
def test_bad_cpu_step_threads_are_refused_before_the_env_is_built(threads):
    cfg = make_env_cfg("Isaac-Cartpole-Suspendable", NUM_ENVS)
    cfg.suspend.cpu_step_threads = threads
    with pytest.raises(ValueError, match="Task 'Isaac-Cartpole-Suspendable': suspend.cpu_step_threads is .*give a"
                                         " positive number of threads"):
        check_suspension_settings(cfg, "Isaac-Cartpole-Suspendable")  # what open_env checks before it builds
    with pytest.raises(ValueError, match="cpu_step_threads is .*give a positive number of threads"):
        SuspendableManagerBasedRLEnv(cfg)
