"""Turn recorded camera images into something to look at: a tiled frame per step, and an animated GIF."""

from __future__ import annotations

import numpy as np
from PIL import Image

from ..recording.image_recorders import IMAGE_GROUP
from .reader import DatasetError, DatasetReader


def load_images(reader: DatasetReader, demo: str, camera: str) -> np.ndarray:
    """The recorded images of ``camera`` in ``demo``. Shape: (num_samples, H, W, 3), uint8.

    Raises:
        DatasetError: If the demo has no images of that camera (the error lists the cameras it has).
    """
    group = reader._data[demo] if demo in reader.demo_names else None
    if group is not None and IMAGE_GROUP in group and camera not in group[IMAGE_GROUP]:
        raise DatasetError(f"'{reader.path}', demo '{demo}' has no camera '{camera}' (found {sorted(group[IMAGE_GROUP])}).")
    images = reader.load_arrays(demo, (f"{IMAGE_GROUP}/{camera}",))[f"{IMAGE_GROUP}/{camera}"].numpy()
    if images.dtype != np.uint8 or images.ndim != 4 or images.shape[-1] % 3:
        raise DatasetError(f"'{reader.path}', demo '{demo}': '{camera}' is {images.dtype} {images.shape}, not uint8 RGB.")
    return images[..., -3:]  # the newest frame of a stack


CHUNK_START_COLOR = (255, 200, 0)
"""Border colour of a frame whose action starts a new chunk."""


def mark_chunk_starts(reader: DatasetReader, demo: str, frames: np.ndarray) -> np.ndarray:
    """``frames`` of ``demo`` with a :data:`CHUNK_START_COLOR` border on each step whose action is the first one
    taken from a new chunk (its ``chunk/index`` restarted, or its ``chunk/call`` changed, as recorded by the chunk
    provenance term); a copy, or ``frames`` itself for a file without provenance. Shape: (T, H, W, 3)."""
    group = reader._data[demo]
    if "chunk" not in group or "call" not in group["chunk"]:
        return frames
    call = reader.load_arrays(demo, ("chunk/call",))["chunk/call"].numpy()
    starts = np.flatnonzero((call >= 0) & (np.diff(call, prepend=-1) != 0))
    frames = frames.copy()
    for edge in (np.s_[:, 0], np.s_[:, -1], np.s_[:, :, 0], np.s_[:, :, -1]):
        view = frames[starts]
        view[edge] = CHUNK_START_COLOR
        frames[starts] = view
    return frames


def tile(episodes: list[np.ndarray], columns: int, scale: int = 1, gap: int = 1) -> np.ndarray:
    """Tile episodes side by side, ``columns`` per row with ``gap`` white pixels between tiles, each held on its
    last frame once it ends.

    Args:
        episodes: Image sequences, each of shape (T_i, H, W, 3).
        columns: Tiles per row.
        scale: Pixel repetition (nearest-neighbour upscaling), so that 64x64 frames stay visible.

    Returns:
        The tiled frames. Shape: (max T_i, rows * (H + gap) * scale, columns * (W + gap) * scale, 3).
    """
    steps = max(len(e) for e in episodes)
    h, w = episodes[0].shape[1:3]
    rows = -(-len(episodes) // columns)
    out = np.full((steps, rows * (h + gap), columns * (w + gap), 3), 255, dtype=np.uint8)
    for i, frames in enumerate(episodes):
        held = np.concatenate([frames, np.repeat(frames[-1:], steps - len(frames), axis=0)])
        r, c = divmod(i, columns)
        out[:, r * (h + gap) : r * (h + gap) + h, c * (w + gap) : c * (w + gap) + w] = held
    return out.repeat(scale, axis=1).repeat(scale, axis=2)


def write_gif(frames: np.ndarray, path: str, fps: float) -> None:
    """Write frames (Shape: (T, H, W, 3), uint8) as a looping GIF."""
    images = [Image.fromarray(f) for f in frames]
    images[0].save(path, save_all=True, append_images=images[1:], duration=round(1000 / fps), loop=0)


def write_png(frame: np.ndarray, path: str) -> None:
    """Write one frame (Shape: (H, W, 3), uint8) as a PNG."""
    Image.fromarray(frame).save(path)
