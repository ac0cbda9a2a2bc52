"""Parallel replay: state-exact with suspensions and interval events, origins, drift without event states, bad input."""

import json

import gymnasium as gym
import h5py
import pytest
import torch

from isaaclab.app.sim_launcher import launch_simulation

from isaaclab_suspend.datasets import DatasetError, DatasetReader, DatasetReplayer, make_replay_env_cfg
from isaaclab_suspend.recording import DatasetRecorderManagerCfg
from isaaclab_suspend.chunking import ActionChunkingPolicy
from isaaclab_suspend.tasks.embedded import make_default_model
from isaaclab_suspend.tasks.env_factory import open_env

TASK = "Isaac-PushCube-Suspendable"
NUM_ENVS = 8


@pytest.fixture(scope="module")
def dataset(tmp_path_factory, device) -> str:
    """Push-cube episodes of the embedded chunk policy on the global clock: suspensions, contacts, nudges; recorded
    on ``--device``."""
    out = tmp_path_factory.mktemp("replay")
    recorders = DatasetRecorderManagerCfg(dataset_export_dir_path=str(out), dataset_filename="push_cube")
    with open_env(TASK, NUM_ENVS, device, recorders=recorders) as env:
        policy = ActionChunkingPolicy(make_default_model(TASK, 8), env, chunk_length=8, schedule="global_clock")
        obs, _ = env.reset()
        env.episode_length_buf[:] = torch.randint(0, int(env.max_episode_length), (NUM_ENVS,))  # desynchronise
        for _ in range(260):
            obs, _, term, trunc, _ = env.step(policy.act(obs))
            policy.observe(term | trunc)
        assert policy.stats["suspended_env_steps"] > 0, "the recording must suspend envs"
    return str(out / "push_cube.hdf5")


def _replay(path: str, num_envs: int, check=None, device: str = "cpu"):
    cfg = make_replay_env_cfg(TASK, num_envs, device)
    with launch_simulation(cfg, {}):
        env = gym.make(TASK, cfg=cfg).unwrapped
        try:
            with DatasetReader(path) as reader:
                replayer = DatasetReplayer(env, reader)
                results = replayer.run()
                assert env.num_suspended == num_envs, "an env without a demo left must be suspended"
                if check is not None:
                    check(env, reader)
        finally:
            env.close()
    return results


def _copy_without(src: str, dst: str, drop) -> None:
    """Copy a dataset, leaving out the objects for which ``drop(name)`` is True."""
    with h5py.File(src, "r") as fin, h5py.File(dst, "w") as fout:
        fout.attrs.update(fin.attrs)
        data = fout.create_group("data")
        data.attrs.update(fin["data"].attrs)
        for name in fin["data"]:
            demo = data.create_group(name)
            demo.attrs.update(fin["data"][name].attrs)
            for key in fin["data"][name]:
                if not drop(f"{name}/{key}"):
                    fin["data"][name].copy(key, demo)


@pytest.mark.cuda
def test_parallel_replay_is_state_exact(dataset, tmp_path, device):
    """Demos of different lengths in 9 envs (one more than recorded): every state matches, idle envs are suspended."""

    def bad_action_dim(env, reader):
        path = str(tmp_path / "wide_actions.hdf5")
        _copy_without(dataset, path, lambda name: False)
        with h5py.File(path, "a") as f:
            demo = f["data/demo_0"]
            del demo["actions"]
            demo["actions"] = torch.zeros(demo.attrs["num_samples"], 3).numpy()
        with DatasetReader(path) as wide:
            with pytest.raises(DatasetError, match="demo_0': actions have dim 3, the env takes 1"):
                DatasetReplayer(env, wide)

    results = _replay(dataset, NUM_ENVS + 1, check=bad_action_dim, device=device)
    assert len(results) >= NUM_ENVS + 2
    assert len({r.num_samples for r in results}) > 3, "demos must end at different steps"
    assert all(r.at_recorded_origin for r in results)
    assert sum(r.events_applied for r in results) > 0, "the recording must contain interval events"
    worst = max(r.max_state_error for r in results)
    assert worst == 0.0, [(r.demo, r.max_state_error, r.worst_state) for r in results]  # bit-exact at the origins


