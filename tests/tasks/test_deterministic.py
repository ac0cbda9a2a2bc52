"""The contact self-check of deterministic physics (``tasks/deterministic.py``): a physics whose deterministic mode
drops its contacts (as MuJoCo-Warp's narrow phase does on a GPU, mujoco_warp #1635) is refused in one line with exit
status 2 before any env is built; push-cube and the SO-101 stack pass it and keep their cubes on the table with the
mode on; the probe runs once per process and settings; the start-up line says the check and the cost.

The probe loads MuJoCo-Warp's kernels in both modes (about 10 s of CPU here): the tests that run it are ``slow``;
the fast tier checks the verdict, the refusal through a script and the cache on the probe's figures alone."""

import warp as wp

import pytest
import torch

from isaaclab_suspend.tasks import deterministic
from isaaclab_suspend.tasks.deterministic import check_deterministic_contacts, cost_line, cost_on
from isaaclab_suspend.tasks.env_factory import make_env_cfg, open_env
from helpers import load_script

PUSH_CUBE = "Isaac-PushCube-Suspendable"
SO101_STACK = "IsaacContrib-Stack-Cube-SO101-Suspendable"


@pytest.fixture
def contacts_dropped(monkeypatch):
    """MuJoCo-Warp's collision stage returning zero contacts whenever Warp's deterministic mode is on (the
    failure of mujoco_warp #1635), with the probe's verdicts of this process forgotten."""
    from mujoco_warp._src import collision_driver

    collision = collision_driver.collision

    def dropping(m, d):
        collision(m, d)
        if wp.config.deterministic != wp.DeterministicMode.NOT_GUARANTEED:  # set by the solver around its step
            d.nacon.zero_()

    monkeypatch.setattr(collision_driver, "collision", dropping)
    monkeypatch.setattr(deterministic, "_VERDICTS", {})


def _refused_by_the_audit(capsys) -> str:
    """The audit script's one error line with the mode on (exit status 2, no traceback)."""
    status = load_script("audit_suspension").main(["--task", PUSH_CUBE, "--num_envs", "2", "--steps", "24",
                                                   "--deterministic", "on"])
    err = capsys.readouterr().err
    assert status == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert "Run with --deterministic off" in lines[0] and "mujoco_warp #1635" in lines[0]
    return lines[0]


@pytest.mark.parametrize("on, off, problem", [
    ((4, 0.1499), (4, 0.1499), None),
    ((4, 0.14995), (4, 0.1499), None),  # float noise
    ((0, -0.41), (4, 0.1499), "has 0 contacts with it (4 without) and ends 0.560 m lower"),
    ((4, 0.1), (4, 0.1499), "ends at 0.1000 m with it and at 0.1499 m without (4 and 4 contacts"),
    ((0, 0.1), (0, 0.1), None),  # no contacts either way: nothing to lose
])
def test_the_verdict(on, off, problem):
    probe = deterministic.ContactProbe(contacts_on=on[0], height_on=on[1], contacts_off=off[0], height_off=off[1])
    assert probe.problem is None if problem is None else problem in probe.problem


def test_a_probe_that_loses_contacts_is_refused_through_a_script(monkeypatch, capsys):
    """The probe's figures alone (no physics): the script ends in one line before the env is built."""
    monkeypatch.setattr(deterministic, "_VERDICTS", {})
    monkeypatch.setattr(deterministic, "_settle", lambda device, options, pipeline, dt, mode:
                        (4, 0.1499) if mode == wp.DeterministicMode.NOT_GUARANTEED else (0, -0.41))
    assert "has 0 contacts with it (4 without)" in _refused_by_the_audit(capsys)


@pytest.mark.slow
def test_a_physics_that_drops_contacts_is_refused_in_one_line(contacts_dropped, capsys):
    """The real probe on a MuJoCo-Warp that drops its contacts in the mode, via a script: exit 2, one line naming
    the failure (the run without the mode keeps its 4 contacts), ``--deterministic off`` and the upstream issue."""
    line = _refused_by_the_audit(capsys)
    assert "0 contacts with it (4 without)" in line and "m lower" in line


