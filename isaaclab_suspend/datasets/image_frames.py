"""Turn recorded camera images into something to look at: a tiled frame per step, and an animated GIF."""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw

from ..recording.image_recorders import IMAGE_GROUP
from .reader import DatasetError, DatasetReader, memory_budget_bytes


def load_images(reader: DatasetReader, demo: str, camera: str) -> np.ndarray:
    """The recorded images of ``camera`` in ``demo``. Shape: (num_samples, H, W, 3), uint8.

    Raises:
        DatasetError: If the demo has no images of that camera (the error lists the cameras it has), they are not
            uint8 RGB frames, not one per step of the demo, or the demo is refused by
            :meth:`DatasetReader.check_demo`.
    """
    key = f"{IMAGE_GROUP}/{camera}"
    datasets = reader.check_demo(demo)  # a missing demo, or one reaching outside the file, is refused here
    if key not in datasets:
        cameras = sorted(path.split("/")[1] for path in datasets if path.startswith(f"{IMAGE_GROUP}/"))
        raise DatasetError(f"'{reader.path}', demo '{demo}' has no camera '{camera}' (found {cameras}).")
    images = reader.load_arrays(demo, (key,))[key].numpy()
    if images.dtype != np.uint8 or images.ndim != 4 or 0 in images.shape or images.shape[-1] % 3:
        raise DatasetError(f"'{reader.path}', demo '{demo}': '{camera}' is {images.dtype} {images.shape}, not uint8"
                           " RGB frames (num_samples > 0, H > 0, W > 0, a multiple of 3 channels > 0).")
    steps = {key: shape[0] for key, shape in reader.dataset_shapes(demo).items()
             if key in ("actions", "chunk/call") and len(shape)}
    steps["num_samples"] = reader.demo_attrs(demo).get("num_samples")
    other = {key: int(n) for key, n in steps.items() if n is not None and n != len(images)}
    if other:
        raise DatasetError(f"'{reader.path}', demo '{demo}': '{camera}' holds {len(images)} frames, the demo has"
                           f" {other}: one frame per step is needed; the file is corrupt.")
    return images[..., -3:]  # the newest frame of a stack


MAX_IMAGE_SIDE = 65535
"""Most pixels a side of the GIF and of the PNG grid may have (GIF stores its sizes in 16 bits)."""


def check_tileable(path: str, episodes: dict[str, np.ndarray], columns: int, scale: int, stills: int = 1) -> None:
    """Raise unless the demos' frames (by demo name, each (T, H, W, 3)) have one size, their tiling fits in
    half the memory the machine has left, and neither the GIF nor the grid of ``stills`` per demo has a side
    over :data:`MAX_IMAGE_SIDE`.

    Raises:
        DatasetError: Naming the demos whose frame size differs, the size the tiled frames would take, or the
            side over the bound.
    """
    sizes = {name: frames.shape[1:3] for name, frames in episodes.items()}
    first = next(iter(sizes.values()))
    other = [name for name, size in sizes.items() if size != first]
    if other:
        raise DatasetError(f"'{path}': demos {other[:4]} have frames of another size than {next(iter(sizes))}'s"
                           f" {tuple(first)}: view them separately.")
    rows = -(-len(episodes) // columns)
    steps = max(len(frames) for frames in episodes.values())
    needed = steps * rows * (first[0] + 1) * columns * (first[1] + 1) * 3 * scale**2
    if needed > memory_budget_bytes():
        raise DatasetError(f"'{path}': the tiled frames would take {needed / 2**20:.0f} MiB, over half the memory"
                           " available: show fewer demos (--demos, --max_demos) or a smaller --scale.")
    sides = {"the GIF": (rows * (first[0] + 1) * scale, columns * (first[1] + 1) * scale),
             "the PNG grid": (len(episodes) * (first[0] * scale + LABEL_HEIGHT + 1), stills * (first[1] * scale + 1))}
    for what, (height, width) in sides.items():
        if max(height, width) > MAX_IMAGE_SIDE:
            raise DatasetError(f"'{path}': frames of {first[0]} x {first[1]} px make {what} {height} x {width} px,"
                               f" over {MAX_IMAGE_SIDE} px a side: show fewer demos or stills, or a smaller --scale.")


CHUNK_START_COLOR = (255, 200, 0)
"""Border colour of a frame whose action starts a new chunk."""


def mark_chunk_starts(reader: DatasetReader, demo: str, frames: np.ndarray) -> np.ndarray:
    """``frames`` of ``demo`` with a :data:`CHUNK_START_COLOR` border on each step whose action is the first one
    taken from a new chunk (its ``chunk/index`` restarted, or its ``chunk/call`` changed, as recorded by the chunk
    provenance term); a copy, or ``frames`` itself for a file without provenance or whose every step starts a chunk
    (H = 1, e.g. an RL expert: a border on every frame would say nothing). Shape: (T, H, W, 3)."""
    group = reader._data[demo]
    if "chunk" not in group or "call" not in group["chunk"]:
        return frames
    call = reader.load_arrays(demo, ("chunk/call",))["chunk/call"].numpy()
    starts = np.flatnonzero((call >= 0) & (np.diff(call, prepend=-1) != 0))
    if len(starts) == len(call):
        return frames
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
        The tiled frames, shape (max T_i, rows * (H + gap) * scale, columns * (W + gap) * scale, 3).
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


def still_steps(length: int, count: int) -> list[int]:
    """``count`` steps spread evenly over a demo of ``length`` steps, its first and last included."""
    return np.linspace(0, length - 1, count).round().astype(int).tolist()


LABEL_HEIGHT = 12
"""Pixels below each still of :func:`write_stills` for its label."""


def write_stills(rows: list[list[tuple[np.ndarray, str]]], path: str, scale: int = 1, gap: int = 1) -> None:
    """Write a PNG grid of labelled stills: a row per demo, a cell per ``(frame, label)`` (frame shape (H, W, 3),
    uint8, repeated ``scale`` times; its label, e.g. ``demo_3 t=17``, beneath it), ``gap`` white pixels between
    cells."""
    h, w = (size * scale for size in rows[0][0][0].shape[:2])
    columns = max(len(row) for row in rows)
    image = Image.new("RGB", (columns * (w + gap), len(rows) * (h + LABEL_HEIGHT + gap)), "white")
    draw = ImageDraw.Draw(image)
    for r, row in enumerate(rows):
        for c, (frame, label) in enumerate(row):
            x, y = c * (w + gap), r * (h + LABEL_HEIGHT + gap)
            image.paste(Image.fromarray(frame.repeat(scale, axis=0).repeat(scale, axis=1)), (x, y))
            draw.text((x + 1, y + h), label, fill="black")
    image.save(path)
