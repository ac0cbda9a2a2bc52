"""Export a recorded HDF5 dataset to a LeRobot dataset (format v3.0) with LeRobot's own writer.

One LeRobot episode per demo, one frame per recorded sample (nothing added, nothing dropped): ``action``,
``observation.state`` (the ``policy`` group), ``observation.images.<cam>`` for every camera of the ``images``
group, every other per-sample vector of the demos as a feature of its own (``chunk/age`` becomes
``chunk.age``), and the task text. In a robot's terms (``--robot so101_follower``): its state, its actions (the
recorded joint targets) and the cameras only, as a real robot's recording has them. The frames go through ``LeRobotDataset.create`` / ``add_frame`` /
``save_episode`` / ``finalize``, so LeRobot computes its statistics and writes its layout itself. The mapping
back to the env is written beside it (:class:`~.layout.ExportSidecar`), with GR00T's ``modality.json``.
"""

from __future__ import annotations

import importlib
import os
import shutil
from collections.abc import Callable
from dataclasses import MISSING

import numpy as np
import torch

from isaaclab.utils import configclass

from ..datasets import DatasetError, DatasetReader
from ..datasets.reader import check_values, memory_budget_bytes
from ..names import VCODECS
from . import so101
from .layout import (
    ACTION_FEATURE,
    ENV_STATE_FEATURE,
    IMAGE_PREFIX,
    STATE_FEATURE,
    STATE_GROUP,
    ExportSidecar,
    VectorLayout,
)

IMAGE_GROUP = "images"
"""HDF5 group of the camera frames (``images/<cam>``, uint8 (N, H, W, 3))."""
NOT_EXPORTED = ("initial_state", "states", "pre_step_states", "env_origin", "joint_targets")
"""Demo members left out: those that describe the scene for a replay, not a frame, and the joint targets (the
action in joint space: the ``action`` of a robot's export)."""
EXPORT_COPIES = 18.0
"""Bytes the export allocates per byte of a demo's vectors it reads, counted in the reader's memory budget: the
arrays read, their float32 columns, LeRobot's frames, episode buffer, statistics and parquet conversion (measured:
17x the float32 columns of 1024 and 4096 wide vectors, 10000-20000 frames, on top of the statistics' columns)."""
FRAME_COPIES = 2.0
"""Bytes the export allocates per byte of a demo's camera frames it reads: the frames read and LeRobot's copy of
each while it encodes or writes it."""
STATS_BYTES_PER_COLUMN = 2 * (5000 + 1) * 8
"""Memory LeRobot's statistics take per column of a vector feature, whatever the number of frames: a 5000-bin
histogram and its bin edges in float64 (``RunningQuantileStats``' default; 2**18 columns took past 15 GB)."""
FLOAT32_MAX = float(np.finfo(np.float32).max)
"""Largest magnitude a vector value may have: LeRobot's features are float32 (more turns into inf)."""
MIN_STEP_DT, MAX_STEP_DT = 1e-4, 60.0
"""Control periods a dataset's ``env_args.step_dt`` may state [s]: 10 kHz to one step a minute (its inverse is
LeRobot's fps)."""


@configclass
class LeRobotExportCfg:
    """Settings of :func:`export_lerobot`."""

    output: str = MISSING
    """Root directory of the LeRobot dataset; must not exist."""
    repo_id: str = ""
    """LeRobot repo id (default ``local/<name of output>``)."""
    task: str = ""
    """Task text of every frame (default: the recorded env name)."""
    use_videos: bool = True
    """Cameras as mp4 (lossy) or, if False, as PNG frames in the parquet files (lossless)."""
    vcodec: str = "libsvtav1"
    """Video codec, one of :data:`VCODECS`."""
    image_writer_threads: int = 2
    """Threads writing PNG frames (``use_videos=False``)."""
    robot: str = ""
    """Write ``observation.state`` and ``action`` in a real robot's terms ('' : the env's own; ``so101_follower``:
    the policy term ``joint_pos_abs`` and the recorded ``joint_targets/robot``, the SO-101's six joint values in
    radians, see :mod:`.so101`); only the features a real robot's recording has are written."""
    environment_state: tuple[str, ...] = ()
    """Terms of the ``policy`` group written as ``observation.environment_state`` (needs the group recorded per
    term, as tasks whose policy group does not concatenate its terms record it)."""
    cameras: tuple[str, ...] | None = None
    """Cameras of the ``images`` group exported (None: all recorded; empty: none, a state-only dataset of a camera
    recording, which a state-only policy trains on without decoding a video frame)."""


