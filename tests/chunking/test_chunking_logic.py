"""Pure logic of the chunking policy, without an env: aggregators, chunk queues, schedules, cost model, latency."""

import functools
import importlib
import math
import types

import pytest
import torch

from isaaclab_suspend.chunking import (
    AGGREGATORS,
    ChunkQueues,
    InferenceCostModel,
    LatencyCfg,
    LatencyEmulator,
    SchedulePlan,
    blend,
    make_schedule,
    replace,
    resolve_aggregator,
    stats_table,
    temporal_ensemble,
)
from isaaclab_suspend.tasks.cartpole.chunk_model import CartpoleLQRCfg, CartpoleLQRChunkModel
from isaaclab_suspend.chunking.schedules import FULL_BATCH, AsyncScheduleCfg, AutoSchedule

from aggregator_reference import REFERENCES, act_temporal_ensemble

H = 4


def _queues(num_envs=3, refill_at=0) -> ChunkQueues:
    return ChunkQueues(num_envs, H, 1, refill_at, "cpu")


def _chunk(num_envs, start=0.0) -> torch.Tensor:
    """Chunk whose action j of env i is start + 10 i + j. Shape: (num_envs, H, 1)."""
    return (start + 10.0 * torch.arange(num_envs).view(-1, 1) + torch.arange(H)).unsqueeze(-1).float()


# -- aggregators


def test_replace_takes_the_new_chunk_without_aliasing_it():
    old, new, count = torch.ones(2, H, 1), torch.full((2, H, 1), 5.0), torch.tensor([[1, 1, 0, 0], [0, 0, 0, 0]])
    merged, merged_count = replace(old, new, count)
    assert torch.equal(merged, new) and merged.data_ptr() != new.data_ptr()
    assert torch.equal(merged_count, torch.ones_like(count))


def test_blend_weights_the_overlap_only():
    old, new = torch.full((1, H, 1), 1.0), torch.full((1, H, 1), 2.0)
    count = torch.tensor([[1, 1, 0, 0]])
    merged, merged_count = blend(old, new, count)
    assert merged[0, :, 0].tolist() == pytest.approx([0.3 * 1 + 0.7 * 2] * 2 + [2.0] * 2)
    assert merged_count.tolist() == [[2, 2, 1, 1]]


@pytest.mark.parametrize("coeff", [0.01, 0.5, 0.0])
def test_temporal_ensemble_online_equals_acts_weighted_mean(coeff):
    """Merging predictions one by one gives sum_i w_i a_i / sum_i w_i with w_i = exp(-coeff i), i = 0 oldest."""
    predictions = [3.0, -1.0, 7.0, 0.5]
    merged, count = torch.zeros(1, 1, 1), torch.zeros(1, 1, dtype=torch.long)
    for p in predictions:
        merged, count = temporal_ensemble(merged, torch.full((1, 1, 1), p), count, coeff=coeff)
    assert float(merged) == pytest.approx(act_temporal_ensemble(predictions, coeff), rel=1e-6)
    assert int(count) == len(predictions)


def test_temporal_ensemble_default_favours_older_predictions_slightly():
    merged, _ = temporal_ensemble(torch.zeros(1, 1, 1), torch.ones(1, 1, 1), torch.ones(1, 1, dtype=torch.long))
    assert float(merged) == pytest.approx(math.exp(-0.01) / (1 + math.exp(-0.01)))


def test_resolve_aggregator():
    assert set(AGGREGATORS) == {"replace", "blend", "temporal_ensemble", "soft_mask"}
    assert resolve_aggregator("blend") is blend
    custom = lambda old, new, count: (new, count)  # noqa: E731
    assert resolve_aggregator(custom) is custom
    with pytest.raises(ValueError, match="Unknown aggregator 'mean'.*blend"):
        resolve_aggregator("mean")
    with pytest.raises(TypeError, match="name or a callable"):
        resolve_aggregator(3)


# -- chunk queues


