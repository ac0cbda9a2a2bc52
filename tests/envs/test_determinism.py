"""Reproducible physics where it is needed: Isaac Lab 3.0's ``PhysicsCfg.deterministic`` is turned on for a CUDA device
by the audit and replay (``--deterministic auto``), on request elsewhere (recording and evaluation, for its cost);
the start-up report says which guarantee holds; and a suspension freezes an env's rows bit for bit whether the
physics is reproducible or not (marked ``cuda``: on a GPU in scripts/benchmarks/gpu_suite.py, where the physics is
not, without the switch)."""

import subprocess
import sys

import pytest
import torch

from isaaclab_suspend.datasets import make_replay_env_cfg
from isaaclab_suspend.tasks.audit import SuspensionAuditCfg
from isaaclab_suspend.tasks.env_factory import deterministic_physics, make_env_cfg, open_env
from helpers import ROOT

pytestmark = pytest.mark.slow  # reproducible physics through the scripts

TASK = "Isaac-PushCube-Suspendable"


@pytest.mark.parametrize("device, mode, on", [
    ("cuda:0", "auto", True), ("cuda", "auto", True), ("cpu", "auto", False),
    ("cuda:0", "off", False), ("cpu", "on", True), ("cuda:1", "on", True), ("cpu", "off", False),
])
def test_auto_turns_reproducible_physics_on_for_a_cuda_device(device, mode, on):
    assert deterministic_physics(device, mode) is on


def test_an_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="deterministic must be one of auto, on, off, got 'maybe'"):
        deterministic_physics("cpu", "maybe")


def test_the_cfgs_a_cuda_device_gets():
    """Built without a GPU: the cfg a CUDA device gets from replay (auto) and from a script's default."""
    assert make_replay_env_cfg(TASK, 2, "cuda:0").sim.physics.deterministic
    assert not make_replay_env_cfg(TASK, 2, "cpu").sim.physics.deterministic
    assert not make_replay_env_cfg(TASK, 2, "cuda:0", deterministic="off").sim.physics.deterministic
    assert make_env_cfg(TASK, 2, "cuda:0", deterministic="auto").sim.physics.deterministic
    assert not make_env_cfg(TASK, 2, "cuda:0").sim.physics.deterministic  # eval's default: off
    assert SuspensionAuditCfg().deterministic == "auto"


@pytest.mark.parametrize("script, default", [("eval", "off"), ("record", "off"), ("replay", "auto"),
                                             ("audit_suspension", "auto")])
def test_each_script_says_its_default(script, default):
    out = subprocess.run([sys.executable, f"{ROOT}/scripts/{script}.py", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and f"(default: {default})" in " ".join(out.stdout.split())
    bad = subprocess.run([sys.executable, f"{ROOT}/scripts/{script}.py", "--deterministic", "maybe"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "invalid choice: 'maybe'" in bad.stderr and "Traceback" not in bad.stderr


def test_audit_with_reproducible_physics_on_is_exact_and_reports_it():
    out = subprocess.run([sys.executable, f"{ROOT}/scripts/audit_suspension.py", "--task", TASK, "--num_envs", "2",
                          "--steps", "24", "--suspend_at", "3", "--suspend_steps", "7", "--deterministic", "on",
                          "--verbose", "env.episode_length_s=0.1", "env.events.nudge_cube.interval_range_s=[0.05,0.1]"],
                         capture_output=True, text=True)  # short episodes and nudges: a reset and a nudge run in
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]  # and after the suspension
    assert "Suspended envs frozen bit for bit on cpu; resume equivalence: bit-exact." in out.stdout


@pytest.mark.cuda
def test_a_suspended_env_keeps_every_bit_without_reproducible_physics(device):
    """While suspended, an env's physics state does not change by one bit, whatever the other envs do and whether
    the physics is reproducible (the switch off, as eval runs)."""
    with open_env(TASK, 4, device, suspendable=True, deterministic="off") as env:
        assert not env.cfg.sim.physics.deterministic
        env.reset()
        actions = torch.linspace(-1.0, 1.0, 4, device=env.device)[:, None]
        for _ in range(5):
            env.step(actions)
        env.suspend_envs([1])
        frozen = env.scene.get_state()
        for _ in range(30):
            env.step(-actions)
        now = env.scene.get_state()
        moved = False
        for kind, assets in frozen.items():
            for name, values in assets.items():
                for key, value in values.items():
                    assert torch.equal(value[1], now[kind][name][key][1]), f"{kind}/{name}/{key} of env 1 moved"
                    moved |= not torch.equal(value[0], now[kind][name][key][0])
        assert moved, "env 0 ran on"
        if device.startswith("cuda"):
            assert "resume equivalence: not guaranteed" in env.suspension_manager.guarantee
