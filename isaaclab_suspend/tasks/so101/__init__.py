"""SO-101 (LeRobot's arm): ``-Suspendable`` variants of Isaac Lab's cube-stack tasks on the converted SO-101 and
local props (:mod:`isaaclab_suspend.assets.asset_map`)."""

import gymnasium as gym

from ..registration import SUSPENDABLE_ENTRY_POINT, kitless_cfg_entry_point, register_suspendable

_ISAACLAB = "isaaclab_tasks.contrib.stack.config.so101"
"""Isaac Lab's package registering the SO-101 stack tasks."""

for _task in ("IsaacContrib-Stack-Cube-SO101-v0", "IsaacContrib-Stack-Cube-SO101-IK-Abs-v0"):
    register_suspendable(_task, _ISAACLAB)

gym.register(
    id="IsaacContrib-Lift-Cube-SO101-IK-Abs-Suspendable",
    entry_point=SUSPENDABLE_ENTRY_POINT,
    disable_env_checker=True,
    kwargs={
        "env_cfg_entry_point": kitless_cfg_entry_point(f"{__name__}.lift_cube_env_cfg:SO101LiftCubeEnvCfg"),
        "chunk_model_entry_point": f"{__name__}.chunk_model:SO101LiftChunkCfg",
    },
)

gym.register(
    id="IsaacContrib-Lift-Cube-SO101-IK-Abs-Camera-Suspendable",
    entry_point=SUSPENDABLE_ENTRY_POINT,
    disable_env_checker=True,
    kwargs={
        "env_cfg_entry_point": kitless_cfg_entry_point(f"{__name__}.lift_cube_camera_env_cfg:SO101LiftCubeCameraEnvCfg"),
        "chunk_model_entry_point": f"{__name__}.chunk_model:SO101LiftChunkCfg",
    },
)

for _id, _cfg in (
    ("IsaacContrib-Lift-Cube-SO101-Joint-Suspendable", "SO101LiftCubeJointEnvCfg"),
    ("IsaacContrib-Lift-Cube-SO101-Joint-Camera-Suspendable", "SO101LiftCubeJointCameraEnvCfg"),
):
    gym.register(  # no embedded policy: the follower's action space is for learned ones (--checkpoint)
        id=_id,
        entry_point=SUSPENDABLE_ENTRY_POINT,
        disable_env_checker=True,
        kwargs={"env_cfg_entry_point": kitless_cfg_entry_point(f"{__name__}.lift_cube_joint_env_cfg:{_cfg}")},
    )
