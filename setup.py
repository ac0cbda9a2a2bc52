"""Installation script for the isaaclab_suspend extension (metadata is read from config/extension.toml)."""

import os

import tomllib
from setuptools import find_packages, setup

EXTENSION_PATH = os.path.dirname(os.path.realpath(__file__))
with open(os.path.join(EXTENSION_PATH, "config", "extension.toml"), "rb") as f:
    EXTENSION_TOML_DATA = tomllib.load(f)

setup(
    name="isaaclab_suspend",
    version=EXTENSION_TOML_DATA["package"]["version"],
    description=EXTENSION_TOML_DATA["package"]["description"],
    keywords=EXTENSION_TOML_DATA["package"]["keywords"],
    author=EXTENSION_TOML_DATA["package"]["author"],
    license="BSD-3-Clause",
    python_requires=">=3.12,<3.13",
    packages=find_packages(exclude=("tests", "scripts")),
    package_data={
        "isaaclab_suspend": ["assets/data/*.usda", "tasks/*/agents/*.yaml", "rl/checkpoints/*.pt"]
    },
    include_package_data=True,
    zip_safe=False,
)
