"""What each test file costs, for ``tools/suite_profile.py`` (docs/testing.rst): with ``--suite-profile FILE`` every
pytest process (each xdist worker) writes ``FILE.<worker>.json`` with, per test file, the Isaac Lab envs opened in
the test process and the Python processes started (scripts, torchrun, ``lerobot-*``). Durations come from pytest's
JUnit XML."""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys

import pytest

_current = ["<collection>"]
_envs: collections.Counter[str] = collections.Counter()
_processes: collections.Counter[str] = collections.Counter()
_BIN = os.path.dirname(sys.executable)


def pytest_addoption(parser):
    parser.addoption("--suite-profile", default=None, metavar="FILE",
                     help="write FILE.<worker>.json: per test file, envs opened in-process and processes started")


def _count_envs_and_processes() -> None:
    """Wrap Isaac Lab's env constructor and ``subprocess.Popen`` to count what the current test file starts."""
    from isaaclab.envs import ManagerBasedEnv

    init = ManagerBasedEnv.__init__

    def counted_init(self, *args, **kwargs):
        _envs[_current[0]] += 1
        return init(self, *args, **kwargs)

    ManagerBasedEnv.__init__ = counted_init
    popen = subprocess.Popen.__init__

    def counted_popen(self, args, *rest, **kwargs):
        program = str(args[0] if isinstance(args, (list, tuple)) else args).split()[0]
        if program == sys.executable or os.path.dirname(program) == _BIN:
            _processes[_current[0]] += 1
        return popen(self, args, *rest, **kwargs)

    subprocess.Popen.__init__ = counted_popen


def pytest_configure(config):
    if config.getoption("--suite-profile"):
        _count_envs_and_processes()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _current[0] = item.nodeid.split("::")[0]
    yield


def pytest_sessionfinish(session):
    path = session.config.getoption("--suite-profile")
    if path:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        with open(f"{path}.{worker}.json", "w") as f:
            json.dump({"envs": dict(_envs), "processes": dict(_processes)}, f)
