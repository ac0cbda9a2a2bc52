"""Action-chunking policy wrapper: runs a chunk model on a schedule and feeds the env one action per step."""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

import torch
from prettytable import PrettyTable

from isaaclab.utils import configclass

from ..envs import SuspendableManagerBasedRLEnv
from ..tensor_tree import select_rows
from .aggregators import Aggregator, resolve_aggregator
from .async_inference import InferenceWorker
from .chunk_queues import ChunkQueues
from .stats import ChunkingStats, stats_table
from .model import ChunkModel, accepts_prefix, virtual_seconds
from .provenance import ChunkProvenance
from .schedules import FULL_BATCH, ChunkScheduleCfg, RtcScheduleCfg, SchedulePlan, schedule_cfg

if TYPE_CHECKING:
    from torch.utils.tensorboard import SummaryWriter


class StepStatus(NamedTuple):
    """What each env did in the step of the last :meth:`ActionChunkingPolicy.act`. Bool masks of shape (N,)."""

    executing: torch.Tensor
    """Envs that executed a chunk action."""
    suspended: torch.Tensor
    """Envs that were suspended."""
    served: torch.Tensor | None
    """Envs that were served a new chunk (None: no inference this step)."""


class ActionChunkingPolicy:
    """Wraps a chunk model so that parallel envs get one action per step, inferring chunks on a schedule.

    The model maps observations to chunks of H actions, ``model(obs_rows, env_ids) -> chunk`` of shape
    (B, H, action_dim), where ``obs_rows`` is the observation dict with every tensor sliced to the B envs in
    ``env_ids``: the model only sees the rows it must serve (the contract: :class:`~.model.ChunkModel`).
    The loop is::

        policy = ActionChunkingPolicy(model, env, chunk_length=16, schedule="global_clock")
        obs, _ = env.reset()
        for _ in range(T):
            actions = policy.act(obs)           # runs the model only when the schedule says so
            obs, rew, terminated, truncated, extras = env.step(actions)
            policy.observe(terminated | truncated)   # drops the chunks of the envs that were reset

    Each env queues its chunk and executes one action per step. When an env is reset, its queue is dropped
    and the schedule (:mod:`~isaaclab_suspend.chunking.schedules`) decides what happens until it gets a new
    chunk: served at once (``any``, ``partial_batch``), holding its last action (``hold``), or suspended in the
    env until the next clock tick (``global_clock``, ``auto``, ``async``, ``rtc``). A new chunk that meets
    leftover actions is merged by the aggregator (:mod:`~isaaclab_suspend.chunking.aggregators`). Under ``async``
    and ``rtc`` the model runs in a worker thread while the env steps
    (:mod:`~isaaclab_suspend.chunking.async_inference`), so it must not share mutable state with the loop; under
    ``rtc`` a model that accepts a prefix is also passed the actions that run before its chunk lands.

    The hot path is that of a GPU loop: device bool masks, no host sync on a step unless a host-side mirror
    says the schedule may act (a clock tick, a reset in the last step, the earliest queue running out).
    Whether the env reset some env is read without a sync, from the env's host counter
    :attr:`~isaaclab_suspend.envs.SuspendableManagerBasedRLEnv.reset_count`.

    Args:
        model: The chunk model.
        env: A :class:`~isaaclab_suspend.envs.SuspendableManagerBasedRLEnv` (or a gym wrapper of one).
        cfg: The policy configuration (defaults if None).
        **overrides: Fields of ``cfg`` to override, e.g. ``chunk_length=16, schedule="global_clock"``.

    Raises:
        TypeError: If the model is not callable, the env is not a suspendable env, or an override is unknown.
        ValueError: If the chunk length is not a positive int, the refill threshold is outside [0, 1], the
            schedule or aggregator is unknown, or the schedule suspends envs and the env has suspension disabled.
    """

    def __init__(self, model: ChunkModel, env, cfg: ActionChunkingPolicyCfg | None = None, **overrides):
        cfg = _with_overrides(cfg or ActionChunkingPolicyCfg(), overrides)
        if not callable(model):
            raise TypeError(f"model must be callable as model(obs_rows, env_ids), got {type(model).__name__}.")
        env = getattr(env, "unwrapped", env)
        if not isinstance(env, SuspendableManagerBasedRLEnv):
            raise TypeError(
                f"env must be a SuspendableManagerBasedRLEnv (a '-Suspendable' task), got {type(env).__name__}."
            )
        h = cfg.chunk_length
        if isinstance(h, bool) or not isinstance(h, int) or h <= 0:
            raise ValueError(f"chunk_length must be a positive int (actions per chunk), got {h!r}.")
        if not 0.0 <= cfg.refill_threshold <= 1.0:
            raise ValueError(
                f"refill_threshold must lie in [0, 1] (a fraction of the chunk), got {cfg.refill_threshold}."
            )
        if cfg.action_bound is not None and not cfg.action_bound > 0:
            raise ValueError(f"action_bound must be a positive number (or None), got {cfg.action_bound!r}.")
        if cfg.log_interval <= 0:
            raise ValueError(f"log_interval must be a positive number of steps, got {cfg.log_interval}.")
        self.schedule = _schedule_cfg(cfg).build()
        """The schedule deciding when and on which envs the model runs."""
        if self.schedule.suspends and not env.suspend_cfg.enabled:
            raise ValueError(
                f"Schedule '{self.schedule.name}' suspends envs, but the env has suspension disabled: set"
                " env_cfg.suspend.enabled = True (every '-Suspendable' task does), or use 'hold', 'any' or"
                " 'partial_batch'."
            )
        self._aggregator: Aggregator = resolve_aggregator(cfg.aggregator)
        self.schedule.configure(cfg, h)  # its own parameters, checked

        self.cfg = cfg
        """The policy configuration."""
        self.model = model
        """The chunk model."""
        self.env: SuspendableManagerBasedRLEnv = env
        """The unwrapped env."""
        self.num_envs = env.num_envs
        """Number of envs N."""
        self.chunk_length = h
        """Actions per chunk H."""
        self.action_dim = env.action_manager.total_action_dim
        """Action dimension A."""
        self.queues = ChunkQueues(self.num_envs, h, self.action_dim, math.floor(cfg.refill_threshold * h), env.device)
        """Per-env queues of planned actions."""
        self.stats_counters = ChunkingStats(self.num_envs, self.action_dim, env.device)
        """Counters behind :attr:`stats`."""
        self.last_step: StepStatus | None = None
        """What each env did in the last :meth:`act` (fresh tensors every step); None before the first."""
        self.provenance = ChunkProvenance(self.num_envs, env.device)
        """Which model call, chunk index and age each env's action came from; the env's ``chunk_provenance``, read
        by the dataset recorder's ``chunk`` term."""
        env.chunk_provenance = self.provenance

        self._parked = torch.zeros(self.num_envs, dtype=torch.bool, device=env.device)
        """Envs this policy suspended until they are served a chunk. Shape: (N,)."""
        self._maybe_parked = False
        """Host mirror: False guarantees that :attr:`_parked` is empty."""
        self._maybe_retired = False
        """Host mirror: False guarantees that no env is retired (the queues' ``idle`` mask is empty)."""
        self._launch_stepped: torch.Tensor | None = None
        """The provenance's step counts at the launch of the background inference (``async``)."""
        self._step = 0
        """Steps since the last full :meth:`reset` (host counter: step % H == 0 is a clock tick)."""
        self._resets_pending = True
        """Host mirror: some queues were dropped since the last :meth:`act` (at start, all are empty)."""
        self._resets_at_act = 0
        self._act_end: float | None = None
        self._observe_step = getattr(model, "observe_step", None)
        """The model's optional per-step hook (:class:`~.model.ChunkModel`), None if it has none."""
        self._restarted = torch.ones(self.num_envs, dtype=torch.bool, device=env.device)
        """Envs whose episode began since the last :meth:`act`, for the model's hook. Shape: (N,)."""
        self._maybe_restarted = True
        """Host mirror: False guarantees that :attr:`_restarted` is empty."""
        self._worker = InferenceWorker(self._run_model)
        """The worker thread of the ``async`` and ``rtc`` schedules (started at their first launch)."""
        self._passes_prefix = self.schedule.passes_prefix and accepts_prefix(model)
        """Whether launches pass the model the actions that run before its chunk lands."""
        self._writer: SummaryWriter | None = None
        if cfg.log_dir is not None:
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(cfg.log_dir)

    """
    Properties.
    """

    @property
    def stats(self) -> dict:
        """Figures of the run so far (one device sync), see :meth:`ChunkingStats.as_dict`."""
        return self.stats_counters.as_dict()

    """
    Operations.
    """

    def summary(self) -> PrettyTable:
        """The figures of the run so far as a table (one device sync)."""
        return stats_table({self.schedule.name: self.stats})

    def act(self, obs: Mapping[str, torch.Tensor | Mapping]) -> torch.Tensor:
        """The actions for the next ``env.step``, running the model first if the schedule says so.

        Args:
            obs: The observation dict returned by the env (tensors of shape (N, ...), possibly nested).

        Returns:
            A new tensor of actions (never a buffer the policy writes again), shape (N, action_dim).

        Raises:
            TypeError, ValueError: If the model returns something other than a float chunk of shape
                (B, H, action_dim) with values in [-action_bound, action_bound] (checked once per inference,
                when the chunk arrives). After any error (the model's too: a time-out) the policy stays
                consistent: the next call retries the inference (under ``async`` synchronously).
        """
        if not isinstance(obs, Mapping):
            raise TypeError(f"obs must be the env's observation dict, got {type(obs).__name__}.")
        self.stats_counters.begin()
        if self._observe_step is not None:
            obs = self._feed_model(obs)
        plan = self.schedule.plan(self.queues, self._step, self._resets_pending)
        served = None
        if plan is not None:
            reads = plan.infer or plan.launch or (plan.collect and self._worker.pending is None)
            if reads and self.cfg.observation_demand:
                obs = self.env.complete_observations(obs)  # a call the demand did not foresee: rendered now
            if plan.park is not None:
                self._park(plan.park)
            if plan.collect:
                # no inference in flight: the one launched for this tick failed (its error was raised at the
                # collect): this tick infers synchronously, as the first does
                served = self._collect() if self._worker.pending is not None else self._infer(obs, FULL_BATCH)
            if plan.infer:
                served = self._infer(obs, plan)
            if plan.launch:
                self._launch(obs, plan.lead)
        suspended = self.env.suspended_mask
        executing = ~(self.queues.empty_mask() | suspended)
        self.provenance.record(executing, suspended, self.queues.cursor)
        actions = self.queues.pop(executing, self.env.action_manager.action)
        self.stats_counters.record_step(executing, suspended, ~self.queues.idle if self._maybe_retired else None,
                                        actions, served)
        self.last_step = StepStatus(executing, suspended, served)
        self._step += 1
        if self.cfg.observation_demand:  # whether the next step's observation feeds a call: else no render
            self.env.demand_observations(self._observe_step is not None or self.schedule.observes_at(
                self.queues, self._step), on_reset=self.schedule.serves_resets)
        self._resets_pending = False
        self._resets_at_act = self.env.reset_count
        self._act_end = time.perf_counter()
        return actions

    def observe(self, dones: torch.Tensor) -> None:
        """Account the step just taken and drop the chunks of the envs the env reset.

        Args:
            dones: ``terminated | truncated`` returned by ``env.step``. Shape: (N,), bool.

        Raises:
            RuntimeError: If not called after :meth:`act` and ``env.step``.
            TypeError, ValueError: If ``dones`` is not a bool tensor of shape (N,) on the env device.
        """
        if self._act_end is None:
            raise RuntimeError("observe() follows a step: call actions = policy.act(obs), then env.step(actions).")
        self._check_dones(dones)
        seconds = time.perf_counter() - self._act_end
        self._act_end = None
        self.stats_counters.record_outcome(seconds, dones)
        self.schedule.record_step(seconds)
        if self.env.reset_count != self._resets_at_act:  # the env reset some envs in this step
            self._drop(dones)
            self._mark_restarted(dones)
            self._worker.mark_stale(dones)
        if self._writer is not None and self._step % self.cfg.log_interval == 0:
            self.stats_counters.write_tensorboard(self._writer, self._step)

    def reset(self, env_ids: Sequence[int] | torch.Tensor | None = None) -> None:
        """Drop the chunks of the given envs (after resetting them in the env); all envs if None.

        A full reset also restarts the clock (the next :meth:`act` is a tick) and resumes the envs this policy
        suspended. A partial reset leaves the other envs' chunks and the clock untouched.

        Args:
            env_ids: A 1-D integer tensor, a list or tuple of ints, or a bool mask of shape (N,); None for all.
        """
        if env_ids is None:
            self._worker.discard()
            if self._maybe_retired:
                if self.schedule.suspends:
                    self.env.resume_envs(self.queues.idle)
                self.queues.idle.zero_()
                self._maybe_retired = False
            if self._maybe_parked:
                self.env.resume_envs(self._parked)
                self._parked.zero_()
                self._maybe_parked = False
            self._step = 0
            mask = torch.ones(self.num_envs, dtype=torch.bool, device=self.env.device)
        else:
            mask = self.env.env_mask(env_ids)
            self._worker.mark_stale(mask)
        self._drop(mask)
        self._mark_restarted(mask)

    def retire(self, env_mask: torch.Tensor) -> None:
        """Take the envs in ``env_mask`` (bool, shape (N,)) out of the run, e.g. once they ran their episode quota:
        they get no more chunks and execute no action, so the others' calls are not made for them. A schedule that
        suspends suspends them (frozen until the run ends); under the others (``hold``, ``any``, ...) they hold
        their last action. Either way their steps are left out of :attr:`stats`. A full :meth:`reset` brings them
        back.
        """
        self.queues.set_idle(env_mask)
        self._maybe_retired = True
        if self._maybe_parked:
            self._parked &= ~env_mask
        if self.schedule.suspends:
            self.env.suspend_envs(env_mask)

    def close(self) -> None:
        """Write the final figures to TensorBoard (if logging), close the writer and stop the inference worker."""
        self._worker.close()
        if self._writer is not None:
            self.stats_counters.write_tensorboard(self._writer, self._step)
            self._writer.close()
            self._writer = None

    """
    Internals.
    """

    def _drop(self, env_mask: torch.Tensor) -> None:
        self.queues.drop(env_mask)
        self._resets_pending = True

    def _mark_restarted(self, env_mask: torch.Tensor) -> None:
        if self._observe_step is not None:
            self._restarted |= env_mask
            self._maybe_restarted = True

    def _feed_model(self, obs: Mapping) -> Mapping:
        """Every env's observation to the model's ``observe_step`` hook; returns the observation it hands back."""
        restarted = None
        if self._maybe_restarted:  # handed over, so a fresh mask for the next ones
            restarted, self._restarted = self._restarted, torch.zeros_like(self._restarted)
            self._maybe_restarted = False
        fed = self._observe_step(obs, self.env.active_mask, restarted)
        if not isinstance(fed, Mapping):
            raise TypeError(f"The model's observe_step must return the observation dict, got {type(fed).__name__}.")
        return fed

    def _park(self, env_mask: torch.Tensor) -> None:
        if self._maybe_retired:
            env_mask = env_mask & ~self.queues.idle
        self.env.suspend_envs(env_mask)
        self._parked |= env_mask
        self._maybe_parked = True

    def _infer(self, obs: Mapping, plan: SchedulePlan) -> torch.Tensor:
        """Run the model for the plan, merge its chunk and resume the served parked envs; returns the served mask."""
        device = self.env.device
        full = plan.env_ids is None
        env_ids = torch.arange(self.num_envs, device=device) if full else plan.env_ids
        chunk, seconds, virtual = self._run_model(select_rows(obs, env_ids), env_ids)
        chunk = self._check_chunk(chunk, env_ids)
        self.queues.merge(env_ids, chunk, self._aggregator, plan.take)
        if plan.take is not None:
            served = plan.take.clone()
        else:
            served = torch.zeros(self.num_envs, dtype=torch.bool, device=device)
            served[env_ids] = True
        if self._maybe_retired:
            served &= ~self.queues.idle
        self.provenance.install(served, self.stats_counters.inference_calls)
        self.stats_counters.record_inference(len(env_ids), served, seconds, virtual)
        self.schedule.record_inference(len(env_ids), seconds)
        self._resume_served(served, all_served=full and plan.take is None)
        return served

    def _run_model(self, rows: dict, env_ids: torch.Tensor, **prefix) -> tuple[torch.Tensor, float, float]:
        """``(chunk, seconds, virtual_s)`` of one model call; ``seconds`` includes the emulated latency not slept.
        ``prefix``: the optional ``prefix=`` and ``delay=`` of the :class:`~.model.ChunkModel` contract."""
        start = time.perf_counter()
        with torch.no_grad():
            chunk = self.model(rows, env_ids, **prefix)
        virtual = virtual_seconds(self.model)
        return chunk, time.perf_counter() - start + virtual, virtual

    def _resume_served(self, served: torch.Tensor, all_served: bool) -> None:
        if self._maybe_parked:
            self.env.resume_envs(self._parked & served)
            self._parked &= ~served
            self._maybe_parked = not all_served

    def _launch(self, obs: Mapping, lead: int) -> None:
        """Start the model on all envs in the worker thread, with copies of this step's observation rows and, under
        ``rtc`` with a model that accepts it, the prefix: the next ``lead`` queued actions, which run before the
        chunk lands (none for the suspended envs, which take the chunk from its index 0)."""
        env_ids = torch.arange(self.num_envs, device=self.env.device)
        start = torch.where(self._parked, 0, lead) if self._maybe_parked else torch.full_like(env_ids, lead)
        self._launch_stepped = self.provenance.stepped.clone()
        prefix = None
        if self._passes_prefix:
            actions, delay = self.queues.prefix(lead)  # suspended envs have an empty queue: delay 0
            prefix = {"prefix": actions, "delay": delay}
        self._worker.launch(select_rows(obs, env_ids), env_ids, start, prefix)

    def _collect(self) -> torch.Tensor:
        """Wait for the background inference and install its chunk in every env not reset since the launch."""
        result = self._worker.collect()
        env_ids = torch.arange(self.num_envs, device=self.env.device)
        chunk = self._check_chunk(result.chunk, env_ids)
        served = ~(result.stale | self.queues.idle) if self._maybe_retired else ~result.stale
        self.queues.merge(env_ids, chunk, self._aggregator, served, start=result.start)
        self.provenance.install(served, self.stats_counters.inference_calls, self._launch_stepped)
        self.stats_counters.record_inference(self.num_envs, served, result.waited, result.unslept)
        self.schedule.record_inference(self.num_envs, result.seconds)
        self._resume_served(served, all_served=not result.maybe_stale)
        if result.maybe_stale:
            self._park(result.stale)  # reset during the lead: they wait for the next tick
        return served

    def _check_chunk(self, chunk, env_ids: torch.Tensor) -> torch.Tensor:
        """The model's chunk on the env device, after checking its type, shape and values (one sync)."""
        expected = (len(env_ids), self.chunk_length, self.action_dim)
        if not isinstance(chunk, torch.Tensor):
            raise TypeError(f"The model must return a torch.Tensor of shape {expected}, got {type(chunk).__name__}.")
        if tuple(chunk.shape) != expected:
            raise ValueError(
                f"The model returned a chunk of shape {tuple(chunk.shape)}; expected (len(env_ids), chunk_length,"
                f" action_dim) = {expected}. If it predicts a longer horizon, slice the first {self.chunk_length}"
                " actions; if it ignores env_ids, return one row per env id."
            )
        if not chunk.is_floating_point():
            raise TypeError(f"The model must return floating-point actions, got {chunk.dtype}.")
        # detached: a chunk that requires grad would make the queues, and every later action, part of its graph
        chunk = chunk.detach().to(device=self.env.device, dtype=self.queues.chunks.dtype)
        check_action_values(chunk, self.cfg.action_bound, env_ids)  # one sync, when a chunk arrives
        return chunk

    def _check_dones(self, dones) -> None:
        if not isinstance(dones, torch.Tensor) or dones.dtype != torch.bool:
            raise TypeError(
                "observe() takes the bool tensor terminated | truncated returned by env.step, got"
                f" {dones.dtype if isinstance(dones, torch.Tensor) else type(dones).__name__}."
            )
        if tuple(dones.shape) != (self.num_envs,) or dones.device != self.queues.cursor.device:
            raise ValueError(
                f"dones must have shape ({self.num_envs},) on {self.env.device}, got {tuple(dones.shape)} on"
                f" {dones.device}."
            )


