"""Real-time chunking: the ``rtc`` schedule's launch and tick steps from the delay and the overlap, the prefix the
policy passes (the queued actions) and the first d actions it keeps, the ``soft_mask`` merge of the overlap, the
planners continuing a prefix, real Cartpole runs under ``rtc`` with virtual latency (no pole falls, exact calls),
the prefix on the TCP protocol bit for bit, and the roughness figures. The push-cube run under ``rtc`` (smooth
boundaries, cubes home) is in ``tasks/test_push_cube.py``, on that module's env."""

import math
import socket

import pytest
import torch

from isaaclab_suspend.chunking import (
    ActionChunkingPolicy,
    RtcScheduleCfg,
    ChunkQueues,
    LatencyCfg,
    LatencyEmulator,
    make_schedule,
    replace,
    soft_mask,
)
from isaaclab_suspend.tasks.cartpole.chunk_model import CartpoleLQRCfg, CartpoleLQRChunkModel
from isaaclab_suspend.tasks.push_cube.chunk_model import PushCubeChunkCfg, PushCubeChunkModel
from isaaclab_suspend.chunking import ChunkingStats
from isaaclab_suspend.chunking.model import accepts_prefix
from isaaclab_suspend.chunking.schedules import RealTimeChunkSchedule
from isaaclab_suspend.serving import TcpPolicyServer, TcpPolicyServerCfg, TcpChunkModel, TcpChunkModelCfg
from isaaclab_suspend.serving import WireLimitsCfg
from isaaclab_suspend.serving.tcp.protocol import PROTOCOL_VERSION, receive_message, send_message

from test_chunking_policy import env  # noqa: F401  (Cartpole, N envs, a termination when a pole falls)

N = 8
H = 8


def _plans(schedule, steps, num_envs=3, chunk_length=H):
    queues = ChunkQueues(num_envs, chunk_length, 1, 0, "cpu")
    return {step: schedule.plan(queues, step, resets_pending=False) for step in range(steps)}


def _steps(plans, what):
    return [t for t, p in plans.items() if p is not None and getattr(p, what)]


# -- the schedule's logic, without an env


def test_rtc_launches_when_the_queues_hold_d_actions_and_ticks_when_they_run_out():
    """H = 8, d = 2: step 0 synchronous, launch at 6 (2 actions left), tick at 8, then every H - d = 6 steps."""
    plans = _plans(RealTimeChunkSchedule(RtcScheduleCfg(delay_steps=2)), 27)
    assert plans[0].infer and not plans[0].launch
    assert _steps(plans, "launch") == [6, 12, 18, 24]
    assert _steps(plans, "collect") == [8, 14, 20, 26]
    assert all(p.lead == 2 for p in plans.values() if p is not None and p.launch)
    assert _steps(plans, "infer") == [0]


def test_rtc_with_a_delay_over_h_half_launches_at_each_tick_and_without_delay_ticks_like_the_clock():
    """d = 5 > H / 2: the lead is H // 2 = 4, each tick also launches the next (the loop waits for the rest); d = 0:
    every H steps a synchronous call."""
    plans = _plans(RealTimeChunkSchedule(RtcScheduleCfg(delay_steps=5)), 21)
    assert _steps(plans, "launch") == [4, 8, 12, 16, 20] and _steps(plans, "collect") == [8, 12, 16, 20]
    assert all(p.lead == 4 for p in plans.values() if p is not None and p.launch)
    plans = _plans(RealTimeChunkSchedule(RtcScheduleCfg(delay_steps=0)), 17)
    assert _steps(plans, "infer") == [0, 8, 16] and not _steps(plans, "launch")


def test_rtc_estimates_d_from_the_measured_latency_and_step_time():
    schedule = make_schedule("rtc")
    queues = ChunkQueues(4, 32, 1, 0, "cpu")
    assert schedule.lead(queues) == 0  # nothing measured yet: synchronous
    schedule.record_inference(4, 0.1)
    schedule.record_step(0.03)
    assert schedule.lead(queues) == math.ceil(0.1 / 0.03) == 4
    schedule.record_inference(4, 2.0)  # a latency over H / 2 steps: the lead stops at H // 2
    assert schedule.lead(queues) == 16
    plans = _plans(schedule, 40, num_envs=4, chunk_length=32)
    assert _steps(plans, "launch")[0] == 32 - schedule.lead(queues)


