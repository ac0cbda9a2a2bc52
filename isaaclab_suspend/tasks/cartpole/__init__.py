"""Cartpole with per-env suspension; its embedded chunk model (LQR plans, ``chunk_model.py``) is registered too."""

import gymnasium as gym

from . import agents

gym.register(
    id="Isaac-Cartpole-Suspendable",
    entry_point="isaaclab_suspend.envs:SuspendableManagerBasedRLEnv",
    disable_env_checker=True,
    kwargs={
        "env_cfg_entry_point": f"{__name__}.cartpole_env_cfg:CartpoleSuspendableEnvCfg",
        "rsl_rl_cfg_entry_point": f"{agents.__name__}.rsl_rl_ppo_cfg:CartpolePPORunnerCfg",
        "skrl_cfg_entry_point": f"{agents.__name__}:skrl_ppo_cfg.yaml",
        "default_agent": "rsl_rl",
        "chunk_model_entry_point": f"{__name__}.chunk_model:CartpoleLQRCfg",
    },
)
