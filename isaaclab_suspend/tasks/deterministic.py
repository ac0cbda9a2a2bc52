"""Deterministic physics (Isaac Lab 3.0's ``PhysicsCfg.deterministic``): its contact self-check and what it costs.

Before an env runs with the mode on, a box resting on a box is stepped on its solver with the mode on and off, and
the env is refused if the mode loses the contacts or moves the rest height.

Why: Isaac Lab's switch turns on Warp's generic deterministic mode for MuJoCo-Warp, and in that mode MuJoCo-Warp's
convex narrow phase (GJK/EPA, the box-on-box path) returns zero contacts on a GPU: a cube falls through the table
and nothing fails (mujoco_warp #1635, fix open in PR #1636; not in MuJoCo-Warp 3.12.0). The probe is a Newton model
of its own (two boxes, one world, no Isaac Lab scene), built with the task's solver settings (MuJoCo-Warp's
options, and its contact path: MuJoCo's narrow phase or Newton's ``CollisionPipeline``), so it costs a fraction of
a second once the kernels are loaded; its verdict is kept per device and settings for the process.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
from typing import TYPE_CHECKING

import warp as wp

if TYPE_CHECKING:
    from isaaclab.envs import ManagerBasedRLEnvCfg

PROBE_STEPS = 40
"""Steps the probe's box is settled for (a third of a second at 120 Hz: a box without contacts falls 0.5 m)."""
REST_HEIGHT_TOLERANCE = 1e-3
"""Most the top box's rest height may differ between the mode on and off [m] (float noise is ~1e-6 m)."""
UPSTREAM_ISSUE = "mujoco_warp #1635"
"""The upstream issue of the failure the probe guards against."""
_NOT_PROBED = ("njmax", "nconmax", "njmax_nnz", "nvmax", "save_to_mjcf", "disable_sensors")
"""Solver arguments that size (or dump) the task's own model, not the probe's, and its sensor stage (the probe has
no sensors; Isaac Lab turns the stage off with the mode, and so does the probe)."""
MEASURED_COST = {"cpu": (0.65, 1.05)}
"""Step time with the mode on over off, (least, most) of the tasks measured, per device type
(``scripts/benchmarks/bench_determinism.py``; figures in docs/results.rst)."""
PUBLISHED_COST = ("3.1x (MuJoCo-Warp's own deterministic mode) to 64.8x (Warp's generic mode with correct contacts)"
                  " on a GPU, MuJoCo-Warp PR #1636")
"""The cost published for a device where :data:`MEASURED_COST` has no figure."""
_VERDICTS: dict[tuple, ContactProbe] = {}
"""The probe's results of this process, per device, solver settings and mode (:func:`probe_contacts`)."""


@dataclasses.dataclass(frozen=True)
class ContactProbe:
    """A box (0.1 m) settled on a box for :data:`PROBE_STEPS` steps, with deterministic physics off and on."""

    contacts_off: int
    """Contacts after the last step, the mode off."""
    contacts_on: int
    """Contacts after the last step, the mode on."""
    height_off: float
    """The top box's height after the last step, the mode off [m]."""
    height_on: float
    """The top box's height after the last step, the mode on [m]."""

    @property
    def problem(self) -> str | None:
        """What the mode breaks (None: it keeps the contacts and the rest height)."""
        if self.contacts_on == 0 < self.contacts_off:
            return (f"a box resting on a box has 0 contacts with it ({self.contacts_off} without) and ends"
                    f" {self.height_off - self.height_on:.3f} m lower")
        if abs(self.height_on - self.height_off) > REST_HEIGHT_TOLERANCE:
            return (f"a box resting on a box ends at {self.height_on:.4f} m with it and at {self.height_off:.4f} m"
                    f" without ({self.contacts_on} and {self.contacts_off} contacts; tolerance"
                    f" {REST_HEIGHT_TOLERANCE} m)")
        return None


def deterministic_mode(cfg: ManagerBasedRLEnvCfg) -> wp.DeterministicMode:
    """Warp's deterministic mode Isaac Lab applies for ``cfg``'s Newton physics (its own resolution of
    ``PhysicsCfg.deterministic`` and ``NewtonCfg.deterministic_mode``, on a copy: it turns MuJoCo-Warp's sensor stage
    off); ``NOT_GUARANTEED`` for a physics that is not Newton's."""
    from isaaclab_newton.physics import NewtonCfg, NewtonManager

    physics = cfg.sim.physics
    if not isinstance(physics, NewtonCfg):
        return wp.DeterministicMode.NOT_GUARANTEED
    return NewtonManager._apply_deterministic_request(copy.deepcopy(physics))


def check_deterministic_contacts(cfg: ManagerBasedRLEnvCfg, task: str) -> ContactProbe | None:
    """Refuse, before the env is built, deterministic physics that loses contacts on ``cfg``'s solver and device
    (:func:`probe_contacts`). Nothing is probed when the mode is off or the solver is not MuJoCo-Warp's.

    Returns:
        The probe's result, or None when nothing was probed.

    Raises:
        ValueError: One line naming what the mode broke, ``--deterministic off`` and the upstream issue.
    """
    from isaaclab_newton.physics import MJWarpSolverCfg

    mode = deterministic_mode(cfg)
    solver_cfg = getattr(cfg.sim.physics, "solver_cfg", None)
    if mode == wp.DeterministicMode.NOT_GUARANTEED or not isinstance(solver_cfg, MJWarpSolverCfg):
        return None
    probe = probe_contacts(cfg, mode)
    if probe.problem is not None:
        raise ValueError(f"Task '{task}': deterministic physics (PhysicsCfg.deterministic) loses contacts on"
                         f" {cfg.sim.device}: {probe.problem} (MuJoCo-Warp's narrow phase under Warp's"
                         f" deterministic mode, {UPSTREAM_ISSUE}). Run with --deterministic off.")
    return probe


