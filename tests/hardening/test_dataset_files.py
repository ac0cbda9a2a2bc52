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


def test_runs_without_a_run_log_name_the_file_and_what_is_wrong(tmp_path, merge, capsys):
    """--runs takes eval.py's run folders (or their run logs): a folder without one, an --episode_log given for a
    run log and an incomplete set of shard folders end with one line naming the file and what to give."""
    folder = tmp_path / "run-shard0of1"
    folder.mkdir()
    _one_error_line(capsys, merge(["--runs", str(folder)]), f"'{folder / 'episodes.jsonl'}' is not there: give each"
                    " shard's run folder of eval.py")
    log = tmp_path / "episodes.jsonl"
    log.write_text(json.dumps({"env_id": 0, "episode": 0, "success": True, "length": 5}) + "\n")
    _one_error_line(capsys, merge(["--runs", str(log)]), f"'{log}' line 1 is not a run log record")
    (tmp_path / "run-shard0of2").mkdir()
    _one_error_line(capsys, merge(["--runs", str(tmp_path / "run-shard0of2")]), "shards of the set are missing",
                    str(tmp_path / "run-shard1of2"))


def test_output_under_a_file_names_it(shards, merge, capsys):
    """An --output whose folder would have to be made where a file is: one line naming the output and the file,
    not a bare "[Errno 17] File exists"."""
    output = os.path.join(shards[0], "merged.hdf5")
    _one_error_line(capsys, merge(["--datasets", *shards, "--output", output]),
                    f"Cannot make the folder of the output '{output}': File exists ('{shards[0]}'); choose another")


def _frames_shorter_than_the_demo(path):
    with h5py.File(path, "a") as f:  # chunk provenance of 4 steps, 3 frames: was an IndexError traceback
        for name in ("demo_0", "demo_1"):
            f[f"data/{name}/chunk/call"] = np.array([0, 0, 0, 1])
        del f["data/demo_1/images/scene_camera"]
        f["data/demo_1/images/scene_camera"] = np.zeros((3, 8, 8, 3), np.uint8)


def test_view_dataset_frames_not_one_per_step_or_too_wide_are_one_line(tmp_path, capsys):
    """Frames fewer than the demo's steps, and a 1 x 60000 px frame (a GIF's sides are 16-bit): one line, exit
    status 2, nothing written (were an IndexError and a struct.error traceback)."""
    view = load_script("view_dataset").main
    path = write_dataset(tmp_path / "short.hdf5", lengths=(4, 4), images=[np.zeros((4, 8, 8, 3), np.uint8)] * 2)
    _frames_shorter_than_the_demo(path)
    _one_error_line(capsys, view([path, "--output", str(tmp_path / "v.gif")]), "demo 'demo_1'",
                    "'scene_camera' holds 3 frames, the demo has {'actions': 4, 'chunk/call': 4, 'num_samples': 4}")
    wide = write_dataset(tmp_path / "wide.hdf5", lengths=(2,), images=[np.zeros((2, 1, 60000, 3), np.uint8)])
    _one_error_line(capsys, view([wide, "--output", str(tmp_path / "v.gif")]), "frames of 1 x 60000 px make the GIF",
                    "over 65535 px a side")
    assert not os.path.exists(tmp_path / "v.gif") and not os.path.exists(tmp_path / "v.png")
    assert view([wide, "--output", str(tmp_path / "v.gif"), "--scale", "1", "--columns", "1", "--png_steps", "1"]) == 0


@pytest.mark.parametrize("value", [np.nan, -np.inf])
def test_merge_refuses_nan_and_inf_as_replay_and_export_do(value, shards, tmp_path, merge, capsys):
    """A shard whose demo holds NaN or inf (in a member replay does not read, too) is refused with the line replay
    gives, naming file, demo, key and sample, and no output or partial file is left (was merged, exit 0)."""
    with h5py.File(shards[1], "a") as f:
        f["data/demo_0/obs"] = np.zeros((3, 2), np.float32)
        f["data/demo_0/obs"][2, 1] = value
    output = tmp_path / "merged.hdf5"
    found = "nan" if np.isnan(value) else "inf"
    _one_error_line(capsys, merge(["--datasets", *shards, "--output", str(output)]), f"'{shards[1]}', demo 'demo_0'",
                    f"'obs' holds a non-finite value ({found}) at sample 2")
    assert sorted(os.listdir(tmp_path)) == sorted(map(os.path.basename, shards))
    with pytest.raises(DatasetError, match=re.escape(f"'obs' holds a non-finite value ({found}) at sample 2")):
        from isaaclab_suspend.datasets import DatasetReader

        with DatasetReader(shards[1]) as reader:
            reader.load_arrays("demo_0", ("obs",))


