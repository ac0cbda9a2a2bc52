"""The parts of ``scripts/benchmarks/gpu_suite.py``: each runs in a process of its own under a time-out and
returns a dict of figures; the suite merges them into one JSON and prints a table.

* ``syncs``: the first open of each task (open, reset and 5 steps: the kernels compile unless Warp's cache holds
  them) and host syncs per steady step (:mod:`.host_syncs`) of ``env.step`` (stock, and ours with none and half
  of the envs suspended) and of the chunking policy's ``act`` + ``observe`` (quiet steps and ticks);
* ``timing``: suspendable / stock step time (none and half suspended) and the chunking loop's throughput
  (:mod:`.step_timing`) at each size;
* ``tests``: the tests marked ``cuda``, run with ``--device``;
* ``recording``: recording cost on the step thread, ours against Isaac Lab's recorder (:mod:`.recording_timing`).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time

import torch
from prettytable import PrettyTable

from isaaclab.envs import ManagerBasedRLEnv

from ..tasks.embedded import make_default_model
from ..tasks.env_factory import open_env
from .host_syncs import SyncCount, count_syncs, fire_interval_events, run_chunk_loop
from .recording_timing import measure_recording
from .step_timing import measure_overhead, measure_policy

SIZES = {
    "full": {"sync_envs": 64, "sync_steps": 48, "num_envs": [1024, 4096], "blocks": 5, "steps": 20,
             "policy_steps": 64, "record_steps": 100, "record_warmup": 10, "tests": []},
    "small": {"sync_envs": 4, "sync_steps": 24, "num_envs": [4], "blocks": 2, "steps": 4,
              "policy_steps": 16, "record_steps": 12, "record_warmup": 2,
              "tests": ["tests/test_chunking_cartpole.py::"
                        "test_clock_schedules_call_exactly_ceil_t_over_h[global_clock]"]},
}
"""Sizes of the full suite (a GPU) and of ``--small`` (the CPU test of the suite): envs, steps, and the tests
given to pytest, each in a process of its own (of them, those marked ``cuda`` run; none given: every test file
with tests marked ``cuda``)."""
PART_TIMEOUTS_S = {"syncs": 150, "timing": 120, "recording": 90, "tests": 240}
"""Each part's time-out, in the order the parts run (the first one compiles the CUDA kernels on a fresh machine);
a part gets at most what is left of the suite's budget."""
SYNC_TASKS = ("Isaac-Cartpole-Suspendable", "Isaac-PushCube-Suspendable")
TIMING_TASK = "Isaac-PushCube-Suspendable"
RECORDING_TASK = "Isaac-Cartpole-Suspendable"
CHUNK = 16
"""Chunk length of the policy loops (GR00T's horizon)."""
SCHEDULES = ("global_clock", "any", "async")
"""Schedules of the sync count; ``global_clock`` runs again with half the envs retired (suspended)."""
RATIO_GOAL, RATIO_SIZE = 0.97, 4096
"""Goal: stock / suspendable step time at 4096 envs with half the envs suspended (timed with the full sizes)."""
LOOP_GOAL = 0.9
"""Goal: the chunking loop's env-steps/s under ``global_clock`` (planner, H = 16) over the bare stock step's, at
:data:`RATIO_SIZE` envs."""


