"""Physical parameters of the project's assets, shared by the USD generator and model-based controllers."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CartpoleParams:
    cart_mass: float = 1.0
    """Cart mass [kg]."""
    cart_size: tuple[float, float, float] = (0.4, 0.25, 0.2)
    pole_mass: float = 0.25
    """Pole mass [kg] (uniform thin box)."""
    pole_size: tuple[float, float, float] = (0.04, 0.04, 1.0)
    pole_com: float = 0.5
    """Distance from the hinge to the pole's centre of mass [m]."""
    rail_limit: float = 4.0
    """Joint limit of the cart on its rail [m]."""


@dataclass(frozen=True)
class PusherParams:
    cart_mass: float = 2.0
    paddle_size: tuple[float, float, float] = (0.1, 0.4, 0.2)
    rail_limit: float = 3.0


@dataclass(frozen=True)
class CubeParams:
    size: float = 0.1
    mass: float = 0.2


@dataclass(frozen=True)
class BlockParams:
    size: float = 0.0406
    """Edge [m]: Isaac Lab's stacking blocks rest with their centre at z = 0.0203 m."""
    mass: float = 0.03
    """Mass [kg]: light enough for the SO-101's jaw (3.35 N*m servo) to hold by friction."""


CARTPOLE = CartpoleParams()
"""The cart-pole's parameters (the Cartpole task and its LQR planner)."""
PUSHER = PusherParams()
"""The pusher's parameters (Push-Cube)."""
CUBE = CubeParams()
"""The pushed cube's parameters (Push-Cube)."""
BLOCK = BlockParams()
"""The stacking blocks' parameters."""
