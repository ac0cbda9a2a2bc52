"""An embedded chunk policy for Cartpole: LQR gains from the physical parameters, rolled out into open-loop plans.

No training and no download: the gains come from the cart-pole equations of motion with the masses and
lengths of :data:`isaaclab_suspend.assets.params.CARTPOLE`, and each call plans H actions ahead from the
observation. The env then runs the plan open-loop until the next inference, like a real chunking policy.

Model. State ``s = [x, theta, x_dot, theta_dot]`` (the task's observation order: ``joint_pos_rel`` then
``joint_vel_rel`` of ``slider_to_cart`` and ``cart_to_pole``), theta = 0 upright and positive when the top of
the pole moves toward +x. Cart mass M, pole mass m, hinge-to-centre-of-mass distance l, pole inertia about
its centre I_c = m (L^2 + w^2) / 12 (a uniform box of length L, width w), viscous cart damping b (the cart
actuator's damping, stiffness 0), force F = action_scale * a on the cart. Lagrange's equations::

    (M + m) x_ddot + m l cos(theta) theta_ddot - m l sin(theta) theta_dot^2 = F - b x_dot
    m l cos(theta) x_ddot + (I_c + m l^2) theta_ddot - m g l sin(theta) = 0

The physics steps them with MuJoCo's ``implicitfast`` integrator: the damping is implicit (mass matrix
``D + dt * diag(b, 0)`` with ``D = [[M + m, m l cos(theta)], [m l cos(theta), I_c + m l^2]]``), the velocities
are updated first and the positions with the new velocities (semi-implicit Euler), and the action is held for
``decimation`` physics steps. Stepped this way (:meth:`CartpoleLQRChunkModel.step`), the model reproduces one
env step of the simulator from given states and actions to within 1e-4; the explicit continuous-time model is
7 % off in the velocities.
Linearised at the upright rest state, one physics step is ``s' = Phi s + Gamma a``; one env step is
``A_d = Phi^d``, ``B_d = sum_{i<d} Phi^i Gamma``, and the gain ``K`` solves the discrete-time Riccati equation
for weights Q, R (fixed-point iteration, float64).

Plan. From the observed state the model rolls the *nonlinear* equations forward, stepped like the physics,
under ``a_k = clip(-K s_k)`` and returns the H actions ``a_0 .. a_{H-1}``: a short-horizon model-predictive
plan of the LQR law. Given a committed prefix (real-time chunking), the first d actions are the prefix and the
model is rolled through them, so the law takes over from the state they lead to. Rolling the nonlinear model keeps the plan accurate from the task's initial tilts of up
to 45 degrees.
"""

from __future__ import annotations

import torch

from isaaclab.utils import configclass

from ...assets.params import CARTPOLE, CartpoleParams
from ...chunking.model import prefix_plan

GRAVITY = 9.81
"""Gravity [m/s^2]."""


