"""The SO-101 user's LeRobot loop on the real arm: a planner recording of the SO-101 camera lift, exported in the
follower's own names and units, reads back through LeRobot's reader equal to the HDF5 file; a short
``lerobot-train`` run on it acts in the follower's action space (the joint-target task) through ``eval.py`` and
through the ``lerobot-eval`` env, whose joint targets are then exactly the policy's goal positions.

The project's scripts run in the test process through their ``main(argv)``; ``lerobot-train`` runs as a process of
its own."""

import json
import os
import subprocess
import sys

import h5py
import numpy as np
import pytest
import torch

from helpers import ROOT, check_usage_errors, load_script

from isaaclab_suspend.lerobot import so101
from isaaclab_suspend.lerobot.env import LeRobotVectorEnv
from isaaclab_suspend.lerobot.layout import SIDECAR_PATH, ExportSidecar
from isaaclab_suspend.lerobot.policy import check_checkpoint
from isaaclab_suspend.learning import load_chunk_policy
from isaaclab_suspend.recording import PostStepJointTargetsRecorder, PostStepJointTargetsRecorderCfg

pytestmark = pytest.mark.slow  # the SO-101 LeRobot loop on a recorded camera dataset

JOINT_TASK = "IsaacContrib-Lift-Cube-SO101-Joint-Camera-Suspendable"
CAMERAS = ("front_camera", "wrist_camera")
LEROBOT_BIN = os.path.dirname(sys.executable)


@pytest.fixture(scope="module")
def exported(so101_camera_dataset, tmp_path_factory) -> str:
    """The lossless export (PNG frames) in the follower's terms, the cube's pose as environment state."""
    output = tmp_path_factory.mktemp("so101_export") / "so101"
    status = load_script("export_lerobot").main([so101_camera_dataset, "--output", str(output), "--no_video",
                                                 "--robot", so101.ROBOT, "--environment_state", "cube_pose_b",
                                                 "--repo_id", "local/so101", "--quiet"])
    assert status == 0
    return str(output)


def test_export_is_what_a_real_followers_recording_holds(so101_camera_dataset, exported):
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    ds = LeRobotDataset("local/so101", root=exported)
    assert ds.meta.robot_type == "so_follower" and ds.fps == 20  # sim dt 0.01 s x decimation 5
    own = {"timestamp", "frame_index", "episode_index", "index", "task_index"}
    assert set(ds.meta.features) - own == {"observation.state", "action", "observation.environment_state",
                                           *(f"observation.images.{cam}" for cam in CAMERAS)}  # no sim extras
    assert ds.meta.features["observation.state"]["names"] == ds.meta.features["action"]["names"] == list(so101.NAMES)
    with h5py.File(so101_camera_dataset) as f:
        demos = [f["data"][f"demo_{i}"] for i in range(len(f["data"]))]
        recorded = {key: np.concatenate([d[key][()] for d in demos])
                    for key in ("obs/joint_pos_abs", "obs/cube_pose_b", so101.TARGETS_KEY,
                                *(f"images/{cam}" for cam in CAMERAS))}
    assert ds.num_frames == len(recorded["obs/joint_pos_abs"]) and ds.num_episodes == len(demos)
    frames = [ds[i] for i in range(ds.num_frames)]
    state, action, scene = (torch.stack([fr[key] for fr in frames]) for key in
                            ("observation.state", "action", "observation.environment_state"))
    assert torch.equal(state, so101.to_follower(torch.from_numpy(recorded["obs/joint_pos_abs"])))
    assert torch.allclose(so101.from_follower(action), torch.from_numpy(recorded[so101.TARGETS_KEY]), atol=1e-6)
    assert torch.equal(scene, torch.from_numpy(recorded["obs/cube_pose_b"]))
    # the targets are the IK's joint-space command: the jaw is told to close before it has closed
    assert (action[:, 5] < state[:, 5] - 1.0).any()
    for cam in CAMERAS:
        pixels = torch.stack([fr[f"observation.images.{cam}"] for fr in frames])  # (N, 3, H, W) in [0, 1]
        assert torch.equal((pixels * 255).round().byte().permute(0, 2, 3, 1),
                           torch.from_numpy(recorded[f"images/{cam}"]))


