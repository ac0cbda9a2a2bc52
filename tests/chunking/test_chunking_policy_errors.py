"""Bad input to the chunking policy fails early with a clear message; module models and TensorBoard work."""

import os
import re

import numpy as np
import pytest
import torch

from isaaclab_suspend.chunking import ActionChunkingPolicy, ActionChunkingPolicyCfg
from isaaclab_suspend.tasks.env_factory import open_env

N = 4
H = 4


@pytest.fixture(scope="module")
def env():
    """Cartpole with suspension disabled: 'hold', 'any' and 'partial_batch' work, the suspending ones refuse."""
    with open_env("Isaac-Cartpole-Suspendable", N, suspend__enabled=False) as env:
        env.reset()
        yield env


def zeros(obs_rows, env_ids):
    return torch.zeros(len(env_ids), H, 1)


@pytest.mark.parametrize("length", [0, -3, 2.5, True])
def test_chunk_length_must_be_a_positive_int(env, length):
    with pytest.raises(ValueError, match="chunk_length must be a positive int"):
        ActionChunkingPolicy(zeros, env, chunk_length=length, schedule="hold")


@pytest.mark.parametrize(
    "overrides, error, match",
    [
        ({"schedule": "every_step"}, ValueError, "Unknown schedule 'every_step'"),
        ({"schedule": "hold", "aggregator": "median"}, ValueError, "Unknown aggregator 'median'"),
        ({"schedule": "hold", "refill_threshold": 1.5}, ValueError, "refill_threshold must lie in"),
        ({"schedule": "hold", "log_interval": 0}, ValueError, "log_interval"),
        ({"schedule": "hold", "horizon": 8}, TypeError, "Unknown ActionChunkingPolicyCfg fields \\['horizon'\\]"),
    ],
)
def test_bad_configuration(env, overrides, error, match):
    with pytest.raises(error, match=match):
        ActionChunkingPolicy(zeros, env, chunk_length=H, **overrides)


@pytest.mark.parametrize("schedule", ["global_clock", "auto", "async"])
def test_suspending_schedules_need_suspension(env, schedule):
    with pytest.raises(ValueError, match="suspend.enabled = True"):
        ActionChunkingPolicy(zeros, env, chunk_length=H, schedule=schedule)


def test_model_and_env_types(env):
    with pytest.raises(TypeError, match="model must be callable"):
        ActionChunkingPolicy("policy.pt", env, schedule="hold")
    with pytest.raises(TypeError, match="SuspendableManagerBasedRLEnv"):
        ActionChunkingPolicy(zeros, object(), schedule="hold")


@pytest.mark.parametrize(
    "output, error, match",
    [
        (lambda b: torch.zeros(b, H + 4, 1), ValueError, r"shape \(\d+, 8, 1\); expected .* = \(\d+, 4, 1\).*slice"),
        (lambda b: torch.zeros(N, H, 1)[:1], ValueError, "return one row per env id"),
        (lambda b: torch.zeros(b, H), ValueError, "expected"),
        (lambda b: [[0.0] * H] * b, TypeError, "must return a torch.Tensor"),
        (lambda b: torch.zeros(b, H, 1, dtype=torch.long), TypeError, "floating-point"),
    ],
)
def test_bad_model_output(env, output, error, match):
    policy = ActionChunkingPolicy(lambda obs, ids: output(len(ids)), env, chunk_length=H, schedule="partial_batch")
    obs, _ = env.reset()
    with pytest.raises(error, match=match):
        policy.act(obs)


def test_non_finite_actions_are_caught_at_the_inference_that_returns_them(env):
    calls = []

    def model(obs_rows, env_ids):
        calls.append(len(env_ids))
        chunk = torch.zeros(len(env_ids), H, 1)
        if len(calls) == 2:
            chunk[2, 1] = float("nan")
        return chunk

    policy = ActionChunkingPolicy(model, env, chunk_length=H, schedule="hold")
    obs, _ = env.reset()
    policy.reset()
    for _ in range(H):  # first chunk: finite
        obs, _, terminated, truncated, _ = env.step(policy.act(obs))
        policy.observe(terminated | truncated)
    with pytest.raises(ValueError, match=r"or non-finite \(NaN or inf\), e\.g\. nan for env 2 \(envs \[2\]\)"):
        policy.act(obs)


