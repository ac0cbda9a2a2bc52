"""scripts/replay.py against corrupt files and bad arguments: each ends with its own exit status and one line
naming the file, the demo and the field, never a traceback and never a pass. The corrupt files are copies of a
small real Cartpole recording edited with h5py."""

import json
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np
import pytest
from helpers import ROOT, check_usage_errors, load_script, record_chunk_demos

TASK = "Isaac-Cartpole-Suspendable"
STATE = "states/articulation/robot/joint_position"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> str:
    """Two short Cartpole episodes (10 and 20 steps) recorded with 2 envs."""
    path = record_chunk_demos(tmp_path_factory.mktemp("replay_hardening"), TASK, [280, 290], 24)
    with h5py.File(path, "r") as f:
        assert [f["data"][name].attrs["num_samples"] for name in ("demo_0", "demo_1")] == [10, 20]
    return path


@pytest.fixture(scope="module")
def script():
    return load_script("replay")


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


def _edit(path, edit):
    with h5py.File(path, "a") as f:
        edit(f["data/demo_0"])


def _external_demo(path):
    other = path + ".other.hdf5"
    shutil.copy(path, other)
    with h5py.File(path, "a") as f:
        del f["data/demo_1"]
        f["data/demo_1"] = h5py.ExternalLink(other, "/data/demo_1")


def _external_storage(path, target):
    if not os.path.exists(target):  # (opening a FIFO here would wait for a writer)
        with open(target, "wb") as file:
            file.write(bytes(40))
    with h5py.File(path, "a") as f:
        f["data/demo_0"].create_dataset("obs_ext", (10,), "f4", external=[(target, 0, 40)])


def _fifo(path):
    fifo = path + ".fifo"
    os.mkfifo(fifo)
    return fifo


def _virtual(path):
    layout = h5py.VirtualLayout(shape=(10, 2), dtype="f4")
    layout[:] = h5py.VirtualSource(path + ".missing.h5", "x", shape=(10, 2))
    with h5py.File(path, "a") as f:
        f["data/demo_0"].create_virtual_dataset("obs_virtual", layout, fillvalue=0)


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
    "cfg_overrides a string": (lambda p: _env_args(p, lambda a: json.dumps({**a, "cfg_overrides": "env.x=1"})),
                               "'cfg_overrides' must be a list of KEY=VALUE strings, got 'env.x=1'"),
    "unknown env name": (lambda p: _env_args(p, lambda a: json.dumps({**a, "env_name": "Isaac-Nope-v0"})),
                         "task 'Isaac-Nope-v0' is not registered"),
    "string actions": (lambda p: _set(p, "data/demo_0/actions", np.array([[b"left"]] * 10)),
                       "demo 'demo_0': 'actions' holds |S4 values, not numbers"),
    "empty env_origin": (lambda p: _set(p, "data/demo_0/env_origin", np.zeros((0, 3), np.float32)),
                         "demo 'demo_0': 'env_origin' must have shape (1, 3), got (0, 3)"),
    "actions a group": (_group_actions, "'actions' is a group of ['x'], not one tensor"),
    "1-D states": (lambda p: _set(p, f"data/demo_0/{STATE}", np.zeros(10, np.float32)),
                   f"'{STATE}' has shape (10,): it needs 10 samples"),
    "a declared huge dataset": (_declare_huge, "demo 'demo_0': 'obs_huge' declares (1099511627776,) float32 values"
                                " (4194304.0 MiB) but the file stores 0.000 MiB"),
    "a contiguous dataset never written": (lambda p: _edit(p, lambda d: d.create_dataset("obs_x", (10**6, 700), "f4")),
                                           "'obs_x' declares (1000000, 700) float32 values (2670.3 MiB) but the file"),
    "an external link": (lambda p: _edit(p, lambda d: d.__setitem__("obs_ext", h5py.ExternalLink(p + ".x", "/d"))),
                         "demo 'demo_0': 'obs_ext' is an external link (to another file)"),
    "a demo that is an external link": (_external_demo, "demo 'demo_1' is an external link (to another file)"),
    "a soft link": (lambda p: _edit(p, lambda d: d.__setitem__("obs_soft", h5py.SoftLink("/data/demo_1/actions"))),
                    "demo 'demo_0': 'obs_soft' is a soft link"),
    "a link cycle": (lambda p: _edit(p, lambda d: d["states"].__setitem__("loop", d)),
                     "is linked from more than one place (a link cycle or a shared object)"),
    "a shared dataset": (lambda p: _edit(p, lambda d: d.__setitem__("obs_actions", d["actions"])),
                         "'actions' is linked from more than one place"),
    "external storage": (lambda p: _external_storage(p, p + ".bin"), "'obs_ext' keeps its data in external files"),
    "external storage on a FIFO": (lambda p: _external_storage(p, _fifo(p)),
                                   "'obs_ext' keeps its data in external files"),
    "a virtual dataset without source": (_virtual, "'obs_virtual' is a virtual dataset"),
    "deeply nested env_args": (lambda p: _env_args(p, lambda a: "[" * 100_000 + "]" * 100_000),
                               "is not a readable Isaac Lab dataset"),
}



