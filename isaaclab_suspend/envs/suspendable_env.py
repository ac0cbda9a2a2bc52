"""A manager-based RL env whose parallel envs can be suspended and resumed one by one."""

from __future__ import annotations

import contextlib
import types
from collections.abc import Sequence

import numpy as np
import torch

from isaaclab.envs import ManagerBasedRLEnv
from isaaclab.envs.common import VecEnvStepReturn
from isaaclab.utils import index_fill_

from ..recording.recorder_manager import SuspendableRecorderManager, SuspendableRecorderManagerCfg
from ..suspension.random_streams import RandomStreams
from ..suspension.suspension_manager import SuspensionManager
from ..suspension.suspend_cfg import SuspendCfg, check_suspend_cfg
from .observation_demand import DemandedObservationManager
from .suspendable_env_cfg import SuspendableManagerBasedRLEnvCfg

EnvIds = torch.Tensor | np.ndarray | Sequence[int]
"""Env selection accepted by :meth:`SuspendableManagerBasedRLEnv.suspend_envs`: a 1-D integer tensor or numpy
array (int64 ids), a list or tuple of ints, or a bool mask of shape (num_envs,) (``torch.bool`` or ``np.bool_``).
A uint8 tensor is refused: it could be either."""


class SuspendableManagerBasedRLEnv(ManagerBasedRLEnv):
    """:class:`~isaaclab.envs.ManagerBasedRLEnv` with a per-env suspended mask.

    A suspended env is frozen exactly: through every :meth:`step` its physics state (joint and body state
    of every articulation and rigid object, and the solver's warm start) keeps every bit, the actions sent
    for it are ignored, its episode length does not advance, it cannot terminate or time out, it earns a
    reward of 0 and adds nothing to the episode sums, the recorder records nothing for it, its commands
    and interval events do not tick, its observation history does not advance and the observation returned
    for it is the one it had when suspended. :meth:`resume_envs` continues from exactly that state.

    The life of the mask, in one place:

    * owned by the :class:`~isaaclab_suspend.suspension.SuspensionManager` (:attr:`suspension_manager`), with the
      frozen state of every part of the env, found at start-up by walking each part's per-env tensors;
    * set by :meth:`suspend_envs` (captures the frozen rows) and cleared by :meth:`resume_envs` or by a reset
      of the env (a reset starts a new episode, which resumes it);
    * read in ``_step_with_suspended``, the parent's step with one suspension-manager hook after each
      phase: action, physics, sensors, termination, reward, recorder, commands and events, observations.

    While no env is suspended (a host-side flag, no device sync) :meth:`step` is the parent's, bit for bit.
    With :attr:`SuspendCfg.enabled` False the env is a plain :class:`~isaaclab.envs.ManagerBasedRLEnv`.
    """

    cfg: SuspendableManagerBasedRLEnvCfg

    def __init__(self, cfg: SuspendableManagerBasedRLEnvCfg, render_mode: str | None = None, **kwargs):
        self.suspend_cfg: SuspendCfg = getattr(cfg, "suspend", None) or SuspendCfg()
        """Suspension settings (a default, disabled :class:`SuspendCfg` if the cfg has none)."""
        check_suspend_cfg(self.suspend_cfg)
        self.reset_count = 0
        """Number of resets so far (calls of ``_reset_idx``, from ``reset`` or inside :meth:`step`), on
        the host: a caller compares it around a step to know whether the step reset some env, without a sync."""
        self.suspension_manager: SuspensionManager | None = None
        """Owns the suspended mask and the frozen state (None while suspension is disabled)."""
        self.chunk_provenance = None
        """Set by the chunking policy that feeds the env (its ``ChunkProvenance``): where each env's action of the
        step came from, for the dataset recorder's ``chunk`` term; None when no chunking policy feeds it."""
        self.random_streams: RandomStreams | None = None
        """Each env's own random stream (None unless :attr:`SuspendCfg.per_env_random`)."""
        self._in_step = False
        super().__init__(cfg, render_mode, **kwargs)
        if self.suspend_cfg.enabled:
            self.suspension_manager = SuspensionManager(self, self.suspend_cfg)
            print("[INFO] Suspension Manager: ", self.suspension_manager)
        if self.random_streams is not None:
            self.random_streams.route_managers(self)
            print("[INFO] Random streams: ", self.random_streams)

    def load_managers(self):
        """Load the parent's managers; the recorder is a :class:`SuspendableRecorderManager` when it records
        active envs only (suspension enabled with ``record_active_only``) or when the cfg asks for one. With
        :attr:`SuspendCfg.per_env_random` the event manager is routed to the per-env streams first, so that the
        startup events draw from them too."""
        if self.suspend_cfg.per_env_random:
            seed = self.cfg.seed if self.cfg.seed is not None else torch.initial_seed()
            self.random_streams = RandomStreams(seed, self.num_envs, self.device)
            self.random_streams.route_events(self.event_manager)
        observations, recorders = self.cfg.observations, self.cfg.recorders
        masked = self.suspend_cfg.enabled and self.suspend_cfg.record_active_only
        own_recorder = masked or isinstance(recorders, SuspendableRecorderManagerCfg)
        # the parent builds a stock observation (and recorder) manager without terms, replaced below: Isaac Lab's
        # load_managers makes ObservationManager(self.cfg.observations) and RecorderManager(self.cfg.recorders) by
        # name, with no hook for the class, between the other managers
        self.cfg.observations = types.SimpleNamespace()  # no groups (an empty dict would leave the manager unbuilt)
        if own_recorder:
            self.cfg.recorders = None
        try:
            super().load_managers()
        finally:
            self.cfg.observations, self.cfg.recorders = observations, recorders
        self.observation_manager = DemandedObservationManager(observations, self)
        print("[INFO] Observation Manager: ", self.observation_manager)
        if hasattr(self, "_configure_gym_env_spaces"):  # the parent's were made from the manager without groups
            self._configure_gym_env_spaces()
        if self.observation_manager.lazy_groups or self.observation_manager.every_step:
            print("[INFO] Observation demand:", self.observation_manager.describe())
        if own_recorder:
            self.recorder_manager = SuspendableRecorderManager(recorders, self)
            print("[INFO] Recorder Manager (records active envs only): ", self.recorder_manager)

    def start_recording(self, cfg: SuspendableRecorderManagerCfg) -> SuspendableRecorderManager:
        """Attach a :class:`SuspendableRecorderManager` with ``cfg`` to an env built without recorder terms, before
        its first reset; its dataset file(s) are created now.

        A script that records checks first what may still fail once the env exists (a policy that does not fit
        it), so that a failed start leaves no empty file behind and overwrites no earlier dataset.

        Raises:
            RuntimeError: If the env records already.
        """
        if len(self.recorder_manager.active_terms) > 0:
            raise RuntimeError("The env records already: start_recording takes an env built without recorder terms.")
        self.cfg.recorders = cfg
        self.recorder_manager = SuspendableRecorderManager(cfg, self)
        return self.recorder_manager

    def close(self):
        """Close the env; the recorder first, so that every exported episode is in the file when this returns
        (the parent only drops its reference, which closes nothing while a caller holds one)."""
        try:
            if not self._is_closed and isinstance(getattr(self, "recorder_manager", None), SuspendableRecorderManager):
                self.recorder_manager.close()
        finally:  # the sim is released even if the last write failed (its error is raised after)
            super().close()

    """
    Properties.
    """

    @property
    def suspended_mask(self) -> torch.Tensor:
        """A copy of the suspended mask (bool, on ``device``). Shape: (num_envs,)."""
        return self._mask.clone()

    @property
    def active_mask(self) -> torch.Tensor:
        """A fresh mask of the envs that are not suspended (bool, on ``device``). Shape: (num_envs,)."""
        return ~self._mask

    @property
    def _mask(self) -> torch.Tensor:
        sm = self.suspension_manager
        return sm.suspended if sm is not None else torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)

    @property
    def episode_start_hash(self) -> torch.Tensor | None:
        """A copy of the hash of the state each env's current episode started from, taken right after its reset
        (:attr:`SuspensionManager.start_hash <isaaclab_suspend.suspension.SuspensionManager.start_hash>`), or None
        with suspension disabled. With per-env random streams, the k-th episode of env i has the same hash in every
        run of the same seed, whatever the policy. Shape: (num_envs,), int64."""
        sm = self.suspension_manager
        return None if sm is None else sm.start_hash.clone()

    @property
    def num_suspended(self) -> int:
        """Number of suspended envs, from a host-side mirror kept up to date by :meth:`step`.

        Between a :meth:`suspend_envs` / :meth:`resume_envs` call with device indices and the next
        :meth:`step`, reading it costs one device sync.
        """
        return 0 if self.suspension_manager is None else self.suspension_manager.num_suspended

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
        # apply pending kinematics and solver resets (of envs reset in the last step) now, so the captured
        # state is exactly what the next physics step would have started from
        with self._step_threads():
            self.sim.forward()
            self.suspension_manager.suspend(mask)

    def resume_envs(self, env_ids: EnvIds) -> None:
        """Let the given envs step again from their frozen state. Resuming an active env is a no-op.

        Args:
            env_ids: A 1-D integer tensor, a list or tuple of ints, or a bool mask of shape (num_envs,).
        """
        self._require_enabled("resume_envs")
        with self._step_threads():
            self.suspension_manager.resume(self.env_mask(env_ids))

    def demand_observations(self, needed: bool, on_reset: bool = False) -> None:
        """Say, before the next :meth:`step`, whether its observation feeds a model call: if not, the camera groups
        are not computed at that step and keep their last value, marked stale (see
        :class:`~isaaclab_suspend.envs.observation_demand.DemandedObservationManager`). Holds for one step.

        Args:
            needed: Whether the camera groups are needed (a host bool: the renderer draws every env at once).
            on_reset: Whether they are also needed if the step resets some env (it is served at once).
        """
        self.observation_manager.demand(needed, on_reset)

    def complete_observations(self, obs: dict) -> dict:
        """``obs`` with its stale camera groups computed now from the current state (``obs`` itself if none is)."""
        with self._step_threads():
            return self.observation_manager.complete(obs)

    def env_mask(self, env_ids: EnvIds) -> torch.Tensor:
        """Convert an env selection into a fresh bool mask of shape (num_envs,) on the env device.

        Raises:
            TypeError: If the ids are floats or a uint8 tensor (ambiguous), or a list holds non-integers.
            ValueError: If ids are out of range, a tensor is not 1-D, or a mask has the wrong shape or device.
        """
        n = self.num_envs
        if isinstance(env_ids, np.ndarray):
            if env_ids.dtype.kind not in "biu":
                raise TypeError(f"env ids must be integers or a bool mask, got a numpy {env_ids.dtype} array.")
            env_ids = torch.from_numpy(np.ascontiguousarray(env_ids)).to(self.device)
        if isinstance(env_ids, torch.Tensor):
            if env_ids.dtype == torch.uint8:
                raise TypeError(
                    "env ids: a uint8 tensor is ambiguous: pass a bool mask or int64 ids (it could be either)."
                )
            if env_ids.dtype == torch.bool:
                if env_ids.shape != (n,):
                    raise ValueError(f"A bool env mask must have shape ({n},), got {tuple(env_ids.shape)}.")
                if env_ids.device != torch.device(self.device):
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
            bad = [i for i in env_ids if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer))]
            if bad:
                raise TypeError(f"env ids must be ints (use a bool tensor for a mask), got {bad[:3]!r}.")
            out_of_range = [i for i in env_ids if not 0 <= i < n]
            if out_of_range:
                raise ValueError(f"env ids must lie in [0, {n - 1}], got {out_of_range[:5]!r}.")
            ids = torch.tensor([int(i) for i in env_ids], dtype=torch.long, device=self.device)
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
            TypeError, ValueError: If ``action`` is not a floating tensor of shape (num_envs, action_dim) on the
                env's device.
        """
        self._check_action(action)
        masked = self.suspension_manager is not None and self.suspension_manager.maybe_suspended
        streams = self.random_streams
        try:
            with self._step_threads(), (
                streams.step(self.suspension_manager.active if masked else None) if streams else contextlib.nullcontext()
            ):
                if not masked:
                    return super().step(action)
                try:
                    return self._step_with_suspended(action)
                finally:
                    self._in_step = False  # also after an error raised inside the step (e.g. the writer's OSError)
        finally:
            self.observation_manager.end_step()  # a demand holds for one step

    def _step_with_suspended(self, action: torch.Tensor) -> VecEnvStepReturn:
        """:meth:`ManagerBasedRLEnv.step` with the suspension manager's hooks between the phases.

        The body is the parent's, line for line, with one ``sm.<hook>()`` call after each phase that changes
        per-env state (``tests/envs/test_step_fingerprint.py`` fails when the installed parent's step changes).
        """
        sm = self.suspension_manager
        record_mask = sm.active if self.suspend_cfg.record_active_only else None
        self._in_step = True

        self.action_manager.process_action(action.to(self.device))
        sm.after_process_action()

        self._record("record_pre_step", record_mask)

        is_rendering = self.sim.is_rendering
        steps_per_call = self.cfg.decimation if self._physics_handles_decimation else 1
        for _ in range(self.cfg.decimation // steps_per_call):
            self._sim_step_counter += steps_per_call
            self.action_manager.apply_action()
            self.scene.write_data_to_sim()
            self.sim.step(render=False)
            sm.after_physics_step()
            self._record("record_post_physics_decimation_step", record_mask)
            if self._sim_step_counter % self.cfg.sim.render_interval == 0 and is_rendering:
                self.sim.render(skip_app_pumping=not self.render_enabled)
            self.scene.update(dt=self.physics_dt * steps_per_call)
            sm.after_scene_update()

        self.episode_length_buf += sm.active  # suspended envs do not age
        self.common_step_counter += 1
        sm.after_global_step()
        self.termination_manager.compute()
        sm.after_terminations()
        self.reset_buf = self.termination_manager.terminated | self.termination_manager.time_outs
        self.reset_terminated = self.termination_manager.terminated
        self.reset_time_outs = self.termination_manager.time_outs
        self.reward_buf = self.reward_manager.compute(dt=self.step_dt)
        sm.after_rewards()

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

        self._in_step = False
        if self.sim.consume_reset_request():
            # episode reset requested from the visualizer: all envs, suspended ones included (a reset resumes)
            not_yet_reset = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)
            index_fill_(not_yet_reset, reset_env_ids, False)
            manual_reset_ids = not_yet_reset.nonzero(as_tuple=False).squeeze(-1).int()
            if len(manual_reset_ids) > 0:
                index_fill_(self.reset_terminated, manual_reset_ids, True)
                self.recorder_manager.record_pre_reset(manual_reset_ids)
                self._reset_idx(manual_reset_ids)
                self.recorder_manager.record_post_reset(manual_reset_ids)

        sm.before_commands_and_events()
        self.command_manager.compute(dt=self.step_dt)
        if "interval" in self.event_manager.active_terms:
            self.event_manager.apply(mode="interval", dt=self.step_dt)
        sm.after_commands_and_events()
        for recorder in self.video_recorders:
            recorder.step()
        self.obs_buf = self.observation_manager.compute(update_history=True)
        sm.after_observations()

        sm.refresh_host_mirror()  # after a suspend/resume only; the reset query above has synchronised
        return self.obs_buf, self.reward_buf, self.reset_terminated, self.reset_time_outs, self.extras

    def reset(self, env_ids: torch.Tensor | slice | None = slice(None), *, seed: int | None = None,
              options: dict | None = None):
        """Reset as the parent does. With per-env random streams, a ``seed`` also keys the streams by it and counts
        every env's episodes from 0 again, so that the k-th episode of env i after ``reset(seed=s)`` starts from a
        state drawn from (s, i, k) whatever ran before."""
        if seed is not None and self.random_streams is not None:
            self.random_streams.restart(seed)
        with self._step_threads():
            return super().reset(env_ids, seed=seed, options=options)

    def _reset_idx(self, env_ids: torch.Tensor | slice):
        """Reset envs as the parent does; a reset starts a new episode, so it also resumes the envs and hashes the
        state they start from (:attr:`episode_start_hash`). Their random streams start the new episode first."""
        with self.random_streams.resetting(env_ids) if self.random_streams else contextlib.nullcontext():
            super()._reset_idx(env_ids)
        self.reset_count += 1
        if self.suspension_manager is not None:
            self.suspension_manager.on_reset(env_ids, in_step=self._in_step)

    """
    Helpers.
    """

    @contextlib.contextmanager
    def _step_threads(self):
        """Torch's intra-op threads at :attr:`SuspendCfg.cpu_step_threads` for the block on a CPU device (the env's
        own work: step, reset, suspend, resume, a late render), the caller's count restored after (a host-side
        setting: no device work, no sync)."""
        threads = self.suspend_cfg.cpu_step_threads
        before = torch.get_num_threads()
        if threads is None or threads == before or self.device != "cpu":
            yield
            return
        torch.set_num_threads(threads)
        try:
            yield
        finally:
            torch.set_num_threads(before)

    def _require_enabled(self, what: str) -> None:
        if not self.suspend_cfg.enabled:
            raise RuntimeError(
                f"{what}() needs suspension enabled: set env_cfg.suspend.enabled = True (or use a '-Suspendable'"
                " task id)."
            )

    def _check_action(self, action: torch.Tensor) -> None:
        """Raise a clear error for actions that Isaac Lab would choke on deep inside a manager, or copy to the
        device on every step (a tensor on another device: a host round trip per step on a GPU)."""
        if not isinstance(action, torch.Tensor):
            raise TypeError(f"action must be a torch.Tensor, got {type(action).__name__}.")
        expected = (self.num_envs, self.action_manager.total_action_dim)
        if tuple(action.shape) != expected:
            raise ValueError(f"action must have shape (num_envs, action_dim) = {expected}, got {tuple(action.shape)}.")
        if not action.is_floating_point():
            raise TypeError(f"action must be a floating-point tensor, got {action.dtype}.")
        device = torch.device(self.device)
        if action.device.type != device.type or device.index not in (None, action.device.index):
            raise ValueError(f"action is on {action.device}, the env runs on {self.device}: make the actions on"
                             " env.device (a copy to it on every step would synchronise with a GPU).")

    def _record(self, hook: str, env_mask: torch.Tensor | None) -> None:
        """Call a recorder step hook for the envs in ``env_mask`` (bool, on the device; all envs if None)."""
        if env_mask is None:
            getattr(self.recorder_manager, hook)()
        else:
            getattr(self.recorder_manager, hook)(env_mask)
