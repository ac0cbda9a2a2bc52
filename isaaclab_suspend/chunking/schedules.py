"""Chunk schedules: when to run the model, on which envs, and what envs without actions do meanwhile.

Each schedule is a small strategy that the chunking policy asks once per step, before the actions are
taken, for a :class:`SchedulePlan`. They are selected by name from :data:`SCHEDULES`:

========================  =====================================================  ===============================
name                      runs the model                                         an env that reset mid-chunk
========================  =====================================================  ===============================
``any``                   on the full batch whenever any env needs a chunk;      is served at once
                          only the requesting envs take it (IsaacLab-Arena's
                          ``ActionChunkingState``: the naive baseline)
``hold``                  on the full batch every H steps (Arena's synced        holds its last action (zero
                          batch)                                                 after a reset) until the tick
``partial_batch``         on the requesting envs only, batched together          is served at once
``global_clock``          on the full batch every H steps: exactly ceil(T / H)   is suspended until the tick,
                          calls over T steps, whatever the terminations          then gets a chunk computed from
                                                                                 its post-reset observation
``auto``                  on the full batch every H steps, plus partial          waits suspended or is served
                          batches between ticks when a cost model says they      at once, whichever the cost
                          pay                                                    model says pays more
``async``                 on the full batch every H - d steps, in the            is suspended until the tick,
                          background while the last d actions of the chunks      like ``global_clock``
                          run (LeRobot's asynchronous inference, on a clock)
``rtc``                   like ``async`` with d the inference delay in steps,    is suspended until the tick,
                          and the model told the d actions that run before its   like ``global_clock``
                          chunk lands (real-time chunking)
========================  =====================================================  ===============================

Each schedule has a cfg class beside it (:class:`GlobalClockScheduleCfg`, :class:`RtcScheduleCfg`, ...) holding its
own parameters; a cfg builds its schedule through ``class_type``, and a schedule's name stands for its default cfg
(:func:`schedule_cfg`).

The schedules read the device only on steps where a host-side mirror says something may have to happen
(a clock tick, a reset in the last step, or the earliest chunk running out), never on the other steps.
"""

from __future__ import annotations

import math
from dataclasses import MISSING, dataclass
from typing import Any, ClassVar

import torch

from isaaclab.utils import configclass

from .chunk_queues import ChunkQueues
from .cost_model import InferenceCostModel


@dataclass(frozen=True)
class SchedulePlan:
    """What the chunking policy does this step, before taking the actions."""

    infer: bool = False
    """Whether to run the model this step."""
    env_ids: torch.Tensor | None = None
    """Envs whose observation rows go to the model, unique (None: all envs). Shape: (B,)."""
    take: torch.Tensor | None = None
    """Envs that take the new chunk, a subset of :attr:`env_ids` (None: all of them). Shape: (num_envs,)."""
    park: torch.Tensor | None = None
    """Envs to suspend until they are served a chunk (None: none). Shape: (num_envs,)."""
    launch: bool = False
    """Whether to start a full-batch inference in the background, collected by a later ``collect`` step."""
    collect: bool = False
    """Whether to wait for the background inference and install its chunk."""
    lead: int = 0
    """Steps between a ``launch`` and its ``collect``: the actions an active env runs meanwhile."""


