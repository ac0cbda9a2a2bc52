"""Replay that also checks the re-rendered camera images against the recorded ones."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import torch

from ..recording.image_recorders import IMAGE_GROUP
from .reader import DatasetError, DatasetReader, Demo
from .replay import DatasetReplayer, ReplayResult

if TYPE_CHECKING:
    from ..envs import SuspendableManagerBasedRLEnv


class ImageCheckingReplayer(DatasetReplayer):
    """A :class:`DatasetReplayer` that compares the images each replay step renders with the recorded ones.

    Images are recorded before each step (the frame the action was chosen from), so the observation returned by
    replay step ``t`` is compared with recorded sample ``t + 1``; the first frame of a demo (rendered before its
    recorded initial state was written) and the frames before a re-applied interval event are not compared.
    :attr:`ReplayResult.max_image_error` gets the largest absolute pixel difference over the cameras.

    Raises:
        DatasetError: If the env has no ``images`` observation group, or a demo lacks the images of a camera.
    """

    def __init__(
        self,
        env: SuspendableManagerBasedRLEnv,
        reader: DatasetReader,
        demo_names: Sequence[str] | None = None,
        demos: Mapping[str, Demo] | None = None,
    ):
        self.cameras: list[str] = list(env.observation_manager.active_terms.get(IMAGE_GROUP, []))
        """Camera terms of the env's ``images`` group."""
        if not self.cameras:
            raise DatasetError(f"The task has no '{IMAGE_GROUP}' observation group: there are no images to check.")
        super().__init__(env, reader, demo_names, demos)
        n, max_len = self._actions.shape[:2]
        shapes = self.env.observation_manager.group_obs_term_dim[IMAGE_GROUP]
        self._images = {
            c: torch.zeros((n, max_len, *shape), dtype=torch.uint8, device=env.device)
            for c, shape in zip(self.cameras, shapes)
        }
        """Recorded images of each env's demo, padded, by camera. Shape of each: (num_envs, max_len, H, W, 3)."""
        self._length = torch.zeros(n, dtype=torch.long, device=env.device)
        """Samples of each env's demo. Shape: (num_envs,)."""
        self._image_error = torch.zeros(n, dtype=torch.int16, device=env.device)
        """Largest pixel difference of each env's demo so far. Shape: (num_envs,)."""

    def _start(self, env_ids: list[int], step: int) -> None:
        super()._start(env_ids, step)
        for i in env_ids:
            name = self._slot[i]
            self._image_error[i] = 0
            self._length[i] = 0 if name is None else self.demos[name].num_samples
            if name is None:
                continue
            keys = tuple(f"{IMAGE_GROUP}/{c}" for c in self.cameras)
            recorded = self.reader.load_arrays(name, keys + ("actions",))
            for c, key in zip(self.cameras, keys):
                if recorded[key].shape[1:] != self._images[c].shape[2:]:
                    raise DatasetError(
                        f"'{self.reader.path}', demo '{name}': '{key}' has frames of {tuple(recorded[key].shape[1:])},"
                        f" the env renders {tuple(self._images[c].shape[2:])}."
                    )
                self._images[c][i, : len(recorded[key])] = recorded[key].to(self.env.device)

    def _after_step(self, obs: dict, step: int) -> None:
        rows = torch.arange(self.env.num_envs, device=self.env.device)
        compare = self._active & (self._cursor < self._length)
        for i, _ in self._events.get(step, []):
            compare[i] = False  # the recorded frame shows the state after the event, written only now
        sample = self._cursor.clamp(max=self._actions.shape[1] - 1)
        for c in self.cameras:
            diff = (obs[IMAGE_GROUP][c].to(torch.int16) - self._images[c][rows, sample].to(torch.int16)).abs()
            diff = torch.where(compare, diff.flatten(1).amax(dim=1), 0).to(torch.int16)
            torch.maximum(self._image_error, diff, out=self._image_error)

    def _result(self, env_id: int, errors: torch.Tensor) -> ReplayResult:
        result = super()._result(env_id, errors)
        result.max_image_error = int(self._image_error[env_id])
        return result
