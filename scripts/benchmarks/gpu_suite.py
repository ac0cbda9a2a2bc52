"""One command that proves the hot path on a device: host syncs per step, suspendable / stock step time, the
chunking loop's throughput and where its time goes, the recording cost and a recording end to end, the cost of
reproducible physics and the tests marked ``cuda``, at 1024 and 4096 envs (the step time also at 16384).

Each part (``isaaclab_suspend/benchmarks/gpu_suite.py`` says what it measures) runs in a process of its own
under a time-out (its share of ``--budget_s``), so that a hang costs one part, not the run. Writes one JSON of
figures (``--out``, with the card, driver and versions) and prints a table; exits 0 when every part ran and every
goal is met, 1 otherwise. The compiled Warp kernels go beside the JSON (``warp_cache.tar.xz``, its SHA-256 in the
JSON). A kernel cache is native code, so none is restored unless trusted: one this machine's run saved, or one named
with its hash (``--kernel-cache FILE --kernel-cache-sha256 HEX``), so that a second run on a fresh machine starts
warm. ``--small`` runs it at a few envs (the CPU test of the suite).

On a GPU (about 8 minutes; how to run it: docs/gpu.rst, its figures: docs/results.rst)::

    tools/run.sh python scripts/benchmarks/gpu_suite.py --device cuda:0 --out outputs/gpu_suite.json

On the CPU::

    tools/run.sh python scripts/benchmarks/gpu_suite.py --device cpu --small
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

from isaaclab_suspend import cli
from isaaclab_suspend.benchmarks.gpu_suite import PART_TIMEOUTS_S, PARTS, SIZES, goals, table, versions
from isaaclab_suspend.benchmarks.kernel_cache import KernelCacheRefused, restore_kernel_cache, save_kernel_cache

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_part(args: argparse.Namespace, part: str, timeout_s: float) -> tuple[dict, str]:
    """This script with ``--part`` in a new process group, killed whole after ``timeout_s``: its figures and
    status (``ok``, ``timed out after N s``, ``failed (exit N)``). The part is told the instant of its time-out
    (``time.monotonic``, one clock for every process of the machine), so that it skips the rows it has no time
    for."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        deadline = time.monotonic() + timeout_s
        command = [sys.executable, os.path.abspath(__file__), "--device", args.device, "--part", part,
                   "--part_out", out.name, "--part_deadline", str(deadline)] + (["--small"] if args.small else [])
        process = subprocess.Popen(command, start_new_session=True)
        try:
            status = process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            return {}, f"timed out after {timeout_s:.0f} s"
        if status != 0:
            return {}, f"failed (exit {status})"
        with open(out.name) as f:
            return json.load(f), "ok"


def sha256_hex(text: str) -> str:
    """An argparse type: a SHA-256 as 64 hexadecimal digits (lower case)."""
    if len(text) != 64 or any(c not in "0123456789abcdef" for c in text.lower()):
        raise argparse.ArgumentTypeError(f"'{text[:80]}' is not a SHA-256 (64 hexadecimal digits)")
    return text.lower()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", type=cli.device, default="cuda:0")
    parser.add_argument("--small", action="store_true", help="a few envs and steps (the CPU test of the suite)")
    parser.add_argument("--parts", type=lambda t: t.split(","), default=list(PARTS), metavar="PART[,PART]",
                        help=f"parts to run, of {','.join(PARTS)}")
    parser.add_argument("--budget_s", type=cli.positive_int, default=480, help="time for all parts together")
    parser.add_argument("--out", default=os.path.join("outputs", "gpu_suite.json"), help="the JSON of figures")
    parser.add_argument("--kernel-cache", "--kernel_cache", dest="kernel_cache", default=None, metavar="FILE",
                        help="tar.xz of Warp's compiled kernels, written after the parts (default: warp_cache.tar.xz"
                        " beside --out; 'none': none) and restored before them only if trusted: saved by this"
                        " machine's run, or its hash given with --kernel-cache-sha256 (it is native code)")
    parser.add_argument("--kernel-cache-sha256", type=sha256_hex, default=None, metavar="HEX",
                        help="restore --kernel-cache FILE, whose SHA-256 this must be (your own run's: printed and in"
                        " its JSON when it saved it)")
    parser.add_argument("--part", choices=list(PARTS), help=argparse.SUPPRESS)  # one part, in this process
    parser.add_argument("--part_out", help=argparse.SUPPRESS)
    parser.add_argument("--part_deadline", type=float, default=None, help=argparse.SUPPRESS)  # default: in 600 s
    args = parser.parse_args(argv)
    if unknown := set(args.parts) - set(PARTS):
        parser.error(f"unknown parts {sorted(unknown)}; known: {','.join(PARTS)}")
    if args.kernel_cache_sha256 and args.kernel_cache in (None, "none"):
        parser.error("--kernel-cache-sha256 goes with the --kernel-cache FILE it is the hash of")
    size = SIZES["small" if args.small else "full"]
    if args.part:
        deadline = args.part_deadline if args.part_deadline is not None else time.monotonic() + 600.0
        figures = PARTS[args.part](args.device, {**size, "deadline": deadline}, ROOT)
        with open(args.part_out, "w") as f:
            json.dump(figures, f)
        return 0

    archive = args.kernel_cache or os.path.join(os.path.dirname(os.path.abspath(args.out)), "warp_cache.tar.xz")
    restored = "not asked (--kernel-cache none)"
    if args.kernel_cache != "none":
        try:
            restored = restore_kernel_cache(archive, args.kernel_cache_sha256)
        except KernelCacheRefused as err:
            parser.exit(2, f"{parser.prog}: error: {err}\n")
        print(f"[gpu_suite] {restored}", flush=True)
    figures, statuses, deadline = {"versions": versions(args.device)}, {}, time.monotonic() + args.budget_s
    for part in [p for p in PARTS if p in args.parts]:
        left = deadline - time.monotonic()
        if left < 10:
            statuses[part] = "not run: budget spent"
            continue
        print(f"[gpu_suite] {part} (time-out {min(PART_TIMEOUTS_S[part], left):.0f} s)", flush=True)
        start = time.monotonic()
        result, statuses[part] = run_part(args, part, min(PART_TIMEOUTS_S[part], left))
        for key, value in result.items():  # the rows of ``skipped`` come from several parts
            figures[key] = figures.get(key, []) + value if key == "skipped" else value
        figures.setdefault("seconds", {})[part] = round(time.monotonic() - start, 1)
    figures["parts"], figures["goals"] = statuses, goals(figures)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    figures["kernel_cache"] = {"restored": restored}
    if args.kernel_cache != "none":
        figures["kernel_cache"].update(archive=archive, sha256=save_kernel_cache(archive))
    with open(args.out, "w") as f:
        json.dump(figures, f, indent=1)
    print(table(figures), f"\nFigures: {args.out}", sep="\n")
    if args.kernel_cache != "none":
        print(f"Compiled kernels: {archive} ({os.path.getsize(archive) / 2**20:.1f} MiB, sha256"
              f" {figures['kernel_cache']['sha256']}; restore it elsewhere with --kernel-cache FILE"
              " --kernel-cache-sha256 HEX)")
    passed = all(s == "ok" for s in statuses.values()) and all(figures["goals"].values())
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
