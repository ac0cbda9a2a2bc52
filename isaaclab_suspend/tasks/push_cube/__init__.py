"""Push-cube: an articulation pushing a free rigid cube, with per-env suspension and a scripted chunk model;
camera variants add an ``images`` observation group, the noisy variant noise, delays and frequent random events."""

import gymnasium as gym

from . import agents

_AGENTS = {
    "rsl_rl_cfg_entry_point": f"{agents.__name__}.rsl_rl_ppo_cfg:PushCubePPORunnerCfg",
    "chunk_model_entry_point": f"{__name__}.chunk_model:PushCubeChunkCfg",
}
"""Entry points every variant shares: the camera variants act on the same ``policy`` group, so the state expert
and the scripted planner drive them too."""

gym.register(
    id="Isaac-PushCube-Suspendable",
    entry_point="isaaclab_suspend.envs:SuspendableManagerBasedRLEnv",
    disable_env_checker=True,
    kwargs={
        "env_cfg_entry_point": f"{__name__}.push_cube_env_cfg:PushCubeEnvCfg",
        "skrl_cfg_entry_point": f"{agents.__name__}:skrl_ppo_cfg.yaml",
        "default_agent": "rsl_rl",
        **_AGENTS,
    },
)

for _id, _cfg in (("Camera", "push_cube_camera_env_cfg:PushCubeCameraEnvCfg"),
                  ("TwoCamera", "push_cube_camera_env_cfg:PushCubeTwoCameraEnvCfg"),
                  ("Noisy", "push_cube_noisy_env_cfg:PushCubeNoisyEnvCfg")):
    gym.register(
        id=f"Isaac-PushCube-{_id}-Suspendable",
        entry_point="isaaclab_suspend.envs:SuspendableManagerBasedRLEnv",
        disable_env_checker=True,
        kwargs={"env_cfg_entry_point": f"{__name__}.{_cfg}", **_AGENTS},
    )
