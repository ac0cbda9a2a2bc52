"""scripts/replay.py end to end: exit status 0 when states match, 1 above the tolerance, 2 on bad input."""

import os
import re
import subprocess
import sys

import h5py
import pytest
from helpers import ROOT, record_chunk_demos

from isaaclab_suspend.datasets import DatasetReader
SCRIPT = os.path.join(ROOT, "scripts", "replay.py")
TASK = "Isaac-PushCube-Suspendable"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> str:
    return record_chunk_demos(tmp_path_factory.mktemp("replay_cli"), TASK, [0, 60, 120, 180], 200)


def _replay(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, SCRIPT, *map(str, args)], cwd=ROOT, capture_output=True, text=True,
                          timeout=110)


def test_exact_replay_exits_0(dataset):
    run = _replay(dataset)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "largest state error 0 (tolerance 1e-05); 0 above it" in run.stdout


def test_other_env_origins_warn_and_exit_1(dataset):
    """Recorded in 4 envs (a 2 x 2 grid), replayed in 5 (a 3-row grid): demos run about other env origins, where
    float32 positions round differently and the contacts amplify it. The script says so and exits 1."""
    run = _replay(dataset, "--num_envs", "5")
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    assert re.search(r"\[WARN\] [1-9]\d* demos run about another env origin than recorded", run.stdout), run.stdout
    assert re.search(r"\|\s+no\s+\|", run.stdout) and "above it: demo_" in run.stdout  # at recorded origin: no


def test_drift_exits_1_and_warns(dataset, tmp_path):
    """Without the pre-step states the recorded nudges are lost, the states drift and the status is 1."""
    with DatasetReader(dataset) as reader:
        assert any(len(reader.load(name, "cpu").events()) for name in reader.demo_names)
    stripped = tmp_path / "stripped.hdf5"
    with h5py.File(dataset, "r") as fin, h5py.File(stripped, "w") as fout:
        fout.attrs.update(fin.attrs)  # format_version: without it the reader converts legacy quaternions
        fin.copy("data", fout)
        for name in fout["data"]:
            del fout["data"][name]["pre_step_states"]
    run = _replay(stripped)
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    assert "stored no pre-step states" in run.stdout and "above it: demo_" in run.stdout


def test_bad_input_exits_2_with_the_file_name(dataset, tmp_path):
    corrupt = tmp_path / "corrupt.hdf5"
    corrupt.write_bytes(b"not hdf5")
    run = _replay(corrupt)
    assert run.returncode == 2 and f"'{corrupt}' is not a readable Isaac Lab dataset" in run.stderr
    run = _replay(dataset, "--task", "Isaac-Cartpole-Suspendable")
    assert run.returncode == 2
    assert f"'{dataset}' was recorded on task '{TASK}', not on 'Isaac-Cartpole-Suspendable'" in run.stderr
