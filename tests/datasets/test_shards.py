"""Scale-out: shard arithmetic, merged figures, and two eval.py shards against one openpi server (serve_policy.py
--protocol openpi) merged by merge_shards.py into one report and one dataset equal to the shards' episodes."""

import importlib.util
import json
import math
import os
import re
import signal
import subprocess
import sys

import h5py
import numpy as np
import pytest

from isaaclab_suspend.datasets.shards import Shard, merge_stats

pytestmark = pytest.mark.slow  # eval.py shards against a served model, merged

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_shard_seeds_files_and_episodes():
    shards = [Shard.parse(f"{i}/3") for i in range(3)]
    assert [s.seed(42) for s in shards] == [42, 43, 44]
    assert shards[2].path("out/cartpole.hdf5") == "out/cartpole-shard2of3.hdf5"
    assert Shard.parse("0/1").path("out/cartpole.hdf5") == "out/cartpole.hdf5"
    assert [s.episodes(10) for s in shards] == [4, 3, 3]
    for spec in ("3/3", "1", "-1/2", "a/b"):
        with pytest.raises(ValueError, match="0 <= i < K"):
            Shard.parse(spec)


def test_record_shard_takes_its_share_of_episodes_its_seed_and_file(tmp_path):
    spec = importlib.util.spec_from_file_location("record_script", os.path.join(ROOT, "scripts", "record.py"))
    record = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(record)
    args = record.parse_args(["--episodes", "10", "--shard", "1/4", "--output", str(tmp_path / "cartpole.hdf5")])
    assert (args.episodes, args.seed, args.output) == (3, 43, str(tmp_path / "cartpole-shard1of4.hdf5"))
    with pytest.raises(SystemExit):
        record.parse_args(["--episodes", "2", "--shard", "3/4"])


def test_merged_figures_sum_counts_and_recompute_ratios():
    shard = {"steps": 100, "num_envs": 8, "inference_calls": 10, "rows_inferred": 80, "envs_served": 80,
             "active_env_steps": 700, "suspended_env_steps": 100, "held_env_steps": 0, "episodes_completed": 4,
             "episodes_scored": 2, "inference_s": 2.0, "simulation_s": 1.0, "wall_s": 3.0,
             "mean_episode_length": 100.0, "success_rate": float("nan")}
    other = {**shard, "inference_calls": 30, "envs_served": 240, "rows_inferred": 240, "wall_s": 5.0,
             "episodes_scored": 6, "mean_episode_length": 200.0}
    shard.update(overlap_bound=800.0, roughness=0.1, boundary_roughness=0.3, within_chunk_roughness=0.05)
    other = {**other, "overlap_bound": 600.0, "roughness": 0.3, "active_env_steps": 300, "suspended_env_steps": 500,
             "boundary_roughness": float("nan"), "within_chunk_roughness": 0.1}
    merged = merge_stats([shard, other])
    assert merged["inference_calls"] == 40 and merged["num_envs"] == 16 and merged["wall_s"] == 5.0
    # each shard ran its own 100-step clock side by side: 100 steps, not 200; throughput bounds add up
    assert merged["steps"] == 100 and merged["calls_per_1000_steps"] == 200.0 and merged["overlap_bound"] == 1400.0
    assert merged["roughness"] == pytest.approx((700 * 0.1 + 300 * 0.3) / 1000)  # by active env-steps
    assert merged["boundary_roughness"] == 0.3 and merged["within_chunk_roughness"] == pytest.approx(0.065)
    assert merged["mean_envs_per_call"] == 8.0 and merged["fetch_efficiency"] == 1.0
    assert merged["active_env_steps_per_s"] == 1000 / 5.0 and merged["suspended_fraction"] == 600 / 1600
    assert merged["mean_episode_length"] == (2 * 100 + 6 * 200) / 8 and math.isnan(merged["success_rate"])


def _script(name: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, os.path.join(ROOT, "scripts", name), *args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_eval_shards_against_one_openpi_server_merge_into_one_report_and_dataset(tmp_path):
    server = _script("serve_policy.py", "--protocol", "openpi", "--port", "0", "--chunk", "8",
                     "--keys", "observation/state=policy")
    shards = []
    try:
        line = server.stdout.readline()
        address = re.search(r"at (127\.0\.0\.1:\d+)", line)
        assert address, line
        for i in range(2):
            shards.append(_script("eval.py", "--remote", f"openpi://{address[1]}", "--openpi_keys",
                                  "observation/state=policy", "--prompt", "balance", "--shard", f"{i}/2",
                                  "--num_envs", "2", "--steps", "304", "--timeline", "",
                                  "--record", str(tmp_path / "eval.hdf5"), "--results", str(tmp_path / "eval.json")))
        for i, shard in enumerate(shards):
            out, err = shard.communicate(timeout=400)
            assert shard.returncode == 0, err[-2000:]
            assert f"seed {42 + i}, shard {i}/2" in out and f"remote policy openpi://{address[1]}" in out
        server.send_signal(signal.SIGINT)
        assert server.wait(30) == 0
    finally:
        for process in [server, *shards]:
            if process.poll() is None:
                process.terminate()
                process.communicate(timeout=30)
    files = [tmp_path / f"eval-shard{i}of2.hdf5" for i in range(2)]
    results = [json.loads((tmp_path / f"eval-shard{i}of2.json").read_text()) for i in range(2)]
    merge = _script("merge_shards.py", "--results", *(str(tmp_path / f"eval-shard{i}of2.json") for i in range(2)),
                    "--datasets", *map(str, files), "--output", str(tmp_path / "merged.hdf5"))
    out, err = merge.communicate(timeout=120)
    assert merge.returncode == 0, err[-2000:]
    figures = [r["schedules"]["global_clock"] for r in results]
    assert re.search(rf"\| inference_calls +\| +{sum(f['inference_calls'] for f in figures)} \|", out), out
    assert re.search(rf"\| active_env_steps +\| +{sum(f['active_env_steps'] for f in figures)} \|", out), out
    assert re.search(r"\| mean_envs_per_call +\| +2\.0 \|", out), out
    with h5py.File(files[0]) as first, h5py.File(files[1]) as second, h5py.File(tmp_path / "merged.hdf5") as merged:
        shard_demos = [f["data"][name] for f in (first, second) for name in sorted(f["data"], key=lambda n: int(n[5:]))]
        assert len(merged["data"]) == len(shard_demos) >= 2 and len(first["data"]) >= 1 and len(second["data"]) >= 1
        assert merged["data"].attrs["total"] == first["data"].attrs["total"] + second["data"].attrs["total"]
        assert json.loads(merged["data"].attrs["env_args"]) == json.loads(first["data"].attrs["env_args"])
        for index, demo in enumerate(shard_demos):
            assert np.array_equal(merged["data"][f"demo_{index}"]["actions"][()], demo["actions"][()])
        assert not np.array_equal(first["data"]["demo_0"]["actions"][()], second["data"]["demo_0"]["actions"][()])
