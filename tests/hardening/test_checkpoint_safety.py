"""Checkpoints are read weights only: a .pt whose unpickling would run code is refused by every entry point
(play.py, eval.py and record.py --policy checkpoint/bc, serve_policy.py --expert/--checkpoint, the library
loaders) with one line that says what the file holds, and the code never runs; the files the project ships and
the files rsl_rl and skrl write still load."""

import os
import subprocess
import sys

import pytest
import torch

from isaaclab_suspend.learning import load_chunk_policy
from isaaclab_suspend.rl import load_checkpoint_policy
from isaaclab_suspend.rl.checkpoint_policy import SHIPPED_CHECKPOINTS, export_actor, read_checkpoint, shipped_checkpoint
from isaaclab_suspend.tasks.env_factory import open_env
from isaaclab_suspend.weights_only import load_weights

from helpers import ROOT, load_script

CARTPOLE = "Isaac-Cartpole-Suspendable"


class _Payload:
    """Unpickling this creates the marker file (what a malicious checkpoint would do instead)."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.fixture(params=["rsl_rl", "skrl", "chunk", "bare"])
def crafted(request, tmp_path):
    """(path of a crafted checkpoint in each library's layout, the marker its unpickling would create)."""
    marker = str(tmp_path / f"marker_{request.param}")
    payload = _Payload(marker)
    contents = {"rsl_rl": {"actor_state_dict": payload, "task": CARTPOLE},
                "skrl": {"policy": payload, "value": {}},
                "chunk": {"format": payload},
                "bare": payload}[request.param]
    path = str(tmp_path / f"{request.param}.pt")
    torch.save(contents, path)
    assert not os.path.exists(marker)
    return path, marker


def _status(call) -> int:
    try:
        return call()
    except SystemExit as exit_:  # argparse's parser.error
        return exit_.code


def _check_refused(status: int, err: str, path: str, marker: str) -> None:
    assert not os.path.exists(marker), "unpickling the checkpoint ran its code"
    assert status == 2, err
    lines = [line for line in err.splitlines() if "error" in line.lower()]  # argparse's usage and Warp's notes aside
    assert len(lines) == 1 and "Traceback" not in err, err
    assert path in lines[0] and "more than tensors and plain containers (a pickled _io.open)" in lines[0], lines[0]


def test_scripts_refuse_code_in_a_checkpoint_before_building_an_env(crafted, capsys, tmp_path):
    path, marker = crafted
    play, eval_, record = load_script("play"), load_script("eval"), load_script("record")
    output = str(tmp_path / "out.hdf5")
    for policy in ("checkpoint", "bc"):
        calls = [
            lambda: eval_.parse_args(["--policy", policy, "--checkpoint", path, "--num_envs", "2", "--steps", "4"]),
            lambda: record.main(["--policy", policy, "--checkpoint", path, "--num_envs", "2", "--output", output]),
        ]
        if policy == "checkpoint":
            calls.append(lambda: play.main(["--checkpoint", path, "--num_envs", "1", "--steps", "1"]))
        for call in calls:
            status = _status(call)
            _check_refused(status, capsys.readouterr().err, path, marker)
    assert not os.path.exists(output), "record.py created its output although the policy could not load"


def test_library_loaders_refuse_code_in_a_checkpoint(crafted, tmp_path):
    path, marker = crafted
    for load in (lambda: read_checkpoint(path), lambda: load_chunk_policy(path),
                 lambda: export_actor(path, str(tmp_path / "actor.pt"), CARTPOLE), lambda: load_weights(path)):
        with pytest.raises(ValueError, match="more than tensors and plain containers") as err:
            load()
        assert "\n" not in str(err.value)
    assert not os.path.exists(marker)


def test_serve_policy_refuses_code_in_an_expert_and_a_checkpoint(tmp_path, capsys):
    marker = str(tmp_path / "marker")
    path = str(tmp_path / "expert.pt")
    torch.save({"actor_state_dict": _Payload(marker)}, path)
    serve = load_script("serve_policy")
    for flag in ("--expert", "--checkpoint"):
        status = _status(lambda: serve.main([flag, path, "--task", CARTPOLE, "--port", "0"]))
        _check_refused(status, capsys.readouterr().err, path, marker)


@pytest.mark.slow  # a process of its own: the real entry point
def test_play_cli_exits_2_with_one_line(tmp_path):
    """The real command line: exit status 2, one line on stderr, no marker."""
    marker = str(tmp_path / "marker")
    path = str(tmp_path / "model_9.pt")
    torch.save({"actor_state_dict": _Payload(marker), "iter": 9}, path)
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "play.py"), "--checkpoint", path],
                          capture_output=True, text=True, env=env, timeout=300)
    _check_refused(proc.returncode, proc.stderr, path, marker)