def test_replay_without_event_states_drifts_at_the_events(dataset, tmp_path):
    """Without the pre-step states the nudges are lost: exactly the demos with a nudge drift."""
    path = str(tmp_path / "no_events.hdf5")
    _copy_without(dataset, path, lambda name: name.endswith("/pre_step_states"))
    with DatasetReader(dataset) as reader:
        nudged = {name: len(reader.load(name, "cpu").events()) > 0 for name in reader.demo_names}
    assert any(nudged.values()) and not all(nudged.values())
    for result in _replay(path, NUM_ENVS):
        assert result.events_applied == 0
        if nudged[result.demo]:
            assert result.max_state_error > 1e-3, result
        else:
            assert result.max_state_error == 0.0, result


def test_bad_input_names_the_file_and_demo(dataset, tmp_path):
    missing = tmp_path / "missing.hdf5"
    with pytest.raises(FileNotFoundError, match=str(missing)):
        DatasetReader(str(missing))

    corrupt = tmp_path / "corrupt.hdf5"
    corrupt.write_bytes(b"\x89HDF\r\n\x1a\n" + bytes(range(256)) * 8)
    with pytest.raises(DatasetError, match=f"'{corrupt}' is not a readable Isaac Lab dataset"):
        DatasetReader(str(corrupt))

    no_data = tmp_path / "no_data.hdf5"
    with h5py.File(no_data, "w") as f:
        f.create_group("other")
    with pytest.raises(DatasetError, match="'data' group"):
        DatasetReader(str(no_data))

    other_task = tmp_path / "other_task.hdf5"
    _copy_without(dataset, str(other_task), lambda name: False)
    with h5py.File(other_task, "a") as f:
        args = json.loads(f["data"].attrs["env_args"])
        f["data"].attrs["env_args"] = json.dumps({**args, "env_name": "Isaac-Cartpole-Suspendable"})
    with DatasetReader(str(other_task)) as reader:
        recorded_elsewhere = f"'{other_task}' was recorded on task 'Isaac-Cartpole-Suspendable', not on '{TASK}'"
        with pytest.raises(DatasetError, match=recorded_elsewhere):
            reader.check_task(TASK)

    no_actions = tmp_path / "no_actions.hdf5"
    _copy_without(dataset, str(no_actions), lambda name: name == "demo_1/actions")
    with DatasetReader(str(no_actions)) as reader:
        reader.load("demo_0", "cpu")
        with pytest.raises(DatasetError, match=f"'{no_actions}', demo 'demo_1' has no 'actions'"):
            reader.load("demo_1", "cpu")
        with pytest.raises(DatasetError, match="demo 'demo_99' does not exist"):
            reader.load("demo_99", "cpu")

    short_states = tmp_path / "short_states.hdf5"
    _copy_without(dataset, str(short_states), lambda name: False)
    with h5py.File(short_states, "a") as f:
        position = f["data/demo_2/states/articulation/robot/joint_position"]
        values = position[:-1]
        del f["data/demo_2/states/articulation/robot/joint_position"]
        f["data/demo_2/states/articulation/robot/joint_position"] = values
    with DatasetReader(str(short_states)) as reader:
        with pytest.raises(DatasetError, match="demo 'demo_2': 'states/articulation/robot/joint_position' has"):
            reader.load("demo_2", "cpu")


def test_state_is_written_on_the_scenes_device():
    """Replay reads a dataset on the CPU; Warp's state writers take a tensor on the scene's device only (on an H200
    a CPU tensor handed to ``write_joint_vel_user_to_backend_with_indices`` broke the CUDA context). The rows
    reach every writer on the scene's device, the env origins added to the root pose there. The scene here is a
    stand-in whose device is 'meta', the one other device a CPU machine has."""
    from types import SimpleNamespace

    from isaaclab_suspend.datasets import write_scene_state

    written = []

    class Asset:
        def __getattr__(self, writer):
            return lambda env_ids, **value: written.append((writer, *(v.device.type for v in value.values())))

    scene = SimpleNamespace(device="meta", articulations={"robot": Asset()}, rigid_objects={"cube": Asset()},
                            env_origins=torch.zeros(4, 3, device="meta"))
    state = {"articulation": {"robot": {"joint_position": torch.zeros(2, 2), "joint_velocity": torch.zeros(2, 2)}},
             "rigid_object": {"cube": {"root_pose": torch.zeros(2, 7), "root_velocity": torch.zeros(2, 6)}}}
    write_scene_state(scene, state, torch.tensor([0, 3], device="meta"))
    assert sorted(written) == [("write_joint_position_to_sim_index", "meta"),
                               ("write_joint_velocity_to_sim_index", "meta"),
                               ("write_root_pose_to_sim_index", "meta"),
                               ("write_root_velocity_to_sim_index", "meta")]
