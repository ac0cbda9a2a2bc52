"""The masked step is Isaac Lab's ``ManagerBasedRLEnv.step`` plus hooks: fail loudly when the parent changes."""

import hashlib
import inspect

from isaaclab.envs import ManagerBasedRLEnv

from isaaclab_suspend.envs import SuspendableManagerBasedRLEnv

STEP_SHA256 = "8cc6af24f2bcb2eb24596021be9e3f4be6b75099f728f8ac4e9305ac08226203"
"""SHA-256 of the source of ``ManagerBasedRLEnv.step`` in Isaac Lab 3.0.0, which
``SuspendableManagerBasedRLEnv._step_with_suspended`` mirrors."""


def test_parent_step_is_the_one_mirrored():
    digest = hashlib.sha256(inspect.getsource(ManagerBasedRLEnv.step).encode()).hexdigest()
    assert digest == STEP_SHA256, (
        "isaaclab.envs.ManagerBasedRLEnv.step changed (Isaac Lab upgrade?). Re-check"
        " SuspendableManagerBasedRLEnv._step_with_suspended against it line by line: every new call that changes"
        " per-env state needs a suspension-manager hook after it (or the part's state must be discoverable), every"
        " new block must be carried over (as the visualizer reset block was), then update STEP_SHA256 here."
    )


def test_mirror_calls_every_phase_of_the_parent():
    """Every manager call of the parent's step appears in the mirror, in the same order."""
    calls = (
        "action_manager.process_action", "record_pre_step", "action_manager.apply_action", "scene.write_data_to_sim",
        "sim.step", "record_post_physics_decimation_step", "sim.render", "scene.update", "termination_manager.compute",
        "reward_manager.compute", "record_post_step", "record_pre_reset", "_reset_idx", "record_post_reset",
        "consume_reset_request", "command_manager.compute", 'apply(mode="interval"', "recorder.step()",
        "observation_manager.compute(update_history=True)",
    )
    parent = inspect.getsource(ManagerBasedRLEnv.step)
    mirror = inspect.getsource(SuspendableManagerBasedRLEnv._step_with_suspended)
    for source in (parent, mirror):
        positions = [source.find(call) for call in calls]
        assert -1 not in positions, [c for c, p in zip(calls, positions) if p == -1]
        assert positions == sorted(positions)
