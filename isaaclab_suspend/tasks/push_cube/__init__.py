"""Push-cube: an articulation pushing a free rigid cube, with per-env suspension and a scripted chunk model."""

import gymnasium as gym

from . import agents

gym.register(
    id="Isaac-PushCube-Suspendable",
    entry_point="isaaclab_suspend.envs:SuspendableManagerBasedRLEnv",
    disable_env_checker=True,
    kwargs={
        "env_cfg_entry_point": f"{__name__}.push_cube_env_cfg:PushCubeEnvCfg",
        "rsl_rl_cfg_entry_point": f"{agents.__name__}.rsl_rl_ppo_cfg:PushCubePPORunnerCfg",
        "skrl_cfg_entry_point": f"{agents.__name__}:skrl_ppo_cfg.yaml",
        "default_agent": "rsl_rl",
        "chunk_model_entry_point": f"{__name__}.chunk_model:PushCubeChunkCfg",
    },
)

for _id, _cfg in (("Camera", "PushCubeCameraEnvCfg"), ("TwoCamera", "PushCubeTwoCameraEnvCfg")):
    gym.register(
        id=f"Isaac-PushCube-{_id}-Suspendable",
        entry_point="isaaclab_suspend.envs:SuspendableManagerBasedRLEnv",
        disable_env_checker=True,
        kwargs={
            "env_cfg_entry_point": f"{__name__}.push_cube_camera_env_cfg:{_cfg}",
            # the state expert acts on the same 'policy' group
            "rsl_rl_cfg_entry_point": f"{agents.__name__}.rsl_rl_ppo_cfg:PushCubePPORunnerCfg",
            "chunk_model_entry_point": f"{__name__}.chunk_model:PushCubeChunkCfg",
        },
    )
