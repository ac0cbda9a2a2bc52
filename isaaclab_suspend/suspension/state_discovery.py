"""Find the per-env state of an Isaac Lab part by walking its tensors and Warp arrays."""

from __future__ import annotations

import types
import weakref
from collections.abc import Callable
from dataclasses import dataclass

import torch
import warp as wp

from isaaclab.actuators import ActuatorBase
from isaaclab.assets import AssetBase
from isaaclab.envs import ManagerBasedEnv
from isaaclab.managers import ManagerBase, ManagerTermBase
from isaaclab.scene import InteractiveScene
from isaaclab.sensors import SensorBase
from isaaclab.utils.buffers import CircularBuffer, DelayBuffer

_OTHER_PARTS = (ManagerBasedEnv, ManagerBase, ManagerTermBase, AssetBase, SensorBase, ActuatorBase, InteractiveScene)
"""Parts with their own freezer: a walk that reaches one through a reference does not enter it."""

_ENV_DIM = {
    ("ActuatorNetLSTM", "sea_hidden_state_per_env"): 1,
    ("ActuatorNetLSTM", "sea_cell_state_per_env"): 1,
    ("DriveNeuralLSTM.State", "hidden"): 1,
    ("DriveNeuralLSTM.State", "cell"): 1,
    ("DriveNeuralMLP.State", "pos_error_history"): 1,
    ("DriveNeuralMLP.State", "vel_history"): 1,
}
"""Layouts that need explicit handling: (class qualname, attribute) -> env dim. LSTM states are
(num_layers, envs x joints, hidden_dim), Newton's MLP histories (history_length, envs x joints); Isaac Lab's
flat twin of its LSTM per-env view shares the memory."""

_NOT_STATE = {
    ("RenderData", "camera_rays"),
    ("RenderData", "camera_transforms"),
    ("Camera", "_intrinsic_parameters"),
    ("Camera", "_intrinsic_parameters_pending"),
}
"""Tensors that look per-env but hold no state to freeze: (class qualname, attribute). Newton's Warp renderer's
camera rays (one set for all envs, (1, H, W, 2)) and camera transforms (rewritten from the camera poses before
every render, (1, num_envs)); a camera's intrinsic parameters (constant after set-up, (params, num_envs)) and
their scratch twin."""

_SCRATCH = ((SensorBase, frozenset({"_reset_mask", "_reset_mask_torch"})),)
"""Per-env buffers that every use rewrites first, so they carry nothing from one step to the next: (base class,
attribute names). Isaac Lab's sensors refill ``_reset_mask`` from the env ids of each reset call (the last call's
ids stay in it, whichever envs those were)."""

_RINGS = {"Delay.State": ("write_idx", ("buffer_pos", "buffer_vel", "buffer_act"))}
"""Ring buffers with slots along dim 0, envs (x joints) along dim 1 and one write index shared by all envs:
(class qualname) -> (write index attribute, ring attributes). Newton's actuator delay is one."""

_SKIP_MODULES = ("warp", "numpy", "mujoco_warp", "newton._src.sim", "newton._src.solvers", "newton._src.geometry",
                 "newton._src.sensors", "newton._src.utils")
"""Packages whose objects hold no per-env state of the part that references them (models, solvers, views)."""

_MAX_DEPTH = 6


@dataclass
class FoundTensor:
    """A per-env tensor found in a part."""

    name: str
    """Dotted path from the part, e.g. ``actuators.cart.positions_delay_buffer._buffer``."""
    getter: Callable[[], torch.Tensor | wp.array | None]
    """Returns the live tensor or Warp array (owners may rebind or allocate lazily)."""
    layout: str
    """``rows`` (env dim 0), ``packed`` (k consecutive rows per env), ``dim1`` or ``ring`` (env dim 1)."""
    dim: int = 0
    """Env dimension."""
    rows_per_env: int = 1
    """Consecutive rows per env along :attr:`dim` (more than 1 for per-joint layouts of all envs' joints)."""
    ring_write_index: Callable[[], torch.Tensor | wp.array] | None = None
    """For ``ring``: the shared write index of a :class:`~isaaclab.utils.DelayBuffer`."""
    shape: tuple = ()
    """Shape when found (empty for a buffer not allocated yet)."""


def _as_torch(obj) -> torch.Tensor:
    return wp.to_torch(obj) if isinstance(obj, wp.array) else obj


def _skip(value, root) -> bool:
    if value is root:
        return False
    if value is None or isinstance(value, (str, bytes, int, float, bool, complex, types.ModuleType, type)):
        return True
    if callable(value) and not hasattr(value, "__dict__"):
        return True
    if isinstance(value, (types.FunctionType, types.MethodType, weakref.ref, weakref.ProxyType, torch.nn.Module)):
        return True
    if isinstance(value, _OTHER_PARTS):
        return True
    cls = type(value)
    return cls.__name__.endswith("Cfg") or cls.__module__.startswith(_SKIP_MODULES)


