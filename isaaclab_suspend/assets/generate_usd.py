"""Author the project's USD assets (cartpole, cart-pusher, cube, ground, table, blocks) as text ``.usda`` files.

Stock Isaac Lab assets live on a Nucleus server; these are authored from scratch with ``pxr`` so the
tasks run offline. The physical parameters are written out in :mod:`isaaclab_suspend.assets.params`
so that model-based controllers (the embedded LQR chunk policy) use the same numbers as the simulator.

Run ``python -m isaaclab_suspend.assets.generate_usd`` to regenerate the files in ``assets/data``.
"""

from __future__ import annotations

import os

from pxr import Gf, Sdf, Usd, UsdGeom, UsdPhysics

from .params import BLOCK, CARTPOLE, CUBE, PUSHER

DATA_DIR = os.path.join(os.path.dirname(__file__), "data")

PUSHER_COLOR = (0.05, 0.2, 0.9)
"""Blue pusher paddle (linear RGB)."""
CUBE_COLOR = (0.9, 0.08, 0.03)
"""Red cube."""
MARKER_COLOR = (0.05, 0.8, 0.1)
"""Green target strip."""
GROUND_COLOR = (0.55, 0.55, 0.5)
"""Grey ground."""
MARKER_SIZE = (0.06, 0.4, 0.004)
"""Target strip: thin along x (the push axis), wide across it, flat on the floor [m]."""
TABLE_SIZE = (1.0, 1.4, 0.05)
"""Table top [m], in its own frame (Isaac Lab's scenes turn the table 90 degrees about z and centre it at
x = 0.5 m, so it spans world x in [-0.2, 1.2] m, under the arms' bases at the origin and their workspace)."""
TABLE_COLOR = (0.55, 0.4, 0.25)
"""Wooden table top."""
BLOCK_COLORS = {"blue": (0.05, 0.15, 0.9), "red": (0.9, 0.08, 0.03), "green": (0.05, 0.7, 0.1)}
"""The stacking blocks, as Isaac Lab's ``blue_block``, ``red_block``, ``green_block``."""


def _rigid_box(
    stage: Usd.Stage, path: str, size: tuple[float, float, float], mass: float, pos, collide: bool = True, color=None
):
    """Create a rigid body Xform at ``pos`` holding a box of ``size`` with explicit mass and inertia.

    ``color`` (linear RGB in [0, 1]) is authored as the box's ``displayColor``, which camera renderers show.
    """
    xform = UsdGeom.Xform.Define(stage, path)
    xform.AddTranslateOp().Set(Gf.Vec3d(*pos))
    prim = xform.GetPrim()
    UsdPhysics.RigidBodyAPI.Apply(prim)
    mass_api = UsdPhysics.MassAPI.Apply(prim)
    mass_api.CreateMassAttr(mass)
    sx, sy, sz = size
    inertia = (mass * (sy**2 + sz**2) / 12.0, mass * (sx**2 + sz**2) / 12.0, mass * (sx**2 + sy**2) / 12.0)
    mass_api.CreateDiagonalInertiaAttr(Gf.Vec3f(*inertia))
    mass_api.CreateCenterOfMassAttr(Gf.Vec3f(0.0, 0.0, 0.0))
    geom = UsdGeom.Cube.Define(stage, f"{path}/geom")
    geom.CreateSizeAttr(1.0)
    geom.AddScaleOp().Set(Gf.Vec3f(*size))
    if color is not None:
        geom.CreateDisplayColorAttr([Gf.Vec3f(*color)])
    if collide:
        UsdPhysics.CollisionAPI.Apply(geom.GetPrim())
    return prim