@pytest.mark.parametrize("cameras", [("wrist_camera",), ()])
def test_cameras_picks_what_is_exported(so101_camera_dataset, exported, tmp_path, cameras):
    """``--cameras wrist_camera``: that camera only; ``--cameras`` alone: a state-only dataset of the camera
    recording (what a state-only ACT trains on without decoding a frame). The vectors are the full export's."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    output = str(tmp_path / "picked")
    assert load_script("export_lerobot").main([so101_camera_dataset, "--output", output, "--no_video", "--robot",
                                               so101.ROBOT, "--environment_state", "cube_pose_b", "--cameras",
                                               *cameras, "--quiet"]) == 0
    picked, full = LeRobotDataset("local/picked", root=output), LeRobotDataset("local/so101", root=exported)
    assert [f for f in picked.meta.features if f.startswith("observation.images.")] == [
        f"observation.images.{cam}" for cam in cameras]
    for i in (0, picked.num_frames - 1):
        assert set(picked[i]) < set(full[i])
        for key in ("observation.state", "action", "observation.environment_state",
                    *(f"observation.images.{cam}" for cam in cameras)):
            assert torch.equal(picked[i][key], full[i][key])


def test_export_errors_are_one_line(so101_camera_dataset, tmp_path, capsys):
    """A term or a camera the file does not hold: one line (no progress bar before it), exit status 2."""
    check_usage_errors(load_script("export_lerobot"), {
        (so101_camera_dataset, "--output", str(tmp_path / "a"), "--robot", so101.ROBOT, "--environment_state",
         "cube_pose"):
            "no policy term ['cube_pose'] to export as environment state; the recorded terms are ['actions',",
        (so101_camera_dataset, "--output", str(tmp_path / "a"), "--robot", so101.ROBOT, "--cameras", "side_camera",
         "wrist_camera"):
            "has no camera ['side_camera']; its recorded cameras are ['front_camera', 'wrist_camera']."}, capsys)
    assert not os.path.exists(tmp_path / "a")
    export = load_script("export_lerobot")
    assert export.main([so101_camera_dataset, "--output", str(tmp_path / "b"), "--robot", so101.ROBOT,
                        "--cameras", "side_camera"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1  # no progress bar drawn before the error


def _joints_file(path, state: np.ndarray, targets: np.ndarray) -> str:
    """A one-demo file as an SO-101 recording holds one: joint positions, joint targets, actions."""
    with h5py.File(path, "w") as f:
        data = f.create_group("data")
        data.attrs["env_args"] = json.dumps({"env_name": "IsaacContrib-Lift-Cube-SO101-IK-Abs-Suspendable",
                                             "step_dt": 0.05, "sim_args": {"num_envs": 1}})
        demo = data.create_group("demo_0")
        demo.attrs["num_samples"] = len(state)
        demo["actions"] = np.zeros((len(state), 7), np.float32)
        demo[f"obs/{so101.STATE_TERM}"] = state
        demo[so101.TARGETS_KEY] = targets
    return str(path)


def _vector_file(path, obs: np.ndarray) -> str:
    """A one-demo file of a task in the env's own terms: ``obs`` (float64) and actions."""
    with h5py.File(path, "w") as f:
        data = f.create_group("data")
        data.attrs["env_args"] = json.dumps({"env_name": "Isaac-Cartpole-Suspendable", "step_dt": 0.05})
        data["demo_0/actions"] = np.zeros((len(obs), 1), np.float32)
        data["demo_0/obs"] = obs
        data["demo_0"].attrs["num_samples"] = len(obs)
    return str(path)


