"""scripts/replay.py against corrupt files and bad arguments: each ends with its own exit status and one line
naming the file, the demo and the field, never a traceback and never a pass. The corrupt files are copies of a
small real Cartpole recording edited with h5py."""

import importlib.util
import json
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np
import pytest
import torch

from isaaclab_suspend.datasets import DatasetRecorderManagerCfg
from isaaclab_suspend.policies import ActionChunkingPolicy
from isaaclab_suspend.policies.embedded import make_default_model
from isaaclab_suspend.utils import open_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TASK = "Isaac-Cartpole-Suspendable"
STATE = "states/articulation/robot/joint_position"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> str:
    """Two short Cartpole episodes (10 and 20 steps) recorded with 2 envs."""
    out = tmp_path_factory.mktemp("replay_hardening")
    recorders = DatasetRecorderManagerCfg(dataset_export_dir_path=str(out), dataset_filename="cartpole")
    with open_env(TASK, 2, recorders=recorders) as env:
        policy = ActionChunkingPolicy(make_default_model(TASK, 8), env, chunk_length=8, schedule="global_clock")
        obs, _ = env.reset()
        env.episode_length_buf[:] = torch.tensor([280, 290])
        for _ in range(24):
            obs, _, term, trunc, _ = env.step(policy.act(obs))
            policy.observe(term | trunc)
    path = str(out / "cartpole.hdf5")
    with h5py.File(path, "r") as f:
        assert len(f["data"]) == 2
    return path


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("replay_script", os.path.join(ROOT, "scripts", "replay.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _set(path, key, value):
    with h5py.File(path, "a") as f:
        del f[key]
        f[key] = value


def _poke(path, key, index, value):
    with h5py.File(path, "a") as f:
        data = f[key][()]
        data[index] = value
        f[key][...] = data


def _group_actions(path):
    with h5py.File(path, "a") as f:
        del f["data/demo_1/actions"]
        f["data/demo_1/actions/x"] = np.zeros((20, 1), np.float32)


def _declare_huge(path):
    """A 4 TiB dataset that takes nothing on disk (compressed, never written)."""
    with h5py.File(path, "a") as f:
        f["data/demo_0"].create_dataset("obs_huge", shape=(2**40,), dtype="f4", chunks=(1024,), compression="gzip")


def _env_args(path, edit):
    with h5py.File(path, "a") as f:
        f["data"].attrs["env_args"] = edit(json.loads(f["data"].attrs["env_args"]))


def _sim_args(**sim_args):
    return lambda args: json.dumps({**args, "sim_args": {**args["sim_args"], **sim_args}})


CORRUPTIONS = {
    "nan state": (lambda p: _poke(p, f"data/demo_0/{STATE}", (3, 1), np.nan),
                  f"demo 'demo_0': '{STATE}' holds a non-finite value (nan) at sample 3"),
    "inf initial state": (lambda p: _poke(p, "data/demo_1/initial_state/articulation/robot/root_velocity", (0, 2),
                                          np.inf),
                          "demo 'demo_1': 'initial_state/articulation/robot/root_velocity' holds a non-finite value"
                          " (inf) at sample 0"),
    "nan action": (lambda p: _poke(p, "data/demo_1/actions", (5, 0), np.nan),
                   "demo 'demo_1': 'actions' holds a non-finite value (nan) at sample 5"),
    "-inf pre-step state": (lambda p: _poke(p, "data/demo_0/pre_step_states/articulation/robot/joint_velocity", 0,
                                            -np.inf), "'pre_step_states/articulation/robot/joint_velocity' holds a"),
    "huge num_envs": (lambda p: _env_args(p, _sim_args(num_envs=10**9)),
                      "(sim_args.num_envs) asks for 1000000000 replay envs; at most 16384"),
    "negative num_envs": (lambda p: _env_args(p, _sim_args(num_envs=-4)),
                          "'sim_args.num_envs' must be a positive integer, got -4"),
    "string num_envs": (lambda p: _env_args(p, _sim_args(num_envs="4")),
                        "'sim_args.num_envs' must be a positive integer, got '4'"),
    "env_args a list": (lambda p: _env_args(p, lambda a: "[1, 2]"), "'env_args' must be a JSON object, got list"),
    "env_args not JSON": (lambda p: _env_args(p, lambda a: "{'env_name'"), "is not a readable Isaac Lab dataset"),
    "sim_args a string": (lambda p: _env_args(p, lambda a: json.dumps({**a, "sim_args": "x"})),
                          "'sim_args' must be an object, got 'x'"),
    "interval_events a number": (lambda p: _env_args(p, lambda a: json.dumps({**a, "interval_events": 3})),
                                 "'interval_events' must be a list of names, got 3"),
    "unknown env name": (lambda p: _env_args(p, lambda a: json.dumps({**a, "env_name": "Isaac-Nope-v0"})),
                         "task 'Isaac-Nope-v0' is not registered"),
    "string actions": (lambda p: _set(p, "data/demo_0/actions", np.array([[b"left"]] * 10)),
                       "demo 'demo_0': 'actions' holds |S4 values, not numbers"),
    "empty env_origin": (lambda p: _set(p, "data/demo_0/env_origin", np.zeros((0, 3), np.float32)),
                         "demo 'demo_0': 'env_origin' must have shape (1, 3), got (0, 3)"),
    "actions a group": (_group_actions, "'actions' is a group of ['x'], not one tensor"),
    "1-D states": (lambda p: _set(p, f"data/demo_0/{STATE}", np.zeros(10, np.float32)),
                   f"'{STATE}' has shape (10,): it needs 10 samples"),
    "a declared huge dataset": (_declare_huge, "demo 'demo_0' holds 4194304 MiB of tensors, over half of the"),
}


@pytest.mark.parametrize("case", sorted(CORRUPTIONS))
def test_corrupt_file_exits_2_naming_demo_and_field(case, dataset, script, tmp_path, capsys):
    corrupt, message = CORRUPTIONS[case]
    path = str(tmp_path / "corrupt.hdf5")
    shutil.copy(dataset, path)
    corrupt(path)
    status = script.main([path])
    out, err = capsys.readouterr()
    assert status == 2, (out[-2000:], err[-2000:])
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines == [lines[0]] and lines[0].startswith(f"replay.py: error: '{path}'") and message in lines[0], err


BAD_ARGUMENTS = {
    ("--tolerance", "nan"): "argument --tolerance: nan is not a finite number in [0, inf]",
    ("--tolerance", "inf"): "argument --tolerance: inf is not a finite number",
    ("--tolerance", "-0.5"): "argument --tolerance: -0.5 is not a finite number in [0, inf]",
    ("--num_envs", "0"): "argument --num_envs: 0 is not in [1, 16384]",
    ("--num_envs", "99999999"): "argument --num_envs: 99999999 is not in [1, 16384]",
    ("--device", "cuda:7"): "argument --device: 'cuda:7'",
    ("--demos", "demo_0", "demo_9"): "has no demos ['demo_9']; it holds 2 demos",
    ("--task", "Isaac-Nope-v0"): "was recorded on task 'Isaac-Cartpole-Suspendable', not on 'Isaac-Nope-v0'",
}


def test_bad_arguments_exit_2_before_anything_is_built(dataset, script, capsys):
    for args, message in BAD_ARGUMENTS.items():
        try:
            status = script.main([dataset, *args])
        except SystemExit as exit:
            status = exit.code
        err = capsys.readouterr().err
        assert status == 2 and message in err and "Traceback" not in err, (args, err)
    with pytest.raises(SystemExit) as exit:
        script.main(["/nonexistent/file.hdf5"])
    assert exit.value.code == 2 and "'/nonexistent/file.hdf5' is not a readable file" in capsys.readouterr().err


def test_scene_mismatch_found_after_the_env_is_built_is_one_line(dataset, script, tmp_path, capsys):
    """A state the scene does not have is only found against the built env: still one line, no traceback (which
    launch_simulation would print for an exception raised inside it)."""
    path = str(tmp_path / "extra_state.hdf5")
    shutil.copy(dataset, path)
    with h5py.File(path, "a") as f:
        f["data/demo_1/initial_state/articulation/robot/joint_effort"] = np.zeros((1, 2), np.float32)
    status = script.main([path])
    out, err = capsys.readouterr()
    assert status == 2 and "Traceback" not in err + out, err[-3000:]
    assert "demo 'demo_1': 'initial_state/articulation/robot/joint_effort' is not in the env's scene" in err


def test_replay_cli_exit_codes_end_to_end(dataset, tmp_path):
    """As a user runs it: 0 for the exact file, 2 with one line for a NaN, and `--tolerance nan` refused."""
    nan = str(tmp_path / "nan.hdf5")
    shutil.copy(dataset, nan)
    _poke(nan, f"data/demo_1/{STATE}", (7, 0), np.nan)
    processes = {name: subprocess.Popen([sys.executable, os.path.join(ROOT, "scripts", "replay.py"), *args], cwd=ROOT,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for name, args in (("exact", [dataset]), ("nan", [nan]), ("tolerance", [dataset, "--tolerance", "nan"]))}
    runs = {}
    for name, process in processes.items():
        out, err = process.communicate(timeout=300)
        runs[name] = subprocess.CompletedProcess(process.args, process.returncode, out, err)
    assert runs["exact"].returncode == 0, runs["exact"].stderr[-3000:]
    assert "2 demos replayed in 2 envs; largest state error 0 (tolerance 1e-05); 0 above it" in runs["exact"].stdout
    assert runs["nan"].returncode == 2 and "Traceback" not in runs["nan"].stderr
    assert f"demo 'demo_1': '{STATE}' holds a non-finite value (nan) at sample 7" in runs["nan"].stderr
    assert runs["tolerance"].returncode == 2 and "--tolerance: nan is not a finite number" in runs["tolerance"].stderr
