"""A push-cube variant built only from stock Isaac Lab parts with per-env state, registered as a plain task.

``Test-Stateful-PushCube`` uses Isaac Lab's own ``ManagerBasedRLEnv`` and no code of isaaclab_suspend (only its
USD files): delayed, remotized and ideal PD actuators, an actuator-net MLP and LSTM (tiny TorchScript nets
written next to this module), a contact sensor with air time and history on a falling cube, an IMU, a
class-based observation term with per-env state, observation history and a fixed observation delay.
"""

from __future__ import annotations

import os
import tempfile

import gymnasium as gym
import torch

import isaaclab.envs.mdp as mdp
import isaaclab.sim as sim_utils
from isaaclab.actuators import (
    ActuatorNetLSTMCfg,
    ActuatorNetMLPCfg,
    DelayedPDActuatorCfg,
    IdealPDActuatorCfg,
    RemotizedPDActuatorCfg,
)
from isaaclab.assets import ArticulationCfg, AssetBaseCfg, RigidObjectCfg
from isaaclab.envs import ManagerBasedRLEnv, ManagerBasedRLEnvCfg
from isaaclab.managers import EventTermCfg as EventTerm
from isaaclab.managers import ManagerTermBase
from isaaclab.managers import ObservationGroupCfg as ObsGroup
from isaaclab.managers import ObservationTermCfg as ObsTerm
from isaaclab.managers import RewardTermCfg as RewTerm
from isaaclab.managers import SceneEntityCfg
from isaaclab.managers import TerminationTermCfg as DoneTerm
from isaaclab.scene import InteractiveSceneCfg
from isaaclab.sensors import ContactSensorCfg, ImuCfg
from isaaclab.sim import SimulationCfg
from isaaclab.utils import configclass
from isaaclab_newton.physics import FeatherstoneSolverCfg, MJWarpSolverCfg, NewtonCfg

from isaaclab_tasks.utils import PresetCfg

TASK_ID = "Test-Stateful-PushCube"
DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "isaaclab_suspend", "assets", "data")
NET_DIR = os.path.join(tempfile.gettempdir(), f"stateful_task_nets_{os.getuid()}")


class _Lstm(torch.nn.Module):
    """The interface ``ActuatorNetLSTM`` expects: ``lstm`` plus a linear head, (input, (h, c)) -> (torque, (h, c))."""

    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(2, 4, num_layers=1, batch_first=True)
        self.head = torch.nn.Linear(4, 1)

    def forward(self, x: torch.Tensor, hc: tuple[torch.Tensor, torch.Tensor]):
        out, (h, c) = self.lstm(x, hc)
        return self.head(out[:, -1]), (h, c)


def write_nets(folder: str = NET_DIR) -> tuple[str, str]:
    """Write a tiny TorchScript MLP and LSTM (fixed seed) for the actuator nets. Returns their paths."""
    os.makedirs(folder, exist_ok=True)
    gen_state = torch.random.get_rng_state()
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    lstm = _Lstm()
    torch.random.set_rng_state(gen_state)
    paths = os.path.join(folder, "mlp.pt"), os.path.join(folder, "lstm.pt")
    torch.jit.save(torch.jit.script(mlp), paths[0])
    torch.jit.save(torch.jit.script(lstm), paths[1])
    return paths


MLP_FILE, LSTM_FILE = write_nets()


class CubeHeightMean(ManagerTermBase):
    """Class-based observation term with per-env state: the running mean of the cube's height this episode."""

    def __init__(self, cfg: ObsTerm, env: ManagerBasedRLEnv):
        super().__init__(cfg, env)
        self.total = torch.zeros(env.num_envs, 1, device=env.device)
        self.count = torch.zeros(env.num_envs, 1, device=env.device)

    def reset(self, env_ids=None):
        self.total[env_ids] = 0.0
        self.count[env_ids] = 0.0

    def __call__(self, env: ManagerBasedRLEnv) -> torch.Tensor:
        self.total += env.scene["cube"].data.root_pos_w.torch[:, 2:3]
        self.count += 1.0
        return self.total / self.count


