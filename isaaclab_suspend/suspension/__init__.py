"""Suspension: the manager that freezes a task's per-env state bit for bit, and its cfg.

* :class:`SuspensionManager` (``suspension_manager``) snapshots and restores every per-env tensor of a task;
* ``state_discovery`` finds those tensors, ``frozen_rows`` holds their snapshots, ``newton_state`` adds the
  physics and solver state;
* :class:`RandomStreams` (``random_streams``) gives each env its own random stream (``per_env_rng``), so that
  what an env draws does not depend on the others, and its k-th episode starts alike in every run of a seed;
* :class:`StateHash` (``state_hash``) hashes each env's state on the device: the manager's start hash of each
  episode;
* :class:`SuspendCfg` (``suspend_cfg``) configures the manager (a suspendable env cfg's ``suspend`` field).

The audit that compares a suspended-then-resumed run with a never-suspended one, term by term, opens envs and
so lives above this package: :mod:`isaaclab_suspend.tasks.audit`.
"""

from .frozen_rows import FrozenRows, FrozenTensor
from .newton_state import add_newton_state
from .per_env_rng import PerEnvGenerator
from .random_streams import RandomStreams
from .state_hash import StateHash
from .state_discovery import FoundTensor, discover
from .suspend_cfg import SuspendCfg
from .suspension_manager import SuspensionManager

__all__ = [
    "FoundTensor",
    "FrozenRows",
    "FrozenTensor",
    "PerEnvGenerator",
    "RandomStreams",
    "StateHash",
    "SuspendCfg",
    "SuspensionManager",
    "add_newton_state",
    "discover",
]
