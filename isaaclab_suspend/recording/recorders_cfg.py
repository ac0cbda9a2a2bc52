"""Configurations of the dataset recorder terms and of the recorder manager that writes replayable datasets."""

from __future__ import annotations

from isaaclab.envs.mdp.recorders.recorders_cfg import (
    InitialStateRecorderCfg,
    PostStepProcessedActionsRecorderCfg,
    PostStepStatesRecorderCfg,
    PreStepActionsRecorderCfg,
    PreStepFlatPolicyObservationsRecorderCfg,
)
from isaaclab.managers import RecorderTermCfg
from isaaclab.utils import configclass

from .recorder_manager import SuspendableRecorderManagerCfg
from .image_recorders import PreStepImageObservationsRecorder
from .recorders import (
    ChunkProvenanceRecorder,
    InitialEnvOriginRecorder,
    PostStepJointTargetsRecorder,
    PreStepStatesRecorder,
)


@configclass
class PreStepStatesRecorderCfg(RecorderTermCfg):
    """Configuration of :class:`PreStepStatesRecorder`."""

    class_type: type = PreStepStatesRecorder


@configclass
class InitialEnvOriginRecorderCfg(RecorderTermCfg):
    """Configuration of :class:`InitialEnvOriginRecorder`."""

    class_type: type = InitialEnvOriginRecorder


@configclass
class PreStepImageObservationsRecorderCfg(RecorderTermCfg):
    """Configuration of :class:`PreStepImageObservationsRecorder`."""

    class_type: type = PreStepImageObservationsRecorder


@configclass
class PostStepJointTargetsRecorderCfg(RecorderTermCfg):
    """Configuration of :class:`PostStepJointTargetsRecorder`."""

    class_type: type = PostStepJointTargetsRecorder


@configclass
class ChunkProvenanceRecorderCfg(RecorderTermCfg):
    """Configuration of :class:`ChunkProvenanceRecorder`."""

    class_type: type = ChunkProvenanceRecorder


@configclass
class DatasetRecorderManagerCfg(SuspendableRecorderManagerCfg):
    """Isaac Lab's action-state terms (as in
    :class:`~isaaclab.envs.mdp.recorders.recorders_cfg.ActionStateRecorderManagerCfg`), plus what a state-exact
    replay needs: the pre-step states (interval events) and the env origin of each episode, the camera images of
    tasks that have an ``images`` group, the chunk provenance of each action when a chunking policy feeds the env,
    and the joint targets each step left the actuators with (the action in joint space of an IK or OSC task). Set a
    term to None to leave it out."""

    record_initial_state = InitialStateRecorderCfg()
    record_post_step_states = PostStepStatesRecorderCfg()
    record_pre_step_actions = PreStepActionsRecorderCfg()
    record_pre_step_flat_policy_observations = PreStepFlatPolicyObservationsRecorderCfg()
    record_post_step_processed_actions = PostStepProcessedActionsRecorderCfg()
    record_pre_step_states = PreStepStatesRecorderCfg()
    record_initial_env_origin = InitialEnvOriginRecorderCfg()
    record_pre_step_images = PreStepImageObservationsRecorderCfg()
    record_chunk_provenance = ChunkProvenanceRecorderCfg()
    record_post_step_joint_targets = PostStepJointTargetsRecorderCfg()