def air_time(env: ManagerBasedRLEnv) -> torch.Tensor:
    data = env.scene["contact"].data
    return torch.cat((data.current_air_time.torch, data.current_contact_time.torch), dim=1)


def contact_history(env: ManagerBasedRLEnv) -> torch.Tensor:
    return env.scene["contact"].data.net_forces_w_history.torch.flatten(1)


def imu_acc(env: ManagerBasedRLEnv) -> torch.Tensor:
    return env.scene["imu"].data.lin_acc_b.torch


def _cartpole(y: float, actuators: dict) -> ArticulationCfg:
    return ArticulationCfg(
        prim_path="{ENV_REGEX_NS}/Arm" + ("2" if y < 0 else ""),
        spawn=sim_utils.UsdFileCfg(usd_path=os.path.join(DATA, "cartpole.usda")),
        init_state=ArticulationCfg.InitialStateCfg(pos=(0.0, y, 2.0), joint_pos={"slider_to_cart": 0.0, "cart_to_pole": 0.3}),
        actuators=actuators,
    )


@configclass
class SceneCfg(InteractiveSceneCfg):
    ground = AssetBaseCfg(prim_path="/World/ground", spawn=sim_utils.UsdFileCfg(usd_path=os.path.join(DATA, "ground.usda")))
    robot = ArticulationCfg(
        prim_path="{ENV_REGEX_NS}/Robot",
        spawn=sim_utils.UsdFileCfg(usd_path=os.path.join(DATA, "pusher.usda")),
        init_state=ArticulationCfg.InitialStateCfg(pos=(0.0, 0.0, 0.06), joint_pos={"slider_to_cart": 0.0}),
        actuators={"cart": DelayedPDActuatorCfg(
            joint_names_expr=["slider_to_cart"], stiffness=0.0, damping=5.0, effort_limit=100.0, min_delay=3, max_delay=3
        )},
    )
    arm = _cartpole(1.5, {
        "slider": ActuatorNetMLPCfg(
            joint_names_expr=["slider_to_cart"], network_file=MLP_FILE, pos_scale=1.0, vel_scale=0.2, torque_scale=5.0,
            input_order="pos_vel", input_idx=[0, 1, 2], effort_limit=50.0, velocity_limit=10.0, saturation_effort=50.0,
        ),
        "pole": ActuatorNetLSTMCfg(
            joint_names_expr=["cart_to_pole"], network_file=LSTM_FILE, effort_limit=5.0, velocity_limit=10.0,
            saturation_effort=5.0,
        ),
    })
    arm2 = _cartpole(-1.5, {
        "slider": RemotizedPDActuatorCfg(
            joint_names_expr=["slider_to_cart"], stiffness=20.0, damping=2.0, min_delay=1, max_delay=2,
            joint_parameter_lookup=[[-1.0, 1.0, 30.0], [0.0, 1.0, 40.0], [1.0, 1.0, 30.0]],
        ),
        "pole": IdealPDActuatorCfg(joint_names_expr=["cart_to_pole"], stiffness=0.0, damping=0.05, effort_limit=5.0),
    })
    cube = RigidObjectCfg(
        prim_path="{ENV_REGEX_NS}/Cube",
        spawn=sim_utils.UsdFileCfg(usd_path=os.path.join(DATA, "cube.usda")),
        init_state=RigidObjectCfg.InitialStateCfg(pos=(0.4, 0.0, 0.35)),
    )
    contact = ContactSensorCfg(prim_path="{ENV_REGEX_NS}/Cube", track_air_time=True, history_length=2)
    imu = ImuCfg(prim_path="{ENV_REGEX_NS}/Robot/cart")


