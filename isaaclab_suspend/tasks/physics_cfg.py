"""Physics presets shared by the project's tasks (Newton, CPU or GPU)."""

from __future__ import annotations

from isaaclab_newton.physics import FeatherstoneSolverCfg, MJWarpSolverCfg, NewtonCfg

from isaaclab.utils import configclass

from isaaclab_tasks.utils import PresetCfg


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
