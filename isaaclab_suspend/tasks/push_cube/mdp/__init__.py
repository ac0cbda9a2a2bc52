"""MDP terms of the push-cube task, with the Isaac Lab terms it uses."""

from isaaclab.envs.mdp import (  # noqa: F401
    JointEffortActionCfg,
    action_rate_l2,
    is_terminated_term,
    joint_pos_rel,
    joint_vel_rel,
    push_by_setting_velocity,
    reset_joints_by_offset,
    reset_root_state_uniform,
    time_out,
)

from .commands import TargetPositionCommand, TargetPositionCommandCfg  # noqa: F401
from .terms import *  # noqa: F401, F403
from .target_marker import MarkedTargetPositionCommand, MarkedTargetPositionCommandCfg  # noqa: F401
