"""scripts/benchmarks/gpu_suite.py at its CPU size (``--device cpu --small``), end to end: every part runs in its
own process, the JSON holds each part's figures and the goals, and bad input exits 2 in one line."""

import hashlib
import json
import os
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.slow  # the benchmark suite end to end, each part in its own process

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SUITE = [sys.executable, os.path.join(ROOT, "scripts", "benchmarks", "gpu_suite.py")]


def test_small_suite_runs_every_part_on_the_cpu(tmp_path):
    out = tmp_path / "suite.json"
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}  # this machine's record of the caches saved
    result = subprocess.run([*SUITE, "--device", "cpu", "--small", "--out", str(out)], capture_output=True, text=True,
                            cwd=ROOT, timeout=600, env=env)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    figures = json.loads(out.read_text())
    assert figures["parts"] == {"syncs": "ok", "timing": "ok", "recording": "ok", "determinism": "ok", "tests": "ok"}
    assert figures["versions"]["device"] == "cpu" and figures["versions"]["warp-lang"]
    syncs = {(r["task"], r["what"]): r for r in figures["syncs"]}
    for task in ("Isaac-Cartpole-Suspendable", "Isaac-PushCube-Suspendable"):
        stock = syncs[task, "env.step stock"]
        # Isaac Lab's own step reads the reset ids back (nonzero, len): counted, and named where it happens
        assert stock["syncs_per_step"] > 0 and any("manager_based_rl_env.py" in s for s in stock["sites"])
        assert syncs[task, "env.step ours, half suspended"]["syncs_per_step"] == stock["syncs_per_step"]
        quiet = syncs[task, "act+observe global_clock, half retired"]
        assert quiet["quiet_steps"] > 0 and quiet["syncs_per_quiet_step"] == 0 and quiet["syncs_per_eventful_step"] > 0
    assert [r["task"] for r in figures["first_open"]] == ["Isaac-Cartpole-Suspendable", "Isaac-PushCube-Suspendable"]
    assert all(r["open_s"] > 0 for r in figures["first_open"])
    assert {r["suspended"] for r in figures["step_time"]} == {"0%", "50%"}
    assert all(r["stock_ms"] > 0 and r["suspendable_ms"] > 0 for r in figures["step_time"])
    assert {r["schedule"] for r in figures["policy"]} == {"global_clock", "async"}
    assert all(r["ticks_per_s"] > 0 for r in figures["policy"])
    # the global_clock loop step split: host clock only on the CPU (CUDA events on a GPU), phases that add up
    [split] = figures["loop_split"]
    assert split["clock"] == "host" and split["num_envs"] == 4
    phases = [split[k] for k in ("act_ms", "model_ms", "env_step_ms", "observe_ms")]
    assert all(ms > 0 for ms in phases) and split["env_step_ms"] == max(phases)
    assert abs(sum(phases) + split["rest_ms"] - split["loop_ms"]) < 1e-6 and split["rest_ms"] < split["loop_ms"]
    [loop] = [r for r in figures["policy"] if r["schedule"] == "global_clock"]
    assert abs(split["loop_ms"] - 1e3 / loop["steps_per_s"]) < 1e-6  # the same run
    # the camera task's eval loop with the observation demand off and on
    [demand] = figures["observation_demand"]
    assert demand["task"] == "Isaac-PushCube-Camera-Suspendable" and demand["num_envs"] == 4
    assert demand["off_env_steps_per_s"] > 0 and demand["on_over_off"] > 0 and "on_over_off" in result.stdout
    # the 16384-env row needs a CUDA device: skipped with the reason, not an error
    assert figures["skipped"] == [{"part": "timing", "what": "step_time at 16384 envs", "reason": "CUDA devices only"}]
    assert "not measured (timing): step_time at 16384 envs: CUDA devices only" in result.stdout
    # reproducible physics on / off on push-cube and an arm task: it runs, and says it measures nothing on a CPU
    determinism = {r["task"]: r for r in figures["determinism"]}
    assert set(determinism) == {"Isaac-PushCube-Suspendable", "IsaacContrib-Stack-Cube-SO101-Suspendable"}
    for row in determinism.values():
        assert row["num_envs"] == 4 and row["off_ms"] > 0 and row["on_ms"] > 0
        assert "CPU: measures nothing" in row["note"]
        assert abs(row["on_over_off"] - row["on_ms"] / row["off_ms"]) < 1e-9
        assert row["self_check"].startswith("passed: 4/4 contacts")  # the contact self-check with the mode on
    assert "on_over_off" in result.stdout and "CPU: measures nothing" in result.stdout
    assert {r["manager"] for r in figures["recording"]} == {"Isaac Lab RecorderManager", "SuspendableRecorderManager"}
    # push-cube recorded end to end: episodes of 12 steps, every env's first (cut short) dropped, the rest written
    [e2e] = figures["recording_e2e"]
    assert e2e["task"] == "Isaac-PushCube-Suspendable" and e2e["num_envs"] == 4 and e2e["episode_steps"] == 12
    assert e2e["unrecorded_env_steps_per_s"] > 0 and e2e["recorded_env_steps_per_s"] > 0 and e2e["close_s"] >= 0
    assert 0 < e2e["recorded_over_unrecorded"] < 10
    assert e2e["episodes_ended"] >= e2e["episodes_to_write"] + 4 and e2e["episodes_to_write"] >= 4
    assert e2e["episodes_written"] == e2e["episodes_to_write"]
    assert figures["tests"]["passed"] and not figures["tests"]["failed"]
    assert list(figures["tests"]["files"].values()) == ["exit 0"]  # each file (here one node id) in its process
    # the compiled kernels beside the JSON, with their hash in it and in this machine's record (which lets a
    # second run restore them); none was there to restore
    archive = tmp_path / "warp_cache.tar.xz"
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    assert figures["kernel_cache"] == {"restored": f"no kernel cache at {archive}: kernels compile on first use",
                                       "archive": str(archive), "sha256": digest}
    assert f"Compiled kernels: {archive} (" in result.stdout and f"sha256 {digest}" in result.stdout
    assert json.loads((tmp_path / "state" / "isaaclab_suspend" / "kernel_caches.json").read_text()) == {
        "sha256": [digest]}
    assert figures["goals"] and all(figures["goals"].values())
    assert "goal met: 0 syncs per quiet act+observe" in result.stdout
    assert figures["goals"]["no episode lost: every ended episode to write is in the file after close"]


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


