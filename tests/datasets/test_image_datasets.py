"""Image datasets end to end on the real camera task: record.py writes uint8 images (chunked, gzip), replay.py
re-renders them bit-exactly (and reports a changed pixel), view_dataset.py makes a GIF and a PNG of them.

The scripts run in the test process through their ``main(argv)``; only ``tools/run.sh`` runs as a process of its
own."""

import os
import shutil
import subprocess

import h5py
import numpy as np
import pytest
from PIL import Image

from helpers import ROOT, load_script

from isaaclab_suspend.datasets.image_frames import CHUNK_START_COLOR, LABEL_HEIGHT

pytestmark = pytest.mark.slow  # camera datasets recorded, replayed, viewed and trained on

TASK = "Isaac-PushCube-Camera-Suspendable"
NUM_EPISODES = 2  # two demos: one with a changed pixel and one without, two rows of stills


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("camera_dataset") / "push_cube_camera.hdf5"
    status = load_script("record").main(["--task", TASK, "--num_envs", str(NUM_EPISODES), "--episodes",
                                         str(NUM_EPISODES), "--chunk", "8", "--output", str(path), "--quiet"])
    assert status == 0 and path.is_file()
    return str(path)


def test_images_are_uint8_chunked_and_compressed(dataset):
    with h5py.File(dataset) as f:
        demos = f["data"]
        assert len(demos) == NUM_EPISODES
        stored = 0
        samples = 0
        for demo in demos.values():
            images = demo["images/scene_camera"]
            assert images.dtype == np.uint8 and images.shape[1:] == (64, 64, 3)
            assert images.shape[0] == demo["actions"].shape[0] == demo.attrs["num_samples"]
            assert images.chunks is not None and images.compression == "gzip"
            assert images[()].std() > 0  # a rendered scene, not a blank buffer
            stored += images.id.get_storage_size()
            samples += images.shape[0]
    # 64x64x3 bytes raw; flat-coloured scenes compress far below that
    assert stored / samples < 64 * 64 * 3 / 10


def test_replay_rerenders_images_exactly_and_reports_a_changed_pixel(dataset, tmp_path, capsys):
    """One replay of every demo of a copy with one pixel of demo_0 changed: states all exact, images exact except
    that pixel (one replay, to keep the test short)."""
    changed = tmp_path / "changed.hdf5"
    shutil.copy(dataset, changed)
    with h5py.File(changed, "r+") as f:
        images = f["data/demo_0/images/scene_camera"]
        images[5, 10, 10] = 255 - images[5, 10, 10]
    status = load_script("replay").main([str(changed), "--check_images", "--quiet"])
    out = capsys.readouterr().out
    assert status == 1, out[-3000:]
    assert "max pixel error" in out
    assert f"{NUM_EPISODES} demos replayed in {NUM_EPISODES} envs; largest state error 0 " in out, out[-3000:]
    assert "1 above it: demo_0." in out


