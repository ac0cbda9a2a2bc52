"""Suspension: the manager that freezes a task's per-env state bit for bit, and the audit that checks it.

* :class:`SuspensionManager` (``suspension_manager``) snapshots and restores every per-env tensor of a task;
* ``state_discovery`` finds those tensors, ``frozen_rows`` holds their snapshots, ``newton_state`` adds the
  physics and solver state;
* :class:`RandomStreams` (``random_streams``) gives each env its own random stream (``per_env_rng``), so that
  what an env draws does not depend on the others;
* ``audit`` compares a suspended-then-resumed run with a never-suspended one, term by term.
"""

from .frozen_rows import FrozenRows, FrozenTensor
from .newton_state import add_newton_state
from .per_env_rng import PerEnvGenerator
from .random_streams import RandomStreams
from .state_discovery import FoundTensor, discover
from .suspension_manager import SuspensionManager

__all__ = [
    "FoundTensor",
    "FrozenRows",
    "FrozenTensor",
    "PerEnvGenerator",
    "RandomStreams",
    "SuspensionManager",
    "add_newton_state",
    "discover",
]
