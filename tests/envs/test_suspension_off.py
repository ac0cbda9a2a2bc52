"""With suspension off, or on with nothing suspended, the env is bit-identical to stock ManagerBasedRLEnv."""

import pytest
import torch

from isaaclab.app.sim_launcher import launch_simulation
from isaaclab.envs import ManagerBasedRLEnv

from isaaclab_suspend.tasks.env_factory import make_env_cfg, open_env

NUM_ENVS = 4
STEPS = 120


def _rollout(env, steps: int = STEPS) -> dict[str, torch.Tensor]:
    """Random actions from a fixed generator; returns the stacked obs, rewards and dones."""
    gen = torch.Generator().manual_seed(0)
    obs, _ = env.reset()
    out = {"obs": [obs["policy"].clone()], "rew": [], "term": [], "trunc": [], "len": []}
    for _ in range(steps):
        action = (2.0 * torch.rand(env.num_envs, 1, generator=gen) - 1.0).to(env.device)
        obs, rew, term, trunc, _ = env.step(action)
        out["obs"].append(obs["policy"].clone())
        out["rew"].append(rew.clone())
        out["term"].append(term.clone())
        out["trunc"].append(trunc.clone())
        out["len"].append(env.episode_length_buf.clone())
    return {k: torch.stack(v) for k, v in out.items()}


@pytest.mark.cuda
@pytest.mark.parametrize("preset", ["newton_mjwarp", "newton_featherstone"])
@pytest.mark.parametrize("task", ["Isaac-Cartpole-Suspendable", "Isaac-PushCube-Suspendable"])
def test_flag_off_and_idle_match_stock(task, preset, device):
    overrides = [f"presets={preset}"]
    cfg = make_env_cfg(task, NUM_ENVS, device, overrides=overrides, deterministic="auto", episode_length_s=1.0)
    with launch_simulation(cfg, {}):
        stock = ManagerBasedRLEnv(cfg)
        try:
            reference = _rollout(stock)
        finally:
            stock.close()
    assert reference["term"].any() or reference["trunc"].any(), "the rollout must cross episode boundaries"
    for enabled in (False, True):
        with open_env(task, NUM_ENVS, device, overrides, deterministic="auto", episode_length_s=1.0,
                      suspend__enabled=enabled) as env:
            if not enabled:
                with pytest.raises(RuntimeError, match="suspend.enabled"):
                    env.suspend_envs([0])
            result = _rollout(env)
        for key in reference:
            assert torch.equal(result[key], reference[key]), f"{key} differs with suspend.enabled={enabled}"
