"""The SO-101 lift in the follower's own action space: absolute joint position targets for its six motors.

A LeRobot SO-101 follower is commanded goal positions, one per motor. Demos are planned in task space (the pose-IK
task and its planner) and recorded with the joint targets the IK made of each command (``joint_targets/robot``);
a policy trained on them in the follower's terms acts here. Same scene, robot, gains, observations and success
as :class:`~.lift_cube_env_cfg.SO101LiftCubeEnvCfg`; only the action terms differ.
"""

from __future__ import annotations

from isaaclab.envs.mdp import JointPositionActionCfg
from isaaclab.utils import configclass

from .lift_cube_camera_env_cfg import SO101LiftCubeCameraEnvCfg
from .lift_cube_env_cfg import SO101LiftCubeEnvCfg

ARM_JOINTS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll")
"""The arm's joints, in the articulation's order (the gripper follows)."""


@configclass
class JointTargetActionsCfg:
    """``[arm joint targets (5), gripper joint target (1)]`` [rad], absolute: the follower's six goal positions."""

    arm_action = JointPositionActionCfg(
        asset_name="robot", joint_names=list(ARM_JOINTS), scale=1.0, use_default_offset=False, preserve_order=True
    )
    gripper_action = JointPositionActionCfg(
        asset_name="robot", joint_names=["gripper"], scale=1.0, use_default_offset=False
    )


@configclass
class SO101LiftCubeJointEnvCfg(SO101LiftCubeEnvCfg):
    """:class:`SO101LiftCubeEnvCfg` commanded in absolute joint targets (6 actions)."""

    def __post_init__(self):
        super().__post_init__()
        self.actions = JointTargetActionsCfg()


@configclass
class SO101LiftCubeJointCameraEnvCfg(SO101LiftCubeCameraEnvCfg):
    """:class:`SO101LiftCubeJointEnvCfg` with the wrist and front cameras."""

    def __post_init__(self):
        super().__post_init__()
        self.actions = JointTargetActionsCfg()
