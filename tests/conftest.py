"""Shared test set-up: one Warp kernel cache in the checkout, quiet Isaac Lab logs, the device of the tests marked
``cuda`` (``--device``, the CPU by default; ``scripts/benchmarks/gpu_suite.py`` runs them on a GPU), the heap of
the imports frozen, and the per-file cost profile of ``tools/suite_profile.py``."""

import gc
import os
import sys

import pytest

os.environ.setdefault("WARP_CACHE_PATH", os.path.join(os.path.dirname(os.path.dirname(__file__)), ".warp_cache"))

# tests/<package>/ mirrors the package; a test module may import another's reference peers or fixtures
# (serving/test_gr00t_rtc.py: chunking/test_rtc.py's), so every folder is importable, whichever file runs alone
sys.path[1:1] = sorted(str(d) for d in os.scandir(os.path.dirname(__file__)) if d.is_dir() and d.name != "__pycache__")

pytest_plugins = ("suite_profile",)


def pytest_addoption(parser):
    parser.addoption("--device", default="cpu", help="device of the tests marked 'cuda' (e.g. cuda:0); default cpu")


def pytest_collection_finish(session):
    """Move what the test modules' imports built (torch, Isaac Lab, LeRobot: millions of objects) out of the
    collector's sight. Isaac Lab's ``env.close()`` runs a full ``gc.collect()``, which would otherwise walk that
    heap at every close (about 1.3 s each on 2 cores); frozen objects are never freed, and none of them would be."""
    gc.collect()
    gc.freeze()


@pytest.fixture(scope="session")
def device(request) -> str:
    """The device the tests marked ``cuda`` run their envs and tensors on (``--device``)."""
    return request.config.getoption("--device")


@pytest.fixture(scope="session")
def so101_camera_dataset(tmp_path_factory) -> str:
    """Two planner demos of the SO-101 camera lift (2 envs, H = 16), recorded by record.py's ``main`` in the test
    process: for the pixel-exact replay and the export in the follower's terms."""
    import contextlib
    import io

    from helpers import load_script

    path = tmp_path_factory.mktemp("so101") / "so101_camera.hdf5"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = load_script("record").main(["--task", "IsaacContrib-Lift-Cube-SO101-IK-Abs-Camera-Suspendable",
                                             "--num_envs", "2", "--episodes", "2", "--chunk", "16", "--output",
                                             str(path), "--verbose"])
    assert status == 0 and path.is_file(), out.getvalue()[-3000:]
    assert "Unclassified: none." in out.getvalue()  # the cameras' render buffers are no state
    return str(path)