def test_export_refuses_joint_values_no_so101_holds(tmp_path, capsys):
    """Finite but absurd joint values (1e37 rad: inf in degrees; 1e300 in a float64 file: inf in float32, in any
    export) end the export with one line naming the file, demo, key, joint and sample, exit status 2, nothing
    written (were written as +-inf into observation.state, action and stats.json, exit 0); joints at their limits
    export."""
    middle = np.float32([(lo + hi) / 2 for lo, hi in so101.JOINT_LIMITS.values()])
    state, targets = np.tile(middle, (5, 1)), np.tile(middle, (5, 1)).astype(np.float64)
    state[3, 2] = 1e37
    far = targets.copy()
    far[2, 0] = 1e300
    export = load_script("export_lerobot")
    check_usage_errors(export, {
        (_joints_file(tmp_path / "a.hdf5", state, targets), "--output", str(tmp_path / "out"), "--robot", so101.ROBOT):
            "demo 'demo_0': 'obs/joint_pos_abs' holds 1e+37 rad for the SO-101's 'elbow_flex' at sample 3, outside its"
            " range -1.690 to 1.690 rad",
        (_joints_file(tmp_path / "b.hdf5", np.tile(middle, (5, 1)), far), "--output", str(tmp_path / "out"),
         "--robot", so101.ROBOT): "'joint_targets/robot' holds 1e+300 at sample 2, beyond +-3.40282e+38",
        (_vector_file(tmp_path / "c.hdf5", far), "--output", str(tmp_path / "out")):
            "demo 'demo_0': 'obs' holds 1e+300 at sample 2, beyond +-3.40282e+38"}, capsys)
    assert not os.path.exists(tmp_path / "out")
    limits = np.float32([[lo for lo, _ in so101.JOINT_LIMITS.values()], [hi for _, hi in so101.JOINT_LIMITS.values()]])
    assert export.main([_joints_file(tmp_path / "d.hdf5", limits, limits.astype(np.float64)), "--output",
                        str(tmp_path / "out"), "--robot", so101.ROBOT, "--no_video", "--quiet"]) == 0


class _EnvPerPolicy:
    """Env ``i`` driven by ``policies[i]``: several baselines scored in one rollout of one Isaac Lab env."""

    def __init__(self, policies: list):
        self.policies = policies

    def act(self, obs: dict) -> torch.Tensor:
        return torch.stack([policy.act(obs)[i] for i, policy in enumerate(self.policies)])

    def observe(self, dones: torch.Tensor) -> None:
        """Nothing to drop."""


def test_trivial_joint_targets_never_lift_the_cube():
    """The lift is a test of a policy: zero joint targets, the start pose held and random targets lift the cube in
    none of their episodes (an env per policy, one full episode each, in the follower's action space)."""
    from isaaclab_suspend.runs import ConstantPolicy, HoldPosePolicy, RandomPolicy, score, start_episodes
    from isaaclab_suspend.tasks.env_factory import open_env

    with open_env("IsaacContrib-Lift-Cube-SO101-Joint-Suspendable", 3) as env:
        generator = torch.Generator(env.device).manual_seed(0)
        # env 0: zero targets, env 1: the start pose held, env 2: random targets; the three baselines' full episodes
        # (to the 120-step time-out) side by side in one rollout
        policy = _EnvPerPolicy([ConstantPolicy(env, 0.0), HoldPosePolicy(env, so101.STATE_TERM),
                                RandomPolicy(env, generator)])
        figures = score(env, policy, start_episodes(env, 0, desync=False), int(env.max_episode_length))
        assert figures["episodes_scored"] == 3 and figures["success_rate"] == 0.0, figures
        obs = env.observation_manager.compute()
        held = HoldPosePolicy(env, so101.STATE_TERM).act(obs)
        assert torch.equal(held, obs["policy"][so101.STATE_TERM]) and held is not obs["policy"][so101.STATE_TERM]