def export_lerobot(path: str, cfg: LeRobotExportCfg, progress: Callable[[int], None] | None = None) -> ExportSidecar:
    """Write the demos of the HDF5 dataset ``path`` as a LeRobot dataset at ``cfg.output``.

    Args:
        path: The recorded dataset.
        cfg: Where and how to write.
        progress: Called with the number of frames after each demo.

    Returns:
        The sidecar written with it.

    Raises:
        FileNotFoundError: If ``path`` does not exist.
        FileExistsError: If ``cfg.output`` exists.
        DatasetError: If ``path`` is not a dataset this can export (no demos, no ``obs`` or ``actions``, a demo
            whose members disagree with the first demo's).
        ValueError: If a setting is invalid.
    """
    from lerobot.configs.video import RGBEncoderConfig
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    quiet_video_libraries()
    if cfg.vcodec not in VCODECS:
        raise ValueError(f"vcodec must be one of {VCODECS}, got {cfg.vcodec!r}.")
    output = os.path.abspath(cfg.output)
    if os.path.exists(output):
        raise FileExistsError(f"Output '{output}' exists: choose a new directory (the export never overwrites).")
    with DatasetReader(path) as reader:
        if not reader.demo_names:
            raise DatasetError(f"'{reader.path}' holds no demos.")
        sidecar, keys = _plan(reader, cfg)
        features = _features(reader, sidecar, keys, cfg.use_videos)
        columns = sum(f["shape"][0] for f in features.values() if f["dtype"] == "float32")
        if columns * STATS_BYTES_PER_COLUMN > memory_budget_bytes():
            raise DatasetError(f"'{reader.path}': LeRobot's statistics of {columns} vector columns would take"
                               f" {columns * STATS_BYTES_PER_COLUMN / 2**20:.0f} MiB, over the"
                               f" {memory_budget_bytes() / 2**20:.0f} MiB this machine can give (half the memory"
                               " available): the file is corrupt or its vectors too wide to export here.")
        step_dt = reader.env_args.get("step_dt")
        if step_dt is not None and (type(step_dt) not in (int, float) or not MIN_STEP_DT <= step_dt <= MAX_STEP_DT):
            raise DatasetError(f"'{reader.path}': 'env_args.step_dt' must be a control period from {MIN_STEP_DT:g} to"
                               f" {MAX_STEP_DT:g} s, got {step_dt!r:.80}.")
        fps = 1.0 / step_dt if step_dt is not None else _task_fps(reader.env_name)
        if abs(fps - round(fps)) > 1e-6:
            raise DatasetError(f"'{reader.path}': the control rate {fps} Hz is not a whole number; LeRobot's fps is.")
        dataset = LeRobotDataset.create(
            cfg.repo_id or f"local/{os.path.basename(output)}", round(fps), features, root=output,
            robot_type=so101.robot_type() if sidecar.robot else reader.env_name or None, use_videos=cfg.use_videos,
            image_writer_threads=0 if cfg.use_videos else cfg.image_writer_threads,
            streaming_encoding=cfg.use_videos, rgb_encoder=RGBEncoderConfig(vcodec=cfg.vcodec),
            video_backend=video_backend())
        try:
            frames = 0
            for name in reader.demo_names:
                where = f"'{reader.path}', demo '{name}'"
                copies = {key: EXPORT_COPIES if features[feature]["dtype"] == "float32" else FRAME_COPIES
                          for feature, group in keys.items() for key in group}
                arrays = reader.load_arrays(name, tuple(copies), copies=copies)
                for feature, group in keys.items():
                    if features[feature]["dtype"] == "float32":  # finite already; float32 holds them
                        for key in group:
                            check_values(where, key, arrays[key], FLOAT32_MAX)
                columns = {feature: _column([arrays[k] for k in group], features[feature])
                           for feature, group in keys.items()}
                del arrays
                if sidecar.robot:  # the robot's units (names and widths are the sidecar's already)
                    for feature in (STATE_FEATURE, ACTION_FEATURE):
                        joints = torch.from_numpy(columns[feature])
                        so101.check_joint_limits(joints, f"{where}: '{keys[feature][0]}'")
                        columns[feature] = so101.to_follower(joints).numpy()
                length = len(columns[ACTION_FEATURE])
                for t in range(length):
                    dataset.add_frame({**{f: c[t] for f, c in columns.items()}, "task": sidecar.task})
                dataset.save_episode()
                frames += length
                if progress is not None:
                    progress(frames)
        except BaseException:
            dataset.finalize()
            shutil.rmtree(output, ignore_errors=True)  # no half-written dataset left behind
            raise
        dataset.finalize()
    sidecar.source["frames"] = frames
    sidecar.write(output)
    return sidecar


