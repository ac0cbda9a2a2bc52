"""Isaac Lab's own SO-101 tasks kitless on local assets: the converted robot's layout, the asset map, the solver
setting suspension needs, and the exact freeze of an arm mid-grasp driven by the task's planner."""

import ctypes
import os

import h5py
import numpy as np
import pytest
import torch
from helpers import load_script
from pxr import Sdf, Usd, UsdPhysics

from isaaclab_suspend.assets import robots
from isaaclab_suspend.assets.asset_map import ASSET_MAP, local_counterpart
from isaaclab_suspend.tasks.embedded import make_default_model, planner_actions
from isaaclab_suspend.solver_notices import NOTICE
from isaaclab_suspend.tasks.audit import SuspensionAuditCfg, audit_suspension
from isaaclab_suspend.tasks.env_factory import check_local_assets, check_suspension_settings, make_env_cfg, open_env

STACK = "IsaacContrib-Stack-Cube-SO101-Suspendable"
LIFT = "IsaacContrib-Lift-Cube-SO101-IK-Abs-Suspendable"
SO101_JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]


def _paths(cfg) -> dict[str, str]:
    assets = vars(cfg.scene).items()
    return {name: a.spawn.usd_path for name, a in assets if hasattr(getattr(a, "spawn", None), "usd_path")}


def test_converted_so101_is_laid_out_as_isaaclab_addresses_it():
    """Bodies flat under the robot prim (``Robot/base``, ``Robot/gripper``), Isaac Lab's joint names with drives,
    the articulation root on the base fixed to the world, colliders on the gripper only, licence beside it."""
    path = robots.robot_usd(robots.SO101)
    stage = Usd.Stage.Open(path)
    root = stage.GetDefaultPrim()
    bodies = {p.GetName(): p for p in stage.Traverse() if p.HasAPI(UsdPhysics.RigidBodyAPI)}
    assert set(bodies) == {"base", "shoulder", "upper_arm", "lower_arm", "wrist", "gripper", "moving_jaw_so101_v1"}
    assert all(p.GetParent() == root for p in bodies.values())
    assert bodies["base"].HasAPI(UsdPhysics.ArticulationRootAPI)
    joints = {p.GetName(): p for p in stage.Traverse() if p.IsA(UsdPhysics.RevoluteJoint)}
    assert sorted(joints) == sorted(SO101_JOINTS)
    for joint in joints.values():
        stiffness = UsdPhysics.DriveAPI.Get(joint, "angular").GetStiffnessAttr().Get()
        assert stiffness == pytest.approx(17.8 * 3.141592653589793 / 180, rel=1e-6)  # per degree
        body1 = UsdPhysics.Joint(joint).GetBody1Rel().GetTargets()[0]
        assert stage.GetPrimAtPath(body1).HasAPI(UsdPhysics.RigidBodyAPI)
    assert any(p.IsA(UsdPhysics.FixedJoint) for p in bodies["base"].GetChildren())
    colliding = {p.GetParent().GetName() for p in stage.Traverse() if p.HasAPI(UsdPhysics.CollisionAPI)}
    assert colliding == {"gripper", "moving_jaw_so101_v1"}
    assert not [p for p in stage.Traverse() if p.GetTypeName() == "MjcActuator"]
    assert "Apache License" in open(os.path.join(os.path.dirname(path), "LICENSE")).read()


def test_regeneration_gives_the_same_layer(tmp_path, monkeypatch):
    """``python -m isaaclab_suspend.assets.robots`` writes what the install wrote (the binary layer's byte order
    may differ; its content may not)."""
    installed = robots.robot_usd(robots.SO101)
    monkeypatch.setattr(robots, "GENERATED_DIR", str(tmp_path))
    again = robots.generate(robots.SO101)
    assert again != installed
    assert Sdf.Layer.OpenAsAnonymous(again).ExportToString() == Sdf.Layer.OpenAsAnonymous(installed).ExportToString()


def test_asset_map_opens_isaaclab_stack_task_on_local_files():
    """Isaac Lab's stack cfg (PhysX by default, robot, table, blocks and ground on the asset server) comes out on
    Newton MuJoCo-Warp with local files, suspension enabled, the solver re-synced every step."""
    cfg = make_env_cfg(STACK, 2)
    paths = _paths(cfg)
    assert set(paths) >= {"robot", "table", "plane", "cube_1", "cube_2", "cube_3"}
    assert all(os.path.isfile(p) for p in paths.values()), paths
    assert paths["cube_2"].endswith("red_block.usda") and cfg.scene.robot.spawn.variants is None
    assert type(cfg.sim.physics.solver_cfg).__name__ == "MJWarpSolverCfg"
    assert cfg.suspend.enabled and cfg.sim.physics.solver_cfg.update_data_interval == 1
    # Isaac Lab seats its SO-101 turned 90 degrees about z; the converted base frame is turned back by the map
    assert cfg.scene.robot.init_state.rot == pytest.approx((0.0, 0.0, 0.0, 1.0), abs=1e-6)
    check_local_assets(cfg, STACK)
    # Isaac Lab's own task id opens the same way; stock, its solver setting stays
    stock = make_env_cfg("IsaacContrib-Stack-Cube-SO101-v0", 2)
    assert _paths(stock) == paths and stock.sim.physics.solver_cfg.update_data_interval == 2


