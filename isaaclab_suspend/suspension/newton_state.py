"""Register the Newton physics state of every env (and the solver's persistent per-world state) for freezing."""

from __future__ import annotations

import numpy as np
import torch
from isaaclab_newton.physics import NewtonManager

from .frozen_rows import FrozenRows


def _rows_to_world(starts: np.ndarray, owner_world: np.ndarray, total: int) -> torch.Tensor:
    """World id of each row of a flat array laid out in per-owner blocks ``[starts[i], starts[i+1])``."""
    counts = np.diff(np.append(starts[: len(owner_world)], total))
    return torch.from_numpy(np.repeat(owner_world, counts).astype(np.int64))


def unsupported_solver_setting(solver_cfg) -> str | None:
    """Why suspension cannot freeze a world under ``solver_cfg`` (a Newton solver or its cfg), or None.

    MuJoCo-Warp with ``update_data_interval`` above 1 copies Newton's joint state into its own data only every
    n-th step, so a state written back into a frozen world would not reach the solver in between.
    """
    interval = getattr(solver_cfg, "update_data_interval", 1)
    if interval != 1:
        return (
            "Suspension needs MJWarpSolverCfg.update_data_interval == 1 so that restored joint states reach the"
            f" solver every step (got {interval})."
        )
    return None


def add_newton_state(frozen: FrozenRows, freeze_solver_state: bool) -> None:
    """Add Newton's joint and body state of each world, and the solver state that persists between steps.

    The rows are written back directly into Newton's state arrays (not through the asset writers), so no
    forward-kinematics or solver reset is requested for frozen worlds and the solver's warm start stays
    exactly what it was at suspension.

    Raises:
        RuntimeError: If the solver re-syncs its coordinates less often than every step, in which case a
            direct state write would not reach it.
    """
    model = NewtonManager.get_model()
    if model.world_count != frozen.num_envs:
        raise RuntimeError(f"Newton has {model.world_count} worlds but the env has {frozen.num_envs} envs.")
    joint_world = model.joint_world.numpy()
    body_world = torch.from_numpy(model.body_world.numpy().astype(np.int64))
    coord_world = _rows_to_world(model.joint_q_start.numpy(), joint_world, model.joint_coord_count)
    dof_world = _rows_to_world(model.joint_qd_start.numpy(), joint_world, model.joint_dof_count)

    def state_array(name: str):
        return lambda: getattr(NewtonManager.get_state_0(), name)

    for name, row_world in (("joint_q", coord_world), ("joint_qd", dof_world), ("body_q", body_world), ("body_qd", body_world)):
        if getattr(NewtonManager.get_state_0(), name, None) is not None and row_world.numel() > 0:
            frozen.add(f"newton.state.{name}", state_array(name), row_env=row_world)

    solver = NewtonManager._solver
    data = getattr(solver, "mjw_data", None)
    if not freeze_solver_state or data is None:
        return
    reason = unsupported_solver_setting(solver)
    if reason is not None:
        raise RuntimeError(reason)
    # MuJoCo-Warp keeps the constraint solver's warm start and actuator activations between steps.
    for name in ("qacc_warmstart", "act", "time"):
        array = getattr(data, name, None)
        if array is not None and array.size > 0:
            frozen.add(f"mujoco_warp.{name}", lambda name=name: getattr(NewtonManager._solver.mjw_data, name))
