"""LeRobot interop on the real camera task: export_lerobot.py writes what LeRobot's own reader gives back frame by
frame (exactly without video), a checkpoint of a short ``lerobot-train`` run drives the env through
``eval.py --checkpoint`` and through the real ``lerobot-eval`` with the project's env plugin (the same episodes,
ended envs frozen), bad inputs end with one line and exit status 2.

The project's scripts run in the test process through their ``main(argv)``; ``lerobot-train``, ``lerobot-eval`` and
the quiet video export (whose noise comes from a fresh interpreter's imports) run as processes of their own."""

import json
import os
import re
import shutil
import subprocess
import sys

import h5py
import numpy as np
import pytest
import torch

from helpers import ROOT, check_usage_errors, load_script

from isaaclab_suspend.lerobot.layout import MODALITY_PATH, SIDECAR_PATH, ExportSidecar
from isaaclab_suspend.lerobot.policy import HISTORY_KEY, LeRobotChunkModel
from isaaclab_suspend.learning import load_chunk_policy
from isaaclab_suspend.tensor_tree import select_rows
from isaaclab_suspend.tasks.env_factory import open_env

pytestmark = pytest.mark.slow  # LeRobot export, checkpoints and its trainer

TASK = "Isaac-PushCube-Camera-Suspendable"
CAMERA = "observation.images.scene_camera"
LEROBOT_BIN = os.path.dirname(sys.executable)


def _run(args: list, timeout: int = 300, **env) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", **env})


# 4 demos (one episode per env, of different lengths with --desync): the checkpoint lerobot-train makes of their export
# runs its episodes to the time-out (see test_lerobot_eval_on_isaac_lab_equals_eval_py_with_per_env_quotas)
NUM_DEMOS = 4


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> str:
    """4 demos of the rsl_rl expert (episodes of about 40 steps) on the camera task, recorded by record.py."""
    path = tmp_path_factory.mktemp("lerobot") / "push_cube_camera.hdf5"
    status = load_script("record").main(["--task", TASK, "--checkpoint",
                                         os.path.join(ROOT, "isaaclab_suspend", "rl", "checkpoints",
                                                      "push_cube_rsl_rl.pt"),
                                         "--num_envs", str(NUM_DEMOS), "--episodes", str(NUM_DEMOS), "--desync",
                                         "--output", str(path), "--quiet"])
    assert status == 0 and path.is_file()
    return str(path)


@pytest.fixture(scope="module")
def exported(dataset, tmp_path_factory) -> str:
    """The lossless export (PNG frames)."""
    output = tmp_path_factory.mktemp("lerobot_export") / "push_cube"
    status = load_script("export_lerobot").main([dataset, "--output", str(output), "--no_video", "--repo_id",
                                                 "local/push_cube", "--task", "push the cube"])
    assert status == 0
    return str(output)


def test_export_equals_the_hdf5_frame_by_frame(dataset, exported):
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    ds = LeRobotDataset("local/push_cube", root=exported)
    with h5py.File(dataset) as f:
        names = sorted(f["data"], key=lambda name: int(name.split("_")[1]))
        demos = [{key: f["data"][name][key][()] for key in ("actions", "obs", "images/scene_camera",
                                                               "processed_actions")} for name in names]
    assert ds.num_episodes == len(demos) and ds.fps == 60  # 1 / (dt 1/120 * decimation 2)
    assert ds.num_frames == sum(len(d["actions"]) for d in demos)  # no frame added or dropped
    i = 0
    for episode, demo in enumerate(demos):
        for t in range(len(demo["actions"])):
            frame = ds[i]
            assert int(frame["episode_index"]) == episode and int(frame["frame_index"]) == t
            # the 1-D action carries a zero column (LeRobot squeezes a (1,) feature)
            assert torch.equal(frame["action"], torch.tensor([demo["actions"][t, 0], 0.0]))
            assert torch.equal(frame["observation.state"], torch.from_numpy(demo["obs"][t]))
            assert torch.equal(frame["processed_actions"][:1], torch.from_numpy(demo["processed_actions"][t]))
            pixels = (frame[CAMERA] * 255).round().to(torch.uint8).permute(1, 2, 0)
            assert torch.equal(pixels, torch.from_numpy(demo["images/scene_camera"][t]))
            assert frame["task"] == "push the cube"
            i += 1
    names = ds.meta.features["observation.state"]["names"]
    assert names == ["cart_pos", "cart_vel", "cube_x", "cube_vel_x", "cube_to_target"]
    assert ds.meta.features["action"]["names"] == ["cart_effort", "pad_0"]


