"""Building blocks that thread the suspended mask through Isaac Lab's managers."""

from .episode_buffers import EpisodeBuffers, EpisodeRows
from .episode_writer import CompressionCfg, EpisodeBatch, EpisodeWriter, EpisodeWriterCfg
from .frozen_rows import FrozenRows, FrozenTensor
from .newton_state import add_newton_state
from .recorder_manager import SuspendableRecorderManager, SuspendableRecorderManagerCfg
from .state_discovery import FoundTensor, discover
from .suspension_manager import SuspensionManager

__all__ = [
    "CompressionCfg",
    "EpisodeBatch",
    "EpisodeBuffers",
    "EpisodeRows",
    "EpisodeWriter",
    "EpisodeWriterCfg",
    "FrozenRows",
    "FoundTensor",
    "FrozenTensor",
    "SuspendableRecorderManager",
    "SuspendableRecorderManagerCfg",
    "SuspensionManager",
    "add_newton_state",
    "discover",
]
