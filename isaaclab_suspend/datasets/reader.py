"""Open an Isaac Lab HDF5 dataset and load its demos, with errors that name the file and the demo."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass

import torch

from isaaclab.utils.datasets import HDF5DatasetFileHandler

from ..managers.episode_buffers import flatten_tree

StatePath = tuple[str, ...]
"""Path of one state tensor in a scene state, e.g. ``("articulation", "robot", "joint_position")``."""


class DatasetError(ValueError):
    """A dataset that cannot be read or replayed; the message names the file and, where it applies, the demo."""


@dataclass
class Demo:
    """One recorded episode, as tensors on the replay device."""

    name: str
    """Group name in the file (``demo_N``)."""
    actions: torch.Tensor
    """Actions of each step. Shape: (num_samples, action_dim)."""
    initial_state: dict
    """Scene state the episode started from (the format of :meth:`InteractiveScene.get_state`, relative to the
    env origin), with a leading dim of 1."""
    states: dict[StatePath, torch.Tensor]
    """Scene state after each step, by path. Shape of each: (num_samples, ...)."""
    pre_step_states: dict[StatePath, torch.Tensor] | None
    """Scene state each step started from, by path (None if not recorded). Shape of each: (num_samples, ...)."""
    env_origin: tuple[float, float, float] | None
    """Origin of the env that recorded the episode (None if not recorded)."""
    success: bool | None
    """The ``success`` attribute (None if absent)."""

    @property
    def num_samples(self) -> int:
        """Number of steps."""
        return self.actions.shape[0]

    def events(self) -> list[tuple[int, list[StatePath]]]:
        """Steps whose starting state differs from the state the step before ended in, with the state tensors
        that differ: something other than the actions (an interval event) changed them in between. Empty
        without pre-step states."""
        if self.pre_step_states is None:
            return []
        initial = dict(flatten_tree(self.initial_state))
        changed = {}  # path -> bool per step
        for path, pre in self.pre_step_states.items():
            before = torch.cat((initial[path], self.states[path][:-1]))
            changed[path] = (pre != before).flatten(1).any(dim=1).tolist()
        return [
            (t, [path for path, flags in changed.items() if flags[t]])
            for t in range(self.num_samples)
            if any(flags[t] for flags in changed.values())
        ]


class DatasetReader:
    """Reads an Isaac Lab HDF5 dataset through Isaac Lab's :class:`HDF5DatasetFileHandler`.

    Args:
        path: The dataset file.

    Raises:
        FileNotFoundError: If the file does not exist.
        DatasetError: If it is not an HDF5 file with Isaac Lab's ``data`` group and ``env_args``.
    """

    def __init__(self, path: str):
        self.path = os.path.abspath(path)
        """Absolute path of the file."""
        if not os.path.isfile(self.path):
            raise FileNotFoundError(f"Dataset file '{self.path}' does not exist.")
        self._handler = HDF5DatasetFileHandler()
        try:
            self._handler.open(self.path)
            # the handler has no getter for env_args nor for a demo's attributes: read its data group
            self._data = self._handler._hdf5_data_group
            self.env_args: dict = json.loads(self._data.attrs["env_args"])
            """The ``env_args`` attribute of the ``data`` group (task id, sim args, ...)."""
        except (OSError, KeyError, ValueError) as err:
            self._handler.close()
            raise DatasetError(
                f"'{self.path}' is not a readable Isaac Lab dataset (an HDF5 file with a 'data' group and its"
                f" 'env_args' attribute): {err}"
            ) from err
        self.demo_names: list[str] = sorted(self._handler.get_episode_names(), key=_demo_index)
        """Names of the demos in the file, in recording order."""

    def __enter__(self) -> DatasetReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def env_name(self) -> str:
        """Task id the dataset was recorded on ('' if the file does not say)."""
        return self.env_args.get("env_name") or ""

    @property
    def recorded_num_envs(self) -> int | None:
        """Number of envs of the recording run (None if the file does not say)."""
        return self.env_args.get("sim_args", {}).get("num_envs")

    @property
    def interval_events(self) -> list[str] | None:
        """Interval events that ran while recording (None if the file does not say)."""
        return self.env_args.get("interval_events")

    def check_task(self, task: str) -> None:
        """Raise if the dataset was recorded on another task than ``task``.

        Raises:
            DatasetError: If the recorded task id differs.
        """
        if self.env_name and self.env_name != task:
            raise DatasetError(f"'{self.path}' was recorded on task '{self.env_name}', not on '{task}'.")

    def load(self, name: str, device: str | torch.device) -> Demo:
        """Load and check one demo.

        Raises:
            DatasetError: If the demo does not exist, cannot be read, lacks actions, initial state or states,
                or its lengths disagree.
        """
        where = f"'{self.path}', demo '{name}'"
        if name not in self.demo_names:
            raise DatasetError(f"{where} does not exist; the file holds {len(self.demo_names)} demos.")
        try:
            episode = self._handler.load_episode(name, device)
        except (OSError, KeyError, ValueError) as err:
            raise DatasetError(f"{where} cannot be read: {err}") from err
        data = episode.data
        for key in ("actions", "initial_state", "states"):
            if key not in data:
                raise DatasetError(f"{where} has no '{key}': it cannot be replayed (found {sorted(data)}).")
        actions = data["actions"]
        num_samples = self._data[name].attrs.get("num_samples")
        if actions.ndim != 2 or actions.shape[0] == 0 or (num_samples is not None and num_samples != actions.shape[0]):
            raise DatasetError(
                f"{where}: 'actions' must have shape (num_samples > 0, action_dim), got {tuple(actions.shape)} with"
                f" num_samples = {num_samples}."
            )
        states = dict(flatten_tree(data["states"]))
        pre_step_states = dict(flatten_tree(data["pre_step_states"])) if "pre_step_states" in data else None
        for key, tree in (("states", states), ("pre_step_states", pre_step_states or {})):
            for path, value in tree.items():
                if value.shape[0] != actions.shape[0]:
                    raise DatasetError(
                        f"{where}: '{key}/{'/'.join(path)}' has {value.shape[0]} samples but there are"
                        f" {actions.shape[0]} actions."
                    )
        origin = data.get("env_origin")
        return Demo(
            name=name,
            actions=actions.float(),
            initial_state=data["initial_state"],
            states=states,
            pre_step_states=pre_step_states,
            env_origin=tuple(origin[0].tolist()) if origin is not None else None,
            success=None if episode.success is None else bool(episode.success),
        )

    def load_arrays(self, name: str, keys: tuple[str, ...], device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
        """Load only the datasets ``keys`` of one demo (e.g. ``("obs", "actions")`` to learn from it), without
        its states.

        Returns:
            The tensors by key, each of shape (num_samples, ...).

        Raises:
            DatasetError: If the demo does not exist, cannot be read, lacks a key, a key is a group rather than
                one tensor, a tensor has no samples, or the lengths disagree.
        """
        where = f"'{self.path}', demo '{name}'"
        if name not in self.demo_names:
            raise DatasetError(f"{where} does not exist; the file holds {len(self.demo_names)} demos.")
        group = self._data[name]
        arrays = {}
        for key in keys:
            if key not in group:
                raise DatasetError(f"{where} has no '{key}' (found {sorted(group)}).")
            if not hasattr(group[key], "shape"):
                raise DatasetError(f"{where}: '{key}' is a group of {sorted(group[key])}, not one tensor.")
            try:
                arrays[key] = torch.as_tensor(group[key][()], device=device)
            except (OSError, ValueError) as err:
                raise DatasetError(f"{where}: '{key}' cannot be read: {err}") from err
        lengths = {key: (value.shape[0] if value.ndim else 0) for key, value in arrays.items()}
        if min(lengths.values(), default=1) == 0 or len(set(lengths.values())) > 1:
            raise DatasetError(f"{where}: every tensor needs the same number of samples > 0, got {lengths}.")
        return arrays

    def close(self) -> None:
        """Close the file."""
        self._handler.close()


def _demo_index(name: str) -> tuple[int, str]:
    match = re.search(r"(\d+)$", name)
    return (int(match.group(1)) if match else -1, name)