def part_syncs(device: str, size: dict, root: str) -> dict:
    """Host syncs per steady step: ``env.step`` (most per step; steps that reset an env left out) and the policy's
    ``act`` + ``observe`` (all syncs of the quiet steps, goal 0; per eventful step)."""
    steps, rows, first_open = size["sync_steps"], [], []
    for task in SYNC_TASKS:
        start = time.perf_counter()
        with open_env(task, size["sync_envs"], device, suspendable=True, episode_length_s=1e6) as env:
            env.reset()
            first_open.append({"task": task, "num_envs": env.num_envs, "open_s": _first_steps(env, start)})
            zeros = torch.zeros(env.num_envs, env.action_manager.total_action_dim, device=env.device)
            half = torch.arange(env.num_envs, device=env.device) < env.num_envs // 2
            for label, step, suspended in (("env.step stock", ManagerBasedRLEnv.step, None),
                                           ("env.step ours, none suspended", type(env).step, None),
                                           ("env.step ours, half suspended", type(env).step, half)):
                rows.append({"task": task, "what": label, **_step_syncs(env, step, zeros, suspended, steps)})

            def zero_model(obs_rows, env_ids):
                return zeros.new_zeros(len(env_ids), CHUNK, zeros.shape[1])

            for schedule, retired in [(s, None) for s in SCHEDULES] + [("global_clock", half)]:
                counts = {"quiet": SyncCount(), "eventful": SyncCount()}

                def watch(quiet, counts=counts):
                    return _counted(device, counts["quiet" if quiet else "eventful"])

                quiet = run_chunk_loop(env, zero_model, schedule, CHUNK, steps, watch, retired)
                suffix = ", half retired" if retired is not None else ""
                rows.append({"task": task, "what": f"act+observe {schedule}{suffix}", "quiet_steps": quiet,
                             "syncs_per_quiet_step": counts["quiet"].total / max(quiet, 1),
                             "syncs_per_eventful_step": counts["eventful"].total / max(steps - quiet, 1),
                             "quiet_sync_sites": sorted(counts["quiet"].sites)})
    return {"syncs": rows, "first_open": first_open}


def _first_steps(env, start: float) -> float:
    """Seconds from ``start`` (before the env was opened) to the end of its first 5 steps, device synced: the
    first open, kernels compiled (Warp compiles them on first launch unless its kernel cache holds them)."""
    action = torch.zeros(env.num_envs, env.action_manager.total_action_dim, device=env.device)
    for _ in range(5):
        env.step(action)
    if env.device.startswith("cuda"):
        torch.cuda.synchronize(env.device)
    return round(time.perf_counter() - start, 2)


def _step_syncs(env, step, action: torch.Tensor, suspended: torch.Tensor | None, steps: int) -> dict:
    fire_interval_events(env)  # a term's first call (one upload of its bounds) is no steady-step sync
    if suspended is not None:
        env.suspend_envs(suspended)
    for _ in range(2):  # refreshes the host mirror after a suspension
        step(env, action)
    per_step, resets = [], 0
    for _ in range(steps):
        count = env.reset_count
        with count_syncs(env.device) as syncs:
            step(env, action)
        if env.reset_count != count:
            resets += 1
        else:
            per_step.append(syncs)
    if suspended is not None:
        env.resume_envs(suspended)
        step(env, action)
    return {"steps": len(per_step), "reset_steps": resets,
            "syncs_per_step": max((s.total for s in per_step), default=0),
            "warp_syncs_per_step": max((s.warp for s in per_step), default=0),
            "sites": sorted(set().union(*(s.sites for s in per_step)))}


@contextlib.contextmanager
def _counted(device: str, total: SyncCount):
    """Add the syncs of the block to ``total``."""
    with count_syncs(device) as syncs:
        yield
    total.add(syncs)


def part_timing(device: str, size: dict, root: str) -> dict:
    """Stock and suspendable step time (none and half suspended) and the chunking loop's throughput per size."""
    steps, policy = [], []
    for num_envs in size["num_envs"]:
        with open_env(TIMING_TASK, num_envs, device, suspendable=True, episode_length_s=1e6) as env:
            env.reset()
            rows = measure_overhead(env, [0.0, 0.5], size["blocks"], size["steps"], ops=False)
            steps += [{"task": TIMING_TASK, **row, "stock_over_ours": row["stock_ms"] / row["suspendable_ms"]}
                      for row in rows]
            for schedule in ("global_clock", "async"):
                model = make_default_model(TIMING_TASK, CHUNK)
                loop = measure_policy(env, model, schedule, CHUNK, size["policy_steps"])
                policy.append({"task": TIMING_TASK, **loop})
    return {"step_time": steps, "policy": policy}


def part_recording(device: str, size: dict, root: str) -> dict:
    """Recording cost per step on the step thread, ours against Isaac Lab's recorder, per size."""
    with tempfile.TemporaryDirectory() as out_dir:
        rows = [{"task": RECORDING_TASK, **row} for n in size["num_envs"] for row in
                measure_recording(RECORDING_TASK, n, size["record_steps"], size["record_warmup"], out_dir, device)]
    return {"recording": rows}


