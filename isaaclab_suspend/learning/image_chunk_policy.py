"""A chunk policy from camera images: a small convolutional encoder and an ACT-style chunk head."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn

from isaaclab.utils import configclass

from ..recording.image_recorders import IMAGE_GROUP
from .chunk_policy import ChunkPolicyCfg, ChunkPolicyModel, ChunkPolicyNet, build_chunk_policy, prefix_on_device

if TYPE_CHECKING:
    from isaaclab.envs import ManagerBasedRLEnv

    from .image_chunk_dataset import ImageChunkDataset


class SpatialSoftmax(nn.Module):
    """Expected image coordinates of each channel's softmax over pixels (robomimic's keypoints).

    Shape: (B, C, H, W) -> (B, 2 * C), coordinates in [-1, 1].
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, h, w = x.shape
        weights = x.flatten(2).softmax(-1).view(b, c, h, w)
        ys = torch.linspace(-1.0, 1.0, h, device=x.device)
        xs = torch.linspace(-1.0, 1.0, w, device=x.device)
        return torch.cat(((weights.sum(3) * ys).sum(-1), (weights.sum(2) * xs).sum(-1)), dim=1)


class ImageChunkPolicyNet(ChunkPolicyNet):
    """Maps one camera's uint8 RGB image and the robot's own state to a chunk of H actions in one pass.

    The image goes through four small convolutions (stride 2, 2, 2, 1) and a spatial softmax (the position of
    what each channel sees: the pusher, the cube, the target); these keypoints and the first
    :attr:`ImageChunkPolicyCfg.proprio_dims` dims of the ``policy`` observation (normalised) feed the chunk head
    of :class:`ChunkPolicyNet` (``mlp``). The other ``policy`` dims (for push-cube, the cube and target state)
    are not used: the policy has to see them.

    Args:
        cfg: Architecture.
        image_shape: (H, W, 3) of the camera.
        obs_dim: Dim of the ``policy`` observation (its first ``proprio_dims`` are used).
        action_dim: Action dim.
    """

    def __init__(self, cfg: ImageChunkPolicyCfg, image_shape: tuple[int, int, int], obs_dim: int, action_dim: int):
        if cfg.arch != "mlp":
            raise ValueError(f"The image chunk policy has an 'mlp' chunk head, got arch '{cfg.arch}'.")
        if not 0 <= cfg.proprio_dims <= obs_dim:
            raise ValueError(f"proprio_dims {cfg.proprio_dims} must be within the {obs_dim} 'policy' observation dims.")
        c = cfg.channels
        features = 2 * c[-1] + cfg.proprio_dims
        super().__init__(cfg, features, action_dim)
        self.image_shape, self.policy_obs_dim = tuple(image_shape), obs_dim
        self.encoder = nn.Sequential(
            nn.Conv2d(image_shape[2], c[0], 5, stride=2, padding=2), nn.ReLU(),
            nn.Conv2d(c[0], c[1], 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(c[1], c[2], 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(c[2], c[3], 3, stride=1, padding=1),
            SpatialSoftmax(),
        )

    @classmethod
    def for_dataset(cls, cfg: ImageChunkPolicyCfg, dataset: ImageChunkDataset) -> ImageChunkPolicyNet:
        """A network for the camera image shape and the dims of ``dataset``."""
        return cls(cfg, dataset.image_shape, dataset.obs_dim, dataset.action_dim)

    def set_normalization(self, obs: torch.Tensor, actions: torch.Tensor) -> None:
        """Statistics of the actions and of the used ``policy`` dims (the keypoints are in [-1, 1] already)."""
        p = self.cfg.proprio_dims
        keypoints = self.obs_dim - p
        self.obs_mean.zero_()
        self.obs_std.fill_(1.0)
        self.obs_mean[keypoints:] = obs[:, :p].mean(0)
        self.obs_std[keypoints:] = obs[:, :p].std(0).nan_to_num(1.0).clamp_min(1e-6)
        self.action_mean.copy_(actions.mean(0))
        self.action_std.copy_(actions.std(0).nan_to_num(1.0).clamp_min(1e-6))

    @classmethod
    def from_checkpoint_dims(cls, cfg: ImageChunkPolicyCfg, ckpt: dict) -> ImageChunkPolicyNet:
        """The (untrained) network that the dims :meth:`checkpoint_dims` stored describe."""
        return cls(cfg, tuple(ckpt["image_shape"]), ckpt["obs_dim"], ckpt["action_dim"])

    def checkpoint_dims(self) -> dict:
        """The dims a checkpoint stores to rebuild the network: the ``policy`` observation dim and the image shape."""
        return {"obs_dim": self.policy_obs_dim, "action_dim": self.action_dim, "image_shape": list(self.image_shape)}

    def features(self, inputs: dict) -> torch.Tensor:
        """Keypoints of the image and the used ``policy`` dims. Shape: (B, 2 * channels[-1] + proprio_dims)."""
        images = inputs[IMAGE_GROUP].permute(0, 3, 1, 2).float() / 255.0
        return torch.cat((self.encoder(images), inputs["policy"][:, : self.cfg.proprio_dims].float()), dim=1)

    def forward_normalized(self, inputs: dict, prefix: torch.Tensor | None = None,
                           delay: torch.Tensor | None = None) -> torch.Tensor:
        """Normalised chunk of ``{"images": (B, H, W, 3) uint8, "policy": (B, obs_dim)}``, given the optional prefix
        (see :meth:`ChunkPolicyNet.forward_normalized`). Shape: (B, H, action_dim)."""
        return super().forward_normalized(self.features(inputs), prefix, delay)


@configclass
class ImageChunkPolicyCfg(ChunkPolicyCfg):
    """Configuration of :class:`ImageChunkPolicyNet`."""

    class_type: type = ImageChunkPolicyNet

    camera: str = "scene_camera"
    """Camera term of the ``images`` observation group the policy sees."""

    channels: list[int] = [8, 16, 16, 16]
    """Output channels of the four convolutions (the last one gives ``channels[-1]`` keypoints)."""

    proprio_dims: int = 2
    """Leading dims of the ``policy`` observation given beside the image: the robot's own state (push-cube: cart
    position and velocity)."""


class ImageChunkPolicyModel(ChunkPolicyModel):
    """A trained image chunk policy as the chunk model of an ``ActionChunkingPolicy``: reads
    ``obs_rows["images"][camera]`` and ``obs_rows["policy"]``."""

    net: ImageChunkPolicyNet

    def check_env(self, env: ManagerBasedRLEnv) -> None:
        """Raise if the env lacks the camera, renders another image size, or differs as for the state policy."""
        cfg = self.net.cfg
        terms = env.observation_manager.active_terms.get(IMAGE_GROUP, [])
        if cfg.camera not in terms:
            raise ValueError(f"Chunk policy '{self.path}' sees camera '{cfg.camera}' of the '{IMAGE_GROUP}' group;"
                             f" the env's cameras are {terms}.")
        shape = tuple(env.observation_manager.group_obs_term_dim[IMAGE_GROUP][terms.index(cfg.camera)])
        if shape != self.net.image_shape:
            raise ValueError(f"Chunk policy '{self.path}' takes {self.net.image_shape} images, '{cfg.camera}' renders"
                             f" {shape}.")
        obs_dim = tuple(env.observation_manager.group_obs_dim["policy"])
        if obs_dim != (self.net.policy_obs_dim,) or env.action_manager.total_action_dim != self.net.action_dim:
            raise ValueError(f"Chunk policy '{self.path}' takes 'policy' observations of shape"
                             f" ({self.net.policy_obs_dim},) and gives {self.net.action_dim} actions; the env has"
                             f" {obs_dim} and {env.action_manager.total_action_dim}.")

    @torch.no_grad()
    def __call__(self, obs_rows: dict, env_ids: torch.Tensor, prefix: torch.Tensor | None = None,
                 delay: torch.Tensor | None = None) -> torch.Tensor:
        """Chunks for the envs ``env_ids``, continuing the optional prefix. Returns shape (B, H, action_dim)."""
        device = self.net.obs_mean.device
        inputs = {IMAGE_GROUP: obs_rows[IMAGE_GROUP][self.net.cfg.camera].to(device),
                  "policy": obs_rows["policy"].to(device)}
        return self.net(inputs, *prefix_on_device(prefix, delay, device)).to(obs_rows["policy"].device)


def build_image_chunk_policy(ckpt: dict, path: str, device: str | torch.device,
                             env: ManagerBasedRLEnv | None = None) -> ImageChunkPolicyModel:
    """The :class:`ImageChunkPolicyModel` of a loaded checkpoint (see :func:`~.checkpoints.load_chunk_policy`)."""
    return build_chunk_policy(ckpt, path, device, env, ImageChunkPolicyCfg, ImageChunkPolicyModel)