class ChunkSchedule:
    """Base class: a strategy deciding, once per step, the :class:`SchedulePlan`."""

    name: ClassVar[str]
    """Name in :data:`SCHEDULES`."""
    suspends: ClassVar[bool] = False
    """Whether the schedule suspends envs (it then needs an env with suspension enabled)."""
    passes_prefix: ClassVar[bool] = False
    """Whether a launch passes the model the actions that run before its chunk lands (to a model accepting it)."""
    serves_resets: ClassVar[bool] = False
    """Whether an env reset in a step may be served at the next one (its post-reset observation feeds a call)."""

    def __init__(self, cfg: ChunkScheduleCfg | None = None):
        self.cfg = cfg if cfg is not None else schedule_cfg(self.name)
        """The schedule's parameters."""

    def configure(self, policy_cfg: Any, chunk_length: int) -> None:
        """Check this schedule's parameters (:attr:`cfg`) against the policy's cfg (an
        :class:`~.chunking_policy.ActionChunkingPolicyCfg`, not imported: it imports this module) for chunks of
        ``chunk_length`` actions.

        Raises:
            ValueError: If a parameter does not suit the schedule or the policy.
        """

    def plan(self, queues: ChunkQueues, step: int, resets_pending: bool) -> SchedulePlan | None:
        """The plan for this step, or None to just execute the queued actions.

        Args:
            queues: The chunk queues of all envs.
            step: Steps taken since the policy was (fully) reset; step 0, H, 2H, ... are clock ticks.
            resets_pending: Whether some envs were reset since the last step (their queues are empty).
        """
        raise NotImplementedError

    def record_inference(self, batch_size: int, seconds: float) -> None:
        """Measured latency of an inference call on ``batch_size`` rows (for schedules that learn costs)."""

    def record_step(self, seconds: float) -> None:
        """Measured simulation time of an env step (for schedules that learn costs)."""

    def observes_at(self, queues: ChunkQueues, step: int) -> bool:
        """Whether the plan at ``step`` may hand the model the observation of the env step before it, resets aside
        (:attr:`ChunkSchedule.serves_resets`): that step's observation demand. Host-side, no sync; a step foreseen wrongly only
        costs a late render (the policy completes a stale observation before a call)."""
        return True


FULL_BATCH = SchedulePlan(infer=True)
"""Run the model on every env; every env takes the chunk."""


def _is_tick(queues: ChunkQueues, step: int) -> bool:
    return step % queues.chunk_length == 0


class AnySchedule(ChunkSchedule):
    """Full-batch inference whenever any env requests a chunk; only the requesting envs take it.

    This is IsaacLab-Arena's ``ActionChunkingState`` trigger (``if env_requires_new_chunk.any()``). Once
    asynchronous resets desynchronise the envs' chunk phases, some env requests a chunk at almost every
    step, and every step pays a full-batch inference.
    """

    name = "any"
    serves_resets = True

    def observes_at(self, queues: ChunkQueues, step: int) -> bool:
        return queues.may_request()

    def plan(self, queues: ChunkQueues, step: int, resets_pending: bool) -> SchedulePlan | None:
        requests = queues.requests(resets_pending)
        return None if requests is None else SchedulePlan(infer=True, take=requests)


class HoldSchedule(ChunkSchedule):
    """Full-batch inference every H steps; envs without actions hold their last action meanwhile.

    IsaacLab-Arena's synced-batch workaround: it fetches when all envs need a chunk, which, with envs
    starting in phase, is every H steps. Nothing is suspended: a waiting env keeps being simulated with
    the action manager's last action (zero after a reset, which for position targets means drift).
    """

    name = "hold"

    def observes_at(self, queues: ChunkQueues, step: int) -> bool:
        return _is_tick(queues, step)

    def plan(self, queues: ChunkQueues, step: int, resets_pending: bool) -> SchedulePlan | None:
        return FULL_BATCH if _is_tick(queues, step) else None


class PartialBatchSchedule(ChunkSchedule):
    """Inference on the requesting envs only, batched together, whenever some env requests a chunk."""

    name = "partial_batch"
    serves_resets = True

    def observes_at(self, queues: ChunkQueues, step: int) -> bool:
        return queues.may_request()

    def plan(self, queues: ChunkQueues, step: int, resets_pending: bool) -> SchedulePlan | None:
        requests = queues.requests(resets_pending)
        if requests is None:
            return None
        return SchedulePlan(infer=True, env_ids=requests.nonzero().squeeze(1))


class GlobalClockSchedule(ChunkSchedule):
    """Full-batch inference on a global tick every H steps; an env reset mid-chunk is suspended until then.

    Over T steps the model runs exactly ceil(T / H) times whatever the terminations. A suspended env is
    frozen (no physics, no episode time, no reward, no recording), so waiting costs it nothing but wall
    time, and at the tick it is resumed with a fresh chunk computed from its post-reset observation.
    """

    name = "global_clock"
    suspends = True

    def observes_at(self, queues: ChunkQueues, step: int) -> bool:
        return _is_tick(queues, step)

    def plan(self, queues: ChunkQueues, step: int, resets_pending: bool) -> SchedulePlan | None:
        if _is_tick(queues, step):
            return FULL_BATCH
        if resets_pending:
            return SchedulePlan(park=queues.waiting_mask())
        return None


