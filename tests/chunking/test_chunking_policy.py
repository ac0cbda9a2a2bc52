"""Chunking policy on the real Cartpole env: exact call counts with asynchronous terminations, suspension until
the tick, partial resets, no host syncs between ticks, and the embedded LQR chunk policy balancing the pole."""

import math
import threading

import pytest
import torch

from isaaclab.envs.mdp import joint_pos_out_of_manual_limit
from isaaclab.managers import SceneEntityCfg
from isaaclab.managers import TerminationTermCfg as DoneTerm

from isaaclab_suspend.chunking import (
    SCHEDULES,
    ActionChunkingPolicy,
    LatencyCfg,
    LatencyEmulator,
)
from isaaclab_suspend.tasks.cartpole.chunk_model import CartpoleLQRCfg, CartpoleLQRChunkModel
from isaaclab_suspend.tasks.env_factory import open_env

from aggregator_reference import REFERENCES
from isaaclab_suspend.benchmarks.host_syncs import check_quiet_steps, forbid_syncs

N = 8
H = 8


@pytest.fixture(scope="module")
def env(device):
    """Cartpole with an extra termination when the pole tilts past 1 rad: with zero actions the poles fall at
    different times, so envs terminate asynchronously. On ``--device`` (the tests marked ``cuda`` run there)."""
    pole_fallen = DoneTerm(
        func=joint_pos_out_of_manual_limit,
        params={"asset_cfg": SceneEntityCfg("robot", joint_names=["cart_to_pole"]), "bounds": (-1.0, 1.0)},
    )
    with open_env("Isaac-Cartpole-Suspendable", N, device=device, terminations__pole_fallen=pole_fallen) as env:
        yield env


class RecordingZeroModel:
    """Zero actions; records the env ids and observation rows of every call."""

    def __init__(self, chunk_length=H):
        self.chunk_length = chunk_length
        self.calls: list[tuple[torch.Tensor, torch.Tensor]] = []

    def __call__(self, obs_rows, env_ids):
        self.calls.append((env_ids.clone(), obs_rows["policy"].clone()))
        return torch.zeros(len(env_ids), self.chunk_length, 1, device=env_ids.device)


def rollout(env, policy, steps, seed=0, start_lengths=None):
    """Run the loop; returns per step the dones, the post-step observations and the policy's step status."""
    obs, _ = env.reset(seed=seed)
    policy.reset()
    if start_lengths is not None:
        env.episode_length_buf[:] = start_lengths
    history = []
    for _ in range(steps):
        actions = policy.act(obs)
        obs, _, terminated, truncated, _ = env.step(actions)
        policy.observe(terminated | truncated)
        history.append({"dones": terminated | truncated, "terminated": terminated.clone(), "obs": obs["policy"].clone(),
                        "status": policy.last_step})
    return history


def reference_calls(history, chunk_length, full_batch):
    """Calls and rows of a per-env reference: an env needs a chunk when its queue is empty, resets empty it."""
    remaining = [0] * N
    calls = rows = 0
    for record in history:
        needing = [i for i in range(N) if remaining[i] == 0]
        if needing:
            calls += 1
            rows += N if full_batch else len(needing)
            for i in needing:
                remaining[i] = chunk_length
        remaining = [r - 1 for r in remaining]
        for i in record["dones"].nonzero().flatten().tolist():
            remaining[i] = 0
    return calls, rows


def off_tick_resets(history, chunk_length):
    """Steps t whose act came after a reset and is not a clock tick."""
    return [t for t in range(1, len(history)) if history[t - 1]["dones"].any() and t % chunk_length != 0]


def test_reset_count_marks_reset_steps(env):
    """The policy's sync-free reset detection: the env's host counter grows exactly in steps that reset envs."""
    env.reset()
    seen_change = seen_same = False
    for _ in range(80):
        count = env.reset_count
        _, _, terminated, truncated, _ = env.step(torch.zeros(N, 1))
        changed = env.reset_count != count
        assert changed == bool((terminated | truncated).any())
        seen_change |= changed
        seen_same |= not changed
    assert seen_change and seen_same
    count = env.reset_count
    env.reset()
    assert env.reset_count == count + 1


