"""A manager-based RL env whose parallel envs can be suspended and resumed one by one."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from isaaclab.envs import ManagerBasedRLEnv
from isaaclab.envs.common import VecEnvStepReturn
from isaaclab.utils import index_fill_

from ..managers.frozen_rows import FrozenRows
from ..managers.newton_state import add_newton_state
from ..managers.recorder_manager import SuspendableRecorderManager, SuspendableRecorderManagerCfg
from .suspendable_env_cfg import SuspendableManagerBasedRLEnvCfg, SuspendCfg

EnvIds = torch.Tensor | Sequence[int]
"""Env selection accepted by :meth:`SuspendableManagerBasedRLEnv.suspend_envs`: a 1-D integer tensor, a
list or tuple of ints, or a bool mask of shape (num_envs,)."""


class SuspendableManagerBasedRLEnv(ManagerBasedRLEnv):
    """:class:`~isaaclab.envs.ManagerBasedRLEnv` with a per-env suspended mask.

    A suspended env is frozen exactly: through every :meth:`step` its physics state (joint and body state
    of every articulation and rigid object, and the solver's warm start) keeps every bit, the actions sent
    for it are ignored, its episode length does not advance, it cannot terminate or time out, it earns a
    reward of 0 and adds nothing to the episode sums, the recorder records nothing for it, its commands
    and interval events do not tick, its observation history does not advance and the observation returned
    for it is the one it had when suspended. :meth:`resume_envs` continues from exactly that state.

    The life of the mask, in one place:

    * set by :meth:`suspend_envs` (captures the frozen rows) and cleared by :meth:`resume_envs` or by a reset
      of the env (a reset starts a new episode, which resumes it);
    * read in :meth:`_step_with_suspended`, once per manager: action, physics, episode length, termination,
      reward, recorder, command, interval event and observation.

    While no env is suspended (a host-side flag, no device sync) :meth:`step` is the parent's, bit for bit.
    With :attr:`SuspendCfg.enabled` False the env is a plain :class:`~isaaclab.envs.ManagerBasedRLEnv`.
    """

    cfg: SuspendableManagerBasedRLEnvCfg

    def __init__(self, cfg: SuspendableManagerBasedRLEnvCfg, render_mode: str | None = None, **kwargs):
        self.suspend_cfg: SuspendCfg = getattr(cfg, "suspend", None) or SuspendCfg()
        """Suspension settings (a default, disabled :class:`SuspendCfg` if the cfg has none)."""
        self.reset_count = 0
        """Number of resets so far (calls of :meth:`_reset_idx`, from :meth:`reset` or inside :meth:`step`), on
        the host: a caller compares it around a step to know whether the step reset some env, without a sync."""
        super().__init__(cfg, render_mode, **kwargs)
        self._suspended = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        """Suspended mask. Shape: (num_envs,)."""
        self._maybe_suspended = False
        """Host mirror: False guarantees that no env is suspended (the stock step runs)."""
        self._num_suspended: int | None = 0
        """Host mirror of the number of suspended envs; None when it must be re-read from the device."""
        self._frozen: SuspendedState | None = None
        if self.suspend_cfg.enabled:
            self._frozen = self._build_frozen_rows()
            print(f"[INFO] Suspension enabled, frozen per env: {self._frozen}")

    def load_managers(self):
        """Load the parent's managers; the recorder is a :class:`SuspendableRecorderManager` when it records
        active envs only (suspension enabled with ``record_active_only``) or when the cfg asks for one."""
        recorders = self.cfg.recorders
        masked = self.suspend_cfg.enabled and self.suspend_cfg.record_active_only
        if not (masked or isinstance(recorders, SuspendableRecorderManagerCfg)):
            super().load_managers()
            return
        self.cfg.recorders = None  # the parent builds a stock recorder manager without terms, replaced below
        try:
            super().load_managers()
        finally:
            self.cfg.recorders = recorders
        self.recorder_manager = SuspendableRecorderManager(recorders, self)
        print("[INFO] Recorder Manager (records active envs only): ", self.recorder_manager)

    def close(self):
        """Close the env; the recorder first, so that every exported episode is in the file when this returns
        (the parent only drops its reference, which closes nothing while a caller holds one)."""
        if not self._is_closed and isinstance(getattr(self, "recorder_manager", None), SuspendableRecorderManager):
            self.recorder_manager.close()
        super().close()

    """
    Properties.
    """

    @property
    def suspended_mask(self) -> torch.Tensor:
        """A copy of the suspended mask (bool, on :attr:`device`). Shape: (num_envs,)."""
        return self._suspended.clone()

    @property
    def active_mask(self) -> torch.Tensor:
        """A fresh mask of the envs that are not suspended (bool, on :attr:`device`). Shape: (num_envs,)."""
        return ~self._suspended

    @property
    def num_suspended(self) -> int:
        """Number of suspended envs, from a host-side mirror kept up to date by :meth:`step`.

        Between a :meth:`suspend_envs` / :meth:`resume_envs` call with device indices and the next
        :meth:`step`, reading it costs one device sync.
        """
        if self._num_suspended is None:
            self._num_suspended = int(self._suspended.sum())
            self._maybe_suspended = self._num_suspended > 0
        return self._num_suspended

    """
    Operations - suspension.
    """

    def suspend_envs(self, env_ids: EnvIds) -> None:
        """Freeze the given envs from the next :meth:`step` on. Suspending a suspended env is a no-op.

        Args:
            env_ids: A 1-D integer tensor, a list or tuple of ints, or a bool mask of shape (num_envs,).

        Raises:
            RuntimeError: If suspension is disabled in the env cfg.
            TypeError, ValueError: If ``env_ids`` is malformed (see :meth:`env_mask`).
        """
        self._require_enabled("suspend_envs")
        mask = self.env_mask(env_ids)
        if not self.obs_buf:
            raise RuntimeError("suspend_envs() needs observations to freeze: call env.reset() first.")
        newly_suspended = mask & ~self._suspended
        # apply pending kinematics and solver resets (of envs reset in the last step) now, so the captured
        # state is exactly what the next physics step would have started from
        self.sim.forward()
        self._frozen.capture(newly_suspended)
        self._suspended |= mask
        self._maybe_suspended = True
        self._num_suspended = None

    def resume_envs(self, env_ids: EnvIds) -> None:
        """Let the given envs step again from their frozen state. Resuming an active env is a no-op.

        Args:
            env_ids: A 1-D integer tensor, a list or tuple of ints, or a bool mask of shape (num_envs,).
        """
        self._require_enabled("resume_envs")
        self._suspended &= ~self.env_mask(env_ids)
        self._num_suspended = None

    def env_mask(self, env_ids: EnvIds) -> torch.Tensor:
        """Convert an env selection into a fresh bool mask of shape (num_envs,) on the env device.

        Raises:
            TypeError: If the ids are floats, or a list holds non-integers.
            ValueError: If ids are out of range, a tensor is not 1-D, or a mask has the wrong shape or device.
        """
        n = self.num_envs
        if isinstance(env_ids, torch.Tensor):
            if env_ids.dtype == torch.bool:
                if env_ids.shape != (n,):
                    raise ValueError(f"A bool env mask must have shape ({n},), got {tuple(env_ids.shape)}.")
                if env_ids.device != self._suspended.device:
                    raise ValueError(
                        f"The env mask is on '{env_ids.device}' but the env runs on '{self.device}': move it there."
                    )
                return env_ids.clone()
            if env_ids.is_floating_point() or env_ids.is_complex():
                raise TypeError(f"env ids must be integers or a bool mask, got a {env_ids.dtype} tensor.")
            if env_ids.ndim != 1:
                raise ValueError(f"env ids must be a 1-D tensor, got shape {tuple(env_ids.shape)}.")
            ids = env_ids.to(device=self.device, dtype=torch.long)
            if ids.numel() > 0:
                low, high = torch.aminmax(ids)
                if int(low) < 0 or int(high) >= n:
                    raise ValueError(f"env ids must lie in [0, {n - 1}], got values in [{int(low)}, {int(high)}].")
        elif isinstance(env_ids, (list, tuple, range)):
            bad = [i for i in env_ids if isinstance(i, bool) or not isinstance(i, int)]
            if bad:
                raise TypeError(f"env ids must be ints (use a bool tensor for a mask), got {bad[:3]!r}.")
            out_of_range = [i for i in env_ids if not 0 <= i < n]
            if out_of_range:
                raise ValueError(f"env ids must lie in [0, {n - 1}], got {out_of_range[:5]!r}.")
            ids = torch.tensor(list(env_ids), dtype=torch.long, device=self.device)
        else:
            raise TypeError(
                f"env ids must be a tensor, a list/tuple of ints or a bool mask, got {type(env_ids).__name__}."
            )
        mask = torch.zeros(n, dtype=torch.bool, device=self.device)
        mask[ids] = True
        return mask

    """
    Operations - MDP.
    """

    def step(self, action: torch.Tensor) -> VecEnvStepReturn:
        """Step all envs; suspended envs stay frozen (see the class docstring).

        Args:
            action: Actions for all envs, rows of suspended envs are ignored. Shape: (num_envs, action_dim).

        Raises:
            TypeError, ValueError: If ``action`` is not a floating tensor of shape (num_envs, action_dim).
        """
        self._check_action(action)
        if not self._maybe_suspended:
            return super().step(action)
        return self._step_with_suspended(action)

    def _step_with_suspended(self, action: torch.Tensor) -> VecEnvStepReturn:
        """:meth:`ManagerBasedRLEnv.step` with the suspended mask threaded through every manager."""
        suspended = self._suspended.clone()  # fixed for the whole step
        active = ~suspended
        susp_col = suspended.unsqueeze(1)
        frozen = self._frozen

        # -- action: suspended rows keep their action and previous action
        action = torch.where(susp_col, self.action_manager.action, action.to(self.device))
        self.action_manager.process_action(action)
        frozen.restore_actions(suspended)  # undoes prev_action <- action for suspended rows, among others
        record_mask = self._record_mask(active)
        self._record("record_pre_step", record_mask)

        is_rendering = self.sim.is_rendering
        steps_per_call = self.cfg.decimation if self._physics_handles_decimation else 1
        for _ in range(self.cfg.decimation // steps_per_call):
            self._sim_step_counter += steps_per_call
            self.action_manager.apply_action()
            self.scene.write_data_to_sim()
            self.sim.step(render=False)
            # -- physics: write the frozen state back into the suspended worlds
            frozen.restore_physics(suspended)
            self._record("record_post_physics_decimation_step", record_mask)
            if self._sim_step_counter % self.cfg.sim.render_interval == 0 and is_rendering:
                self.sim.render(skip_app_pumping=not self.render_enabled)
            self.scene.update(dt=self.physics_dt * steps_per_call)

        # -- episode length: only active envs age
        self.episode_length_buf += active
        self.common_step_counter += 1
        # -- termination: suspended envs cannot terminate or time out
        self.termination_manager.compute()
        tm = self.termination_manager
        for buf in (tm._terminated_buf, tm._truncated_buf):
            buf &= active
        tm._term_dones &= active.unsqueeze(1)
        frozen.restore_termination(suspended)
        self.reset_terminated = tm.terminated
        self.reset_time_outs = tm.time_outs
        self.reset_buf = self.reset_terminated | self.reset_time_outs
        # -- reward: 0 and no episode sums for suspended envs
        self.reward_buf = self.reward_manager.compute(dt=self.step_dt)
        self.reward_buf.masked_fill_(suspended, 0.0)
        self.reward_manager._step_reward.masked_fill_(susp_col, 0.0)
        frozen.restore_reward(suspended)

        if len(self.recorder_manager.active_terms) > 0:
            self.obs_buf = self.observation_manager.compute()
            self._record("record_post_step", record_mask)

        reset_env_ids = self.reset_buf.nonzero(as_tuple=False).squeeze(-1).int()
        if len(reset_env_ids) > 0:
            if self.cfg.compute_final_obs:
                self.extras["final_obs"] = self.observation_manager.compute()
            self.recorder_manager.record_pre_reset(reset_env_ids)
            self._reset_idx(reset_env_ids)
            if self.render_enabled and is_rendering and self.has_rtx_sensors and self.cfg.num_rerenders_on_reset > 0:
                for _ in range(self.cfg.num_rerenders_on_reset):
                    self.sim.render()
            self.recorder_manager.record_post_reset(reset_env_ids)

        # -- commands and interval events: suspended timers do not tick, so nothing resamples or fires
        frozen.hold_timers(suspended)
        self.command_manager.compute(dt=self.step_dt)
        if "interval" in self.event_manager.active_terms:
            self.event_manager.apply(mode="interval", dt=self.step_dt)
            frozen.restore_physics(suspended)  # a global-time event may have written suspended worlds
        frozen.restore_commands_and_events(suspended)
        for recorder in self.video_recorders:
            recorder.step()
        # -- observations: history does not advance, the returned rows are those at suspension
        self.obs_buf = self.observation_manager.compute(update_history=True)
        frozen.restore_observations(suspended)

        # refresh the host mirror; the device is already synchronised by the reset query above
        self._num_suspended = int(self._suspended.sum())
        self._maybe_suspended = self._num_suspended > 0
        return self.obs_buf, self.reward_buf, self.reset_terminated, self.reset_time_outs, self.extras

    def _reset_idx(self, env_ids: torch.Tensor | slice):
        """Reset envs as the parent does; a reset starts a new episode, so it also resumes the envs."""
        super()._reset_idx(env_ids)
        self.reset_count += 1
        if self._frozen is not None:
            index_fill_(self._suspended, env_ids, False)
            self._num_suspended = None

    """
    Helpers.
    """

    def _require_enabled(self, what: str) -> None:
        if not self.suspend_cfg.enabled:
            raise RuntimeError(
                f"{what}() needs suspension enabled: set env_cfg.suspend.enabled = True (or use a '-Suspendable'"
                " task id)."
            )

    def _check_action(self, action: torch.Tensor) -> None:
        """Raise a clear error for actions that Isaac Lab would choke on deep inside a manager."""
        if not isinstance(action, torch.Tensor):
            raise TypeError(f"action must be a torch.Tensor, got {type(action).__name__}.")
        expected = (self.num_envs, self.action_manager.total_action_dim)
        if tuple(action.shape) != expected:
            raise ValueError(f"action must have shape (num_envs, action_dim) = {expected}, got {tuple(action.shape)}.")
        if not action.is_floating_point():
            raise TypeError(f"action must be a floating-point tensor, got {action.dtype}.")

    def _record_mask(self, active: torch.Tensor) -> torch.Tensor | None:
        """The envs the recorder records this step: the active mask, or None (all envs) if suspended envs record."""
        return active if self.suspend_cfg.record_active_only else None

    def _record(self, hook: str, env_mask: torch.Tensor | None) -> None:
        """Call a recorder step hook for the envs in ``env_mask`` (bool, on the device; all envs if None)."""
        if env_mask is None:
            getattr(self.recorder_manager, hook)()
        else:
            getattr(self.recorder_manager, hook)(env_mask)

    def _build_frozen_rows(self) -> SuspendedState:
        return SuspendedState(self)


class SuspendedState:
    """The per-env state that suspension freezes, grouped by the step phase that restores it.

    Each group is a :class:`FrozenRows`: captured together by :meth:`capture` when envs are suspended and
    written back for the suspended envs by the ``restore_*`` methods at the matching point of the step.
    """

    def __init__(self, env: SuspendableManagerBasedRLEnv):
        n, device = env.num_envs, env.device
        self._env = env
        self.actions = FrozenRows(n, device)
        am = env.action_manager
        self.actions.add("action_manager.action", lambda: am.action)
        self.actions.add("action_manager.prev_action", lambda: am.prev_action)
        for name, term in am._terms.items():
            self.actions.add(f"action.{name}.raw_actions", lambda term=term: term.raw_actions)
            self.actions.add(f"action.{name}.processed_actions", lambda term=term: term.processed_actions)

        self.physics = FrozenRows(n, device)
        add_newton_state(self.physics, env.suspend_cfg.freeze_solver_state)

        self.termination = FrozenRows(n, device)
        self.termination.add("termination.last_episode_dones", lambda: env.termination_manager._last_episode_dones)
        self.reward = FrozenRows(n, device)
        self.reward.add("reward.episode_sums", lambda: env.reward_manager._episode_sum_buf)

        # commands: every per-env tensor a command term owns (timers, commands, metrics)
        self.commands = FrozenRows(n, device)
        self._command_timers = []
        for name, term in env.command_manager._terms.items():
            self._command_timers.append(term.time_left)
            for attr, value in vars(term).items():
                if isinstance(value, torch.Tensor) and value.ndim > 0 and value.shape[0] == n:
                    self.commands.add(f"command.{name}.{attr}", lambda term=term, attr=attr: getattr(term, attr))
            for metric in term.metrics:
                self.commands.add(f"command.{name}.metrics.{metric}", lambda term=term, m=metric: term.metrics[m])
        # interval events with per-env timers
        self._event_timers = []
        em = env.event_manager
        if "interval" in em.active_terms:
            for index, term_cfg in enumerate(em._mode_term_cfgs["interval"]):
                if not term_cfg.is_global_time:
                    self._event_timers.append(em._interval_term_time_left[index])
                    self.commands.add(
                        f"event.interval.{em.active_terms['interval'][index]}.time_left",
                        lambda index=index: em._interval_term_time_left[index],
                    )

        # observations: the returned rows and the history of each term
        self.observations = FrozenRows(n, device)
        om = env.observation_manager
        for group, terms in om.active_terms.items():
            if om.group_obs_concatenate[group]:
                self.observations.add(f"obs.{group}", lambda g=group: env.obs_buf[g])
            else:
                for term in terms:
                    self.observations.add(f"obs.{group}.{term}", lambda g=group, t=term: env.obs_buf[g][t])
            for term, delay in om._group_obs_term_delay_buffer[group].items():
                self.observations.add(
                    f"obs.{group}.{term}.delay", lambda d=delay: d._buffer, dim=1, ring_write_index=lambda d=delay: d._write_index
                )
                self.observations.add(f"obs.{group}.{term}.delay_pushes", lambda d=delay: d._num_pushes)
                self.observations.add(f"obs.{group}.{term}.delay_lags", lambda d=delay: d._time_lags)
            for term, buffer in om._group_obs_term_history_buffer[group].items():
                # the ring's env dim: 0 when frames are stacked along a feature dim, else 1 (after the ring dim)
                env_dim = 0 if buffer._stack_dim_arg is not None else 1
                self.observations.add(f"obs.{group}.{term}.history", lambda b=buffer: b._buffer, dim=env_dim)
                self.observations.add(f"obs.{group}.{term}.history_pushes", lambda b=buffer: b._num_pushes)

        self._groups = (self.actions, self.physics, self.termination, self.reward, self.commands, self.observations)

    def __str__(self) -> str:
        return "; ".join(str(g) for g in self._groups if len(g) > 0)

    def capture(self, env_mask: torch.Tensor) -> None:
        """Capture every group's rows of the envs in ``env_mask``."""
        for group in self._groups:
            group.capture(env_mask)

    def restore_actions(self, suspended: torch.Tensor) -> None:
        self.actions.restore(suspended)

    def restore_physics(self, suspended: torch.Tensor) -> None:
        self.physics.restore(suspended)

    def restore_termination(self, suspended: torch.Tensor) -> None:
        self.termination.restore(suspended)

    def restore_reward(self, suspended: torch.Tensor) -> None:
        self.reward.restore(suspended)

    def hold_timers(self, suspended: torch.Tensor) -> None:
        """Push suspended envs' command and interval-event timers to +inf so none expires this step."""
        for timer in (*self._command_timers, *self._event_timers):
            timer.masked_fill_(suspended, math.inf)

    def restore_commands_and_events(self, suspended: torch.Tensor) -> None:
        self.commands.restore(suspended)

    def restore_observations(self, suspended: torch.Tensor) -> None:
        self.observations.restore(suspended)