@pytest.fixture(scope="module")
def checkpoint(exported, tmp_path_factory) -> str:
    """A tiny ACT trained for 2 steps by lerobot-train on the export (CPU, offline); for the slow tests only."""
    output = tmp_path_factory.mktemp("so101_act") / "run"
    run = subprocess.run(
        [os.path.join(LEROBOT_BIN, "lerobot-train"), "--dataset.repo_id=local/so101", f"--dataset.root={exported}",
         "--policy.type=act", "--policy.device=cpu", "--policy.push_to_hub=false",
         "--policy.pretrained_backbone_weights=null", "--policy.chunk_size=8", "--policy.n_action_steps=8",
         "--policy.dim_model=32", "--policy.dim_feedforward=64", "--policy.n_heads=2", "--policy.n_encoder_layers=1",
         "--policy.n_vae_encoder_layers=1", "--batch_size=4", "--steps=2", "--save_freq=2", "--num_workers=0",
         "--dataset.video_backend=pyav", "--wandb.enable=false", f"--output_dir={output}"],
        cwd=ROOT, capture_output=True, text=True, timeout=600, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return str(output / "checkpoints" / "last" / "pretrained_model")


def test_checkpoint_acts_in_the_followers_action_space(checkpoint, exported, capsys):
    model = load_chunk_policy(checkpoint)
    assert model.task == JOINT_TASK and model.action_dim == 6  # recorded in task space, acts in joint space
    # lerobot-eval's env maps by the export's sidecar (test_lerobot_eval_env_gives_the_cube_pose_...), as read for the
    # checkpoint by the checks eval.py and the plugin share
    assert check_checkpoint(checkpoint)[1] == ExportSidecar.read(os.path.join(exported, SIDECAR_PATH))
    evaluate = load_script("eval")
    # 2 steps: a chunk of joint targets computed from the two cameras' frames and executed in the joint task
    status = evaluate.main(["--checkpoint", checkpoint, "--num_envs", "2", "--steps", "2", "--timeline", "",
                            "--report", "", "--quiet"])
    out = capsys.readouterr().out
    assert status == 0, out[-3000:]
    assert f"{JOINT_TASK}, chunk policy {checkpoint}: 2 envs, 2 steps, H = 8" in out, out[-3000:]
    try:
        status = evaluate.main(["--checkpoint", checkpoint, "--task",
                                "IsaacContrib-Lift-Cube-SO101-IK-Abs-Camera-Suspendable", "--num_envs", "1", "--steps",
                                "1", "--quiet"])
    except SystemExit as exit_:  # refused while the arguments are parsed
        status = exit_.code
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert status == 2 and len(lines) == 1 and f"acts in '{JOINT_TASK}'" in lines[0], err


def test_lerobot_eval_env_gives_the_cube_pose_and_sets_the_goal_positions(exported):
    """The env ``lerobot-eval`` steps for a policy trained on the export, mapped by the export's sidecar (what the
    plugin reads for its checkpoint: test_checkpoint_acts_in_the_followers_action_space), without training one."""
    env = LeRobotVectorEnv(JOINT_TASK, 2, ExportSidecar.read(os.path.join(exported, SIDECAR_PATH)))
    try:
        features, names = env.lerobot_features()
        assert names["environment_state"] == "observation.environment_state"
        assert features["environment_state"].shape == (7,)
        obs, _ = env.reset(seed=3)
        policy = env.env.obs_buf["policy"]
        assert np.array_equal(obs["environment_state"], policy["cube_pose_b"].numpy())
        assert np.array_equal(obs["agent_pos"], so101.to_follower(policy[so101.STATE_TERM]).numpy())
        goal = np.tile(np.array([[10.0, -20.0, 30.0, 40.0, 0.0, 80.0]], np.float32), (2, 1))  # degrees, 0-100
        env.step(goal)
        targets = env.env.scene["robot"].data.joint_pos_target.torch
        assert torch.allclose(targets, so101.from_follower(torch.from_numpy(goal)), atol=1e-6)
        term = PostStepJointTargetsRecorder(PostStepJointTargetsRecorderCfg(), env.env)
        key, value = term.record_post_step()
        assert key == "joint_targets" and torch.equal(value["robot"], targets) and value["robot"] is not targets
    finally:
        env.close()
