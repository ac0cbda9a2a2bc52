"""A small chunk policy (observation -> H actions), its checkpoint, and the loader that hands it to
:class:`~isaaclab_suspend.chunking.ActionChunkingPolicy`."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import torch
from torch import nn

from isaaclab.utils import configclass

if TYPE_CHECKING:
    from isaaclab.envs import ManagerBasedRLEnv

    from .chunk_dataset import ChunkDataset

CHECKPOINT_FORMAT = "isaaclab_suspend.chunk_policy/1"
"""Value of the ``format`` key of a checkpoint; a file without it is refused."""


class ChunkPolicyNet(nn.Module):
    """Maps an observation to a chunk of H actions, ACT-style (one forward pass predicts the whole chunk).

    ``mlp``: an MLP from the normalised observation to the H * action_dim normalised actions. ``transformer``:
    the observation is embedded as one memory token and H learned query tokens (one per chunk step) attend to
    it and to each other through a small transformer decoder, as ACT's decoder does with its queries.
    Normalisation statistics are buffers, so they travel in the ``state_dict`` with the weights.

    With ``cfg.prefix_conditioning`` (training-time real-time chunking) the network also takes a committed prefix:
    up to :attr:`max_prefix` = H // 2 actions that run before its chunk, and how many (the delay). ``mlp`` gets
    them, normalised and masked past the delay, with the mask, beside the observation; ``transformer`` adds their
    embedding to the query tokens of their steps. The chunk's first ``delay`` actions are the prefix itself.

    Args:
        cfg: Architecture.
        obs_dim: Observation dim.
        action_dim: Action dim.
    """

    def __init__(self, cfg: ChunkPolicyCfg, obs_dim: int, action_dim: int):
        super().__init__()
        if cfg.arch not in ("mlp", "transformer"):
            raise ValueError(f"Unknown chunk policy arch '{cfg.arch}'; choose 'mlp' or 'transformer'.")
        self.cfg = cfg
        self.obs_dim, self.action_dim, self.chunk_length = obs_dim, action_dim, cfg.chunk_length
        self.max_prefix = cfg.chunk_length // 2 if cfg.prefix_conditioning else 0
        """Longest prefix the network takes (0: none)."""
        self.register_buffer("obs_mean", torch.zeros(obs_dim))
        self.register_buffer("obs_std", torch.ones(obs_dim))
        self.register_buffer("action_mean", torch.zeros(action_dim))
        self.register_buffer("action_std", torch.ones(action_dim))
        if cfg.arch == "mlp":
            layers, width = [], obs_dim + self.max_prefix * (action_dim + 1)
            for hidden in cfg.hidden_dims:
                layers += [nn.Linear(width, hidden), nn.ELU()]
                width = hidden
            layers.append(nn.Linear(width, cfg.chunk_length * action_dim))
            self.mlp = nn.Sequential(*layers)
        else:
            self.obs_embed = nn.Linear(obs_dim, cfg.d_model)
            self.queries = nn.Parameter(0.02 * torch.randn(cfg.chunk_length, cfg.d_model))
            layer = nn.TransformerDecoderLayer(cfg.d_model, cfg.num_heads, 4 * cfg.d_model, dropout=0.0,
                                               batch_first=True)
            self.decoder = nn.TransformerDecoder(layer, cfg.num_layers)
            self.head = nn.Linear(cfg.d_model, action_dim)
            if self.max_prefix:
                self.prefix_embed = nn.Linear(action_dim + 1, cfg.d_model)

    @classmethod
    def for_dataset(cls, cfg: ChunkPolicyCfg, dataset: ChunkDataset) -> ChunkPolicyNet:
        """A network with the observation and action dims of ``dataset``."""
        return cls(cfg, dataset.obs_dim, dataset.action_dim)

    @classmethod
    def from_checkpoint_dims(cls, cfg: ChunkPolicyCfg, ckpt: dict) -> ChunkPolicyNet:
        """The (untrained) network that the dims :meth:`checkpoint_dims` stored describe."""
        return cls(cfg, ckpt["obs_dim"], ckpt["action_dim"])

    def checkpoint_dims(self) -> dict:
        """The dims a checkpoint stores to rebuild the network."""
        return {"obs_dim": self.obs_dim, "action_dim": self.action_dim}

    def set_normalization(self, obs: torch.Tensor, actions: torch.Tensor) -> None:
        """Set the mean and std of the observations (N, obs_dim) and actions (N, action_dim) of the training set."""
        self.obs_mean.copy_(obs.mean(0))
        self.obs_std.copy_(obs.std(0).nan_to_num(1.0).clamp_min(1e-6))
        self.action_mean.copy_(actions.mean(0))
        self.action_std.copy_(actions.std(0).nan_to_num(1.0).clamp_min(1e-6))

    def forward_normalized(self, obs: torch.Tensor, prefix: torch.Tensor | None = None,
                           delay: torch.Tensor | None = None) -> torch.Tensor:
        """Normalised chunk of raw observations (B, obs_dim), given the raw ``prefix`` (B, d, action_dim) of which
        each row runs ``delay`` (B,) actions (None: none). Shape: (B, H, action_dim)."""
        x = (obs - self.obs_mean) / self.obs_std
        tokens = self._prefix_tokens(prefix, delay, x.shape[0])
        if self.cfg.arch == "mlp":
            if tokens is not None:
                x = torch.cat((x, tokens.flatten(1)), dim=1)
            return self.mlp(x).view(-1, self.chunk_length, self.action_dim)
        memory = self.obs_embed(x).unsqueeze(1)
        queries = self.queries.expand(x.shape[0], -1, -1)
        if tokens is not None:
            embedded = self.prefix_embed(tokens) * tokens[..., -1:]  # nothing added past the delay
            queries = torch.cat((queries[:, : self.max_prefix] + embedded, queries[:, self.max_prefix :]), dim=1)
        return self.head(self.decoder(queries, memory))

    def forward(self, obs: torch.Tensor, prefix: torch.Tensor | None = None,
                delay: torch.Tensor | None = None) -> torch.Tensor:
        """Chunk of actions for raw observations (B, obs_dim), continuing ``prefix`` (see
        :meth:`forward_normalized`): its first ``delay`` actions are the prefix. Shape: (B, H, action_dim)."""
        chunk = self.forward_normalized(obs, prefix, delay) * self.action_std + self.action_mean
        if prefix is None:
            return chunk
        d = prefix.shape[1]
        kept = (torch.arange(d, device=chunk.device) < delay.unsqueeze(1)).unsqueeze(-1)
        return torch.cat((torch.where(kept, prefix.to(chunk.dtype), chunk[:, :d]), chunk[:, d:]), dim=1)

    def _prefix_tokens(self, prefix: torch.Tensor | None, delay: torch.Tensor | None,
                       batch: int) -> torch.Tensor | None:
        """The normalised prefix, zero past each row's delay, with the mask as a last feature. Shape:
        (B, max_prefix, action_dim + 1); None for a network without prefix conditioning.

        Raises:
            ValueError: If a prefix is given to a network without prefix conditioning, or is longer than
                :attr:`max_prefix`.
        """
        if not self.max_prefix:
            if prefix is not None:
                raise ValueError("This chunk policy was trained without prefix conditioning: it takes no prefix.")
            return None
        steps = torch.arange(self.max_prefix, device=self.obs_mean.device)
        if prefix is None:
            return torch.zeros(batch, self.max_prefix, self.action_dim + 1, device=steps.device)
        if prefix.shape[1] > self.max_prefix:
            raise ValueError(f"This chunk policy takes prefixes of at most H // 2 = {self.max_prefix} actions, got"
                             f" {prefix.shape[1]}.")
        normalized = (prefix[:, : self.max_prefix] - self.action_mean) / self.action_std
        normalized = nn.functional.pad(normalized, (0, 0, 0, self.max_prefix - prefix.shape[1]))
        mask = (steps < delay.to(steps.device).unsqueeze(1)).unsqueeze(-1)
        return torch.cat((normalized * mask, mask.to(normalized.dtype)), dim=-1)


@configclass
class ChunkPolicyCfg:
    """Configuration of :class:`ChunkPolicyNet`."""

    class_type: type = ChunkPolicyNet
    """The class this cfg configures."""

    chunk_length: int = 16
    """Actions per chunk H."""

    arch: str = "mlp"
    """``"mlp"`` or ``"transformer"``."""

    hidden_dims: list[int] = [256, 256]
    """``mlp``: widths of the hidden layers (ELU)."""

    d_model: int = 64
    """``transformer``: token width."""

    num_heads: int = 4
    """``transformer``: attention heads."""

    num_layers: int = 2
    """``transformer``: decoder layers."""

    prefix_conditioning: bool = False
    """Train and run the policy with a committed prefix (training-time real-time chunking): random prefixes of the
    demonstrated future actions with a random delay d in [0, H // 2], the loss on the actions after them. The
    loaded policy then accepts the prefix of the ``rtc`` schedule."""


def save_chunk_policy(path: str, net: ChunkPolicyNet, task: str, info: dict | None = None) -> None:
    """Write a checkpoint that :func:`~.checkpoints.load_chunk_policy` reads: the cfg, dims, task, weights and
    normalisation, and ``info`` (training figures)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    torch.save({
        "format": CHECKPOINT_FORMAT,
        "task": task,
        **net.checkpoint_dims(),
        "cfg": net.cfg.to_dict(),
        "state_dict": net.state_dict(),
        "info": info or {},
    }, path)


class ChunkPolicyModel:
    """A trained chunk policy as the chunk model of :class:`~isaaclab_suspend.chunking.ActionChunkingPolicy`:
    ``model(obs_rows, env_ids) -> (B, H, action_dim)`` on the ``policy`` observation group.

    Args:
        net: The network, in eval mode on its device.
        task: Task id the policy was trained on ('' if unknown).
        path: Checkpoint it was loaded from (for messages).
        info: Training figures stored in the checkpoint.
    """

    def __init__(self, net: ChunkPolicyNet, task: str, path: str, info: dict):
        self.net = net
        """The network."""
        self.task = task
        """Task id the policy was trained on ('' if unknown)."""
        self.path = path
        """Checkpoint it was loaded from."""
        self.info = info
        """Training figures stored in the checkpoint."""

    @property
    def chunk_length(self) -> int:
        """Actions per chunk H."""
        return self.net.chunk_length

    @property
    def action_dim(self) -> int:
        """Action dim A of the chunks."""
        return self.net.action_dim

    @property
    def accepts_prefix(self) -> bool:
        """Whether the policy was trained with prefix conditioning (the optional ``accepts_prefix`` of the
        chunk-model contract)."""
        return bool(self.net.max_prefix)

    def check_env(self, env: ManagerBasedRLEnv) -> None:
        """Raise if ``env`` is not the task, or has not the observation and action dims, the policy was
        trained on.

        Raises:
            ValueError: Naming the checkpoint, what it expects and what the env has.
        """
        task = getattr(env.cfg, "env_name", None) or getattr(getattr(env, "spec", None), "id", None)
        obs_dim = env.observation_manager.group_obs_dim["policy"]
        action_dim = env.action_manager.total_action_dim
        problems = []
        if self.task and task and task != self.task:
            problems.append(f"it was trained on task '{self.task}', the env is '{task}'")
        if tuple(obs_dim) != (self.net.obs_dim,):
            problems.append(f"it takes 'policy' observations of shape ({self.net.obs_dim},), the env's are {tuple(obs_dim)}")
        if action_dim != self.net.action_dim:
            problems.append(f"it outputs {self.net.action_dim} action dims, the env takes {action_dim}")
        if problems:
            raise ValueError(f"Chunk policy '{self.path}' does not fit the env: {'; '.join(problems)}.")

    @torch.no_grad()
    def __call__(self, obs_rows: dict, env_ids: torch.Tensor, prefix: torch.Tensor | None = None,
                 delay: torch.Tensor | None = None) -> torch.Tensor:
        """Chunks for the envs ``env_ids``, continuing ``prefix`` (B, d, action_dim) for ``delay`` (B,) steps if
        given. Returns shape (B, H, action_dim)."""
        obs = obs_rows["policy"]
        if obs.ndim != 2 or obs.shape[1] != self.net.obs_dim:
            raise ValueError(f"Chunk policy '{self.path}' takes 'policy' observations of shape (B,"
                             f" {self.net.obs_dim}), got {tuple(obs.shape)}.")
        device = self.net.obs_mean.device
        prefix, delay = prefix_on_device(prefix, delay, device)
        return self.net(obs.to(device, torch.float32), prefix, delay).to(obs.device)

    def __repr__(self) -> str:
        return f"ChunkPolicyModel('{self.path}', {self.net.cfg.arch}, H={self.chunk_length})"


def prefix_on_device(prefix: torch.Tensor | None, delay: torch.Tensor | None, device) -> tuple:
    """The prefix (float) and delay on the network's device, or ``(None, None)``."""
    if prefix is None:
        return None, None
    return prefix.to(device, torch.float32), delay.to(device)


def build_chunk_policy(ckpt: dict, path: str, device: str | torch.device, env: ManagerBasedRLEnv | None = None,
                       cfg_class: type = ChunkPolicyCfg, model_class: type = ChunkPolicyModel) -> ChunkPolicyModel:
    """The model of a loaded checkpoint (see :func:`~.checkpoints.load_chunk_policy`): ``cfg_class`` rebuilt from
    its dict, the network from ``cfg.class_type`` and the stored dims, ``model_class`` around it."""
    cfg = cfg_class()
    cfg.from_dict({k: v for k, v in ckpt["cfg"].items() if k != "class_type"})
    net = cfg.class_type.from_checkpoint_dims(cfg, ckpt).to(device)
    net.load_state_dict(ckpt["state_dict"])
    model = model_class(net.eval(), ckpt.get("task", ""), path, ckpt.get("info", {}))
    if env is not None:
        model.check_env(env)
    return model
