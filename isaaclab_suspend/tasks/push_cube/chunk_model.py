"""An embedded chunk policy for push-cube: a scripted PD plan that drives the pusher behind the cube to the target.

The cube reaches its target when the pusher's face, touching the cube, stops there: the cart's goal is
``target - contact_offset`` with ``target = cube_x + cube_to_target`` (the observation) and
``contact_offset`` half the paddle plus half the cube. Each call plans H actions ahead by rolling a model of
the cart (its mass alone, or with the cube's and the cube's ground friction once the paddle touches it; the
actuator's viscous damping) under a position-to-velocity PD law with a speed limit, the friction fed forward;
the env then runs the plan open-loop until the next inference. Given a committed prefix (real-time chunking), the
plan's first d actions are the prefix and the model is rolled through them, so the law takes over from the state
they lead to, eased in from the prefix's last action over a few steps (what the model still misses would make a
re-plan from a fresh observation jump).
The cube slides only a few millimetres once the pusher slows down (ground friction), so stopping the pusher
stops the cube close to the target.
"""

from __future__ import annotations

import torch

from isaaclab.utils import configclass

from ...assets.params import CUBE, PUSHER
from ...chunking.model import prefix_plan


class PushCubeChunkModel:
    """Chunk model ``model(obs_rows, env_ids) -> (B, H, 1)`` for ``Isaac-PushCube-Suspendable``.

    Observation ``obs_rows["policy"]``: ``[cart_pos, cart_vel, cube_x, cube_vel_x, cube_to_target]``, shape (B, 5).

    Args:
        cfg: Model configuration (defaults match the task).
    """

    def __init__(self, cfg: PushCubeChunkCfg | None = None):
        self.cfg = cfg or PushCubeChunkCfg()
        """Model configuration."""

    accepts_prefix = True
    """Plans continue a committed prefix (:class:`~isaaclab_suspend.chunking.model.ChunkModel`): the cart model
    is rolled through the prefix and the PD law takes over from the predicted state."""

    def __call__(self, obs_rows: dict, env_ids: torch.Tensor, prefix: torch.Tensor | None = None,
                 delay: torch.Tensor | None = None) -> torch.Tensor:
        """Plan H actions, continuing ``prefix`` (B, d, 1) for ``delay`` (B,) steps if given. Returns shape
        (B, H, 1)."""
        cfg = self.cfg
        obs = obs_rows["policy"].to(torch.float32)
        pos, vel, cube = obs[:, 0], obs[:, 1], obs[:, 2]
        goal = cube + obs[:, 4] - cfg.contact_offset
        actions = []
        for k in range(cfg.chunk_length):
            # in contact the cart moves the cube too and overcomes its ground friction (fed forward)
            contact = (cube - pos <= cfg.contact_offset + cfg.contact_margin).to(obs.dtype)
            mass = cfg.cart_mass + cfg.cube_mass * contact
            vel_goal = (cfg.position_gain * (goal - pos)).clamp(-cfg.max_speed, cfg.max_speed)
            friction = cfg.cube_friction * contact * (vel_goal > 0)
            force = mass * cfg.velocity_gain * (vel_goal - vel) + cfg.damping * vel + friction
            action = (force / cfg.action_scale).clamp(-cfg.action_limit, cfg.action_limit).unsqueeze(1)
            if prefix is not None:
                action = prefix_plan(prefix, delay, k, self._ease(prefix, delay, k, action))
            actions.append(action)
            # implicit damping, semi-implicit Euler over one env step; the cube slides only while pushed forward
            drive = action[:, 0] * cfg.action_scale - cfg.cube_friction * contact * (vel > 0)
            vel = (vel + cfg.dt * drive / mass) / (1.0 + cfg.dt * cfg.damping / mass)
            pos = pos + cfg.dt * vel
            cube = torch.maximum(cube, pos + cfg.contact_offset)
        return torch.stack(actions, dim=1)

    def _ease(self, prefix: torch.Tensor, delay: torch.Tensor, step: int, planned: torch.Tensor) -> torch.Tensor:
        """The planned action eased in from the prefix's last one over :attr:`PushCubeChunkCfg.prefix_ease_steps`
        steps after the prefix (RTC's soft masking): weight ``1 - (j + 1) / (n + 1)`` on the prefix's last action
        at the j-th step after it, so the re-plan from a fresh observation does not jump. Shape: (B, 1)."""
        after = step - delay.unsqueeze(1)  # steps after the prefix; negative inside it
        last = prefix.gather(1, (delay - 1).clamp(min=0).view(-1, 1, 1).expand(-1, 1, prefix.shape[2]))[:, 0]
        n = self.cfg.prefix_ease_steps
        weight = (1.0 - (after + 1) / (n + 1)).clamp(0.0, 1.0) * (delay > 0).unsqueeze(1)
        return weight * last.to(planned.dtype) + (1.0 - weight) * planned

    def __repr__(self) -> str:
        return f"PushCubeChunkModel(H={self.cfg.chunk_length})"


@configclass
class PushCubeChunkCfg:
    """Configuration of :class:`PushCubeChunkModel`. Defaults match ``Isaac-PushCube-Suspendable``."""

    class_type: type = PushCubeChunkModel
    """The class this cfg configures."""
    chunk_length: int = 16
    """Actions per plan H."""
    contact_offset: float = PUSHER.paddle_size[0] / 2 + CUBE.size / 2
    """Cart position minus cube position when the paddle touches the cube [m]."""
    cart_mass: float = PUSHER.cart_mass
    """Mass of the cart [kg]."""
    cube_mass: float = CUBE.mass
    """Mass of the cube, moved by the cart force while pushing [kg]."""
    cube_friction: float = 2.0
    """Ground friction force on the cube while it slides [N] (from the speed a push holds in the task)."""
    contact_margin: float = 0.005
    """Gap below which the paddle counts as touching the cube [m]."""
    damping: float = 5.0
    """Viscous damping of the cart joint [N/(m/s)] (the task's cart actuator)."""
    action_scale: float = 20.0
    """Force per unit action [N] (the task's joint-effort action scale)."""
    action_limit: float = 5.0
    """Largest planned ``|action|``: the actuator's effort limit 100 N over the action scale."""
    dt: float = 1.0 / 60.0
    """Env step [s]."""
    position_gain: float = 5.0
    """Goal speed per metre of position error [1/s]."""
    velocity_gain: float = 20.0
    """Acceleration per m/s of speed error [1/s]."""
    max_speed: float = 0.6
    """Speed limit of the plan [m/s]."""
    prefix_ease_steps: int = 4
    """Steps over which a plan that continues a prefix eases in from the prefix's last action (0: none)."""