def test_goals_name_the_loop_rate_against_the_bare_step():
    """The chunking loop's goal compares its env-steps/s with the bare stock step's at 4096 envs (0.9)."""
    from isaaclab_suspend.benchmarks.gpu_suite import goals

    def figures(loop_rate):
        return {"step_time": [{"num_envs": 4096, "suspended": "0%", "stock_ms": 4.096, "stock_over_ours": 1.0}],
                "policy": [{"num_envs": 4096, "schedule": "global_clock", "env_steps_per_s": loop_rate},
                           {"num_envs": 4096, "schedule": "async", "env_steps_per_s": 1.0}]}

    name = "chunking loop global_clock >= 0.9 of the bare stock step rate at 4096 envs"
    assert goals(figures(0.91e6)) == {name: True}  # bare: 4096 envs / 4.096 ms = 1 M env-steps/s
    assert goals(figures(0.66e6)) == {name: False}


def test_goals_name_the_recording_rate_and_lost_episodes():
    """Recorded over unrecorded env-steps/s, end to end, >= 0.8 at 4096 envs; every episode to write written."""
    from isaaclab_suspend.benchmarks.gpu_suite import goals

    def figures(ratio, written):
        return {"recording_e2e": [{"num_envs": 1024, "recorded_over_unrecorded": 0.5, "episodes_to_write": 9,
                                   "episodes_written": 9},
                                  {"num_envs": 4096, "recorded_over_unrecorded": ratio, "episodes_to_write": 9,
                                   "episodes_written": written}]}

    rate = "recorded/unrecorded env-steps/s >= 0.8 at 4096 envs, end to end"
    lost = "no episode lost: every ended episode to write is in the file after close"
    assert goals(figures(0.85, 9)) == {rate: True, lost: True}
    assert goals(figures(0.7, 8)) == {rate: False, lost: False}


def test_a_row_without_time_left_is_skipped_with_the_reason():
    """A part skips a row that may outlast its time-out (the kill would take every figure of the part with it):
    here every row of ``determinism`` (push-cube and the SO-101 stack), its deadline past, without opening an env."""
    from isaaclab_suspend.benchmarks.gpu_suite import DETERMINISM_TASKS, SIZES, linear_estimate, part_determinism

    figures = part_determinism("cpu", {**SIZES["small"], "deadline": time.monotonic()}, ROOT)
    assert figures["determinism"] == []
    assert [s["what"] for s in figures["skipped"]] == [f"determinism {task} at 4 envs" for task in DETERMINISM_TASKS]
    assert all("left before the part's time-out" in s["reason"] for s in figures["skipped"])
    assert linear_estimate({1024: 10.0, 64: 1.0}, 4096) == 40.0 and linear_estimate({}, 4096) == 0.0
