"""Dataset files that must not harm what reads them, on small HDF5 files crafted with h5py: merge_shards.py
never writes into an input (symlink, hard link), never leaves a partial output, names the file and demo of a
bad one, refuses an incomplete set of shards unless --partial; view_dataset.py ends bad images with one line."""

import json
import os
import re
import tempfile

import h5py
import numpy as np
import pytest
from helpers import load_script
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from isaaclab_suspend.datasets import DatasetError
from isaaclab_suspend.datasets.shards import check_shard_set, merge_datasets, missing_shards

TASK = "Isaac-Cartpole-Suspendable"


def write_dataset(path, lengths=(5, 7), task=TASK, images=None):
    """A dataset as the recorder writes one: a demo per length, actions, initial state and states (and, if given,
    ``images[i]`` as demo i's ``images/scene_camera``)."""
    with h5py.File(path, "w") as f:
        f.attrs["format_version"] = 1
        data = f.create_group("data")
        data.attrs["env_args"] = json.dumps({"env_name": task, "sim_args": {"num_envs": 2}})
        data.attrs["total"] = sum(lengths)
        for i, n in enumerate(lengths):
            demo = data.create_group(f"demo_{i}")
            demo.attrs["num_samples"] = n
            demo["actions"] = np.full((n, 1), i, np.float32)
            demo["initial_state/articulation/robot/joint_position"] = np.zeros((1, 2), np.float32)
            demo["states/articulation/robot/joint_position"] = np.arange(2 * n, dtype=np.float32).reshape(n, 2)
            if images is not None:
                demo["images/scene_camera"] = images[i]
    return str(path)


def _demos(path):
    with h5py.File(path, "r") as f:
        return {name: f["data"][name]["actions"][()].ravel().tolist() for name in f["data"]}


@pytest.fixture()
def shards(tmp_path):
    return [write_dataset(tmp_path / f"run-shard{i}of2.hdf5", lengths) for i, lengths in enumerate([(5, 7), (3,)])]


@pytest.fixture(scope="module")
def merge():
    """merge_shards.py's main, returning the exit status of a usage error too."""
    main = load_script("merge_shards").main

    def run(argv):
        try:
            return main(argv)
        except SystemExit as exit_:
            return exit_.code

    return run


def _one_error_line(capsys, status, *words):
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "error" in line]
    assert status == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert all(word in lines[0] for word in words), lines[0]
    return lines[0]


@pytest.mark.parametrize("link", ["symlink", "hardlink"])
def test_output_linked_to_a_shard_is_refused_and_the_shard_kept(link, shards, tmp_path, merge, capsys):
    output = str(tmp_path / "merged.hdf5")
    {"symlink": os.symlink, "hardlink": os.link}[link](shards[1], output)
    before = open(shards[1], "rb").read()
    status = merge(["--datasets", *shards, "--output", output, "--overwrite"])
    _one_error_line(capsys, status, f"--output '{output}' is one of the --datasets (the same file)")
    with pytest.raises(DatasetError, match=f"The output '{re.escape(output)}' is the shard '{re.escape(shards[1])}'"):
        merge_datasets(shards, output)
    assert open(shards[1], "rb").read() == before and _demos(shards[1]) == {"demo_0": [0.0] * 3}


def test_merge_replaces_an_output_atomically(shards, tmp_path, merge, capsys):
    output = str(tmp_path / "merged.hdf5")
    assert merge(["--datasets", *shards, "--output", output]) == 0
    assert "3 episodes (15 samples) of 2 shards" in capsys.readouterr().out
    assert sorted(_demos(output)) == ["demo_0", "demo_1", "demo_2"]
    # a bad demo in the second shard: the error names file and demo, the old output stays whole, no partial file
    with h5py.File(shards[1], "a") as f:
        f["data/demo_0/actions_ext"] = h5py.ExternalLink(shards[0], "/data/demo_0/actions")
    before = open(output, "rb").read()
    status = merge(["--datasets", *shards, "--output", output, "--overwrite"])
    _one_error_line(capsys, status, shards[1], "demo 'demo_0'", "'actions_ext' is an external link")
    assert open(output, "rb").read() == before
    assert sorted(os.listdir(tmp_path)) == sorted(["merged.hdf5", *map(os.path.basename, shards)])


