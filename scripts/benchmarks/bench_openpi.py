"""Cost of a global-clock tick through openpi's protocol: N env rows sent as N concurrent one-observation requests
by :class:`~isaaclab_suspend.serving.OpenpiChunkModel` to ``serve_policy.py --wire openpi`` (another
process, loopback, emulated model latency), against one single-env round trip; every chunk is checked bit for
bit against the local model's.

Example::

    tools/run.sh python scripts/benchmarks/bench_openpi.py --envs 16 64 --latency 0.01 --calls 50
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time

import torch
from prettytable import PrettyTable

from isaaclab_suspend.tasks.embedded import make_default_model
from isaaclab_suspend.serving import OpenpiChunkModel, OpenpiChunkModelCfg

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TASK = "Isaac-Cartpole-Suspendable"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--envs", type=int, nargs="+", default=[16, 64], help="env rows per tick")
    parser.add_argument("--latency", default="0.01", help="emulated latency of a model call on the server")
    parser.add_argument("--chunk", type=int, default=16)
    parser.add_argument("--calls", type=int, default=10, help="ticks per batch size and round")
    parser.add_argument("--repeats", type=int, default=5,
                        help="rounds of single-env trips and ticks, alternated so that load changes hit all alike")
    return parser.parse_args()


def start_server(args: argparse.Namespace) -> tuple[subprocess.Popen, str, int]:
    server = subprocess.Popen([sys.executable, os.path.join(ROOT, "scripts", "serve_policy.py"), "--wire",
                               "openpi", "--port", "0", "--model.chunk_length", str(args.chunk), "--latency",
                               args.latency],
                              cwd=ROOT, stdout=subprocess.PIPE, text=True)
    address = re.search(r"at ([\d.]+):(\d+)", server.stdout.readline())
    return server, address[1], int(address[2])


def timed(model: OpenpiChunkModel, local, num_envs: int, calls: int) -> tuple[list[float], int]:
    """Seconds of each of ``calls`` calls on ``num_envs`` random rows, and how many chunks differed from local."""
    times, mismatches = [], 0
    for _ in range(calls):
        rows, env_ids = {"policy": torch.randn(num_envs, 4)}, torch.arange(num_envs)
        start = time.perf_counter()
        chunk = model(rows, env_ids)
        times.append(time.perf_counter() - start)
        mismatches += int(not torch.equal(chunk, local(rows, env_ids)))
    return times, mismatches


def median_ms(times: list[float]) -> float:
    return 1e3 * sorted(times)[len(times) // 2]


def main() -> None:
    args = parse_args()
    server, host, port = start_server(args)
    try:
        local = make_default_model(TASK, args.chunk)
        times = {num_envs: [] for num_envs in [1, *args.envs]}
        wrong = dict.fromkeys(times, 0)
        for _ in range(args.repeats):
            for num_envs in times:  # the server's only client, one connection per env of a tick
                model = OpenpiChunkModel(OpenpiChunkModelCfg(host=host, port=port, connections=num_envs))
                timed(model, local, num_envs, 1)  # opens the connections
                seconds, mismatches = timed(model, local, num_envs, args.calls)
                times[num_envs] += seconds
                wrong[num_envs] += mismatches
                model.close()
        calls = args.calls * args.repeats
        table = PrettyTable(["envs", "tick ms", "single-env round trip ms", "tick / round trip", "chunks equal"])
        table.align = "r"
        for num_envs in args.envs:
            tick, single = median_ms(times[num_envs]), median_ms(times[1])
            table.add_row([num_envs, f"{tick:.1f}", f"{single:.1f}", f"{tick / single:.2f}",
                           f"{calls - wrong[num_envs]}/{calls}"])
    finally:
        server.terminate()
        server.wait(30)
    print(f"{TASK} embedded chunk model behind serve_policy.py --wire openpi, latency {args.latency} s per model"
          f" call, H = {args.chunk}, loopback, median of {calls} calls each (single-env chunks equal to the local"
          f" model's: {calls - wrong[1]}/{calls}):")
    print(table)


if __name__ == "__main__":
    main()
