"""Random suspend / resume / termination schedules: every freeze invariant is checked at every step."""

import pytest
import torch

from isaaclab.envs.mdp.recorders.recorders_cfg import ActionStateRecorderManagerCfg
from isaaclab.managers import DatasetExportMode

from isaaclab_suspend.tasks.env_factory import open_env

from scene_state import physics_tensors

NUM_ENVS = 8
STEPS = 500


def _per_env_state(env) -> dict[str, torch.Tensor]:
    """Everything a suspended env must keep bit for bit, as per-env rows (dim 0 = env)."""
    state = {f"physics{i}": t for i, t in enumerate(physics_tensors(env))}
    state["action"] = env.action_manager.action.clone()
    state["prev_action"] = env.action_manager.prev_action.clone()
    state["episode_length"] = env.episode_length_buf.clone()
    state["episode_sums"] = env.reward_manager._episode_sum_buf.clone()
    for name, term in env.command_manager._terms.items():
        state[f"command.{name}"] = term.command.clone()
        state[f"command.{name}.time_left"] = term.time_left.clone()
    em = env.event_manager
    if "interval" in em.active_terms:
        for i, timer in enumerate(em._interval_term_time_left):
            state[f"event.interval.{i}"] = timer.clone()
    state["obs"] = env.obs_buf["policy"].clone()
    state["samples"] = torch.tensor([len(env.recorder_manager.get_episode(i).data.get("actions", [])) for i in range(env.num_envs)])
    return state


@pytest.mark.parametrize(
    "task, history_length, preset",
    [
        ("Isaac-Cartpole-Suspendable", 0, "newton_mjwarp"),
        ("Isaac-Cartpole-Suspendable", 3, "newton_mjwarp"),
        ("Isaac-PushCube-Suspendable", 0, "newton_mjwarp"),
        ("Isaac-PushCube-Suspendable", 0, "newton_featherstone"),
    ],
)
def test_random_schedule_keeps_every_invariant(task, history_length, preset, tmp_path):
    recorders = ActionStateRecorderManagerCfg(
        dataset_export_mode=DatasetExportMode.EXPORT_NONE, dataset_export_dir_path=str(tmp_path)
    )
    # short episodes so that natural terminations and time-outs interleave with suspensions
    with open_env(
        task, NUM_ENVS, overrides=[f"presets={preset}"], episode_length_s=1.0, recorders=recorders,
        observations__policy__history_length=history_length,
    ) as env:
        gen = torch.Generator().manual_seed(1)
        env.reset()
        counts = {"suspended_steps": 0, "resets": 0, "suspends": 0, "resumes": 0}
        for step in range(STEPS):
            # random schedule: suspend some active envs, resume some suspended ones
            suspended = env.suspended_mask
            to_suspend = (torch.rand(NUM_ENVS, generator=gen) < 0.1) & ~suspended
            to_resume = (torch.rand(NUM_ENVS, generator=gen) < 0.15) & suspended
            if step % 3 == 0:
                env.suspend_envs(to_suspend)
                counts["suspends"] += int(to_suspend.sum())
            else:
                env.resume_envs(to_resume)
                counts["resumes"] += int(to_resume.sum())
            suspended = env.suspended_mask
            before = _per_env_state(env)
            action = 3.0 * torch.rand(NUM_ENVS, 1, generator=gen) - 1.5
            obs, rew, term, trunc, _ = env.step(action)
            after = _per_env_state(env)

            s = suspended
            for key in before:
                assert torch.equal(after[key][s], before[key][s]), f"step {step}: '{key}' changed for suspended envs"
            assert not (term[s].any() or trunc[s].any() or env.reset_buf[s].any()), f"step {step}: suspended env done"
            assert torch.all(rew[s] == 0.0), f"step {step}: suspended env earned a reward"
            assert torch.equal(obs["policy"][s], before["obs"][s])
            assert env.suspended_mask.equal(s), "a step must not change the suspended mask"
            assert env.num_suspended == int(s.sum())
            # active envs: age by one step, or start a new episode
            a = ~s
            done = (term | trunc)[a]
            expected_len = torch.where(done, 0, before["episode_length"][a] + 1)
            assert torch.equal(env.episode_length_buf[a], expected_len), f"step {step}: active episode length"
            counts["suspended_steps"] += int(s.sum())
            counts["resets"] += int(done.sum())
        # the schedule exercised what it claims to
        assert counts["suspended_steps"] > STEPS, counts
        assert counts["resets"] > 2 * NUM_ENVS, counts
        assert counts["suspends"] > 20 and counts["resumes"] > 20, counts
