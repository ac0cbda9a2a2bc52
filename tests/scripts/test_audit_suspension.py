"""scripts/audit_suspension.py end to end: passes a task that freezes exactly, fails one with a leaking part.

The task of another package is audited in a process of its own (the real entry point, ``--import`` of a module
on ``PYTHONPATH`` in a fresh interpreter); the other runs call the script's ``main(argv)`` in the test process."""

import os
import re
import subprocess
import sys

import gymnasium as gym
import pytest
from helpers import check_usage_errors, load_script

from isaaclab_suspend.tasks.audit import SuspensionAuditCfg, audit_suspension
from isaaclab_suspend.tasks.env_factory import check_local_assets, import_task_modules, make_env_cfg

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# 16 steps with env 0 suspended for 7 from step 3: longer than every delay and history of the stateful task
# (at most 3 steps), so a part left unfrozen shows after the resume; 0.1 s episodes (6 steps), so that env 1 resets
# inside the suspension and env 0 after its resume
SHORT = "env.episode_length_s=0.1"
ARGS = ["--task", "Test-Stateful-PushCube", "--import", "stateful_task", "--num_envs", "2", "--steps", "16",
        "--suspend_at", "3", "--suspend_steps", "7", SHORT]
NUDGE = "env.events.nudge_cube.interval_range_s=[0.05,0.1]"
"""Push-cube's nudge every 3 to 6 steps, so that it fires inside a 7-step suspension and after it."""


DEVICE_AUDITS = {
    # task id: modules that register it, overrides that make a reset (and a nudge) run inside the suspension and
    # after it, or None where a reset draws what per-env streams cannot route, so that a reset after a suspension
    # draws other numbers (only the freeze in the window is audited then). Adding a task is one line; a task not
    # registered here is skipped.
    "Isaac-Cartpole-Suspendable": ((), [SHORT]),
    "Isaac-PushCube-Suspendable": ((), [SHORT, NUDGE]),
    "IsaacContrib-Stack-Cube-SO101-v0": ((), [SHORT]),  # its cube poses from Python's random, seeded per env
    "Isaac-Lift-Franka": ((), None),  # its conditional reset draws one row for all envs
    "Isaac-Reach-Franka": ((), [SHORT]),
}
"""Tasks audited on ``--device`` (``scripts/benchmarks/gpu_suite.py`` runs them on a GPU)."""
SLOW_AUDITS = {"Isaac-Lift-Franka"}
"""Of those, the ones outside the fast tier: building the Franka lift twice takes some 45 s of CPU."""


@pytest.fixture(scope="module")
def audit():
    """audit_suspension.py's ``main`` in the test process."""
    return load_script("audit_suspension").main


