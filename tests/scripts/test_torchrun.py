"""torchrun with 2 processes on one machine (gloo): eval.py ranks merged into one --results file and one verdict
over both ranks' episodes (merge_shards.py --runs gives it too), record.py ranks merged into one dataset that
replay.py (also under torchrun) passes, and failing ranks that fail the run without a merged file."""

import contextlib
import io
import json
import os
import re
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


@pytest.mark.slow  # torchrun: two ranks, each a process, each running two arms
def test_eval_verdict_counts_every_ranks_episodes_paired_within_its_rank(tmp_path):
    """The push-cube planner against the planner at 0.6x its actions, 2 envs per rank, one 3 s episode each: the
    printed verdict counts the 4 paired episodes of both ranks, each paired within its rank (its counts are the sums
    of each rank's own verdict, from the rank's run log; the ranks' starts differ), and merge_shards.py --runs
    gives the same verdict from the ranks' run folders."""
    from helpers import load_script
    from isaaclab_suspend.runs import paired
    from isaaclab_suspend.runs.report import read_run_log

    done = _torchrun("eval.py", "--task", "Isaac-PushCube-Suspendable", "--num_envs", "2", "--episodes_per_env", "1",
                     "--models", "embedded,embedded:action_scale=0.6", "--timeline", "", "--output",
                     str(tmp_path / "run"), "env.episode_length_s=3")
    assert done.returncode == 0, done.stderr[-3000:]
    printed = re.findall(r"^Verdict: (.*)$", done.stdout, re.MULTILINE)
    folders = [str(tmp_path / f"run-shard{rank}of2") for rank in range(2)]
    logs = [read_run_log(os.path.join(folder, "episodes.jsonl"))[1] for folder in folders]
    ranks = [paired.compare(log["A"]["episodes"], log["B"]["episodes"]) for log in logs]
    assert all(v["paired"] and v["episodes"] == 2 for v in ranks), ranks
    assert logs[0]["A"]["episodes"][0]["start_hash"] != logs[1]["A"]["episodes"][0]["start_hash"]  # seeds apart
    wins_a, wins_b, better, worse = (sum(v[key] for v in ranks) for key in ("wins_a", "wins_b", "better", "worse"))
    assert len(printed) == 1 and printed[0].startswith("B against A (paired: the same starts): B succeeds in"
                                                       f" {wins_b} of 4 paired episodes, A in {wins_a}; B better in"
                                                       f" {better}, worse in {worse};"), (printed, ranks)
    merged = io.StringIO()
    with contextlib.redirect_stdout(merged):
        assert load_script("merge_shards").main(["--runs", *folders]) == 0
    assert re.findall(r"^Verdict: (.*)$", merged.getvalue(), re.MULTILINE) == printed, merged.getvalue()
    assert "2 shards run side by side" in merged.getvalue() and "| episodes_scored " in merged.getvalue()


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
