"""What a newcomer reads: by default a script leaves Isaac Lab's set-up tables to ``--verbose``, ``--quiet`` keeps only
its result, ``open_env`` is quiet by default in Python, where the project's tasks need no import of their own; Cartpole's success is one definition
everywhere (the episode reached its time-out); a figure a run does not define reads ``n/a``."""

import os
import re
import subprocess
import sys

import h5py
import pytest

from isaaclab_suspend.cli import dataset_table
from isaaclab_suspend.chunking import stats_table

pytestmark = pytest.mark.slow  # scripts' console output, each a fresh process

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _script(name: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, os.path.join(ROOT, "scripts", name), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_quiet_eval_prints_the_result_and_no_set_up_output():
    run = _script("eval.py", "--quiet", "--num_envs", "2", "--steps", "16", "--timeline", "", "--report", "")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "[INFO]" not in run.stdout and "Active Observation Terms" not in run.stdout, run.stdout[:3000]
    assert "Parsing configuration" not in run.stdout and "%|" not in run.stderr  # no progress bar either
    assert "| inference_calls " in run.stdout and "Isaac-Cartpole-Suspendable, embedded model: 2 envs" in run.stdout
    assert len(run.stdout.strip().splitlines()) < 30, run.stdout


def test_verbose_eval_brings_back_the_set_up_tables_the_default_leaves_out():
    default = _script("eval.py", "--num_envs", "2", "--steps", "16", "--timeline", "", "--report", "")
    verbose = _script("eval.py", "--verbose", "--num_envs", "2", "--steps", "16", "--timeline", "", "--report", "")
    assert default.returncode == verbose.returncode == 0, default.stderr[-3000:] + verbose.stderr[-3000:]
    for table in ("Active Observation Terms", "Suspension Manager: ", "[INFO]: Base environment"):
        assert table not in default.stdout and table in verbose.stdout, (table, default.stdout)
    assert "%|" in default.stderr and "| inference_calls " in default.stdout  # a progress bar and the result
    assert len(default.stdout.splitlines()) < 35 < len(verbose.stdout.splitlines()), default.stdout


def test_python_api_finds_the_project_tasks_itself_and_is_quiet_by_default():
    code = ("from isaaclab_suspend.tasks.embedded import make_default_model\n"
            "print(repr(make_default_model('Isaac-Cartpole-Suspendable', 16)).split(',')[0])\n"
            "from isaaclab_suspend.tasks.env_factory import open_env\n"
            "with open_env('Isaac-Cartpole-Suspendable', 2) as env:\n"
            "    env.reset()\n"
            "print('opened')\n")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.splitlines() == ["CartpoleLQRChunkModel(H=16", "opened"], run.stdout[-3000:]
    assert "Warp CUDA warning" not in run.stderr, run.stderr[-3000:]


def test_cartpole_success_is_reaching_the_time_out_in_record_and_eval(tmp_path):
    """The LQR chunk expert keeps every pole up: record.py counts each episode (all reach the 300-step time-out) a
    success, in its table and in the file; eval.py reports success rate 1.000 for the same episodes."""
    output = tmp_path / "cartpole.hdf5"
    run = _script("record.py", "--quiet", "--policy", "chunk", "--num_envs", "4", "--episodes", "4", "--output",
                  str(output))
    assert run.returncode == 0, run.stderr[-3000:]
    row = re.search(rf"\| {re.escape(str(output))} +\| +(\d+) +\| +(\d+) +\|", run.stdout)
    assert row and row[1] == row[2] == "4", run.stdout[-2000:]
    with h5py.File(output) as f:
        demos = list(f["data"].values())
        assert all(d.attrs["success"] and d.attrs["num_samples"] == 300 for d in demos)
    run = _script("eval.py", "--quiet", "--num_envs", "2", "--steps", "600", "--timeline", "", "--report", "")
    assert run.returncode == 0, run.stderr[-3000:]
    assert re.search(r"^\| success_rate +\| +1\.000 \|$", run.stdout, re.MULTILINE), run.stdout


def test_figures_a_run_does_not_define_read_n_a(tmp_path):
    table = stats_table({"global_clock": {"episodes_scored": 0, "mean_episode_length": float("nan"),
                                          "success_rate": float("nan")}})
    assert re.search(r"^\| success_rate +\| +n/a \|$", str(table), re.MULTILINE), table
    assert re.search(r"^\| mean_episode_length +\| +n/a \|$", str(table), re.MULTILINE), table
    path = tmp_path / "d.hdf5"
    with h5py.File(path, "w") as f:
        f.create_group("data").attrs["total"] = 0
    assert " n/a " in str(dataset_table([str(path)], has_success=False))
    assert " 0 " in str(dataset_table([str(path)], has_success=True))
