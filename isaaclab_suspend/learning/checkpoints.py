"""Loading a chunk-policy checkpoint: one entry point that picks the network its contents describe, and the
``chunk_policy`` chunk-model source (:class:`ChunkPolicyModelCfg`)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import torch

from isaaclab.utils import configclass

from ..chunking.sources import ChunkModelCfg, ChunkModelOpener, register_source
from ..lerobot.policy import REQUIRED_FILES, LeRobotChunkModel, is_lerobot_checkpoint
from ..weights_only import load_weights, peek_weights
from .chunk_policy import CHECKPOINT_FORMAT, ChunkPolicyModel, build_chunk_policy
from .image_chunk_policy import build_image_chunk_policy

if TYPE_CHECKING:
    from isaaclab.envs import ManagerBasedRLEnv


def load_chunk_policy(path: str, device: str | torch.device = "cpu",
                      env: ManagerBasedRLEnv | None = None) -> ChunkPolicyModel | LeRobotChunkModel:
    """Load a checkpoint written by :func:`~.chunk_policy.save_chunk_policy` (``scripts/train_chunk_policy.py``),
    or a LeRobot ``pretrained_model`` directory (config.json and model.safetensors, see
    :class:`~isaaclab_suspend.lerobot.policy.LeRobotChunkModel`).

    The file is read with ``weights_only=True``: tensors and plain containers only, no code runs from it.

    Args:
        path: The checkpoint.
        device: Device to run the network on.
        env: If given, the env is checked to be the policy's task with its observation and action dims.

    Raises:
        FileNotFoundError: If the file does not exist (or a directory is not a LeRobot ``pretrained_model``).
        ValueError: If it is not a chunk policy checkpoint (its network cannot be rebuilt from it), or does not fit
            ``env``.
    """
    path = os.path.abspath(path)
    if is_lerobot_checkpoint(path):
        model = LeRobotChunkModel(path, device)
        if env is not None:
            model.check_env(env)
        return model
    if os.path.isdir(path):
        raise FileNotFoundError(f"'{path}' is a directory but not a LeRobot pretrained_model (it needs"
                                f" {' and '.join(REQUIRED_FILES)}).")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"Chunk policy checkpoint '{path}' does not exist.")
    ckpt = load_weights(path, device, "chunk policy checkpoint")
    if not isinstance(ckpt, dict) or ckpt.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"'{path}' is not a chunk policy checkpoint (no format '{CHECKPOINT_FORMAT}'); write one"
                         " with scripts/train_chunk_policy.py.")
    build = build_image_chunk_policy if "image_shape" in ckpt else build_chunk_policy
    try:
        return build(ckpt, path, device, env)
    except (KeyError, TypeError, AttributeError, RuntimeError) as err:  # a field missing, weights of other shapes
        message = " ".join(str(err).split())  # torch lists each mismatching tensor on a line of its own
        raise ValueError(f"'{path}' is a chunk policy checkpoint whose network cannot be rebuilt from it"
                         f" ({type(err).__name__}: {message:.300}): write it again with scripts/train_chunk_policy.py."
                         ) from err


class ChunkPolicyOpener(ChunkModelOpener):
    """Opens a chunk-policy checkpoint: read once (its task and H are in the file), one model for every env."""

    @staticmethod
    def recognizes(path: str) -> bool:
        """Whether ``path`` is a chunk-policy checkpoint (``--checkpoint PATH`` picks this source then); a file
        holding more than tensors is refused, not passed over."""
        ckpt = peek_weights(path)
        return isinstance(ckpt, dict) and ckpt.get("format") == CHECKPOINT_FORMAT

    def __init__(self, cfg: ChunkPolicyModelCfg, device: str):
        super().__init__(cfg, device)
        self.model = load_chunk_policy(cfg.path, device)


@register_source("chunk_policy", ChunkPolicyOpener)
@configclass
class ChunkPolicyModelCfg(ChunkModelCfg):
    """A chunk policy written by ``scripts/train_chunk_policy.py`` (its task and H are in the file)."""

    class_type: type = ChunkPolicyOpener
    """The opener of this source."""
    path: str = ""
    """The checkpoint file."""
