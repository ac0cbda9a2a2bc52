"""Shared test set-up: one Warp kernel cache in the checkout, quiet Isaac Lab logs, and the device of the tests
marked ``cuda`` (``--device``, the CPU by default; ``scripts/benchmarks/gpu_suite.py`` runs them on a GPU)."""

import os

import pytest

os.environ.setdefault("WARP_CACHE_PATH", os.path.join(os.path.dirname(os.path.dirname(__file__)), ".warp_cache"))


def pytest_addoption(parser):
    parser.addoption("--device", default="cpu", help="device of the tests marked 'cuda' (e.g. cuda:0); default cpu")


@pytest.fixture(scope="session")
def device(request) -> str:
    """The device the tests marked ``cuda`` run their envs and tensors on (``--device``)."""
    return request.config.getoption("--device")


@pytest.fixture(scope="session")
def so101_camera_dataset(tmp_path_factory) -> str:
    """Two planner demos of the SO-101 camera lift (2 envs, H = 16), recorded by record.py: for the pixel-exact
    replay and the export in the follower's terms."""
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = tmp_path_factory.mktemp("so101") / "so101_camera.hdf5"
    run = subprocess.run(
        [sys.executable, os.path.join(root, "scripts", "record.py"), "--task",
         "IsaacContrib-Lift-Cube-SO101-IK-Abs-Camera-Suspendable", "--num_envs", "2", "--episodes", "2", "--chunk",
         "16", "--output", str(path), "--verbose"], cwd=root, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "Unclassified: none." in run.stdout + run.stderr  # the cameras' render buffers are no state
    return str(path)