def test_view_dataset_writes_gif_and_png(dataset, tmp_path):
    gif, png = tmp_path / "demos.gif", tmp_path / "grid.png"
    assert load_script("view_dataset").main([dataset, "--output", str(gif), "--png", str(png), "--columns", "2",
                                             "--scale", "2", "--png_steps", "3"]) == 0
    with h5py.File(dataset) as f:
        longest = max(d.attrs["num_samples"] for d in f["data"].values())
        images = f["data/demo_0/images/scene_camera"]
        first, last = images[0], images[-1]
    with Image.open(gif) as image:
        # an animation of the longest demo's steps (Pillow drops a frame identical to the one before); the demos
        # side by side in 2 columns, scale 2, each tile 64 px and a 1 px gap
        rows = -(-NUM_EPISODES // 2)
        assert image.size == (2 * 2 * 65, rows * 2 * 65) and longest // 2 < image.n_frames <= longest
    grid = np.asarray(Image.open(png).convert("RGB"))
    row = 128 + LABEL_HEIGHT + 1  # a 2x still, its label beneath, a gap
    assert grid.shape == (NUM_EPISODES * row, 3 * 129, 3)
    # demo_0 at step 0, upscaled 2x, with the one-pixel border of a step that starts a chunk (the dataset has
    # chunk provenance, H = 8, and step 0 always starts one); its last still is its own last step, not a repeat
    tile = grid[:128:2, :128:2]
    assert np.array_equal(tile[1:-1, 1:-1], first[1:-1, 1:-1])
    assert (tile[[0, -1]] == CHUNK_START_COLOR).all() and (tile[:, [0, -1]] == CHUNK_START_COLOR).all()
    assert np.array_equal(grid[2:126:2, 2 * 129 + 2 : 2 * 129 + 126 : 2], last[1:-1, 1:-1])
    label = grid[128:128 + LABEL_HEIGHT, :129]
    assert (label < 128).any() and (label == 255).mean() > 0.5  # dark text ("demo_0 t=0") on white


def test_run_sh_keeps_the_callers_directory_and_view_dataset_writes_both_into_outputs(dataset, tmp_path,
                                                                                     monkeypatch):
    """``bash <repo>/tools/run.sh python <repo>/scripts/view_dataset.py rel.hdf5`` from another directory: the
    relative dataset path and the default ``outputs/`` folder are the caller's, and both the GIF and the PNG grid
    are written there. In two halves: run.sh, a process of its own, runs its command in the caller's directory (a
    relative path read there); view_dataset.py's ``main``, run in that directory, reads and writes there."""
    caller = tmp_path / "elsewhere"
    caller.mkdir()
    shutil.copy(dataset, caller / "rel.hdf5")
    probe = "import os, sys; print(os.getcwd()); print(open(sys.argv[1], 'rb').read(8))"
    run = subprocess.run(["bash", os.path.join(ROOT, "tools", "run.sh"), "python", "-c", probe, "rel.hdf5"],
                         cwd=caller, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert run.stdout.splitlines() == [str(caller), repr(b"\x89HDF\r\n\x1a\n")], run.stdout  # HDF5's signature
    monkeypatch.chdir(caller)
    assert load_script("view_dataset").main(["rel.hdf5"]) == 0
    written = sorted(p.name for p in (caller / "outputs").iterdir())
    assert written == ["rel_scene_camera.gif", "rel_scene_camera.png"]
    assert not os.path.exists(os.path.join(ROOT, "outputs", "rel_scene_camera.gif"))
    with Image.open(caller / "outputs" / "rel_scene_camera.png") as grid:
        # 4 stills per demo by default, a row per demo, scale 3, each still's label beneath it
        assert grid.size == (4 * (64 * 3 + 1), NUM_EPISODES * (64 * 3 + LABEL_HEIGHT + 1))


def test_view_dataset_bad_camera_exits_2(dataset, tmp_path, capsys):
    assert load_script("view_dataset").main([dataset, "--camera", "wrist", "--output", str(tmp_path / "x.gif")]) == 2
    err = capsys.readouterr().err
    assert "no camera 'wrist'" in err and "scene_camera" in err and "Traceback" not in err, err
    assert not os.path.exists(tmp_path / "x.gif")


def test_image_chunk_policy_trains_and_evaluates(dataset, tmp_path, capsys):
    """train_chunk_policy.py --camera learns from the images; eval.py runs the checkpoint on the camera task."""
    checkpoint = tmp_path / "image_policy.pt"
    # 2 optimiser steps: the image pipeline runs forward and backward; learning itself is learning/test_image_chunk_policy.py's
    status = load_script("train_chunk_policy").main(["--dataset", dataset, "--camera", "scene_camera", "--chunk", "8",
                                                     "--steps", "2", "--batch_size", "32", "--val_fraction", "0.5",
                                                     "--output", str(checkpoint), "--quiet"])
    out = capsys.readouterr().out
    assert status == 0, out[-3000:]
    assert "camera 'scene_camera' (64, 64, 3)" in out
    # 2 envs, 9 steps, H = 8: the checkpoint is called at two ticks on rendered frames
    status = load_script("eval").main(["--checkpoint", str(checkpoint), "--num_envs", "2", "--steps", "9",
                                       "--timeline", "", "--report", "", "--quiet"])
    out = capsys.readouterr().out
    assert status == 0, out[-3000:]
    assert f"{TASK}, chunk policy {checkpoint}" in out and "inference_calls" in out, out[-3000:]