@pytest.mark.slow
@pytest.mark.parametrize("task, cubes", [(PUSH_CUBE, ("cube",)), (SO101_STACK, ("cube_1", "cube_2", "cube_3"))])
def test_contact_tasks_pass_with_the_mode_on(task, cubes, capsys):
    """The real env with the mode on: the check passes (MuJoCo's narrow phase for push-cube, Newton's collision
    pipeline for the SO-101 stack) and the cubes stay on the table for a few steps."""
    with open_env(task, 2, "cpu", deterministic="on", suspendable=True) as env:
        assert env.cfg.sim.physics.deterministic
        probe = check_deterministic_contacts(env.cfg, task)
        assert probe is not None and probe.problem is None and probe.contacts_on == probe.contacts_off > 0
        env.reset()
        start = {name: env.scene[name].data.root_pos_w[:, 2].clone() for name in cubes}
        for _ in range(10):
            env.step(torch.zeros(env.num_envs, env.action_manager.total_action_dim))
        for name in cubes:
            height = env.scene[name].data.root_pos_w[:, 2]
            assert torch.all((height - start[name]).abs() < 5e-3), f"{name} left the table: {height} from {start[name]}"
        line = cost_line(env.cfg)
    assert line.startswith("Deterministic physics on (RUN_TO_RUN): contact self-check passed (box on box: 4 contacts")
    assert "the step time on cpu (measured, docs/results.rst)" in line


def test_the_probe_runs_once_per_settings(monkeypatch):
    """A second env with the same device and solver settings reuses the verdict; other settings probe again; the
    mode off probes nothing."""
    runs = []
    monkeypatch.setattr(deterministic, "_VERDICTS", {})
    monkeypatch.setattr(deterministic, "_settle", lambda *args: runs.append(args) or (4, 0.1499))
    first = check_deterministic_contacts(make_env_cfg(PUSH_CUBE, 2, deterministic="on"), PUSH_CUBE)
    assert len(runs) == 2 and first.problem is None  # off, then on
    assert check_deterministic_contacts(make_env_cfg(PUSH_CUBE, 8, deterministic="on"), PUSH_CUBE) is first
    assert len(runs) == 2
    other = make_env_cfg(PUSH_CUBE, 2, deterministic="on")
    other.sim.physics.solver_cfg.cone = "elliptic"
    check_deterministic_contacts(other, PUSH_CUBE)
    assert len(runs) == 4 and runs[-1][1]["cone"] == "elliptic" and runs[-1][1]["disable_sensors"]
    off = make_env_cfg(PUSH_CUBE, 2, deterministic="off")
    assert check_deterministic_contacts(off, PUSH_CUBE) is None and cost_line(off) is None
    assert len(runs) == 4


def test_the_cost_on_a_device_without_a_figure():
    """Unmeasured on a CUDA device: the line says so and gives the published cost."""
    text = cost_on("cuda:0")
    assert text.startswith("unmeasured on cuda:0; published: 3.1x") and "64.8x" in text and "PR #1636" in text


@pytest.mark.slow
def test_eval_with_the_mode_on_says_its_check_and_cost(capsys):
    """A script's start-up line, once the env is open (Cartpole: MuJoCo-Warp, so the box is probed on its
    settings)."""
    status = load_script("eval").main(["--num_envs", "2", "--steps", "4", "--timeline", "", "--report", "",
                                       "--deterministic", "on"])
    out = capsys.readouterr().out
    assert status == 0, out[-2000:]
    [line] = [line for line in out.splitlines() if line.startswith("Deterministic physics on")]
    assert "contact self-check passed (box on box: 4 contacts" in line and "on cpu (measured" in line