def test_not_a_checkpoint_is_one_line(tmp_path):
    garbage = tmp_path / "garbage.pt"
    for data in (b"not a checkpoint at all", b"\x80\x02", b""):
        garbage.write_bytes(data)
        with pytest.raises(ValueError, match="is not a readable rsl_rl or skrl checkpoint") as err:
            read_checkpoint(str(garbage))
        assert "\n" not in str(err.value)


@pytest.fixture(scope="module")
def env():
    with open_env(CARTPOLE, 2) as env:
        yield env


def test_shipped_and_exported_checkpoints_load_weights_only(env, tmp_path):
    for task in SHIPPED_CHECKPOINTS:
        library, contents = read_checkpoint(shipped_checkpoint(task))
        assert library == "rsl_rl" and contents["task"] == task
    policy = load_checkpoint_policy(shipped_checkpoint(CARTPOLE), env)
    exported = str(tmp_path / "actor.pt")
    export_actor(shipped_checkpoint(CARTPOLE), exported, CARTPOLE)
    again = load_checkpoint_policy(exported, env)
    obs, _ = env.reset()
    assert torch.equal(policy.act(obs), again.act(obs))


def test_library_loader_refuses_code_with_an_env(crafted, env):
    path, marker = crafted
    with pytest.raises(ValueError, match="more than tensors and plain containers"):
        load_checkpoint_policy(path, env, task=CARTPOLE)
    assert not os.path.exists(marker)


def test_chunk_checkpoint_whose_network_cannot_be_rebuilt_is_one_line(tmp_path, capsys):
    """A chunk-policy checkpoint (its format marker right) without its cfg, or with weights of other shapes, stops
    eval.py while parsing with one line naming the file and exit status 2: no KeyError traceback, and not
    torch's list of mismatching tensors over several lines."""
    from isaaclab_suspend.learning.chunk_policy import ChunkPolicyCfg, ChunkPolicyNet, save_chunk_policy

    good = str(tmp_path / "good.pt")
    save_chunk_policy(good, ChunkPolicyNet(ChunkPolicyCfg(), 4, 1), CARTPOLE)
    assert load_chunk_policy(good).chunk_length == ChunkPolicyCfg().chunk_length
    ckpt = torch.load(good, weights_only=True)
    no_cfg, other_shapes = str(tmp_path / "no_cfg.pt"), str(tmp_path / "other_shapes.pt")
    torch.save({k: v for k, v in ckpt.items() if k != "cfg"}, no_cfg)
    torch.save({**ckpt, "state_dict": {**ckpt["state_dict"], "obs_mean": torch.zeros(3, 3)}}, other_shapes)
    for path, cause in ((no_cfg, "(KeyError: 'cfg')"), (other_shapes, "(RuntimeError: Error(s) in loading state_dict")):
        status = _status(lambda: load_script("eval").parse_args(["--checkpoint", path]))
        err = capsys.readouterr().err
        lines = [line for line in err.splitlines() if line.strip() and not line.startswith((" ", "usage:"))]
        assert status == 2 and "Traceback" not in err and len(lines) == 1, err
        assert f"error: '{path}' is a chunk policy checkpoint whose network cannot be rebuilt from it {cause}" \
            in lines[0], lines[0]
