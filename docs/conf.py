"""Sphinx configuration of isaaclab_suspend's documentation: ``sphinx-build -W -b html docs <out>``
(tests/test_docs.py builds it with warnings as errors)."""

import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))

import isaaclab_suspend  # noqa: E402  (light: reads the version, imports nothing heavy)

project = "isaaclab_suspend"
author = "isaaclab_suspend developers"
copyright = "isaaclab_suspend developers, BSD-3-Clause"
release = version = isaaclab_suspend.__version__

extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon"]
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": True}
napoleon_google_docstring = True
napoleon_numpy_docstring = False

exclude_patterns = ["_build", "examples"]
html_static_path = ["_static"]
html_theme = "alabaster"
