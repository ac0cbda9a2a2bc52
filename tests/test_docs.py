"""The docs build as a Sphinx site with warnings as errors (landing page, architecture, API reference by autodoc),
and the project has one version number: ``config/extension.toml``'s, read by the package, ``setup.py`` and the
docs, and the latest release the changelog names."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
import tomllib

import pytest

import isaaclab_suspend

pytestmark = pytest.mark.slow  # a Sphinx build of the whole site

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_one_version_number():
    with open(os.path.join(ROOT, "config", "extension.toml"), "rb") as f:
        version = tomllib.load(f)["package"]["version"]
    assert isaaclab_suspend.__version__ == version
    with open(os.path.join(ROOT, "CHANGELOG.rst")) as f:  # the latest release named in the changelog
        released = re.search(r"^(\d+\.\d+\.\d+) \(", f.read(), re.MULTILINE)[1]
    assert released == version
    setup = subprocess.run([sys.executable, "setup.py", "--version"], cwd=ROOT, capture_output=True, text=True)
    assert setup.stdout.strip().splitlines()[-1] == version, setup.stderr


def test_docs_build_without_warnings(tmp_path):
    build = subprocess.run([sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", os.path.join(ROOT, "docs"),
                            str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-4000:]
    index = (tmp_path / "index.html").read_text()
    assert isaaclab_suspend.__version__ in index
    pages = {page.stem for page in (tmp_path / "api").glob("*.html")}
    packages = {p.name for p in (pathlib.Path(ROOT) / "isaaclab_suspend").iterdir() if (p / "__init__.py").is_file()}
    assert packages - {"policies", "interop"} <= pages, "every package has an API page (the 0.3 aliases need none)"
    api = "".join((tmp_path / "api" / f"{page}.html").read_text() for page in pages)
    for name in ("SuspendCfg", "SuspensionManager", "ActionChunkingPolicy", "open_env", "kitless_cfg_entry_point",
                 "register_source", "register_wire"):
        assert name in api, name