def test_a_terminated_merge_leaves_no_partial_file(shards, tmp_path):
    """SIGTERM while the merge writes (after its first demo): one line, exit status 130, and neither the output nor
    the hidden partial file beside it is left (the partial file was)."""
    import subprocess
    import sys

    from helpers import ROOT

    # the script run as __main__ (its own sys.exit), in a process of its own that the signal may end; no test
    # helpers imported there, only what the script imports
    code = ("import os, runpy, signal, sys; from isaaclab.utils.datasets import HDF5DatasetFileHandler as H;"
            " write = H.write_episode;"
            " H.write_episode = lambda self, *a, **k: (write(self, *a, **k), os.kill(os.getpid(), signal.SIGTERM));"
            " sys.argv[0] = os.path.join('scripts', 'merge_shards.py'); runpy.run_path(sys.argv[0], run_name='__main__')")
    output = tmp_path / "out" / "merged.hdf5"
    run = subprocess.run([sys.executable, "-c", code, "--datasets", *shards, "--output", str(output)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert run.returncode == 130 and "Traceback" not in run.stderr, run.stderr
    assert lines == ["merge_shards.py: interrupted: no merged dataset written."], run.stderr
    assert os.listdir(output.parent) == []


def _big_obs(path, mib: int) -> int:
    """Add a gzip'd float64 'obs' of ``mib`` MiB of zeros (a few kB stored) to demo_0; returns its decoded bytes."""
    with h5py.File(path, "a") as f:
        n = f["data/demo_0"].attrs["num_samples"]
        width = mib * 2**20 // (8 * n)
        obs = f["data/demo_0"].create_dataset("obs", (n, width), "f8", chunks=(256, width), compression="gzip")
        for t in range(0, n, 256):
            obs[t: t + 256] = 0.0
        return obs.size * 8


def test_budgets_count_what_is_decoded_and_allocated_and_replay_reads_only_its_members(tmp_path, monkeypatch, capsys):
    """A small file holding a large gzip'd 'obs': replay's loader never reads it (a spy on h5py's reads) and so
    fits a budget smaller than it; the export, which makes float32 columns of it, counts those copies too and
    refuses, in one line with exit status 2, a file whose decoded size fits the budget but whose export would not
    (was: replay read and counted every member, the export counted the decoded size only); vectors so wide that
    LeRobot's statistics alone would not fit are refused before a frame is read."""
    from isaaclab_suspend.datasets import DatasetReader, reader as reader_module
    from isaaclab_suspend.lerobot.export import EXPORT_COPIES

    path = write_dataset(tmp_path / "small.hdf5", lengths=(2048,))
    decoded = _big_obs(path, 16)  # 1024 columns
    assert os.path.getsize(path) < decoded / 50
    read = []
    for name in ("__getitem__", "__array__", "read_direct"):
        original = getattr(h5py.Dataset, name)
        monkeypatch.setattr(h5py.Dataset, name, lambda self, *a, _f=original, **k: (read.append(self.name),
                                                                                      _f(self, *a, **k))[1])
    monkeypatch.setattr(reader_module, "available_memory_bytes", lambda: decoded)  # a budget of half 'obs'
    with DatasetReader(path) as reader:
        demo = reader.load("demo_0", "cpu")
    assert demo.num_samples == 2048 and read and not [name for name in read if "/obs" in name], read
    monkeypatch.undo()
    budget = int(decoded * (1 + EXPORT_COPIES) / 2)  # the decoded 'obs' fits, its export's copies do not
    monkeypatch.setattr(reader_module, "available_memory_bytes", lambda: 2 * budget)
    with h5py.File(path, "a") as f:
        f["data"].attrs["env_args"] = json.dumps({"env_name": TASK, "step_dt": 0.02, "sim_args": {"num_envs": 2}})
    status = load_script("export_lerobot").main([path, "--output", str(tmp_path / "lerobot"), "--no_video"])
    _one_error_line(capsys, status, "demo 'demo_0' needs", "MiB decoded, with the copies made of it", "over the")
    assert not os.path.exists(tmp_path / "lerobot")
    wide = write_dataset(tmp_path / "wide.hdf5", lengths=(4,))
    with h5py.File(wide, "a") as f:  # 2**14 columns: 1.3 GB of LeRobot's statistics (2**18 took past 15 GB)
        f["data/demo_0/obs"] = np.zeros((4, 2**14), np.float32)
        f["data"].attrs["env_args"] = json.dumps({"env_name": TASK, "step_dt": 0.02})
    monkeypatch.setattr(reader_module, "available_memory_bytes", lambda: 2 * 2**30)
    status = load_script("export_lerobot").main([wide, "--output", str(tmp_path / "lerobot"), "--no_video"])
    _one_error_line(capsys, status, "LeRobot's statistics of 16386 vector columns would take 1250 MiB, over the 1024"
                    " MiB")
    assert not os.path.exists(tmp_path / "lerobot")
