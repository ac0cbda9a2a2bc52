"""USD assets authored by the project (Isaac Lab's stock assets live on an unreachable server)."""

import os

ASSETS_DATA_DIR = os.path.join(os.path.dirname(__file__), "data")
"""Folder holding the project's ``.usda`` files."""

CARTPOLE_USD = os.path.join(ASSETS_DATA_DIR, "cartpole.usda")
PUSHER_USD = os.path.join(ASSETS_DATA_DIR, "pusher.usda")
CUBE_USD = os.path.join(ASSETS_DATA_DIR, "cube.usda")
GROUND_USD = os.path.join(ASSETS_DATA_DIR, "ground.usda")
MARKER_USD = os.path.join(ASSETS_DATA_DIR, "marker.usda")
TABLE_USD = os.path.join(ASSETS_DATA_DIR, "table.usda")
BLOCK_USDS = {color: os.path.join(ASSETS_DATA_DIR, f"{color}_block.usda") for color in ("blue", "red", "green")}
"""The stacking blocks by colour."""
