"""Embedded default chunk models per task: no training, no download."""

from __future__ import annotations

from collections.abc import Callable

from .cartpole_lqr import CartpoleLQRCfg, CartpoleLQRChunkModel
from .latency import ChunkModel
from .push_cube_scripted import PushCubeChunkCfg, PushCubeChunkModel

DEFAULT_MODELS: dict[str, Callable[[int], ChunkModel]] = {
    "Isaac-Cartpole-Suspendable": lambda h: CartpoleLQRChunkModel(CartpoleLQRCfg(chunk_length=h)),
    "Isaac-PushCube-Suspendable": lambda h: PushCubeChunkModel(PushCubeChunkCfg(chunk_length=h)),
    # the camera variants share the proprioceptive ``policy`` group, so the scripted expert drives them too
    "Isaac-PushCube-Camera-Suspendable": lambda h: PushCubeChunkModel(PushCubeChunkCfg(chunk_length=h)),
    "Isaac-PushCube-TwoCamera-Suspendable": lambda h: PushCubeChunkModel(PushCubeChunkCfg(chunk_length=h)),
}
"""Factories ``chunk_length -> model`` of the default chunk model of each task."""


def make_default_model(task: str, chunk_length: int) -> ChunkModel:
    """The embedded chunk model of ``task`` planning ``chunk_length`` actions per call.

    Raises:
        ValueError: If the task has no embedded model.
    """
    if task not in DEFAULT_MODELS:
        raise ValueError(f"No embedded chunk model for '{task}'. Tasks with one: {sorted(DEFAULT_MODELS)}.")
    return DEFAULT_MODELS[task](chunk_length)