def probe_contacts(cfg: ManagerBasedRLEnvCfg, mode: wp.DeterministicMode) -> ContactProbe:
    """Settle the probe's box with ``cfg``'s MuJoCo-Warp settings and contact path on ``cfg.sim.device``, the mode
    off and ``mode``; once per process for the same device, settings and mode."""
    from newton.solvers import SolverMuJoCo

    physics = cfg.sim.physics
    accepted = set(inspect.signature(SolverMuJoCo.__init__).parameters) - {"self", "model", *_NOT_PROBED}
    options = {k: v for k, v in physics.solver_cfg.to_dict().items() if k in accepted}
    pipeline = None
    if not options.get("use_mujoco_contacts", True):
        pipeline = physics.collision_cfg.to_pipeline_args() if physics.collision_cfg is not None else {}
        pipeline = {"broad_phase": "explicit", **pipeline, "rigid_contact_max": None, "soft_contact_max": None}
    dt = cfg.sim.dt / physics.num_substeps
    key = (str(cfg.sim.device), repr(sorted(options.items())), repr(sorted((pipeline or {}).items())), dt, mode)
    if key not in _VERDICTS:
        off = _settle(cfg.sim.device, options, pipeline, dt, wp.DeterministicMode.NOT_GUARANTEED)
        on = _settle(cfg.sim.device, {**options, "disable_sensors": True}, pipeline, dt, mode)
        _VERDICTS[key] = ContactProbe(contacts_off=off[0], contacts_on=on[0], height_off=off[1], height_on=on[1])
    return _VERDICTS[key]


def _settle(device: str, options: dict, pipeline: dict | None, dt: float, mode: wp.DeterministicMode
            ) -> tuple[int, float]:
    """(contacts, top box height [m]) after :data:`PROBE_STEPS` steps of a 0.1 m box dropped 1 mm onto a fixed
    0.4 x 0.4 x 0.1 m box, on MuJoCo-Warp with ``options`` and, with ``pipeline``, Newton's ``CollisionPipeline``
    (deterministic unless ``mode`` is ``NOT_GUARANTEED``)."""
    import newton
    from newton.solvers import SolverMuJoCo

    builder = newton.ModelBuilder()
    builder.add_shape_box(-1, xform=wp.transform((0.0, 0.0, 0.05), wp.quat_identity()), hx=0.2, hy=0.2, hz=0.05)
    body = builder.add_body(xform=wp.transform((0.0, 0.0, 0.151), wp.quat_identity()))
    builder.add_shape_box(body, hx=0.05, hy=0.05, hz=0.05)
    model = builder.finalize(device=device)
    solver = SolverMuJoCo(model, **options, deterministic=mode)
    state, next_state, control = model.state(), model.state(), model.control()
    newton.eval_fk(model, model.joint_q, model.joint_qd, state)
    collision = contacts = None
    if pipeline is not None:
        collision = newton.CollisionPipeline(model, **pipeline,
                                             deterministic=mode != wp.DeterministicMode.NOT_GUARANTEED)
        contacts = collision.contacts()
    for _ in range(PROBE_STEPS):
        if collision is not None:
            collision.collide(state, contacts)
        solver.step(state, next_state, control, contacts, dt)
        state, next_state = next_state, state
    count = contacts.rigid_contact_count if contacts is not None else solver.mjw_data.nacon
    return int(count.numpy()[0]), float(state.body_q.numpy()[0][2])


def cost_line(cfg: ManagerBasedRLEnvCfg) -> str | None:
    """The start-up line of an env with deterministic physics on: the self-check's verdict (:func:`probe_contacts`,
    kept from the env's opening) and the mode's measured cost on the device (:data:`MEASURED_COST`), or that it
    is unmeasured there with the published figure; None while the mode is off."""
    from isaaclab_newton.physics import MJWarpSolverCfg

    mode = deterministic_mode(cfg)
    if mode == wp.DeterministicMode.NOT_GUARANTEED:
        return None
    check = "no contact self-check (not MuJoCo-Warp)"
    if isinstance(getattr(cfg.sim.physics, "solver_cfg", None), MJWarpSolverCfg):
        probe = probe_contacts(cfg, mode)
        check = (f"contact self-check passed (box on box: {probe.contacts_on} contacts, rest height within"
                 f" {REST_HEIGHT_TOLERANCE} m of the run without it)")
    return f"Deterministic physics on ({mode.name}): {check}; cost {cost_on(str(cfg.sim.device))}."


def cost_on(device: str) -> str:
    """What deterministic physics costs on ``device``: the measured factor (:data:`MEASURED_COST`), or that it is
    unmeasured there and the published one."""
    measured = MEASURED_COST.get(device.split(":")[0])
    if measured is None:
        return f"unmeasured on {device}; published: {PUBLISHED_COST}"
    return f"{measured[0]:.2f}x to {measured[1]:.2f}x the step time on {device} (measured, docs/results.rst)"