def test_an_asset_without_local_counterpart_keeps_its_one_line_error():
    cfg = make_env_cfg("Isaac-Cartpole", 2)  # Isaac Lab's cartpole robot is not in the map
    with pytest.raises(ValueError, match=r"scene\.robot\.spawn\.usd_path from NVIDIA's asset server") as err:
        check_local_assets(cfg, "Isaac-Cartpole")
    assert "\n" not in str(err.value)
    assert local_counterpart("https://host/Isaac/Props/Blocks/green_block.usd")[1].endswith("green_block.usda")
    assert local_counterpart("https://host/Isaac/Robots/Unknown/robot.usd") is None
    assert len({row.server for row in ASSET_MAP}) == len(ASSET_MAP)


def test_a_solver_setting_suspension_cannot_honour_is_refused_before_the_env_is_built():
    cfg = make_env_cfg(STACK, 2, sim__physics__solver_cfg__update_data_interval=2)
    with pytest.raises(ValueError, match="update_data_interval == 1") as err:
        check_suspension_settings(cfg, STACK)
    assert "\n" not in str(err.value) and STACK in str(err.value)


@pytest.mark.slow  # the SO-101 lift run twice to its planner's success at step 53 (the grasp sets the windows)
def test_planner_driven_arm_freezes_exactly_while_resting_closing_and_holding(capfd):
    """Three suspensions on the SO-101 lift, each env driven by the task's planner from its own observation: env 0
    with its cube resting on the table, env 1 while its jaw closes on the cube, env 2 holding the cube up. Every
    env retraces the never-suspended run bit for bit (contacts, the binary gripper, the FrameTransformer, the IK
    term's state), and the phases are where the test says they are. Run quiet (as ``--quiet``): MuJoCo-Warp's
    linesearch notice, printed per world and solver iteration otherwise, is one line per env at most."""
    windows = {0: (4, 6), 1: (45, 6), 2: (50, 2)}  # env 2 lifts its cube to success at step 53: the run ends first
    # the windows were read off the reference timeline of Isaac Lab's shared generator (the reset events draw the
    # cube's pose from it); per-env streams on an arm: tasks/test_franka.py's Reach audit
    cfg = SuspensionAuditCfg(task=LIFT, num_envs=3, steps=53, env=0, suspend_at=windows[0][0],
                             suspend_steps=windows[0][1], windows=[(e, *w) for e, w in windows.items() if e],
                             per_env_random=False, exercise_all=False)  # windows at grasp phases, no reset
    planner, seen, calls = planner_actions(LIFT), {}, [0]

    def actions(obs, env):
        step = calls[0] % cfg.steps
        calls[0] += 1
        policy = obs["policy"]
        for e, (at, _) in windows.items():
            if step in (0, at) and (e, step) not in seen:  # the reference run's observation at the suspension
                seen[(e, step)] = (policy["cube_pose_b"][e, 2].item(), policy["gripper_pos"][e, 0].item(),
                                   policy["joint_vel"][e, -1].item(), policy["actions"][e, 7].item())
        return planner(obs, env)

    try:
        audit = audit_suspension(cfg, actions)
    finally:
        ctypes.CDLL(None).fflush(None)  # the notice is a native printf: libc's buffer into the capture
    assert audit.passed, str(audit)
    console = capfd.readouterr()
    notices = [line for line in (console.out + console.err).splitlines() if NOTICE in line]
    assert 1 <= len(notices) <= 2 and all(line.startswith("note: MuJoCo-Warp's linesearch") for line in notices), (
        f"{len(notices)} lines, e.g. {notices[:3]}")
    rest_z = seen[(0, 0)][0]
    assert abs(seen[(0, 4)][0] - rest_z) < 1e-3 and seen[(0, 4)][3] == 0.0  # resting cube, jaw commanded open
    assert seen[(1, 45)][3] == 1.0 and abs(seen[(1, 45)][2]) > 0.1  # the jaw moving shut
    assert seen[(2, 50)][0] > rest_z + 0.01 and seen[(2, 50)][1] < 1.0  # held between the jaws, lifted


@pytest.mark.slow  # the lift built twice, one env to its planner's lift (about 20 s)
def test_lift_contact_buffer_is_sized_to_the_scene_without_changing_the_physics():
    """The lift's MuJoCo-Warp contact buffer (96 per world against the stack cfg's 600, which its gradient kernel
    sweeps on the CPU) holds every contact: the planner's approach, grasp and lift retrace the 600-contact run
    bit for bit."""
    traces, jaw = [], []
    for nconmax in (600, None):
        planner = planner_actions(LIFT)
        cfg = make_env_cfg(LIFT, 1, "cpu")
        assert cfg.sim.physics.solver_cfg.nconmax == 96
        if nconmax:
            cfg.sim.physics.solver_cfg.nconmax = nconmax
        with open_env(LIFT, cfg=cfg) as env:
            obs, _ = env.reset(seed=3)
            rows = []
            for _ in range(56):  # lifted at step 53
                obs = env.step(planner(obs, env))[0]
                rows.append(torch.cat([v.flatten(1) for v in obs["policy"].values()], 1))
            jaw.append(obs["policy"]["actions"][0, 7].item())
        traces.append(torch.cat(rows))
    assert jaw == [1.0, 1.0]  # the jaw commanded shut: the grasp is in the traces
    assert torch.equal(traces[0], traces[1])


