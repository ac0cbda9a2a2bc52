"""A trained rsl_rl or skrl actor as an inference callable: for ``scripts/play.py`` and as a chunk model.

A closed-loop RL expert is a chunk model with H = 1: :class:`CheckpointPolicy` is callable as
``model(obs_rows, env_ids) -> (B, 1, action_dim)``, so :class:`~isaaclab_suspend.chunking.ActionChunkingPolicy`
(with ``chunk_length=1``) and ``scripts/record.py --model rl_actor`` drive the suspendable env with it.

The files that rsl_rl writes (``model_<it>.pt``: actor, critic, optimizer), the actor-only files shipped in
``isaaclab_suspend/rl/checkpoints/`` (:func:`export_actor`) and skrl's agent files
(``checkpoints/agent_<step>.pt``, ``best_agent.pt``) load. The network is rebuilt from the task's registered
agent cfg of that library and the env's observation groups, exactly as the library builds it for training.
Every file is read with ``weights_only=True`` (:func:`~isaaclab_suspend.weights_only.load_weights`): tensors and
plain containers only, no code runs from it (skrl's own ``agent.load`` would unpickle anything, so its state dicts
are loaded here).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from importlib.resources import files

import torch
from rsl_rl.models import MLPModel
from rsl_rl.utils.utils import resolve_class, resolve_obs_groups
from tensordict import TensorDict

from isaaclab.envs import ManagerBasedRLEnv
from isaaclab.utils import configclass
from isaaclab.utils.dict import class_to_dict

from ..chunking.sources import ChunkModelCfg, ChunkModelOpener, register_source
from ..tasks.env_factory import quieted
from ..weights_only import load_weights, peek_weights
from .runners import load_agent_cfg

SHIPPED_CHECKPOINTS = {
    "Isaac-Cartpole-Suspendable": "cartpole_rsl_rl.pt",
    "Isaac-PushCube-Suspendable": "push_cube_rsl_rl.pt",
}
"""Task id -> file name of the shipped rsl_rl expert in ``isaaclab_suspend/rl/checkpoints/``."""


def shipped_checkpoint(task: str) -> str:
    """Path of the rsl_rl expert shipped for ``task`` (docs/training.rst: how it was trained;
    docs/results.rst: how well it does).

    Raises:
        ValueError: If no expert is shipped for ``task``.
    """
    if task not in SHIPPED_CHECKPOINTS:
        raise ValueError(f"No shipped checkpoint for task '{task}'. Shipped: {sorted(SHIPPED_CHECKPOINTS)}.")
    return str(files("isaaclab_suspend.rl") / "checkpoints" / SHIPPED_CHECKPOINTS[task])


class SkrlActor:
    """The policy of a loaded skrl agent as a function of Isaac Lab's observation dict: the mean actions of its
    Gaussian for the ``policy`` group (and the ``critic`` group as skrl's states, where the env has one), with
    the agent's preprocessors, as skrl's Isaac Lab wrapper feeds them in training."""

    def __init__(self, agent):
        self.agent = agent
        """The skrl agent (PPO), in evaluation mode."""

    def __call__(self, obs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        policy_obs = obs["policy"]
        states = obs.get("critic")
        actions, outputs = self.agent.act(
            policy_obs.reshape(policy_obs.shape[0], -1),
            None if states is None else states.reshape(states.shape[0], -1),
            timestep=0,
            timesteps=0,
        )
        return outputs.get("mean_actions", actions)


class CheckpointPolicy:
    """Deterministic actions of a trained actor (the mean of its Gaussian), clipped as in training.

    ``act(obs)`` serves all envs; calling it as ``policy(obs_rows, env_ids)`` serves the rows of ``env_ids``
    as a one-action chunk. Both run in one batched forward pass without gradients.
    """

    chunk_length: int = 1
    """Actions per call as a chunk model: a closed-loop policy plans one step."""

    def __init__(self, actor: MLPModel | SkrlActor, clip_actions: float | None = None):
        self.actor = actor
        """The actor in evaluation mode: rsl_rl's (observation normaliser, MLP, distribution head) or skrl's."""
        self.clip_actions = clip_actions
        """Actions are clamped to ``[-clip_actions, clip_actions]`` as ``RslRlVecEnvWrapper`` does; None: no clip."""

    @torch.no_grad()
    def act(self, obs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Actions for the observation dict of the env. Shape: (num_rows, action_dim)."""
        actions = self.actor(obs)
        if self.clip_actions is not None:
            actions = actions.clamp(-self.clip_actions, self.clip_actions)
        return actions

    def __call__(self, obs_rows: Mapping[str, torch.Tensor], env_ids: torch.Tensor) -> torch.Tensor:
        """Chunk-model form. Shape: (len(env_ids), 1, action_dim)."""
        return self.act(obs_rows).unsqueeze(1)

    def observe(self, dones: torch.Tensor) -> None:
        """Closed loop: nothing is queued, so nothing to drop when envs reset (the rollout loop calls it)."""


def read_checkpoint(path: str, device: str | torch.device = "cpu") -> tuple[str, dict]:
    """The library (``"rsl_rl"`` or ``"skrl"``) and contents of the checkpoint at ``path``, read weights only:
    the scripts call it while parsing, so that a bad file stops them before an env or an output file exists.

    Raises:
        FileNotFoundError: If ``path`` does not exist.
        ValueError: If the file holds more than tensors and plain containers, or is neither an rsl_rl nor an skrl
            checkpoint.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"Checkpoint file not found: '{path}'.")
    checkpoint = load_weights(path, device, "rsl_rl or skrl checkpoint")
    library = None
    if isinstance(checkpoint, dict):
        library = "rsl_rl" if "actor_state_dict" in checkpoint else "skrl" if "policy" in checkpoint else None
    if library is None:
        keys = sorted(map(str, checkpoint)) if isinstance(checkpoint, dict) else type(checkpoint).__name__
        raise ValueError(
            f"'{path}' is neither an rsl_rl checkpoint (with 'actor_state_dict') nor an skrl one (with 'policy');"
            f" found {keys}."
        )
    return library, checkpoint


def load_checkpoint_policy(path: str, env: ManagerBasedRLEnv, task: str | None = None) -> CheckpointPolicy:
    """Load the actor of an rsl_rl or skrl checkpoint for ``env`` (unwrapped) on the env's device.

    ``task`` names the registered agent cfg that trained it; by default the one stored in the file (shipped
    files) or the env's gym id.

    Raises:
        FileNotFoundError: If ``path`` does not exist.
        ValueError: If the file is neither an rsl_rl nor an skrl checkpoint, or does not fit the env's
            observations and actions.
    """
    library, checkpoint = read_checkpoint(path, env.device)
    stored = checkpoint.get("task")
    task = task or (stored if isinstance(stored, str) else None) or (env.spec.id if env.spec is not None else None)
    if task is None:
        raise ValueError("Cannot tell which task's agent cfg trained the checkpoint: pass task=.")
    if library == "skrl":
        return CheckpointPolicy(_load_skrl_actor(path, checkpoint, env, task, stored))
    agent_cfg = load_agent_cfg(task, "rsl_rl", device=str(env.device))
    cfg = class_to_dict(agent_cfg)
    om = env.observation_manager
    # a dummy of each concatenated group (an actor reads flat vectors; per-term groups such as images are skipped)
    obs = TensorDict(
        {group: torch.zeros(1, *dims) for group, dims in om.group_obs_dim.items() if om.group_obs_concatenate[group]},
        batch_size=[1],
    )
    obs_groups = resolve_obs_groups(obs, cfg["obs_groups"], ["actor", "critic"])
    actor_class, actor_kwargs = resolve_class(cfg["actor"])
    actor = actor_class(obs, obs_groups, "actor", env.action_manager.total_action_dim, **actor_kwargs)
    try:
        actor.load_state_dict(checkpoint["actor_state_dict"])
    except RuntimeError as err:
        raise _does_not_fit(path, task, stored, err) from err
    return CheckpointPolicy(actor.to(env.device).eval(), agent_cfg.clip_actions)


class RlActorOpener(ChunkModelOpener):
    """Opens an RL actor checkpoint (the task's shipped expert by default): read once the task is known, built on
    each env it runs on, H = 1."""

    needs_env = True
    planned_chunk_length = 1

    @staticmethod
    def recognizes(path: str) -> bool:
        """Whether ``path`` is an rsl_rl or skrl checkpoint (``--checkpoint PATH`` picks this source then); a file
        holding more than tensors is refused, not passed over."""
        checkpoint = peek_weights(path)
        return isinstance(checkpoint, dict) and ("actor_state_dict" in checkpoint or "policy" in checkpoint)

    def bind(self, task: str, chunk_length: int | None) -> None:
        super().bind(task, chunk_length)
        self.path = self.cfg.path or shipped_checkpoint(task)
        read_checkpoint(self.path)  # a bad file fails before an env or an output file exists

    def make(self, env: ManagerBasedRLEnv | None, chunk_length: int) -> CheckpointPolicy:
        if env is None:
            raise ValueError(f"The RL actor '{self.path}' is built on an env of its task: pass one.")
        with quieted():  # Isaac Lab's and rsl_rl's lines about the agent cfg
            return load_checkpoint_policy(self.path, env, task=self.task)

    def where(self) -> str:
        return getattr(self, "path", None) or self.cfg.path or ""

    def describe(self) -> str:
        return f"checkpoint {self.where()}"

    def served_identity(self, model, env: ManagerBasedRLEnv | None) -> tuple[str | None, int | None]:
        return self.task, env.action_manager.total_action_dim if env is not None else None


@register_source("rl_actor", RlActorOpener)
@configclass
class RlActorModelCfg(ChunkModelCfg):
    """An rsl_rl or skrl actor checkpoint, run closed loop (H = 1)."""

    class_type: type = RlActorOpener
    """The opener of this source."""
    path: str | None = None
    """The checkpoint (None: the task's shipped expert)."""


def _does_not_fit(path: str, task: str, stored: object, err: Exception) -> ValueError:
    """The one-line error of a checkpoint whose networks do not fit ``task``'s env: the loader's message on one line
    (torch's lists every mismatching tensor on a line of its own), cut short, and the task the file names if it
    is another."""
    other = f" (the file names the task '{stored}')" if isinstance(stored, str) and stored != task else ""
    message = " ".join(str(err).split())
    return ValueError(f"'{path}' does not fit {task} with this env's observations and actions{other}: {message:.300}")


def _load_skrl_actor(path: str, checkpoint: dict, env: ManagerBasedRLEnv, task: str, stored: object) -> SkrlActor:
    """Build the skrl agent of ``task``'s registered cfg on ``env`` as skrl's ``Runner`` does (no logs, no
    checkpoints written) and load the state dicts of the agent file (read weights only) into its modules."""
    from skrl.utils.runner.torch import Runner

    from isaaclab_rl.skrl import SkrlVecEnvWrapper

    agent_cfg = load_agent_cfg(task, "skrl")
    agent_cfg["agent"]["experiment"]["write_interval"] = 0
    agent_cfg["agent"]["experiment"]["checkpoint_interval"] = 0
    agent = Runner(SkrlVecEnvWrapper(env, ml_framework="torch"), agent_cfg).agent
    modules = {name: module for name, module in agent.checkpoint_modules.items() if hasattr(module, "load_state_dict")}
    try:
        for name, state in checkpoint.items():
            if name in modules:
                modules[name].load_state_dict(state)
    except (RuntimeError, KeyError, TypeError, ValueError, AttributeError) as err:
        raise _does_not_fit(path, task, stored, err) from err
    agent.enable_training_mode(False, apply_to_models=True)
    return SkrlActor(agent)


def export_actor(checkpoint_path: str, output_path: str, task: str) -> None:
    """Write the actor weights of an rsl_rl checkpoint (no critic, no optimizer) with the task id, to ship."""
    checkpoint = load_weights(checkpoint_path, "cpu", "rsl_rl checkpoint")
    os.makedirs(os.path.dirname(os.path.abspath(output_path)), exist_ok=True)
    torch.save({"actor_state_dict": checkpoint["actor_state_dict"], "task": task, "iter": checkpoint.get("iter")},
               output_path)
