"""Behaviour-cloning samples from an HDF5 dataset: an observation and the next H actions of its episode."""

from __future__ import annotations

import math

import torch

from ..datasets import DatasetError, DatasetReader


class ChunkDataset:
    """(observation, next-H-actions) windows of the demos of an Isaac Lab HDF5 dataset (as written by
    ``scripts/record.py``), held as tensors.

    Sample ``t`` of a demo of length T pairs ``obs[t]`` with ``actions[t : t + H]``. A window never crosses
    the end of its episode: past the last action it is padded with that last action and masked out, as ACT
    pads its chunks (``is_pad``), so a loss over the valid steps learns nothing from another episode.

    Args:
        path: The dataset file (``data/demo_N`` with ``obs`` of shape (T, obs_dim) and ``actions`` of shape
            (T, action_dim): the ``policy`` observation group, concatenated, of each step).
        chunk_length: Actions per window H.
        demos: Demos to use (default: all, in recording order).

    Raises:
        FileNotFoundError: If the file does not exist.
        DatasetError: If it is not a dataset, holds no demo, or a demo lacks ``obs`` or ``actions`` or has
            them with other dims than the others.
    """

    def __init__(self, path: str, chunk_length: int, demos: list[str] | None = None):
        if chunk_length < 1:
            raise ValueError(f"chunk_length must be positive, got {chunk_length}.")
        self.chunk_length = chunk_length
        """Actions per window H."""
        with DatasetReader(path) as reader:
            self.path = reader.path
            """Absolute path of the file."""
            self.task = reader.env_name
            """Task id the dataset was recorded on ('' if the file does not say)."""
            self.demo_names = list(demos if demos is not None else reader.demo_names)
            """Demos used, in order."""
            if not self.demo_names:
                raise DatasetError(f"'{self.path}' holds no demo to learn from.")
            arrays = [reader.load_arrays(name, ("obs", "actions")) for name in self.demo_names]
        first = arrays[0]
        for name, demo in zip(self.demo_names, arrays):
            if demo["obs"].ndim != 2 or demo["actions"].ndim != 2 or (
                demo["obs"].shape[1:], demo["actions"].shape[1:]) != (first["obs"].shape[1:], first["actions"].shape[1:]):
                raise DatasetError(
                    f"'{self.path}', demo '{name}': 'obs' {tuple(demo['obs'].shape)} and 'actions'"
                    f" {tuple(demo['actions'].shape)} must be (T, obs_dim) and (T, action_dim) with the dims of"
                    f" '{self.demo_names[0]}' ({tuple(first['obs'].shape)}, {tuple(first['actions'].shape)})."
                )
        lengths = torch.tensor([demo["actions"].shape[0] for demo in arrays])
        self.episode_lengths = lengths
        """Samples of each demo. Shape: (num_demos,)."""
        self.obs = torch.cat([demo["obs"] for demo in arrays]).float()
        """Observation of every sample. Shape: (num_samples, obs_dim)."""
        self.actions = torch.cat([demo["actions"] for demo in arrays]).float()
        """Action of every sample. Shape: (num_samples, action_dim)."""
        self.episode_index = torch.repeat_interleave(torch.arange(len(arrays)), lengths)
        """Demo of every sample. Shape: (num_samples,)."""
        # flat index of each window's actions, clamped to its episode's last action
        ends = torch.cumsum(lengths, 0)[self.episode_index] - 1
        offsets = torch.arange(chunk_length)
        window = torch.arange(self.num_samples).unsqueeze(1) + offsets
        self.valid = window <= ends.unsqueeze(1)
        """Whether each window step is inside its episode. Shape: (num_samples, H)."""
        self._window = torch.minimum(window, ends.unsqueeze(1))

    @property
    def num_samples(self) -> int:
        """Samples (windows) over all demos."""
        return self.obs.shape[0]

    @property
    def obs_dim(self) -> int:
        """Observation dim."""
        return self.obs.shape[1]

    @property
    def action_dim(self) -> int:
        """Action dim."""
        return self.actions.shape[1]

    def junk(self) -> tuple[int, int]:
        """Junk samples and junk episodes: the leading exactly-zero actions of each demo (an env reset mid-chunk
        under ``hold`` records the zero action it holds until the next tick)."""
        zero = (self.actions == 0).all(dim=1)
        leading = torch.stack([z.long().cumprod(0).sum() for z in zero.split(self.episode_lengths.tolist())])
        return int(leading.sum()), int((leading > 0).sum())

    def inputs(self, index: torch.Tensor, device: str | torch.device) -> torch.Tensor:
        """The network inputs of samples ``index``: their observations. Shape: (B, obs_dim)."""
        return self.obs[index].to(device)

    def targets(self, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The action windows of samples ``index`` and their validity.

        Returns:
            Actions of shape (B, H, action_dim), padded with the episode's last action, and the mask of the
            valid ones, shape (B, H).
        """
        return self.actions[self._window[index]], self.valid[index]

    def split(self, val_fraction: float, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Sample indices of a train / validation split by episode (no episode in both).

        ``ceil(val_fraction * num_demos)`` demos, drawn with ``seed``, go to validation, at least one and at
        most all but one when ``val_fraction > 0`` and there are two demos or more.

        Returns:
            Train and validation sample indices, 1-D long tensors.
        """
        num_demos = len(self.demo_names)
        num_val = 0
        if val_fraction > 0 and num_demos > 1:
            num_val = min(max(math.ceil(val_fraction * num_demos), 1), num_demos - 1)
        order = torch.randperm(num_demos, generator=torch.Generator().manual_seed(seed))
        is_val = torch.zeros(num_demos, dtype=torch.bool)
        is_val[order[:num_val]] = True
        sample_is_val = is_val[self.episode_index]
        return (~sample_is_val).nonzero().flatten(), sample_is_val.nonzero().flatten()

    def __repr__(self) -> str:
        return (f"ChunkDataset('{self.path}', {len(self.demo_names)} demos, {self.num_samples} samples,"
                f" obs_dim {self.obs_dim}, action_dim {self.action_dim}, H {self.chunk_length})")
