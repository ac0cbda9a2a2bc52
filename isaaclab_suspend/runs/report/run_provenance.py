"""A run's provenance: what a report names so that its run can be repeated (the arguments, the command line, the
versions, the host and the git commit). A chunk's provenance, which model call each action came from, is
:class:`~isaaclab_suspend.chunking.ChunkProvenance`."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import subprocess
import sys
from collections.abc import Sequence

PACKAGES = ("isaaclab_suspend", "isaaclab", "torch", "warp-lang", "newton", "mujoco-warp", "numpy", "lerobot")
"""Distributions whose versions the provenance names (those installed)."""



def run_provenance(task: str, overrides: Sequence[str] = (), seed: int | None = None, device: str = "cpu",
                   policy: str = "", command: Sequence[str] | None = None) -> dict:
    """What a report names so that its run can be repeated: the arguments given, the command line, the versions of
    ``PACKAGES``, Python, the host and the package's git commit (``+dirty`` with uncommitted changes)."""
    versions = {"python": platform.python_version()}
    for package in PACKAGES:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            pass
    return {"task": task, "overrides": list(overrides), "seed": seed, "device": device, "policy": policy,
            "command": " ".join(sys.argv if command is None else command), "versions": versions,
            "commit": _commit(), "host": platform.node()}


def _commit() -> str | None:
    """The git commit of the checkout this package runs from (None outside one)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    try:
        commit = subprocess.run(["git", "-C", root, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if commit.returncode != 0:
        return None
    return commit.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
