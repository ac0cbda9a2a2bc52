"""The runs' shared loop on the real push-cube env: (desynchronised) starts, act -> step -> observe, and the
episode outcomes it feeds (with the cube's distance to its target at the end of each scored episode)."""

import pytest
import torch

from isaaclab_suspend import runs
from isaaclab_suspend.chunking import ActionChunkingPolicy
from isaaclab_suspend.runs import EpisodeOutcomes
from isaaclab_suspend.tasks.embedded import make_default_model

TASK = "Isaac-PushCube-Suspendable"
STEPS = 150


def test_rollout_runs_the_policy_and_scores_the_final_distance():
    cfg = runs.RunEnvCfg(task=TASK, num_envs=4, seed=3, per_env_random=False)
    with runs.open_run_env(cfg) as env:
        policy = ActionChunkingPolicy(make_default_model(TASK, 8), env, chunk_length=8, schedule="global_clock")
        runs.start_episodes(env, cfg.seed, desync=True)
        expected_start = torch.randint(0, int(env.max_episode_length), (4,), generator=torch.Generator().manual_seed(3))
        assert torch.equal(env.episode_length_buf.cpu(), expected_start) and expected_start.unique().numel() > 1
        obs = runs.start_episodes(env, cfg.seed, desync=False)  # every episode from its start: all are scored
        assert not env.episode_length_buf.any()
        outcomes = EpisodeOutcomes(env, final_term="cube_to_target")
        previous, final_distances = obs, []
        for t in runs.rollout(env, policy, obs, STEPS):
            assert t.obs is previous, "the policy acts on the observation of the step before"
            # cube_to_target is the last of the five one-wide terms of the policy group
            final_distances += t.obs["policy"][:, 4].abs()[t.dones & outcomes.scored].tolist()
            outcomes.update(t.dones, ~policy.last_step.suspended, t.obs)
            previous = t.next_obs
        figures = outcomes.as_dict()
    assert t.step == STEPS - 1 and policy.stats["steps"] == STEPS
    assert figures["episodes_scored"] == len(final_distances) > 0
    assert figures["final_cube_to_target"] == pytest.approx(sum(final_distances) / len(final_distances), rel=1e-5)
    assert figures["success_rate"] > 0.5, "the scripted planner pushes most cubes to their target"
