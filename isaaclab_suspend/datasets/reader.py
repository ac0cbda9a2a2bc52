"""Open an Isaac Lab HDF5 dataset and load its demos, with errors that name the file and the demo.

A demo is read only when it holds its data itself (every reader of datasets, merge, replay, view and training,
comes through here): an external link, a soft link, a group or dataset linked twice (a cycle), external storage
or a virtual dataset (data in other files, or zeros where a source is missing) is refused, as are datasets whose
declared size the file does not store (chunks never written, more than compression can expand).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

import h5py
import torch

from isaaclab.utils.datasets import EpisodeData, HDF5DatasetFileHandler
from isaaclab.utils.datasets.hdf5_dataset_file_handler import convert_pose_quat_wxyz_to_xyzw

from ..tensor_tree import flatten_tree

StatePath = tuple[str, ...]
"""Path of one state tensor in a scene state, e.g. ``("articulation", "robot", "joint_position")``."""


class DatasetError(ValueError):
    """A dataset that cannot be read or replayed; the message names the file and, where it applies, the demo."""


MAX_EXPANSION = 1100
"""Most bytes a dataset may declare per byte it stores: deflate expands at most ~1032-fold, so more is a file
declaring sizes it does not hold (a few MB claiming GiB)."""

REPLAY_KEYS = ("actions", "initial_state", "states", "pre_step_states", "env_origin")
"""What a replay reads from a demo (nothing else of it is read); each must hold finite numbers."""


def memory_budget_bytes() -> int:
    """Bytes a reader may allocate for one demo: half the memory the machine has left."""
    return available_memory_bytes() // 2


def available_memory_bytes() -> int:
    """Memory the machine can still give without swapping (``MemAvailable``; total physical memory where the
    kernel does not say)."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


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
            """The ``env_args`` attribute of the ``data`` group (task id, sim args, ...), checked."""
        except (OSError, KeyError, ValueError, TypeError, RecursionError) as err:
            self._handler.close()
            raise DatasetError(
                f"'{self.path}' is not a readable Isaac Lab dataset (an HDF5 file with a 'data' group and its"
                f" 'env_args' attribute): {err}"
            ) from err
        try:
            self._check_env_args()
        except DatasetError:
            self._handler.close()
            raise
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
    def cfg_overrides(self) -> list[str]:
        """Hydra overrides the task's cfg was recorded with (``env.KEY=VALUE``, ``presets=NAME``; [] if none)."""
        return list(self.env_args.get("cfg_overrides") or [])

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
                holds anything but numbers, does not fit in memory, has shapes or lengths that disagree, or a
                non-finite value (NaN, inf) in what a replay reads.
        """
        where = f"'{self.path}', demo '{name}'"
        group = self._demo_group(name)
        for key in ("actions", "initial_state", "states"):
            if key not in group:
                raise DatasetError(f"{where} has no '{key}': it cannot be replayed (found {sorted(group)}).")
        episode = self.load_episode(name, device, REPLAY_KEYS)
        data = episode.data
        for key in ("actions", "env_origin"):
            if isinstance(data.get(key), dict):
                raise DatasetError(f"{where}: '{key}' is a group of {sorted(data[key])}, not one tensor.")
        for key in ("initial_state", "states", "pre_step_states"):
            if key in data and not isinstance(data[key], dict):
                raise DatasetError(f"{where}: '{key}' is one tensor, not a group of state tensors.")
        actions = data["actions"]
        num_samples = group.attrs.get("num_samples")
        if actions.ndim != 2 or 0 in actions.shape or (num_samples is not None and num_samples != actions.shape[0]):
            raise DatasetError(
                f"{where}: 'actions' must have shape (num_samples > 0, action_dim > 0), got {tuple(actions.shape)}"
                f" with num_samples = {num_samples}."
            )
        initial_state = dict(flatten_tree(data["initial_state"]))
        states = dict(flatten_tree(data["states"]))
        pre_step_states = dict(flatten_tree(data["pre_step_states"])) if "pre_step_states" in data else None
        for key, tree, length in (("initial_state", initial_state, 1), ("states", states, actions.shape[0]),
                                  ("pre_step_states", pre_step_states or {}, actions.shape[0])):
            for path, value in tree.items():
                if value.ndim < 2 or value.shape[0] != length:
                    raise DatasetError(
                        f"{where}: '{key}/{'/'.join(path)}' has shape {tuple(value.shape)}: it needs {length}"
                        f" {'row' if length == 1 else 'samples, one per action'} of values."
                    )
        origin = data.get("env_origin")
        if origin is not None and tuple(origin.shape) != (1, 3):
            raise DatasetError(f"{where}: 'env_origin' must have shape (1, 3), got {tuple(origin.shape)}.")
        return Demo(
            name=name,
            actions=actions.float(),
            initial_state=data["initial_state"],
            states=states,
            pre_step_states=pre_step_states,
            env_origin=tuple(origin[0].tolist()) if origin is not None else None,
            success=None if episode.success is None else bool(episode.success),
        )

    def check_demo(self, name: str) -> dict[str, h5py.Dataset]:
        """The datasets of one demo by path, after checking that it holds its data itself, numbers only, in sizes
        that it stores and that fit in memory (nothing is read yet).

        Raises:
            DatasetError: If the demo does not exist, reaches outside the file (external link, external storage,
                virtual dataset), links an object twice (a cycle), holds anything but numbers, declares sizes that
                it does not store, or would not fit in half the memory the machine has left.
        """
        where = f"'{self.path}', demo '{name}'"
        datasets = _stored_datasets(where, self._demo_group(name))
        _check_fits(where, datasets.items())
        return datasets

    def load_episode(self, name: str, device: str | torch.device = "cpu",
                     keys: tuple[str, ...] | None = None) -> EpisodeData:
        """One demo as Isaac Lab's :class:`EpisodeData` (what ``scripts/merge_shards.py`` copies), after
        :meth:`check_demo`: its datasets under the members ``keys`` (None: all; the others are never read), each
        read once into its tensor (what the memory budget counts) and checked by :func:`check_values`; legacy
        ``root_pose`` quaternions converted as Isaac Lab's loader does.

        Raises:
            DatasetError: See :meth:`check_demo`; or if the demo cannot be read or holds a NaN or inf.
        """
        where = f"'{self.path}', demo '{name}'"
        group = self._demo_group(name)
        datasets = {path: dataset for path, dataset in _stored_datasets(where, group).items()
                    if keys is None or path.split("/")[0] in keys}
        _check_fits(where, datasets.items())
        legacy = self._handler.is_legacy_quaternion_format()
        episode = EpisodeData()
        for path, dataset in datasets.items():
            value = _read(where, path, dataset, device)
            if legacy and path.rsplit("/", 1)[-1] == "root_pose" and value.shape[-1:] == (7,):
                value = torch.as_tensor(convert_pose_quat_wxyz_to_xyzw(value.cpu().numpy()), device=device)
            check_values(where, path, value)
            node = episode.data
            *parents, leaf = path.split("/")
            for part in parents:
                node = node.setdefault(part, {})
            node[leaf] = value
        attrs = group.attrs
        episode.seed = attrs["seed"] if "seed" in attrs else None
        episode.success = attrs["success"] if "success" in attrs else None
        episode.env_id = self.env_name
        return episode

    def load_arrays(self, name: str, keys: tuple[str, ...], device: str | torch.device = "cpu",
                    copies: float | Mapping[str, float] = 1.0) -> dict[str, torch.Tensor]:
        """Load only the datasets ``keys`` of one demo (e.g. ``("obs", "actions")`` to learn from it), without
        its states; ``copies``: the bytes allocated per byte read, the read included (e.g. an export's
        conversions; by key, or one for all), counted in the memory budget.

        Returns:
            The tensors by key, each of shape (num_samples, ...).

        Raises:
            DatasetError: If the demo does not exist, cannot be read, lacks a key, a key is a group rather than
                one tensor or holds anything but numbers, a tensor has no samples or a non-finite value, the
                tensors do not fit in memory, or the lengths disagree.
        """
        where = f"'{self.path}', demo '{name}'"
        group = self._demo_group(name)
        datasets = _stored_datasets(where, group)
        arrays = {}
        for key in keys:
            if key not in group:
                raise DatasetError(f"{where} has no '{key}' (found {sorted(group)}).")
            if key not in datasets:
                raise DatasetError(f"{where}: '{key}' is a group of {sorted(group[key])}, not one tensor.")
        _check_fits(where, [(key, datasets[key]) for key in keys], copies)
        for key in keys:
            arrays[key] = _read(where, key, datasets[key], device)
            check_values(where, key, arrays[key])
        lengths = {key: (value.shape[0] if value.ndim else 0) for key, value in arrays.items()}
        if min(lengths.values(), default=1) == 0 or len(set(lengths.values())) > 1:
            raise DatasetError(f"{where}: every tensor needs the same number of samples > 0, got {lengths}.")
        return arrays

    def dataset_shapes(self, name: str) -> dict[str, tuple[int, ...]]:
        """Shape of every dataset of one demo, by its path in the demo group (e.g. ``images/scene_camera``).

        Raises:
            DatasetError: If the demo does not exist or is not a group.
        """
        shapes = {}
        self._demo_group(name).visititems(
            lambda path, obj: shapes.__setitem__(path, obj.shape) if isinstance(obj, h5py.Dataset) else None)
        return shapes

    def demo_attrs(self, name: str) -> dict:
        """The attributes of one demo (``num_samples``, ``seed``, ``success``).

        Raises:
            DatasetError: If the demo does not exist or is not a group.
        """
        return dict(self._demo_group(name).attrs)

    def close(self) -> None:
        """Close the file."""
        self._handler.close()

    """
    Internals.
    """

    def _check_env_args(self) -> None:
        """Raise if ``env_args`` is not an object with the documented fields and types."""
        args, where = self.env_args, f"'{self.path}': 'env_args'"
        if not isinstance(args, dict):
            raise DatasetError(f"{where} must be a JSON object, got {type(args).__name__}.")
        if not isinstance(args.get("env_name") or "", str):
            raise DatasetError(f"{where}: 'env_name' must be a task id string, got {args['env_name']!r:.80}.")
        sim_args = args.get("sim_args", {})
        if not isinstance(sim_args, dict):
            raise DatasetError(f"{where}: 'sim_args' must be an object, got {sim_args!r:.80}.")
        num_envs = sim_args.get("num_envs")
        if num_envs is not None and (type(num_envs) is not int or num_envs < 1):
            raise DatasetError(f"{where}: 'sim_args.num_envs' must be a positive integer, got {num_envs!r:.80}.")
        for key, what in (("interval_events", "names"), ("cfg_overrides", "KEY=VALUE strings")):
            items = args.get(key)
            if items is not None and not (isinstance(items, list) and all(isinstance(e, str) for e in items)):
                raise DatasetError(f"{where}: '{key}' must be a list of {what}, got {items!r:.80}.")

    def _demo_group(self, name: str) -> h5py.Group:
        where = f"'{self.path}', demo '{name}'"
        if name not in self.demo_names:
            raise DatasetError(f"{where} does not exist; the file holds {len(self.demo_names)} demos.")
        link = self._data.get(name, getlink=True)
        if not isinstance(link, h5py.HardLink):
            raise DatasetError(f"{where} is {_LINK_KINDS.get(type(link), 'a link')}: a demo must be stored in the"
                               " file itself.")
        group = self._data[name]
        if not isinstance(group, h5py.Group):
            raise DatasetError(f"{where} is one tensor, not a group of an episode's tensors.")
        return group


_LINK_KINDS = {h5py.ExternalLink: "an external link (to another file)", h5py.SoftLink: "a soft link"}


def _stored_datasets(where: str, group: h5py.Group) -> dict[str, h5py.Dataset]:
    """The datasets under ``group`` by path, after refusing links other than plain hard links, objects linked
    twice (cycles), external storage, virtual datasets, non-numbers, and sizes the file does not store."""
    datasets, links = {}, []
    group.visititems_links(lambda path, link: links.append((path, link)))
    for path, link in links:
        if not isinstance(link, h5py.HardLink):
            raise DatasetError(f"{where}: '{path}' is {_LINK_KINDS.get(type(link), 'a link')}: a demo must hold its"
                               " data itself.")
        item = group[path]
        if h5py.h5o.get_info(item.id).rc > 1:
            raise DatasetError(f"{where}: '{path}' is linked from more than one place (a link cycle or a shared"
                               " object): the file was not written by a recorder.")
        if isinstance(item, h5py.Dataset):
            _check_stored(where, path, item)
            datasets[path] = item
    return datasets


def _check_stored(where: str, path: str, dataset: h5py.Dataset) -> None:
    """Raise if ``dataset`` keeps its data outside the file, holds anything but numbers, or declares more than it
    stores."""
    if dataset.is_virtual:
        raise DatasetError(f"{where}: '{path}' is a virtual dataset (its data lives in other files): not read.")
    if dataset.id.get_create_plist().get_external_count():
        raise DatasetError(f"{where}: '{path}' keeps its data in external files {dataset.external!r:.120}: not read.")
    if dataset.dtype.kind not in "biuf":
        raise DatasetError(f"{where}: '{path}' holds {dataset.dtype} values, not numbers.")
    declared, stored = dataset.size * dataset.dtype.itemsize, dataset.id.get_storage_size()
    if dataset.chunks is not None:
        needed = math.prod(-(-n // c) for n, c in zip(dataset.shape, dataset.chunks))
        complete = dataset.id.get_num_chunks() == needed and declared <= MAX_EXPANSION * stored
    else:
        complete = stored >= declared
    if not complete:
        raise DatasetError(f"{where}: '{path}' declares {tuple(dataset.shape)} {dataset.dtype} values"
                           f" ({declared / 2**20:.1f} MiB) but the file stores {stored / 2**20:.3f} MiB of them: it"
                           " is corrupt or crafted.")


def _check_fits(where: str, datasets, copies: float | Mapping[str, float] = 1.0) -> None:
    """Raise if the ``(path, dataset)`` pairs, decoded (their declared sizes, whatever the compression) and
    allocated ``copies`` times (by path, or one for all), would not fit in :func:`memory_budget_bytes`."""
    datasets = [(path, dataset.size * dataset.dtype.itemsize) for path, dataset in datasets]
    times = copies if isinstance(copies, Mapping) else dict.fromkeys((path for path, _ in datasets), copies)
    declared = sum(size for _, size in datasets)
    total, budget = math.ceil(sum(size * times[path] for path, size in datasets)), memory_budget_bytes()
    if total > budget:
        said = f" ({declared / 2**20:.0f} MiB decoded, with the copies made of it)" if total != declared else ""
        raise DatasetError(
            f"{where} needs {total / 2**20:.0f} MiB of tensors{said}, over the {budget / 2**20:.0f} MiB this"
            " machine can give (half the memory available): the file is corrupt or too large to load here."
        )


def _read(where: str, key: str, dataset: h5py.Dataset, device: str | torch.device) -> torch.Tensor:
    """``dataset`` read into one array, shared by the tensor returned on the CPU (no second copy)."""
    try:
        return torch.as_tensor(dataset[()], device=device)
    except (OSError, ValueError, TypeError, RuntimeError) as err:
        raise DatasetError(f"{where}: '{key}' cannot be read: {err}") from err


def check_values(where: str, key: str, value: torch.Tensor, bound: float = math.inf) -> None:
    """Raise naming ``key`` and the first sample of ``value`` that holds a NaN, an inf or a value beyond
    ``[-bound, bound]``: the one check of a file's numbers (replay, merge, export and training read through it).

    Raises:
        DatasetError: Naming the file, demo, key, sample and value.
    """
    if value.numel() == 0 or (not value.is_floating_point() and bound == math.inf):
        return
    rows = value.reshape(value.shape[0] if value.ndim else 1, -1)
    bad = ~(torch.isfinite(rows) & (rows.abs() <= bound))
    if not bool(bad.any()):
        return
    sample = int(bad.any(dim=1).nonzero()[0])
    found = float(rows[sample][bad[sample]][0])
    if not math.isfinite(found):
        raise DatasetError(f"{where}: '{key}' holds a non-finite value ({'nan' if math.isnan(found) else 'inf'}) at"
                           f" sample {sample}: the file is corrupt.")
    raise DatasetError(f"{where}: '{key}' holds {found:g} at sample {sample}, beyond +-{bound:g}: the file is"
                       " corrupt or not in the units expected.")


def _demo_index(name: str) -> tuple[int, str]:
    match = re.search(r"(\d+)$", name)
    return (int(match.group(1)) if match else -1, name)