DEFAULT_ACTION_BOUND = 1.0e6
"""Largest absolute action a policy may hand the envs unless configured otherwise (:func:`check_action_values`)."""


def check_action_values(actions: torch.Tensor, bound: float | None, env_ids: torch.Tensor,
                        remedy: str = "check the model and its inputs for these envs, or raise"
                                      " ActionChunkingPolicyCfg.action_bound") -> None:
    """Raise if a row of ``actions`` (shape (B, ...), the rows of ``env_ids``) holds a NaN, an inf or a value
    beyond ``[-bound, bound]`` (None: no bound but finiteness): the one check of what a policy hands the envs
    (chunks here, the rows ``lerobot-eval`` steps its env plugin with). One host sync.

    Raises:
        ValueError: Naming a value, its env and the envs affected, and ``remedy``.
    """
    bound = math.inf if bound is None else bound
    valid = (actions.abs() <= bound).flatten(1).all(dim=1)  # False for NaN
    if bool(valid.all()):
        return
    bad = (~valid).nonzero().squeeze(1)
    row = actions[bad[0]].abs().nan_to_num(math.inf)
    value = actions[bad[0]].flatten()[int(row.flatten().argmax())]
    ids = env_ids[bad.to(env_ids.device)].tolist()
    raise ValueError(
        f"The model returned actions outside [-action_bound, action_bound] = [-{bound:g}, {bound:g}] or"
        f" non-finite (NaN or inf), e.g. {float(value):g} for env {ids[0]} (envs {ids[:8]}"
        f"{' ...' if len(ids) > 8 else ''}): {remedy}."
    )