class CartpoleLQRChunkModel:
    """Chunk model ``model(obs_rows, env_ids) -> (B, H, 1)`` for ``Isaac-Cartpole-Suspendable``.

    Args:
        cfg: Model configuration (defaults match the task).
        params: Masses and lengths (defaults: those the project's USD asset is generated from).
    """

    def __init__(self, cfg: CartpoleLQRCfg | None = None, params: CartpoleParams = CARTPOLE):
        self.cfg = cfg or CartpoleLQRCfg()
        """Model configuration."""
        self.params = params
        """Masses and lengths of the cart-pole."""
        a, b = self.linear_model()
        self.gain = self.lqr_gain(a, b).to(torch.float32)
        """LQR gain K, action = -K s. Shape: (1, 4)."""

    accepts_prefix = True
    """Plans continue a committed prefix (:class:`~isaaclab_suspend.chunking.model.ChunkModel`): the model is
    rolled through the prefix and the LQR law takes over from the predicted state."""

    def __call__(self, obs_rows: dict, env_ids: torch.Tensor, prefix: torch.Tensor | None = None,
                 delay: torch.Tensor | None = None) -> torch.Tensor:
        """Plan H actions from ``obs_rows["policy"]`` (shape (B, 4)), continuing ``prefix`` (B, d, 1) for
        ``delay`` (B,) steps if given. Returns shape (B, H, 1)."""
        cfg = self.cfg
        state = obs_rows["policy"][:, :4].to(torch.float32)
        gain = self.gain.to(state.device)
        actions = []
        for k in range(cfg.chunk_length):
            action = (-state @ gain.T).clamp(-cfg.action_limit, cfg.action_limit)
            if prefix is not None:
                action = prefix_plan(prefix, delay, k, action)
            actions.append(action)
            state = self.step(state, action.squeeze(1))
        return torch.stack(actions, dim=1)

    def step(self, state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """One env step of the nonlinear model, stepped like the physics (see the module docstring).

        Args:
            state: ``[x, theta, x_dot, theta_dot]``. Shape: (B, 4).
            action: The action, held for ``decimation`` physics steps. Shape: (B,).

        Returns:
            The next state, shape (B, 4).
        """
        cfg, p = self.cfg, self.params
        m, com = p.pole_mass, p.pole_com
        x, theta, x_dot, theta_dot = state.unbind(1)
        force = action * cfg.action_scale
        # mass matrix with the implicit damping (d12 depends on theta), generalised forces at the current velocities
        d11, d22 = p.cart_mass + m + cfg.dt * cfg.cart_damping, self._pole_inertia() + m * com * com
        for _ in range(cfg.decimation):
            cos, sin = torch.cos(theta), torch.sin(theta)
            d12 = m * com * cos
            r1 = force - cfg.cart_damping * x_dot + m * com * sin * theta_dot**2
            r2 = m * GRAVITY * com * sin
            det = d11 * d22 - d12 * d12
            x_dot = x_dot + cfg.dt * (d22 * r1 - d12 * r2) / det
            theta_dot = theta_dot + cfg.dt * (d11 * r2 - d12 * r1) / det
            x = x + cfg.dt * x_dot
            theta = theta + cfg.dt * theta_dot
        return torch.stack((x, theta, x_dot, theta_dot), dim=1)

    def linear_model(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Discrete-time ``(A_d, B_d)`` of one env step, linearised at the upright rest state, float64.

        Shapes: (4, 4), (4, 1).
        """
        cfg, p = self.cfg, self.params
        h, ml = cfg.dt, p.pole_mass * p.pole_com
        mass = torch.tensor(
            [[p.cart_mass + p.pole_mass, ml], [ml, self._pole_inertia() + ml * p.pole_com]], dtype=torch.float64
        )
        mass_inv = torch.linalg.inv(mass + torch.diag(torch.tensor([h * cfg.cart_damping, 0.0], dtype=torch.float64)))
        # generalised forces [-b x_dot + scale * a, m g l theta] as a linear map of (s, a)
        force_s = torch.zeros(2, 4, dtype=torch.float64)
        force_s[0, 2], force_s[1, 1] = -cfg.cart_damping, ml * GRAVITY
        force_a = torch.tensor([[cfg.action_scale], [0.0]], dtype=torch.float64)
        # one physics step: v' = v + h M^-1 f(s, a), q' = q + h v'
        vel_s = torch.cat((torch.zeros(2, 2), torch.eye(2)), dim=1).to(torch.float64) + h * mass_inv @ force_s
        vel_a = h * mass_inv @ force_a
        pos_s = torch.cat((torch.eye(2), torch.zeros(2, 2)), dim=1).to(torch.float64) + h * vel_s
        phi, gamma = torch.cat((pos_s, vel_s)), torch.cat((h * vel_a, vel_a))
        a_d, b_d = torch.eye(4, dtype=torch.float64), torch.zeros(4, 1, dtype=torch.float64)
        for _ in range(cfg.decimation):
            a_d, b_d = phi @ a_d, phi @ b_d + gamma
        return a_d, b_d

    def lqr_gain(self, a: torch.Tensor, b: torch.Tensor, iterations: int = 10000, tol: float = 1e-12) -> torch.Tensor:
        """Discrete LQR gain ``K = (R + B'PB)^-1 B'PA`` for the Riccati fixed point P. Shape: (1, 4).

        Raises:
            RuntimeError: If the Riccati iteration does not converge.
        """
        q = torch.diag(torch.tensor(self.cfg.state_weights, dtype=torch.float64))
        r = torch.tensor([[self.cfg.action_weight]], dtype=torch.float64)
        p = q.clone()
        for _ in range(iterations):
            gain = torch.linalg.solve(r + b.T @ p @ b, b.T @ p @ a)
            p_next = q + a.T @ p @ (a - b @ gain)
            if torch.allclose(p_next, p, rtol=0.0, atol=tol * float(p.abs().max())):
                return gain
            p = p_next
        raise RuntimeError("The Riccati iteration did not converge: check the model parameters and weights.")

    def _pole_inertia(self) -> float:
        p = self.params
        return p.pole_mass * (p.pole_size[2] ** 2 + p.pole_size[0] ** 2) / 12.0

    def __repr__(self) -> str:
        return f"CartpoleLQRChunkModel(H={self.cfg.chunk_length}, K={[round(k, 3) for k in self.gain[0].tolist()]})"


@configclass
class CartpoleLQRCfg:
    """Configuration of :class:`CartpoleLQRChunkModel`. Defaults match ``Isaac-Cartpole-Suspendable``."""

    class_type: type = CartpoleLQRChunkModel
    """The class this cfg configures."""
    chunk_length: int = 16
    """Actions per plan H."""
    cart_damping: float = 10.0
    """Viscous damping of the cart joint [N/(m/s)]: the task's cart actuator (stiffness 0, damping 10)."""
    action_scale: float = 100.0
    """Force per unit action [N]: the task's joint-effort action scale."""
    action_limit: float = 4.0
    """Largest planned ``|action|``: the actuator's effort limit 400 N over the action scale."""
    dt: float = 1.0 / 120.0
    """Physics step [s]."""
    decimation: int = 2
    """Physics steps per env step."""
    state_weights: tuple[float, float, float, float] = (1.0, 20.0, 0.5, 1.0)
    """LQR state weights Q (diagonal) on ``[x, theta, x_dot, theta_dot]``."""
    action_weight: float = 0.05
    """LQR action weight R (on the scaled action)."""