def _lift_obs(num: int, closing: bool) -> dict:
    """Planner observations of ``num`` envs: the cube 20 cm ahead on the table, the gripper open 10 cm above it
    (or, ``closing``, at the grasp pose with the jaw closing on the cube)."""
    cube = torch.tensor([0.2, 0.0, 0.015, 0.0, 0.0, 0.0, 1.0]).repeat(num, 1)
    cfg = make_default_model(LIFT, 16).cfg
    grasp = cube[:, :3] - torch.tensor(cfg.grasp_offset)
    eef = torch.cat((grasp + torch.tensor([0.0, 0.0, 0.0 if closing else 0.1]), cube[:, 3:]), dim=1)
    actions = torch.cat((eef, torch.full((num, 1), 1.0 if closing else 0.0)), dim=1)
    jaw = torch.full((num, 1), 0.8 if closing else 1.745)
    return {"policy": {"eef_pose_b": eef, "cube_pose_b": cube, "gripper_pos": jaw,
                       "joint_vel": torch.zeros(num, 6), "actions": actions}}


def test_planner_grasp_noise_aims_beside_the_cube_only_before_the_jaw_closes():
    """``grasp_noise`` (``--planner_cfg grasp_noise=S``): each call's plan aims at a grasp point offset horizontally
    with standard deviation S, so recorded demos show misses and recoveries; a jaw closing on the cube is left
    alone, and the default planner has no noise."""
    env_ids = torch.arange(256)
    torch.manual_seed(0)
    clean, noisy = make_default_model(LIFT, 16), make_default_model(LIFT, 16, ["grasp_noise=0.02"])
    assert clean.cfg.grasp_noise == 0.0 and noisy.cfg.grasp_noise == 0.02
    approach = _lift_obs(256, closing=False)
    assert torch.equal(clean(approach, env_ids), clean(approach, env_ids))  # no noise by default
    offset = noisy(approach, env_ids)[:, -1, :3] - clean(approach, env_ids)[:, -1, :3]  # where each plan ends
    assert offset[:, 2].abs().max() < 1e-6
    assert 0.015 < offset[:, :2].std() < 0.025, offset[:, :2].std()
    closing = _lift_obs(256, closing=True)
    assert torch.equal(noisy(closing, env_ids), clean(closing, env_ids))


def test_planner_overrides_are_checked():
    with pytest.raises(ValueError, match="has no field 'nope'"):
        make_default_model(LIFT, 16, ["nope=1"])
    with pytest.raises(ValueError, match="'grasp_noise' is float \\(0.0\\), got 'abc'"):
        make_default_model(LIFT, 16, ["grasp_noise=abc"])


def test_aliased_buffers_are_restored_once():
    """Two actuators of one articulation hold views of the same gain memory: a frozen row restored through both
    would get its snapshot added twice (garbage bits); it must come back exactly once."""
    from isaaclab_suspend.suspension.frozen_rows import FrozenRows

    gains = torch.tensor([[400.0, 17.8], [400.0, 17.8], [400.0, 17.8]])
    group = FrozenRows("actuators", 3, "cpu")
    group.add("arm._stiffness", lambda: gains)
    group.add("gripper._stiffness", lambda: gains)
    suspended = torch.tensor([True, False, False])
    group.capture(suspended)
    group.set_mask(suspended)
    gains.mul_(2.0)
    group.restore()
    assert torch.equal(gains, torch.tensor([[400.0, 17.8], [800.0, 35.6], [800.0, 35.6]]))


@pytest.mark.slow  # two whole camera episodes of the SO-101 lift recorded, then replayed re-rendering every frame
def test_camera_task_records_and_replays_pixel_exact(so101_camera_dataset, capsys):
    """record.py then replay.py --check_images on the SO-101 camera task (their ``main`` in the test process): the
    wrist and front frames (uint8, 96x128) re-render bit for bit, every state exact; the start-up report leaves
    nothing unclassified."""
    path = so101_camera_dataset
    with h5py.File(path) as f:
        demo = f["data/demo_0"]
        for camera in ("front_camera", "wrist_camera"):
            images = demo[f"images/{camera}"]
            assert images.dtype == np.uint8 and images.shape[1:] == (96, 128, 3) and images[()].std() > 0
    status = load_script("replay").main([path, "--check_images", "--quiet"])
    out = capsys.readouterr().out
    assert status == 0, out[-3000:]
    assert "largest state error 0 " in out, out[-3000:]
