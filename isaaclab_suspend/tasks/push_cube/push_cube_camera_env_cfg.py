"""Push-cube seen by cameras: an ``images`` observation group (uint8 RGB) beside the proprioceptive ``policy`` group.

Cameras render with Newton's Warp ray tracer (``NewtonWarpRendererCfg``), which runs on the CPU without Kit. The
pusher is blue, the cube red and the target a green strip on the floor (a collision-free marker articulation moved
by :class:`~.mdp.MarkedTargetPositionCommand`). Cameras render lazily, once per observation, not per physics step.
"""

from __future__ import annotations

import math

import isaaclab.sim as sim_utils
from isaaclab.actuators import ImplicitActuatorCfg
from isaaclab.assets import ArticulationCfg
from isaaclab.managers import ObservationGroupCfg as ObsGroup
from isaaclab.sensors import CameraCfg
from isaaclab.utils import configclass

from isaaclab_suspend.assets import MARKER_USD

from ..cameras import IMAGE_SIZE, look_quat, rgb_camera, rgb_term
from . import mdp
from .push_cube_env_cfg import SCENE_CAMERA_POS, ObservationsCfg, PushCubeEnvCfg, PushCubeSceneCfg

def scene_camera(size: int = IMAGE_SIZE) -> CameraCfg:
    """A fixed camera viewing the whole workspace (the pusher's start to the farthest target)."""
    x, y, z = SCENE_CAMERA_POS
    return rgb_camera("{ENV_REGEX_NS}/SceneCamera", SCENE_CAMERA_POS, look_quat(math.pi / 2, math.atan2(z, -y)), size)


def pusher_camera(size: int = IMAGE_SIZE) -> CameraCfg:
    """A camera riding on the pusher paddle, looking ahead along the push and down at the floor."""
    return rgb_camera(
        "{ENV_REGEX_NS}/Robot/cart/PusherCamera", (0.0, 0.0, 0.4), look_quat(0.0, math.radians(50)), size, moving=True
    )


@configclass
class PushCubeCameraSceneCfg(PushCubeSceneCfg):
    """The push-cube scene with a target marker and a fixed scene camera."""

    marker = ArticulationCfg(
        prim_path="{ENV_REGEX_NS}/Marker",
        spawn=sim_utils.UsdFileCfg(usd_path=MARKER_USD),
        init_state=ArticulationCfg.InitialStateCfg(pos=(0.0, 0.0, 0.003), joint_pos={"slider_to_cart": 1.0}),
        actuators={
            "marker": ImplicitActuatorCfg(joint_names_expr=["slider_to_cart"], stiffness=0.0, damping=10.0)
        },
    )
    scene_camera: CameraCfg = scene_camera()


@configclass
class PushCubeTwoCameraSceneCfg(PushCubeCameraSceneCfg):
    """The camera scene with a second camera riding on the pusher."""

    pusher_camera: CameraCfg = pusher_camera()


@configclass
class CameraObservationsCfg(ObservationsCfg):
    """The proprioceptive ``policy`` group and an ``images`` group with one uint8 term per camera."""

    @configclass
    class ImagesCfg(ObsGroup):
        scene_camera = rgb_term("scene_camera")

        def __post_init__(self):
            self.enable_corruption = False
            self.concatenate_terms = False

    images: ImagesCfg = ImagesCfg()


@configclass
class TwoCameraObservationsCfg(CameraObservationsCfg):
    @configclass
    class TwoImagesCfg(CameraObservationsCfg.ImagesCfg):
        pusher_camera = rgb_term("pusher_camera")

    images: TwoImagesCfg = TwoImagesCfg()


@configclass
class PushCubeCameraEnvCfg(PushCubeEnvCfg):
    """Push-cube with one fixed scene camera (64x64 RGB by default) and a visible target."""

    scene: PushCubeCameraSceneCfg = PushCubeCameraSceneCfg(num_envs=16, env_spacing=4.0)
    observations: CameraObservationsCfg = CameraObservationsCfg()

    def __post_init__(self):
        super().__post_init__()
        target = self.commands.target
        self.commands.target = mdp.MarkedTargetPositionCommandCfg(
            asset_name=target.asset_name,
            marker_name="marker",
            resampling_time_range=target.resampling_time_range,
            x_range=target.x_range,
        )


@configclass
class PushCubeTwoCameraEnvCfg(PushCubeCameraEnvCfg):
    """Push-cube with the fixed scene camera and a camera riding on the pusher."""

    scene: PushCubeTwoCameraSceneCfg = PushCubeTwoCameraSceneCfg(num_envs=16, env_spacing=4.0)
    observations: TwoCameraObservationsCfg = TwoCameraObservationsCfg()