def test_audit_passes_a_task_of_another_package():
    """The task is registered with Isaac Lab's own ManagerBasedRLEnv and imports nothing of this project."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join((ROOT, os.path.join(ROOT, "tests"))))
    result = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "audit_suspension.py"), *ARGS],
                            capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "No divergence" in result.stdout
    assert "drawn after suspension by: nothing" in result.stdout


def test_audit_fails_and_names_a_leak(audit, capsys):
    """With the actuators left unfrozen, the resumed env drifts: the audit names what and when, exits 1."""
    status, out = audit([*ARGS, "--unfrozen", "actuators"]), capsys.readouterr().out
    assert status == 1, out[-3000:]
    table = out[out.index("| env | quantity"):].splitlines()
    rows = [[c.strip() for c in line.split("|")[1:-1]] for line in table[1:] if line.startswith("|")]
    diverged = {r[1]: r for r in rows}
    for name in ("state.newton.state.joint_q", "obs.policy.arm_pos", "reward.arm_vel"):
        env, _, first_step, error, cause = diverged[name]
        # env 0 drifts from its first resumed step (its active step 3), and nothing drew randomness: a leak
        assert (env, first_step, cause) == ("0", "3", "leak") and float(error) > 0


def test_audit_passes_the_camera_task_and_names_uncompared_scratch(audit, capsys):
    """The camera sensor's intrinsics scratch (``wp.empty``, written only by ``set_intrinsic_matrices``) differs
    between the two runs from the start: it is named as not compared, and the images retrace bit for bit."""
    status, out = audit(["--task", "Isaac-PushCube-Camera-Suspendable", *ARGS[4:], NUDGE]), capsys.readouterr().out
    assert status == 0, out[-3000:]
    assert "No divergence" in out
    assert "Not compared: " in out and "scene_camera._intrinsic_pending" in out


def test_a_reset_after_a_suspension_counts_the_envs_own_steps():
    """Env 0, suspended for 6 steps, ends its 12-step episodes at global steps 18 and 30 (the reference: 12 and
    24). Its cube's reset term fires at most every 15 steps: in its own steps it skips the first episode end (12
    since the start) and fires at the second (24), as in the never-suspended run, not at 18 global steps; the
    event manager's stamps compare bit for bit in the env's own time across the reset."""
    cfg = SuspensionAuditCfg(task="Isaac-PushCube-Suspendable", num_envs=2, steps=30, suspend_at=3, suspend_steps=6,
                             overrides=["env.episode_length_s=0.2", NUDGE,
                                        "env.events.reset_cube.min_step_count_between_reset=15"],
                             exercise_all=False)  # the resets fall after the window, where this test needs them
    audit = audit_suspension(cfg)
    assert audit.passed, str(audit)
    # the gate is exercised: of the four resets after the suspension began, two skipped the cube's term
    assert audit.drawn_per_env["event.reset_cube"] == 2 and audit.drawn_per_env["event.reset_cart"] == 4, str(audit)


def test_an_interval_event_that_cannot_fire_in_the_window_fails_the_audit(audit, capsys):
    """Push-cube's nudge fires every 1-2 s (60-120 steps) and its episodes last 5 s: a 13-step suspension in 40 steps
    (the audit's numbers until it chose them) fires neither, and bit-exact is no pass: exit 1, both named."""
    status, out = audit(["--task", "Isaac-PushCube-Suspendable", "--num_envs", "2", "--steps", "40",
                         "--suspend_steps", "13", "--quiet"]), capsys.readouterr().out
    assert status == 1, out[-3000:]
    assert "No divergence" in out and "in what ran" in out
    assert "event.nudge_cube (0 and 0 times), reset (0 and 0 times)" in out
    line = out[out.index("Not audited, it never ran: "):]
    for missing in ("event.nudge_cube never ran inside env 0's suspension (steps 5-17)",
                    "event.nudge_cube never ran for env 0 after its resume (steps 18-39)",
                    "reset never ran inside env 0's suspension", "reset never ran for env 0 after its resume"):
        assert missing in line, line


@pytest.mark.slow  # push-cube run twice for 56 steps
def test_the_audit_chooses_steps_that_fire_every_interval_event_and_a_reset(audit, capsys):
    """A nudge every 0.3-0.35 s (18-21 steps, more than the 13-step suspension the audit used to make) and 0.4 s
    episodes (24 steps): left to choose, the audit suspends env 0 for 25 steps (the episode and one) and runs 26
    more, the nudge and a reset run inside the suspension and after it, and it exits 0."""
    status, out = audit(["--task", "Isaac-PushCube-Suspendable", "--num_envs", "2", "--quiet",
                         "env.events.nudge_cube.interval_range_s=[0.3,0.35]", "env.episode_length_s=0.4"]), \
        capsys.readouterr().out
    assert status == 0, out[-3000:]
    assert "env 0 suspended at step 5 for 25 steps, 2 envs, 56 steps" in out, out[-3000:]
    ran = out[out.index("Run inside the suspensions"):].splitlines()[0]
    counts = re.search(r"event\.nudge_cube \((\d+) and (\d+) times\), reset \((\d+) and (\d+) times\)", ran)
    assert counts and all(int(c) > 0 for c in counts.groups()), ran
    assert "Not audited" not in out


def test_audit_rejects_bad_input(capsys):
    """A suspension past the run's end and an unknown part: usage errors, before any env is built."""
    check_usage_errors(load_script("audit_suspension"), {
        ("--suspend_at", "20"): "(got env 0, step 20, steps 7)",
        ("--unfrozen", "gearbox"): "unknown unfrozen parts ['gearbox']",
    }, capsys, prefix=tuple(ARGS))


@pytest.mark.cuda
@pytest.mark.parametrize("task", [pytest.param(task, marks=pytest.mark.slow) if task in SLOW_AUDITS else task
                                  for task in DEVICE_AUDITS])
def test_audit_passes_on_the_device(task, device):
    """The audit in-process on ``--device``: a suspended-then-resumed env retraces the never-suspended run."""
    try:
        import_task_modules(DEVICE_AUDITS[task][0])
    except ValueError as err:
        pytest.skip(str(err))
    if task not in gym.registry:
        pytest.skip(f"{task} is not registered here")
    try:
        check_local_assets(make_env_cfg(task, 2, device), task)
    except ValueError as err:
        pytest.skip(f"its assets cannot be opened here: {err}")
    overrides = DEVICE_AUDITS[task][1]
    cfg = SuspensionAuditCfg(task=task, num_envs=2, steps=16, suspend_at=3, suspend_steps=7, device=device,
                             overrides=overrides or [], exercise_all=overrides is not None)
    audit = audit_suspension(cfg)
    assert audit.passed, str(audit)
