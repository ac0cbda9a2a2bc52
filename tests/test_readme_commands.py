"""The README's claims run as a user runs them: the main command with its table and timeline PNG, and the
clean-dataset claim (hold records junk samples, global_clock none)."""

import importlib.util
import math
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from isaaclab_suspend.learning import ChunkDataset

pytestmark = pytest.mark.slow  # the README's commands as a user runs them, each a process

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEPS = 128
H = 16


def _figures(table: str, name: str) -> list[float]:
    """The values of one row of a printed stats table, one per schedule column."""
    row = re.search(rf"^\| {name} +\|(.*)\|$", table, re.MULTILINE)
    assert row, f"no '{name}' row in:\n{table}"
    return [float(cell) for cell in row[1].split("|")]


def test_main_command_compares_any_and_global_clock_and_draws_the_timeline(tmp_path):
    """`eval.py --compare any,global_clock --desync --latency gr1 --virtual_latency` (fewer steps): the clock
    makes exactly ceil(T / H) calls, any more, each call is charged GR1's 200 ms, and the PNG
    shows both runs (suspended envs only under the clock). The whole output fits a screen: what runs, a progress
    bar per schedule, the table and where the timeline and the report are; Isaac Lab's tables only with --verbose."""
    run = subprocess.run(  # in a folder of its own: the run's files go to a new outputs/eval/<date>_<task>_1
        [sys.executable, os.path.join(ROOT, "scripts", "eval.py"), "--compare", "any,global_clock", "--desync",
         "--latency", "gr1", "--virtual_latency", "--steps", str(STEPS)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": ROOT},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    out = run.stdout
    bars = [line for line in run.stderr.splitlines() if "%|" in line]  # a bar's redraws (\r) on one screen line
    screen = len(out.splitlines()) + len([line for line in run.stderr.splitlines() if line and line not in bars])
    assert len({line.split(":")[0] for line in bars}) == 2 and screen + 2 <= 40 and "Active Observation Terms" not in out and "Suspension Manager" not in out, out + run.stderr
    assert out.startswith("Isaac-Cartpole-Suspendable, embedded model: 16 envs, 128 steps") and "%|" in run.stderr
    (folder,) = (tmp_path / "outputs" / "eval").iterdir()
    assert re.fullmatch(r"\d{4}-\d\d-\d\d_Isaac-Cartpole-Suspendable_1", folder.name), folder
    assert out.count(str(folder)) == 1, out
    assert f"Run folder: {folder}: timeline.png (the first 16 envs), report.html (open it in a browser)," \
        " episodes.jsonl (the run log), results.json" in out, out
    timeline = folder / "timeline.png"
    assert "Isaac-Cartpole-Suspendable, embedded model: 16 envs, 128 steps, H = 16" in out
    assert "latency gr1 (virtual)" in out
    calls_any, calls_clock = _figures(out, "inference_calls")
    assert calls_clock == math.ceil(STEPS / H) and calls_any > calls_clock
    inference_any, inference_clock = _figures(out, "inference_s")
    assert inference_clock >= 0.2 * calls_clock and inference_any >= 0.2 * calls_any
    suspended_any, suspended_clock = _figures(out, "suspended_fraction")
    assert suspended_any == 0 and suspended_clock > 0

    import matplotlib.image

    image = matplotlib.image.imread(str(timeline))
    assert image.ndim == 3 and image.shape[0] > 200 and image.shape[1] > 1000
    rgb = np.round(image[..., :3] * 255)

    def pixels(hex_colour: str) -> int:
        colour = np.array([int(hex_colour[i : i + 2], 16) for i in (1, 3, 5)])
        return int((np.abs(rgb - colour).max(-1) <= 2).sum())

    assert pixels("#4c9f50") > 10_000 and pixels("#b8b8b8") > 1_000  # active and suspended cells


def _script(path: str):
    """The module of a script under scripts/ (its functions run in this process)."""
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], os.path.join(ROOT, "scripts", path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_hold_records_junk_and_global_clock_none(tmp_path):
    """The same desynchronised push-cube recording under both schedules (record.py): hold's episodes that start
    mid-chunk open with samples of the held zero action; global_clock's envs wait suspended and record none.
    Junk is counted as bench_junk_bc.py counts it, from the file (ChunkDataset.junk)."""
    record = _script("record.py")
    junk = {}
    for schedule in ("hold", "global_clock"):
        output = tmp_path / f"{schedule}.hdf5"
        args = ["--task", "Isaac-PushCube-Suspendable", "--schedule", schedule, "--num_envs", "4", "--episodes", "8",
                "--desync", "--output", str(output)]
        assert record.main(args) == 0
        dataset = ChunkDataset(str(output), H)
        assert len(dataset.episode_lengths) >= 8
        junk[schedule] = dataset.junk()
    samples, episodes = junk["hold"]
    assert episodes >= 2 and samples >= 2 * episodes, junk
    assert junk["global_clock"] == (0, 0), junk
