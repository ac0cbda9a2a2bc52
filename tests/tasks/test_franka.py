"""Isaac Lab's own Franka tasks kitless on the converted Panda: its layout as Isaac Lab's cfgs address it, the
tasks' cfgs on local files, and the exact freeze of the Panda mid-grasp driven by the cube lift's planner."""

import math
import os

import pytest
import torch
from pxr import Usd, UsdGeom, UsdPhysics

from isaaclab_suspend.assets import robots
from isaaclab_suspend.assets.franka_panda import COLLIDER_VARIANTS, body_path
from isaaclab_suspend.tasks.embedded import planner_actions
from isaaclab_suspend.tasks.audit import SuspensionAuditCfg, audit_suspension
from isaaclab_suspend.suspension.state_discovery import discover
from isaaclab_suspend.tasks.physics_cfg import scale_contact_buffer
from isaaclab_suspend.tasks.env_factory import check_local_assets, make_env_cfg

pytestmark = pytest.mark.slow  # the Franka arm tasks

LIFT = "Isaac-Lift-Cube-Franka-IK-Abs-Suspendable"
PANDA_JOINTS = [f"panda_joint{i}" for i in range(1, 8)] + ["panda_finger_joint1", "panda_finger_joint2"]


def test_converted_panda_is_laid_out_as_isaaclab_addresses_it():
    """Bodies nested as Isaac Lab's lift cfg addresses them (``panda_link7/panda_hand/panda_rightfinger``: the
    URDF's fixed ``panda_link8`` merged, ``panda_hand_tcp`` dropped), Isaac Lab's joint names, drives and armature
    where ``FRANKA_PANDA_CFG`` takes the USD's, the fingers' mimic, the ``Colliders`` variants, licence beside."""
    path = robots.robot_usd(robots.FRANKA_PANDA)
    stage = Usd.Stage.Open(path)
    root = stage.GetDefaultPrim()
    bodies = {p.GetName(): p for p in stage.Traverse() if p.HasAPI(UsdPhysics.RigidBodyAPI)}
    assert set(bodies) == {*(f"panda_link{i}" for i in range(8)), "panda_hand", "panda_leftfinger", "panda_rightfinger"}
    hand = body_path(root.GetPath().pathString, "panda_hand")
    assert bodies["panda_hand"].GetPath() == hand and bodies["panda_rightfinger"].GetParent().GetPath() == hand
    assert not [p for p in stage.Traverse() if p.GetName() in ("panda_link8", "panda_hand_tcp")]
    # the hand sits 0.107 m down link7, turned -45 degrees about z, as in the URDF
    link7_to_hand = UsdGeom.Xformable(bodies["panda_hand"]).GetLocalTransformation()
    assert tuple(link7_to_hand.ExtractTranslation()) == pytest.approx((0.0, 0.0, 0.107), abs=1e-9)
    assert bodies["panda_link0"].HasAPI(UsdPhysics.ArticulationRootAPI)
    joints = {p.GetName(): p for p in stage.Traverse() if p.IsA(UsdPhysics.Joint)}
    assert set(PANDA_JOINTS) <= set(joints)
    for name in PANDA_JOINTS:
        for rel in (UsdPhysics.Joint(joints[name]).GetBody0Rel(), UsdPhysics.Joint(joints[name]).GetBody1Rel()):
            assert stage.GetPrimAtPath(rel.GetTargets()[0]).HasAPI(UsdPhysics.RigidBodyAPI)
    arm = UsdPhysics.DriveAPI.Get(joints["panda_joint4"], "angular")
    assert arm.GetStiffnessAttr().Get() == pytest.approx(400.0 * math.pi / 180, rel=1e-6)  # per degree
    assert arm.GetMaxForceAttr().Get() == 87.0
    assert UsdPhysics.DriveAPI.Get(joints["panda_finger_joint1"], "linear").GetStiffnessAttr().Get() == 400.0
    assert joints["panda_joint7"].GetAttribute("newton:armature").Get() == pytest.approx(0.1)
    assert not joints["panda_finger_joint2"].HasAPI(UsdPhysics.DriveAPI, "linear")  # the mimic follower
    assert joints["panda_finger_joint2"].GetRelationship("newton:mimicJoint").GetTargets()
    colliders = root.GetVariantSets().GetVariantSet("Colliders")
    assert colliders.GetVariantNames() == sorted(COLLIDER_VARIANTS)
    colliding = {}
    for variant in COLLIDER_VARIANTS:
        colliders.SetVariantSelection(variant)
        shapes = [p for p in stage.Traverse() if p.HasAPI(UsdPhysics.CollisionAPI)]
        colliding[variant] = {p.GetParent().GetName() for p in shapes}
        if variant == "primitives":
            assert all(p.IsA(UsdGeom.Cube) for p in shapes)
    assert colliding["primitives"] == colliding["convex_hulls"] == set(bodies)
    assert colliding["gripper_only"] == {"panda_hand", "panda_leftfinger", "panda_rightfinger"}
    assert "Apache License" in open(os.path.join(os.path.dirname(path), "LICENSE")).read()


