"""After a model error (a transient time-out) the chunking policy stays consistent under every schedule: the
error surfaces at the act() that needs the chunk, and the next act() retries (``async``: synchronously)."""

import pytest
import torch

from isaaclab_suspend.chunking import ActionChunkingPolicy
from isaaclab_suspend.tasks.env_factory import open_env

N = 4
H = 4


@pytest.fixture(scope="module")
def env():
    """Cartpole with suspension enabled, for the suspending schedules."""
    with open_env("Isaac-Cartpole-Suspendable", N) as env:
        env.reset()
        yield env


@pytest.mark.parametrize("schedule", ["async", "global_clock", "partial_batch", "hold"])
def test_a_model_error_leaves_the_policy_consistent_and_the_next_call_retries(env, schedule):
    """A transient model error (a time-out) surfaces at the act() that needs the chunk; the next act() retries
    (under async synchronously, as the first tick) and the run goes on with every env served."""
    calls = []

    def flaky(obs_rows, env_ids):
        calls.append(len(env_ids))
        if len(calls) in (2, 4):
            raise TimeoutError("the model timed out")
        return torch.full((len(env_ids), H, 1), 0.1)

    policy = ActionChunkingPolicy(flaky, env, chunk_length=H, schedule=schedule)
    obs, _ = env.reset()
    policy.reset()
    errors = steps = 0
    while steps < 6 * H:
        try:
            actions = policy.act(obs)
        except TimeoutError:
            errors += 1
            continue
        obs, _, terminated, truncated, _ = env.step(actions)
        policy.observe(terminated | truncated)
        steps += 1
    policy.close()
    assert errors == 2 and len(calls) > 4
    assert bool(policy.last_step.executing.any())  # envs run actions again after the errors
    policy.reset()
