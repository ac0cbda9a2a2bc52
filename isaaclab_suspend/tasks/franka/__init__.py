"""Franka Panda: ``-Suspendable`` variants of Isaac Lab's Franka reach and lift tasks on the converted Panda and
local props (:mod:`isaaclab_suspend.assets.asset_map`), and a cube lift with a scripted planner."""

import gymnasium as gym

from ..registration import SUSPENDABLE_ENTRY_POINT, kitless_cfg_entry_point, register_suspendable

register_suspendable("Isaac-Reach-Franka", "isaaclab_tasks.core.reach.config.franka")
register_suspendable("Isaac-Reach-Franka-OSC", "isaaclab_tasks.core.reach.config.franka")
register_suspendable("Isaac-Lift-Franka", "isaaclab_tasks.core.lift.config.franka")

gym.register(
    id="Isaac-Lift-Cube-Franka-IK-Abs-Suspendable",
    entry_point=SUSPENDABLE_ENTRY_POINT,
    disable_env_checker=True,
    kwargs={
        "env_cfg_entry_point": kitless_cfg_entry_point(f"{__name__}.lift_cube_env_cfg:FrankaLiftCubeEnvCfg"),
        "chunk_model_entry_point": f"{__name__}.chunk_model:FrankaLiftChunkCfg",
    },
)
