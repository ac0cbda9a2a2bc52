"""Recorder term that writes a task's camera images into the dataset, as they were observed (uint8)."""

from __future__ import annotations

from isaaclab.managers.recorder_manager import RecorderTerm

IMAGE_GROUP = "images"
"""Observation group holding the camera images of the camera tasks, one uint8 term per camera."""


class PreStepImageObservationsRecorder(RecorderTerm):
    """Records the ``images`` observation group each step acts on, under ``images/<camera>`` (``obs`` holds the
    flat policy observations).

    Images keep their dtype (uint8 RGB, Shape: (num_envs, H, W, 3) per camera), so the HDF5 export stores one
    byte per channel and compresses them (``EpisodeWriterCfg.uint8_compression``: gzip level 1). Tasks without the group record nothing.
    """

    def record_pre_step(self) -> tuple[str | None, dict | None]:
        images = self._env.obs_buf.get(IMAGE_GROUP)
        if images is None:
            return None, None
        return IMAGE_GROUP, images
