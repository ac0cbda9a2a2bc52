"""The Franka cube lift's embedded chunk policy: the scripted pose-IK waypoint planner of the SO-101 lift (above,
descend, close, lift; :class:`~isaaclab_suspend.tasks.so101.chunk_model.SO101LiftChunkModel`) with the Panda's
hand, gripper commands and the task's timing."""

from __future__ import annotations

from isaaclab.utils import configclass

from ..so101.chunk_model import SO101LiftChunkCfg


@configclass
class FrankaLiftChunkCfg(SO101LiftChunkCfg):
    """The planner on ``Isaac-Lift-Cube-Franka-IK-Abs-Suspendable``: the commanded frame is the TCP between the
    fingertips, pointing down; the binary gripper closes below 0."""

    obs_group: str = "planner"
    dt: float = 1.0 / 30.0
    """Env step [s] (sim dt 1/120 s, decimation 4)."""
    grasp_offset: tuple[float, float, float] = (0.0, 0.0, -0.003)
    """The cube's centre between the finger pads (0.1037 m down the hand), in the TCP frame [m]."""
    grasp_quat: tuple[float, float, float, float] = (1.0, 0.0, 0.0, 0.0)
    """The TCP pointing down: half a turn about x."""
    gripper_commands: tuple[float, float] = (1.0, -1.0)
    reach: float = 0.9
    """The Panda's reach about its base [m]."""
    home: tuple[float, float, float] = (0.5, 0.0, 0.45)
    """Above the workspace [m] (the TCP pose is read from the body state, never stale: kept for the contract)."""
    hold_radius: float = 0.02
    open_jaw: float = 0.035
    """Finger position from which the fingers are open enough to descend over the cube [m] (7 cm apart)."""
    jaw_speed: float = 0.015
    """Opening speed of the fingers [m/s] (the lift cfg's damped hand)."""
    closed_jaw: float = 0.03
    """Finger position below which the fingers have closed on the cube [m] (open 0.04, on the cube 0.025)."""
    settled_speed: float = 0.01
    """Finger speed under which they have stopped on the cube [m/s]."""
    close_steps: int = 20
    """Steps at the grasp pose before lifting: the settling and the fingers' closing."""