def video_backend() -> str:
    """LeRobot's video decoder that loads here: ``torchcodec`` where FFmpeg's shared libraries (4 to 8) are
    installed, else ``pyav`` (LeRobot, left to choose, logs torchcodec's loading tracebacks each time it does).
    ``lerobot-train`` takes it as ``--dataset.video_backend``."""
    try:
        importlib.import_module("torchcodec")
        return "torchcodec"
    except (ImportError, OSError, RuntimeError):
        return "pyav"


def quiet_video_libraries() -> None:
    """Errors only from the video libraries: SVT-AV1's banner and settings (``Svt[info]``, about 40 lines per
    episode), FFmpeg's info lines (``[mp4 @ ...]``) and Hugging Face ``datasets``' progress bars per episode."""
    import av
    import datasets

    os.environ["SVT_LOG"] = "1"  # read by SVT-AV1 whenever an encoder starts: 1 = errors only
    av.logging.set_libav_level(av.logging.ERROR)
    datasets.disable_progress_bars()


def _plan(reader: DatasetReader, cfg: LeRobotExportCfg) -> tuple[ExportSidecar, dict[str, tuple[str, ...]]]:
    """The sidecar and the HDF5 keys of each LeRobot feature (concatenated), from the first demo and
    ``env_args``."""
    first = reader.demo_names[0]
    shapes = reader.dataset_shapes(first)
    args = reader.env_args
    if cfg.robot not in ("", so101.ROBOT):
        raise ValueError(f"robot must be '' or '{so101.ROBOT}', got {cfg.robot!r}.")
    keys = {ACTION_FEATURE: ("actions",), STATE_FEATURE: ("obs",)}
    if cfg.robot:
        keys = {STATE_FEATURE: (f"obs/{so101.STATE_TERM}",), ACTION_FEATURE: (so101.TARGETS_KEY,)}
        found = {key: shapes.get(key) for (key,) in keys.values()}
        if any(shape is None or len(shape) != 2 or shape[1] != len(so101.JOINTS) for shape in found.values()):
            raise DatasetError(f"'{reader.path}': --robot {cfg.robot} exports the SO-101's six joint positions (the"
                               f" policy term '{so101.STATE_TERM}') and joint targets ('{so101.TARGETS_KEY}'); this"
                               f" file has {found}: record an SO-101 task with scripts/record.py.")
        state = action = VectorLayout(dict.fromkeys(so101.NAMES, 1))
    else:
        for key in ("actions", "obs"):
            if key not in shapes or len(shapes[key]) != 2:
                raise DatasetError(f"'{reader.path}', demo '{first}' has no per-sample '{key}' vector (N, D): record"
                                   " it with scripts/record.py.")
        state = VectorLayout(_terms(args.get("policy_terms"), STATE_GROUP, shapes["obs"][1]))
        action = VectorLayout(_terms(args.get("action_terms"), "action", shapes["actions"][1]))
    environment_state = None
    if cfg.environment_state:
        terms = {term: shapes.get(f"obs/{term}") for term in cfg.environment_state}
        missing = [term for term, shape in terms.items() if shape is None or len(shape) != 2]
        if missing:
            recorded = sorted(k.split("/", 1)[1] for k, v in shapes.items() if k.startswith("obs/") and len(v) == 2)
            raise DatasetError(f"'{reader.path}': no policy term {missing} to export as environment state; the"
                               f" recorded terms are {recorded or 'none (the policy group is one vector)'}.")
        environment_state = VectorLayout({term: shape[1] for term, shape in terms.items()})
        keys[ENV_STATE_FEATURE] = tuple(f"obs/{term}" for term in cfg.environment_state)
    cameras = sorted(k.split("/", 1)[1] for k in shapes if k.startswith(IMAGE_GROUP + "/"))
    if cfg.cameras is not None:
        unknown = sorted(set(cfg.cameras) - set(cameras))
        if unknown:
            raise DatasetError(f"'{reader.path}' has no camera {unknown}; its recorded cameras are"
                               f" {cameras or 'none'}.")
        cameras = [cam for cam in cameras if cam in cfg.cameras]
    keys.update({IMAGE_PREFIX + cam: (f"{IMAGE_GROUP}/{cam}",) for cam in cameras})
    extras = {}
    for key, shape in shapes.items():
        if cfg.robot:  # a real robot's recording has no other features: an export LeRobot can merge with one
            break
        if key in ("actions", "obs") or key.split("/")[0] in (IMAGE_GROUP, *NOT_EXPORTED) or len(shape) > 2:
            continue
        feature = key.replace("/", ".")
        extras[feature] = VectorLayout({key: shape[1] if len(shape) == 2 else 1})
        keys[feature] = (key,)
    seed = reader.demo_attrs(first).get("seed")
    source = {"file": reader.path, "env_name": reader.env_name, "schedule": args.get("schedule"),
              "chunk_length": args.get("chunk_length"), "seed": None if seed is None else int(seed),
              "num_envs": reader.recorded_num_envs, "step_dt": args.get("step_dt"), "demos": len(reader.demo_names)}
    sidecar = ExportSidecar(state=state, action=action, cameras=cameras, extras=extras,
                            task=cfg.task or reader.env_name or "task", source=source, robot=cfg.robot,
                            environment_state=environment_state)
    return sidecar, keys


