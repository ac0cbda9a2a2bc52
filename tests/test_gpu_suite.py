"""scripts/benchmarks/gpu_suite.py at its CPU size (``--device cpu --small``), end to end: every part runs in its
own process, the JSON holds each part's figures and the goals, and bad input exits 2 in one line."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUITE = [sys.executable, os.path.join(ROOT, "scripts", "benchmarks", "gpu_suite.py")]


def test_small_suite_runs_every_part_on_the_cpu(tmp_path):
    out = tmp_path / "suite.json"
    result = subprocess.run([*SUITE, "--device", "cpu", "--small", "--out", str(out)], capture_output=True, text=True,
                            cwd=ROOT, timeout=600)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    figures = json.loads(out.read_text())
    assert figures["parts"] == {"syncs": "ok", "timing": "ok", "tests": "ok", "recording": "ok"}
    assert figures["versions"]["device"] == "cpu" and figures["versions"]["warp-lang"]
    syncs = {(r["task"], r["what"]): r for r in figures["syncs"]}
    for task in ("Isaac-Cartpole-Suspendable", "Isaac-PushCube-Suspendable"):
        stock = syncs[task, "env.step stock"]
        # Isaac Lab's own step reads the reset ids back (nonzero, len): counted, and named where it happens
        assert stock["syncs_per_step"] > 0 and any("manager_based_rl_env.py" in s for s in stock["sites"])
        assert syncs[task, "env.step ours, half suspended"]["syncs_per_step"] == stock["syncs_per_step"]
        quiet = syncs[task, "act+observe global_clock, half retired"]
        assert quiet["quiet_steps"] > 0 and quiet["syncs_per_quiet_step"] == 0 and quiet["syncs_per_eventful_step"] > 0
    assert {r["suspended"] for r in figures["step_time"]} == {"0%", "50%"}
    assert all(r["stock_ms"] > 0 and r["suspendable_ms"] > 0 for r in figures["step_time"])
    assert {r["schedule"] for r in figures["policy"]} == {"global_clock", "async"}
    assert all(r["ticks_per_s"] > 0 for r in figures["policy"])
    assert {r["manager"] for r in figures["recording"]} == {"Isaac Lab RecorderManager", "SuspendableRecorderManager"}
    assert figures["tests"]["passed"] and not figures["tests"]["failed"]
    assert figures["goals"] and all(figures["goals"].values())
    assert "goal met: 0 syncs per quiet act+observe" in result.stdout


def test_unknown_part_exits_2_in_one_line():
    result = subprocess.run([*SUITE, "--device", "cpu", "--parts", "syncs,warp"], capture_output=True, text=True,
                            cwd=ROOT, timeout=120)
    assert result.returncode == 2 and "unknown parts ['warp']" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_part_past_its_time_out_is_killed_and_named(tmp_path):
    """A part gets at most what is left of ``--budget_s``: past it the part's process group is killed, the JSON
    says so, the parts after it are not run, and the suite exits 1."""
    out = tmp_path / "suite.json"
    result = subprocess.run([*SUITE, "--device", "cpu", "--small", "--parts", "syncs,tests", "--budget_s", "11",
                             "--out", str(out)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-2000:]
    parts = json.loads(out.read_text())["parts"]
    assert parts == {"syncs": "timed out after 11 s", "tests": "not run: budget spent"}