def test_merge_aligns_leftovers_with_the_new_chunk():
    q = _queues(2)
    q.merge(torch.arange(2), _chunk(2), replace, None)
    q.pop(torch.tensor([True, False]), torch.zeros(2, 1))  # env 0 executed one action
    q.merge(torch.arange(2), _chunk(2, start=100.0), blend, None)
    # env 0: leftover actions 1, 2, 3 meet new actions 0, 1, 2; env 1: leftovers 0..3 meet all four
    expected_0 = [0.3 * 1 + 0.7 * 100, 0.3 * 2 + 0.7 * 101, 0.3 * 3 + 0.7 * 102, 103]
    assert q.chunks[0, :, 0].tolist() == pytest.approx(expected_0)
    assert q.chunks[1, :, 0].tolist() == pytest.approx([0.3 * (10 + j) + 0.7 * (110 + j) for j in range(H)])
    assert q.counts.tolist() == [[2, 2, 2, 1], [2, 2, 2, 2]]
    assert q.cursor.tolist() == [0, 0]


def test_merge_with_take_leaves_other_envs_untouched():
    q = _queues(3)
    q.merge(torch.arange(3), _chunk(3), replace, None)
    q.pop(torch.ones(3, dtype=torch.bool), torch.zeros(3, 1))
    before = q.chunks.clone()
    q.merge(torch.arange(3), _chunk(3, start=50.0), replace, take=torch.tensor([False, True, False]))
    assert torch.equal(q.chunks[[0, 2]], before[[0, 2]])
    assert torch.equal(q.chunks[1], _chunk(3, start=50.0)[1])
    assert q.cursor.tolist() == [1, 0, 1]


def test_pop_advances_executing_envs_and_returns_fresh_tensors():
    q = _queues(2)
    q.merge(torch.arange(2), _chunk(2), replace, None)
    fallback = torch.tensor([[-1.0], [-2.0]])
    first = q.pop(torch.tensor([True, False]), fallback)
    assert first.tolist() == [[0.0], [-2.0]]
    second = q.pop(torch.tensor([True, True]), fallback)
    assert second.tolist() == [[1.0], [10.0]]
    assert first.tolist() == [[0.0], [-2.0]]  # not overwritten by the next pop
    assert q.cursor.tolist() == [2, 1]


@pytest.mark.parametrize("refill_at", [0, 1])
def test_requests_follow_the_host_mirror(refill_at):
    q = _queues(2, refill_at=refill_at)
    assert q.requests(resets_pending=True).tolist() == [True, True]  # all empty at start
    q.merge(torch.arange(2), _chunk(2), replace, None)
    for _ in range(H - refill_at):
        assert q.requests(resets_pending=False) is None
        q.pop(torch.ones(2, dtype=torch.bool), torch.zeros(2, 1))
    assert q.requests(resets_pending=False).tolist() == [True, True]


def test_requests_after_a_drop_and_after_a_stalled_env():
    q = _queues(3)
    q.merge(torch.arange(3), _chunk(3), replace, None)
    q.pop(torch.ones(3, dtype=torch.bool), torch.zeros(3, 1))
    q.drop(torch.tensor([False, True, False]))
    assert q.requests(resets_pending=True).tolist() == [False, True, False]
    q.merge(torch.tensor([1]), _chunk(1), replace, None)
    # env 2 is stalled (suspended mid-chunk): the mirror says "due" before it is; requests re-reads and waits
    for _ in range(H - 1):
        q.pop(torch.tensor([True, True, False]), torch.zeros(3, 1))
    assert q.requests(resets_pending=False).tolist() == [True, False, False]


# -- schedules


def test_clock_schedules_tick_every_h_steps():
    q = _queues(3)
    for name in ("global_clock", "hold", "auto"):
        schedule = make_schedule(name)
        assert all(schedule.plan(q, step, resets_pending=False) is FULL_BATCH for step in (0, H, 5 * H))
        assert all(schedule.plan(q, step, resets_pending=False) is None for step in (1, H - 1, H + 1))


