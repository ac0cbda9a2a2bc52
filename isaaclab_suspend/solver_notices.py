"""MuJoCo-Warp's linesearch notice without ``--verbose``: kept off the console while an env runs, said once at its end.

MuJoCo-Warp prints ``linesearch iterations limit reached - please increase ls_iterations to N`` from inside its
linesearch kernel (``wp.printf`` in ``mujoco_warp._src.solver``: native stdout, which Python cannot redirect)
for each world and solver iteration whose linesearch did not converge within ``ls_iterations``; on the arm
tasks, where contacts are stiff, that is many lines per step. It is harmless: the solver takes the best step
size the linesearch found and iterates on. MuJoCo-Warp also flags such a world in ``Data.overflow``
(``OverflowType.LS_ITERATIONS``), which :func:`say_linesearch_notice_once` reads once at the end. Every other
overflow notice of MuJoCo-Warp (contacts, constraints, solver iterations) still prints as it happens.
"""

from __future__ import annotations

import contextlib
import inspect
import sys
from collections.abc import Iterator

import warp as wp

from isaaclab_newton.physics import NewtonManager

NOTICE = "linesearch iterations limit reached"
"""The text of the notice MuJoCo-Warp prints."""


def _without_linesearch_notice(factory):
    """The linesearch kernel factory, building its kernels with ``warn_overflow`` False (no printf)."""
    signature = inspect.signature(factory)

    def factory_without_notice(*args):
        bound = signature.bind(*args)
        bound.arguments["warn_overflow"] = False
        return factory(*bound.args)

    return factory_without_notice


def _linesearch_limited_worlds() -> tuple[int, int, int] | None:
    """(worlds whose linesearch hit its limit, worlds, ls_iterations) of the MuJoCo-Warp solver, or None if the
    physics is not MuJoCo-Warp. One device read."""
    data = getattr(NewtonManager._solver, "mjw_data", None)
    if data is None:
        return None
    from mujoco_warp._src.types import OverflowType

    flags = wp.to_torch(data.overflow)
    limited = int(((flags & int(OverflowType.LS_ITERATIONS)) != 0).sum())
    return limited, flags.numel(), int(NewtonManager._solver.mjw_model.opt.ls_iterations)


@contextlib.contextmanager
def without_linesearch_notice() -> Iterator[None]:
    """Within the block, MuJoCo-Warp builds its linesearch kernels without their printf (``warn_overflow`` False
    for that kernel only); the world's overflow flag is still set. A MuJoCo-Warp whose factory is not the one
    known here is left as it is (the notice prints)."""
    from mujoco_warp._src import solver as mjw_solver

    factory = getattr(mjw_solver, "_linesearch_iterative_kernel", None)
    if factory is None or "warn_overflow" not in inspect.signature(factory).parameters:
        yield
        return
    mjw_solver._linesearch_iterative_kernel = _without_linesearch_notice(factory)
    try:
        yield
    finally:
        mjw_solver._linesearch_iterative_kernel = factory


def say_linesearch_notice_once() -> None:
    """One line on stderr if some world's linesearch hit its limit: what it means, that it is harmless and how to
    see each occurrence. Call before the env closes (one device read)."""
    found = _linesearch_limited_worlds()
    if found is not None and found[0]:
        limited, worlds, iterations = found
        print(f"note: MuJoCo-Warp's linesearch reached its iteration limit ({iterations}) in {limited} of {worlds}"
              f" worlds; harmless (the solver takes the best step found and iterates on); its '{NOTICE}' lines"
              " were kept off the console (a script run with --verbose prints them).", file=sys.stderr)