@pytest.mark.cuda
@pytest.mark.parametrize("schedule", ["any", "partial_batch"])
def test_request_schedules_call_exactly_when_an_env_needs_a_chunk(env, schedule):
    model = RecordingZeroModel()
    policy = ActionChunkingPolicy(model, env, chunk_length=H, schedule=schedule)
    history = rollout(env, policy, 150)
    assert len(off_tick_resets(history, H)) >= 3, "the test needs asynchronous terminations"
    calls, rows = reference_calls(history, H, full_batch=schedule == "any")
    stats = policy.stats
    assert stats["inference_calls"] == calls == len(model.calls)
    assert stats["rows_inferred"] == rows
    assert calls > math.ceil(150 / H)  # asynchronous resets cost extra calls
    assert stats["suspended_env_steps"] == 0 and stats["held_env_steps"] == 0
    assert stats["active_env_steps"] == 150 * N
    if schedule == "partial_batch":
        assert stats["mean_envs_per_call"] < N and all(len(ids) == len(set(ids.tolist())) for ids, _ in model.calls)


@pytest.mark.cuda
@pytest.mark.parametrize("schedule", ["global_clock", "hold"])
def test_clock_schedules_call_exactly_ceil_t_over_h(env, schedule):
    model = RecordingZeroModel()
    policy = ActionChunkingPolicy(model, env, chunk_length=H, schedule=schedule)
    history = rollout(env, policy, 150)
    assert len(off_tick_resets(history, H)) >= 3
    stats = policy.stats
    assert stats["inference_calls"] == math.ceil(150 / H) == len(model.calls)
    assert all(len(ids) == N for ids, _ in model.calls)
    waiting = "suspended_env_steps" if schedule == "global_clock" else "held_env_steps"
    other = "held_env_steps" if schedule == "global_clock" else "suspended_env_steps"
    assert stats[waiting] > 0 and stats[other] == 0
    assert stats["active_env_steps"] + stats[waiting] == 150 * N


@pytest.mark.parametrize("schedule", sorted(SCHEDULES))
def test_the_observation_demand_foresees_every_call(env, schedule, monkeypatch):
    """With ``observation_demand`` the policy tells the env before each step whether the next observation feeds a
    call (so that cameras render for calls only): every observation a call reads was demanded, or was that of a
    step that reset envs under a schedule serving resets at once; the clock schedules demand about one step in H."""
    handed, reads = [], []  # per act: (needed, on_reset, reset count); per read: (act index, reset count)
    monkeypatch.setattr(env, "demand_observations",
                        lambda needed, on_reset=False: handed.append((needed, on_reset, env.reset_count)))
    monkeypatch.setattr(env, "complete_observations", lambda obs: reads.append((len(handed), env.reset_count)) or obs)
    extra = {"delay_steps": 2} if schedule == "rtc" else {}
    policy = ActionChunkingPolicy(RecordingZeroModel(), env, chunk_length=H, schedule=schedule,
                                  observation_demand=True, **extra)
    history = rollout(env, policy, 64)
    policy.close()
    assert len(off_tick_resets(history, H)) >= 2 and len(handed) == 64 and len(reads) >= 64 // H
    for act, resets in reads[1:]:  # the first act reads the reset's observation
        needed, on_reset, resets_before = handed[act - 1]
        assert needed or (on_reset and resets != resets_before), f"act {act} read an observation not demanded"
    if schedule in ("global_clock", "hold", "async", "rtc"):
        assert sum(needed for needed, _, _ in handed) <= 64 // (H // 2)