def test_a_failure_leaves_no_partial_output(shards, tmp_path, merge, capsys):
    with h5py.File(shards[1], "a") as f:
        del f["data/demo_0/actions"]
        f["data/demo_0/actions"] = np.array([[b"left"]] * 3)
    output = str(tmp_path / "merged.hdf5")
    status = merge(["--datasets", *shards, "--output", output])
    _one_error_line(capsys, status, shards[1], "demo 'demo_0'", "holds |S4 values, not numbers")
    assert not os.path.exists(output) and len(os.listdir(tmp_path)) == 2


def test_missing_shards_are_refused_unless_partial(shards, tmp_path, merge, capsys):
    output = str(tmp_path / "merged.hdf5")
    status = merge(["--datasets", shards[0], "--output", output])
    _one_error_line(capsys, status, "1 shards of the set are missing", shards[1], "--partial")
    assert not os.path.exists(output)
    status = merge(["--datasets", shards[0], shards[0], "--output", output])
    _one_error_line(capsys, status, "are the same file")
    assert merge(["--datasets", shards[0], "--output", output, "--partial"]) == 0
    assert sorted(_demos(output)) == ["demo_0", "demo_1"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(count=st.integers(1, 9), data=st.data())
def test_missing_shards_are_exactly_the_absent_ones(count, data):
    present = data.draw(st.sets(st.integers(0, count - 1), min_size=1))
    paths = [f"/runs/eval-shard{i}of{count}.json" for i in sorted(present)] + ["/runs/other.json"]
    expected = [f"/runs/eval-shard{i}of{count}.json" for i in range(count) if i not in present]
    assert missing_shards(paths) == expected
    if expected:
        with pytest.raises(ValueError, match=re.escape(str(expected))):
            check_shard_set(paths)
    check_shard_set(paths, partial=True)


FRAMES = {
    "mixed frame sizes": ([np.zeros((4, 8, 8, 3), np.uint8), np.zeros((4, 6, 8, 3), np.uint8)],
                          "have frames of another size than demo_0's (8, 8)"),
    "0 channels": ([np.zeros((4, 8, 8, 0), np.uint8)] * 2, "not uint8 RGB frames"),
    "float images": ([np.zeros((4, 8, 8, 3), np.float32)] * 2, "not uint8 RGB frames"),
    "no frames": ([np.zeros((0, 8, 8, 3), np.uint8)] * 2, "the same number of samples > 0"),
}


@pytest.mark.parametrize("case", sorted(FRAMES))
def test_view_dataset_bad_images_exit_2_with_one_line(case, tmp_path, capsys):
    images, message = FRAMES[case]
    path = write_dataset(tmp_path / "camera.hdf5", lengths=(4, 4), images=images)
    status = load_script("view_dataset").main([path, "--output", str(tmp_path / "view.gif")])
    _one_error_line(capsys, status, path, message)
    assert not os.path.exists(tmp_path / "view.gif")


def test_view_dataset_bounds_declared_and_tiled_sizes(tmp_path, capsys):
    path = write_dataset(tmp_path / "camera.hdf5", lengths=(4, 4), images=[np.zeros((4, 8, 8, 3), np.uint8)] * 2)
    with h5py.File(path, "a") as f:  # 3 GiB declared, nothing stored
        del f["data/demo_1/images/scene_camera"]
        f["data/demo_1/images"].create_dataset("scene_camera", (2**14, 256, 256, 3), "u1", chunks=(1, 256, 256, 3),
                                                compression="gzip")
    view = load_script("view_dataset").main
    _one_error_line(capsys, view([path, "--output", str(tmp_path / "v.gif")]), "demo 'demo_1'", "but the file stores")
    _one_error_line(capsys, view([path, "--demos", "demo_0", "--scale", "100000", "--output", str(tmp_path / "v.gif")]),
                    "the tiled frames would take")
    assert view([path, "--demos", "demo_0", "--output", str(tmp_path / "v.gif")]) == 0


def _escape(kind, f, group, name, other):
    """Put at ``group/name`` something that reaches outside the file or loops (``other``: another file)."""
    if kind == "external link":
        group[name] = h5py.ExternalLink(other, "/data/demo_0/actions")
    elif kind == "soft link":
        group[name] = h5py.SoftLink("/data/demo_0/actions")
    elif kind == "cycle":
        group[name] = f["data"]
    elif kind == "external storage":
        group.create_dataset(name, (5, 1), "f4", external=[(other, 0, 20)])
    elif kind == "virtual":
        layout = h5py.VirtualLayout(shape=(5, 1), dtype="f4")
        layout[:] = h5py.VirtualSource(other + ".missing", "x", shape=(5, 1))
        group.create_virtual_dataset(name, layout, fillvalue=0)
    else:  # declared, never written
        group.create_dataset(name, (2**30, 4), "f4", chunks=(2**16, 4), compression="gzip")


ESCAPES = ["external link", "soft link", "cycle", "external storage", "virtual", "sparse"]


@settings(max_examples=40, deadline=None)
@given(kind=st.sampled_from(ESCAPES), demo=st.integers(0, 1), depth=st.integers(0, 2),
       key=st.sampled_from(["actions", "obs"]))
def test_every_reader_refuses_a_demo_that_reaches_outside_its_file(kind, demo, depth, key):
    """Wherever it sits in a demo, such an entry makes every way of reading the demo refuse it with one line
    naming the file and demo, and leaves the other demo readable; merge refuses the file without an output."""
    from isaaclab_suspend.datasets import DatasetReader

    with tempfile.TemporaryDirectory() as folder:
        path, other = write_dataset(os.path.join(folder, "run.hdf5")), write_dataset(os.path.join(folder, "b.hdf5"))
        with h5py.File(path, "a") as f:
            group = f[f"data/demo_{demo}"]
            for level in range(depth):
                group = group.require_group(f"nested{level}")
            if key in group:
                del group[key]
            _escape(kind, f, group, key, other)
        where = f"'{path}', demo 'demo_{demo}'"
        with DatasetReader(path) as reader:
            for read in (lambda: reader.check_demo(f"demo_{demo}"), lambda: reader.load(f"demo_{demo}", "cpu"),
                         lambda: reader.load_episode(f"demo_{demo}"),
                         lambda: reader.load_arrays(f"demo_{demo}", ("actions",))):
                with pytest.raises(DatasetError) as err:
                    read()
                assert str(err.value).startswith(where) and "\n" not in str(err.value), str(err.value)
            reader.check_demo(f"demo_{1 - demo}")
        output = os.path.join(folder, "merged.hdf5")
        with pytest.raises(DatasetError, match=re.escape(where)):
            merge_datasets([path], output)
        assert sorted(os.listdir(folder)) == ["b.hdf5", "run.hdf5"]


def test_results_that_are_not_eval_results_name_the_file_and_what_is_wrong(tmp_path, merge, capsys):
    """--results files that are no JSON, or JSON without a shard's figures, end with one line naming the file and
    what it lacks (not a bare KeyError such as "error: 'schedules'")."""
    good = {"steps": 10, "num_envs": 2, "inference_calls": 1, "envs_served": 2, "active_env_steps": 20,
            "suspended_env_steps": 0, "held_env_steps": 0, "wall_s": 1.0, "episodes_scored": 0,
            "mean_episode_length": float("nan"), "success_rate": float("nan")}
    cases = {"notes": ("not json", "is not a JSON file of eval.py --results (Expecting value"),
             "other": ({"a": 1}, "is not a JSON file of eval.py --results (a 'header' text"),
             "short": ({"header": "h", "schedules": {"hold": {**good, "wall_s": None}}},
                       "the figures of schedule 'hold' lack the numbers ['wall_s']")}
    for name, (content, message) in cases.items():
        path = tmp_path / f"{name}.json"
        path.write_text(content if isinstance(content, str) else json.dumps(content))
        _one_error_line(capsys, merge(["--results", str(path)]), f"'{path}'", message)
    path = tmp_path / "good.json"
    path.write_text(json.dumps({"header": "h", "schedules": {"hold": good}}))
    assert merge(["--results", str(path)]) == 0


def test_output_under_a_file_names_it(shards, merge, capsys):
    """An --output whose folder would have to be made where a file is: one line naming the output and the file,
    not a bare "[Errno 17] File exists"."""
    output = os.path.join(shards[0], "merged.hdf5")
    _one_error_line(capsys, merge(["--datasets", *shards, "--output", output]),
                    f"Cannot make the folder of the output '{output}': File exists ('{shards[0]}'); choose another")
