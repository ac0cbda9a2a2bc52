"""Isaac Lab's own tests of ManagerBasedRLEnv and the recorder, run against the suspendable env and recorder.

Of the wheel's test suite (site-packages/isaaclab/source/isaaclab/test), these are the ones about
``ManagerBasedRLEnv`` or the recorder that run kitless on the CPU; the others start Kit through
``launch_test_simulation`` (see docs/suspension.rst). One known deviation is pinned: the masked recorder's
``get_episode`` returns each term stacked as one (T, ...) tensor, Isaac Lab's a list of T tensors.
"""

import os
import subprocess
import sys

import isaaclab
import pytest

pytestmark = pytest.mark.slow  # Isaac Lab's own test files run against the suspendable env

TESTS = os.path.join(os.path.dirname(isaaclab.__file__), "source", "isaaclab", "test")
CONFORMANCE = ["envs/test_manager_based_rl_env_unit.py", "managers/test_recorder_manager.py"]


def test_isaaclab_tests_pass_against_the_suspendable_env(tmp_path):
    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # where the plugin lies
    env = dict(os.environ, PYTHONPATH=os.pathsep.join((os.path.dirname(tests), tests)))
    files = [os.path.join(TESTS, f) for f in CONFORMANCE]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-rA", "-p", "isaaclab_conformance_plugin", "--rootdir", str(tmp_path),
         "-c", os.devnull, *files],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600,
    )
    assert "ManagerBasedRLEnv -> ConformanceEnv, RecorderManager -> SuspendableRecorderManager" in result.stdout
    outcomes = {line.split()[1].split("::")[-1]: line.split()[0] for line in result.stdout.splitlines()
                if line.startswith(("PASSED ", "FAILED "))}
    assert outcomes == {
        "test_non_concatenated_obs_groups_contain_all_terms": "PASSED",
        "test_obs_space_follows_clip_constraint": "PASSED",
        "test_str": "PASSED",
        "test_record": "FAILED",
    }, result.stdout[-3000:] + result.stderr[-2000:]
    assert "stack(): argument 'tensors' (position 1) must be tuple of Tensors, not Tensor" in result.stdout
