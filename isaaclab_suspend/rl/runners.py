"""Agent configs and training loops of rsl_rl and skrl on a (suspendable) Isaac Lab env.

``scripts/train.py`` and the tests share these functions: the agent cfg comes from the task's registered
``<library>_cfg_entry_point`` (Isaac Lab's own cartpole agents, the project's push-cube agents), the env is
wrapped with isaaclab_rl's ``RslRlVecEnvWrapper`` / ``SkrlVecEnvWrapper`` and trained by rsl_rl's
``OnPolicyRunner`` / skrl's ``Runner``, which print their usual console output and write TensorBoard logs
and checkpoints to ``logs/<library>/<task>/<date>/``. skrl shows only a progress bar: :func:`print_skrl_metrics`
adds a line of figures every few updates.
"""

from __future__ import annotations

import os
import sys
from datetime import datetime
from importlib.metadata import version

import gymnasium as gym
import numpy as np
from tqdm import tqdm

from isaaclab.envs import ManagerBasedRLEnv
from isaaclab_rl.rsl_rl import RslRlOnPolicyRunnerCfg, RslRlVecEnvWrapper, handle_deprecated_rsl_rl_cfg
from isaaclab_tasks.utils import load_cfg_from_registry

import isaaclab_suspend.tasks  # noqa: F401  (registers the gym ids)

from ..names import RL_LIBRARIES

LIBRARIES = RL_LIBRARIES
"""RL libraries that :func:`train` supports."""


def load_agent_cfg(
    task: str, library: str, max_iterations: int | None = None, seed: int | None = None, device: str = "cpu",
    rank: int = 0,
) -> RslRlOnPolicyRunnerCfg | dict:
    """The registered agent cfg of ``task`` for ``library`` (a configclass for rsl_rl, a dict for skrl).

    ``max_iterations`` (PPO updates; skrl: ``rollouts`` env steps each) and ``seed`` override the cfg's; ``rank``
    (a multi-GPU run's) is added to the seed, as Isaac Lab's train scripts do.

    Raises:
        ValueError: If ``library`` is not one of :data:`LIBRARIES` or ``task`` is not registered or has no
            agent for ``library``.
    """
    if library not in LIBRARIES:
        raise ValueError(f"Unknown RL library '{library}'. Choose one of {list(LIBRARIES)}.")
    if task not in gym.registry:
        known = sorted(k for k in gym.registry if k.endswith("-Suspendable"))
        raise ValueError(f"Unknown task '{task}'. Registered suspendable tasks: {known}.")
    entry_point = f"{library}_cfg_entry_point"
    if entry_point not in gym.spec(task).kwargs:
        raise ValueError(f"Task '{task}' has no {library} agent ('{entry_point}' is not registered).")
    cfg = load_cfg_from_registry(task, entry_point)
    if library == "rsl_rl":
        cfg = handle_deprecated_rsl_rl_cfg(cfg, version("rsl-rl-lib"))
        cfg.device = device
        if max_iterations is not None:
            cfg.max_iterations = max_iterations
        cfg.seed = (cfg.seed if seed is None else seed) + rank
    else:
        cfg["trainer"]["close_environment_at_exit"] = False
        if max_iterations is not None:
            cfg["trainer"]["timesteps"] = max_iterations * cfg["agent"]["rollouts"]
        if seed is not None or rank:
            cfg["seed"] = (cfg["seed"] if seed is None else seed) + rank
    return cfg


SKRL_METRICS = (
    ("Episode / Total timesteps (mean)", "episode length", "{:.1f}"),
    ("Reward / Total reward (mean)", "return", "{:.2f}"),
    ("Metrics/success_rate", "success", "{:.2f}"),
    ("Episode_Termination/success", "success", "{:.2f}"),
    ("Loss / Policy loss", "policy loss", "{:.4f}"),
    ("Loss / Value loss", "value loss", "{:.4f}"),
)
"""(skrl tracking tag, name, format) of the figures :func:`print_skrl_metrics` prints, where the run has them."""