def test_rtc_with_an_overlap_lands_each_chunk_while_the_queues_hold_w_actions():
    """H = 8, d = 2, W = 2: the first chunk lands at 0 and runs out at 8, so the next lands at 6 (2 actions left),
    launched at 4; a chunk installed from index 2 runs out 6 steps later: landings every H - d - W = 4 steps. An
    overlap that leaves no step between a landing and the next launch is cut."""
    plans = _plans(RealTimeChunkSchedule(RtcScheduleCfg(delay_steps=2, overlap_steps=2)), 23)
    assert _steps(plans, "launch") == [4, 8, 12, 16, 20] and _steps(plans, "collect") == [6, 10, 14, 18, 22]
    plans = _plans(RealTimeChunkSchedule(RtcScheduleCfg(delay_steps=2, overlap_steps=7)), 15)
    assert _steps(plans, "collect") == [3, 5, 7, 9, 11, 13]  # W = 5 after the synchronous tick, then 4
    assert _steps(plans, "launch") == [1, 3, 5, 7, 9, 11, 13]  # each launch at the landing before
    plans = _plans(RealTimeChunkSchedule(RtcScheduleCfg(delay_steps=0, overlap_steps=3)), 12)
    assert _steps(plans, "infer") == [0, 5, 10] and not _steps(plans, "launch")  # synchronous: every H - W steps


def test_soft_mask_moves_from_the_leftovers_to_the_new_chunk_over_the_overlap():
    """Weights (W - p) / (W + 1) on the leftover over a W-step overlap, RTC's c (e^c - 1) / (e - 1) with
    ``exponential``; the new chunk alone where nothing is left over."""
    old, new = torch.zeros(2, 6, 1), torch.ones(2, 6, 1)
    count = torch.tensor([[0, 0, 1, 1, 1, 0], [0, 0, 0, 0, 0, 0]])
    merged, merged_count = soft_mask(old, new, count)
    assert merged[0, :, 0].tolist() == pytest.approx([1.0, 1.0, 0.25, 0.5, 0.75, 1.0])
    assert torch.equal(merged[1], new[1]) and torch.equal(merged_count, count + 1)
    c = torch.tensor([0.75, 0.5, 0.25])
    merged, _ = soft_mask(old, new, count, exponential=True)
    torch.testing.assert_close(merged[0, 2:5, 0], 1.0 - c * torch.expm1(c) / (math.e - 1.0))
    # through the queues: the leftovers of a running chunk meet the new chunk from its index 2, the first ones
    # weigh most, and the action executed at the landing is close to the one before it
    queues = ChunkQueues(1, 8, 1, 0, "cpu")
    queues.merge(torch.arange(1), torch.zeros(1, 8, 1), replace, None)
    for _ in range(6):
        queues.pop(torch.tensor([True]), torch.zeros(1, 1))
    queues.merge(torch.arange(1), torch.ones(1, 8, 1), soft_mask, None, start=torch.tensor([2]))
    assert queues.chunks[0, :, 0].tolist()[2:] == pytest.approx([1 / 3, 2 / 3, 1.0, 1.0, 1.0, 1.0])


def test_prefix_is_the_next_queued_actions_and_merge_keeps_the_leftovers_aligned():
    queues = ChunkQueues(3, 4, 1, 0, "cpu")
    queues.merge(torch.arange(3), torch.arange(12.0).view(3, 4, 1), replace, None)
    queues.pop(torch.tensor([True, True, False]), torch.zeros(3, 1))
    queues.drop(torch.tensor([False, True, False]))
    actions, delay = queues.prefix(2)
    assert actions[:, :, 0].tolist()[0] == [1.0, 2.0] and actions[:, :, 0].tolist()[2] == [8.0, 9.0]
    assert delay.tolist() == [2, 0, 2]  # env 1 was reset: an empty queue, no prefix
    actions[0] = -1.0
    assert queues.chunks[0, 1, 0] == 1.0  # a new tensor
    # env 2 has leftovers [10, 11] (env 0: [3]) at the tick where the new chunk starts at index 2: old 10 meets
    # new index 2
    new = torch.full((3, 4, 1), 100.0) + torch.arange(4.0).view(1, 4, 1)
    queues.pop(torch.tensor([True, False, True]), torch.zeros(3, 1))
    queues.pop(torch.tensor([True, False, True]), torch.zeros(3, 1))
    seen = []

    def spy(old, chunk, count):
        seen.append((old.clone(), count.clone()))
        return replace(old, chunk, count)

    queues.merge(torch.arange(3), new, spy, None, start=torch.tensor([2, 0, 2]))
    old, count = seen[0]
    assert count[2].tolist() == [0, 0, 1, 1] and old[2, 2:, 0].tolist() == [10.0, 11.0]
    assert count[0].tolist() == [0, 0, 1, 0] and old[0, 2, 0] == 3.0  # env 0's last action 3 meets index 2
    assert count[1].tolist() == [0, 0, 0, 0] and queues.cursor.tolist() == [2, 0, 2]


