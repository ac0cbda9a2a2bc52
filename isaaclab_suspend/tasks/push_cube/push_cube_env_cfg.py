"""Push-cube: a cart on a rail pushes a free cube to a target position along x.

The scene has an articulation and a free rigid object that moves under gravity and contact: a frozen env
must hold the cube still too, which holding joint targets alone cannot do.
"""

from __future__ import annotations

import isaaclab.sim as sim_utils
from isaaclab.actuators import ImplicitActuatorCfg
from isaaclab.assets import ArticulationCfg, AssetBaseCfg, RigidObjectCfg
from isaaclab.envs import ManagerBasedRLEnvCfg
from isaaclab.managers import EventTermCfg as EventTerm
from isaaclab.managers import ObservationGroupCfg as ObsGroup
from isaaclab.managers import ObservationTermCfg as ObsTerm
from isaaclab.managers import RewardTermCfg as RewTerm
from isaaclab.managers import SceneEntityCfg
from isaaclab.managers import TerminationTermCfg as DoneTerm
from isaaclab.scene import InteractiveSceneCfg
from isaaclab.utils import configclass

from isaaclab_suspend.assets import CUBE_USD, GROUND_USD, PUSHER_USD
from isaaclab_suspend.assets.params import CUBE, PUSHER
from isaaclab_suspend.suspension.suspend_cfg import SuspendCfg

from ..physics_cfg import ContactPhysicsCfg
from . import mdp

CUBE_START_X = 0.4
"""Nominal start of the cube centre along x [m] (relative to the env origin)."""
SCENE_CAMERA_POS = (0.75, -1.3, 1.6)
"""Scene camera position relative to the env origin [m]: beside the rail, looking across it and down (the camera
task's camera, and the viewer's eye)."""


@configclass
class PushCubeSceneCfg(InteractiveSceneCfg):
    """Ground, a pusher cart on a rail at floor level and a free cube in front of it."""

    ground = AssetBaseCfg(prim_path="/World/ground", spawn=sim_utils.UsdFileCfg(usd_path=GROUND_USD))
    robot = ArticulationCfg(
        prim_path="{ENV_REGEX_NS}/Robot",
        spawn=sim_utils.UsdFileCfg(usd_path=PUSHER_USD),
        init_state=ArticulationCfg.InitialStateCfg(
            pos=(0.0, 0.0, 0.11 + PUSHER.paddle_size[2] / 2 - 0.1), joint_pos={"slider_to_cart": 0.0}
        ),
        actuators={
            "cart": ImplicitActuatorCfg(
                joint_names_expr=["slider_to_cart"], effort_limit_sim=100.0, stiffness=0.0, damping=5.0
            )
        },
    )
    cube = RigidObjectCfg(
        prim_path="{ENV_REGEX_NS}/Cube",
        spawn=sim_utils.UsdFileCfg(usd_path=CUBE_USD),
        init_state=RigidObjectCfg.InitialStateCfg(pos=(CUBE_START_X, 0.0, CUBE.size / 2)),
    )


@configclass
class ActionsCfg:
    cart_effort = mdp.JointEffortActionCfg(asset_name="robot", joint_names=["slider_to_cart"], scale=20.0)


@configclass
class CommandsCfg:
    target = mdp.TargetPositionCommandCfg(asset_name="cube", resampling_time_range=(100.0, 100.0), x_range=(1.0, 1.6))


@configclass
class ObservationsCfg:
    @configclass
    class PolicyCfg(ObsGroup):
        cart_pos = ObsTerm(func=mdp.joint_pos_rel)
        cart_vel = ObsTerm(func=mdp.joint_vel_rel)
        cube_x = ObsTerm(func=mdp.object_x)
        cube_vel_x = ObsTerm(func=mdp.object_vel_x)
        cube_to_target = ObsTerm(func=mdp.object_to_target)

        def __post_init__(self):
            self.enable_corruption = False
            self.concatenate_terms = True

    policy: PolicyCfg = PolicyCfg()


@configclass
class EventCfg:
    reset_cart = EventTerm(
        func=mdp.reset_joints_by_offset,
        mode="reset",
        params={"asset_cfg": SceneEntityCfg("robot"), "position_range": (-0.1, 0.1), "velocity_range": (0.0, 0.0)},
    )
    reset_cube = EventTerm(
        func=mdp.reset_root_state_uniform,
        mode="reset",
        params={"asset_cfg": SceneEntityCfg("cube"), "pose_range": {"x": (-0.1, 0.1)}, "velocity_range": {}},
    )
    nudge_cube = EventTerm(
        func=mdp.push_by_setting_velocity,
        mode="interval",
        interval_range_s=(1.0, 2.0),
        params={"asset_cfg": SceneEntityCfg("cube"), "velocity_range": {"x": (-0.05, 0.05)}},
    )


@configclass
class RewardsCfg:
    """Distance shaping, a bonus for success and a penalty for losing the cube (both paid once, at the episode's
    end, hence the weights of 10 / step_dt): a reward per step near the target would pay more for keeping the cube
    moving near it than for stopping it there."""

    distance = RewTerm(func=mdp.object_distance, weight=-1.0)
    success = RewTerm(func=mdp.is_terminated_term, weight=600.0, params={"term_keys": "success"})
    out_of_bounds = RewTerm(func=mdp.is_terminated_term, weight=-600.0, params={"term_keys": "cube_out_of_bounds"})
    action_rate = RewTerm(func=mdp.action_rate_l2, weight=-0.01)


@configclass
class TerminationsCfg:
    time_out = DoneTerm(func=mdp.time_out, time_out=True)
    success = DoneTerm(func=mdp.object_at_rest_at_target, params={"threshold": 0.03, "max_speed": 0.02})
    """The cube at rest (slower than 2 cm/s) within 3 cm of the target: pushing through it is no success."""
    cube_out_of_bounds = DoneTerm(func=mdp.object_out_of_bounds)


@configclass
class PushCubeEnvCfg(ManagerBasedRLEnvCfg):
    """Push the cube to the commanded x within 5 s (success: the cube at rest within 3 cm)."""

    scene: PushCubeSceneCfg = PushCubeSceneCfg(num_envs=64, env_spacing=4.0)
    observations: ObservationsCfg = ObservationsCfg()
    actions: ActionsCfg = ActionsCfg()
    commands: CommandsCfg = CommandsCfg()
    rewards: RewardsCfg = RewardsCfg()
    terminations: TerminationsCfg = TerminationsCfg()
    events: EventCfg = EventCfg()
    suspend: SuspendCfg = SuspendCfg(enabled=True)
    """Per-env suspension, enabled for the ``-Suspendable`` variant."""

    def __post_init__(self):
        self.seed = 42
        self.viewer.eye, self.viewer.lookat = SCENE_CAMERA_POS, (SCENE_CAMERA_POS[0], 0.0, 0.0)  # videos, no camera
        self.decimation = 2
        self.episode_length_s = 5.0
        self.sim.dt = 1 / 120
        self.sim.render_interval = self.decimation
        self.sim.physics = ContactPhysicsCfg()