def part_tests(device: str, size: dict, root: str) -> dict:
    """The tests marked ``cuda`` on ``device``: each test file (or node id) of ``size["tests"]`` in a pytest
    process of its own, so that a CUDA fault in one (a dead context fails every later test of its process) costs
    that file only; all of them stopped ``size["seconds"]`` - 10 s after the part's start. Passed, failed and
    skipped (with the reason) tests, from the verbose lines, so that the tests that ran before a stop count."""
    deadline = time.monotonic() + max(size["seconds"] - 10, 1)
    outcome = {"exit_status": 0, "stopped": False, "passed": [], "failed": [], "skipped": [], "files": {}}
    for target in size["tests"] or cuda_test_files(root):
        left = deadline - time.monotonic()
        if left < 1:
            outcome["stopped"] = True
            outcome["files"][target] = "not run: time-out"
            continue
        command = [sys.executable, "-m", "pytest", "-v", "-rs", "-p", "no:cacheprovider", "-m", "cuda",
                   "--device", device, target]
        process = subprocess.Popen(command, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        timer = threading.Timer(left, process.kill)
        timer.start()
        for line in process.stdout:
            print(line, end="", flush=True)
            if match := TEST_LINE.match(line):
                name, result, reason = match.groups()
                key = {"PASSED": "passed", "SKIPPED": "skipped"}.get(result, "failed")
                outcome[key].append(f"{name}: {reason}" if reason else name)
        status = process.wait()
        stopped = not timer.is_alive()
        timer.cancel()
        outcome["files"][target] = "stopped at the time-out" if stopped else f"exit {status}"
        outcome["stopped"] |= stopped
        outcome["exit_status"] = outcome["exit_status"] or status
    return {"tests": outcome}


def cuda_test_files(root: str) -> list[str]:
    """The test files with tests marked ``cuda``, relative to ``root``."""
    folder = os.path.join(root, "tests")
    return [os.path.join("tests", name) for name in sorted(os.listdir(folder))
            if name.startswith("test_") and name.endswith(".py")
            and "mark.cuda" in open(os.path.join(folder, name), encoding="utf-8").read()]


TEST_LINE = re.compile(r"^(tests/\S+::\S+) (PASSED|FAILED|ERROR|SKIPPED)(?: \((.*)\))?")
"""A verbose pytest line: test id, outcome, skip reason."""


PARTS = {"syncs": part_syncs, "timing": part_timing, "recording": part_recording, "tests": part_tests}


def versions(device: str) -> dict:
    """The card, its driver and the versions of the stack that ran the suite."""
    out = {"device": device, "python": platform.python_version(), "torch": torch.__version__,
           "torch_cuda": torch.version.cuda}
    for package in ("warp-lang", "newton", "mujoco-warp", "isaaclab"):
        out[package] = importlib.metadata.version(package)
    if device.startswith("cuda"):
        out["card"] = torch.cuda.get_device_name(device)
        smi = shutil.which("nvidia-smi")
        query = [smi, "--query-gpu=driver_version", "--format=csv,noheader"] if smi else None
        out["driver"] = subprocess.run(query, capture_output=True, text=True).stdout.strip() if query else "n/a"
    else:
        out["card"], out["driver"] = platform.processor() or platform.machine(), "n/a"
    return out


def kernel_cache_dir() -> str:
    """Warp's kernel cache folder of this process (``WARP_CACHE_PATH``, else Warp's default), which the parts'
    processes share."""
    import warp as wp

    wp.init()
    return wp.config.kernel_cache_dir


def save_kernel_cache(archive: str) -> int:
    """Pack the compiled kernels (Warp's kernel cache) into the tar.xz ``archive``, for a later run on a fresh
    machine of the same GPU architecture; returns its size in bytes."""
    with tarfile.open(archive + ".part", "w:xz", preset=3) as tar:
        tar.add(kernel_cache_dir(), arcname=".")
    os.replace(archive + ".part", archive)
    return os.path.getsize(archive)


def restore_kernel_cache(archive: str) -> str:
    """Unpack the kernels of an earlier run's ``archive`` into Warp's kernel cache (plain files only: an archive
    is untrusted data); returns what happened, in words. A damaged archive is skipped: the kernels compile."""
    if not os.path.isfile(archive):
        return f"no kernel cache at {archive}: kernels compile on first use"
    try:
        with tarfile.open(archive, "r:xz") as tar:
            tar.extractall(kernel_cache_dir(), filter="data")
    except (tarfile.TarError, OSError, EOFError) as err:
        return f"kernel cache {archive} not used ({err}): kernels compile on first use"
    return f"kernel cache of an earlier run unpacked from {archive}"


def goals(figures: dict) -> dict:
    """The suite's goals, each True, False or None (its part did not run): 0 host syncs on the policy's quiet
    steps, no more syncs in our ``env.step`` than in the stock one, stock / ours >= :data:`RATIO_GOAL` at
    :data:`RATIO_SIZE` envs with half suspended (where timed), every test passed."""
    out = {}
    syncs = figures.get("syncs")
    if syncs:
        stock = {r["task"]: r["syncs_per_step"] for r in syncs if r["what"] == "env.step stock"}
        out["0 syncs per quiet act+observe"] = all(r["syncs_per_quiet_step"] == 0 for r in syncs if "quiet_steps" in r)
        out["env.step syncs ours <= stock"] = all(r["syncs_per_step"] <= stock[r["task"]] for r in syncs
                                                  if r["what"].startswith("env.step ours"))
    largest = [r for r in figures.get("step_time", []) if r["num_envs"] == RATIO_SIZE and r["suspended"] == "50%"]
    if largest:
        out[f"stock/ours >= {RATIO_GOAL} at {RATIO_SIZE} envs, half suspended"] = all(
            r["stock_over_ours"] >= RATIO_GOAL for r in largest)
    bare = {r["num_envs"]: r["num_envs"] * 1e3 / r["stock_ms"] for r in figures.get("step_time", [])
            if r["num_envs"] == RATIO_SIZE and r["suspended"] == "0%"}
    loops = [r for r in figures.get("policy", []) if r["schedule"] == "global_clock" and r["num_envs"] in bare]
    if loops:
        out[f"chunking loop global_clock >= {LOOP_GOAL} of the bare stock step rate at {RATIO_SIZE} envs"] = all(
            r["env_steps_per_s"] >= LOOP_GOAL * bare[r["num_envs"]] for r in loops)
    tests = figures.get("tests")
    if tests:
        out["every cuda test passed"] = (tests["exit_status"] == 0 and not tests["stopped"] and not tests["failed"]
                                         and bool(tests["passed"]))
    return out


def table(figures: dict) -> str:
    """The figures as text tables, headed by the card and versions."""
    v = figures["versions"]
    lines = [f"{v['card']} (driver {v['driver']}), torch {v['torch']} (CUDA {v['torch_cuda']}), Warp"
             f" {v['warp-lang']}, Newton {v['newton']}, Isaac Lab {v['isaaclab']}; device {v['device']}."]
    specs = [
        ("syncs", ["task", "what", "syncs_per_step", "warp_syncs_per_step", "syncs_per_quiet_step",
                   "syncs_per_eventful_step"]),
        ("first_open", ["task", "num_envs", "open_s"]),
        ("step_time", ["task", "num_envs", "suspended", "stock_ms", "suspendable_ms", "stock_over_ours"]),
        ("policy", ["task", "num_envs", "schedule", "steps_per_s", "env_steps_per_s", "ticks_per_s"]),
        ("recording", ["task", "num_envs", "manager", "hooks_ms", "ends_ms", "write_ms", "total_ms"]),
    ]
    for key, columns in specs:
        if figures.get(key):
            t = PrettyTable(columns)
            for row in figures[key]:
                t.add_row([_cell(row.get(c, "")) for c in columns])
            lines += [f"\n{key}", str(t)]
    if "tests" in figures:
        tests = figures["tests"]
        lines.append(f"\ntests marked cuda: {len(tests['passed'])} passed, {len(tests['failed'])} failed,"
                     f" {len(tests['skipped'])} skipped" + (" (stopped at its time-out)" if tests["stopped"] else ""))
        lines += [f"  FAILED {name}" for name in tests["failed"]] + [f"  skipped {s}" for s in tests["skipped"]]
    seconds = figures.get("seconds", {})
    lines.append("\nparts: " + ", ".join(f"{p} {s} ({seconds.get(p, 0):.0f} s)" for p, s in figures["parts"].items()))
    lines += [f"goal {'met' if ok else 'NOT met'}: {name}" for name, ok in figures["goals"].items()]
    return "\n".join(lines)


def _cell(value) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)
