"""The SO-101 follower's terms (pure logic): the mapping from the sim's joint values to LeRobot's follower units and
back, its joint ranges against the MJCF they come from, and the export sidecar that applies it both ways."""

import math
import xml.etree.ElementTree as ET

import numpy as np
import pytest
import torch

from isaaclab_suspend.assets import robots
from isaaclab_suspend.lerobot import so101
from isaaclab_suspend.lerobot.layout import ExportSidecar, VectorLayout


def _random_joints(n: int) -> torch.Tensor:
    """``n`` joint vectors drawn inside the MJCF's ranges. Shape: (n, 6)."""
    lo, hi = (torch.tensor([so101.JOINT_LIMITS[j][k] for j in so101.JOINTS]) for k in (0, 1))
    return lo + (hi - lo) * torch.rand(n, 6, generator=torch.Generator().manual_seed(0))


def test_limits_are_the_mjcf_ones():
    path = robots.source_file(robots.SO101)  # the converter venv's copy, the one the USD is made from
    ranges = {j.get("name"): tuple(float(v) for v in j.get("range").split())
              for j in ET.parse(path).getroot().iter("joint") if j.get("name") in so101.JOINTS}
    assert ranges == so101.JOINT_LIMITS


def test_to_follower_units():
    lo, hi = so101.JOINT_LIMITS["gripper"]
    q = torch.tensor([[0.0, math.pi / 2, -math.pi / 4, 0.1, so101.JOINT_LIMITS["wrist_roll"][1], lo],
                      [so101.JOINT_LIMITS["shoulder_pan"][1], 0, 0, 0, 0, hi],
                      [0, 0, 0, 0, 0, (lo + hi) / 2]])
    values = so101.to_follower(q)
    expected = torch.tensor([[0.0, 90.0, -45.0, math.degrees(0.1), math.degrees(2.841206309382605), 0.0],
                             [110.0, 0, 0, 0, 0, 100.0],
                             [0, 0, 0, 0, 0, 50.0]])
    assert values.dtype == torch.float32 and torch.allclose(values, expected, atol=1e-4)


def test_mapping_round_trips_both_ways():
    q = _random_joints(64)
    assert torch.allclose(so101.from_follower(so101.to_follower(q)), q, atol=1e-6)
    values = so101.to_follower(q)
    assert torch.allclose(so101.to_follower(so101.from_follower(values)), values, atol=1e-4)
    assert (values[:, 5] >= 0).all() and (values[:, 5] <= 100).all()  # the gripper's 0-100 over its range


def test_sidecar_in_follower_terms(tmp_path):
    """The export's sidecar for ``--robot so101_follower``: the follower's column names, the env's joint values out
    in its units and the policy's actions back in radians, GR00T's SO-100/SO-101 modality layout; kept when read."""
    layout = VectorLayout(dict.fromkeys(so101.NAMES, 1))
    sidecar = ExportSidecar(state=layout, action=layout, cameras=["front", "wrist"], task="lift", robot=so101.ROBOT,
                            environment_state=VectorLayout({"cube_pose_b": 7}))
    assert layout.names() == ["shoulder_pan.pos", "shoulder_lift.pos", "elbow_flex.pos", "wrist_flex.pos",
                              "wrist_roll.pos", "gripper.pos"]
    q = _random_joints(5)
    assert torch.equal(sidecar.lerobot_state(q), so101.to_follower(q))
    assert torch.allclose(sidecar.env_action(sidecar.lerobot_state(q)), q, atol=1e-6)
    cube = torch.rand(5, 7)
    features = sidecar.lerobot_observation({so101.STATE_TERM: q, "cube_pose_b": cube, "joint_vel": q})
    assert features.keys() == {"observation.state", "observation.environment_state"}  # by name, nothing else
    assert torch.equal(features["observation.state"], so101.to_follower(q))
    assert torch.equal(features["observation.environment_state"], cube)
    modality = sidecar.modality()
    assert modality["state"] == modality["action"] == {"single_arm": {"start": 0, "end": 5},
                                                      "gripper": {"start": 5, "end": 6}}
    assert modality["video"]["wrist"] == {"original_key": "observation.images.wrist"}
    (tmp_path / "meta").mkdir()
    sidecar.write(str(tmp_path))
    read = ExportSidecar.read(str(tmp_path / "meta" / "isaaclab_suspend.json"))
    assert read.robot == so101.ROBOT and read.environment_state == sidecar.environment_state
    assert so101.robot_type() == "so_follower"  # what LeRobot 0.6.1's lerobot-record writes for an SO-101
    plain = ExportSidecar(state=VectorLayout({"x": 6}), action=VectorLayout({"a": 6}))
    assert torch.equal(plain.lerobot_state(q), q) and torch.equal(plain.env_action(q), q)  # no robot: as recorded


