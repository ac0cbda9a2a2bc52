"""Camera frames of a few episodes of an evaluation, as strips for its report: what a successful and a failed
episode looked like."""

from __future__ import annotations

import base64
import io

import numpy as np
import torch


class EpisodeFrames:
    """Keeps, every ``stride`` steps, the frame of camera ``camera`` (``obs["images"][camera]``, uint8 RGB) of the
    first ``num_envs`` envs on the host; :meth:`strips` cuts the frames of ended episodes into strips.

    Only every ``stride``-th step copies (``num_envs`` frames) to the host: the step counter is the caller's.

    Args:
        camera: The camera term of the ``images`` observation group.
        num_envs: Envs whose frames are kept (the first ones).
        stride: Steps between two kept frames.
    """

    def __init__(self, camera: str, num_envs: int, stride: int):
        self.camera, self.num_envs, self.stride = camera, num_envs, stride
        self._steps: list[int] = []
        self._frames: list[torch.Tensor] = []  # (num_envs, H, W, 3) uint8 on the CPU, per kept step

    def record(self, step: int, obs: dict) -> None:
        """Keep the frames of the observation the policy acted on at ``step`` when it is a multiple of the stride."""
        if step % self.stride == 0:
            self._steps.append(step)
            self._frames.append(obs["images"][self.camera][: self.num_envs].to("cpu", copy=True))

    def strips(self, episodes: list[dict], per_outcome: int = 2, frames: int = 6) -> list[dict]:
        """Strips of up to ``per_outcome`` successful and as many failed episodes of ``episodes`` (the ledger's
        records, with ``end_step``) of the kept envs: ``{env_id, episode, success, length, steps, png}`` with up to
        ``frames`` frames side by side, evenly spaced over the episode, as a base64 PNG."""
        from PIL import Image

        chosen = []
        for outcome in (True, False):
            kept = [e for e in episodes if e["env_id"] < self.num_envs and bool(e["success"]) == outcome]
            chosen += kept[:per_outcome]
        steps = np.asarray(self._steps)
        strips = []
        for episode in chosen:
            start = episode["end_step"] - episode["length"] - episode["suspended_steps"] + 1
            inside = np.flatnonzero((steps >= start) & (steps <= episode["end_step"]))
            if inside.size == 0:
                continue
            inside = inside[np.unique(np.linspace(0, inside.size - 1, min(frames, inside.size)).round().astype(int))]
            row = torch.cat([self._frames[i][episode["env_id"]] for i in inside], dim=1).numpy()
            buffer = io.BytesIO()
            Image.fromarray(row).save(buffer, format="PNG")
            strips.append({key: episode[key] for key in ("env_id", "episode", "success", "length")}
                          | {"steps": [int(steps[i]) - start for i in inside], "camera": self.camera,
                             "png": base64.b64encode(buffer.getvalue()).decode()})
        return strips
