"""scripts/replay.py end to end: exit status 0 when states match, 1 above the tolerance, 2 on bad input.

The replays run through the script's ``main(argv)`` in the test process; one bad input runs in a process of its own,
for the real entry point's exit status and stderr."""

import os
import re
import subprocess
import sys

import h5py
import pytest
from helpers import ROOT, load_script, record_chunk_demos

from isaaclab_suspend.datasets import DatasetReader
SCRIPT = os.path.join(ROOT, "scripts", "replay.py")
TASK = "Isaac-PushCube-Suspendable"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> str:
    """4 envs started late in their 300-step episodes, 130 steps: each ends one episode by its time-out, demos of
    100-130 samples, long enough for a nudge (an interval event every 60-120 steps) in some of them."""
    return record_chunk_demos(tmp_path_factory.mktemp("replay_cli"), TASK, [170, 180, 190, 200], 130)


@pytest.fixture(scope="module")
def replay():
    """replay.py's ``main``: its exit status (a usage error's too)."""
    main = load_script("replay").main

    def run(*args) -> int:
        try:
            return main([*map(str, args), "--quiet"])
        except SystemExit as exit_:
            return exit_.code

    return run


def test_exact_replay_exits_0(dataset, replay, capsys):
    status, out = replay(dataset), capsys.readouterr().out
    assert status == 0, out[-3000:]
    assert "largest state error 0 (tolerance 1e-05); 0 above it" in out


def test_other_env_origins_warn_and_exit_1(dataset, replay, capsys):
    """Recorded in 4 envs (a 2 x 2 grid), replayed in 5 (a 3-row grid): demos run about other env origins, where
    float32 positions round differently and the contacts amplify it. The script says so and exits 1."""
    status, out = replay(dataset, "--num_envs", "5"), capsys.readouterr().out
    assert status == 1, out[-3000:]
    assert re.search(r"\[WARN\] [1-9]\d* demos run about another env origin than recorded", out), out
    assert re.search(r"\|\s+no\s+\|", out) and "above it: demo_" in out  # at recorded origin: no


def test_drift_exits_1_and_warns(dataset, tmp_path, replay, capsys):
    """Without the pre-step states the recorded nudges are lost, the states drift and the status is 1."""
    with DatasetReader(dataset) as reader:
        assert any(len(reader.load(name, "cpu").events()) for name in reader.demo_names)
    stripped = tmp_path / "stripped.hdf5"
    with h5py.File(dataset, "r") as fin, h5py.File(stripped, "w") as fout:
        fout.attrs.update(fin.attrs)  # format_version: without it the reader converts legacy quaternions
        fin.copy("data", fout)
        for name in fout["data"]:
            del fout["data"][name]["pre_step_states"]
    status, out = replay(stripped), capsys.readouterr().out
    assert status == 1, out[-3000:]
    assert "stored no pre-step states" in out and "above it: demo_" in out


def test_bad_input_exits_2_with_the_file_name(dataset, tmp_path, replay, capsys):
    """The real process: a file that is no dataset is exit status 2 and one line on stderr, no traceback; in the
    test process, a dataset of another task than the one asked for."""
    corrupt = tmp_path / "corrupt.hdf5"
    corrupt.write_bytes(b"not hdf5")
    run = subprocess.run([sys.executable, SCRIPT, str(corrupt)], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 2 and f"'{corrupt}' is not a readable Isaac Lab dataset" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr, run.stderr
    assert replay(dataset, "--task", "Isaac-Cartpole-Suspendable") == 2
    err = capsys.readouterr().err
    assert f"'{dataset}' was recorded on task '{TASK}', not on 'Isaac-Cartpole-Suspendable'" in err