class AutoSchedule(ChunkSchedule):
    """A global clock that also serves waiting envs between ticks when that raises useful env-steps per second.

    At each step after resets, the k envs without actions either wait suspended for the next tick, s steps
    away, or are served now by a partial batch. Serving buys ``k * s`` active env-steps for ``L(k)`` seconds
    of inference; it pays when that marginal rate beats the rate of the run,
    ``k * s / L(k) > N * H / (H * t_step + L(N))``, with the latency ``L`` and step time ``t_step`` fitted
    online by an :class:`InferenceCostModel`. Envs served between ticks take the next tick's chunk merged
    with their leftovers, so all envs stay on the clock. With a latency that does not grow with the batch
    size (a fixed 200 ms) it waits like ``global_clock``; with small batches cheap and env steps expensive it
    serves like ``partial_batch``, without the per-step calls of ``partial_batch`` when few envs wait.

    Args:
        cfg: The schedule's cfg (defaults if None).
        cost_model: The cost model (a fresh :class:`InferenceCostModel` if None).
    """

    name = "auto"
    suspends = True
    serves_resets = True

    def __init__(self, cfg: AutoScheduleCfg | None = None, cost_model: InferenceCostModel | None = None):
        super().__init__(cfg)
        self.cost_model = cost_model or InferenceCostModel()
        """Fitted inference latency and step time."""

    def plan(self, queues: ChunkQueues, step: int, resets_pending: bool) -> SchedulePlan | None:
        if _is_tick(queues, step):
            return FULL_BATCH
        if not resets_pending:
            return None
        waiting = queues.waiting_mask()
        num_waiting = int(waiting.sum())
        if num_waiting == 0:
            return None
        steps_to_tick = queues.chunk_length - step % queues.chunk_length
        if self.serve_now(num_waiting, steps_to_tick, queues.num_envs, queues.chunk_length):
            return SchedulePlan(infer=True, env_ids=waiting.nonzero().squeeze(1))
        return SchedulePlan(park=waiting)

    def observes_at(self, queues: ChunkQueues, step: int) -> bool:
        return _is_tick(queues, step)

    def serve_now(self, num_waiting: int, steps_to_tick: int, num_envs: int, chunk_length: int) -> bool:
        """Whether serving ``num_waiting`` envs now beats letting them wait ``steps_to_tick`` steps."""
        cost = self.cost_model
        if not cost.ready:
            return False
        gain = num_waiting * steps_to_tick
        return gain > cost.clock_rate(num_envs, chunk_length) * cost.latency(num_waiting)

    def record_inference(self, batch_size: int, seconds: float) -> None:
        self.cost_model.record_inference(batch_size, seconds)

    def record_step(self, seconds: float) -> None:
        self.cost_model.record_step(seconds)


