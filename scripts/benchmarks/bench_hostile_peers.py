"""What hostile peers on loopback make ``serve_policy.py`` hold, and how long a well-formed client waits meanwhile.

The server runs in another process with its default caps and ``--read_timeout 2`` (openpi, ``tcp``,
GR00T's); its peak resident memory (``VmHWM``) comes from ``/proc``. Each attack runs while a
well-formed client calls every 50 ms (GR00T: one REQ socket): the table gives the peak's growth over idle and
the slowest well-formed call.

Example::

    tools/run.sh python scripts/benchmarks/bench_hostile_peers.py
"""

from __future__ import annotations

import os
import re
import signal
import struct
import subprocess
import sys
import threading
import time

import msgpack
import numpy as np
import torch
import zmq
from openpi_client import msgpack_numpy
from prettytable import PrettyTable
from websockets.sync.client import connect

from isaaclab_suspend.benchmarks.hostile_peers import (MIB, gr00t_declared_batch, gr00t_half_frames,
                                                       gr00t_marker_flood, half_frames, idle_openpi, idle_tcp,
                                                       marker_flood, object_flood, pipelined, ws)
from isaaclab_suspend.serving import TcpChunkModel, TcpChunkModelCfg

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def start_server(*args: str) -> tuple[subprocess.Popen, int]:
    process = subprocess.Popen([sys.executable, os.path.join(ROOT, "scripts", "serve_policy.py"), "--port", "0",
                                "--read_timeout", "2", *args], cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)
    while not (match := re.search(r"at 127\.0\.0\.1:(\d+)", line := process.stdout.readline())):
        if not line:
            raise SystemExit(f"serve_policy.py {' '.join(args)} did not start")
    return process, int(match[1])


def peak_mib(pid: int) -> float:
    return int(re.search(r"VmHWM:\s+(\d+) kB", open(f"/proc/{pid}/status").read())[1]) / 1024


def openpi_call(port: int) -> None:
    with connect(f"ws://127.0.0.1:{port}", open_timeout=60) as connection:
        connection.recv()
        connection.send(msgpack_numpy.packb({"policy": np.zeros(4, np.float32)}))
        assert b"actions" in connection.recv(timeout=60)


def tcp_call(port: int) -> None:
    client = TcpChunkModel(TcpChunkModelCfg(port=port, timeout_s=60))
    client({"policy": torch.zeros(1, 4)}, torch.arange(1))
    client.close()


GR00T_SOCKETS: dict[int, zmq.Socket] = {}
"""The well-formed GR00T client's REQ socket, by port (kept: GR00T's clients keep theirs)."""


def gr00t_call(port: int) -> None:
    if port not in GR00T_SOCKETS:
        GR00T_SOCKETS[port] = zmq.Context.instance().socket(zmq.REQ)
        GR00T_SOCKETS[port].setsockopt(zmq.RCVTIMEO, 60_000)
        GR00T_SOCKETS[port].connect(f"tcp://127.0.0.1:{port}")
    state = {b"nd": True, b"type": "<f4", b"kind": b"", b"shape": [1, 1, 4], b"data": bytes(16)}
    GR00T_SOCKETS[port].send(msgpack.packb({"data": {"observation": {"state.policy": state}}}))
    assert b"action.action" in GR00T_SOCKETS[port].recv()


def measure(call, port: int, attack) -> float:
    """Run ``attack`` while well-formed calls go on every 50 ms; the slowest call [s]."""
    worst, done = [0.0], threading.Event()

    def probe():
        while not done.is_set():
            start = time.perf_counter()
            try:
                call(port)
            except Exception as err:  # noqa: BLE001 - a refused well-formed call is the figure
                worst[0] = print(f"well-formed call failed: {err!r}", file=sys.stderr) or float("inf")
            worst[0] = max(worst[0], time.perf_counter() - start)
            time.sleep(0.05)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    attack(port)
    done.set()
    thread.join(120)
    return worst[0]


def main() -> None:
    table = PrettyTable(["server", "attack", "peak growth MiB", "slowest good call ms"])
    process, port = start_server("--wire", "openpi")
    openpi_call(port)
    idle = openpi_idle = peak_mib(process.pid)
    for name, attack in (("3 x 4.2 MB object floods", object_flood), ("40 half-sent 32 MiB frames", half_frames),
                         ("4 pipelined 60 MiB requests", pipelined), ("256 idle websockets", idle_openpi)):
        worst = measure(openpi_call, port, attack)
        table.add_row(["openpi", name, f"{peak_mib(process.pid) - idle:.0f}", f"{1e3 * worst:.1f}"])
    held = [ws(port) for _ in range(8)]
    for connection in held:
        connection.socket.sendall(struct.pack(">BBQ", 0x82, 0xFF, 32 * MIB) + bytes(4 + MIB))
    start = time.perf_counter()
    process.send_signal(signal.SIGINT)
    process.wait(60)
    stop_s = time.perf_counter() - start
    process, port = start_server("--batch_wait_ms", "1000")
    tcp_call(port)
    idle = peak_mib(process.pid)
    worst = measure(tcp_call, port, idle_tcp)
    table.add_row(["project", "8 silent connections x 6", f"{peak_mib(process.pid) - idle:.0f}", f"{1e3 * worst:.1f}"])
    process.send_signal(signal.SIGINT)
    process.wait(60)
    marker_flood()  # built before the GR00T server's idle peak
    process, port = start_server("--wire", "gr00t", "--keys", "state.policy=policy")
    gr00t_call(port)
    idle = peak_mib(process.pid)
    for name, attack in (("3 x declared B = 2^28", gr00t_declared_batch),
                         ("63 MiB config-marker ping", gr00t_marker_flood),
                         ("32 half-sent 15 MiB frames", gr00t_half_frames)):
        worst = measure(gr00t_call, port, attack)
        table.add_row(["GR00T", name, f"{peak_mib(process.pid) - idle:.0f}", f"{1e3 * worst:.1f}"])
    process.send_signal(signal.SIGINT)
    process.wait(60)
    print(f"serve_policy.py under attack on loopback (idle peak of the openpi server {openpi_idle:.0f} MiB); the openpi"
          f" process exited {stop_s:.2f} s after SIGINT with 8 half-sent frames held:\n{table}")


if __name__ == "__main__":
    main()
