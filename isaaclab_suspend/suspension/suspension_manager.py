"""The suspension manager: owns the suspended mask and freezes every per-env state of every part of the env."""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING

import torch
import warp as wp
from prettytable import PrettyTable

from isaaclab_newton.physics import NewtonManager

from .frozen_rows import _BITS, _UNSIGNED, FrozenRows
from .newton_state import add_newton_state
from .state_discovery import FoundTensor, discover
from .state_hash import StateHash

if TYPE_CHECKING:
    from isaaclab.envs import ManagerBasedRLEnv

    from .suspend_cfg import SuspendCfg

logger = logging.getLogger(__name__)

PARTS = ("actions", "physics", "actuators", "sensors", "terminations", "rewards", "commands", "events", "observations")
"""The parts a suspension manager freezes, by name (see :attr:`SuspendCfg.unfrozen_parts`)."""

_HELD = {
    "termination_manager._terminated_buf": False,
    "termination_manager._truncated_buf": False,
    "termination_manager._term_dones": False,
    "reward_manager._reward_buf": 0.0,
    "reward_manager._step_reward": 0.0,
}
"""Buffers whose suspended rows hold a value rather than their state at suspension: a suspended env cannot
terminate and earns 0."""

_GLOBAL_CLOCK_STAMPS = ("event_manager._reset_term_last_triggered_step_id.",)
"""Per-env stamps of the global env-step count (Isaac Lab's event manager stamps each reset term's last firing
with ``_sim_step_counter // decimation`` and compares it with the count at the next reset for
``min_step_count_between_reset``). They are not frozen but advance by one per global step an env spends
suspended, so that the global count minus a stamp is the env's own active steps since it."""


START_STATE = ("newton.state.joint_q", "newton.state.joint_qd")
"""The frozen physics tensors an episode's start hash covers: every articulation's and free body's coordinates and
velocities (body poses follow from them by forward kinematics; solver warm starts and clocks are no start)."""


def _torch(obj) -> torch.Tensor | None:
    return wp.to_torch(obj) if isinstance(obj, wp.array) else obj


