"""isaaclab_suspend: per-env suspension, action chunking, recording and replay for Isaac Lab.

Importing the package imports nothing heavy (no torch, Warp or Isaac Lab), so a script answers ``--help`` or a
malformed argument at once; the subpackages import what they need.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import tomllib
from types import ModuleType

EXT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
"""The extension's directory (the one holding ``config/extension.toml``)."""

with open(os.path.join(EXT_DIR, "config", "extension.toml"), "rb") as _file:
    __version__: str = tomllib.load(_file)["package"]["version"]
    """The version, read from ``config/extension.toml`` (the one place it is written, as in Isaac Lab's
    extensions; ``setup.py`` and ``docs/conf.py`` read it too)."""


def _init_warp_quietly(warp: ModuleType) -> None:
    """Initialise Warp with stderr closed: without NVIDIA's driver Warp's C code would print "Warp CUDA warning:
    Could not find or load the NVIDIA CUDA driver" in every process, though the project runs on the CPU there."""
    import os

    warp.config.quiet = True  # as Isaac Lab sets it (isaaclab.utils.warp): no banner
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        warp.init()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


class _QuietWarpFinder(importlib.abc.MetaPathFinder):
    """Runs :func:`_init_warp_quietly` right after ``warp`` is first imported, by whichever module imports it, so
    the package itself need not import Warp (about a second) to keep its console quiet."""

    def find_spec(self, name, path=None, target=None):
        if name != "warp":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            exec_module = spec.loader.exec_module

            def exec_then_init(module: ModuleType) -> None:
                exec_module(module)
                _init_warp_quietly(module)

            spec.loader.exec_module = exec_then_init
        return spec


def _quiet_warp_without_a_driver() -> None:
    """Where NVIDIA's driver is missing, initialise Warp quietly when it is first imported (at once if it already
    is). With a driver, Warp's warnings about it still show."""
    import ctypes

    try:
        ctypes.CDLL("libcuda.so.1")
        return
    except OSError:
        pass
    if "warp" in sys.modules:
        _init_warp_quietly(sys.modules["warp"])
    else:
        sys.meta_path.insert(0, _QuietWarpFinder())


_quiet_warp_without_a_driver()
