"""Per-env random streams (``SuspendCfg.per_env_random``): suspension is invisible to the draws of every env, and an
env's k-th episode draws the same whatever ran before it.

On the noisy push-cube (noise of three kinds and a random delay on every step, a random nudge every 0.2-0.5 s, a
new target every 0.2-0.5 s) env 0 is suspended for 30 steps: with per-env streams every env retraces the run that
never suspended it, env 0 after its resume and envs 1..3 throughout; with Isaac Lab's shared generator the audit
reports "shared random generator".
"""

import contextlib
import random

import numpy as np
import pytest
import torch
from scipy import stats

import isaaclab.utils.math as math_utils
from isaaclab.envs.mdp import events
from isaaclab.envs.mdp.events import _randomize_prop_by_op
from isaaclab.utils import noise
from isaaclab.utils.buffers import DelayBuffer

from isaaclab.managers import EventTermCfg, SceneEntityCfg
from isaaclab_tasks.contrib.stack.mdp.stack_events import randomize_object_pose

from helpers import load_script
from isaaclab_suspend.suspension import PerEnvGenerator, per_env_rng
from isaaclab_suspend.tasks.env_factory import make_env_cfg, open_env
from isaaclab_suspend.suspension.random_streams import unroutable_reasons

# 0.4 s episodes (24 steps) and the steps the audit chooses after the suspension (31: the nudge's longest interval
# and one), so that the other envs reset and nudge inside it and env 0 after its resume
AUDIT = ["--task", "Isaac-PushCube-Noisy-Suspendable", "--num_envs", "4", "--suspend_at", "5", "--suspend_steps", "30",
         "--quiet", "env.episode_length_s=0.4"]


def test_suspended_and_never_suspended_envs_retrace_with_events_in_the_window(capsys):
    """Exit 0: bit for bit on every env; the nudges, target resamplings, noise, delays and resets drew in the
    window and after it."""
    status = load_script("audit_suspension").main(AUDIT)
    out = capsys.readouterr().out
    assert status == 0, out[-4000:]
    assert "No divergence" in out and "Global torch generator drawn after suspension by: nothing" in out
    drawn = out[out.index("Per-env random streams drawn after suspension by: "):].splitlines()[0]
    for term in ("event.nudge_cube", "command.target", "obs.policy.cart_pos.noise", "obs.policy.cart_vel.delay",
                 "obs.policy.cube_x.noise", "event.reset_cube", "obs.policy.cube_x.noise.reset"):
        assert term in drawn, drawn


def test_shared_generator_shifts_the_never_suspended_envs(capsys):
    """The same run on Isaac Lab's generator: exit 1, never-suspended envs diverge, "shared random generator"."""
    status = load_script("audit_suspension").main([*AUDIT, "--shared_rng"])
    out = capsys.readouterr().out
    assert status == 1, out[-4000:]
    rows = [[c.strip() for c in line.split("|")[1:-1]] for line in out.splitlines() if line.startswith("|  ")]
    assert {r[0] for r in rows} & {"1", "2", "3"}, out[-4000:]
    assert all(r[4] == "shared random generator" for r in rows)


# Draw statistics: with nothing suspended, each family drawn through the streams follows the stock distribution.

N = 2048


def _streams(num_envs: int = N, seed: int = 7) -> PerEnvGenerator:
    return PerEnvGenerator(seed, num_envs, "cpu")


def _pooled(draw, steps: int = 4, num_envs: int = N) -> torch.Tensor:
    """``draw()`` routed for all envs over a few steps, flattened."""
    gen = _streams(num_envs)
    out = []
    for _ in range(steps):
        gen.advance()
        with gen.route("term"):
            out.append(draw().flatten().double())
    return torch.cat(out)


def _stock(draw, steps: int = 4) -> torch.Tensor:
    torch.manual_seed(0)
    return torch.cat([draw().flatten().double() for _ in range(steps)])


FAMILIES = {
    "uniform noise": (lambda: noise.uniform_noise(torch.zeros(N, 3), noise.UniformNoiseCfg(n_min=-0.2, n_max=0.5)),
                      stats.uniform(-0.2, 0.7).cdf),
    "gaussian noise": (lambda: noise.gaussian_noise(torch.zeros(N, 3), noise.GaussianNoiseCfg(mean=0.1, std=0.3)),
                       stats.norm(0.1, 0.3).cdf),
    "sample_uniform": (lambda: math_utils.sample_uniform(-1.0, 2.0, (N, 2), "cpu"), stats.uniform(-1.0, 3.0).cdf),
    "sample_uniform_from_ranges": (lambda: math_utils.sample_uniform_from_ranges({"x": (0.0, 0.5)}, ["x"], N, "cpu"),
                                   stats.uniform(0.0, 0.5).cdf),
    "sample_log_uniform": (lambda: math_utils.sample_log_uniform(0.1, 10.0, (N, 2), "cpu"),
                           stats.loguniform(0.1, 10.0).cdf),
    "sample_gaussian": (lambda: math_utils.sample_gaussian(1.0, 0.5, (N, 2), "cpu"), stats.norm(1.0, 0.5).cdf),
    "sample_triangle": (lambda: math_utils.sample_triangle(0.0, 2.0, (N,), "cpu"), None),  # Isaac Lab's own shape
    "gaussian prop by op": (lambda: _randomize_prop_by_op(torch.zeros(N, 3), (0.0, 2.0), None, slice(None), "add",
                                                          "gaussian"), stats.norm(0.0, 2.0).cdf),
    "command uniform_": (lambda: torch.empty(N, 1).uniform_(1.0, 1.6), stats.uniform(1.0, 0.6).cdf),
    "Tensor.normal_": (lambda: torch.zeros(N, 3).normal_(0.0, 1.0), stats.norm().cdf),
}


