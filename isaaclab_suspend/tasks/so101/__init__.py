"""SO-101 (LeRobot's arm): ``-Suspendable`` variants of Isaac Lab's cube-stack tasks on the converted SO-101 and
local props (:mod:`isaaclab_suspend.assets.asset_map`)."""

from ..registration import register_suspendable

_ISAACLAB = "isaaclab_tasks.contrib.stack.config.so101"
"""Isaac Lab's package registering the SO-101 stack tasks."""

for _task in ("IsaacContrib-Stack-Cube-SO101-v0", "IsaacContrib-Stack-Cube-SO101-IK-Abs-v0"):
    register_suspendable(_task, _ISAACLAB)
