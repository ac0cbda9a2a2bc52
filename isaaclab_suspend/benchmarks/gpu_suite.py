"""The parts of ``scripts/benchmarks/gpu_suite.py``: each runs in a process of its own under a time-out and
returns a dict of figures; the suite merges them into one JSON and prints a table.

* ``syncs``: the first open of each task (open, reset and 5 steps: the kernels compile unless Warp's cache holds
  them) and host syncs per steady step (:mod:`.host_syncs`) of ``env.step`` (stock, and ours with none and half
  of the envs suspended) and of the chunking policy's ``act`` + ``observe`` (quiet steps and ticks);
* ``timing``: suspendable / stock step time (none and half suspended) and the chunking loop's throughput and
  where a loop step's time goes (:mod:`.step_timing`) at each size, and the step time at
  :data:`LARGE_ENVS` envs on a CUDA device with the memory for it;
* ``recording``: recording cost on the step thread, ours against Isaac Lab's recorder, and a recording end to
  end against the same env unrecorded, every episode on disk (:mod:`.recording_timing`);
* ``determinism``: the stock step with Isaac Lab 3.0's reproducible physics on against off;
* ``tests``: the tests marked ``cuda``, run with ``--device``.

A part's rows that may not end before its time-out are skipped with the reason (``skipped``), so that the kill
at the time-out does not take the figures it has measured with it.
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
import tempfile
import threading
import time

import torch
from prettytable import PrettyTable

from isaaclab.envs import ManagerBasedRLEnv

from ..tasks.embedded import make_default_model
from ..tasks.deterministic import check_deterministic_contacts
from ..tasks.env_factory import make_env_cfg, open_env
from .host_syncs import SyncCount, count_syncs, fire_interval_events, run_chunk_loop
from .recording_timing import measure_recorded_throughput, measure_recording
from .step_timing import measure_overhead, measure_policy, stock_step_ms

SIZES = {
    "full": {"sync_envs": 64, "sync_steps": 48, "num_envs": [1024, 4096], "blocks": 5, "steps": 20,
             "policy_steps": 64, "record_steps": 100, "record_warmup": 10, "e2e_steps": 200,
             "e2e_episode_s": None, "determinism_steps": 20, "tests": []},
    "small": {"sync_envs": 4, "sync_steps": 24, "num_envs": [4], "blocks": 2, "steps": 4,
              "policy_steps": 16, "record_steps": 12, "record_warmup": 2, "e2e_steps": 12,
              "e2e_episode_s": 0.2, "determinism_steps": 1,
              "tests": ["tests/chunking/test_chunking_policy.py::"
                        "test_clock_schedules_call_exactly_ceil_t_over_h[global_clock]"]},
}
"""Sizes of the full suite (a GPU) and of ``--small`` (the CPU test of the suite): envs, steps, and the tests
given to pytest, each in a process of its own (of them, those marked ``cuda`` run; none given: every test file
with tests marked ``cuda``). ``e2e_episode_s``: the episode length of the recording end to end (None: the
task's own, 5 s; ``--small`` makes episodes of 12 steps, so that some end twice in its few steps)."""
PART_TIMEOUTS_S = {"syncs": 150, "timing": 150, "recording": 150, "determinism": 120, "tests": 240}
"""Each part's time-out, in the order the parts run (the first one compiles the CUDA kernels on a fresh machine);
a part gets at most what is left of the suite's budget."""
SYNC_TASKS = ("Isaac-Cartpole-Suspendable", "Isaac-PushCube-Suspendable")
TIMING_TASK = "Isaac-PushCube-Suspendable"
RECORDING_TASK = "Isaac-Cartpole-Suspendable"
DEMAND_TASK = "Isaac-PushCube-Camera-Suspendable"
"""The camera task of the observation-demand row (``global_clock``, H = :data:`CHUNK`, at the first size)."""
E2E_TASK = "Isaac-PushCube-Suspendable"
"""The task recorded end to end (its episodes carry contacts and success, as a demo's do)."""
DETERMINISM_TASKS = ("Isaac-PushCube-Suspendable", "IsaacContrib-Stack-Cube-SO101-Suspendable")
"""Push-cube and an arm task with contacts (the SO-101 stack opens kitless in seconds; Franka lift fills a reset
buffer of 4096 states first)."""
LARGE_ENVS = 16384
"""The size of the ``timing`` row beyond :data:`SIZES`: on a CUDA device with the memory for it only."""
MEMORY_HEADROOM = 1.25
"""Device memory asked for the :data:`LARGE_ENVS` row: the most any smaller row took per env, times this."""
MARGIN_S = 10.0
"""Seconds of a part's time-out kept for writing its figures."""
CHUNK = 16
"""Chunk length of the policy loops (GR00T's horizon)."""
SCHEDULES = ("global_clock", "any", "async")
"""Schedules of the sync count; ``global_clock`` runs again with half the envs retired (suspended)."""
RATIO_GOAL, RATIO_SIZE = 0.97, 4096
"""Goal: stock / suspendable step time at 4096 envs with half the envs suspended (timed with the full sizes)."""
LOOP_GOAL = 0.9
"""Goal: the chunking loop's env-steps/s under ``global_clock`` (planner, H = 16) over the bare stock step's, at
:data:`RATIO_SIZE` envs."""
RECORDING_GOAL = 0.8
"""Goal: env-steps/s recorded end to end (the step loop and the recorder's close) over unrecorded, at
:data:`RATIO_SIZE` envs."""


def time_problem(size: dict, need_s: float) -> str | None:
    """Why a row that may take ``need_s`` seconds is not run: the part's time-out (``size["deadline"]``, a
    ``time.monotonic`` instant) would kill the part first, with every figure it measured; None: it fits."""
    left = size["deadline"] - time.monotonic() - MARGIN_S
    if need_s <= left:
        return None
    return f"it may take {need_s:.0f} s, {max(left, 0.0):.0f} s are left before the part's time-out"


def linear_estimate(seconds: dict[int, float], num_envs: int) -> float:
    """Seconds a row at ``num_envs`` envs may take, from ``seconds`` (of rows of its kind, per number of envs):
    the largest smaller row's, scaled linearly in envs (opening a scene and stepping it grow at most so);
    0 when none ran (the part's time-out is the bound)."""
    smaller = [n for n in seconds if n <= num_envs]
    return seconds[max(smaller)] * num_envs / max(smaller) if smaller else 0.0


def skipped(part: str, what: str, reason: str) -> dict:
    """A row of ``skipped``: what a part did not measure, and why."""
    return {"part": part, "what": what, "reason": reason}


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
    """Stock and suspendable step time (none and half suspended) and the chunking loop's throughput per size, with
    where a ``global_clock`` loop step's time goes (``loop_split``), the camera task's loop with the observation
    demand off and on at the first size (``observation_demand``); then the step time at :data:`LARGE_ENVS`
    envs, on a CUDA device with the memory and the time for it (else a row of ``skipped``)."""
    steps, policy, split, seconds, bytes_per_env = [], [], [], {}, []
    cuda = device.startswith("cuda")
    for num_envs in size["num_envs"]:
        start, free = time.monotonic(), torch.cuda.mem_get_info(device)[0] if cuda else 0
        with open_env(TIMING_TASK, num_envs, device, suspendable=True, episode_length_s=1e6) as env:
            env.reset()
            steps += _step_time_rows(env, size)
            seconds[num_envs] = time.monotonic() - start
            if cuda:
                bytes_per_env.append((free - torch.cuda.mem_get_info(device)[0]) / num_envs)
            for schedule in ("global_clock", "async"):
                model = make_default_model(TIMING_TASK, CHUNK)
                loop = measure_policy(env, model, schedule, CHUNK, size["policy_steps"],
                                      split=schedule == "global_clock")
                split += [{"task": TIMING_TASK, "num_envs": num_envs, "clock": clock, **ms}
                          for clock, ms in loop.pop("split", {}).items()]
                policy.append({"task": TIMING_TASK, **loop})
    with open_env(DEMAND_TASK, size["num_envs"][0], device) as env:  # cameras rendering at ticks only, or not
        model = make_default_model(DEMAND_TASK, CHUNK)
        off, on = (measure_policy(env, model, "global_clock", CHUNK, size["policy_steps"], observation_demand=on)
                   ["active_env_steps_per_s"] for on in (False, True))
        demand = [{"task": DEMAND_TASK, "num_envs": env.num_envs, "chunk_length": CHUNK, "off_env_steps_per_s": off,
                   "on_env_steps_per_s": on, "on_over_off": on / off}]
    what = f"step_time at {LARGE_ENVS} envs"
    reason = _large_row_problem(device, max(bytes_per_env, default=0.0), size, seconds)
    if reason is None:
        try:
            with open_env(TIMING_TASK, LARGE_ENVS, device, suspendable=True, episode_length_s=1e6) as env:
                env.reset()
                steps += _step_time_rows(env, size)
        except RuntimeError as err:  # torch's OutOfMemoryError is one, and Warp's failed allocation
            if not any(s in str(err).lower() for s in ("out of memory", "failed to allocate")):
                raise
            reason = f"out of memory: {err}"
    return {"step_time": steps, "policy": policy, "loop_split": split, "observation_demand": demand,
            "skipped": [] if reason is None else [skipped("timing", what, reason)]}


def _step_time_rows(env, size: dict) -> list[dict]:
    rows = measure_overhead(env, [0.0, 0.5], size["blocks"], size["steps"], ops=False)
    return [{"task": TIMING_TASK, **row, "stock_over_ours": row["stock_ms"] / row["suspendable_ms"]} for row in rows]


def _large_row_problem(device: str, bytes_per_env: float, size: dict, seconds: dict[int, float]) -> str | None:
    """Why the :data:`LARGE_ENVS` row is not run (None: it is): not a CUDA device, less free device memory than
    :data:`MEMORY_HEADROOM` times the most a smaller row took per env, or too little time left (a smaller row's
    open and steps, scaled linearly in envs)."""
    if not device.startswith("cuda"):
        return "CUDA devices only"
    torch.cuda.empty_cache()
    free, need = torch.cuda.mem_get_info(device)[0], MEMORY_HEADROOM * bytes_per_env * LARGE_ENVS
    if need > free:
        return (f"memory: about {need / 2**30:.1f} GiB needed ({bytes_per_env / 2**20:.2f} MiB per env at a smaller"
                f" size, +{MEMORY_HEADROOM - 1:.0%}), {free / 2**30:.1f} GiB free")
    return time_problem(size, linear_estimate(seconds, LARGE_ENVS))


def part_recording(device: str, size: dict, root: str) -> dict:
    """Recording cost per step on the step thread, ours against Isaac Lab's recorder, per size; then
    :data:`E2E_TASK` recorded end to end against the same env unrecorded, and the episodes written against those
    ended (``recording_e2e``), per size."""
    with tempfile.TemporaryDirectory() as out_dir:
        rows = [{"task": RECORDING_TASK, **row} for n in size["num_envs"] for row in
                measure_recording(RECORDING_TASK, n, size["record_steps"], size["record_warmup"], out_dir, device)]
    e2e, skips, seconds = [], [], {}
    for num_envs in size["num_envs"]:
        reason = time_problem(size, linear_estimate(seconds, num_envs))
        if reason is not None:
            skips.append(skipped("recording", f"recording_e2e at {num_envs} envs", reason))
            continue
        start = time.monotonic()
        with tempfile.TemporaryDirectory() as out_dir:
            e2e.append({"task": E2E_TASK, **measure_recorded_throughput(
                E2E_TASK, num_envs, size["e2e_steps"], size["record_warmup"], out_dir, device, size["e2e_episode_s"])})
        seconds[num_envs] = time.monotonic() - start
    return {"recording": rows, "recording_e2e": e2e, "skipped": skips}


def part_determinism(device: str, size: dict, root: str) -> dict:
    """The stock step's ms with Isaac Lab 3.0's reproducible physics off and on (``open_env(...,
    deterministic=)``), each on an env of its own, per task of :data:`DETERMINISM_TASKS` and size, and on / off:
    what reproducibility costs, from which eval's and record's defaults are decided (docs/gpu.rst, Determinism).
    On the CPU the physics is reproducible either way: the rows run and say that they measure nothing. A task
    whose assets cannot be opened here, or that refuses the switch, is a row of ``skipped``."""
    rows, skips, seconds = [], [], {task: {} for task in DETERMINISM_TASKS}
    note = "" if device.startswith("cuda") else "CPU: measures nothing (its physics is reproducible either way)"
    for num_envs in size["num_envs"]:
        for task in DETERMINISM_TASKS:
            reason, start = time_problem(size, linear_estimate(seconds[task], num_envs)), time.monotonic()
            if reason is None:
                try:
                    ms = {mode: _stock_ms(task, num_envs, device, size, mode) for mode in ("off", "on")}
                except ValueError as err:  # assets not here, or Isaac Lab's refusal of the switch for the task
                    reason = str(err)
            if reason is not None:
                skips.append(skipped("determinism", f"determinism {task} at {num_envs} envs", reason))
                continue
            seconds[task][num_envs] = time.monotonic() - start
            rows.append({"task": task, "num_envs": num_envs, "off_ms": ms["off"], "on_ms": ms["on"],
                         "on_over_off": ms["on"] / ms["off"], "self_check": _self_check(task, num_envs, device),
                         "note": note})
    return {"determinism": rows, "skipped": skips}


def _self_check(task: str, num_envs: int, device: str) -> str:
    """The contact self-check's verdict for ``task`` with the mode on (kept from the env's opening, which refuses
    a failing one: a row of ``skipped`` then), as ``contacts on / off, rest height on - off``."""
    probe = check_deterministic_contacts(make_env_cfg(task, num_envs, device, deterministic="on"), task)
    if probe is None:
        return "not probed"
    return (f"passed: {probe.contacts_on}/{probe.contacts_off} contacts,"
            f" rest height {probe.height_on - probe.height_off:+.1e} m")


def _stock_ms(task: str, num_envs: int, device: str, size: dict, deterministic: str) -> float:
    with open_env(task, num_envs, device, suspendable=True, episode_length_s=1e6, deterministic=deterministic) as env:
        env.reset()
        return stock_step_ms(env, size["blocks"], size["determinism_steps"])


def part_tests(device: str, size: dict, root: str) -> dict:
    """The tests marked ``cuda`` on ``device``: each test file (or node id) of ``size["tests"]`` in a pytest
    process of its own, so that a CUDA fault in one (a dead context fails every later test of its process) costs
    that file only; all of them stopped :data:`MARGIN_S` before the part's time-out (``size["deadline"]``). Passed,
    failed and skipped (with the reason) tests, from the verbose lines, so that the tests that ran before a stop
    count."""
    deadline = size["deadline"] - MARGIN_S
    outcome = {"exit_status": 0, "stopped": False, "passed": [], "failed": [], "skipped": [], "files": {}}
    for target in size["tests"] or cuda_test_files(root):
        left = deadline - time.monotonic()
        if left < 1:
            outcome["stopped"] = True
            outcome["files"][target] = "not run: time-out"
            continue
        command = [sys.executable, "-m", "pytest", "-v", "-rs", "-p", "no:cacheprovider", "-n", "0", "-m", "cuda",
                   "--device", device, target]  # -n 0: the file in this one process, on the one device
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


PARTS = {"syncs": part_syncs, "timing": part_timing, "recording": part_recording, "determinism": part_determinism,
         "tests": part_tests}


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


def goals(figures: dict) -> dict:
    """The suite's goals, each True or False, present where their part ran: 0 host syncs on the policy's quiet
    steps, no more syncs in our ``env.step`` than in the stock one, stock / ours >= :data:`RATIO_GOAL` at
    :data:`RATIO_SIZE` envs with half suspended, the chunking loop >= :data:`LOOP_GOAL` of the bare step rate,
    recorded / unrecorded end to end >= :data:`RECORDING_GOAL` at :data:`RATIO_SIZE` envs, no episode lost by a
    recording, every test passed."""
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
    e2e = figures.get("recording_e2e", [])
    largest = [r for r in e2e if r["num_envs"] == RATIO_SIZE]
    if largest:
        out[f"recorded/unrecorded env-steps/s >= {RECORDING_GOAL} at {RATIO_SIZE} envs, end to end"] = all(
            r["recorded_over_unrecorded"] >= RECORDING_GOAL for r in largest)
    if e2e:
        out["no episode lost: every ended episode to write is in the file after close"] = all(
            r["episodes_written"] == r["episodes_to_write"] for r in e2e)
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
        ("observation_demand", ["task", "num_envs", "chunk_length", "off_env_steps_per_s", "on_env_steps_per_s",
                                "on_over_off"]),
        ("loop_split", ["task", "num_envs", "clock", "act_ms", "model_ms", "env_step_ms", "observe_ms", "rest_ms",
                        "loop_ms"]),
        ("recording", ["task", "num_envs", "manager", "hooks_ms", "ends_ms", "write_ms", "total_ms"]),
        ("recording_e2e", ["task", "num_envs", "unrecorded_env_steps_per_s", "recorded_env_steps_per_s", "close_s",
                           "recorded_over_unrecorded", "episodes_ended", "episodes_to_write", "episodes_written"]),
        ("determinism", ["task", "num_envs", "off_ms", "on_ms", "on_over_off", "self_check", "note"]),
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
    lines += [f"\nnot measured ({s['part']}): {s['what']}: {s['reason']}" for s in figures.get("skipped", [])]
    seconds = figures.get("seconds", {})
    lines.append("\nparts: " + ", ".join(f"{p} {s} ({seconds.get(p, 0):.0f} s)" for p, s in figures["parts"].items()))
    lines += [f"goal {'met' if ok else 'NOT met'}: {name}" for name, ok in figures["goals"].items()]
    return "\n".join(lines)


def _cell(value) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)
