"""The SO-101 lift seen by two cameras: a wrist camera on the gripper and a fixed front camera (uint8 RGB, 128x96),
in an ``images`` observation group beside ``policy``, rendered kitless by Newton's Warp ray tracer as the push-cube
camera tasks are."""

from __future__ import annotations

import math

from isaaclab.managers import ObservationGroupCfg as ObsGroup
from isaaclab.utils import configclass

from ..cameras import look_quat, rgb_camera, rgb_term
from .lift_cube_env_cfg import SO101LiftCubeEnvCfg

IMAGE_HEIGHT, IMAGE_WIDTH = 96, 128
"""Camera image size [px]."""

FRONT_CAMERA_POS = (0.75, 0.0, 0.4)
"""Front camera position relative to the env origin [m]: across the table from the arm, looking back at it."""


WRIST_CAMERA_POS = (-0.05, 0.0, -0.03)
"""Wrist camera position in the gripper body's frame [m]."""


@configclass
class ImagesCfg(ObsGroup):
    """Raw uint8 RGB frames of both cameras. Shapes: (num_envs, 96, 128, 3)."""

    front_camera = rgb_term("front_camera")
    wrist_camera = rgb_term("wrist_camera")

    def __post_init__(self):
        self.enable_corruption = False
        self.concatenate_terms = False


@configclass
class SO101LiftCubeCameraEnvCfg(SO101LiftCubeEnvCfg):
    """:class:`SO101LiftCubeEnvCfg` with a wrist and a front camera and an ``images`` group of their frames."""

    def __post_init__(self):
        super().__post_init__()
        x, _, z = FRONT_CAMERA_POS
        self.scene.front_camera = rgb_camera(
            "{ENV_REGEX_NS}/FrontCamera", FRONT_CAMERA_POS, look_quat(math.pi, math.atan2(z - 0.05, x - 0.2)),
            IMAGE_HEIGHT, width=IMAGE_WIDTH,
        )
        # on the gripper body, behind the jaws, looking along them (the gripper's -z) at what they grasp
        self.scene.wrist_camera = rgb_camera(
            "{ENV_REGEX_NS}/Robot/gripper/WristCamera", WRIST_CAMERA_POS, look_quat(0.0, math.pi / 2),
            IMAGE_HEIGHT, moving=True, width=IMAGE_WIDTH,
        )
        self.observations.images = ImagesCfg()