def test_global_clock_parks_envs_without_actions_between_ticks():
    q = _queues(3)
    q.merge(torch.arange(3), _chunk(3), replace, None)
    q.drop(torch.tensor([False, True, False]))
    plan = make_schedule("global_clock").plan(q, 5, resets_pending=True)
    assert not plan.infer and plan.park.tolist() == [False, True, False]
    assert make_schedule("hold").plan(q, 5, resets_pending=True) is None  # hold: they hold their action


def test_async_launches_d_steps_before_each_tick_of_period_h_minus_d():
    schedule = make_schedule("async")
    q = ChunkQueues(3, 8, 1, 2, "cpu")  # H = 8, lead d = 2 (refill_at): ticks every 6 steps
    plans = {step: schedule.plan(q, step, resets_pending=False) for step in range(20)}
    assert plans[0].infer and not plans[0].launch and not plans[0].collect
    assert [t for t, p in plans.items() if p is not None and p.launch] == [4, 10, 16]
    assert [t for t, p in plans.items() if p is not None and p.collect] == [6, 12, 18]
    assert all(p.lead == 2 and not p.infer for t, p in plans.items() if p is not None and t > 0)
    q.merge(torch.arange(3), torch.zeros(3, 8, 1), replace, None)
    q.drop(torch.tensor([False, True, False]))
    assert schedule.plan(q, 3, resets_pending=True).park.tolist() == [False, True, False]
    assert schedule.plan(q, 6, resets_pending=True).park is None  # at a tick the policy parks the stale envs
    half = ChunkQueues(3, 8, 1, 4, "cpu")  # d = H / 2: each tick also launches the next
    assert schedule.plan(half, 0, resets_pending=False).launch and schedule.plan(half, 4, resets_pending=False).launch
    assert schedule.lead(16, 0) == 4
    with pytest.raises(ValueError, match="needs d <= H / 2"):
        schedule.plan(ChunkQueues(3, 8, 1, 5, "cpu"), 1, resets_pending=False)
    # the lead on the schedule's own cfg wins over the refill point
    own = make_schedule(AsyncScheduleCfg(lead_steps=3))
    assert own.lead(16, 2) == 3
    collects = [t for t in range(1, 20) if (plan := own.plan(q, t, resets_pending=False)) and plan.collect]
    assert collects == [5, 10, 15]  # H = 8, d = 3 (not the queues' 2): period 5


def test_any_infers_the_full_batch_for_the_requesting_envs():
    q = _queues(3)
    q.merge(torch.arange(3), _chunk(3), replace, None)
    q.drop(torch.tensor([True, False, False]))
    plan = make_schedule("any").plan(q, 5, resets_pending=True)
    assert plan.infer and plan.env_ids is None and plan.take.tolist() == [True, False, False]
    q.merge(torch.arange(3), _chunk(3), replace, plan.take)
    assert make_schedule("any").plan(q, 6, resets_pending=False) is None


def test_partial_batch_infers_the_requesting_envs_only():
    q = _queues(3)
    q.merge(torch.arange(3), _chunk(3), replace, None)
    q.drop(torch.tensor([True, False, True]))
    plan = make_schedule("partial_batch").plan(q, 5, resets_pending=True)
    assert plan.infer and plan.env_ids.tolist() == [0, 2] and plan.take is None


def test_idle_envs_neither_wait_nor_request_nor_take_chunks():
    """An env past its episode quota (``ActionChunkingPolicy.retire``): no schedule plans for it, a full-batch
    chunk leaves its queue empty, and the host mirror ignores it (no device read per step for ``any``)."""
    q = _queues(3)
    q.merge(torch.arange(3), _chunk(3), replace, None)
    q.set_idle(torch.tensor([False, True, False]))
    assert q.empty_mask().tolist() == [False, True, False] and not q.waiting_mask().any()
    assert make_schedule("any").plan(q, 1, resets_pending=True) is None
    assert make_schedule("global_clock").plan(q, 1, resets_pending=True).park.tolist() == [False, False, False]
    q.merge(torch.arange(3), _chunk(3, 100.0), replace, None)
    assert q.cursor.tolist() == [0, H, 0] and q.requests(resets_pending=False) is None
    assert q._steps_to_refill == H, "the idle env's empty queue does not make the mirror read the device"


