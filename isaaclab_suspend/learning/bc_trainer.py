"""Behaviour cloning of a chunk policy: a plain loop over epochs of shuffled minibatches of windows."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from tqdm import tqdm

from isaaclab.utils import configclass

from .chunk_dataset import ChunkDataset
from .chunk_policy import ChunkPolicyCfg, ChunkPolicyNet


@configclass
class BCTrainerCfg:
    """Configuration of :func:`train_bc`."""

    epochs: int = 50
    """Passes over the training windows."""

    max_steps: int | None = None
    """Stop after this many gradient steps in any case (None: run all epochs)."""

    batch_size: int = 256
    """Windows per gradient step."""

    lr: float = 1e-3
    """AdamW learning rate."""

    weight_decay: float = 1e-4
    """AdamW weight decay."""

    val_fraction: float = 0.1
    """Fraction of the episodes held out for validation (split by episode, see :meth:`ChunkDataset.split`)."""

    seed: int = 0
    """Seed of the split, the initial weights and the minibatch order."""

    device: str = "cpu"
    """Torch device of the training."""


@dataclass
class BCHistory:
    """Losses of a run, one entry per epoch."""

    train_loss: list[float] = field(default_factory=list)
    """Mean training loss of each epoch."""
    val_loss: list[float] = field(default_factory=list)
    """Validation loss after each epoch (NaN without validation episodes)."""
    steps: int = 0
    """Gradient steps taken."""
    num_train: int = 0
    """Training windows."""
    num_val: int = 0
    """Validation windows."""


def chunk_loss(net: ChunkPolicyNet, obs: torch.Tensor | dict, actions: torch.Tensor, valid: torch.Tensor,
               delay: torch.Tensor | None = None) -> torch.Tensor:
    """ACT's loss: the L1 distance of the predicted to the demonstrated chunk, in normalised action units,
    averaged over the valid window steps only (the padding past an episode's end does not count).

    With ``delay`` (training-time real-time chunking) the network is given the first ``delay`` demonstrated
    actions of each window as its committed prefix, and only the actions after them count.

    Args:
        obs: The network's inputs (:meth:`ChunkDataset.inputs`): observations, shape (B, obs_dim), or a dict of
            them and images for an image policy.
        actions: Demonstrated windows, shape (B, H, action_dim).
        valid: Valid window steps, shape (B, H).
        delay: Prefix length of each window (None: no prefix), shape (B,), long.
    """
    target = (actions - net.action_mean) / net.action_std
    if delay is None:
        predicted = net.forward_normalized(obs)
    else:
        predicted = net.forward_normalized(obs, actions[:, : net.max_prefix], delay)
        valid = valid & (torch.arange(actions.shape[1], device=valid.device) >= delay.unsqueeze(1))
    error = (predicted - target).abs().mean(-1)
    return (error * valid).sum() / valid.sum().clamp_min(1)


def sample_delays(net: ChunkPolicyNet, batch: int, generator: torch.Generator, device) -> torch.Tensor | None:
    """Random prefix lengths in [0, ``net.max_prefix``] for a batch of windows; None for a network without prefix
    conditioning. Shape: (batch,), long."""
    if not net.max_prefix:
        return None
    return torch.randint(0, net.max_prefix + 1, (batch,), generator=generator).to(device)


@torch.no_grad()
def evaluate_loss(net: ChunkPolicyNet, dataset: ChunkDataset, index: torch.Tensor, batch_size: int = 4096) -> float:
    """Mean :func:`chunk_loss` over the samples ``index`` (NaN if empty), weighted by valid steps; with prefix
    conditioning, on prefixes of the same seeded random lengths at every evaluation."""
    if index.numel() == 0:
        return math.nan
    device = net.obs_mean.device
    generator = torch.Generator().manual_seed(0)
    total, count = 0.0, 0
    for batch in index.split(batch_size):
        actions, valid = dataset.targets(batch)
        num_valid = int(valid.sum())
        delay = sample_delays(net, len(batch), generator, device)
        total += float(chunk_loss(net, dataset.inputs(batch, device), actions.to(device), valid.to(device),
                                  delay)) * num_valid
        count += num_valid
    return total / max(count, 1)


def train_bc(dataset: ChunkDataset, policy_cfg: ChunkPolicyCfg, cfg: BCTrainerCfg, writer=None,
             progress: bool = True) -> tuple[ChunkPolicyNet, BCHistory]:
    """Train a :class:`ChunkPolicyNet` on ``dataset`` by behaviour cloning.

    The observation and action statistics of the training windows are stored in the network. Each epoch
    shuffles the training windows (seeded), takes AdamW steps on :func:`chunk_loss` and evaluates the
    validation episodes. With ``policy_cfg.prefix_conditioning`` every window gets a random prefix length
    (``sample_delays``, seeded), as in training-time real-time chunking.

    Args:
        dataset: The windows; its chunk length must be the policy's.
        policy_cfg: Architecture.
        cfg: Training settings.
        writer: Optional TensorBoard ``SummaryWriter`` (``loss/train`` per step, ``loss/train_epoch`` and
            ``loss/val`` per epoch).
        progress: Show a tqdm progress bar over the steps and print the losses of each epoch.

    Returns:
        The trained network (eval mode) and the losses.

    Raises:
        ValueError: If the chunk lengths differ or there are no training windows.
    """
    if dataset.chunk_length != policy_cfg.chunk_length:
        raise ValueError(f"The dataset's windows have {dataset.chunk_length} actions, the policy's chunks"
                         f" {policy_cfg.chunk_length}.")
    torch.manual_seed(cfg.seed)
    train_idx, val_idx = dataset.split(cfg.val_fraction, cfg.seed)
    if train_idx.numel() == 0:
        raise ValueError(f"{dataset} has no training windows.")
    net = policy_cfg.class_type.for_dataset(policy_cfg, dataset).to(cfg.device)
    net.set_normalization(dataset.obs[train_idx].to(cfg.device), dataset.actions[train_idx].to(cfg.device))
    optimizer = torch.optim.AdamW(net.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    generator = torch.Generator().manual_seed(cfg.seed)
    history = BCHistory(num_train=train_idx.numel(), num_val=val_idx.numel())
    steps_per_epoch = math.ceil(train_idx.numel() / cfg.batch_size)
    total_steps = cfg.epochs * steps_per_epoch if cfg.max_steps is None else min(cfg.max_steps,
                                                                                   cfg.epochs * steps_per_epoch)
    bar = tqdm(total=total_steps, desc="bc", unit="step", disable=not progress)
    for epoch in range(cfg.epochs):
        net.train()
        epoch_loss, epoch_steps = 0.0, 0
        for batch in train_idx[torch.randperm(train_idx.numel(), generator=generator)].split(cfg.batch_size):
            if history.steps >= total_steps:
                break
            actions, valid = dataset.targets(batch)
            delay = sample_delays(net, len(batch), generator, cfg.device)
            loss = chunk_loss(net, dataset.inputs(batch, cfg.device), actions.to(cfg.device), valid.to(cfg.device),
                              delay)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            epoch_loss += loss.item()
            epoch_steps += 1
            history.steps += 1
            if writer is not None:
                writer.add_scalar("loss/train", loss.item(), history.steps)
            bar.update(1)
        if epoch_steps == 0:
            break
        net.eval()
        history.train_loss.append(epoch_loss / epoch_steps)
        history.val_loss.append(evaluate_loss(net, dataset, val_idx))
        if progress:
            bar.write(f"epoch {epoch + 1:3d}/{cfg.epochs}: train loss {history.train_loss[-1]:.4f},"
                      f" val loss {history.val_loss[-1]:.4f}")
        if writer is not None:
            writer.add_scalar("loss/train_epoch", history.train_loss[-1], epoch + 1)
            writer.add_scalar("loss/val", history.val_loss[-1], epoch + 1)
    bar.close()
    return net.eval(), history
