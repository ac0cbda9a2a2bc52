"""Helpers shared by tests: record a small dataset with the embedded chunk model, read a dataset whole for comparison,
import a script as a module, wait for what another thread or process must do."""

import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from types import ModuleType

import h5py
import torch

from isaaclab_suspend.recording import DatasetRecorderManagerCfg
from isaaclab_suspend.chunking import ActionChunkingPolicy
from isaaclab_suspend.tasks.embedded import make_default_model
from isaaclab_suspend.tasks.env_factory import open_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEADLINE_S = 60.0
"""Longest wait for what another thread or process must do (a reply, a closed connection, a file) [s]: reached
only when it never happens, and then the test fails. No test asserts how soon it happens."""


def wait_for(condition: Callable[[], object], what: str) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` if it does not within :data:`DEADLINE_S`."""
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"within {DEADLINE_S:g} s, expected: {what}"
        time.sleep(0.01)


def record_chunk_demos(directory: str, task: str, episode_starts: list[int], steps: int,
                       overrides: tuple[str, ...] = ()) -> str:
    """Record ``steps`` steps of ``task``'s embedded chunk model (H = 8, ``global_clock``) with one env per entry
    of ``episode_starts`` (the episode step each env starts at), its cfg made with ``overrides``; returns the path
    of ``<directory>/<task>.hdf5``."""
    recorders = DatasetRecorderManagerCfg(dataset_export_dir_path=str(directory), dataset_filename=task)
    with open_env(task, len(episode_starts), overrides=overrides, recorders=recorders) as env:
        policy = ActionChunkingPolicy(make_default_model(task, 8), env, chunk_length=8, schedule="global_clock")
        obs, _ = env.reset()
        env.episode_length_buf[:] = torch.tensor(episode_starts)
        for _ in range(steps):
            obs, _, term, trunc, _ = env.step(policy.act(obs))
            policy.observe(term | trunc)
    return os.path.join(str(directory), f"{task}.hdf5")


def dataset_contents(path) -> dict:
    """Everything a dataset file holds, to compare two: the ``data`` group's attributes (``env_args`` parsed) and, by
    demo name, each demo's attributes and datasets (dtype, shape, compression and bytes)."""
    with h5py.File(path, "r") as f:
        data = f["data"]
        attrs = {**data.attrs, "env_args": json.loads(data.attrs["env_args"])}
        demos = {}
        for name, demo in data.items():
            datasets = {}
            demo.visititems(lambda key, obj: datasets.__setitem__(key, (obj.dtype, obj.shape, obj.compression,
                                                                         obj[()].tobytes()))
                            if isinstance(obj, h5py.Dataset) else None)
            demos[name] = {"attrs": dict(demo.attrs), "datasets": datasets}
        return {"attrs": attrs, "demos": demos}


def load_script(name: str) -> ModuleType:
    """``scripts/<name>.py`` as a module, to call its ``main(argv)`` in the test process."""
    spec = importlib.util.spec_from_file_location(f"script_{name}", os.path.join(ROOT, "scripts", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_usage_errors(script: ModuleType, cases: dict[tuple[str, ...], str], capsys, prefix: tuple[str, ...] = ()):
    """Run ``script.main([*prefix, *args])`` for each case: exit status 2, its message on stderr, no traceback."""
    for args, message in cases.items():
        try:
            status = script.main([*prefix, *args])
        except SystemExit as exit:  # argparse's usage error
            status = exit.code
        err = capsys.readouterr().err
        assert status == 2 and message in err and "Traceback" not in err, (args, err)


def eval_remote(address: str) -> subprocess.CompletedProcess:
    """``eval.py --remote ADDRESS`` on 2 envs for 5 steps, in a process of its own; its output captured."""
    return subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "eval.py"), "--remote", address, "--num_envs",
                           "2", "--steps", "5"], cwd=ROOT, capture_output=True, text=True, timeout=300)