def _joint(stage, path, kind, body0, body1, pos0, pos1, axis=None, limits=None):
    """Create a fixed, prismatic or revolute joint between two bodies (``body0`` None means the world)."""
    cls = {"fixed": UsdPhysics.FixedJoint, "prismatic": UsdPhysics.PrismaticJoint, "revolute": UsdPhysics.RevoluteJoint}
    joint = cls[kind].Define(stage, path)
    if body0 is not None:
        joint.CreateBody0Rel().SetTargets([Sdf.Path(body0)])
    joint.CreateBody1Rel().SetTargets([Sdf.Path(body1)])
    joint.CreateLocalPos0Attr(Gf.Vec3f(*pos0))
    joint.CreateLocalPos1Attr(Gf.Vec3f(*pos1))
    joint.CreateLocalRot0Attr(Gf.Quatf(1.0))
    joint.CreateLocalRot1Attr(Gf.Quatf(1.0))
    if axis is not None:
        joint.CreateAxisAttr(axis)
    if limits is not None:
        joint.CreateLowerLimitAttr(limits[0])
        joint.CreateUpperLimitAttr(limits[1])
    return joint


def _new_stage(path: str, root: str) -> Usd.Stage:
    stage = Usd.Stage.CreateNew(path)
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)
    UsdGeom.SetStageMetersPerUnit(stage, 1.0)
    root_prim = UsdGeom.Xform.Define(stage, root).GetPrim()
    stage.SetDefaultPrim(root_prim)
    return stage


def _cart_on_rail(
    stage, root: str, rail_size, cart_size, cart_mass: float, rail_limit: float, collide_cart: bool, cart_color=None
):
    """An articulation root with a rail fixed to the world and a cart on it (prismatic ``slider_to_cart`` along x)."""
    UsdPhysics.ArticulationRootAPI.Apply(stage.GetPrimAtPath(root))
    _rigid_box(stage, f"{root}/rail", rail_size, 1.0, (0.0, 0.0, 0.0), collide=False, color=(0.3, 0.3, 0.3))
    _rigid_box(stage, f"{root}/cart", cart_size, cart_mass, (0.0, 0.0, 0.0), collide=collide_cart, color=cart_color)
    _joint(stage, f"{root}/root_joint", "fixed", None, f"{root}/rail", (0, 0, 0), (0, 0, 0))
    _joint(
        stage, f"{root}/slider_to_cart", "prismatic", f"{root}/rail", f"{root}/cart", (0, 0, 0), (0, 0, 0),
        axis="X", limits=(-rail_limit, rail_limit),
    )


def write_cartpole(path: str) -> None:
    """Cart on a rail (prismatic ``slider_to_cart`` along x), pole on the cart (revolute ``cart_to_pole`` about y)."""
    p = CARTPOLE
    stage = _new_stage(path, "/cartpole")
    _cart_on_rail(stage, "/cartpole", (8.0, 0.03, 0.03), p.cart_size, p.cart_mass, p.rail_limit, collide_cart=False)
    _rigid_box(stage, "/cartpole/pole", p.pole_size, p.pole_mass, (0.0, 0.0, p.pole_com), collide=False)
    _joint(
        stage, "/cartpole/cart_to_pole", "revolute", "/cartpole/cart", "/cartpole/pole", (0, 0, 0),
        (0, 0, -p.pole_com), axis="Y",
    )
    stage.GetRootLayer().Save()


def write_pusher(path: str) -> None:
    """A cart on a floor-level rail (prismatic ``slider_to_cart`` along x) whose paddle pushes free objects."""
    p = PUSHER
    stage = _new_stage(path, "/pusher")
    _cart_on_rail(
        stage, "/pusher", (0.05, 0.05, 0.05), p.paddle_size, p.cart_mass, p.rail_limit, collide_cart=True,
        cart_color=PUSHER_COLOR,
    )
    stage.GetRootLayer().Save()


def write_marker(path: str) -> None:
    """A flat, collision-free strip on a rail (prismatic ``slider_to_cart`` along x) that shows a target position.

    Its joint position is the target; nothing collides with it, so it only matters to cameras.
    """
    stage = _new_stage(path, "/marker")
    _cart_on_rail(
        stage, "/marker", (0.01, 0.01, 0.01), MARKER_SIZE, 0.1, PUSHER.rail_limit, collide_cart=False,
        cart_color=MARKER_COLOR,
    )
    stage.GetRootLayer().Save()