@pytest.mark.parametrize("case", sorted(CORRUPTIONS))
def test_corrupt_file_exits_2_naming_demo_and_field(case, dataset, script, tmp_path, capsys):
    corrupt, message = CORRUPTIONS[case]
    path = str(tmp_path / "corrupt.hdf5")
    shutil.copy(dataset, path)
    corrupt(path)
    status = script.main([path])  # a FIFO opened for reading would block forever: refused before any read
    out, err = capsys.readouterr()
    assert status == 2, (out[-2000:], err[-2000:])
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines == [lines[0]] and lines[0].startswith(f"replay.py: error: '{path}'") and message in lines[0], err


BAD_ARGUMENTS = {
    ("--tolerance", "nan"): "argument --tolerance: nan is out of range: must be a finite number >= 0",
    ("--tolerance", "inf"): "argument --tolerance: inf is out of range: must be a finite number >= 0",
    ("--tolerance", "-0.5"): "argument --tolerance: -0.5 is out of range: must be a finite number >= 0",
    ("--num_envs", "0"): "argument --num_envs: 0 is out of range: must be in [1, 16384]",
    ("--num_envs", "99999999"): "argument --num_envs: 99999999 is out of range: must be in [1, 16384]",
    ("--device", "cuda:7"): "argument --device: 'cuda:7'",
    ("--demos", "demo_0", "demo_9"): "has no demos ['demo_9']; it holds 2 demos",
    ("--task", "Isaac-Nope-v0"): "Unknown task 'Isaac-Nope-v0'. Did you mean",
    ("--task", "Isaac-PushCube-Suspendable"): "was recorded on task 'Isaac-Cartpole-Suspendable', not on 'Isaac-PushCube",
}


def test_bad_arguments_exit_2_before_anything_is_built(dataset, script, capsys):
    check_usage_errors(script, BAD_ARGUMENTS, capsys, prefix=(dataset,))
    check_usage_errors(script, {("/nonexistent/file.hdf5",): "'/nonexistent/file.hdf5' is not a readable file"}, capsys)


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
    """As a user runs it (scripts/test_replay.py runs intact files): 2 with one line for a NaN, `--tolerance nan`
    refused."""
    nan = str(tmp_path / "nan.hdf5")
    shutil.copy(dataset, nan)
    _poke(nan, f"data/demo_1/{STATE}", (7, 0), np.nan)
    processes = [subprocess.Popen([sys.executable, os.path.join(ROOT, "scripts", "replay.py"), *args], cwd=ROOT,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for args in ([nan], [dataset, "--tolerance", "nan"])]
    (_, nan_err), (_, tolerance_err) = (process.communicate(timeout=300) for process in processes)
    assert [process.returncode for process in processes] == [2, 2], nan_err + tolerance_err
    assert f"demo 'demo_1': '{STATE}' holds a non-finite value (nan) at sample 7" in nan_err
    assert "Traceback" not in nan_err and nan_err.strip().splitlines()[-1].startswith("replay.py: error:"), nan_err
    assert "--tolerance: nan is out of range: must be a finite number" in tolerance_err