def test_unknown_schedule():
    with pytest.raises(ValueError, match="Unknown schedule 'sometimes'.*global_clock"):
        make_schedule("sometimes")


def _fitted_auto(latency, step_time, num_envs) -> AutoSchedule:
    schedule = AutoSchedule()
    for batch in (1, num_envs):
        schedule.record_inference(batch, latency(batch))
    schedule.record_step(step_time)
    return schedule


def test_auto_waits_when_inference_has_a_fixed_cost():
    schedule = _fitted_auto(lambda b: 0.2, step_time=0.01, num_envs=64)
    q = ChunkQueues(64, 16, 1, 0, "cpu")
    q.merge(torch.arange(64), torch.zeros(64, 16, 1), replace, None)
    q.drop(torch.arange(64) < 4)
    plan = schedule.plan(q, 1, resets_pending=True)
    assert not plan.infer and int(plan.park.sum()) == 4


def test_auto_serves_when_small_batches_are_cheap_and_steps_expensive():
    schedule = _fitted_auto(lambda b: 0.001 * b, step_time=0.05, num_envs=64)
    q = ChunkQueues(64, 16, 1, 0, "cpu")
    q.merge(torch.arange(64), torch.zeros(64, 16, 1), replace, None)
    q.drop(torch.arange(64) < 4)
    plan = schedule.plan(q, 1, resets_pending=True)
    assert plan.infer and plan.env_ids.tolist() == [0, 1, 2, 3] and plan.park is None
    # k * s / L(k) against N H / (H t_step + L(N)) = 1024 / 0.864 env-steps/s: 4 envs 15 steps from the tick
    # pay (60 > 4.74), the same envs 1 step from it do not (4 < 4.74)
    assert schedule.serve_now(4, steps_to_tick=15, num_envs=64, chunk_length=16)
    assert not schedule.serve_now(4, steps_to_tick=1, num_envs=64, chunk_length=16)


def test_auto_waits_before_it_has_measured_anything():
    q = _queues(3)
    q.drop(torch.ones(3, dtype=torch.bool))
    plan = AutoSchedule().plan(q, 1, resets_pending=True)
    assert isinstance(plan, SchedulePlan) and not plan.infer and plan.park.all()


# -- cost model


def test_cost_model_fits_fixed_and_linear_latency():
    fixed = InferenceCostModel()
    for batch in (4, 64, 64, 16):
        fixed.record_inference(batch, 0.2)
    assert fixed.latency_line() == pytest.approx((0.2, 0.0))
    linear = InferenceCostModel()
    for batch in (1, 8, 64):
        linear.record_inference(batch, 0.05 + 0.002 * batch)
    assert linear.latency_line() == pytest.approx((0.05, 0.002))
    assert linear.latency(32) == pytest.approx(0.114)


def test_cost_model_with_one_batch_size_assumes_proportional_latency():
    model = InferenceCostModel()
    with pytest.raises(RuntimeError, match="No inference"):
        model.latency_line()
    model.record_inference(64, 0.2)
    assert model.latency_line() == pytest.approx((0.0, 0.2 / 64))
    assert not model.ready
    model.record_step(0.01)
    assert model.ready
    assert model.clock_rate(64, 16) == pytest.approx(64 * 16 / (16 * 0.01 + 0.2))


def test_cost_model_clamps_unphysical_fits():
    falling = InferenceCostModel()
    falling.record_inference(1, 0.3)
    falling.record_inference(10, 0.1)
    assert falling.latency_line() == pytest.approx((0.2, 0.0))  # larger batches faster: treated as fixed
    origin = InferenceCostModel()
    origin.record_inference(2, 0.01)
    origin.record_inference(4, 0.05)
    a, c = origin.latency_line()
    assert a == 0.0 and c == pytest.approx((2 * 0.01 + 4 * 0.05) / (4 + 16))