def _terms(recorded: dict | None, fallback: str, width: int) -> dict[str, int]:
    """The recorded term widths if they add up to ``width``, else one term ``fallback`` of that width."""
    if (isinstance(recorded, dict) and all(type(w) is int and w > 0 for w in recorded.values())
            and sum(recorded.values()) == width):
        return dict(recorded)
    return {fallback: width}


def _features(reader: DatasetReader, sidecar: ExportSidecar, keys: dict[str, str], use_videos: bool) -> dict:
    """LeRobot's feature specification of the export."""
    shapes = reader.dataset_shapes(reader.demo_names[0])
    vectors = {ACTION_FEATURE: sidecar.action, STATE_FEATURE: sidecar.state, **sidecar.extras}
    if sidecar.environment_state is not None:
        vectors[ENV_STATE_FEATURE] = sidecar.environment_state
    features = {name: {"dtype": "float32", "shape": (layout.padded_to,), "names": layout.names()}
                for name, layout in vectors.items()}
    for cam in sidecar.cameras:
        shape = shapes[keys[IMAGE_PREFIX + cam][0]][1:]
        if len(shape) != 3 or shape[2] != 3:
            raise DatasetError(f"'{reader.path}': camera '{cam}' frames have shape {shape}, not (H, W, 3).")
        features[IMAGE_PREFIX + cam] = {"dtype": "video" if use_videos else "image", "shape": shape,
                                        "names": ["height", "width", "channels"]}
    return features


def _column(arrays: list, feature: dict) -> np.ndarray:
    """One demo's samples of a feature as LeRobot takes them: uint8 frames, float32 vectors (the arrays side by
    side, then their pad of zeros) written into one new array."""
    if feature["dtype"] in ("image", "video"):
        return arrays[0].numpy().astype(np.uint8, copy=False)
    column = np.zeros((arrays[0].shape[0], feature["shape"][0]), np.float32)
    start = 0
    for a in arrays:
        values = a.numpy().reshape(a.shape[0], -1)
        column[:, start: start + values.shape[1]] = values
        start += values.shape[1]
    return column


def _task_fps(task: str) -> float:
    """Control rate of ``task`` from its cfg (files recorded before ``step_dt`` was written)."""
    from ..tasks.env_factory import make_env_cfg

    try:
        cfg = make_env_cfg(task, 1)
    except ValueError as err:
        raise DatasetError(f"The dataset does not say its control rate and its task is unknown: {err}") from err
    return 1.0 / (cfg.sim.dt * cfg.decimation)
