"""Bringing your own task (docs/your_task.rst): a stock Isaac Lab task whose assets are on NVIDIA's asset server is
refused in one line with what to do (also under gym's id ``Isaac-Cartpole-v0``); the doc's worked example
(docs/examples/my_cartpole.py: a cfg subclass on local USD assets, a -Suspendable variant, a chunk model of its own)
registers, passes the audit, evaluates, and runs through eval.py and record.py with ``--import``, and with Isaac Lab's
cfg overrides, which the recording keeps and its replay applies."""

import json
import math
import os
import re
import subprocess
import sys

import h5py
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "docs", "examples")
AUDIT = os.path.join(ROOT, "scripts", "audit_suspension.py")


def _run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, EXAMPLES, os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("task", ["Isaac-Cartpole", "Isaac-Cartpole-v0"])  # the id with gym's version suffix too
def test_stock_task_on_the_asset_server_exits_2_with_one_line(task):
    run = _run(AUDIT, "--task", task, "--import", "isaaclab_tasks")
    assert run.returncode == 2, run.stdout[-2000:] + run.stderr[-3000:]
    assert "Traceback" not in run.stderr and "No module named" not in run.stderr, run.stderr[-3000:]
    errors = [line for line in run.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1, run.stderr[-3000:]
    # the ground plane has a local counterpart (isaaclab_suspend.assets.asset_map); Isaac Lab's cartpole has none
    assert "Task 'Isaac-Cartpole' loads scene.robot.spawn.usd_path from NVIDIA's asset server" in errors[0]
    assert "docs/your_task.rst" in errors[0]


def test_a_missing_local_asset_is_named_before_the_env_is_built(tmp_path):
    from isaaclab_suspend.tasks.env_factory import check_local_assets, make_env_cfg

    cfg = make_env_cfg("Isaac-Cartpole-Suspendable", 2)
    check_local_assets(cfg, "Isaac-Cartpole-Suspendable")  # the project's own assets are local
    cfg.scene.robot.spawn.usd_path = str(tmp_path / "nope.usda")
    with pytest.raises(ValueError, match=r"scene.robot.spawn.usd_path = '.*nope.usda' does not exist"):
        check_local_assets(cfg, "Isaac-Cartpole-Suspendable")


def test_the_docs_example_audits_bit_exact():
    run = _run(AUDIT, "--task", "MyCartpole-Suspendable", "--import", "my_cartpole", "--num_envs", "4", "--quiet")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    # --quiet: the audit's own report, without Isaac Lab's set-up output
    assert "Parsing configuration" not in run.stdout and "Active Observation Terms" not in run.stdout, run.stdout


def test_the_docs_example_evaluates_with_its_own_chunk_model():
    sys.path.insert(0, EXAMPLES)
    try:
        import my_cartpole
    finally:
        sys.path.remove(EXAMPLES)
    figures = my_cartpole.evaluate(num_envs=8, steps=400)
    assert figures["inference_calls"] == math.ceil(400 / 16)  # the global clock's count
    assert figures["suspended_env_steps"] > 0  # envs reset mid-chunk waited for the next tick
    # 3 s episodes (180 steps): each env ends its desynchronised first episode and at least one whole one (scored);
    # every scored episode reaches its time-out, which the variant calls success
    assert figures["episodes_scored"] >= 8 and figures["success_rate"] == 1.0
    assert figures["mean_episode_length"] == 180.0


def test_the_docs_example_runs_through_eval_and_record_with_import(tmp_path):
    common = ("--task", "MyCartpole-Suspendable", "--import", "my_cartpole", "--num_envs", "2", "--quiet")
    run = _run(os.path.join(ROOT, "scripts", "eval.py"), *common, "--steps", "32", "--timeline", "")
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "MyCartpole-Suspendable, embedded model: 2 envs, 32 steps, H = 16" in run.stdout, run.stdout
    assert re.search(r"^\| inference_calls +\| +2 \|$", run.stdout, re.MULTILINE), run.stdout
    output = tmp_path / "my_cartpole.hdf5"
    overrides = ["env.episode_length_s=1.5", "env.decimation=4"]  # Isaac Lab's overrides, as its scripts take them
    run = _run(os.path.join(ROOT, "scripts", "record.py"), *common, "--episodes", "2", "--output", str(output),
               *overrides)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    with h5py.File(output) as f:  # 1.5 s episodes of 1/30 s steps (the variant's: 3 s of 1/60 s), each reaching its
        demos = list(f["data"].values())  # time-out (its success)
        assert [d.attrs["num_samples"] for d in demos] == [45, 45] and all(d.attrs["success"] for d in demos)
        assert json.loads(f["data"].attrs["env_args"])["cfg_overrides"] == overrides
    # the replay builds the env with the recorded overrides: with 2 physics steps per env step instead of 4 it
    # would not reproduce a single state
    run = _run(os.path.join(ROOT, "scripts", "replay.py"), str(output), "--import", "my_cartpole", "--quiet")
    assert run.returncode == 0 and "2 demos replayed in 2 envs; largest state error 0 " in run.stdout, run.stdout