def test_cost_model_step_time_is_a_moving_average():
    model = InferenceCostModel(smoothing=0.5)
    model.record_step(0.02)
    model.record_step(0.04)
    assert model.step_time == pytest.approx(0.03)
    with pytest.raises(ValueError, match="smoothing"):
        InferenceCostModel(smoothing=0.0)


# -- latency emulation


@pytest.mark.parametrize(
    "spec, expected",
    [
        ("0.2", (0.2, 0.0)),
        ("0.05+0.002n", (0.05, 0.002)),
        ("0.002n", (0.0, 0.002)),
        ("GR1", (0.2, 0.0)),
        ("droid", (0.7, 0.0)),
    ],
)
def test_latency_parse(spec, expected):
    cfg = LatencyCfg.parse(spec)
    assert (cfg.fixed_s, cfg.per_row_s) == pytest.approx(expected)


@pytest.mark.parametrize("spec", ["fast", "0.2+", "-0.1", "nan", ""])
def test_latency_parse_rejects_bad_specs(spec):
    with pytest.raises(ValueError, match="latency|Latencies"):
        LatencyCfg.parse(spec)


def _constant_model(obs_rows, env_ids):
    return torch.zeros(len(env_ids), H, 1)


class LatencyClock:
    """The latency emulator's clock: :attr:`now` moves only when a model computes (:meth:`compute`) or the emulator
    sleeps (recorded in :attr:`sleeps`), so its latencies are exact, whatever the machine's load."""

    def __init__(self):
        self.now = 0.0
        self.sleeps: list[float] = []

    def perf_counter(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def compute(self, seconds: float):
        """A chunk model that computes for ``seconds``."""
        def model(obs_rows, env_ids):
            self.now += seconds
            return _constant_model(obs_rows, env_ids)
        return model


@pytest.fixture
def clock(monkeypatch) -> LatencyClock:
    """A :class:`LatencyClock` in place of the latency module's ``time`` (it reads nothing else of it)."""
    fake = LatencyClock()
    module = importlib.import_module("isaaclab_suspend.chunking.latency")
    monkeypatch.setattr(module, "time", types.SimpleNamespace(perf_counter=fake.perf_counter, sleep=fake.sleep))
    return fake


def test_virtual_latency_is_reported_not_slept(clock):
    model = LatencyEmulator(clock.compute(0.1), LatencyCfg(fixed_s=0.5, per_row_s=0.1, virtual=True))
    chunk = model({}, torch.arange(3))
    assert clock.sleeps == [] and clock.now == pytest.approx(0.1)  # only the model's own compute time passed
    assert chunk.shape == (3, H, 1)
    assert model.virtual_s == pytest.approx(0.8 - 0.1)  # the latency beyond the compute time
    model({}, torch.arange(20))  # 2.5 s: the compute time is part of it
    assert clock.sleeps == [] and model.virtual_s == pytest.approx(2.5 - 0.1)


def test_sleeping_latency_lasts_the_latency(clock):
    model = LatencyEmulator(clock.compute(0.01), LatencyCfg(fixed_s=0.02, per_row_s=0.01))
    model({}, torch.arange(3))
    assert clock.now == pytest.approx(0.05)  # the call lasted the latency, compute time included
    assert clock.sleeps == [pytest.approx(0.04)]
    assert model.virtual_s == 0.0
    slow = LatencyEmulator(clock.compute(0.2), LatencyCfg(fixed_s=0.02, per_row_s=0.01))
    slow({}, torch.arange(3))  # computing longer than the latency: no sleep on top
    assert clock.sleeps == [pytest.approx(0.04)] and slow.virtual_s == 0.0


# -- tables


def test_stats_table_has_one_column_per_run():
    figures = {
        "steps": 10, "inference_calls": 2, "calls_per_1000_steps": 200.0, "rows_inferred": 8, "envs_served": 5,
        "mean_envs_per_call": 2.5, "fetch_efficiency": 0.625, "active_env_steps": 30, "suspended_env_steps": 10,
        "held_env_steps": 0, "suspended_fraction": 0.25, "episodes_completed": 1, "inference_s": 0.4,
        "simulation_s": 0.1, "wall_s": 0.5, "active_env_steps_per_s": 60.0,
    }
    table = stats_table({"any": figures, "global_clock": figures})
    assert table.field_names == ["figure", "any", "global_clock"]
    assert len(table.rows) == 16
    assert "0.625" in table.get_string()


# -- embedded Cartpole model


def test_lqr_linear_model_is_the_jacobian_of_the_model_step():
    model = CartpoleLQRChunkModel()
    a_d, b_d = model.linear_model()
    eps = 1e-6
    zero_state, zero_action = torch.zeros(1, 4, dtype=torch.float64), torch.zeros(1, dtype=torch.float64)
    columns = [(model.step(zero_state + eps * torch.eye(4, dtype=torch.float64)[i : i + 1], zero_action)
                - model.step(zero_state - eps * torch.eye(4, dtype=torch.float64)[i : i + 1], zero_action)) / (2 * eps)
               for i in range(4)]
    jacobian_s = torch.cat(columns).T
    jacobian_a = ((model.step(zero_state, zero_action + eps) - model.step(zero_state, zero_action - eps)) / (2 * eps)).T
    torch.testing.assert_close(jacobian_s, a_d, atol=1e-7, rtol=1e-6)
    torch.testing.assert_close(jacobian_a, b_d, atol=1e-7, rtol=1e-6)


def test_lqr_gain_stabilises_the_upright_pole():
    model = CartpoleLQRChunkModel()
    a_d, b_d = model.linear_model()
    assert torch.linalg.eigvals(a_d).abs().max() > 1.0  # the upright pole is unstable
    assert torch.linalg.eigvals(a_d - b_d @ model.gain.double()).abs().max() < 1.0


def test_lqr_plan_shape_and_limits():
    model = CartpoleLQRChunkModel(CartpoleLQRCfg(chunk_length=6))
    obs = {"policy": torch.tensor([[0.5, 0.7, 0.4, 0.7], [0.0, 0.0, 0.0, 0.0], [-2.0, -0.7, -0.5, 0.0]])}
    plan = model(obs, torch.arange(3))
    assert plan.shape == (3, 6, 1)
    assert plan.abs().max() <= model.cfg.action_limit and (plan[1] == 0).all()
    assert plan[0, 0, 0] > 0  # pole leaning toward +x: push the cart toward +x


# -- aggregators over overlapping chunks, against their brute-force definitions


@pytest.mark.parametrize("name, coeff", [("temporal_ensemble", 0.01), ("temporal_ensemble", 0.5), ("blend", None)])
def test_overlapping_chunks_execute_the_brute_force_aggregate_of_every_step(name, coeff):
    """Env 0 gets a new chunk every step, env 1 every other step, and env 0 is reset at step 7: the action each
    env executes is the aggregate of every prediction made for that step since its last reset."""
    aggregator = functools.partial(temporal_ensemble, coeff=coeff) if coeff is not None else AGGREGATORS[name]
    reference = functools.partial(act_temporal_ensemble, coeff=coeff) if coeff is not None else REFERENCES[name]
    gen = torch.Generator().manual_seed(0)
    q = ChunkQueues(2, H, 1, H - 1, "cpu")
    predictions: list[dict[int, list[float]]] = [{}, {}]  # per env: step -> predictions made for it, oldest first
    overlaps = 0
    for t in range(16):
        take = torch.tensor([True, t % 2 == 0])
        chunk = torch.randn(2, H, 1, generator=gen)
        q.merge(torch.arange(2), chunk, aggregator, take)
        for i in take.nonzero().flatten().tolist():
            for j in range(H):
                predictions[i].setdefault(t + j, []).append(float(chunk[i, j, 0]))
        executed = q.pop(torch.ones(2, dtype=torch.bool), torch.zeros(2, 1))
        for i in range(2):
            made = predictions[i][t]
            overlaps += len(made) > 1
            assert float(executed[i, 0]) == pytest.approx(reference(made), rel=1e-5, abs=1e-6), (t, i, made)
        if t == 7:
            q.drop(torch.tensor([True, False]))
            predictions[0] = {}
    assert overlaps >= 16