def test_roughness_counts_consecutive_executed_actions_of_an_episode_and_chunk_boundaries():
    stats = ChunkingStats(2, 1, "cpu")
    yes, no = torch.tensor([True, True]), torch.tensor([False, False])
    for actions, served in ((0.0, yes), (1.0, None), (3.0, torch.tensor([True, False])), (4.0, None)):
        stats.record_step(yes, no, actions=torch.tensor([[actions], [2 * actions]]), served=served)
        stats.record_outcome(0.01, torch.tensor([False, actions == 3.0]))  # env 1's episode ends after step 3
    figures = stats.as_dict()
    # env 0: |1-0|, |3-1| (a boundary), |4-3|; env 1: |2-0|, |6-2|, then a new episode: no pair
    assert figures["roughness"] == pytest.approx((1 + 2 + 1 + 2 + 4) / 5)
    assert figures["boundary_roughness"] == pytest.approx(2.0)
    assert figures["within_chunk_roughness"] == pytest.approx((1 + 1 + 2 + 4) / 4)
    assert figures["overlap_bound"] == pytest.approx(2 * 4 / 0.04)


# -- the planners continue a prefix


def test_planners_continue_a_prefix_from_the_state_it_leads_to():
    """The chunk's first d actions are the prefix; the rest is the plan from the state the model predicts after the
    prefix; a row with delay 0 gets the plan without prefix."""
    generator = torch.Generator().manual_seed(0)
    d, ids = 3, torch.arange(4)
    prefix = torch.rand(4, d, 1, generator=generator) - 0.5
    delay = torch.tensor([d, d, 0, d])
    cartpole = CartpoleLQRChunkModel(CartpoleLQRCfg(chunk_length=H))
    state = (torch.rand(4, 4, generator=generator) - 0.5) * 0.4
    chunk = cartpole({"policy": state}, ids, prefix=prefix, delay=delay)
    assert accepts_prefix(cartpole) and chunk.shape == (4, H, 1)
    predicted = state
    for k in range(d):
        predicted = cartpole.step(predicted, prefix[:, k, 0])
    rows = delay > 0
    assert torch.equal(chunk[rows, :d], prefix[rows])
    torch.testing.assert_close(chunk[rows, d:], cartpole({"policy": predicted}, ids)[rows, : H - d], atol=1e-6, rtol=0)
    assert torch.equal(chunk[2], cartpole({"policy": state}, ids)[2])

    push = PushCubeChunkModel(PushCubeChunkCfg(chunk_length=H, prefix_ease_steps=0))
    cfg = push.cfg
    obs = torch.tensor([[0.0, 0.1, 0.3, 0.0, 0.4]]).repeat(4, 1) + 0.05 * torch.rand(4, 5, generator=generator)
    chunk = push({"policy": obs}, ids, prefix=prefix, delay=delay)
    pos, vel, mass = obs[:, 0].clone(), obs[:, 1].clone(), cfg.cart_mass  # the cube is 0.3 m ahead: no contact
    for k in range(d):
        vel = (vel + cfg.dt * prefix[:, k, 0] * cfg.action_scale / mass) / (1.0 + cfg.dt * cfg.damping / mass)
        pos = pos + cfg.dt * vel
    after = torch.cat((pos.unsqueeze(1), vel.unsqueeze(1), obs[:, 2:]), dim=1)
    assert torch.equal(chunk[rows, :d], prefix[rows])
    torch.testing.assert_close(chunk[rows, d:], push({"policy": after}, ids)[rows, : H - d], atol=1e-6, rtol=0)
    assert torch.equal(chunk[2], push({"policy": obs}, ids)[2])
    # by default the continuation eases in from the prefix's last action: 1 / (n + 1) of the way at its first step
    eased = PushCubeChunkModel(PushCubeChunkCfg(chunk_length=H))({"policy": obs}, ids, prefix=prefix, delay=delay)
    n = PushCubeChunkCfg().prefix_ease_steps
    expected = prefix[rows, -1] + (push({"policy": after}, ids)[rows, 0] - prefix[rows, -1]) / (n + 1)
    torch.testing.assert_close(eased[rows, d], expected, atol=1e-6, rtol=0)
    assert torch.equal(eased[rows, :d], prefix[rows]) and torch.equal(eased[2], chunk[2])