@pytest.mark.parametrize("task", ["Isaac-Reach-Franka", "Isaac-Reach-Franka-OSC-Suspendable", "Isaac-Lift-Franka"])
def test_isaaclab_franka_tasks_open_on_local_files(task):
    """Isaac Lab's Franka cfgs (and their -Suspendable variants) come out on the converted Panda with the cfg's
    Colliders selection, every asset local, and the lift's contact buffer scaled to the envs built."""
    cfg = make_env_cfg(task, 2, suspendable=True)
    spawn = cfg.scene.robot.spawn
    assert spawn.usd_path == robots.FRANKA_PANDA.usd_path and spawn.variants == {"Colliders": "primitives"}
    check_local_assets(cfg, task)
    assert cfg.suspend.enabled and cfg.sim.physics.solver_cfg.update_data_interval == 1
    if task == "Isaac-Lift-Franka":  # Isaac Lab sizes 4,000,000 contacts for 4096 envs
        assert cfg.sim.physics.collision_cfg.rigid_contact_max == math.ceil(4_000_000 * 2 / 4096)
    minimal = make_env_cfg(task, 2, overrides=["presets=minimal"])
    assert minimal.scene.robot.spawn.variants == {"Colliders": "gripper_only"}


def test_contact_buffer_scaling_and_empty_placeholders():
    """Only a buffer sized for more envs shrinks; an empty placeholder (Isaac Lab's lift reset bank before it is
    filled for all envs) is not taken for a per-env tensor."""
    from isaaclab_newton.physics import NewtonCfg, NewtonCollisionPipelineCfg

    physics = NewtonCfg(collision_cfg=NewtonCollisionPipelineCfg(rigid_contact_max=4096))
    scale_contact_buffer(physics, 2.0)
    assert physics.collision_cfg.rigid_contact_max == 4096
    scale_contact_buffer(physics, 4 / 4096)
    assert physics.collision_cfg.rigid_contact_max == 4

    class Term:
        def __init__(self):
            self._buffer = torch.empty(0, 0)
            self._playing_row = torch.full((4,), -1)

    found, unknown = discover(Term(), "event.term", 4)
    assert [f.name for f in found] == ["event.term._playing_row"] and not unknown


def test_planner_driven_panda_freezes_exactly_while_resting_closing_and_holding():
    """Three suspensions on the Franka cube lift, each env driven by the task's planner from its own observation
    (8-action chunks on its own active steps, as a chunking policy runs it): env 1 with its cube
    resting on the table, env 0 while its fingers close on the cube and again holding it up, env 2 while its
    fingers close. Every env retraces
    the never-suspended run bit for bit (the finger contact sensors, the binary gripper, the FrameTransformer, the
    differential-IK term's state), and the phases are where the test says they are."""
    windows = [(1, 3, 6), (0, 30, 4), (0, 46, 5), (2, 50, 4)]  # (env, step, steps), from the reference timeline
    # the windows were read off the reference timeline of Isaac Lab's shared generator (the reset events draw the
    # cube's pose from it); per-env streams on an arm: test_isaaclab_reach_franka_with_its_observation_noise_...
    cfg = SuspensionAuditCfg(task=LIFT, num_envs=3, steps=60, env=windows[0][0], suspend_at=windows[0][1],
                             suspend_steps=windows[0][2], windows=windows[1:], per_env_random=False,
                             exercise_all=False)  # windows at grasp phases, no reset in 60 steps
    planner, seen, calls = planner_actions(LIFT, 8), {}, [0]

    def actions(obs, env):
        step = calls[0] % cfg.steps
        calls[0] += 1
        planner_obs = obs["planner"]
        for e, at, _ in windows:
            if step == at and (e, at) not in seen:  # the reference run's observation at the suspension
                seen[(e, at)] = (planner_obs["cube_pose_b"][e, 2].item(), planner_obs["gripper_pos"][e, 0].item(),
                                 planner_obs["joint_vel"][e, -1].item())
        return planner(obs, env)

    audit = audit_suspension(cfg, actions)
    assert audit.passed, str(audit)
    rest_z = seen[(1, 3)][0]
    assert rest_z < 0.285 and seen[(1, 3)][2] >= 0.0, seen  # the cube resting on the table, the fingers opening
    assert seen[(0, 30)][2] < -0.01 and seen[(2, 50)][2] < -0.01, seen  # the fingers moving shut
    assert seen[(0, 46)][0] > rest_z + 0.01 and seen[(0, 46)][1] < 0.03, seen  # held between the fingers, lifted


def test_isaaclab_reach_franka_with_its_observation_noise_audits_exact_on_per_env_streams():
    """Isaac Lab's own Reach task as it is (noise corrupts the policy group on every step): with per-env random
    streams a suspended-then-resumed env and the never-suspended ones retrace the reference bit for bit; with
    Isaac Lab's shared generator the suspension shifts everyone's draws and the audit says so."""
    # 0.1 s episodes (3 steps): env 1 resets inside the suspension, env 0 after its resume
    cfg = SuspensionAuditCfg(task="Isaac-Reach-Franka", num_envs=2, steps=16, suspend_at=3, suspend_steps=6,
                             overrides=["env.episode_length_s=0.1"])
    audit = audit_suspension(cfg)
    assert audit.passed, str(audit)
    shared = audit_suspension(cfg.replace(per_env_random=False))
    assert not shared.passed and {c for *_, c in shared.divergences} == {"shared random generator"}, str(shared)
