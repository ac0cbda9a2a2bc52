"""Isaac Lab's manager-based Cartpole on the project's own USD assets, with per-env suspension."""

from __future__ import annotations

import isaaclab.sim as sim_utils
from isaaclab.assets import AssetBaseCfg
from isaaclab.utils import configclass

from isaaclab_tasks.core.cartpole.cartpole_manager_env_cfg import CartpoleEnvCfg

from isaaclab_suspend.assets import CARTPOLE_USD, GROUND_USD
from isaaclab_suspend.envs.suspendable_env_cfg import SuspendCfg

from ..physics_cfg import NewtonPhysicsCfg


@configclass
class CartpoleSuspendableEnvCfg(CartpoleEnvCfg):
    """Isaac Lab's :class:`CartpoleEnvCfg` (joints ``slider_to_cart``, ``cart_to_pole``) with local assets."""

    suspend: SuspendCfg = SuspendCfg(enabled=True)
    """Per-env suspension, enabled for the ``-Suspendable`` variant."""

    def __post_init__(self):
        super().__post_init__()
        self.scene.num_envs = 64
        self.seed = 42
        self.scene.robot.spawn.usd_path = CARTPOLE_USD
        self.scene.ground = AssetBaseCfg(prim_path="/World/ground", spawn=sim_utils.UsdFileCfg(usd_path=GROUND_USD))
        self.sim.physics = NewtonPhysicsCfg()
