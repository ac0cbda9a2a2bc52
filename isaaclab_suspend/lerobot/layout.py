"""How a recorded dataset maps onto LeRobot's features, written down once for the exporter and the policy adapter.

The export writes a sidecar (``meta/isaaclab_suspend.json``) beside LeRobot's own metadata; a LeRobot policy
trained on the export reads it back to turn the env's observations into LeRobot's batch and LeRobot's
actions into the env's:

* ``observation.state`` is the ``policy`` observation group (its terms concatenated, in the group's order);
* ``action`` is the env's action (its action terms concatenated);
* ``observation.images.<cam>`` is the term ``<cam>`` of the ``images`` group (uint8 (H, W, 3) frames);
* with a robot (``--robot so101_follower``) the two vectors are that robot's, in its own names and units
  (:mod:`.so101`: ``shoulder_pan.pos`` ... ``gripper.pos``, degrees and 0-100): the state from the policy term of
  the joint positions, the action from the recorded joint targets, mapped from radians on the way out and back on
  the way in;
* ``observation.environment_state`` (optional) is chosen terms of the ``policy`` group (the cube's pose, say),
  concatenated in the env's units: what a state-only policy needs to know of the scene;
* vectors of width 1 get a zero column (LeRobot 0.6.1 stores a feature of shape (1,) as a scalar and reads it
  back without its last axis); the sidecar records the width before padding, and the adapter drops the pad.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

import torch

from . import so101

SIDECAR_PATH = os.path.join("meta", "isaaclab_suspend.json")
"""The sidecar, relative to the LeRobot dataset root."""
MODALITY_PATH = os.path.join("meta", "modality.json")
"""GR00T's modality map, relative to the LeRobot dataset root."""
SIDECAR_FORMAT = "isaaclab_suspend.lerobot/1"
"""Value of the sidecar's ``format`` field."""
STATE_FEATURE = "observation.state"
ACTION_FEATURE = "action"
ENV_STATE_FEATURE = "observation.environment_state"
IMAGE_PREFIX = "observation.images."
STATE_GROUP = "policy"
"""The observation group exported as ``observation.state``."""
MIN_WIDTH = 2
"""Vectors narrower than this get zero columns (LeRobot squeezes a (1,) feature)."""


@dataclass
class VectorLayout:
    """One exported float vector: its terms in order, and the width it was padded to."""

    terms: dict[str, int]
    """Width of each term, in the order they are concatenated."""
    padded_to: int = 0
    """Width stored in the LeRobot dataset (>= :attr:`dim`; 0: computed from the terms)."""

    def __post_init__(self):
        if not all(type(w) is int and w > 0 for w in self.terms.values()) or type(self.padded_to) is not int:
            raise ValueError(f"term widths must be positive ints and padded_to an int, got {self.terms},"
                             f" padded_to {self.padded_to!r}")
        self.padded_to = self.padded_to or max(self.dim, MIN_WIDTH)
        if self.padded_to < self.dim:
            raise ValueError(f"padded_to {self.padded_to} is narrower than the terms {self.terms}")

    @property
    def dim(self) -> int:
        """Width of the vector in the env (terms summed)."""
        return sum(self.terms.values())

    def slices(self) -> dict[str, tuple[int, int]]:
        """``(start, end)`` of each term in the vector."""
        out, start = {}, 0
        for name, width in self.terms.items():
            out[name] = (start, start + width)
            start += width
        return out

    def names(self) -> list[str]:
        """Column names: the term's name for a term of width 1, ``<term>_<i>`` otherwise, then ``pad_<i>``."""
        names = [name if width == 1 else f"{name}_{i}" for name, width in self.terms.items() for i in range(width)]
        return names + [f"pad_{i}" for i in range(self.padded_to - self.dim)]


