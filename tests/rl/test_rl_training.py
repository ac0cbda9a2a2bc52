"""RL training: rsl_rl and skrl smoke runs of scripts/train.py, exact parity with the stock env, a trained
checkpoint driving play.py and ActionChunkingPolicy, bad inputs."""

import copy
import glob
import importlib.util
import os
import warnings

import h5py
import pytest
import torch
from rsl_rl.algorithms import PPO
from skrl.agents.torch.ppo import PPO as SkrlPPO

from isaaclab.app.sim_launcher import launch_simulation
from isaaclab.envs import ManagerBasedRLEnv

from isaaclab_suspend.envs import SuspendableManagerBasedRLEnv
from isaaclab_suspend.chunking import ActionChunkingPolicy
from isaaclab_suspend.rl import load_agent_cfg, load_checkpoint_policy, train
from isaaclab_suspend.rl.checkpoint_policy import SHIPPED_CHECKPOINTS, shipped_checkpoint
from isaaclab_suspend.tasks.env_factory import make_env_cfg, open_env

pytestmark = pytest.mark.slow  # rsl_rl and skrl training runs

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CARTPOLE = "Isaac-Cartpole-Suspendable"
PPO_UPDATE = PPO.update
SKRL_TRACK_DATA = SkrlPPO.track_data


