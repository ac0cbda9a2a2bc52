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
    assert [r["task"] for r in figures["first_open"]] == ["Isaac-Cartpole-Suspendable", "Isaac-PushCube-Suspendable"]
    assert all(r["open_s"] > 0 for r in figures["first_open"])
    assert {r["suspended"] for r in figures["step_time"]} == {"0%", "50%"}
    assert all(r["stock_ms"] > 0 and r["suspendable_ms"] > 0 for r in figures["step_time"])
    assert {r["schedule"] for r in figures["policy"]} == {"global_clock", "async"}
    assert all(r["ticks_per_s"] > 0 for r in figures["policy"])
    assert {r["manager"] for r in figures["recording"]} == {"Isaac Lab RecorderManager", "SuspendableRecorderManager"}
    assert figures["tests"]["passed"] and not figures["tests"]["failed"]
    assert list(figures["tests"]["files"].values()) == ["exit 0"]  # each file (here one node id) in its process
    # the compiled kernels beside the JSON, which a second run unpacks into Warp's cache
    assert (tmp_path / "warp_cache.tar.xz").stat().st_size > 0 and "Compiled kernels:" in result.stdout
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


def test_a_damaged_kernel_cache_is_skipped_in_one_line(tmp_path, monkeypatch):
    """The kernel cache of an earlier run is untrusted data: a damaged archive is named and skipped (the kernels
    compile), a good one is unpacked into Warp's cache."""
    from isaaclab_suspend.benchmarks import gpu_suite

    cache = tmp_path / "cache"
    (cache / "mod").mkdir(parents=True)
    (cache / "mod" / "kernel.o").write_bytes(b"\x7fELF")
    monkeypatch.setattr(gpu_suite, "kernel_cache_dir", lambda: str(cache))
    archive = tmp_path / "warp_cache.tar.xz"
    assert gpu_suite.save_kernel_cache(str(archive)) > 0
    (cache / "mod" / "kernel.o").unlink()
    assert "unpacked" in gpu_suite.restore_kernel_cache(str(archive))
    assert (cache / "mod" / "kernel.o").read_bytes() == b"\x7fELF"
    archive.write_bytes(b"not an archive")
    assert "not used" in gpu_suite.restore_kernel_cache(str(archive))
    assert "no kernel cache" in gpu_suite.restore_kernel_cache(str(tmp_path / "missing.tar.xz"))
