"""A task of your own, made suspendable, audited and evaluated with a chunk policy of your own (docs/your_task.rst).

The task is Isaac Lab's stock manager-based Cartpole, whose USD assets live on NVIDIA's asset server, moved onto
local USD files (the project's here; point at your own) and turned into a variant: smaller initial tilts, 3 s
episodes, success = the episode reached its time-out. The policy is a torch module that maps the 4 state dims to a
plan of H actions (one linear layer; its weights here are the linearised cart-pole's LQR plan, yours would be
loaded with ``torch.load(path, weights_only=True)``), wrapped as the chunk model ``ActionChunkingPolicy`` calls.

Run ``tests/tasks/test_your_task.py`` to see it work; ``scripts/audit_suspension.py --import my_cartpole`` audits it.
"""

from __future__ import annotations

import math

import gymnasium as gym
import torch

import isaaclab.envs.mdp as mdp
import isaaclab.sim as sim_utils
from isaaclab.assets import AssetBaseCfg
from isaaclab.managers import TerminationTermCfg as DoneTerm
from isaaclab.utils import configclass

from isaaclab_tasks.core.cartpole.cartpole_manager_env_cfg import CartpoleEnvCfg

from isaaclab_suspend.assets import CARTPOLE_USD, GROUND_USD
from isaaclab_suspend.runs import rollout, start_episodes
from isaaclab_suspend.suspension import SuspendCfg
from isaaclab_suspend.chunking import ActionChunkingPolicy
from isaaclab_suspend.runs import EpisodeOutcomes
from isaaclab_suspend.tasks.embedded import make_default_model
from isaaclab_suspend.tasks.cartpole.chunk_model import CartpoleLQRChunkModel
from isaaclab_suspend.tasks.physics_cfg import NewtonPhysicsCfg
from isaaclab_suspend.tasks.env_factory import open_env

TASK = "MyCartpole-Suspendable"
"""The gym id this module registers."""


# 1. The task: a cfg subclass with local assets and a SuspendCfg field --------------------------------------------
@configclass
class MyCartpoleEnvCfg(CartpoleEnvCfg):
    """Isaac Lab's Cartpole on local USD files, suspendable; initial tilts within 0.1 pi, 3 s episodes."""

    suspend: SuspendCfg = SuspendCfg(enabled=True)
    """Per-env suspension (the ``-Suspendable`` variant)."""

    def __post_init__(self):
        super().__post_init__()
        self.seed = 42  # a seeded cfg: the audit compares two runs, which an unseeded task cannot reproduce
        self.scene.robot.spawn.usd_path = CARTPOLE_USD  # local files instead of NVIDIA's asset server
        self.scene.ground = AssetBaseCfg(prim_path="/World/ground", spawn=sim_utils.UsdFileCfg(usd_path=GROUND_USD))
        self.sim.physics = NewtonPhysicsCfg()  # Newton, MuJoCo-Warp on the CPU (presets=newton_featherstone too)
        self.events.reset_pole_position.params["position_range"] = (-0.1 * math.pi, 0.1 * math.pi)
        self.episode_length_s = 3.0
        # success as Isaac Lab measures it for Cartpole: the episode reached its time-out
        self.terminations.success = DoneTerm(func=mdp.time_out, time_out=True)


# 2. Your policy: a torch module, state (B, 4) -> plan (B, H) ------------------------------------------------------
class LinearPlanPolicy(torch.nn.Module):
    """One linear layer from ``[x, theta, x_dot, theta_dot]`` to the next H actions."""

    def __init__(self, chunk_length: int):
        super().__init__()
        self.plan = torch.nn.Linear(4, chunk_length, bias=False)

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        return self.plan(state)


def lqr_plan_weights(chunk_length: int) -> torch.Tensor:
    """Rows ``-K (A - B K)^k``, k < H: the plan of the linearised cart-pole under its LQR law. Shape: (H, 4)."""
    lqr = CartpoleLQRChunkModel()
    a, b = lqr.linear_model()
    gain = lqr.gain.to(torch.float64)
    rows, power = [], torch.eye(4, dtype=torch.float64)
    for _ in range(chunk_length):
        rows.append(-gain @ power)
        power = (a - b @ gain) @ power
    return torch.cat(rows).to(torch.float32)


# 3. The chunk model the project calls: model(obs_rows, env_ids) -> (B, H, action_dim) --------------------------------
class MyChunkModel:
    """Wraps :class:`LinearPlanPolicy` as a chunk model; ``obs_rows["policy"]`` holds the rows to plan for."""

    def __init__(self, cfg: MyChunkModelCfg):
        self.cfg = cfg
        self.policy = LinearPlanPolicy(cfg.chunk_length)
        with torch.no_grad():  # yours: self.policy.load_state_dict(torch.load(path, weights_only=True))
            self.policy.plan.weight.copy_(lqr_plan_weights(cfg.chunk_length))

    @torch.no_grad()
    def __call__(self, obs_rows: dict, env_ids: torch.Tensor) -> torch.Tensor:
        plan = self.policy(obs_rows["policy"][:, :4])
        return plan.clamp(-self.cfg.action_limit, self.cfg.action_limit).unsqueeze(-1)


@configclass
class MyChunkModelCfg:
    """What the task's ``chunk_model_entry_point`` names: ``class_type(cfg)`` builds the model."""

    class_type: type = MyChunkModel
    chunk_length: int = 16
    """Actions per plan H."""
    action_limit: float = 4.0
    """Largest |action| (the actuator's 400 N effort limit over the 100 N action scale)."""


# 4. Register the variant: the suspendable env class as entry point, the cfg and the chunk model by name ------------
gym.register(
    id=TASK,
    entry_point="isaaclab_suspend.envs:SuspendableManagerBasedRLEnv",
    disable_env_checker=True,
    kwargs={
        "env_cfg_entry_point": f"{__name__}:MyCartpoleEnvCfg",
        "chunk_model_entry_point": f"{__name__}:MyChunkModelCfg",
    },
)


# 5. Evaluate it under a schedule: chunk calls, suspended env-steps, episode outcomes -----------------------------
def evaluate(num_envs: int = 16, steps: int = 400, schedule: str = "global_clock", chunk: int = 16) -> dict:
    """Run the chunk policy on ``num_envs`` envs with desynchronised starts; returns the figures ``eval.py``
    prints (``inference_calls``, ``suspended_env_steps``, ``episodes_scored``, ``success_rate``, ...)."""
    with open_env(TASK, num_envs) as env:
        policy = ActionChunkingPolicy(make_default_model(TASK, chunk), env, chunk_length=chunk, schedule=schedule)
        outcomes = EpisodeOutcomes(env, score_first=False)  # a desynchronised first episode is not scored
        for t in rollout(env, policy, start_episodes(env, seed=0, desync=True), steps):
            outcomes.update(t.dones, ~policy.last_step.suspended)
        policy.close()
        return {**policy.stats, **outcomes.as_dict()}


if __name__ == "__main__":
    print(evaluate())