def print_skrl_metrics(agent, rollouts: int, every: int = 10) -> None:
    """Make a skrl agent print one line of its tracked figures (:data:`SKRL_METRICS`) every ``every`` PPO updates,
    when it writes them to TensorBoard (once per update: ``experiment.write_interval`` = ``rollouts`` steps)."""
    write = agent.write_tracking_data

    def write_and_print(*, timestep: int, timesteps: int) -> None:
        update = timestep // rollouts
        if update % every == 0 or timestep >= timesteps - rollouts:
            data, shown = agent.tracking_data, {}
            for tag, name, fmt in SKRL_METRICS:
                if data.get(tag) and name not in shown:
                    shown[name] = fmt.format(float(np.mean(data[tag])))
            figures = ", ".join(f"{name} {value}" for name, value in shown.items())
            # above skrl's progress bar, not appended to it
            tqdm.write(f"skrl update {update}/{timesteps // rollouts}: {figures or 'no episode ended yet'}",
                       file=sys.stdout)
        write(timestep=timestep, timesteps=timesteps)

    agent.write_tracking_data = write_and_print


def agent_seed(agent_cfg: RslRlOnPolicyRunnerCfg | dict) -> int:
    """The seed of an agent cfg of either library (the env is seeded with it too, as Isaac Lab's scripts do)."""
    return agent_cfg["seed"] if isinstance(agent_cfg, dict) else agent_cfg.seed


def make_log_dir(library: str, task: str, root: str = "logs") -> str:
    """``<root>/<library>/<task>/<date>``: a new, absolute run folder (not created yet)."""
    return os.path.abspath(os.path.join(root, library, task, datetime.now().strftime("%Y-%m-%d_%H-%M-%S")))


def train(env: ManagerBasedRLEnv | gym.Env, library: str, agent_cfg: RslRlOnPolicyRunnerCfg | dict, log_dir: str):
    """Wrap ``env`` for ``library``, train it with ``agent_cfg`` and return the runner.

    rsl_rl saves ``model_<it>.pt`` every ``save_interval`` iterations and at the end; skrl writes
    ``checkpoints/agent_<step>.pt`` and ``best_agent.pt``. Both log TensorBoard events in ``log_dir``.
    """
    if library == "rsl_rl":
        from rsl_rl.runners import OnPolicyRunner

        from isaaclab.utils.dict import class_to_dict

        runner = OnPolicyRunner(
            RslRlVecEnvWrapper(env, clip_actions=agent_cfg.clip_actions),
            class_to_dict(agent_cfg),
            log_dir=log_dir,
            device=agent_cfg.device,
        )
        runner.learn(num_learning_iterations=agent_cfg.max_iterations, init_at_random_ep_len=True)
        return runner
    if library == "skrl":
        from skrl.utils import set_seed
        from skrl.utils.runner.torch import Runner

        from isaaclab_rl.skrl import SkrlVecEnvWrapper

        experiment, rollouts = agent_cfg["agent"]["experiment"], agent_cfg["agent"]["rollouts"]
        experiment["directory"], experiment["experiment_name"] = os.path.dirname(log_dir), os.path.basename(log_dir)
        if experiment.get("write_interval", "auto") == "auto":
            experiment["write_interval"] = rollouts  # TensorBoard figures once per update, printed every 10
        # the wrapper takes the seed of its first env.reset from skrl's global key when it is made: seed it first,
        # or that reset uses whatever seed the process's previous skrl run left (0 in a fresh process)
        set_seed(agent_seed(agent_cfg))
        runner = Runner(SkrlVecEnvWrapper(env, ml_framework="torch"), agent_cfg)
        print_skrl_metrics(runner.agent, rollouts)
        runner.run("train")
        return runner
    raise ValueError(f"Unknown RL library '{library}'. Choose one of {list(LIBRARIES)}.")
