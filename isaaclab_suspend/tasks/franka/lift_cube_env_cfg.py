"""Franka cube lift: Isaac Lab's ``Isaac-Lift-Franka`` scene and MDP, evaluated on one cube with a pose-IK arm.

A subclass of Isaac Lab's ``FrankaLiftEnvCfg`` (its scene with the finger contact sensors, its reset bank, rewards
and terminations), not a copy. It takes Isaac Lab's own evaluation settings (``play_mode``: full gravity, no
observation noise, a small reset bank, the datasheet gripper speed) and then: the task's 5 cm ``cube`` object
resting on the table (no spawn-in-hand starts, a random yaw), Isaac Lab's absolute pose-IK arm action and binary
gripper action (as its ``IK-Abs`` lift variants: 8 actions), gravity compensation for the IK-held arm, an
end-effector ``FrameTransformer``, a ``planner`` observation group (the end effector's and the cube's poses in the
base frame, the joints; the end effector twice, from the body state and from the ``FrameTransformer``), a ``success`` termination when the cube is 10 cm up, and a 6 s episode.
"""

from __future__ import annotations

from isaaclab_newton.sim.schemas import MujocoRigidBodyCfg
from isaaclab_physx.sim.schemas import PhysxRigidBodyCfg

from isaaclab.controllers.differential_ik_cfg import DifferentialIKControllerCfg
from isaaclab.envs import mdp as envs_mdp
from isaaclab.envs.mdp.actions.actions_cfg import DifferentialInverseKinematicsActionCfg
from isaaclab.managers import ObservationGroupCfg as ObsGroup
from isaaclab.managers import ObservationTermCfg as ObsTerm
from isaaclab.managers import SceneEntityCfg
from isaaclab.managers import TerminationTermCfg as DoneTerm
from isaaclab.sensors import FrameTransformerCfg
from isaaclab.sensors.frame_transformer.frame_transformer_cfg import OffsetCfg
from isaaclab.utils import configclass

from isaaclab_tasks.contrib.stack import mdp as stack_mdp
from isaaclab_tasks.core.lift.config.franka.franka_env_cfg import FrankaLiftEnvCfg
from isaaclab_tasks.core.lift.lift_env_cfg import ObjectCfg

from ...suspension.suspend_cfg import SuspendCfg
from ..so101 import mdp
from . import mdp as franka_mdp

TCP_OFFSET = (0.0, 0.0, 0.107)
"""The IK-controlled frame in ``panda_hand``'s frame (Isaac Lab's Franka IK offset): between the fingertips [m]."""
CUBE_REST_Z = 0.255 + 0.025
"""The cube's centre resting on the table top (0.255 m) [m]."""
LIFT_HEIGHT = CUBE_REST_Z + 0.1
"""Success: the cube's centre this high above the env origin [m]."""


@configclass
class FrankaLiftCubeActionsCfg:
    """Absolute end-effector pose in the base frame ``[pos(3), quat_xyzw(4)]`` and a binary gripper (< 0 closes)."""

    arm_action = DifferentialInverseKinematicsActionCfg(
        asset_name="robot",
        joint_names=["panda_joint.*"],
        body_name="panda_hand",
        controller=DifferentialIKControllerCfg(command_type="pose", use_relative_mode=False, ik_method="dls"),
        body_offset=DifferentialInverseKinematicsActionCfg.OffsetCfg(pos=TCP_OFFSET),
    )
    gripper_action = envs_mdp.BinaryJointPositionActionCfg(
        asset_name="robot",
        joint_names=["panda_finger_joint.*"],
        open_command_expr={"panda_finger_joint.*": 0.04},
        close_command_expr={"panda_finger_joint.*": 0.0},
    )


@configclass
class PlannerObsCfg(ObsGroup):
    """What the scripted planner reads (terms kept apart, no noise)."""

    eef_pose_b = ObsTerm(
        func=franka_mdp.body_frame_pose_in_base,
        params={"asset_cfg": SceneEntityCfg("robot", body_names="panda_hand"), "offset": TCP_OFFSET},
    )
    eef_frame_b = ObsTerm(func=stack_mdp.ee_frame_pose_in_base_frame)
    cube_pose_b = ObsTerm(func=mdp.object_pose_in_base, params={"object_cfg": SceneEntityCfg("object")})
    gripper_pos = ObsTerm(func=envs_mdp.joint_pos, params={"asset_cfg": SceneEntityCfg("robot", joint_names="panda_finger_joint1")})
    joint_vel = ObsTerm(func=envs_mdp.joint_vel)
    actions = ObsTerm(func=envs_mdp.last_action)

    def __post_init__(self):
        self.enable_corruption = False
        self.concatenate_terms = False


@configclass
class FrankaLiftCubeEnvCfg(FrankaLiftEnvCfg):
    """Lift a 5 cm cube 10 cm off the table with the Franka (pose-IK arm and binary gripper: 8 actions)."""

    suspend: SuspendCfg = SuspendCfg(enabled=True)
    actions: FrankaLiftCubeActionsCfg = FrankaLiftCubeActionsCfg()

    def __post_init__(self):
        super().__post_init__()
        self.play_mode()
        self.commands.object_pose.debug_vis = False
        self.episode_length_s = 6.0
        scene = self.scene
        scene.object.spawn = ObjectCfg().cube
        scene.object.init_state.pos = (-0.55, 0.0, CUBE_REST_Z)
        scene.robot.spawn.rigid_props = [
            PhysxRigidBodyCfg(disable_gravity=True, max_depenetration_velocity=5.0),
            MujocoRigidBodyCfg(gravcomp=1.0),
        ]
        scene.ee_frame = FrameTransformerCfg(
            prim_path="{ENV_REGEX_NS}/Robot/Geometry/panda_link0",
            target_frames=[
                FrameTransformerCfg.FrameCfg(
                    prim_path="{ENV_REGEX_NS}/Robot/Geometry/.*/panda_hand", name="tcp", offset=OffsetCfg(pos=TCP_OFFSET)
                )
            ],
        )
        reset = self.events.conditional_reset.params["terms"]
        reset["reset_object_to_target"].params["probability"] = 0.0  # on the table, not in the hand
        # the bank's clearance check wants the cube 2 cm above the table top: it is dropped from 2.5 cm
        reset["reset_object"].params["pose_range"] = {
            "x": [-0.1, 0.1], "y": [-0.15, 0.15], "z": [0.025, 0.025], "yaw": [-1.57, 1.57]
        }
        reset["reset_robot_joints"].params["position_range"] = [-0.1, 0.1]
        reset["reset_robot_wrist_joint"].params["position_range"] = [-0.3, 0.3]
        self.observations.planner = PlannerObsCfg()
        self.terminations.success = DoneTerm(
            func=mdp.object_lifted, params={"object_cfg": SceneEntityCfg("object"), "height": LIFT_HEIGHT}
        )