@pytest.mark.parametrize("shape", [(6,), (2, 3, 6)])
def test_mapping_keeps_leading_dims(shape):
    q = torch.zeros(shape)
    assert so101.to_follower(q).shape == shape and so101.from_follower(q).shape == shape


def _so101_file(path, lengths=(4, 3), width=6) -> str:
    """A recording of SO-101 joint values as ``record.py`` writes one: per demo the policy term ``joint_pos_abs``
    (joint positions) and ``joint_targets/robot`` in radians beside the task's own ``actions`` (a pose command), the
    control period in ``env_args``."""
    import json

    import h5py

    joints = _random_joints(2 * sum(lengths)).numpy()
    with h5py.File(path, "w") as f:
        f.attrs["format_version"] = 1
        data = f.create_group("data")
        data.attrs["env_args"] = json.dumps({"env_name": "Isaac-SO101-Lift-Suspendable", "step_dt": 1 / 30})
        data.attrs["total"] = sum(lengths)
        start = 0
        for i, n in enumerate(lengths):
            demo = data.create_group(f"demo_{i}")
            demo.attrs["num_samples"] = n
            demo[f"obs/{so101.STATE_TERM}"] = joints[start: start + n, :width]
            demo[so101.TARGETS_KEY] = joints[sum(lengths) + start: sum(lengths) + start + n, :width]
            demo["actions"] = np.zeros((n, 8), np.float32)
            start += n
    return str(path)


def test_export_in_the_followers_terms_reads_back_with_lerobot(tmp_path, capsys):
    """``export_lerobot.py --robot so101_follower``: LeRobot's reader gives the follower's feature names, robot
    type, fps and units, which map back onto the recorded radians; a file of other widths is refused."""
    import h5py
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    from helpers import check_usage_errors, load_script

    path = _so101_file(tmp_path / "so101.hdf5")
    export = load_script("export_lerobot")
    assert export.main([path, "--output", str(tmp_path / "out"), "--robot", so101.ROBOT, "--no_video"]) == 0
    ds = LeRobotDataset("local/out", root=str(tmp_path / "out"))
    assert ds.meta.robot_type == "so_follower" and ds.fps == 30 and ds.num_frames == 7
    for feature in ("observation.state", "action"):
        assert ds.meta.features[feature]["names"] == list(so101.NAMES)
    with h5py.File(path) as f:
        recorded = {key: torch.cat([torch.from_numpy(f["data"][d][key][()]) for d in ("demo_0", "demo_1")])
                    for key in (f"obs/{so101.STATE_TERM}", so101.TARGETS_KEY)}
    state = torch.stack([ds[i]["observation.state"] for i in range(7)])
    action = torch.stack([ds[i]["action"] for i in range(7)])
    assert torch.equal(state, so101.to_follower(recorded[f"obs/{so101.STATE_TERM}"]))
    targets = recorded[so101.TARGETS_KEY]
    assert torch.allclose(so101.from_follower(action), targets, atol=1e-6)  # the targets, not the pose command
    sidecar = ExportSidecar.read(str(tmp_path / "out" / "meta" / "isaaclab_suspend.json"))
    assert sidecar.robot == so101.ROBOT and torch.allclose(sidecar.env_action(action), targets, atol=1e-6)
    wide = _so101_file(tmp_path / "wide.hdf5", width=5)
    check_usage_errors(export, {(wide, "--output", str(tmp_path / "w"), "--robot", so101.ROBOT):
                                "exports the SO-101's six joint positions"}, capsys)
