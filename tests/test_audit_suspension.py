"""scripts/audit_suspension.py end to end: passes a task that freezes exactly, fails one with a leaking part."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AUDIT = [sys.executable, os.path.join(ROOT, "scripts", "audit_suspension.py"), "--task", "Test-Stateful-PushCube",
         "--import", "stateful_task", "--num_envs", "2", "--steps", "16", "--suspend_at", "3", "--suspend_steps", "7"]


def _run(*extra: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join((ROOT, os.path.join(ROOT, "tests"))))
    return subprocess.run([*AUDIT, *extra], capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)


def test_audit_passes_a_task_of_another_package():
    """The task is registered with Isaac Lab's own ManagerBasedRLEnv and imports nothing of this project."""
    result = _run()
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "No divergence" in result.stdout
    assert "drawn after suspension by: nothing" in result.stdout


def test_audit_fails_and_names_a_leak():
    """With the actuators left unfrozen, the resumed env drifts: the audit names what and when, exits 1."""
    result = _run("--unfrozen", "actuators")
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    table = result.stdout[result.stdout.index("likely cause"):]
    assert "state.newton.state.joint_q" in table and "obs.policy.arm_pos" in table and "leak" in table
    first_rows = [line for line in table.splitlines() if "| 0 " in line or "|  0  |" in line]
    assert first_rows and all("|         3         |" in r or "|         4" in r or "leak" in r for r in first_rows)


@pytest.mark.parametrize("bad", [["--num_envs", "1"], ["--suspend_at", "20"], ["--unfrozen", "gearbox"]])
def test_audit_rejects_bad_input(bad):
    result = _run(*bad)
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    assert "Traceback" not in result.stderr
