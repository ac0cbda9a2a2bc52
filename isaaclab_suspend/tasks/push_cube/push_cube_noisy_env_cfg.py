"""Push-cube with noisy, delayed observations, frequent random nudges and target resampling: every kind of draw
Isaac Lab's managers make, on every step (the per-env random streams' test and benchmark task)."""

from __future__ import annotations

from isaaclab.managers import ObservationTermCfg as ObsTerm
from isaaclab.utils import configclass
from isaaclab.utils.noise import GaussianNoiseCfg, NoiseModelWithAdditiveBiasCfg, UniformNoiseCfg

from . import mdp
from .push_cube_env_cfg import ObservationsCfg, PushCubeEnvCfg


@configclass
class NoisyObservationsCfg(ObservationsCfg):
    """The ``policy`` group corrupted: uniform, Gaussian and biased noise, and a random one-to-two-step delay."""

    @configclass
    class NoisyPolicyCfg(ObservationsCfg.PolicyCfg):
        cart_pos = ObsTerm(func=mdp.joint_pos_rel, noise=UniformNoiseCfg(n_min=-0.01, n_max=0.01))
        cart_vel = ObsTerm(func=mdp.joint_vel_rel, noise=GaussianNoiseCfg(std=0.02), delay_min_lag=0,
                           delay_max_lag=2, delay_hold_prob=0.5)
        cube_x = ObsTerm(func=mdp.object_x, noise=NoiseModelWithAdditiveBiasCfg(
            noise_cfg=GaussianNoiseCfg(std=0.005), bias_noise_cfg=UniformNoiseCfg(n_min=-0.01, n_max=0.01)))
        cube_vel_x = ObsTerm(func=mdp.object_vel_x, noise=UniformNoiseCfg(n_min=-0.02, n_max=0.02))

        def __post_init__(self):
            super().__post_init__()
            self.enable_corruption = True

    policy: NoisyPolicyCfg = NoisyPolicyCfg()


@configclass
class PushCubeNoisyEnvCfg(PushCubeEnvCfg):
    """Push-cube with noisy policy observations, a nudge and a new target every 0.2-0.5 s."""

    observations: NoisyObservationsCfg = NoisyObservationsCfg()

    def __post_init__(self):
        super().__post_init__()
        self.events.nudge_cube.interval_range_s = (0.2, 0.5)
        self.commands.target.resampling_time_range = (0.2, 0.5)
