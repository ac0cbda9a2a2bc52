"""Building blocks that thread the suspended mask through Isaac Lab's managers."""

from .frozen_rows import FrozenRows, FrozenTensor
from .newton_state import add_newton_state

__all__ = ["FrozenRows", "FrozenTensor", "add_newton_state"]