def _schedule_cfg(cfg: ActionChunkingPolicyCfg) -> ChunkScheduleCfg:
    """The schedule's cfg, with the 0.3 ``delay_steps``/``overlap_steps`` of the policy cfg moved onto ``rtc``'s."""
    schedule = schedule_cfg(cfg.schedule)
    if cfg.delay_steps is None and cfg.overlap_steps == 0:
        return schedule
    warnings.warn("ActionChunkingPolicyCfg.delay_steps and .overlap_steps moved to RtcScheduleCfg in 0.4.0 and go in"
                  " 0.5.0: set schedule=RtcScheduleCfg(delay_steps=..., overlap_steps=...).", DeprecationWarning,
                  stacklevel=4)
    if cfg.schedule != "rtc":
        raise ValueError("delay_steps and overlap_steps are parameters of the 'rtc' schedule: set"
                         f" schedule=RtcScheduleCfg(delay_steps=..., overlap_steps=...), not {cfg.schedule!r}.")
    return RtcScheduleCfg(delay_steps=cfg.delay_steps, overlap_steps=cfg.overlap_steps)


def _with_overrides(cfg: ActionChunkingPolicyCfg, overrides: dict) -> ActionChunkingPolicyCfg:
    unknown = sorted(set(overrides) - set(cfg.to_dict()))
    if unknown:
        raise TypeError(f"Unknown ActionChunkingPolicyCfg fields {unknown}; known: {sorted(cfg.to_dict())}.")
    return cfg.replace(**overrides) if overrides else cfg


