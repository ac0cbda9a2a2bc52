"""Behaviour cloning of chunk policies from clean HDF5 datasets: windows, network, training, checkpoints."""

from .bc_trainer import BCHistory, BCTrainerCfg, chunk_loss, evaluate_loss, train_bc
from .chunk_dataset import ChunkDataset
from .chunk_policy import (
    CHECKPOINT_FORMAT,
    ChunkPolicyCfg,
    ChunkPolicyModel,
    ChunkPolicyNet,
    save_chunk_policy,
)
from .checkpoints import ChunkPolicyModelCfg, load_chunk_policy

__all__ = [
    "CHECKPOINT_FORMAT",
    "BCHistory",
    "BCTrainerCfg",
    "ChunkDataset",
    "ChunkPolicyCfg",
    "ChunkPolicyModelCfg",
    "ChunkPolicyModel",
    "ChunkPolicyNet",
    "chunk_loss",
    "evaluate_loss",
    "load_chunk_policy",
    "save_chunk_policy",
    "train_bc",
]
