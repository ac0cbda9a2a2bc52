"""Bringing your own task (docs/your_task.rst): a stock Isaac Lab task whose assets are on NVIDIA's asset server is
refused in one line with what to do (also under gym's id ``Isaac-Cartpole-v0``); the doc's worked example
(docs/examples/my_cartpole.py: a cfg subclass on local USD assets, a -Suspendable variant, a chunk model of its own)
registers, passes the audit, evaluates, and runs through eval.py and record.py with ``--import``, and with Isaac Lab's
cfg overrides, which the recording keeps and its replay applies.

The scripts run in the test process through their ``main(argv)``; ``--import my_cartpole`` finds the example on
``sys.path`` as it would on ``PYTHONPATH``."""

import json
import math
import os
import re

import h5py
import pytest

from helpers import ROOT, load_script

pytestmark = pytest.mark.slow  # the docs' worked example through the audit and the scripts

EXAMPLES = os.path.join(ROOT, "docs", "examples")


@pytest.fixture
def examples_on_path(monkeypatch):
    """docs/examples importable, as ``PYTHONPATH=docs/examples`` makes it for the scripts."""
    monkeypatch.syspath_prepend(EXAMPLES)


@pytest.mark.parametrize("task", ["Isaac-Cartpole", "Isaac-Cartpole-v0"])  # the id with gym's version suffix too
def test_stock_task_on_the_asset_server_exits_2_with_one_line(task, capfd):
    status = load_script("audit_suspension").main(["--task", task, "--import", "isaaclab_tasks"])
    out, err = capfd.readouterr()  # capfd: Isaac Lab's own log lines count too
    assert status == 2, out[-2000:] + err[-3000:]
    assert "Traceback" not in err and "No module named" not in err, err[-3000:]
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1, err[-3000:]
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


def test_the_docs_example_audits_bit_exact(examples_on_path, capfd):
    # 2 envs (the audit's least), 0.2 s episodes (12 steps) and the steps the audit chooses for them: env 0
    # suspended at step 5 for 13 steps, in which env 1 resets, then 14 steps, in which env 0 resets
    status = load_script("audit_suspension").main(["--task", "MyCartpole-Suspendable", "--import", "my_cartpole",
                                                   "--num_envs", "2", "--quiet", "env.episode_length_s=0.2"])
    out, err = capfd.readouterr()
    assert status == 0, out[-3000:] + err[-2000:]
    # --quiet: the audit's own report, without Isaac Lab's set-up output
    assert "Parsing configuration" not in out and "Active Observation Terms" not in out, out


def test_the_docs_example_evaluates_with_its_own_chunk_model(examples_on_path):
    import my_cartpole

    # 400 steps: 3 s episodes (180 steps) after a desynchronised first one of up to 180 steps, so every env ends
    # one whole (scored) episode; 4 envs are enough for the suspensions and the scored episodes
    figures = my_cartpole.evaluate(num_envs=4, steps=400)
    assert figures["inference_calls"] == math.ceil(400 / 16)  # the global clock's count
    assert figures["suspended_env_steps"] > 0  # envs reset mid-chunk waited for the next tick
    # each env ends its desynchronised first episode and at least one whole one (scored); every scored episode
    # reaches its time-out, which the variant calls success
    assert figures["episodes_scored"] >= 4 and figures["success_rate"] == 1.0
    assert figures["mean_episode_length"] == 180.0


def test_the_docs_example_runs_through_eval_and_record_with_import(examples_on_path, tmp_path, capsys):
    common = ["--task", "MyCartpole-Suspendable", "--import", "my_cartpole", "--num_envs", "2", "--quiet"]
    # 32 steps, H = 16: two calls of the global clock
    status = load_script("eval").main([*common, "--steps", "32", "--timeline", "", "--report", ""])
    out = capsys.readouterr().out
    assert status == 0, out[-2000:]
    assert "MyCartpole-Suspendable, embedded model: 2 envs, 32 steps, H = 16" in out, out
    assert re.search(r"^\| inference_calls +\| +2 \|$", out, re.MULTILINE), out
    output = tmp_path / "my_cartpole.hdf5"
    overrides = ["env.episode_length_s=1.5", "env.decimation=4"]  # Isaac Lab's overrides, as its scripts take them
    status = load_script("record").main([*common, "--episodes", "2", "--output", str(output), *overrides])
    assert status == 0, capsys.readouterr().out[-2000:]
    with h5py.File(output) as f:  # 1.5 s episodes of 1/30 s steps (the variant's: 3 s of 1/60 s), each reaching its
        demos = list(f["data"].values())  # time-out (its success)
        assert [d.attrs["num_samples"] for d in demos] == [45, 45] and all(d.attrs["success"] for d in demos)
        assert json.loads(f["data"].attrs["env_args"])["cfg_overrides"] == overrides
    # the replay builds the env with the recorded overrides: with 2 physics steps per env step instead of 4 it
    # would not reproduce a single state
    capsys.readouterr()
    status = load_script("replay").main([str(output), "--import", "my_cartpole", "--quiet"])
    out = capsys.readouterr().out
    assert status == 0 and "2 demos replayed in 2 envs; largest state error 0 " in out, out