def test_quiet_video_export_prints_its_result_and_none_of_the_libraries_noise(dataset, tmp_path):
    """SVT-AV1's banner (``Svt[info]``), FFmpeg's info lines (``[mp4 @ ...]``), torchcodec's loading tracebacks,
    Warp's driver warning and the per-episode progress bars of ``datasets`` stay out of the console. (A process of
    its own: the libraries' noise comes while a fresh interpreter imports them.)"""
    run = _run([sys.executable, "scripts/export_lerobot.py", dataset, "--output", tmp_path / "video", "--quiet"])
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    console = run.stdout + run.stderr
    for noise in ("Svt[", "[mp4 @", "libtorchcodec", "Traceback", "Warp CUDA warning", "Map:", "%|"):
        assert noise not in console, (noise, console[-3000:])
    assert console.strip().splitlines() == [run.stdout.strip()] and " exported to " in run.stdout, console[-3000:]


def test_sidecar_and_modality(dataset, exported):
    with open(os.path.join(exported, SIDECAR_PATH)) as f:
        sidecar = json.load(f)
    with open(os.path.join(exported, MODALITY_PATH)) as f:
        modality = json.load(f)
    assert sidecar["action"] == {"terms": {"cart_effort": 1}, "padded_to": 2}
    assert sidecar["state"]["padded_to"] == 5 and sidecar["cameras"] == ["scene_camera"]
    source = sidecar["source"]
    assert (source["env_name"], source["schedule"], source["chunk_length"], source["seed"], source["num_envs"],
            source["demos"]) == (TASK, "global_clock", 1, 42, NUM_DEMOS, NUM_DEMOS)
    with h5py.File(dataset) as f:
        assert source["frames"] == sum(len(f["data"][name]["actions"]) for name in f["data"])
    assert modality["state"]["cube_x"] == {"start": 2, "end": 3}
    assert modality["action"] == {"cart_effort": {"start": 0, "end": 1}}
    assert modality["video"] == {"scene_camera": {"original_key": CAMERA}}
    assert modality["annotation"] == {"human.task_description": {"original_key": "task_index"}}


def test_sidecar_whose_widths_do_not_add_up_is_refused(exported, tmp_path):
    """A sidecar padding a vector to fewer columns than its terms (the adapter would crop the state) or with a
    width that is no positive int is not one the exporter wrote: refused when read."""
    with open(os.path.join(exported, SIDECAR_PATH)) as f:
        good = json.load(f)
    assert ExportSidecar.read(os.path.join(exported, SIDECAR_PATH)).state.dim == 5
    for vector, layout, message in (("state", {"terms": good["state"]["terms"], "padded_to": 3}, "is narrower"),
                                    ("action", {"terms": {"cart_effort": -1}, "padded_to": 2}, "positive ints")):
        path = tmp_path / f"{vector}.json"
        path.write_text(json.dumps({**good, vector: layout}))
        with pytest.raises(ValueError, match=f"is not a sidecar of scripts/export_lerobot.py .*{message}"):
            ExportSidecar.read(str(path))