class AsyncClockSchedule(ChunkSchedule):
    """A global clock whose inference overlaps the simulation: the chunk for a tick is computed in the
    background from the observation d steps before it, while every active env runs the last d actions of its
    chunk, so a latency of up to d env steps costs no waiting.

    The lead d is :attr:`AsyncScheduleCfg.lead_steps`, by default the policy's refill point
    ``floor(refill_threshold * H)`` (LeRobot's ``chunk_size_threshold``; H // 4 when the threshold is 0), and at
    most H / 2. Ticks come every H - d steps: an env that ran during the lead takes the
    new chunk from its action d on (the first d were meant for steps it has run already), an env that was
    suspended during the lead, whose time stood still, from action 0. An env reset during the lead is not
    served the chunk planned from its previous episode: it waits suspended for the next tick, as under
    ``global_clock``. The first tick (step 0) runs synchronously.
    """

    name = "async"
    suspends = True

    def plan(self, queues: ChunkQueues, step: int, resets_pending: bool) -> SchedulePlan | None:
        lead = self.lead(queues.chunk_length, queues.refill_at)
        period = queues.chunk_length - lead
        if step == 0:
            return SchedulePlan(infer=True, launch=period == lead, lead=lead)
        collect = step % period == 0
        launch = step % period == period - lead or (collect and period == lead)
        park = queues.waiting_mask() if resets_pending and not collect else None
        if not (collect or launch or park is not None):
            return None
        return SchedulePlan(park=park, launch=launch, collect=collect, lead=lead)

    def observes_at(self, queues: ChunkQueues, step: int) -> bool:
        """The first tick and the launches (a collect installs a chunk computed from an earlier observation)."""
        lead = self.lead(queues.chunk_length, queues.refill_at)
        period = queues.chunk_length - lead
        return step == 0 or step % period == period - lead

    def configure(self, policy_cfg: Any, chunk_length: int) -> None:
        """The lead (at most H / 2); only the ``replace`` aggregator suits the installs."""
        d = self.cfg.lead_steps
        if d is not None and (isinstance(d, bool) or not isinstance(d, int) or d < 1):
            raise ValueError(f"AsyncScheduleCfg.lead_steps must be None (from refill_threshold) or an int >= 1,"
                             f" got {d!r}.")
        self.lead(chunk_length, math.floor(policy_cfg.refill_threshold * chunk_length))
        if policy_cfg.aggregator != "replace":
            raise ValueError(
                "Schedule 'async' installs each chunk at the tick its leftovers run out, so no aggregator"
                f" applies: use aggregator='replace', got {policy_cfg.aggregator!r}."
            )

    def lead(self, chunk_length: int, refill_at: int) -> int:
        """Steps d between launching an inference and installing its chunk: :attr:`AsyncScheduleCfg.lead_steps`,
        else the queues' refill point ``refill_at``, else H // 4.

        Raises:
            ValueError: If d exceeds H / 2 (the next launch would come before the tick it follows).
        """
        lead = self.cfg.lead_steps or refill_at or max(1, chunk_length // 4)
        if 2 * lead > chunk_length:
            raise ValueError(
                f"Schedule 'async' runs the last d = {lead} actions of a chunk while the next one is computed and"
                f" needs d <= H / 2 = {chunk_length / 2:g}: lower lead_steps or refill_threshold (at most 0.5)."
            )
        return lead


class RealTimeChunkSchedule(ChunkSchedule):
    """Real-time chunking on the global clock (Black et al. 2025): the next chunk is launched in the background
    when the envs' queues hold d actions, d = ceil(latency / step time) steps, and the model is told those d
    actions (the prefix: they run before its chunk can land, see :class:`~.model.ChunkModel`), so its chunk
    continues them; it is installed from its index d on, when the queues run out.

    The lead is ``min(d, H // 2)``: with H >= 2d every env acts every step; otherwise the launch comes right
    after each install and the loop waits at the tick only for the latency the H // 2 steps do not cover.
    Either way the chunk takes over exactly ``lead`` steps after its observation, counted in env steps. d is
    :attr:`delay_steps` when set (exact), else estimated online before each launch from the measured latency
    of a full-batch call (the emulated part included, which with a virtual latency is exact) and the measured
    step time, by an :class:`InferenceCostModel`. Envs suspended at the launch take the chunk from index 0 with
    no prefix (their time stood still); envs reset during the lead wait suspended for the next launch, as
    under ``async``. The first tick (step 0) runs synchronously; a lead of 0 (no latency) runs each tick
    synchronously, like ``global_clock``.

    With :attr:`overlap_steps` W > 0 (RTC's soft-masked region) the chunk lands W steps before the queues run out:
    the launch comes when they hold d + W actions, the model is told the d committed ones, and the aggregator
    merges the W leftovers of the running chunk with the new chunk's actions for the same steps (``soft_mask``
    moves from the old plan to the new one over them). Launches come every H - d - W steps; W is cut where it
    would leave no step between a landing and the next launch.

    Args:
        cfg: The schedule's cfg: the delay d and the overlap W (defaults if None).
    """

    name = "rtc"
    suspends = True
    passes_prefix = True

    def __init__(self, cfg: RtcScheduleCfg | None = None):
        super().__init__(cfg)
        self.delay_steps = self.cfg.delay_steps
        """The delay d in env steps; None: estimated online from the measured latency and step time."""
        self.overlap_steps = self.cfg.overlap_steps
        """Leftover actions W of the running chunk that the new chunk meets when it lands (0: it lands when the
        queues run out)."""
        self.cost_model = InferenceCostModel()
        """Measured latency and step time."""
        self._next_tick = 0
        """Host: step at which the next chunk lands (the queues of the envs running the current chunk then hold
        the overlap's actions)."""
        self._in_flight = False
        """Host: whether a launched inference waits for the next tick."""
        self._lead = 0
        """Host: lead of the inference in flight [steps]."""

    def configure(self, policy_cfg: Any, chunk_length: int) -> None:
        """Check the delay d and the overlap W (in [0, H))."""
        d, w = self.delay_steps, self.overlap_steps
        if d is not None and (isinstance(d, bool) or not isinstance(d, int) or d < 0):
            raise ValueError(f"delay_steps must be None (estimated) or an int >= 0 (env steps), got {d!r}.")
        if isinstance(w, bool) or not isinstance(w, int) or not 0 <= w < chunk_length:
            raise ValueError(f"overlap_steps must be an int in [0, chunk_length) = [0, {chunk_length}), got {w!r}.")

    def plan(self, queues: ChunkQueues, step: int, resets_pending: bool) -> SchedulePlan | None:
        h = queues.chunk_length
        if step == 0:
            self._next_tick, self._in_flight = 0, False
        collect = self._in_flight and step == self._next_tick
        lead = 0
        if collect:  # the chunk launched `lead` steps ago lands: it runs H - lead steps from its index lead
            self._next_tick = step + h - self._lead - self._overlap(queues, self._lead)
            self._in_flight = False
        if not self._in_flight and step >= self._next_tick - self.lead(queues):
            lead = self._next_tick - step
            if lead == 0:  # nothing runs while it is computed: a synchronous tick
                self._next_tick = step + h - self._overlap(queues, 0)
                return FULL_BATCH
            self._in_flight, self._lead = True, lead
        launch = lead > 0
        park = queues.empty_mask() if resets_pending and not collect else None
        if not (collect or launch or park is not None):
            return None
        return SchedulePlan(park=park, launch=launch, collect=collect, lead=lead)

    def observes_at(self, queues: ChunkQueues, step: int) -> bool:
        """The launches and synchronous ticks as :meth:`plan` will find them, with the delay known so far."""
        if step == 0:
            return True
        if self._in_flight:  # a launch right at the landing comes only when nothing is left between the two
            h = queues.chunk_length
            return step == self._next_tick and h - self._lead - self._overlap(queues, self._lead) <= self.lead(queues)
        return step >= self._next_tick - self.lead(queues)

    def lead(self, queues: ChunkQueues) -> int:
        """Steps between the next launch and its tick: ``min(d, H // 2)`` (0 before anything was measured)."""
        d = self.delay_steps
        if d is None:
            cost = self.cost_model
            if not cost.ready or cost.step_time <= 0.0:
                return 0
            d = math.ceil(cost.latency(queues.num_envs) / cost.step_time - 1e-9)
        return min(d, queues.chunk_length // 2)

    def _overlap(self, queues: ChunkQueues, lead: int) -> int:
        """The overlap W of a chunk installed from index ``lead``: :attr:`overlap_steps`, cut so that the next lead
        fits between its landing and the next one (the next launch may come at the landing, not before; after a
        synchronous tick, or before one, a step later)."""
        next_lead = self.lead(queues)
        spare = queues.chunk_length - lead - next_lead - (lead == 0 or next_lead == 0)
        return max(0, min(self.overlap_steps, spare))

    def record_inference(self, batch_size: int, seconds: float) -> None:
        self.cost_model.record_inference(batch_size, seconds)

    def record_step(self, seconds: float) -> None:
        self.cost_model.record_step(seconds)


@configclass
class ChunkScheduleCfg:
    """Base cfg of a schedule: ``class_type`` builds it (:meth:`build`)."""

    class_type: type[ChunkSchedule] = MISSING
    """The schedule this cfg configures."""

    def build(self) -> ChunkSchedule:
        """A new schedule of this cfg."""
        return self.class_type(self)


@configclass
class AnyScheduleCfg(ChunkScheduleCfg):
    """Cfg of :class:`AnySchedule` (no parameters)."""

    class_type: type[ChunkSchedule] = AnySchedule


@configclass
class HoldScheduleCfg(ChunkScheduleCfg):
    """Cfg of :class:`HoldSchedule` (no parameters)."""

    class_type: type[ChunkSchedule] = HoldSchedule


@configclass
class PartialBatchScheduleCfg(ChunkScheduleCfg):
    """Cfg of :class:`PartialBatchSchedule` (no parameters)."""

    class_type: type[ChunkSchedule] = PartialBatchSchedule


@configclass
class GlobalClockScheduleCfg(ChunkScheduleCfg):
    """Cfg of :class:`GlobalClockSchedule` (no parameters)."""

    class_type: type[ChunkSchedule] = GlobalClockSchedule


@configclass
class AutoScheduleCfg(ChunkScheduleCfg):
    """Cfg of :class:`AutoSchedule` (its costs are fitted online)."""

    class_type: type[ChunkSchedule] = AutoSchedule


@configclass
class AsyncScheduleCfg(ChunkScheduleCfg):
    """Cfg of :class:`AsyncClockSchedule`."""

    class_type: type[ChunkSchedule] = AsyncClockSchedule
    lead_steps: int | None = None
    """Lead d: steps between a launch and the tick that installs its chunk, at most H / 2. None: the policy's refill
    point ``floor(refill_threshold * H)``, or H // 4 when that is 0."""


@configclass
class RtcScheduleCfg(ChunkScheduleCfg):
    """Cfg of :class:`RealTimeChunkSchedule`."""

    class_type: type[ChunkSchedule] = RealTimeChunkSchedule
    delay_steps: int | None = None
    """The inference delay d in env steps (the chunk lands d steps after its observation); None: estimated online as
    ``ceil(latency / step time)`` from the measured full-batch latency and step time."""
    overlap_steps: int = 0
    """Leftover actions W of the running chunk that a new chunk meets when it lands, after the d committed ones
    (RTC's soft-masked region), merged by the aggregator (``soft_mask`` moves from the old plan to the new one over
    them); 0: a chunk lands when the queues run out, and there is nothing to merge. Launches come every H - d - W
    steps."""


SCHEDULE_CFGS: dict[str, type[ChunkScheduleCfg]] = {
    cfg.class_type.name: cfg
    for cfg in (AnyScheduleCfg, HoldScheduleCfg, PartialBatchScheduleCfg, GlobalClockScheduleCfg, AutoScheduleCfg,
                AsyncScheduleCfg, RtcScheduleCfg)
}
"""Schedule cfg classes by schedule name."""

SCHEDULES: dict[str, type[ChunkSchedule]] = {name: cfg.class_type for name, cfg in SCHEDULE_CFGS.items()}
"""Schedules by name."""


def schedule_cfg(schedule: str | ChunkScheduleCfg) -> ChunkScheduleCfg:
    """The cfg of a schedule given by name (its defaults) or by cfg (returned as is).

    Raises:
        ValueError: If ``schedule`` is a name not in :data:`SCHEDULES`.
        TypeError: If it is neither a name nor a :class:`ChunkScheduleCfg`.
    """
    if isinstance(schedule, ChunkScheduleCfg):
        return schedule
    if not isinstance(schedule, str):
        raise TypeError(f"A schedule is a name or a ChunkScheduleCfg, got {type(schedule).__name__}.")
    if schedule not in SCHEDULE_CFGS:
        raise ValueError(f"Unknown schedule '{schedule}'. Choose one of {sorted(SCHEDULE_CFGS)}.")
    return SCHEDULE_CFGS[schedule]()


def schedule_name(schedule: str | ChunkScheduleCfg) -> str:
    """The name of a schedule given by name or by cfg."""
    return schedule if isinstance(schedule, str) else schedule.class_type.name


def make_schedule(schedule: str | ChunkScheduleCfg) -> ChunkSchedule:
    """A new schedule, given by name (with its default cfg) or by cfg.

    Raises:
        ValueError: If ``schedule`` is a name not in :data:`SCHEDULES`.
    """
    return schedule_cfg(schedule).build()
