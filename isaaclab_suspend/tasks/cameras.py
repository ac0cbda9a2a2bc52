"""Cameras of the tasks: RGB pinhole cameras rendered on the CPU by Newton's Warp ray tracer (no Kit), their
observation terms, and a camera added at a cfg's viewer for videos of any task."""

from __future__ import annotations

import math

import isaaclab.sim as sim_utils
from isaaclab.envs.mdp import image_rgb
from isaaclab.managers import ObservationTermCfg as ObsTerm
from isaaclab.managers import SceneEntityCfg
from isaaclab.sensors import CameraCfg
from isaaclab_newton.renderers import NewtonWarpRendererCfg

IMAGE_SIZE = 64
"""Default camera height and width [px]."""


def look_quat(yaw: float, pitch: float) -> tuple[float, float, float, float]:
    """Quaternion (x, y, z, w) of a world-convention camera (forward +x, up +z) turned by ``yaw`` about z, then
    tilted down by ``pitch`` [rad]."""
    cz, sz, cy, sy = math.cos(yaw / 2), math.sin(yaw / 2), math.cos(pitch / 2), math.sin(pitch / 2)
    return (-sz * sy, cz * sy, sz * cy, cz * cy)


def rgb_camera(
    prim_path: str, pos: tuple[float, float, float], rot, size: int = IMAGE_SIZE, moving: bool = False,
    width: int | None = None,
) -> CameraCfg:
    """An RGB pinhole camera (``size`` px high, ``width`` px wide, default square) rendered on the CPU by Newton's
    Warp ray tracer; ``moving`` if its parent moves."""
    return CameraCfg(
        prim_path=prim_path,
        height=size,
        width=width or size,
        data_types=["rgb"],
        spawn=sim_utils.PinholeCameraCfg(focal_length=24.0, clipping_range=(0.05, 20.0)),
        offset=CameraCfg.OffsetCfg(pos=pos, rot=rot, convention="world"),
        renderer_cfg=NewtonWarpRendererCfg(),
        update_latest_camera_pose=moving,
    )



def rgb_term(camera: str, frame_stack: int = 1) -> ObsTerm:
    """Raw uint8 RGB frames of ``camera``. Shape: (num_envs, H, W, 3 * frame_stack)."""
    return ObsTerm(
        func=image_rgb,
        params={"sensor_cfg": SceneEntityCfg(camera), "data_type": "rgb", "normalize": False, "frame_stack": frame_stack},
    )


def add_viewer_camera(cfg, name: str, prim_name: str, size: int) -> None:
    """Add an RGB camera ``name`` to the scene of the env cfg ``cfg``, in every env at the ``viewer`` cfg's eye and
    looking at its ``lookat`` (both taken relative to the env origin), ``size`` px square."""
    eye = tuple(float(v) for v in cfg.viewer.eye)
    dx, dy, dz = (float(b) - a for a, b in zip(eye, cfg.viewer.lookat))
    rot = look_quat(math.atan2(dy, dx), math.atan2(-dz, math.hypot(dx, dy)))
    setattr(cfg.scene, name, rgb_camera("{ENV_REGEX_NS}/" + prim_name, eye, rot, size))
