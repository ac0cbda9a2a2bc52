"""rsl_rl PPO configuration of the Cartpole task: Isaac Lab's, with its observation groups named."""

from isaaclab.utils import configclass

from isaaclab_tasks.core.cartpole.agents.rsl_rl_ppo_cfg import CartpolePPORunnerCfg as IsaacLabCartpolePPORunnerCfg


@configclass
class CartpolePPORunnerCfg(IsaacLabCartpolePPORunnerCfg):
    """Isaac Lab's Cartpole hyperparameters. Actor and critic read the ``policy`` group: what rsl_rl assumes, with
    three warnings per run, when ``obs_groups`` is left empty."""

    obs_groups = {"actor": ["policy"], "critic": ["policy"]}