@dataclass
class ExportSidecar:
    """What the export knows that LeRobot's metadata does not say: the mapping back to the env, and the source."""

    state: VectorLayout
    """``observation.state``: the ``policy`` group's terms."""
    action: VectorLayout
    """``action``: the env's action terms."""
    cameras: list[str] = field(default_factory=list)
    """Terms of the ``images`` group exported as ``observation.images.<cam>``."""
    extras: dict[str, VectorLayout] = field(default_factory=dict)
    """Other per-sample vectors of the demos, by LeRobot feature name (one term: the HDF5 path)."""
    task: str = ""
    """The task text of every frame."""
    source: dict = field(default_factory=dict)
    """The recording: file, env name, schedule, chunk length, seed, envs, control period, demos, frames."""
    robot: str = ""
    """A real robot whose terms ``observation.state`` and ``action`` are in ('' : the env's own;
    ``so101_follower``: :mod:`.so101`, the env's vectors being its six joint values in radians)."""
    environment_state: VectorLayout | None = None
    """``observation.environment_state``: terms of the ``policy`` group, by name (None: not exported)."""
    format: str = SIDECAR_FORMAT

    def __post_init__(self):
        if isinstance(self.environment_state, dict):  # as read back from JSON
            self.environment_state = VectorLayout(**self.environment_state)

    def policy_terms(self) -> list[str] | None:
        """The ``policy`` terms the features are made of, by name; None: the group's flat vector."""
        terms = list(self.environment_state.terms) if self.environment_state is not None else []
        if self.robot == so101.ROBOT:
            return [so101.STATE_TERM, *terms]
        return None if not terms else terms

    def lerobot_observation(self, policy: torch.Tensor | Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """LeRobot's vector features of the env's ``policy`` rows: the group's flat vector (..., D), or its terms by
        name (a robot's state term, the environment-state terms). Shapes: (..., padded width) each."""
        if self.robot == so101.ROBOT:
            features = {STATE_FEATURE: self.lerobot_state(policy[so101.STATE_TERM])}
        else:
            features = {STATE_FEATURE: self.lerobot_state(policy)}
        if self.environment_state is not None:
            vector = torch.cat([policy[term].float() for term in self.environment_state.terms], dim=-1)
            pad = self.environment_state.padded_to - vector.shape[-1]
            features[ENV_STATE_FEATURE] = torch.nn.functional.pad(vector, (0, pad)) if pad else vector
        return features

    def lerobot_state(self, state: torch.Tensor) -> torch.Tensor:
        """``observation.state`` of the env's ``policy`` rows (..., D): float32, padded as exported. Shape: (...,
        :attr:`VectorLayout.padded_to`)."""
        state = so101.to_follower(state) if self.robot == so101.ROBOT else state.float()
        pad = self.state.padded_to - state.shape[-1]
        return torch.nn.functional.pad(state, (0, pad)) if pad else state

    def env_action(self, action: torch.Tensor) -> torch.Tensor:
        """The env's actions of LeRobot ``action`` rows (..., padded width): float32, the pad dropped. Shape: (...,
        :attr:`VectorLayout.dim`)."""
        action = action[..., : self.action.dim]
        return so101.from_follower(action) if self.robot == so101.ROBOT else action.float()

    def write(self, root: str) -> None:
        """Write the sidecar and GR00T's ``meta/modality.json`` under the dataset ``root``."""
        with open(os.path.join(root, SIDECAR_PATH), "w") as f:
            json.dump(asdict(self), f, indent=2)
        with open(os.path.join(root, MODALITY_PATH), "w") as f:
            json.dump(self.modality(), f, indent=2)

    def modality(self) -> dict:
        """GR00T's ``modality.json``: state and action slices by term (a robot's: its layout, e.g. SO-100 / SO-101
        ``single_arm`` and ``gripper``), the video map, the annotation key."""
        if self.robot == so101.ROBOT:
            state = action = dict(so101.MODALITY_GROUPS)
        else:
            state, action = self.state.slices(), self.action.slices()
        return {
            "state": {name: {"start": s, "end": e} for name, (s, e) in state.items()},
            "action": {name: {"start": s, "end": e} for name, (s, e) in action.items()},
            "video": {cam: {"original_key": IMAGE_PREFIX + cam} for cam in self.cameras},
            "annotation": {"human.task_description": {"original_key": "task_index"}},
        }

    @classmethod
    def read(cls, path: str) -> ExportSidecar:
        """Read a sidecar file (``<dataset root>/meta/isaaclab_suspend.json``, or a copy of it).

        Raises:
            ValueError: If there is none, or it is not one this project wrote.
        """
        try:
            with open(path) as f:
                raw = json.load(f)
            if raw.get("format") != SIDECAR_FORMAT:
                raise ValueError(f"format {raw.get('format')!r}, not {SIDECAR_FORMAT!r}")
            return cls(state=VectorLayout(**raw["state"]), action=VectorLayout(**raw["action"]),
                       cameras=list(raw["cameras"]), extras={k: VectorLayout(**v) for k, v in raw["extras"].items()},
                       task=raw["task"], source=raw["source"], robot=raw.get("robot", ""),
                       environment_state=raw.get("environment_state"))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
            raise ValueError(f"'{path}' is not a sidecar of scripts/export_lerobot.py ({err}): export the dataset"
                             " with it.") from err