def test_suspended_envs_resume_at_the_tick_with_a_chunk_from_their_post_reset_observation(env):
    model = RecordingZeroModel()
    policy = ActionChunkingPolicy(model, env, chunk_length=H, schedule="global_clock")
    history = rollout(env, policy, 150)
    calls_by_step = {t: model.calls[t // H] for t in range(0, 150, H)}
    checked = 0
    for t in off_tick_resets(history, H):
        tick = (t // H + 1) * H
        if tick >= len(history):
            continue
        for i in history[t - 1]["dones"].nonzero().flatten().tolist():
            for s in range(t, tick):  # waits suspended, executing nothing
                assert history[s]["status"].suspended[i] and not history[s]["status"].executing[i]
                assert not history[s]["dones"][i]
            status = history[tick]["status"]
            assert status.served[i] and status.executing[i] and not status.suspended[i]
            env_ids, rows = calls_by_step[tick]
            row = rows[env_ids.tolist().index(i)]
            assert torch.equal(row, history[t - 1]["obs"][i])  # the observation right after its reset
            checked += 1
    assert checked >= 3


class StampedModel:
    """Chunks whose action j of call c is the tiny force (c + j / 100) / 1000, so every executed action tells
    which call planned it and its index in the chunk; records the call's observation rows."""

    def __init__(self, chunk_length=H):
        self.chunk_length = chunk_length
        self.calls: list[tuple[torch.Tensor, torch.Tensor]] = []

    def __call__(self, obs_rows, env_ids):
        call = len(self.calls)
        self.calls.append((env_ids.clone(), obs_rows["policy"].clone()))
        stamps = call + torch.arange(self.chunk_length, dtype=torch.float32) / 100
        return (stamps / 1000).view(1, -1, 1).expand(len(env_ids), -1, -1).clone()

    @staticmethod
    def decode(action: float) -> tuple[int, int]:
        value = action * 1000
        return int(value + 1e-3), round((value - int(value + 1e-3)) * 100)


def test_async_overlaps_the_next_inference_with_the_last_actions(env):
    """H = 8, lead d = 2: ticks every 6 steps, each chunk planned 2 steps before its tick from the observation
    then; envs that ran meanwhile skip its first 2 actions, envs suspended meanwhile start at action 0, and an
    env never runs a chunk planned before its last reset."""
    lead, period, steps = 2, H - 2, 150
    model = StampedModel()
    policy = ActionChunkingPolicy(model, env, chunk_length=H, schedule="async", refill_threshold=lead / H)
    history, actions = [], []
    obs, _ = env.reset(seed=0)
    policy.reset()
    for _ in range(steps):
        action = policy.act(obs)
        obs, _, terminated, truncated, _ = env.step(action)
        policy.observe(terminated | truncated)
        actions.append(action[:, 0].clone())
        history.append({"dones": terminated | truncated, "obs": obs["policy"].clone(), "status": policy.last_step})
    stats = policy.stats
    assert stats["inference_calls"] == math.ceil(steps / period)
    assert len(model.calls) == stats["inference_calls"] + (1 if (steps - 1) % period >= period - lead else 0)
    launch = [0] + [c * period - lead for c in range(1, len(model.calls))]
    last_reset = [-1] * N
    resets_between_ticks = checked_suspended_starts = 0
    for t, record in enumerate(history):
        status = record["status"]
        assert torch.equal(status.executing | status.suspended, torch.ones(N, dtype=torch.bool))
        if t > 0 and t % period == 0:  # a tick: every env not reset since the launch takes the chunk
            for i in range(N):
                assert bool(status.served[i]) == (last_reset[i] < launch[t // period])
        for i in status.executing.nonzero().flatten().tolist():
            call, index = StampedModel.decode(float(actions[t][i]))
            assert launch[call] > last_reset[i], "a chunk planned before the env's reset"
            tick = call * period
            ran_in_lead = call > 0 and bool(history[launch[call]]["status"].executing[i])
            assert index == t - tick + (lead if ran_in_lead else 0)
            checked_suspended_starts += index == t - tick and call > 0
            if call > 0:  # the rows of the call are the observation the launch step acted on
                env_ids, rows = model.calls[call]
                assert torch.equal(rows[env_ids.tolist().index(i)], history[launch[call] - 1]["obs"][i])
        for i in record["dones"].nonzero().flatten().tolist():
            last_reset[i] = t
            resets_between_ticks += (t + 1) % period != 0
    assert resets_between_ticks >= 3 and checked_suspended_starts >= 3
    assert stats["suspended_env_steps"] > 0


GATE_S = 60.0
"""Longest wait of a :class:`GatedModel` call for its release [s]: only reached when the loop waits for the call."""


class GatedModel:
    """Zero chunks; each call after the first (the first tick's, run at once) waits until the test loop sets its
    :attr:`release` event, and call ``fail_on`` (0-based) then raises. The loop sets it only after act() returned
    (and the env stepped), so an act() that waited for the call, or ran it inline, would hang: the call gives up
    after :data:`GATE_S`, is listed in :attr:`unreleased` (the test fails) and releases every later call."""

    def __init__(self, calls: int, fail_on: int | None = None):
        self.entered = [threading.Event() for _ in range(calls)]
        """Set when call k starts."""
        self.release = [threading.Event() for _ in range(calls)]
        """Set by the test to let call k end."""
        self.release[0].set()
        self.fail_on = fail_on
        self.calls = 0
        self.unreleased: list[int] = []

    def __call__(self, obs_rows, env_ids):
        call, self.calls = self.calls, self.calls + 1
        assert call < len(self.entered), f"unexpected model call {call}"
        self.entered[call].set()
        if not self.release[call].wait(GATE_S):
            self.unreleased.append(call)
            for event in self.release:
                event.set()
        if call == self.fail_on:
            raise RuntimeError("model crashed")
        return torch.zeros(len(env_ids), H, 1)


def test_async_runs_the_model_in_the_background_while_the_env_steps(env):
    """H = 8, d = 2: launches at steps 4, 10, 16, collected at 6, 12, 18. Each launched call has started when act()
    at its launch step returns, and is held until the env stepped on twice (the launch step and the next): act()
    never waits for the model, which ends after that act() returned, while the env stepped; an act() that ran
    the model inline or waited for it would never return (see :class:`GatedModel`)."""
    model = GatedModel(calls=4)
    policy = ActionChunkingPolicy(model, env, chunk_length=H, schedule="async", refill_threshold=0.25)
    launches = {4: 1, 10: 2, 16: 3}
    obs, _ = env.reset(seed=0)
    policy.reset()
    for step in range(19):
        actions = policy.act(obs)
        if step in launches:  # started in the background (a call that is not would never start: the loop waits)
            assert model.entered[launches[step]].wait(GATE_S), f"act() at launch step {step} started no model call"
        obs, _, terminated, truncated, _ = env.step(actions)
        policy.observe(terminated | truncated)
        if step - 1 in launches:  # two env steps ran meanwhile: the call may end, before the tick collects it
            model.release[launches[step - 1]].set()
    policy.close()
    assert model.unreleased == [], f"act() waited for model calls {model.unreleased} it launched"
    assert model.calls == 4 and policy.stats["inference_calls"] == 4


def test_async_configuration_errors_and_model_errors_in_the_worker(env):
    with pytest.raises(ValueError, match="needs d <= H / 2"):
        ActionChunkingPolicy(StampedModel(), env, chunk_length=H, schedule="async", refill_threshold=0.75)
    with pytest.raises(ValueError, match="aggregator='replace'"):
        ActionChunkingPolicy(StampedModel(), env, chunk_length=H, schedule="async", aggregator="blend")

    # the second call (launched at step 4 with the default lead d = H / 4 = 2) fails in the worker once the launch
    # step and the step after it went on: the error surfaces at the tick that collects it, step 6
    model = GatedModel(calls=2, fail_on=1)
    policy = ActionChunkingPolicy(model, env, chunk_length=H, schedule="async")
    obs, _ = env.reset(seed=0)
    policy.reset()
    raised_at = None
    for step in range(2 * H):
        try:
            actions = policy.act(obs)
        except RuntimeError as err:
            assert "model crashed" in str(err)
            raised_at = step
            break
        obs, _, terminated, truncated, _ = env.step(actions)
        policy.observe(terminated | truncated)
        if step == 5:
            model.release[1].set()
    assert raised_at == 6 and model.calls == 2 and model.unreleased == []
    assert policy.stats["inference_calls"] == 1
    policy.close()


def test_auto_waits_when_inference_is_costly_and_serves_when_it_is_cheap(env):
    costly = ActionChunkingPolicy(LatencyEmulator(RecordingZeroModel(), LatencyCfg(fixed_s=10.0, virtual=True)), env,
                                  chunk_length=H, schedule="auto")
    history = rollout(env, costly, 120)
    assert len(off_tick_resets(history, H)) >= 3
    assert costly.stats["inference_calls"] == math.ceil(120 / H) and costly.stats["suspended_env_steps"] > 0

    cheap = ActionChunkingPolicy(LatencyEmulator(RecordingZeroModel(), LatencyCfg(per_row_s=1e-5, virtual=True)), env,
                                 chunk_length=H, schedule="auto")
    history = rollout(env, cheap, 120)
    # every env reset between ticks is served at the next step: the ticks plus one call per such step
    assert cheap.stats["inference_calls"] == math.ceil(120 / H) + len(off_tick_resets(history, H))
    assert cheap.stats["suspended_env_steps"] == 0


class ChunkRecordingModel(StampedModel):
    """A stamped model whose chunks also depend on the observation (the pole angle), keeping every chunk."""

    def __init__(self, chunk_length=H):
        super().__init__(chunk_length)
        self.chunks: list[torch.Tensor] = []

    def __call__(self, obs_rows, env_ids):
        chunk = super().__call__(obs_rows, env_ids) + 1e-4 * torch.tanh(obs_rows["policy"][:, 1]).view(-1, 1, 1)
        self.chunks.append(chunk)
        return chunk


@pytest.mark.parametrize(
    "schedule, aggregator, refill",
    [("any", "temporal_ensemble", 0.5), ("any", "blend", 0.5), ("auto", "temporal_ensemble", 0.0)],
)
def test_aggregators_merge_leftovers_on_the_real_env(env, schedule, aggregator, refill):
    """New chunks meet leftover actions (any with a refill threshold; auto's envs served between ticks take the
    next tick's chunk): every executed action is the brute-force aggregate of all predictions made for that step
    since the env's last reset, and differs from what replace would execute where chunks overlapped."""
    model = ChunkRecordingModel()
    if schedule == "auto":  # cheap inference: envs reset between ticks are served at once
        model = LatencyEmulator(model, LatencyCfg(per_row_s=1e-5, virtual=True))
    policy = ActionChunkingPolicy(model, env, chunk_length=H, schedule=schedule, aggregator=aggregator,
                                  refill_threshold=refill)
    recorded = model.model if schedule == "auto" else model
    reference = REFERENCES[aggregator]
    obs, _ = env.reset(seed=0)
    policy.reset()
    predictions: list[dict[int, list[float]]] = [{} for _ in range(N)]
    merged_steps = resets = 0
    for t in range(120):
        actions = policy.act(obs)
        status = policy.last_step
        obs, _, terminated, truncated, _ = env.step(actions)
        dones = terminated | truncated
        policy.observe(dones)
        if status.served is not None:
            env_ids = recorded.calls[-1][0].tolist()
            for i in status.served.nonzero().flatten().tolist():
                row = recorded.chunks[-1][env_ids.index(i)]
                for j in range(H):
                    predictions[i].setdefault(t + j, []).append(float(row[j, 0]))
        assert status.executing.all(), "every env executes a chunk action in every step here"
        for i in range(N):
            made = predictions[i][t]
            assert float(actions[i, 0]) == pytest.approx(reference(made), rel=1e-5, abs=1e-9), (t, i, made)
            if len(made) > 1:
                merged_steps += 1
                assert abs(float(actions[i, 0]) - made[-1]) > 1e-5, "replace would have executed the same action"
            if dones[i]:
                predictions[i] = {}
                resets += 1
    assert resets >= 3 and merged_steps >= 40, (resets, merged_steps)
    assert policy.stats["suspended_env_steps"] == 0


def test_partial_reset_drops_only_the_given_envs_chunks(env):
    policy = ActionChunkingPolicy(CartpoleLQRChunkModel(CartpoleLQRCfg(chunk_length=H)), env, chunk_length=H,
                                  schedule="global_clock")
    obs, _ = env.reset()
    policy.reset()
    for _ in range(3):
        obs, *_ = env.step(policy.act(obs))
        policy.observe(torch.zeros(N, dtype=torch.bool))
    chunks, cursor = policy.queues.chunks.clone(), policy.queues.cursor.clone()
    obs, _ = env.reset(env_ids=torch.tensor([2]))
    policy.reset([2])
    others = torch.arange(N) != 2
    assert torch.equal(policy.queues.chunks[others], chunks[others])
    assert torch.equal(policy.queues.cursor[others], cursor[others]) and policy.queues.cursor[2] == H
    for step in range(3, H + 1):
        obs, *_ = env.step(policy.act(obs))
        policy.observe(torch.zeros(N, dtype=torch.bool))
        status = policy.last_step
        if step < H:  # env 2 waits suspended for the tick, the others go on
            assert status.suspended.tolist() == (~others).tolist() and status.executing.tolist() == others.tolist()
        else:
            assert status.served.all() and status.executing.all()


@pytest.mark.cuda
@pytest.mark.parametrize("schedule", ["global_clock", "any", "async"])
def test_no_host_sync_between_ticks(env, schedule, device):
    """act() and observe() read the device only on steps that infer (ticks, refills, collects) or follow a reset
    or an inference (to refresh the refill mirror): every other step, predicted beforehand, runs with every
    host read of a tensor raising (on a GPU: CUDA's sync debug mode set to raise)."""
    x = torch.ones(1, device=device)
    for host_read in (lambda: bool(x.sum() > 0), lambda: torch.equal(x, x + 0), lambda: torch.allclose(x, x + 0), lambda: x.cpu()):
        with pytest.raises((AssertionError, RuntimeError), match="host sync|synchroniz"), forbid_syncs(device):
            host_read()  # the guard sees each kind of host read
    assert check_quiet_steps(env, RecordingZeroModel(), schedule, H, 60) >= 10


def test_lqr_model_step_matches_the_simulator(env):
    """One env step of the LQR model's dynamics against the simulator, from given states and actions."""
    env.reset()
    model = CartpoleLQRChunkModel()
    generator = torch.Generator().manual_seed(0)
    state = (torch.rand(N, 4, generator=generator) - 0.5) * torch.tensor([2.0, 1.0, 1.0, 2.0])
    action = (torch.rand(N, generator=generator) - 0.5) * 4.0
    env.scene["robot"].write_joint_state_to_sim_index(position=state[:, :2], velocity=state[:, 2:])
    env.sim.forward()
    env.scene.update(0.0)
    obs, *_ = env.step(action.unsqueeze(1))
    simulated = obs["policy"]
    predicted = model.step(state, action)
    assert (simulated - state).abs()[:, 2:].max() > 0.5  # the step moves the state noticeably
    torch.testing.assert_close(predicted, simulated, atol=1e-4, rtol=1e-4)


def test_lqr_chunks_balance_the_pole(env):
    """Open-loop LQR plans of 16 actions keep every pole up (no fall over the run), zero actions do not."""
    lengths = {}
    models = {"lqr": CartpoleLQRChunkModel(CartpoleLQRCfg(chunk_length=16)), "zero": RecordingZeroModel(16)}
    for name, model in models.items():
        policy = ActionChunkingPolicy(model, env, chunk_length=16, schedule="global_clock")
        history = rollout(env, policy, 240)
        falls = int(sum(record["terminated"].sum() for record in history))
        episodes = falls + N  # completed episodes plus the running ones
        lengths[name] = (policy.stats["active_env_steps"] / episodes, falls)
    assert lengths["lqr"][1] == 0 and lengths["lqr"][0] == 240
    assert lengths["zero"][1] >= N and lengths["lqr"][0] > 3 * lengths["zero"][0]


@pytest.mark.cuda
@pytest.mark.parametrize("schedule", sorted(SCHEDULES))
def test_every_schedule_drives_the_lqr_policy(env, schedule):
    """Episodes time out at different steps (random start lengths), so envs restart mid-chunk from tilts of
    up to 45 degrees; with the chunks fed in order, no pole falls (hold: waiting envs hold a zero action)."""
    policy = ActionChunkingPolicy(CartpoleLQRChunkModel(CartpoleLQRCfg(chunk_length=H)), env, chunk_length=H,
                                  schedule=schedule)
    start = torch.tensor([230, 240, 250, 260, 270, 280, 290, 295])
    history = rollout(env, policy, 120, start_lengths=start)
    assert len(off_tick_resets(history, H)) >= 3
    falls = int(sum(record["terminated"].sum() for record in history))
    assert policy.stats["episodes_completed"] >= N
    if schedule != "hold":
        assert falls == 0
    if schedule in ("global_clock", "hold"):
        assert policy.stats["inference_calls"] == math.ceil(120 / H)
