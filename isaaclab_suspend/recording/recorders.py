"""Recorder terms that make a dataset replayable state-exactly, beside Isaac Lab's action and state terms."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from isaaclab.managers.recorder_manager import RecorderTerm


class PreStepStatesRecorder(RecorderTerm):
    """Records the scene state each step starts from (relative to the env origin), before its physics.

    It differs from the post-step state of the step before only where something other than the actions
    changed the state in between, such as an interval event (a push, a nudge). A replay detects those steps
    by comparing the two and writes this state there, so that it reproduces the recorded trajectory exactly
    without re-drawing the events' random numbers.
    """

    def record_pre_step(self) -> tuple[str, dict]:
        return "pre_step_states", self._env.scene.get_state(is_relative=True)


class InitialEnvOriginRecorder(RecorderTerm):
    """Records the origin of the env that recorded the episode. Shape per episode: (1, 3).

    Physics runs in world coordinates: the same relative state about another origin rounds differently
    in float32, which contact-rich tasks amplify within a few steps. A replay that puts each episode back at
    its recorded origin reproduces it bit for bit.
    """

    def record_post_reset(self, env_ids: Sequence[int] | None) -> tuple[str, torch.Tensor]:
        origins = self._env.scene.env_origins
        return "env_origin", (origins if env_ids is None else origins[env_ids]).clone()


class PostStepJointTargetsRecorder(RecorderTerm):
    """Records the joint position targets each articulation's actuators were left with after the step, under
    ``joint_targets/<articulation>``. Shape per episode: (num_samples, num_joints) each.

    They are the action in joint space whatever the task's action space is: with an IK or operational-space
    action term the targets are what the controller made of the command, the values a real arm's motors are
    sent (the goal positions of a LeRobot follower). Isaac Lab's own terms record the task-space command only.
    """

    def record_post_step(self) -> tuple[str | None, dict | None]:
        articulations = self._env.scene.articulations
        if not articulations:
            return None, None
        return "joint_targets", {name: art.data.joint_pos_target.torch.clone() for name, art in articulations.items()}


class ChunkProvenanceRecorder(RecorderTerm):
    """Records where each action came from when a chunking policy feeds the env, under ``chunk``: ``chunk/call``
    (the id of the model call whose chunk it is, increasing over the run), ``chunk/index`` (its position in that
    chunk) and ``chunk/age`` (env steps from the observation the chunk was planned from to this step); -1 for an
    action that was not a chunk's (a held step). Shape per episode: (num_samples,) each, int64.

    It reads the per-env tensors the policy keeps on the device (the env's ``chunk_provenance``): no host read.
    Without a chunking policy it records nothing.
    """

    def record_pre_step(self) -> tuple[str | None, dict | None]:
        provenance = getattr(self._env, "chunk_provenance", None)
        return (None, None) if provenance is None else ("chunk", provenance.current)
