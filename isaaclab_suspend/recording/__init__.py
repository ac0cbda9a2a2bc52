"""Recording: a sample's path from ``env.step`` to an HDF5 file in Isaac Lab's layout.

* the recorder terms (``recorders``, ``image_recorders``) and their manager cfg (``recorders_cfg``);
* :class:`SuspendableRecorderManager` (``recorder_manager``) records active envs only into
  :class:`EpisodeBuffers` (``episode_buffers``) on the device;
* ended episodes go through shared memory (``staging_ring``) to the writer process (``episode_writer``), which
  writes them with ``hdf5_writer``, off the step thread; several writer processes (``sharded_writer``) write
  part files, merged into the dataset file at close (``part_files``).
"""

from .episode_buffers import EpisodeBuffers, EpisodeRows
from .episode_writer import CompressionCfg, EpisodeBatch, EpisodeWriter, EpisodeWriterCfg
from .recorder_manager import SuspendableRecorderManager, SuspendableRecorderManagerCfg
from .recorders import (
    ChunkProvenanceRecorder,
    InitialEnvOriginRecorder,
    PostStepJointTargetsRecorder,
    PreStepStatesRecorder,
)
from .sharded_writer import ShardedEpisodeWriter
from .recorders_cfg import (
    ChunkProvenanceRecorderCfg,
    DatasetRecorderManagerCfg,
    InitialEnvOriginRecorderCfg,
    PostStepJointTargetsRecorderCfg,
    PreStepStatesRecorderCfg,
)

__all__ = [
    "ChunkProvenanceRecorder",
    "ChunkProvenanceRecorderCfg",
    "CompressionCfg",
    "DatasetRecorderManagerCfg",
    "EpisodeBatch",
    "EpisodeBuffers",
    "EpisodeRows",
    "EpisodeWriter",
    "EpisodeWriterCfg",
    "InitialEnvOriginRecorder",
    "InitialEnvOriginRecorderCfg",
    "PostStepJointTargetsRecorder",
    "PostStepJointTargetsRecorderCfg",
    "PreStepStatesRecorder",
    "PreStepStatesRecorderCfg",
    "ShardedEpisodeWriter",
    "SuspendableRecorderManager",
    "SuspendableRecorderManagerCfg",
]