def test_video_export_reads_back_close(dataset, exported, tmp_path):
    """h264 is lossy: the same frames come back, each close to the recorded one."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    output = tmp_path / "video"
    assert load_script("export_lerobot").main([dataset, "--output", str(output), "--vcodec", "h264"]) == 0
    video, lossless = LeRobotDataset("local/video", root=str(output)), LeRobotDataset("local/x", root=exported)
    assert video.num_frames == lossless.num_frames and video.meta.features[CAMERA]["dtype"] == "video"
    for i in (0, video.num_frames // 2, video.num_frames - 1):
        assert torch.equal(video[i]["action"], lossless[i]["action"])
        assert (video[i][CAMERA] - lossless[i][CAMERA]).abs().mean() < 0.05


def test_bad_inputs_exit_2(dataset, exported, tmp_path, capsys):
    not_hdf5 = tmp_path / "notes.hdf5"
    not_hdf5.write_text("not a dataset")
    no_obs = tmp_path / "no_obs.hdf5"
    shutil.copy(dataset, no_obs)
    with h5py.File(no_obs, "r+") as f:
        del f["data/demo_0/obs"]
    absurd = {}
    for step_dt in (5e-324, 1e-300, 1e300):  # were an OverflowError traceback and a dataset at 1e300 fps
        absurd[step_dt] = tmp_path / f"step_dt_{step_dt}.hdf5"
        shutil.copy(dataset, absurd[step_dt])
        with h5py.File(absurd[step_dt], "r+") as f:
            f["data"].attrs["env_args"] = json.dumps({**json.loads(f["data"].attrs["env_args"]), "step_dt": step_dt})
    check_usage_errors(load_script("export_lerobot"), {
        **{(str(path), "--output", str(tmp_path / f"e{i}")): f"'env_args.step_dt' must be a control period from"
           f" 0.0001 to 60 s, got {step_dt!r}" for i, (step_dt, path) in enumerate(absurd.items())},
        (str(tmp_path / "missing.hdf5"), "--output", str(tmp_path / "a")): "dataset file not found",
        (dataset, "--output", exported): "exists: choose a new directory",
        (str(not_hdf5), "--output", str(tmp_path / "b")): "is not a readable Isaac Lab dataset",
        (str(no_obs), "--output", str(tmp_path / "c")): "has no per-sample 'obs'",
        (dataset, "--output", str(tmp_path / "d"), "--vcodec", "mpeg2"): "invalid choice",
        (dataset, "--output", os.path.join(dataset, "sub")): f"--output '{os.path.join(dataset, 'sub')}': '{dataset}'"
                                                             " is a file, not a folder",
    }, capsys)
    assert not os.path.exists(tmp_path / "c") and not os.path.exists(tmp_path / "e0")


@pytest.fixture(scope="module")
def checkpoint(exported, tmp_path_factory) -> str:
    """A tiny ACT trained for 2 steps by lerobot-train on the export (CPU, offline)."""
    output = tmp_path_factory.mktemp("act") / "run"
    run = _run([os.path.join(LEROBOT_BIN, "lerobot-train"), "--dataset.repo_id=local/push_cube",
                f"--dataset.root={exported}", "--policy.type=act", "--policy.device=cpu", "--policy.push_to_hub=false",
                "--policy.pretrained_backbone_weights=null", "--policy.chunk_size=8", "--policy.n_action_steps=8",
                "--policy.dim_model=32", "--policy.dim_feedforward=64", "--policy.n_heads=2",
                "--policy.n_encoder_layers=1", "--policy.n_vae_encoder_layers=1", "--batch_size=4", "--steps=2",
                "--save_freq=2", "--num_workers=0", "--wandb.enable=false", f"--output_dir={output}"])
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    # where torchcodec cannot load FFmpeg (as on CI), the plugin has LeRobot say so in one line, no traceback
    assert "Traceback" not in run.stderr and "libtorchcodec" not in run.stderr, run.stderr[-3000:]
    return str(output / "checkpoints" / "last" / "pretrained_model")


def test_lerobot_checkpoint_drives_the_env(checkpoint, capsys):
    # 2 envs, 9 steps, H = 8: a second tick, whose chunk comes from frames rendered after the first chunk acted
    status = load_script("eval").main(["--checkpoint", checkpoint, "--num_envs", "2", "--steps", "9", "--timeline",
                                       "", "--report", ""])
    out = capsys.readouterr().out
    assert status == 0, out[-3000:]
    assert f"{TASK}, chunk policy {checkpoint}: 2 envs, 9 steps, H = 8" in out, out[-3000:]
    calls = [line for line in out.splitlines() if line.startswith("| inference_calls")]
    assert calls and int(calls[0].split("|")[2]) >= 2, out[-3000:]  # 9 steps, H = 8: a call per tick


def test_batched_call_equals_single_calls_and_drops_the_pad(checkpoint, dataset):
    model = load_chunk_policy(checkpoint)
    assert isinstance(model, LeRobotChunkModel) and model.chunk_length == 8 and model.task == TASK
    with h5py.File(dataset) as f:
        demo = f["data/demo_0"]
        obs = {"policy": torch.from_numpy(demo["obs"][:3]),
               "images": {"scene_camera": torch.from_numpy(demo["images/scene_camera"][:3])}}
    env_ids = torch.arange(3)
    chunk = model(obs, env_ids)
    assert chunk.shape == (3, 8, 1) and chunk.dtype == torch.float32
    for b in range(3):
        row = {"policy": obs["policy"][b: b + 1], "images": {"scene_camera": obs["images"]["scene_camera"][b: b + 1]}}
        assert torch.allclose(model(row, env_ids[b: b + 1]), chunk[b: b + 1], atol=1e-5)


def test_checkpoint_refuses_an_env_with_frames_of_another_size(checkpoint):
    """The policy was trained on the export's frames: an env whose camera renders another size is refused by the
    check every script makes before the run, not fed to the network."""
    model = load_chunk_policy(checkpoint)
    size = tuple(model.config.input_features[CAMERA].shape[1:])
    with open_env(TASK, 1, scene__scene_camera__height=size[0] + 8, scene__scene_camera__width=size[1]) as env:
        with pytest.raises(ValueError, match=f"it takes 'scene_camera' frames of {size[0]} x {size[1]} px, the"
                                             f" env's are {size[0] + 8} x {size[1]} px"):
            load_chunk_policy(checkpoint, env=env)


def test_chunk_shorter_than_planned_and_warning_for_a_chunk_longer_than_the_episodes(checkpoint, capsys):
    """``--chunk N`` executes the first N of the policy's ``chunk_size`` actions (LeRobot's ``n_action_steps``), more
    is refused; an H longer than the episodes it was trained on or than the env's gets a warning that names the
    flags shortening it, when the script builds the model for the env."""
    from isaaclab_suspend.cli import make_chunk_model

    evaluate = load_script("eval")
    args = evaluate.parse_args(["--checkpoint", checkpoint, "--chunk", "4", "--num_envs", "1"])
    assert args.chunk == 4 and args.model.chunk_length == 4 and args.model.max_chunk_length == 8
    with pytest.raises(SystemExit) as exit_:
        evaluate.parse_args(["--checkpoint", checkpoint, "--chunk", "9"])
    assert exit_.value.code == 2 and "H must be 1 to 8, got 9" in capsys.readouterr().err
    args = evaluate.parse_args(["--checkpoint", checkpoint, "--num_envs", "1"])
    with open_env(TASK, 1, episode_length_s=0.1) as env:  # 6-step episodes, H = 8
        make_chunk_model(args, env)
        err = capsys.readouterr().err
        assert "warning: LeRobot policy" in err and "H = 8 (its n_action_steps) is longer than the env's episodes" \
            " (at most 6 steps)" in err and "--model.chunk_length N (N <= its chunk_size 8)" in err, err
        assert "--policy.chunk_size=N --policy.n_action_steps=N" in err
        args.model.sidecar.source["frames"] = 5 * NUM_DEMOS  # demos of 5 steps: shorter than H = 8 too
        assert "the episodes it was trained on (mean 5.0 steps)" in args.model.chunk_warning(env)
        args.model.set_chunk_length(4)
        assert args.model.chunk_warning(env) is None


def test_checkpoint_that_would_import_code_is_refused(checkpoint, tmp_path, capsys):
    bad = tmp_path / "pretrained_model"
    shutil.copytree(checkpoint, bad)
    with open(bad / "policy_preprocessor.json") as f:
        processor = json.load(f)
    processor["steps"][0] = {"class": "os.system", "config": {}}
    with open(bad / "policy_preprocessor.json", "w") as f:
        json.dump(processor, f)
    empty = tmp_path / "empty"
    empty.mkdir()
    evaluate = load_script("eval")
    for path, message in ((bad, "names classes to import (['os.system'])"),
                          (empty, "is a directory but not a LeRobot pretrained_model")):
        with pytest.raises(SystemExit) as exit_:
            evaluate.parse_args(["--checkpoint", str(path)])
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and message in err and "Traceback" not in err, err
    (bad / "model.safetensors").write_bytes(b"\x80\x04 a pickle, not safetensors")
    with pytest.raises(ValueError, match="names classes to import"):
        LeRobotChunkModel(str(bad))


def test_checkpoint_lerobot_cannot_load_is_one_line(checkpoint, tmp_path, capsys):
    """A corrupt model.safetensors, or a checkpoint without its processor files (an older LeRobot's), stops
    eval.py while parsing with one line and exit status 2, not with the loader's traceback."""
    corrupt, unprocessed = tmp_path / "corrupt", tmp_path / "unprocessed"
    for copy in (corrupt, unprocessed):
        shutil.copytree(checkpoint, copy)
    (corrupt / "model.safetensors").write_bytes(b"\x80\x04 a pickle, not safetensors")
    for name in ("policy_preprocessor.json", "policy_postprocessor.json"):
        os.remove(unprocessed / name)
    for path, message in ((corrupt, "Error while deserializing header"), (unprocessed, "requires migration")):
        with pytest.raises(SystemExit) as exit_:
            load_script("eval").parse_args(["--checkpoint", str(path)])
        err = capsys.readouterr().err
        (line,) = [line for line in err.splitlines() if line.strip()][-1:]
        assert exit_.value.code == 2 and "Traceback" not in err, err
        assert f"error: LeRobot cannot load '{path}': " in line and message in line, err


def _edited_copy(checkpoint, directory, name: str, edit) -> str:
    """A copy of the checkpoint whose JSON file ``name`` went through ``edit`` (it changes the loaded object)."""
    shutil.copytree(checkpoint, directory)
    with open(directory / name) as f:
        content = json.load(f)
    edit(content)
    with open(directory / name, "w") as f:
        json.dump(content, f)
    return str(directory)


def _state_file(processor: dict, value: str) -> None:
    next(step for step in processor["steps"] if step.get("state_file"))["state_file"] = value


HOSTILE_CHECKPOINTS = {
    "state file outside": ("policy_preprocessor.json", lambda p: _state_file(p, "../../x.safetensors"),
                           "resolves to .*x.safetensors', outside the checkpoint"),
    "dim_feedforward 4e6": ("config.json", lambda c: c.update(dim_feedforward=4_000_000),
                            "declares a network of other sizes than model.safetensors holds: .*4000000"),
    "chunk_size 1e12": ("config.json", lambda c: c.update(chunk_size=10**12),
                        "declares chunk_size = 1000000000000, more than all"),
    "unknown field": ("config.json", lambda c: c.update(from_lerobot_0_9=True),
                      "does not fit this LeRobot's config of that type: The fields `from_lerobot_0_9` are not valid"
                      " for ACTConfig"),
    "other type": ("config.json", lambda c: c.update(type="diffusion"),
                   "config.json \\('diffusion'\\) does not fit this LeRobot's config of that type: The fields"
                   " `chunk_size`"),
    "wrong type of a field": ("config.json", lambda c: c.update(dim_model="wide"),
                              "`dim_model`: Couldn't parse 'wide' into an int"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_CHECKPOINTS))
def test_checkpoint_cannot_make_the_loader_read_outside_or_allocate(checkpoint, tmp_path, capsys, case):
    """What a checkpoint names is read inside it, its declared sizes are checked against its weights before a
    network is built, a field this LeRobot does not know is named: each is one line from eval.py, exit status 2
    (were: a file outside read, 4.3 GB allocated before the size-mismatch line, draccus' traceback and exit 1)."""
    import resource

    name, edit, message = HOSTILE_CHECKPOINTS[case]
    state = next(f for f in os.listdir(checkpoint) if f.startswith("policy_pre") and f.endswith(".safetensors"))
    shutil.copy(os.path.join(checkpoint, state), tmp_path / "x.safetensors")  # a real state file, outside
    path = _edited_copy(checkpoint, tmp_path / "a" / "pretrained_model", name, edit)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(SystemExit) as exit_:
        load_script("eval").parse_args(["--checkpoint", path])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith((" ", "usage:"))]
    assert exit_.value.code == 2 and "Traceback" not in err and len(lines) == 1, err
    assert re.search(message, lines[0]), lines[0]
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak < 512 * 1024  # kB: under 512 MiB more