class SuspensionManager:
    """Owns the suspended mask, its host mirrors and the frozen state of every part of the env.

    Per-env state is discovered, not listed: each part (the action manager and its terms, the Newton state and
    the solver's warm start, every actuator, every sensor, the termination, reward, command, event and
    observation managers with their class-based terms) is walked for tensors and Warp arrays with an env
    dimension (see :func:`~isaaclab_suspend.suspension.state_discovery.discover`). Each lands in the
    :class:`FrozenRows` group of the step phase that changes it, and the env calls one hook per phase; each
    hook is two fused foreach ops whatever the number of tensors. A tensor that looks per-env but whose
    layout is unknown is named in a warning at start-up.

    The mask's life: set by :meth:`suspend` (captures the frozen rows), cleared by :meth:`resume` or by a reset
    of the env (:meth:`on_reset`); it never changes inside a step, so the step reads it without a copy.

    At each reset it also hashes the state each reset env starts its episode from (:attr:`start_hash`).
    """

    def __init__(self, env: ManagerBasedRLEnv, cfg: SuspendCfg):
        unknown = set(cfg.unfrozen_parts) - set(PARTS)
        if unknown:
            raise ValueError(f"SuspendCfg.unfrozen_parts has unknown parts {sorted(unknown)}; known: {list(PARTS)}.")
        self._env = env
        self.cfg = cfg
        n, device = env.num_envs, env.device
        self.num_envs = n
        self.suspended = torch.zeros(n, dtype=torch.bool, device=device)
        """Suspended mask. Shape: (num_envs,)."""
        self.active = torch.ones(n, dtype=torch.bool, device=device)
        """Complement of :attr:`suspended`, kept in step with it. Shape: (num_envs,)."""
        self.maybe_suspended = False
        """Host mirror: False guarantees that no env is suspended (the stock step runs)."""
        self.suspended_steps = torch.zeros(n, dtype=torch.int32, device=device)
        """Global steps each env has spent suspended: its global-clock stamps minus this are in its own time.
        Shape: (num_envs,)."""
        self._suspended_int = torch.zeros(n, dtype=torch.int32, device=device)
        self._clocks: list[tuple[str, object]] = []
        self._num_suspended: int | None = 0
        self._rows: list[tuple] = []
        self.unclassified: list[str] = []
        """Tensors that look per-env but could not be classified (not frozen)."""

        self.groups = {g: FrozenRows(g, n, device) for g in ("action", "physics", "sensors", "termination", "reward",
                                                               "hold_timers", "events", "observations")}
        """One group per step phase, restored by the hook of that phase."""
        self.start_state = StateHash(n, device)
        """What :attr:`start_hash` covers: the physics state named in ``START_STATE`` and every command term's
        command."""
        self.start_hash = torch.zeros(n, dtype=torch.int64, device=device)
        """Hash of the state each env's current episode started from (taken right after its reset; 0 before the
        first). Shape: (num_envs,), int64."""
        self._all_ids = torch.arange(n, device=device)
        self._build()
        self.global_time_events = "interval" in env.event_manager.active_terms and any(
            c.is_global_time for c in env.event_manager._mode_term_cfgs["interval"]
        )
        """Whether some interval event fires for all envs at once (it may then write suspended worlds)."""
        if self.unclassified:
            logger.warning(
                "Suspension cannot classify these per-env-looking buffers; they are NOT frozen and a suspended env may"
                " drift through them: %s", ", ".join(self.unclassified)
            )

    """
    Mask.
    """

    @property
    def num_suspended(self) -> int:
        """Number of suspended envs (one device sync after a :meth:`suspend`/:meth:`resume`, then host-side)."""
        if self._num_suspended is None:
            self._num_suspended = int(self.suspended.sum())
            self.maybe_suspended = self._num_suspended > 0
        return self._num_suspended

    def refresh_host_mirror(self) -> None:
        """Re-read the number of suspended envs if a :meth:`suspend`/:meth:`resume` made the mirror stale."""
        if self._num_suspended is None:
            self.num_suspended  # noqa: B018  (reads the device once)

    def suspend(self, mask: torch.Tensor) -> None:
        """Capture the state of the newly suspended envs in ``mask`` (bool, (num_envs,)) and suspend them."""
        newly = mask & ~self.suspended
        for group in self.groups.values():
            group.capture(newly)
        self._set(self.suspended | mask)

    def resume(self, mask: torch.Tensor) -> None:
        """Let the envs in ``mask`` (bool, (num_envs,)) step again from their frozen state."""
        self._set(self.suspended & ~mask)

    def on_reset(self, env_ids: torch.Tensor | slice, in_step: bool) -> None:
        """A reset starts a new episode: the state it starts from is hashed into :attr:`start_hash` (device ops,
        no host sync), and the envs resume. The resets of a masked step concern only active envs (suspended ones
        cannot terminate), so there the mask is left as it is."""
        ids = (self._all_ids[env_ids] if isinstance(env_ids, slice)
               else torch.as_tensor(env_ids, device=self._all_ids.device).to(torch.long))
        self.start_hash.index_copy_(0, ids, self.start_state(ids))
        if in_step or not self.maybe_suspended:
            return
        mask = torch.zeros_like(self.suspended)
        mask[env_ids] = True
        self.resume(mask)

    def _set(self, suspended: torch.Tensor) -> None:
        self.suspended = suspended
        self.active = ~suspended
        self._suspended_int = suspended.to(torch.int32)
        for group in self.groups.values():
            group.set_mask(suspended)
        self.maybe_suspended = True
        self._num_suspended = None

    """
    Step hooks, in step order.
    """

    def after_process_action(self) -> None:
        """Suspended rows keep their action, previous action and every action term's state."""
        self.groups["action"].restore()

    def after_global_step(self) -> None:
        """The global step count advanced: so do the global-clock stamps of suspended envs (one fused add), so
        that the count minus a stamp still counts the env's own active steps."""
        clocks = [self.suspended_steps, *(_torch(getter()) for _, getter in self._clocks)]
        torch._foreach_add_(clocks, [self._suspended_int] * len(clocks))

    def after_physics_step(self) -> None:
        """Suspended worlds get their frozen physics state, solver warm start and actuator state back."""
        self.groups["physics"].restore()

    def after_scene_update(self) -> None:
        """Suspended envs' sensors (timestamps, air times, histories) are set back."""
        self.groups["sensors"].restore()

    def after_terminations(self) -> None:
        """Suspended envs do not terminate nor time out."""
        self.groups["termination"].restore()

    def after_rewards(self) -> None:
        """Suspended envs earn 0 and add nothing to the episode sums."""
        self.groups["reward"].restore()

    def before_commands_and_events(self) -> None:
        """Suspended timers are held at +inf so that no command resamples and no interval event fires."""
        self.groups["hold_timers"].restore()

    def after_commands_and_events(self) -> None:
        """Timers and command terms back to their frozen values; physics too if a global-time event ran."""
        self.groups["events"].restore()
        if self.global_time_events:
            self.groups["physics"].restore()

    def after_observations(self) -> None:
        """The returned observations, histories and delays of suspended envs are those at suspension."""
        self.groups["observations"].restore()
        if len(self.groups["sensors"]):
            self.groups["sensors"].restore()  # lazy sensors may have refreshed while observed

    """
    Discovery.
    """

    def _build(self) -> None:
        env, skip_parts = self._env, set(self.cfg.unfrozen_parts)
        am, om, em = env.action_manager, env.observation_manager, env.event_manager
        parts: list[tuple[str, str, str, object]] = [("actions", "action", "action_manager", am)]
        parts += [("actions", "action", f"action.{name}", term) for name, term in am._terms.items()]
        for asset_name, asset in env.scene.articulations.items():
            parts += [("actuators", "physics", f"actuator.{asset_name}.{name}", act) for name, act in asset.actuators.items()]
        if NewtonManager._adapter is not None:  # actuators stepped by Newton, with ping-pong states (a is current)
            parts.append(("actuators", "physics", "actuator.newton_adapter", NewtonManager._adapter))
        parts += [("sensors", "sensors", f"sensor.{name}", sensor) for name, sensor in env.scene.sensors.items()]
        for part, group, manager in (("terminations", "termination", env.termination_manager),
                                     ("rewards", "reward", env.reward_manager)):
            parts.append((part, group, f"{group}_manager", manager))
            parts += [(part, group, f"{group}.{type(c.func).__name__}", c.func) for c in manager._class_term_cfgs]
        parts.append(("commands", "events", "command_manager", env.command_manager))
        parts += [("commands", "events", f"command.{name}", term) for name, term in env.command_manager._terms.items()]
        parts.append(("events", "events", "event_manager", em))
        terms = [getattr(c.func, "__wrapped__", c.func) for cfgs in em._mode_class_term_cfgs.values() for c in cfgs]
        parts += [("events", "events", f"event.{type(term).__name__}", term) for term in terms]  # unwrapped if routed
        parts.append(("observations", "observations", "observation_manager", om))
        parts += [("observations", "observations", f"obs.{type(c.func).__name__}", c.func)
                  for cfgs in om._group_obs_class_term_cfgs.values() for c in cfgs]

        found_by_part = []
        for part, group, label, owner in parts:
            if part not in skip_parts:
                found, unknown = discover(owner, label, self.num_envs, skip=("_obs_buffer", "_states_b"))
                self.unclassified += unknown
                found_by_part += [(part, group, f) for f in found]
        # a tensor that spans its whole memory covers every view of it (e.g. the reward manager's per-term sums)
        whole = {}
        for _, _, f in found_by_part:
            t = _torch(f.getter())
            if t is not None and t.is_contiguous() and t.numel() * t.element_size() == t.untyped_storage().nbytes():
                whole.setdefault(t.untyped_storage().data_ptr(), f)
        for part, group, f in found_by_part:
            t = _torch(f.getter())
            if t is None or whole.get(t.untyped_storage().data_ptr(), f) is f:
                self._add(part, group, f, _HELD.get(f.name))
        if "physics" not in skip_parts:
            physics = self.groups["physics"]
            first = len(physics)
            add_newton_state(physics, self.cfg.freeze_solver_state)
            self._rows += [("physics", "physics", t.name, "rows by world", "") for t in physics.tensors[first:]]
            for t in physics.tensors[first:]:
                if t.name in START_STATE:
                    self.start_state.add(t.name, t.getter, t.row_env)
        for name, term in env.command_manager._terms.items():
            self.start_state.add(f"command.{name}", lambda term=term: term.command)
        if "observations" not in skip_parts:
            lazy = getattr(om, "lazy_groups", ())
            for g in om.active_terms:
                if g in lazy:  # rendered, whenever computed, from the frozen state: a stale value is never captured
                    self._rows.append(("observations", "-", f"obs.{g}", "computed from the frozen state", ""))
                elif om.group_obs_concatenate[g]:
                    self._add_returned(f"obs.{g}", lambda g=g: env.obs_buf.get(g))
                else:
                    for term in om.active_terms[g]:
                        self._add_returned(f"obs.{g}.{term}", lambda g=g, t=term: env.obs_buf.get(g, {}).get(t))

    def _add(self, part: str, group: str, f: FoundTensor, held: float | bool | None) -> None:
        if f.name.startswith(_GLOBAL_CLOCK_STAMPS):
            self._clocks.append((f.name, f.getter))
            self._rows.append((part, "global step", f.name, "rows, advanced while suspended (global-step stamp)",
                               f.shape))
            return
        row_env = None
        if f.rows_per_env > 1:
            row_env = torch.arange(self.num_envs, device=self._env.device).repeat_interleave(f.rows_per_env)
        self.groups[group].add(f.name, f.getter, f.dim, row_env, fill=held, ring_write_index=f.ring_write_index)
        layout = f.layout + (f" x{f.rows_per_env} rows per env" if f.rows_per_env > 1 else "")
        self._rows.append((part, group, f.name, layout + ("" if held is None else f", held at {held}"), f.shape or "lazy"))
        if (part == "commands" and f.name.endswith(".time_left")) or "._interval_term_time_left." in f.name:
            self.groups["hold_timers"].add(f.name, f.getter, fill=math.inf)
            self._rows.append((part, "hold_timers", f.name, "rows, held at +inf", f.shape))

    def _add_returned(self, name: str, getter) -> None:
        self.groups["observations"].add(name, getter)
        self._rows.append(("observations", "observations", name, "rows (returned)", ""))

    """
    Reporting.
    """

    def env_state(self, env_id: int) -> dict[str, torch.Tensor]:
        """A copy of every frozen tensor's rows of one env, by name (rings rotated to start at their write index).
        Buffers held at a value while suspended (rewards, termination flags) are outputs, not state, and left out.
        Global-clock stamps are given in the env's own time (minus :attr:`suspended_steps`).

        What an audit compares: two runs at the same active step of an env hold equal rows."""
        out = {name: (_torch(getter())[env_id:env_id + 1] - self.suspended_steps[env_id:env_id + 1])
               for name, getter in self._clocks}
        for group in self.groups.values():
            for t in group.tensors:
                value = group.value(t) if t.fill is None else None
                if value is None:
                    continue
                value = value.view(_BITS[value.element_size()]) if value.dtype in _UNSIGNED else value
                if t.row_env is not None:
                    rows = (t.row_env == env_id).nonzero().squeeze(1)
                else:
                    rows = torch.tensor([env_id], device=value.device)
                value = value.index_select(t.dim, rows.to(value.device))
                if t.ring_write_index is not None:
                    value = value.roll(-int(group.write_index(t).reshape(-1)[0]), dims=0)
                out[t.name] = value.clone()
        return out

    def __str__(self) -> str:
        table = PrettyTable(["part", "restored after", "per-env state", "layout", "shape"])
        table.title = f"Suspension Manager: {len(self._rows)} frozen tensors"
        table.align = "l"
        for row in self._rows:
            table.add_row(list(row))
        unfrozen = ", ".join(self.cfg.unfrozen_parts) or "none"
        unclassified = ", ".join(self.unclassified) or "none"
        return (f"{table}\nParts left unfrozen (SuspendCfg.unfrozen_parts): {unfrozen}. Unclassified: {unclassified}."
                f"\nAn episode's start hash covers: {', '.join(self.start_state.names) or 'nothing'}."
                f"\n{self.guarantee}")

    @property
    def guarantee(self) -> str:
        """What holds on this env's device: a suspended env's rows are frozen bit for bit on any device; a resumed
        env retraces the run that never suspended it only where the physics is reproducible (the CPU, or Isaac
        Lab's ``PhysicsCfg.deterministic`` on a GPU)."""
        physics = self._env.cfg.sim.physics
        reproducible = not str(self._env.device).startswith("cuda") or physics.deterministic
        resume = ("bit-exact" if reproducible else "not guaranteed: the GPU physics is not reproducible without"
                  " Isaac Lab's PhysicsCfg.deterministic (--deterministic on)")
        return f"Suspended envs frozen bit for bit on {self._env.device}; resume equivalence: {resume}."