@configclass
class ActionsCfg:
    pusher = mdp.JointEffortActionCfg(asset_name="robot", joint_names=["slider_to_cart"], scale=20.0)
    arm = mdp.JointPositionActionCfg(asset_name="arm", joint_names=["slider_to_cart"], scale=0.5)
    arm2 = mdp.JointPositionActionCfg(asset_name="arm2", joint_names=["slider_to_cart"], scale=0.5)


@configclass
class ObservationsCfg:
    @configclass
    class PolicyCfg(ObsGroup):
        pusher_pos = ObsTerm(func=mdp.joint_pos_rel, params={"asset_cfg": SceneEntityCfg("robot")})
        pusher_vel = ObsTerm(func=mdp.joint_vel_rel, params={"asset_cfg": SceneEntityCfg("robot")})
        arm_pos = ObsTerm(func=mdp.joint_pos_rel, params={"asset_cfg": SceneEntityCfg("arm")})
        arm_vel = ObsTerm(func=mdp.joint_vel_rel, params={"asset_cfg": SceneEntityCfg("arm")})
        arm2_pos = ObsTerm(
            func=mdp.joint_pos_rel, params={"asset_cfg": SceneEntityCfg("arm2")}, delay_min_lag=2, delay_max_lag=2
        )
        cube_pos = ObsTerm(func=mdp.root_pos_w, params={"asset_cfg": SceneEntityCfg("cube")})
        cube_vel = ObsTerm(func=mdp.root_lin_vel_w, params={"asset_cfg": SceneEntityCfg("cube")})
        air_time = ObsTerm(func=air_time)
        contact_history = ObsTerm(func=contact_history)
        imu_acc = ObsTerm(func=imu_acc)
        cube_height_mean = ObsTerm(func=CubeHeightMean)

        def __post_init__(self):
            self.enable_corruption = False
            self.concatenate_terms = True
            self.history_length = 2

    policy: PolicyCfg = PolicyCfg()


@configclass
class EventCfg:
    reset_pusher = EventTerm(
        func=mdp.reset_joints_by_offset, mode="reset",
        params={"asset_cfg": SceneEntityCfg("robot"), "position_range": (-0.05, 0.05), "velocity_range": (0.0, 0.0)},
    )


@configclass
class RewardsCfg:
    action_rate = RewTerm(func=mdp.action_rate_l2, weight=-0.01)
    arm_vel = RewTerm(func=mdp.joint_vel_l2, weight=-0.1, params={"asset_cfg": SceneEntityCfg("arm")})


@configclass
class TerminationsCfg:
    time_out = DoneTerm(func=mdp.time_out, time_out=True)


@configclass
class PhysicsCfg(PresetCfg):
    newton_mjwarp: NewtonCfg = NewtonCfg(
        solver_cfg=MJWarpSolverCfg(njmax=80, nconmax=24, cone="pyramidal", impratio=1, integrator="implicitfast"),
        num_substeps=1, debug_mode=False, use_cuda_graph=True,
    )
    newton_featherstone: NewtonCfg = NewtonCfg(solver_cfg=FeatherstoneSolverCfg(), num_substeps=1, use_cuda_graph=True)
    default: NewtonCfg = newton_mjwarp


@configclass
class StatefulPushCubeEnvCfg(ManagerBasedRLEnvCfg):
    scene: SceneCfg = SceneCfg(num_envs=4, env_spacing=5.0)
    observations: ObservationsCfg = ObservationsCfg()
    actions: ActionsCfg = ActionsCfg()
    rewards: RewardsCfg = RewardsCfg()
    terminations: TerminationsCfg = TerminationsCfg()
    events: EventCfg = EventCfg()
    sim: SimulationCfg = SimulationCfg(dt=1 / 120, render_interval=2, physics=PhysicsCfg())
    seed: int = 7
    decimation: int = 2
    episode_length_s: float = 100.0


gym.register(
    id=TASK_ID,
    entry_point="isaaclab.envs:ManagerBasedRLEnv",
    disable_env_checker=True,
    kwargs={"env_cfg_entry_point": f"{__name__}:StatefulPushCubeEnvCfg"},
)