def test_checkpoint_files_must_be_regular_bounded_and_inside(checkpoint, tmp_path):
    """A symlink out of the checkpoint (to /dev/zero: was read until MemoryError), a FIFO, a sparse 64 GiB
    config.json (was a MemoryError traceback): each refused with one error before anything is read."""
    cases = {}
    for case in ("dev zero", "fifo", "sparse", "symlinked state"):
        copy = tmp_path / case.replace(" ", "_")
        shutil.copytree(checkpoint, copy)
        cases[case] = copy
    (cases["dev zero"] / "config.json").unlink()
    os.symlink("/dev/zero", cases["dev zero"] / "config.json")
    (cases["fifo"] / "policy_postprocessor.json").unlink()
    os.mkfifo(cases["fifo"] / "policy_postprocessor.json")
    os.truncate(cases["sparse"] / "config.json", 64 * 2**30)
    state = next(f for f in os.listdir(checkpoint) if f.endswith(".safetensors") and f.startswith("policy_pre"))
    shutil.copy(cases["symlinked state"] / state, tmp_path / "outside.safetensors")
    (cases["symlinked state"] / state).unlink()
    os.symlink(tmp_path / "outside.safetensors", cases["symlinked state"] / state)
    for case, message in (("dev zero", "resolves to '/dev/zero', outside the checkpoint"),
                          ("fifo", "is not a regular file"),
                          ("sparse", "holds 68719476736 bytes, over the 16777216 read of such a file"),
                          ("symlinked state", "outside.safetensors', outside the checkpoint")):
        with pytest.raises(ValueError, match=message) as info:
            LeRobotChunkModel(str(cases[case]))
        assert "\n" not in str(info.value)


