"""Physics presets shared by the project's tasks (Newton, CPU or GPU)."""

from __future__ import annotations

import math

from isaaclab_newton.physics import FeatherstoneSolverCfg, MJWarpSolverCfg, NewtonCfg, NewtonShapeCfg

from isaaclab.utils import configclass

from isaaclab_tasks.utils import PresetCfg


def scale_contact_buffer(physics, ratio: float) -> None:
    """Scale the rigid-contact buffer of a Newton cfg (``collision_cfg.rigid_contact_max``, a total over all envs)
    by ``ratio`` (the envs built over the envs the cfg sizes it for), when it shrinks.

    Isaac Lab's lift cfg allocates 4,000,000 contacts for its 4096 envs; at 4 envs on the CPU the contact sensors
    then sweep the whole buffer every substep (0.13 s a sweep), which scaled to the same contacts per env makes
    the task 7 times faster. Newton still grows the buffer to MuJoCo-Warp's ``nconmax`` per env if that is larger.
    """
    collision = getattr(physics, "collision_cfg", None)
    total = getattr(collision, "rigid_contact_max", None)
    if total and ratio < 1.0:
        collision.rigid_contact_max = max(1, math.ceil(total * ratio))


@configclass
class PenaltyContactShapeCfg(NewtonShapeCfg):
    """Shape defaults with the friction gain exposed: penalty-contact solvers (Featherstone) read ``kf``."""

    kf: float = 1000.0
    """Viscous friction gain below the Coulomb limit [N*s/m]. Mirrors Newton's ``ShapeConfig.kf`` default."""


@configclass
class NewtonPhysicsCfg(PresetCfg):
    """Solver presets: MuJoCo-Warp (default, deterministic on the CPU) and Featherstone.

    Contact buffers are sized for a pusher and one free cube per env; the Cartpole has no contacts.
    """

    newton_mjwarp: NewtonCfg = NewtonCfg(
        solver_cfg=MJWarpSolverCfg(njmax=60, nconmax=16, cone="pyramidal", impratio=1, integrator="implicitfast"),
        num_substeps=1,
        debug_mode=False,
        use_cuda_graph=True,
    )
    newton_featherstone: NewtonCfg = NewtonCfg(
        solver_cfg=FeatherstoneSolverCfg(), num_substeps=1, debug_mode=False, use_cuda_graph=True
    )
    default: NewtonCfg = newton_mjwarp


@configclass
class ContactPhysicsCfg(NewtonPhysicsCfg):
    """The presets for push-cube, whose light free cube (0.2 kg, 0.1 m) rests and is pushed on contacts."""

    newton_featherstone: NewtonCfg = NewtonCfg(
        solver_cfg=FeatherstoneSolverCfg(),
        num_substeps=4,
        debug_mode=False,
        use_cuda_graph=True,
        default_shape_cfg=PenaltyContactShapeCfg(kd=5.0, kf=5.0),
    )
    """Featherstone integrates Newton's penalty contacts explicitly, which is stable only while each contact's
    gains times the step stay small against the mass they act on. The resting cube stands on 4 corner contacts
    with an effective mass of 0.08 kg each (``1 / (1/m + a^2/I)``, half-size ``a``): with Newton's default gains
    (damping ``kd`` 100 N*s/m and friction ``kf`` 1000 N*s/m per contact) at dt = 1/120 s, ``4 kd dt / m_eff``
    is about 40 (stable below 2), so the first contact step throws the cube up. Four substeps (dt = 1/480 s)
    with ``kd = kf = 5`` bring it to 0.5 (``4 ke dt^2 / m_eff`` = 0.5, stable below 4): the cube rests 0.2 mm
    deep (``m g / 4 ke``) and is pushed as on MuJoCo-Warp."""