def _script(name: str):
    """The module of ``scripts/<name>.py`` (its ``main(argv)`` runs in this process)."""
    spec = importlib.util.spec_from_file_location(f"scripts_{name}", os.path.join(ROOT, "scripts", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_rsl_rl_smoke_writes_logs_and_checkpoints_and_play_loads_them(tmp_path, capsys):
    args = ["--task", CARTPOLE, "--rl_library", "rsl_rl", "--num_envs", "16", "--max_iterations", "2"]
    assert _script("train").main([*args, "--log_root", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "Learning iteration 1/2" in out and "Mean episode length" in out
    (run_dir,) = glob.glob(str(tmp_path / "rsl_rl" / CARTPOLE / "*"))
    assert os.path.isfile(os.path.join(run_dir, "model_1.pt"))
    assert glob.glob(os.path.join(run_dir, "events.out.tfevents.*"))
    checkpoint = os.path.join(run_dir, "model_1.pt")
    play_args = ["--task", CARTPOLE, "--checkpoint", checkpoint, "--num_envs", "4", "--steps", "5"]
    assert _script("play").main(play_args) == 0
    assert "mean episode length" in capsys.readouterr().out


def test_skrl_smoke_writes_logs_and_checkpoints_and_play_loads_them(tmp_path, capsys, monkeypatch):
    args = ["--task", CARTPOLE, "--rl_library", "skrl", "--num_envs", "16", "--max_iterations", "2"]
    assert _script("train").main([*args, "--log_root", str(tmp_path)]) == 0
    assert "skrl update 2/2: " in capsys.readouterr().out  # a line of figures at the end (and every 10 updates)
    (run_dir,) = glob.glob(str(tmp_path / "skrl" / CARTPOLE / "*"))
    checkpoints = glob.glob(os.path.join(run_dir, "checkpoints", "agent_*.pt"))
    checkpoint = max(checkpoints, key=lambda path: int(path.rsplit("_", 1)[1][: -len(".pt")]))
    play_args = ["--task", CARTPOLE, "--checkpoint", checkpoint, "--num_envs", "4", "--steps", "5"]
    assert _script("play").main(play_args) == 0
    assert "mean episode length" in capsys.readouterr().out
    saved = torch.load(checkpoint, map_location="cpu", weights_only=True)["policy"]  # skrl writes weights only
    # an empty directory of its own as the cwd: the worker beside this one may write into the checkout's meanwhile
    monkeypatch.chdir(tmp_path.joinpath("cwd").mkdir() or tmp_path / "cwd")
    with open_env(CARTPOLE, 4) as env:
        policy = load_checkpoint_policy(checkpoint, env)
        loaded = policy.actor.agent.policy.state_dict()
        assert saved.keys() == loaded.keys() and all(torch.equal(saved[k], loaded[k]) for k in saved)
        obs, _ = env.reset()
        actions = policy.act(obs)
        assert actions.shape == (4, 1) and torch.equal(actions, policy.act(obs))  # the mean, not a sample
        assert policy(obs, torch.arange(4)).shape == (4, 1, 1)
    assert os.listdir(os.getcwd()) == [], "loading an skrl agent must not write logs"


@pytest.mark.parametrize("task", [CARTPOLE, "Isaac-PushCube-Suspendable"])
def test_skrl_agent_cfgs_need_no_renaming(task, monkeypatch):
    """The project's skrl cfgs are written in skrl 2's field names: skrl's runner renames and warns about nothing."""
    from skrl.utils.runner.torch import runner as skrl_runner

    warned = []
    monkeypatch.setattr(skrl_runner.logger, "warning", warned.append)
    cfg = load_agent_cfg(task, "skrl")
    assert skrl_runner.Runner._check_cfg_compatibility(None, copy.deepcopy(cfg)) == cfg
    assert warned == []


@pytest.mark.parametrize("task", [CARTPOLE, "Isaac-PushCube-Suspendable"])
def test_rsl_rl_agent_cfgs_name_their_observation_groups(task):
    """rsl_rl resolves the cfgs' observation groups without assuming anything (no warning): actor and critic read
    the task's ``policy`` group."""
    from rsl_rl.utils import resolve_obs_groups

    cfg = load_agent_cfg(task, "rsl_rl")
    obs = {"policy": torch.zeros(1, 4), "images": torch.zeros(1, 8, 8, 3)}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        groups = resolve_obs_groups(obs, copy.deepcopy(cfg.obs_groups), ["actor", "critic"])
    assert groups == {"actor": ["policy"], "critic": ["policy"]}


def _train_two_iterations(env_class, task: str, library: str, log_dir: str, monkeypatch) -> tuple[list, dict]:
    """Two PPO updates of ``library`` on ``env_class``: the losses of each update and every final network weight
    (actor and critic)."""
    losses = []

    def recording_update(self):
        losses.append(PPO_UPDATE(self))
        return losses[-1]

    def recording_track_data(self, tag, value):
        if tag.startswith("Loss"):
            losses.append((tag, value))
        return SKRL_TRACK_DATA(self, tag, value)

    monkeypatch.setattr(PPO, "update", recording_update)
    monkeypatch.setattr(SkrlPPO, "track_data", recording_track_data)
    cfg = make_env_cfg(task, 16, seed=7)
    assert cfg.suspend.enabled
    agent_cfg = load_agent_cfg(task, library, max_iterations=2, seed=7)
    with launch_simulation(cfg, {}):
        env = env_class(cfg=cfg)
        reset, reset_seeds = env.reset, []
        env.reset = lambda seed=None, **kwargs: reset_seeds.append(seed) or reset(seed=seed, **kwargs)
        try:
            runner = train(env, library, agent_cfg, log_dir=log_dir if library == "skrl" else None)
            if library == "skrl":  # the agent's seed, not what an earlier skrl run in the process left behind
                assert reset_seeds[0] == 7, reset_seeds
            if library == "rsl_rl":
                saved = runner.alg.save()
                weights = {**saved["actor_state_dict"],
                           **{f"critic.{k}": v for k, v in saved["critic_state_dict"].items()}}
            else:
                agent = runner.agent
                weights = {f"{role}.{k}": v.clone() for role in ("policy", "value")
                           for k, v in agent.models[role].state_dict().items()}
        finally:
            env.close()
    return losses, weights


@pytest.mark.parametrize("task, library", [(CARTPOLE, "rsl_rl"), ("Isaac-PushCube-Suspendable", "rsl_rl"),
                                           (CARTPOLE, "skrl")])
def test_training_is_bit_identical_to_the_stock_env(task, library, tmp_path, monkeypatch):
    stock_losses, stock_weights = _train_two_iterations(ManagerBasedRLEnv, task, library, str(tmp_path / "stock"),
                                                        monkeypatch)
    losses, weights = _train_two_iterations(SuspendableManagerBasedRLEnv, task, library, str(tmp_path / "ours"),
                                            monkeypatch)
    assert len(losses) == len(stock_losses) >= (2 if library == "rsl_rl" else 4)  # skrl: a value per loss term
    assert losses == stock_losses  # floats compared exactly
    assert weights.keys() == stock_weights.keys() and len(weights) >= 4
    for name, value in weights.items():
        assert torch.equal(value, stock_weights[name]), f"{name} differs from the stock env's"


def test_shipped_checkpoint_drives_the_chunking_policy():
    with open_env(CARTPOLE, 8, seed=3) as env:
        expert = load_checkpoint_policy(shipped_checkpoint(CARTPOLE), env)
        policy = ActionChunkingPolicy(expert, env, chunk_length=expert.chunk_length, schedule="global_clock")
        obs, _ = env.reset()
        for _ in range(60):
            actions = policy.act(obs)
            assert actions.shape == (8, 1)
            assert torch.equal(actions, expert.act(obs))  # H = 1: the chunk is the closed-loop action
            obs, _, terminated, truncated, _ = env.step(actions)
            policy.observe(terminated | truncated)
            assert not terminated.any(), "the expert keeps the pole up"
        chunk = expert({k: v[:3] for k, v in obs.items()}, torch.arange(3))
        assert chunk.shape == (3, 1, 1)


def test_record_expert_demos_from_the_shipped_checkpoint(tmp_path):
    output = tmp_path / "push_cube_expert.hdf5"
    args = ["--task", "Isaac-PushCube-Suspendable", "--policy", "checkpoint", "--num_envs", "4", "--episodes", "6",
            "--desync", "--output", str(output)]
    assert _script("record").main(args) == 0
    with h5py.File(output, "r") as f:
        demos = [f["data"][name] for name in f["data"]]
        assert len(demos) >= 6
        assert all(demo.attrs["num_samples"] == len(demo["actions"]) > 0 for demo in demos)
        # episodes started at step 0 are scored by the expert: it pushes the cube to the target
        assert sum(bool(demo.attrs["success"]) for demo in demos) >= len(demos) // 2


def test_shipped_checkpoints_exist():
    for task in SHIPPED_CHECKPOINTS:
        assert os.path.isfile(shipped_checkpoint(task)), task


def test_bad_inputs(tmp_path, capsys):
    train_main, play_main = _script("train").main, _script("play").main
    with pytest.raises(SystemExit) as exit_info:  # a run-time failure: one line, no usage
        train_main(["--task", "Isaac-Nope", "--log_root", str(tmp_path)])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "Unknown task 'Isaac-Nope'" in err and "usage:" not in err, err
    with pytest.raises(SystemExit):
        train_main(["--rl_library", "sb3"])
    with pytest.raises(SystemExit):
        train_main(["--num_envs", "0"])
    assert play_main(["--checkpoint", str(tmp_path / "missing.pt"), "--steps", "1", "--num_envs", "1"]) == 2
    assert "Checkpoint file not found" in capsys.readouterr().err
    not_rsl_rl = tmp_path / "other.pt"
    torch.save({"weights": {}}, not_rsl_rl)
    assert play_main(["--checkpoint", str(not_rsl_rl), "--steps", "1", "--num_envs", "1"]) == 2
    assert "is neither an rsl_rl checkpoint" in capsys.readouterr().err
    empty_skrl = tmp_path / "empty_skrl.pt"
    torch.save({"policy": {}}, empty_skrl)
    assert play_main(["--checkpoint", str(empty_skrl), "--steps", "1", "--num_envs", "1"]) == 2
    assert "does not fit Isaac-Cartpole-Suspendable" in capsys.readouterr().err
    with pytest.raises(ValueError, match="Unknown RL library"):
        load_agent_cfg(CARTPOLE, "rl_games")
    with pytest.raises(ValueError, match="No shipped checkpoint"):
        shipped_checkpoint("Isaac-Nope")
    with pytest.raises(SystemExit):
        _script("record").main(["--policy", "checkpoint", "--checkpoint", str(tmp_path / "missing.pt")])
    with pytest.raises(SystemExit):
        _script("record").main(["--policy", "random", "--checkpoint", str(not_rsl_rl)])
