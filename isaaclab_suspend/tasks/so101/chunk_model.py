"""An embedded chunk policy for the SO-101 lift: scripted pose-IK waypoints (above, descend, close, lift).

Everything is in the robot's base frame, the frame of the task's IK command. The grasp is top-down: the gripper's
z axis points up (its jaws hang along -z), so its orientation is a yaw ``a`` alone, chosen so that the jaws close
across two faces of the cube (the cube's yaw plus a multiple of 90 degrees, the nearest to the gripper's yaw now,
so the wrist turns least). The cube's centre sits between the jaw pads at :attr:`SO101LiftChunkCfg.grasp_offset`
in the gripper's frame.

Each call derives the phase from the observation (the last gripper command is in it, as ``actions``): not over
the cube or the jaw not yet open -> go above it (and open); open and over it -> descend; closing with the cube
between the jaws -> wait until the jaw stops, then lift; closing without the cube -> open and start again. With
:attr:`SO101LiftChunkCfg.grasp_noise` each call aims beside the cube, so recorded demos include misses and their
recoveries. It then rolls a commanded pose forward for H steps at a speed limit through the phases' waypoints and returns the poses with the gripper command
(the chunk). Given a committed prefix (real-time chunking) the roll starts from the prefix's last command and the
chunk's first actions are the prefix's.
"""

from __future__ import annotations

import math

import torch

from isaaclab.utils import configclass
from isaaclab.utils.math import quat_apply, quat_mul

from ...chunking.model import prefix_plan

APPROACH, DESCEND, CLOSE, LIFT = 0, 1, 2, 3
"""The planner's phases."""


def _yaw_quat(yaw: torch.Tensor) -> torch.Tensor:
    """Quaternion (x, y, z, w) of a rotation by ``yaw`` (B,) about z. Shape: (B, 4)."""
    zero = torch.zeros_like(yaw)
    return torch.stack((zero, zero, torch.sin(yaw / 2), torch.cos(yaw / 2)), dim=1)


def _heading(quat: torch.Tensor) -> torch.Tensor:
    """Yaw of a frame's x axis projected on the horizontal plane, from its quaternion (x, y, z, w). Shape: (B,)."""
    x_axis = quat_apply(quat, torch.tensor([1.0, 0.0, 0.0], device=quat.device).expand(quat.shape[0], 3))
    return torch.atan2(x_axis[:, 1], x_axis[:, 0])


class SO101LiftChunkModel:
    """Chunk model ``model(obs_rows, env_ids) -> (B, H, 8)`` for ``IsaacContrib-Lift-Cube-SO101-IK-Abs-Suspendable``.

    Observation ``obs_rows["policy"]`` (a dict of terms): ``eef_pose_b`` (B, 7) and ``cube_pose_b`` (B, 7), the
    gripper's and the cube's pose in the base frame (quaternions x, y, z, w); ``gripper_pos`` (B, 1), the jaw
    joint [rad]; ``joint_vel`` (B, 6); ``actions`` (B, 8), the last action. Action: ``[pos(3), quat(4), closed]``.
    """

    accepts_prefix = True
    """Plans continue a committed prefix (see :class:`~isaaclab_suspend.chunking.model.ChunkModel`)."""

    def __init__(self, cfg: SO101LiftChunkCfg | None = None):
        self.cfg = cfg or SO101LiftChunkCfg()
        """Model configuration."""

    def __call__(self, obs_rows: dict, env_ids: torch.Tensor, prefix: torch.Tensor | None = None,
                 delay: torch.Tensor | None = None) -> torch.Tensor:
        """Plan H actions, continuing ``prefix`` (B, d, 8) for ``delay`` (B,) steps if given. Returns (B, H, 8)."""
        cfg = self.cfg
        policy = obs_rows[cfg.obs_group]
        eef, cube = policy["eef_pose_b"].float(), policy["cube_pose_b"].float()
        jaw, jaw_vel = policy["gripper_pos"][:, 0].float(), policy["joint_vel"][:, -1].float()
        open_cmd, closed_cmd = cfg.gripper_commands
        closing = (policy["actions"][:, 7].float() - open_cmd) / (closed_cmd - open_cmd) > 0.5
        # the jaw yaw: the cube's faces' normal (every 90 degrees) nearest the gripper's yaw now
        quarter = math.pi / 2
        cube_yaw, now = _heading(cube[:, 3:]), _heading(eef[:, 3:])
        yaw = cube_yaw + quarter * torch.round((now - cube_yaw) / quarter)
        quat = quat_mul(_yaw_quat(yaw), torch.tensor(cfg.grasp_quat, device=eef.device).expand(eef.shape[0], 4))
        offset = torch.tensor(cfg.grasp_offset, device=eef.device).expand(eef.shape[0], 3)
        grasp = cube[:, :3] - quat_apply(quat, offset)  # gripper origin with the cube between the pads
        # the grasp point now: is the cube between the jaws?
        held = (eef[:, :3] + quat_apply(eef[:, 3:], offset) - cube[:, :3]).norm(dim=1) < cfg.hold_radius
        over = (eef[:, :2] - grasp[:, :2]).norm(dim=1) < cfg.align_radius
        phase = torch.where(over & (jaw >= cfg.open_jaw), DESCEND, APPROACH)
        phase = torch.where(closing & held, CLOSE, phase)
        waited = torch.zeros_like(jaw)
        phase = torch.where(closing & held & (jaw < cfg.closed_jaw) & (jaw_vel.abs() < cfg.settled_speed), LIFT, phase)
        if cfg.grasp_noise > 0.0:  # this call aims beside the cube: now and then a miss, then the recovery
            aim = torch.randn_like(grasp) * torch.tensor((cfg.grasp_noise, cfg.grasp_noise, 0.0), device=eef.device)
            grasp = grasp + aim * (phase < CLOSE).unsqueeze(1)
        up = torch.tensor([0.0, 0.0, 1.0], device=eef.device)
        hover, lift = grasp + cfg.hover_height * up, grasp + cfg.lift_height * up
        # the roll starts at the gripper, or above the workspace where its pose is out of reach (the first
        # observation after the env's first reset comes before the frame sensor's first update)
        home = torch.tensor(cfg.home, device=eef.device).expand(eef.shape[0], 3)
        pos = torch.where((eef[:, :3].norm(dim=1) > cfg.reach).unsqueeze(1), home, eef[:, :3])
        if prefix is not None and prefix.shape[1] > 0:  # roll on from the last committed command
            last = prefix.gather(1, (delay - 1).clamp(min=0).view(-1, 1, 1).expand(-1, 1, prefix.shape[2]))[:, 0]
            pos = torch.where((delay > 0).unsqueeze(1), last[:, :3].float(), pos)
        step = cfg.max_speed * cfg.dt
        opened = jaw.clone()  # the jaw's angle rolled forward: it opens at jaw_speed while commanded open
        actions = []
        for k in range(cfg.chunk_length):
            target = torch.where((phase == APPROACH).unsqueeze(1), hover, grasp)
            target = torch.where((phase == LIFT).unsqueeze(1), lift, target)
            error = target - pos
            pos = pos + error * (step / error.norm(dim=1, keepdim=True).clamp(min=step))
            reached = (target - pos).norm(dim=1) < cfg.reach_tolerance
            waited = waited + (phase == CLOSE).float()
            closed = torch.where((phase >= CLOSE).unsqueeze(1), closed_cmd, open_cmd)
            opened = (opened + cfg.jaw_speed * cfg.dt * (phase < CLOSE)).clamp(max=cfg.open_jaw)
            lifting = (phase == CLOSE) & (waited >= cfg.close_steps)
            phase = torch.where((phase == APPROACH) & reached & (opened >= cfg.open_jaw), DESCEND, torch.where(
                (phase == DESCEND) & reached, CLOSE, torch.where(lifting, LIFT, phase)))
            action = torch.cat((pos, quat, closed), dim=1)
            if prefix is not None:
                action = prefix_plan(prefix, delay, k, action)
            actions.append(action)
        return torch.stack(actions, dim=1)

    def __repr__(self) -> str:
        return f"SO101LiftChunkModel(H={self.cfg.chunk_length})"


