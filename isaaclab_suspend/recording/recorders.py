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
