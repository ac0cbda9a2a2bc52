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