@configclass
class ActionChunkingPolicyCfg:
    """Configuration of :class:`ActionChunkingPolicy`."""

    class_type: type = ActionChunkingPolicy
    """The class this cfg configures."""
    chunk_length: int | None = 16
    """Actions per chunk H (the model must return (B, H, action_dim)). None in a run's cfg: the run sets the
    model source's H (:func:`isaaclab_suspend.runs.make_chunking_policy` refuses any other)."""
    schedule: str | ChunkScheduleCfg | None = "global_clock"
    """The schedule: its cfg (:class:`~.schedules.GlobalClockScheduleCfg`, :class:`~.schedules.RtcScheduleCfg`, ...)
    or its name, ``any``, ``hold``, ``partial_batch``, ``global_clock``, ``auto``, ``async`` or ``rtc``, for its
    default cfg (see :mod:`~isaaclab_suspend.chunking.schedules`). None in an evaluation's cfg: the run sets each
    of its schedules."""
    aggregator: str | Callable = "replace"
    """How a new chunk is merged with leftover actions: ``replace``, ``blend``, ``temporal_ensemble``, ``soft_mask``,
    or a callable ``fn(old, new, count) -> (merged, merged_count)`` (see
    :mod:`~isaaclab_suspend.chunking.aggregators`)."""
    refill_threshold: float = 0.0
    """Fraction g of the chunk: under ``any`` and ``partial_batch`` an env requests a chunk once at most
    ``floor(g * H)`` actions are left (LeRobot's ``chunk_size_threshold``); 0 requests when the queue is empty.
    With g > 0, new chunks meet leftovers and the aggregator merges them."""
    action_bound: float | None = DEFAULT_ACTION_BOUND
    """Largest absolute action a chunk may hold, checked when a chunk arrives (one host sync per inference, none
    per step): a model returning more (3e38 passes a finite check and turns the physics state to NaN) fails with
    an error naming the envs and the value. None: only NaN and inf are refused."""
    delay_steps: int | None = None
    """Deprecated (removed in 0.5.0): :attr:`~.schedules.RtcScheduleCfg.delay_steps`."""
    overlap_steps: int = 0
    """Deprecated (removed in 0.5.0): :attr:`~.schedules.RtcScheduleCfg.overlap_steps`."""
    observation_demand: bool = False
    """Tell the env before each step whether its observation feeds a model call, so that the camera groups render
    only at those steps (:mod:`~isaaclab_suspend.envs.observation_demand`); the images a call sees are the same.
    Groups that must see every step (frame stacks, histories, a recorder attached, a model's ``observe_step``)
    still do. On in an evaluation (:class:`~isaaclab_suspend.runs.EvaluationCfg`)."""
    log_dir: str | None = None
    """TensorBoard log directory (None: no TensorBoard)."""
    log_interval: int = 100
    """Steps between two TensorBoard writes (each reads the device once)."""
