"""SO-101 lift: Isaac Lab's SO-101 cube-stack scene and IK-Abs action space, with one goal: lift the red cube.

A subclass of Isaac Lab's ``IsaacContrib-Stack-Cube-SO101-IK-Abs-v0`` cfg (its scene, its pose-IK action term and
analog gripper, its reset events), not a copy: it adds the end effector's and the red cube's poses in the robot's
base frame to the policy observations (the planner works in that frame, as the IK command does), the joints'
absolute positions (``joint_pos_abs``: the follower's state, :mod:`isaaclab_suspend.lerobot.so101`), a ``success``
termination when the red cube is 5 cm up, and a shorter episode.
"""

from __future__ import annotations

from isaaclab.managers import ObservationTermCfg as ObsTerm
from isaaclab.managers import SceneEntityCfg
from isaaclab.managers import TerminationTermCfg as DoneTerm
from isaaclab.utils import configclass

from isaaclab_tasks.contrib.stack import mdp as stack_mdp
from isaaclab_tasks.contrib.stack.config.so101.stack_ik_abs_env_cfg import SO101CubeStackEnvCfg

from ...suspension.suspend_cfg import SuspendCfg
from . import mdp

LIFT_CUBE = "cube_2"
"""The cube to lift (Isaac Lab's red block)."""
LIFT_HEIGHT = 0.0203 + 0.05
"""Success: the cube's centre this high above the table top [m] (it rests at 0.0203 m)."""


@configclass
class SO101LiftCubeEnvCfg(SO101CubeStackEnvCfg):
    """Lift the red cube 5 cm with the SO-101 (pose-IK arm action ``[pos(3), quat_xyzw(4)]`` in the base frame and
    gripper closedness ``[0 open, 1 closed]``: 8 actions)."""

    suspend: SuspendCfg = SuspendCfg(enabled=True)

    def __post_init__(self):
        super().__post_init__()
        self.episode_length_s = 6.0
        # MuJoCo-Warp holds the contacts of all worlds in one buffer of nconmax per world; its elliptic-cone
        # gradient kernel sweeps every slot of it on the CPU. This scene (the arm, three cubes, the table) makes at
        # most 36 contacts in a world (19 planner episodes), so 96 per world, not the stack cfg's 600: the same
        # physics bit for bit, a step at 16 envs on the CPU 4.8x faster (2.49 -> 0.52 s).
        self.sim.physics.newton_mjwarp.solver_cfg.nconmax = 96
        policy = self.observations.policy
        policy.joint_pos_abs = ObsTerm(func=mdp.joint_pos)
        policy.eef_pose_b = ObsTerm(func=stack_mdp.ee_frame_pose_in_base_frame)
        policy.cube_pose_b = ObsTerm(func=mdp.object_pose_in_base, params={"object_cfg": SceneEntityCfg(LIFT_CUBE)})
        self.terminations.success = DoneTerm(
            func=mdp.object_lifted, params={"object_cfg": SceneEntityCfg(LIFT_CUBE), "height": LIFT_HEIGHT}
        )