def test_bad_loop_usage(env):
    policy = ActionChunkingPolicy(zeros, env, chunk_length=H, schedule="any")
    obs, _ = env.reset()
    with pytest.raises(RuntimeError, match="observe\\(\\) follows a step"):
        policy.observe(torch.zeros(N, dtype=torch.bool))
    with pytest.raises(TypeError, match="observation dict"):
        policy.act(obs["policy"])
    env.step(policy.act(obs))
    with pytest.raises(TypeError, match="bool tensor terminated \\| truncated"):
        policy.observe(torch.zeros(N))
    with pytest.raises(ValueError, match="dones must have shape \\(4,\\)"):
        policy.observe(torch.zeros(N + 1, dtype=torch.bool))


def test_torch_module_model_with_a_cfg_and_tensorboard(env, tmp_path):
    class LinearChunk(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.head = torch.nn.Linear(4, H)

        def forward(self, obs_rows, env_ids):
            return self.head(obs_rows["policy"]).unsqueeze(-1)

    cfg = ActionChunkingPolicyCfg(chunk_length=H, schedule="partial_batch", log_dir=str(tmp_path), log_interval=5)
    policy = ActionChunkingPolicy(LinearChunk(), env, cfg)
    obs, _ = env.reset()
    policy.reset()
    for _ in range(12):
        actions = policy.act(obs)
        assert actions.shape == (N, 1) and not actions.requires_grad
        obs, _, terminated, truncated, _ = env.step(actions)
        policy.observe(terminated | truncated)
    policy.close()
    assert policy.stats["inference_calls"] == 3
    events = [f for f in os.listdir(tmp_path) if f.startswith("events.out.tfevents")]
    assert events and os.path.getsize(tmp_path / events[0]) > 0


@pytest.mark.parametrize("bound, value", [(1.0e6, 3.0e38), (2.0, -2.5)])
def test_actions_beyond_the_bound_are_refused_when_the_chunk_arrives(env, bound, value):
    def model(obs_rows, env_ids):
        chunk = torch.zeros(len(env_ids), H, 1)
        chunk[1, 2] = value
        return chunk

    policy = ActionChunkingPolicy(model, env, chunk_length=H, schedule="hold", action_bound=bound)
    obs, _ = env.reset()
    with pytest.raises(ValueError, match=re.escape(f"[-{bound:g}, {bound:g}] or non-finite (NaN or inf), e.g. {value:g}"
                                                   " for env 1 (envs [1])")):
        policy.act(obs)
    unbounded = ActionChunkingPolicy(model, env, chunk_length=H, schedule="hold", action_bound=None)
    unbounded.act(obs)
    with pytest.raises(ValueError, match="action_bound must be a positive number"):
        ActionChunkingPolicy(model, env, chunk_length=H, schedule="hold", action_bound=0.0)


def test_a_chunk_that_requires_grad_is_installed_detached(env):
    weights = torch.full((1, H, 1), 0.2)

    def model(obs_rows, env_ids):
        return weights.detach().repeat(len(env_ids), 1, 1).requires_grad_()  # a leaf that requires grad

    policy = ActionChunkingPolicy(model, env, chunk_length=H, schedule="any")
    obs, _ = env.reset()
    policy.reset()
    for _ in range(3 * H):
        actions = policy.act(obs)
        assert not actions.requires_grad and not policy.queues.chunks.requires_grad
        obs, _, terminated, truncated, _ = env.step(actions)
        policy.observe(terminated | truncated)
    assert not env.action_manager.action.requires_grad


def test_env_ids_of_every_kind(env):
    """A uint8 tensor could be a mask or ids: refused; numpy ids and bool masks, and numpy ints in a list, work."""
    with pytest.raises(TypeError, match="a uint8 tensor is ambiguous: pass a bool mask or int64 ids"):
        env.env_mask(torch.tensor([1, 0, 0, 1], dtype=torch.uint8))
    with pytest.raises(TypeError, match="a uint8 tensor is ambiguous"):
        env.env_mask(np.array([1, 0, 0, 1], dtype=np.uint8))
    expected = torch.tensor([True, False, False, True])
    for ids in (np.array([0, 3]), np.array([3, 0], dtype=np.int32), np.array([True, False, False, True]),
                [np.int64(0), np.int64(3)], torch.tensor([0, 3]), expected.clone(), np.array([0, 3, 3])[::-1]):
        assert torch.equal(env.env_mask(ids), expected), ids
    for ids, error in ((np.array([0.0, 3.0]), TypeError), (np.array([0, 4]), ValueError),
                       ([np.True_, False], TypeError), (np.array([True, False]), ValueError)):
        with pytest.raises(error):
            env.env_mask(ids)