@configclass
class SO101LiftChunkCfg:
    """Configuration of :class:`SO101LiftChunkModel`. Defaults match the task."""

    class_type: type = SO101LiftChunkModel
    """The class this cfg configures."""
    chunk_length: int = 16
    """Actions per plan H."""
    obs_group: str = "policy"
    """The observation group holding the terms the planner reads."""
    dt: float = 0.05
    """Env step [s] (sim dt 0.01 s, decimation 5)."""
    grasp_offset: tuple[float, float, float] = (0.019, 0.0, -0.095)
    """The cube's centre between the jaw pads, in the gripper body's frame [m] (the MJCF's pads)."""
    grasp_quat: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 1.0)
    """The gripper's orientation (x, y, z, w) in a top-down grasp at yaw 0, in the base frame (the SO-101's gripper
    z axis points up)."""
    gripper_commands: tuple[float, float] = (0.0, 1.0)
    """The gripper action that opens and the one that closes (the SO-101's closedness)."""
    reach: float = 0.4
    """The arm's reach about its base [m]: a gripper pose farther away is a stale observation."""
    home: tuple[float, float, float] = (0.15, 0.0, 0.2)
    """Where the roll starts when the gripper's pose is stale [m]: above the workspace."""
    hover_height: float = 0.06
    """Height above the grasp pose to approach from [m]."""
    lift_height: float = 0.1
    """Height above the grasp pose to lift to [m]."""
    max_speed: float = 0.3
    """Speed of the commanded position [m/s]."""
    reach_tolerance: float = 0.004
    """Distance at which a waypoint counts as reached [m]."""
    align_radius: float = 0.01
    """Horizontal distance to the grasp pose under which the gripper descends [m]."""
    hold_radius: float = 0.025
    """Distance of the cube from the grasp point under which it is between the jaws [m]."""
    close_steps: int = 16
    """Steps the jaw is given to close at the grasp pose before lifting (it closes at 2 rad/s; the arm catches up
    with its command meanwhile). A plan that starts while the jaw closes lifts once the jaw has stopped."""
    open_jaw: float = 1.6
    """Jaw angle from which the jaw counts as open: the gripper descends only then [rad] (fully open 1.745; a reset
    starts it at 0)."""
    jaw_speed: float = 1.55
    """Speed at which the jaw opens [rad/s] (the task's jaw velocity limit, as measured)."""
    closed_jaw: float = 1.0
    """Jaw angle below which the jaw has closed on the cube [rad] (open 1.745, on a 4 cm cube about 0.46)."""
    settled_speed: float = 0.05
    """Jaw speed under which it has stopped on the cube [rad/s]."""
    grasp_noise: float = 0.0
    """Standard deviation of a horizontal offset of the grasp point, drawn per env and call while the jaw is not
    closing on the cube [m]. Demos recorded with it show misses and the planner's recoveries from them, states that
    noise-free demos never reach and a cloned policy meets after its own misses (noise injection, as in DART).
    0: none (the audit's and evaluations' planner)."""
