"""Isaac Lab's manager-based Cartpole on the project's own USD assets, with per-env suspension."""

from __future__ import annotations

import isaaclab.envs.mdp as mdp
import isaaclab.sim as sim_utils
from isaaclab.assets import AssetBaseCfg
from isaaclab.managers import TerminationTermCfg as DoneTerm
from isaaclab.utils import configclass

from isaaclab_tasks.core.cartpole.cartpole_manager_env_cfg import CartpoleEnvCfg

from isaaclab_suspend.assets import CARTPOLE_USD, GROUND_USD
from isaaclab_suspend.suspension.suspend_cfg import SuspendCfg

from ..physics_cfg import NewtonPhysicsCfg


@configclass
class CartpoleSuspendableEnvCfg(CartpoleEnvCfg):
    """Isaac Lab's :class:`CartpoleEnvCfg` (joints ``slider_to_cart``, ``cart_to_pole``) with local assets.

    Success is Isaac Lab's own for Cartpole (its ``Metrics/success_rate``): the episode reached the time-out
    without an early termination, i.e. the cart stayed within its bounds (a fallen pole ends no episode, so
    success says nothing about balance; the pole-angle reward and the episode length do). A ``success`` termination term that fires with the time-out (also a time-out,
    so it changes no done, reward or reset) makes the recorder, ``eval.py`` and ``play.py`` count it the same way.
    """

    suspend: SuspendCfg = SuspendCfg(enabled=True)
    """Per-env suspension, enabled for the ``-Suspendable`` variant."""

    def __post_init__(self):
        super().__post_init__()
        self.scene.num_envs = 64
        self.seed = 42
        self.scene.robot.spawn.usd_path = CARTPOLE_USD
        self.scene.ground = AssetBaseCfg(prim_path="/World/ground", spawn=sim_utils.UsdFileCfg(usd_path=GROUND_USD))
        self.sim.physics = NewtonPhysicsCfg()
        self.terminations.success = DoneTerm(func=mdp.time_out, time_out=True)
