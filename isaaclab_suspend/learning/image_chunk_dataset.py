"""Behaviour-cloning samples with camera images: a step's image and observation, and the next H actions."""

from __future__ import annotations

import torch

from ..datasets import DatasetError, DatasetReader
from ..recording.image_recorders import IMAGE_GROUP
from .chunk_dataset import ChunkDataset


class ImageChunkDataset(ChunkDataset):
    """A :class:`ChunkDataset` that also holds each sample's image of one camera (``images/<camera>``, uint8).

    Args:
        path: The dataset file, recorded on a camera task.
        chunk_length: Actions per window H.
        camera: Camera term of the ``images`` group.
        demos: Demos to use (default: all).

    Raises:
        DatasetError: As :class:`ChunkDataset`, or if a demo lacks the camera's images or has other image shapes.
    """

    def __init__(self, path: str, chunk_length: int, camera: str, demos: list[str] | None = None):
        super().__init__(path, chunk_length, demos)
        self.camera = camera
        """Camera term of the ``images`` group."""
        key = f"{IMAGE_GROUP}/{camera}"
        with DatasetReader(path) as reader:
            images = [reader.load_arrays(name, (key, "actions"))[key] for name in self.demo_names]
        shapes = {tuple(x.shape[1:]) for x in images}
        if len(shapes) > 1 or any(x.dtype != torch.uint8 or x.ndim != 4 for x in images):
            raise DatasetError(f"'{self.path}': '{key}' must be uint8 (T, H, W, 3) of one shape in every demo, got"
                               f" {sorted(shapes)}.")
        self.images = torch.cat(images)[..., -3:]
        """Image of every sample (the newest frame of a stack). Shape: (num_samples, H, W, 3), uint8."""

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """(H, W, 3) of the camera."""
        return tuple(self.images.shape[1:])

    def inputs(self, index: torch.Tensor, device: str | torch.device) -> dict:
        """The image (uint8, (B, H, W, 3)) and the ``policy`` observation ((B, obs_dim)) of samples ``index``."""
        return {IMAGE_GROUP: self.images[index].to(device), "policy": self.obs[index].to(device)}

    def __repr__(self) -> str:
        return super().__repr__()[:-1] + f", camera '{self.camera}' {self.image_shape})"