def write_cube(path: str) -> None:
    """A free rigid cube with collision, mass and inertia."""
    _write_rigid_cube(path, "/cube", CUBE.size, CUBE.mass, CUBE_COLOR)


def _write_rigid_cube(path: str, root: str, size: float, mass: float, color: tuple[float, float, float]) -> None:
    """A free rigid cube of ``size`` [m] and ``mass`` [kg] at ``root``, its inertia a solid cube's: the size is the
    geometry's own (Newton drops ``xformOp:scale`` on rigid bodies' shapes)."""
    stage = _new_stage(path, root)
    prim = stage.GetPrimAtPath(root)
    UsdPhysics.RigidBodyAPI.Apply(prim)
    mass_api = UsdPhysics.MassAPI.Apply(prim)
    mass_api.CreateMassAttr(mass)
    mass_api.CreateDiagonalInertiaAttr(Gf.Vec3f(*(mass * size * size / 6.0,) * 3))
    mass_api.CreateCenterOfMassAttr(Gf.Vec3f(0.0, 0.0, 0.0))
    geom = UsdGeom.Cube.Define(stage, f"{root}/geom")
    geom.CreateSizeAttr(size)
    geom.CreateDisplayColorAttr([Gf.Vec3f(*color)])
    UsdPhysics.CollisionAPI.Apply(geom.GetPrim())
    stage.GetRootLayer().Save()


def write_ground(path: str) -> None:
    """A static 100 m x 100 m collision plane at z = 0 (a thin box, so every solver collides with it)."""
    stage = _new_stage(path, "/ground")
    geom = UsdGeom.Cube.Define(stage, "/ground/collider")
    geom.CreateSizeAttr(1.0)
    geom.AddTranslateOp().Set(Gf.Vec3d(0.0, 0.0, -0.05))
    geom.AddScaleOp().Set(Gf.Vec3f(100.0, 100.0, 0.1))
    geom.CreateDisplayColorAttr([Gf.Vec3f(*GROUND_COLOR)])
    UsdPhysics.CollisionAPI.Apply(geom.GetPrim())
    stage.GetRootLayer().Save()


def write_table(path: str) -> None:
    """A static table top (``TABLE_SIZE``) whose upper face is at z = 0, as Isaac Lab's stack and lift scenes
    place their table; no legs (nothing stands under it)."""
    stage = _new_stage(path, "/table")
    sx, sy, sz = TABLE_SIZE
    geom = UsdGeom.Cube.Define(stage, "/table/top")
    geom.CreateSizeAttr(1.0)
    geom.AddTranslateOp().Set(Gf.Vec3d(0.0, 0.0, -sz / 2))
    geom.AddScaleOp().Set(Gf.Vec3f(sx, sy, sz))
    geom.CreateDisplayColorAttr([Gf.Vec3f(*TABLE_COLOR)])
    UsdPhysics.CollisionAPI.Apply(geom.GetPrim())
    stage.GetRootLayer().Save()


def write_block(path: str, color: tuple[float, float, float]) -> None:
    """A free rigid block (:data:`~isaaclab_suspend.assets.params.BLOCK`) of ``color``."""
    _write_rigid_cube(path, "/block", BLOCK.size, BLOCK.mass, color)


def main() -> None:
    os.makedirs(DATA_DIR, exist_ok=True)
    for name, writer in (
        ("cartpole", write_cartpole), ("pusher", write_pusher), ("cube", write_cube), ("ground", write_ground),
        ("marker", write_marker), ("table", write_table),
        *((f"{name}_block", lambda path, c=color: write_block(path, c)) for name, color in BLOCK_COLORS.items()),
    ):
        path = os.path.join(DATA_DIR, f"{name}.usda")
        if os.path.exists(path):
            os.remove(path)
        writer(path)
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
