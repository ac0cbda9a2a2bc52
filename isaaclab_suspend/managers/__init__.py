"""Building blocks that thread the suspended mask through Isaac Lab's managers."""

from .episode_buffers import EpisodeBuffers
from .frozen_rows import FrozenRows, FrozenTensor
from .newton_state import add_newton_state
from .recorder_manager import SuspendableRecorderManager, SuspendableRecorderManagerCfg

__all__ = [
    "EpisodeBuffers",
    "FrozenRows",
    "FrozenTensor",
    "SuspendableRecorderManager",
    "SuspendableRecorderManagerCfg",
    "add_newton_state",
]
