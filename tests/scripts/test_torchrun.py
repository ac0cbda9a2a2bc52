"""torchrun with 2 processes on one machine (gloo): eval.py ranks merged into one --results file, record.py ranks
merged into one dataset that replay.py (also under torchrun) passes, and failing ranks that fail the run without a
merged file."""

import json
import os
import subprocess
import sys

import h5py
import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TORCHRUN = os.path.join(os.path.dirname(sys.executable), "torchrun")


def _torchrun(script: str, *args: str, timeout: float = 400) -> subprocess.CompletedProcess:
    """``torchrun --standalone --nproc_per_node=2 scripts/<script> args`` (the ranks' output interleaved)."""
    command = [TORCHRUN, "--standalone", "--nproc_per_node=2", os.path.join(ROOT, "scripts", script), *args]
    env = {**os.environ, "PYTHONPATH": ROOT, "OMP_NUM_THREADS": "1"}
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow  # torchrun: two ranks, each a process
def test_eval_ranks_write_one_merged_result(tmp_path):
    done = _torchrun("eval.py", "--num_envs", "2", "--steps", "100", "--desync", "--timeline", "",
                     "--results", str(tmp_path / "R.json"))
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "R.json").read_text())
    assert sorted(os.listdir(tmp_path)) == ["R.json"]  # no rank files
    assert "seed 42, shard 0/2" in result["header"] and "seed 43, shard 1/2" in result["header"]
    figures = result["schedules"]["global_clock"]
    # both ranks' figures: 2 envs x 100 steps each, side by side (100 steps of the clock)
    assert figures["num_envs"] == 4 and figures["steps"] == 100
    assert figures["active_env_steps"] + figures["suspended_env_steps"] + figures["held_env_steps"] == 400
    assert figures["inference_calls"] >= 2 * 7  # each rank's global clock calls at least every 16 steps
    assert done.stdout.count("| inference_calls ") == 1  # one table, from rank 0


@pytest.mark.slow  # torchrun: two ranks, each a process
def test_record_ranks_merge_into_one_dataset_that_replay_passes_under_torchrun(tmp_path):
    output = tmp_path / "cartpole.hdf5"
    done = _torchrun("record.py", "--policy", "random", "--num_envs", "2", "--episodes", "4", "--desync",
                     "--output", str(output))
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(os.listdir(tmp_path)) == ["cartpole.hdf5"]  # the ranks' files removed after the merge
    with h5py.File(output) as f:
        demos = len(f["data"])
        assert demos >= 4 and f["data"].attrs["total"] == sum(len(f["data"][n]["actions"]) for n in f["data"])
    replayed = _torchrun("replay.py", str(output))
    assert replayed.returncode == 0, replayed.stderr[-3000:]
    assert f"{demos} demos replayed" in replayed.stdout and replayed.stdout.count(f"{demos} demos replayed") == 1
    # a rank that raises (rank 1 replays demo_1, made non-finite) fails the run with its status, rank 0 says so
    with h5py.File(output, "r+") as f:
        actions = f["data"]["demo_1"]["actions"]
        actions[0] = np.nan
    failed = _torchrun("replay.py", str(output))
    assert failed.returncode != 0
    assert "rank 1 (exit status 2) of 2 failed" in failed.stderr, failed.stderr[-3000:]
    assert "demos replayed" not in failed.stdout


@pytest.mark.slow  # torchrun: two ranks, each a process
def test_a_rank_that_fails_leaves_no_merged_file(tmp_path):
    (tmp_path / "e-shard1of2.hdf5").mkdir()  # rank 1 cannot record: it exits before joining the others
    done = _torchrun("eval.py", "--num_envs", "2", "--steps", "100", "--timeline", "",
                     "--record", str(tmp_path / "e.hdf5"), "--results", str(tmp_path / "R.json"))
    assert done.returncode != 0
    assert "e-shard1of2.hdf5' is a directory" in done.stderr, done.stderr[-3000:]
    assert not (tmp_path / "R.json").exists() and not (tmp_path / "e.hdf5").exists()


@pytest.mark.slow  # torchrun: two ranks, each a process
def test_shard_and_torchrun_together_is_a_usage_error(tmp_path):
    done = _torchrun("eval.py", "--shard", "0/2", "--results", str(tmp_path / "R.json"), timeout=120)
    assert done.returncode != 0 and "torchrun already splits the run" in done.stderr, done.stderr[-3000:]


@pytest.mark.slow
@pytest.mark.parametrize("library", ["rsl_rl", "skrl"])
def test_distributed_training_without_gpus_is_one_clear_error(library, tmp_path):
    done = _torchrun("train.py", "--distributed", "--rl_library", library, "--log_root", str(tmp_path), timeout=120)
    assert done.returncode != 0 and "needs CUDA GPUs" in done.stderr, done.stderr[-3000:]
    # torchrun prints its own traceback of the failed child (from the venv, which may lie under ROOT), not ours
    assert not any(f'File "{os.path.join(ROOT, part)}' in done.stderr for part in ("scripts", "isaaclab_suspend"))


@pytest.mark.parametrize("script", ["record", "eval"])
def test_existing_merged_file_stops_a_rank_while_parsing(script, tmp_path, monkeypatch, capsys):
    """Under torchrun the ranks write shard files that rank 0 merges at the end: an existing merged file without
    --overwrite stops each rank while it parses (before any env), not after the whole run."""
    from helpers import load_script

    merged = tmp_path / "run.hdf5"
    merged.write_bytes(b"an earlier dataset")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    output = ["--output", str(merged)] if script == "record" else ["--record", str(merged), "--timeline", ""]
    with pytest.raises(SystemExit) as exit_:
        load_script(script).parse_args(["--num_envs", "2", *output])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "Traceback" not in err, err
    assert f"'{merged}', where the ranks' files are merged, exists: pass --overwrite" in err, err
    assert merged.read_bytes() == b"an earlier dataset"
    load_script(script).parse_args(["--num_envs", "2", *output, "--overwrite"])  # replacing it is asked for: fine
