"""Observation demand: camera groups computed only at the steps whose observation feeds a model call.

A chunking policy looks at the images once per chunk, but Isaac Lab computes every observation group at every
step, and on the CPU a camera's render is most of a camera step. The chunking policy knows before each
``env.step`` whether the next observation feeds a model call (:meth:`DemandedObservationManager.demand`); a
*lazy* group (one with a camera term) that nobody demands is not computed at that step: its camera does not
render, and the group keeps its last value, marked stale (:attr:`~DemandedObservationManager.stale`).

A group is lazy only when skipping a step changes nothing else: its terms are camera images without a frame
stack or plain functions, with no history, delay, noise or modifier (each of which must see every step). All
groups are computed at every step whenever no demand was handed for it (a loop without the chunking policy sees
Isaac Lab's behaviour), a recorder is attached, or the env computes final observations.

Isaac Lab's cameras are lazy already: ``Camera.data`` renders from the current simulation state when it is read
after an update, so a group computed at a tick renders what it would have rendered had every step been computed.
A suspended env's rows of a lazy group are not frozen by the suspension manager but rendered, when computed,
from its frozen state, which gives the image it had when it was suspended.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from isaaclab.envs.mdp.observations import CameraImageBase
from isaaclab.managers import ObservationManager
from isaaclab.utils import noise

if TYPE_CHECKING:
    from isaaclab.envs import ManagerBasedRLEnv


class DemandedObservationManager(ObservationManager):
    """Isaac Lab's :class:`~isaaclab.managers.ObservationManager` that skips the lazy groups nobody demands.

    The demand holds for one step: the env clears it at the end of every ``step``, so a caller hands it before
    each ``env.step`` (:meth:`demand`). Without one, :meth:`compute` is the parent's.
    """

    def __init__(self, cfg: object, env: ManagerBasedRLEnv):
        super().__init__(cfg, env)
        self.every_step: dict[str, str] = {}
        """Groups with a camera term that are computed every step anyway, each with the reason."""
        self.lazy_groups: tuple[str, ...] = ()
        """Groups computed only when demanded (a camera term, nothing that must see every step)."""
        lazy = []
        for group in self._group_obs_term_names:
            reason = self._every_step_reason(group)
            if reason == "":
                continue  # no camera: always computed, costs little
            if reason is None:
                lazy.append(group)
            else:
                self.every_step[group] = reason
        self.lazy_groups = tuple(lazy)
        self.stale: dict[str, bool] = dict.fromkeys(self.lazy_groups, False)
        """Host flags: whether a lazy group's value is from an earlier step (not computed at the last one)."""
        self._wanted: bool | None = None
        """The demand for the current step: None (none handed: every group), True or False."""
        self._serve_resets = False
        """Whether a reset in the current step demands the observation (the reset envs are served at once)."""
        self._resets_at_demand = 0

    """
    Operations.
    """

    def demand(self, needed: bool, on_reset: bool = False) -> None:
        """Say whether the observation of the next step feeds a model call; holds for that step only.

        Args:
            needed: Whether the lazy groups are needed at the next step (host-side, no device sync).
            on_reset: Whether they are also needed when the step resets some env (its post-reset observation is
                served at once).
        """
        self._wanted, self._serve_resets = needed, on_reset
        self._resets_at_demand = self._env.reset_count

    def end_step(self) -> None:
        """Drop the demand of the step just taken (the env calls this at the end of each step)."""
        self._wanted = None

    def describe(self) -> str:
        """One line, printed when the env is built: which camera groups are computed only when demanded, which
        every step and why."""
        parts = [f"{group} every step ({reason})" for group, reason in self.every_step.items()]
        if self.lazy_groups:
            every = "with compute_final_obs, " if getattr(self._env.cfg, "compute_final_obs", False) else ""
            parts.insert(0, f"{', '.join(self.lazy_groups)} only at the steps a chunking policy demands (every step"
                            f" {every}while a recorder is attached, or without a demand)")
        return "; ".join(parts)

    def compute(self, update_history: bool = False) -> dict[str, torch.Tensor | dict[str, torch.Tensor]]:
        """The parent's, except that a lazy group nobody demands keeps its last value (marked :attr:`stale`)."""
        if self._computes_all():
            for group in self.lazy_groups:
                self.stale[group] = False
            return super().compute(update_history=update_history)
        obs_buffer = dict()
        for group in self._group_obs_term_names:
            if group in self.stale:
                obs_buffer[group] = self._obs_buffer[group]
                self.stale[group] = True
            else:
                obs_buffer[group] = self.compute_group(group, update_history=update_history)
        self._obs_buffer = obs_buffer
        return obs_buffer

    def complete(self, obs: dict) -> dict:
        """``obs`` with the stale lazy groups it holds computed now from the current state (a model call whose
        demand was not foreseen); ``obs`` itself when none is stale. The groups are stored as the last value."""
        late = [g for g in self.lazy_groups if self.stale[g] and obs.get(g) is self._obs_buffer.get(g)]
        if not late:
            return obs
        obs = dict(obs)
        for group in late:
            obs[group] = self._obs_buffer[group] = self.compute_group(group)
            self.stale[group] = False
        return obs

    """
    Helpers.
    """

    def _computes_all(self) -> bool:
        env = self._env
        return (self._wanted is None or self._wanted or not self.lazy_groups
                or self._obs_buffer is None
                or (self._serve_resets and env.reset_count != self._resets_at_demand)
                or len(env.recorder_manager.active_terms) > 0
                or getattr(env.cfg, "compute_final_obs", False))

    def _every_step_reason(self, group: str) -> str | None:
        """Why ``group`` is computed every step; None if it may be lazy; "" if it holds no camera term."""
        cameras = [c for c in self._group_obs_term_cfgs[group] if isinstance(c.func, CameraImageBase)]
        if not cameras:
            return ""
        for name, cfg in zip(self._group_obs_term_names[group], self._group_obs_term_cfgs[group]):
            if cfg.history_length > 0:
                return f"'{name}' keeps a history"
            if cfg.delay_max_lag > 0:
                return f"'{name}' is delayed"
            if cfg.noise is not None and not (isinstance(cfg.noise, noise.NoiseModelCfg) and cfg.noise.func is None):
                return f"'{name}' draws noise"
            if cfg.modifiers:
                return f"'{name}' has modifiers"
            if isinstance(cfg.func, CameraImageBase):
                if cfg.params.get("frame_stack", 1) > 1:
                    return f"'{name}' stacks frames"
            elif not callable(cfg.func) or hasattr(cfg.func, "reset"):
                return f"'{name}' is a term with state"
        return None