def test_push_cube_planner_feeds_the_cube_friction_forward_and_moves_the_cube_in_contact():
    """Touching the cube, the plan's first action pushes the cart and the cube and overcomes the cube's ground
    friction; a pusher 0.3 m behind it plans for the cart alone. The rolled-out cube stays ahead of the paddle."""
    cfg = PushCubeChunkCfg(chunk_length=H)
    model = PushCubeChunkModel(cfg)
    touching = torch.tensor([[0.0, 0.0, cfg.contact_offset, 0.0, 1.0], [0.0, 0.0, 0.3, 0.0, 1.0]])
    first = model({"policy": touching}, torch.arange(2))[:, 0, 0]
    push = cfg.velocity_gain * cfg.max_speed
    expected = torch.tensor([(cfg.cart_mass + cfg.cube_mass) * push + cfg.cube_friction, cfg.cart_mass * push])
    torch.testing.assert_close(first, expected / cfg.action_scale)


# -- on the real env


class PrefixRecorder:
    """The LQR planner; records every call's rows, prefix, delay and chunk."""

    accepts_prefix = True

    def __init__(self):
        self.model = CartpoleLQRChunkModel(CartpoleLQRCfg(chunk_length=H))
        self.calls = []

    def __call__(self, obs_rows, env_ids, prefix=None, delay=None):
        chunk = self.model(obs_rows, env_ids, prefix=prefix, delay=delay)
        self.calls.append((prefix, delay, chunk))
        return chunk


def _run(env, policy, steps, start_lengths):
    obs, _ = env.reset(seed=0)
    policy.reset()
    env.episode_length_buf[:] = start_lengths
    actions, history = [], []
    for _ in range(steps):
        actions.append(policy.act(obs).clone())
        obs, _, terminated, truncated, _ = env.step(actions[-1])
        policy.observe(terminated | truncated)
        history.append((policy.last_step, terminated | truncated, terminated))
    return torch.stack(actions)[..., 0], history


START = torch.tensor([230, 240, 250, 260, 270, 280, 290, 295])
"""Episode lengths at the start: time-outs at different steps, so envs restart mid-chunk and wait suspended."""


def test_rtc_on_cartpole_passes_the_queued_actions_and_keeps_the_first_d(env):
    """H = 8, d = 2, virtual latency: launches at 6, 12, ..., ticks at 8, 14, ...; every running env executes the
    prefix the model was given during the lead, then the new chunk from its index d; envs suspended at the launch
    get delay 0 and start it at index 0; no pole falls and the calls are exactly as planned."""
    model = PrefixRecorder()
    latency = LatencyEmulator(model, LatencyCfg(fixed_s=0.05, virtual=True))
    policy = ActionChunkingPolicy(latency, env, chunk_length=H, schedule=RtcScheduleCfg(delay_steps=2))
    steps = 120
    actions, history = _run(env, policy, steps, START)
    launches = list(range(6, steps, 6))
    ticks = [t + 2 for t in launches if t + 2 < steps]
    assert policy.stats["inference_calls"] == 1 + len(ticks) and len(model.calls) == 1 + len(launches)
    assert sum(int(h[2].sum()) for h in history) == 0, "a pole fell"
    assert policy.stats["episodes_completed"] >= N and policy.stats["suspended_env_steps"] > 0
    assert model.calls[0][0] is None  # step 0 runs synchronously, without a prefix
    resumed = running = 0
    for call, launch in enumerate(launches[: len(ticks)], start=1):
        prefix, delay, chunk = model.calls[call]
        tick = launch + 2
        assert prefix.shape == (N, 2, 1) and delay.dtype == torch.long
        served, suspended_at_launch = history[tick][0].served, history[launch][0].suspended
        for i in range(N):
            if not served[i]:  # reset during the lead: waits suspended for the next launch
                assert history[tick][0].suspended[i]
                continue
            if suspended_at_launch[i]:
                assert delay[i] == 0 and actions[tick, i] == chunk[i, 0, 0]
                resumed += 1
            else:
                assert delay[i] == 2 and torch.equal(actions[launch:tick, i], prefix[i, :, 0])
                assert torch.equal(chunk[i, :2], prefix[i]) and actions[tick, i] == chunk[i, 2, 0]
                running += 1
    assert resumed >= 2 and running >= 10 * N
    stats = policy.stats
    assert stats["boundary_roughness"] < 2 * stats["within_chunk_roughness"]
    policy.close()