def discover(root, prefix: str, num_envs: int, skip: tuple[str, ...] = ()) -> tuple[list[FoundTensor], list[str]]:
    """Walk ``root``'s attributes (dicts, lists and plain objects, not other parts) for per-env state.

    Returns:
        The per-env tensors found, and the names of tensors that look per-env (a dimension a multiple of
        ``num_envs`` other than the leading one) but whose layout is unknown and whose memory no found tensor
        covers: these are not frozen and must be named to the user. Attributes named in ``skip`` are not walked.
    """
    found: list[FoundTensor] = []
    unknown: list[tuple[str, torch.Tensor]] = []
    seen: set[int] = set()

    def visit(obj, get: Callable, path: str, depth: int) -> None:
        if id(obj) in seen or depth > _MAX_DEPTH:
            return
        seen.add(id(obj))
        if isinstance(obj, CircularBuffer):
            env_dim = 1 if obj._stack_dim_arg is None else 0
            buffer = lambda: get()._buffer  # noqa: E731  (allocated on the first append)
            found.append(FoundTensor(f"{path}._buffer", buffer, "dim1" if env_dim else "rows", env_dim))
        elif isinstance(obj, DelayBuffer):
            write_index = lambda: get()._write_index  # noqa: E731
            found.append(FoundTensor(f"{path}._buffer", lambda: get()._buffer, "ring", 1, ring_write_index=write_index))
        elif type(obj).__qualname__ in _RINGS:
            index_name, ring_names = _RINGS[type(obj).__qualname__]
            write_index = lambda: getattr(get(), index_name)  # noqa: E731
            for ring in ring_names:
                value = getattr(obj, ring, None)
                if value is not None:
                    per_env = _as_torch(value).shape[1] // num_envs
                    getter = lambda ring=ring: getattr(get(), ring)  # noqa: E731
                    found.append(FoundTensor(f"{path}.{ring}", getter, "ring", 1, per_env, write_index, tuple(value.shape)))
        if isinstance(obj, dict):
            children = [(str(k), k, v, _item) for k, v in obj.items()]
        elif isinstance(obj, (list, tuple)):
            children = [(str(i), i, v, _item) for i, v in enumerate(obj)]
        elif hasattr(obj, "__dict__"):
            children = [(k, k, v, _attr) for k, v in vars(obj).items() if k not in skip]
        else:
            return
        for name, key, value, read in children:
            child = lambda get=get, key=key, read=read: read(get(), key)  # noqa: E731  (re-resolved: owners rebind)
            if isinstance(value, (torch.Tensor, wp.array)):
                if _is_ring(obj, name) or any(isinstance(obj, base) and name in names for base, names in _SCRATCH):
                    continue
                classify(f"{path}.{name}", value, child, type(obj).__qualname__, name)
            elif not _skip(value, root):
                visit(value, child, f"{path}.{name}", depth + 1)

    def classify(name: str, value, getter, owner: str, key: str) -> None:
        t = _as_torch(value)
        shape = tuple(t.shape)
        # a scalar, a tensor known to hold no state, or an empty placeholder (a bank filled later for all envs)
        if t.ndim == 0 or t.numel() == 0 or (owner, key) in _NOT_STATE:
            return
        if (owner, key) in _ENV_DIM:
            dim = _ENV_DIM[owner, key]
            found.append(FoundTensor(name, getter, "dim1", dim, shape[dim] // num_envs, shape=shape))
        elif shape[0] == num_envs:
            found.append(FoundTensor(name, getter, "rows", shape=shape))
        elif shape[0] % num_envs == 0:
            found.append(FoundTensor(name, getter, "packed", rows_per_env=shape[0] // num_envs, shape=shape))
        elif any(d % num_envs == 0 for d in shape[1:]):
            unknown.append((name, t))

    visit(root, lambda: root, prefix, 0)
    covered = {_storage(_as_torch(f.getter())) for f in found if f.getter() is not None}
    return found, [name for name, t in unknown if _storage(t) not in covered]


def _is_ring(owner, key: str) -> bool:
    if isinstance(owner, (CircularBuffer, DelayBuffer)):
        return key == "_buffer"
    ring = _RINGS.get(type(owner).__qualname__)
    return ring is not None and key in ring[1]


def _item(container, key):
    try:
        return container[key]
    except (KeyError, IndexError, TypeError):
        return None


def _attr(owner, key):
    return getattr(owner, key, None)


def _storage(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()