def test_pretrained_backbone_weights_are_never_downloaded(checkpoint, tmp_path, monkeypatch):
    """A config naming torchvision's ImageNet weights (their download is a pickled .pth): the network is built
    without them, with no socket opened, and the checkpoint's weights give the same chunks."""
    import socket

    path = _edited_copy(checkpoint, tmp_path / "pretrained_model", "config.json",
                        lambda c: c.update(pretrained_backbone_weights="ResNet18_Weights.IMAGENET1K_V1"))

    def no_network(*args, **kwargs):
        raise AssertionError("the loader opened a network connection")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(torch.hub, "load_state_dict_from_url", no_network)
    model, reference = LeRobotChunkModel(path), LeRobotChunkModel(checkpoint)
    assert model.config.pretrained_backbone_weights is None
    obs = {"policy": torch.zeros(2, reference.sidecar.state.dim),
           "images": {cam: torch.zeros(2, *reference.config.input_features[f"observation.images.{cam}"].shape[1:], 3,
                                       dtype=torch.uint8) for cam in reference.sidecar.cameras}}
    assert torch.equal(model(obs, torch.arange(2)), reference(obs, torch.arange(2)))


def test_history_advances_per_active_step_stands_still_while_suspended_refills_at_restart(checkpoint):
    """The rings of a policy with ``n_obs_steps`` 3 (Diffusion-style; Diffusion itself needs ``diffusers``, which the
    venv lacks, so the trained ACT is given 3 steps) fed by the ``observe_step`` hook, as ActionChunkingPolicy feeds
    it every step: an env's ring advances on each step it moved, stands still while it is suspended (whatever its
    observation), and is filled with its observation when its episode restarts."""
    model = load_chunk_policy(checkpoint)
    obs = {"policy": torch.zeros(3, 5), "images": {"scene_camera": torch.zeros(3, 8, 8, 3, dtype=torch.uint8)}}
    assert model.observe_step(obs, torch.ones(3, dtype=torch.bool), None) is obs  # ACT: n_obs_steps 1
    model.n_obs_steps = 3
    with pytest.raises(RuntimeError, match="observe_step hook"):
        model(obs, torch.arange(3))

    def step(k: int, moved: list[bool], restarted: list[bool] | None) -> dict:
        obs = {"policy": 10.0 * k + torch.arange(3.0).unsqueeze(1).expand(3, 5),
               "images": {"scene_camera": torch.full((3, 8, 8, 3), k, dtype=torch.uint8)}}
        fed = model.observe_step(obs, torch.tensor(moved), None if restarted is None else torch.tensor(restarted))
        assert fed["policy"] is obs["policy"] and fed[HISTORY_KEY]["policy"].shape == (3, 3, 5)
        assert torch.equal(fed[HISTORY_KEY]["policy"][..., 0] % 10, torch.arange(3.0).unsqueeze(1).expand(3, 3))
        assert torch.equal(fed[HISTORY_KEY]["images"]["scene_camera"][:, :, 0, 0, 0].float(),
                           fed[HISTORY_KEY]["policy"][..., 0] // 10)  # the frames move with the state
        return fed

    def steps(fed: dict) -> torch.Tensor:  # env, slot (oldest first) -> the step the observation is from
        return fed[HISTORY_KEY]["policy"][..., 0] // 10

    first = step(0, [True] * 3, [True] * 3)
    assert torch.equal(steps(first), torch.zeros(3, 3))  # the first step fills every ring
    assert torch.equal(steps(step(1, [True] * 3, None)), torch.tensor([[0.0, 0, 1], [0, 0, 1], [0, 0, 1]]))
    suspended = step(2, [True, False, True], None)  # env 1 suspended: its ring stands still
    assert torch.equal(steps(suspended), torch.tensor([[0.0, 1, 2], [0, 0, 1], [0, 1, 2]]))
    restarted = step(3, [True] * 3, [False, False, True])  # env 2 began an episode
    assert torch.equal(steps(restarted), torch.tensor([[1.0, 2, 3], [0, 1, 3], [3, 3, 3]]))
    assert torch.equal(steps(first), torch.zeros(3, 3))  # what was handed out is never overwritten
    rows = select_rows(restarted, torch.tensor([1, 2]))  # what the policy hands the model for the served envs
    batch = model._features(rows[HISTORY_KEY])
    assert batch["observation.state"].shape == (2, 3, 5) and batch[CAMERA].shape == (2, 3, 3, 8, 8)
    assert torch.equal(batch[CAMERA][:, :, 0, 0, 0] * 255, torch.tensor([[0.0, 1, 3], [3, 3, 3]]))


def test_lerobot_vector_env_freezes_each_env_at_its_episode_end(exported):
    """LeRobot's vector env over one Isaac Lab env: an env whose episode ended is suspended at once, its physics
    state, observation and frame frozen bit for bit while the others finish, with reward 0, no second done and no
    success; the next rollout's reset brings every env back."""
    from isaaclab_suspend.lerobot.env import LeRobotVectorEnv

    from scene_state import physics_tensors

    env = LeRobotVectorEnv(TASK, 3, ExportSidecar.read(os.path.join(exported, SIDECAR_PATH)))
    try:
        obs, _ = env.reset(seed=[5, 6, 7])
        assert obs["agent_pos"].shape == (3, 5) and obs["pixels"]["scene_camera"].shape == (3, 64, 64, 3)
        assert env.call("task_description") == ("push the cube",) * 3 and env.call("_max_episode_steps")[0] == 300
        actions = np.tile(np.float32([[1.0, 0.0]]), (3, 1))  # push forward (the pad column dropped)
        ended, end_steps, frozen = np.zeros(3, dtype=bool), {}, {}
        for step in range(300):
            obs, reward, terminated, truncated, info = env.step(actions)
            done = terminated | truncated
            assert not (done & ended).any() and not reward[ended].any() and not info["is_success"][ended].any()
            for i in np.flatnonzero(done).tolist():
                end_steps[i] = step
                frozen[i] = ([t[i].clone() for t in physics_tensors(env.env)], obs["agent_pos"][i], env.render()[i])
            assert not info["is_success"].any()  # always pushing: the cube passes the target and leaves the rail
            ended |= done
            if ended.all():
                break
        assert ended.all() and len(set(end_steps.values())) >= 2, end_steps  # some froze while others stepped
        now = physics_tensors(env.env)
        for i, (state, agent_pos, frame) in frozen.items():
            assert all(torch.equal(t[i], s) for t, s in zip(now, state)), f"env {i} moved while suspended"
            assert np.array_equal(obs["agent_pos"][i], agent_pos) and np.array_equal(env.render()[i], frame)
        env.reset(seed=[8, 9, 10])
        assert not env.env.suspended_mask.any()
    finally:
        env.close()


def test_lerobot_eval_on_isaac_lab_equals_eval_py_with_per_env_quotas(checkpoint, tmp_path, capsys):
    """The real ``lerobot-eval`` with the plugin: 2 envs in one Isaac Lab env, LeRobot's metrics and videos; its
    episodes are eval.py's with ``--episodes_per_env 1`` on the same seed: the same success per env, and each
    video (frames up to the episode's end) as long as that env's episode."""
    import av

    # 2 envs: two episodes, one per env, to compare with eval.py's
    run = _run([os.path.join(LEROBOT_BIN, "lerobot-eval"), "--env.type=isaaclab_suspend", f"--env.task={TASK}",
                f"--policy.path={checkpoint}", "--eval.n_episodes=2", "--eval.batch_size=2", "--policy.device=cpu",
                "--seed=7", f"--output_dir={tmp_path / 'lerobot_eval'}"])
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    with open(tmp_path / "lerobot_eval" / "eval_info.json") as f:
        info = json.load(f)
    # LeRobot logs its metrics at INFO, after Isaac Lab's launch set the root logger to WARNING
    assert "Overall Aggregated Metrics" in run.stdout + run.stderr, run.stdout[-3000:] + run.stderr[-3000:]
    assert f"'pc_success': {info['overall']['pc_success']}" in run.stdout + run.stderr
    metrics = info["per_task"][0]["metrics"]
    lengths = []
    for path in metrics["video_paths"]:
        with av.open(path) as video:
            lengths.append(sum(1 for _ in video.decode(video=0)))
    log = tmp_path / "episodes.jsonl"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # eval.py with one thread, as lerobot-eval's process runs (OMP_NUM_THREADS=1)
    try:
        status = load_script("eval").main(["--checkpoint", checkpoint, "--num_envs", "2", "--episodes_per_env", "1",
                                           "--seed", "7", "--schedule", "global_clock", "--episode_log", str(log),
                                           "--timeline", "", "--report", "", "--quiet"])
    finally:
        torch.set_num_threads(threads)
    assert status == 0, capsys.readouterr().out[-3000:]
    episodes = sorted((json.loads(line) for line in log.read_text().splitlines()), key=lambda r: r["env_id"])
    assert info["overall"]["n_episodes"] == 2 and len(lengths) == 2
    assert metrics["successes"] == [r["success"] for r in episodes]
    # (the 2-step ACT's episodes may all run to the time-out under push-cube's at-rest success; envs frozen at
    # different episode ends: test_lerobot_vector_env_freezes_each_env_at_its_episode_end)
    assert lengths == [r["length"] for r in episodes], (lengths, episodes)
    assert info["overall"]["pc_success"] == 100 * sum(r["success"] for r in episodes) / 2



def test_lerobot_eval_env_that_does_not_fit_the_policy_is_one_line(checkpoint, capsys):
    """The plugin's env config, as ``lerobot-eval`` calls it, for a task the policy was not trained on: one line,
    exit status 2, before any rollout."""
    from lerobot_env_isaaclab_suspend import IsaacLabSuspendEnv

    for task, policy_path, message in (
            ("Isaac-PushCube-Suspendable", checkpoint, "it was trained on an export of '" + TASK + "'"),
            (TASK, os.path.dirname(checkpoint), "is not a LeRobot pretrained_model directory")):
        with pytest.raises(SystemExit) as exit_:
            IsaacLabSuspendEnv(task=task, policy_path=policy_path).create_envs(1)
        err = capsys.readouterr().err
        (line,) = [line for line in err.splitlines() if line.startswith("lerobot-eval: error:")]
        assert exit_.value.code == 2 and "--env.type=isaaclab_suspend: " in line and message in line, err


def _plugin_error(capsys, make) -> str:
    """The one line, exit status 2 and no traceback of the plugin's ``make()`` (as ``lerobot-eval`` calls it)."""
    with pytest.raises(SystemExit) as exit_:
        make()
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert exit_.value.code == 2 and "Traceback" not in err and len(lines) == 1, err
    assert lines[0].startswith("lerobot-eval: error: --env.type=isaaclab_suspend: "), err
    return lines[0]


@pytest.mark.parametrize("padded_to", [2**31, 3])
def test_lerobot_eval_refuses_the_checkpoints_eval_py_refuses(checkpoint, exported, tmp_path, capsys, padded_to):
    """A sidecar whose action pad the policy does not output (2**31: the plugin allocated until killed; 3: a
    RuntimeError traceback): the plugin and eval.py give the same one line, exit status 2, before any env or
    space is made."""
    import resource

    from lerobot_env_isaaclab_suspend import IsaacLabSuspendEnv

    copy = tmp_path / "pretrained_model"
    shutil.copytree(checkpoint, copy)
    with open(os.path.join(exported, SIDECAR_PATH)) as f:
        sidecar = json.load(f)
    sidecar["action"]["padded_to"] = padded_to
    (copy / os.path.basename(SIDECAR_PATH)).write_text(json.dumps(sidecar))
    message = f"the export's sidecar says 'action' of shape ({padded_to},)."
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    line = _plugin_error(capsys, lambda: IsaacLabSuspendEnv(task=TASK, policy_path=str(copy)).create_envs(1))
    assert line.endswith(message), line
    with pytest.raises(SystemExit) as exit_:
        load_script("eval").parse_args(["--checkpoint", str(copy)])
    err = capsys.readouterr().err
    said = line.split("isaaclab_suspend: ", 1)[1]  # eval.py's line is the plugin's
    assert exit_.value.code == 2 and "Traceback" not in err and err.strip().endswith(said), err
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak < 512 * 1024  # kB: under 512 MiB more


def test_lerobot_eval_settings_are_checked_in_one_line(checkpoint, capsys):
    """``--env.device`` this machine lacks or in a form Warp refuses (``cpu:7``), and ``--env.video_size`` out of 1..1024 (60000: past 3 GiB of frames;
    -3: a traceback before the line): one line, exit status 2, before any env is built."""
    import torch

    from lerobot_env_isaaclab_suspend import IsaacLabSuspendEnv

    missing = f"cuda:{torch.cuda.device_count() + 7}"
    for settings, message in (({"device": missing}, f"--env.device '{missing}': this machine has"),
                              ({"device": "cpu:7"}, "--env.device 'cpu:7' is not a device this package runs on"),
                              ({"video_size": 60000}, "--env.video_size must be an integer from 1 to 1024 [px], got"
                                                      " 60000."),
                              ({"video_size": -3}, "--env.video_size must be an integer from 1 to 1024 [px], got -3.")):
        env = IsaacLabSuspendEnv(task="Isaac-PushCube-Suspendable", policy_path=checkpoint, **settings)
        assert message in _plugin_error(capsys, lambda: env.create_envs(1))


def test_lerobot_eval_env_refuses_non_finite_and_huge_actions(checkpoint, capsys):
    """Actions a policy outputs as NaN or 1e38 (past ActionChunkingPolicyCfg.action_bound): the plugin's env ends
    lerobot-eval with eval.py's line and exit status 2 (it stepped the physics with them and reported NaN metrics,
    exit 0); finite actions step."""
    from lerobot_env_isaaclab_suspend import IsaacLabSuspendEnv

    env = IsaacLabSuspendEnv(task=TASK, policy_path=checkpoint).create_envs(2)["isaaclab_suspend"][0]
    try:
        env.reset(seed=[1, 2])
        for value, said in ((np.nan, "nan"), (1e38, "1e+38")):
            actions = np.zeros((2, 2), np.float32)
            actions[1, 0] = value
            line = _plugin_error(capsys, lambda: env.step(actions))
            assert f"The model returned actions outside [-action_bound, action_bound] = [-1e+06, 1e+06] or" \
                   f" non-finite (NaN or inf), e.g. {said} for env 1 (envs [1])" in line, line
        assert env.step(np.zeros((2, 2), np.float32))[0]["agent_pos"].shape == (2, 5)
    finally:
        env.close()


def test_lerobot_vector_env_films_a_task_without_cameras():
    """A task without an ``images`` group gets a camera for LeRobot's videos at its viewer's eye (push-cube's: the
    camera task's scene camera), rendered in every env; the policy's observation has no pixels."""
    from isaaclab_suspend.lerobot.env import LeRobotVectorEnv
    from isaaclab_suspend.lerobot.layout import VectorLayout

    sidecar = ExportSidecar(state=VectorLayout({"policy": 5}), action=VectorLayout({"cart_effort": 1}), task="push")
    env = LeRobotVectorEnv("Isaac-PushCube-Suspendable", 2, sidecar, video_size=48)
    try:
        obs, _ = env.reset(seed=3)
        assert set(obs) == {"agent_pos"} and env.metadata["render_fps"] == 60
        first = env.render()
        assert len(first) == 2 and first[0].shape == (48, 48, 3) and first[0].dtype == np.uint8
        for _ in range(15):
            env.step(np.float32([[1.0, 0.0], [1.0, 0.0]]))
        later = env.render()
        assert first[0].std() > 5 and not np.array_equal(first[0], later[0])  # a scene, and the cart moved in it
    finally:
        env.close()