@pytest.mark.parametrize("family", FAMILIES)
def test_draws_follow_the_stock_distribution(family):
    """Kolmogorov-Smirnov against the distribution and against stock draws (torch's generator)."""
    draw, cdf = FAMILIES[family]
    ours = _pooled(draw).numpy()
    assert cdf is None or stats.kstest(ours, cdf).pvalue > 1e-3
    assert stats.ks_2samp(ours, _stock(draw).numpy()).pvalue > 1e-3


def _bias_model_run(gen: PerEnvGenerator | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A biased noise model reset then called twice (routed when ``gen`` is given): its bias and both outputs."""
    cfg = noise.NoiseModelWithAdditiveBiasCfg(noise_cfg=noise.GaussianNoiseCfg(std=0.01),
                                              bias_noise_cfg=noise.UniformNoiseCfg(n_min=-0.3, n_max=0.3))
    model = noise.NoiseModelWithAdditiveBias(cfg, N, "cpu")
    route = (lambda name: gen.route(name)) if gen is not None else (lambda name: contextlib.nullcontext())
    with route("bias.reset"):
        model.reset()
    outputs = []
    for _ in range(2):
        if gen is not None:
            gen.advance()
        with route("noise"):
            outputs.append(model(torch.zeros(N, 1)))
    return model._bias.flatten().double(), *outputs


def test_additive_bias_noise_model():
    """The bias is drawn per env as Isaac Lab draws it (two-sample KS) and held between resets; the white noise
    changes every step."""
    bias, first, second = _bias_model_run(_streams())
    torch.manual_seed(0)
    stock_bias, _, _ = _bias_model_run(None)
    assert stats.ks_2samp(bias.numpy(), stock_bias.numpy()).pvalue > 1e-3
    assert (first - second).abs().max() < 0.1 and not torch.equal(first, second)


def test_delay_lags_are_uniform_integers():
    """A random observation delay's lags: uniform over [min_lag, history_length] (chi-square)."""
    buffer = DelayBuffer(3, N, "cpu", min_lag=1, hold_prob=0.0)
    gen = _streams()
    lags = []
    for _ in range(4):
        gen.advance()
        with gen.route("delay"):
            buffer.compute(torch.zeros(N, 1))
        lags.append(buffer.time_lags.clone())
    counts = torch.bincount(torch.cat(lags), minlength=4)
    assert counts[0] == 0
    assert stats.chisquare(counts[1:].numpy()).pvalue > 1e-3


def test_an_env_draws_the_same_whatever_the_others_do():
    """Env i's draw depends on (seed, i, its counters, the term) only: drawing for a subset, in another order, with
    more envs, or with other envs suspended (not counting steps) hands env i the same numbers."""
    small, large = _streams(4), _streams(16)
    with small.route("t", torch.tensor([3, 1])):
        subset = torch.rand(2, 5)
    with large.route("t"):
        everyone = torch.rand(16, 5)
    assert torch.equal(subset, everyone[[3, 1]])
    active = torch.tensor([True, False, True, True])
    small.advance(active)
    large.advance()
    with small.route("t"):
        after = torch.rand(4, 5)
    with large.route("t"):
        everyone_after = torch.rand(16, 5)
    assert torch.equal(after[[0, 2, 3]], everyone_after[[0, 2, 3]])
    assert torch.equal(after[1], everyone[1])  # env 1 did not step: it is handed what it would have drawn
    with small.route("other term"):
        assert not torch.equal(torch.rand(4, 5), after)


def test_an_episode_draws_the_same_whatever_ran_before():
    """Env i's k-th episode draws from streams keyed by (seed, i, k) alone: the same reset draws and the same
    draws at each step of the episode, however long its earlier episodes ran and whichever envs reset with it;
    another episode, another seed or another env draws other numbers."""
    short, long = _streams(4), _streams(4)
    for gen, lengths in ((short, (3, 5)), (long, (11, 2))):  # env 2's first two episodes: 3 and 5 steps, or 11 and 2
        for length in lengths:
            with gen.resetting(torch.tensor([2]) if gen is short else None):
                pass
            for _ in range(length):
                gen.advance(torch.tensor([False, True, True, False]))
    draws = {}
    for name, gen in (("short", short), ("long", long)):
        with gen.resetting(torch.tensor([2])), gen.route("event.reset_cube", torch.tensor([2])):
            reset = torch.rand(1, 3)
        gen.advance()
        with gen.route("event.nudge_cube", torch.tensor([2])):
            step = torch.rand(1, 3)
        draws[name] = (reset, step)
    assert int(short.resets[2]) == int(long.resets[2]) == 3 and int(short.steps[2]) == int(long.steps[2]) == 1
    assert torch.equal(draws["short"][0], draws["long"][0]) and torch.equal(draws["short"][1], draws["long"][1])
    assert not torch.equal(draws["short"][0], draws["short"][1])  # the reset stream is not the step's
    other = _streams(4)
    with other.resetting(None), other.route("event.reset_cube"):
        first = torch.rand(4, 3)
    assert not torch.equal(first[2], draws["short"][0][0])  # episode 1, not 3
    assert not torch.equal(first[1], first[2])  # env 1, not 2
    eight = _streams(4, seed=8)
    with eight.resetting(None), eight.route("event.reset_cube"):
        assert not torch.equal(torch.rand(4, 3), first)  # seed 8, not 7


def test_reset_draws_differ_from_step_draws_and_rows_are_independent():
    gen = _streams()
    with gen.route("t"):
        step = torch.rand(N)
    with gen.resetting(torch.arange(N)), gen.route("t"):
        reset = torch.rand(N)
    assert abs(stats.pearsonr(step.numpy(), reset.numpy()).statistic) < 0.1
    with gen.route("t"):
        two = torch.rand(N, 2)
    assert abs(stats.pearsonr(two[:, 0].numpy(), two[:, 1].numpy()).statistic) < 0.1


def test_outside_a_block_and_unmapped_draws_use_torchs_generator():
    """Outside a routing block torch's samplers are its own; a draw no env row maps to is served by torch's
    generator and recorded."""
    gen = _streams(4)
    with gen.route("t"):
        torch.rand(1)
    torch.manual_seed(3)
    outside = torch.rand(4)
    torch.manual_seed(3)
    with gen.route("global"):
        unmapped = torch.rand(5)
    assert torch.equal(unmapped[:4], outside)
    assert gen.unmapped == {"t": "torch.rand of shape (1,)", "global": "torch.rand of shape (5,)"}


def test_a_draw_outside_the_routed_terms_is_reported():
    """While watched (an env step), a draw outside any routing block is reported with its sampler; routed ones
    are not."""
    gen, seen = _streams(4), []
    with per_env_rng.watching(seen.append):
        torch.rand(4)
        torch.zeros(4).uniform_()
        with gen.route("t"):
            torch.rand(4)
    torch.rand(4)
    assert seen == ["rand", "Tensor.uniform_"]


def _numpy_event(env, env_ids):
    return np.random.uniform(size=len(env_ids))


def test_terms_that_cannot_be_routed_are_named_with_what_to_change():
    """The start-up check reads a term's source: NumPy's generator or a TorchScript sampler cannot be routed."""
    assert "draw with torch.rand" in unroutable_reasons(_numpy_event)[0]
    assert "torch.randn" in unroutable_reasons(events.reset_root_state_with_random_orientation)[0]
    assert unroutable_reasons(events.push_by_setting_velocity) == []


def test_an_event_drawing_from_pythons_random_draws_per_env():
    """Isaac Lab's ``randomize_object_pose`` (its stack tasks place their cubes with Python's ``random``) is called
    once per env, ``random`` seeded from the env's reset stream: env 0's next start is the same whether env 1 reset
    twice before it or not and whatever Python's own stream holds, the envs start apart, and ``random``'s state is
    left as it was."""
    cfg = make_env_cfg("Isaac-PushCube-Suspendable", 2)
    cfg.suspend.per_env_random = True
    cfg.events.place_cube = EventTermCfg(func=randomize_object_pose, mode="reset", params={
        "asset_cfgs": [SceneEntityCfg("cube")], "pose_range": {"x": (0.3, 0.6), "y": (-0.2, 0.2), "z": (0.05, 0.05)}})
    with open_env("Isaac-PushCube-Suspendable", cfg=cfg) as env:
        env = env.unwrapped

        def next_start(others: int, python_seed: int) -> torch.Tensor:
            """Env 0's cube after its first reset, ``others`` resets of env 1 before it."""
            random.seed(python_seed)
            env.reset(seed=5)
            for _ in range(others):
                env.reset(torch.tensor([1]))
            state = random.getstate()
            env.reset(torch.tensor([0]))
            assert random.getstate() == state
            pos = env.scene["cube"].data.root_pos_w - env.scene.env_origins
            return pos.clone()

        alone, after_others = next_start(0, python_seed=1), next_start(2, python_seed=2)
        assert torch.equal(alone[0], after_others[0])
        assert not torch.equal(alone[0, :2], alone[1, :2])
        assert 0.3 <= alone[0, 0] <= 0.6 and alone[0, 2] == pytest.approx(0.05, abs=1e-4)
        assert "once per env (Python's random seeded per env)" in str(env.random_streams)