def test_rtc_with_an_estimated_delay_and_a_model_without_prefix(env):
    """Without delay_steps the lead follows the measured latency and step time; a model without ``accepts_prefix``
    is called as before and still drives the envs."""
    calls = []

    def plain(obs_rows, env_ids):
        calls.append(len(env_ids))
        return lqr(obs_rows, env_ids)

    lqr = CartpoleLQRChunkModel(CartpoleLQRCfg(chunk_length=H))
    policy = ActionChunkingPolicy(LatencyEmulator(plain, LatencyCfg(fixed_s=0.02, virtual=True)), env, chunk_length=H,
                                  schedule="rtc")
    _, history = _run(env, policy, 60, START)
    cost = policy.schedule.cost_model
    assert policy.schedule.lead(policy.queues) == min(math.ceil(cost.latency(N) / cost.step_time - 1e-9), H // 2) >= 1
    assert sum(int(h[2].sum()) for h in history) == 0 and len(calls) > 60 // H
    policy.close()
    with pytest.raises(ValueError, match="delay_steps must be None"):
        ActionChunkingPolicy(lqr, env, chunk_length=H, schedule=RtcScheduleCfg(delay_steps=-1))
    # the 0.3 fields on the policy cfg still work for rtc, with a deprecation warning; elsewhere they are refused
    with pytest.warns(DeprecationWarning, match="RtcScheduleCfg"):
        old = ActionChunkingPolicy(lqr, env, chunk_length=H, schedule="rtc", delay_steps=3, overlap_steps=1)
    assert (old.schedule.delay_steps, old.schedule.overlap_steps) == (3, 1)
    old.close()
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="parameters of the 'rtc' schedule"):
        ActionChunkingPolicy(lqr, env, chunk_length=H, schedule="global_clock", delay_steps=3)


# -- the remote protocol


def test_remote_protocol_carries_the_prefix_bit_for_bit(env):
    received = []

    def model(obs_rows, env_ids, prefix=None, delay=None):
        received.append((prefix, delay))
        return torch.zeros(len(env_ids), H, 1)

    model.accepts_prefix = True
    prefix = torch.randn(5, 3, 1, dtype=torch.float32)
    prefix[0, 0, 0] = float.fromhex("0x1.fffffep-1")  # the last bit counts
    delay = torch.tensor([3, 0, 3, 3, 1])
    with TcpPolicyServer(model, TcpPolicyServerCfg(port=0, chunk_length=H, action_dim=1)) as server:
        client = TcpChunkModel(TcpChunkModelCfg(port=server.address[1]))
        assert client.accepts_prefix
        client({"policy": torch.zeros(5, 4)}, torch.arange(5), prefix=prefix, delay=delay)
        client({"policy": torch.zeros(5, 4)}, torch.arange(5))
        got_prefix, got_delay = received[0]
        assert got_prefix.dtype == prefix.dtype and torch.equal(got_prefix, prefix) and torch.equal(got_delay, delay)
        assert received[1] == (None, None)
        # a malformed prefix is answered with an error, the server lives on
        with pytest.raises(RuntimeError, match="'prefix' and 'delay' go together"):
            client({"policy": torch.zeros(5, 4)}, torch.arange(5), prefix=prefix, delay=delay[:2])
        client.close()
    with TcpPolicyServer(lambda rows, ids: torch.zeros(len(ids), H, 1), TcpPolicyServerCfg(port=0, chunk_length=H)) as plain:
        client = TcpChunkModel(TcpChunkModelCfg(port=plain.address[1]))
        assert not client.accepts_prefix
        with pytest.raises(ValueError, match="takes no prefix"):
            client({"policy": torch.zeros(5, 4)}, torch.arange(5), prefix=prefix, delay=delay)
        client.close()
        with socket.create_connection(plain.address) as sock:
            limits = WireLimitsCfg()
            send_message(sock, {"type": "hello", "version": PROTOCOL_VERSION})
            assert receive_message(sock, limits, 5, 5)[0]["accepts_prefix"] is False
            send_message(sock, {"type": "infer"}, {"policy": torch.zeros(5, 4), "env_ids": torch.arange(5),
                                                   "prefix": prefix, "delay": delay})
            reply, _ = receive_message(sock, limits, 5, 5)
            assert reply["type"] == "error" and "takes no prefix" in reply["message"]

    # under rtc, the LQR model served remotely takes bit-identical actions to the local one
    local = CartpoleLQRChunkModel(CartpoleLQRCfg(chunk_length=H))
    with TcpPolicyServer(local, TcpPolicyServerCfg(port=0, chunk_length=H, action_dim=1)) as server:
        remote = TcpChunkModel(TcpChunkModelCfg(port=server.address[1]))
        runs = []
        for chunk_model in (remote, local):
            policy = ActionChunkingPolicy(chunk_model, env, chunk_length=H, schedule=RtcScheduleCfg(delay_steps=2))
            runs.append(_run(env, policy, 40, START)[0])
            policy.close()
        remote.close()
    assert torch.equal(runs[0], runs[1])
