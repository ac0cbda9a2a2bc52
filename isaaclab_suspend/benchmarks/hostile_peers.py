"""Attacks of hostile peers on loopback against ``serve_policy.py``, one function per attack taking the server's
port: what ``scripts/benchmarks/bench_hostile_peers.py`` measures the server's memory and well-formed latency
under (docs/remote.rst). Each returns once its peers have done their worst and been closed or timed out."""

from __future__ import annotations

import contextlib
import functools
import socket
import struct
import time

import msgpack
import numpy as np
import zmq
from openpi_client import msgpack_numpy
from websockets.sync.client import connect

MIB = 2**20


def ws(port: int):
    connection = connect(f"ws://127.0.0.1:{port}", max_size=None, open_timeout=30)
    connection.recv()
    return connection


def object_flood(port: int) -> None:  # three clients at once, each 4.2 MB of about 1M scalars
    flood = msgpack.packb([[0] * 1024] * 1024)
    connections = [ws(port) for _ in range(3)]
    for connection in connections:
        connection.send(flood)
    for connection in connections:
        connection.recv(timeout=60)


def half_frames(port: int) -> None:  # 40 connections each send half of an announced 32 MiB frame, then hold
    held = [ws(port) for _ in range(40)]
    for connection in held:
        with contextlib.suppress(OSError):  # dropped by the budget
            connection.socket.sendall(struct.pack(">BBQ", 0x82, 0xFF, 32 * MIB) + bytes(4 + 16 * MIB))
    time.sleep(3.0)  # past the read time-out


def pipelined(port: int) -> None:  # 4 requests of 60 MiB sent without reading a reply
    connection = ws(port)
    message = msgpack_numpy.packb({"policy": np.zeros(60 * MIB, np.uint8)})
    for _ in range(4):
        connection.send(message)
    time.sleep(2.0)
    connection.close()


def idle_openpi(port: int) -> None:  # 256 idle websockets, the cap
    idle = [ws(port) for _ in range(256)]
    time.sleep(1.0)
    list(map(type(idle[0]).close, idle))


def idle_tcp(port: int) -> None:  # 8 silent connections, renewed every 0.5 s for 3 s
    for _ in range(6):
        silent = [socket.create_connection(("127.0.0.1", port)) for _ in range(8)]
        time.sleep(0.5)
        list(map(socket.socket.close, silent))


def gr00t_declared_batch(port: int) -> None:  # 3 requests of 80 bytes declaring 2^28 zero-width rows
    with zmq.Context() as context, context.socket(zmq.REQ) as req:
        req.connect(f"tcp://127.0.0.1:{port}")
        for _ in range(3):
            req.send(msgpack.packb({"data": {"observation": {"state.policy": {
                b"nd": True, b"type": "<f4", b"kind": b"", b"shape": [2**28, 1, 0], b"data": b""}}}}))
            assert b"max_batch" in req.recv()


@functools.cache
def marker_flood() -> bytes:
    """An unauthenticated 63 MiB ping: a config marker of 22M empty lists (call once before measuring)."""
    return msgpack.packb({"endpoint": "ping", "data": {"__ModalityConfig__": True,
                                                       "as_json": "[" + "[]," * 22_000_000 + "[]]"}})


def gr00t_marker_flood(port: int) -> None:
    with zmq.Context() as context, context.socket(zmq.REQ) as req:
        req.connect(f"tcp://127.0.0.1:{port}")
        req.send(marker_flood())
        req.recv()


def gr00t_half_frames(port: int) -> None:  # 32 peers each send 14 of an announced 15 MiB frame, then hold
    held = []
    for _ in range(32):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(b"\xff" + bytes(7) + b"\x01\x7f\x03\x01" + b"NULL".ljust(20, b"\0") + bytes(32))
        greeting = b""
        while len(greeting) < 64:
            greeting += sock.recv(64 - len(greeting))
        ready = b"\x05READY\x0bSocket-Type" + struct.pack(">I", 3) + b"REQ"
        with contextlib.suppress(OSError):  # dropped by the budget
            sock.sendall(b"\x04" + bytes([len(ready)]) + ready + b"\x01\x00\x02" + struct.pack(">Q", 15 * MIB)
                         + bytes(14 * MIB))
        held.append(sock)
    time.sleep(3.0)  # past the read time-out
    list(map(socket.socket.close, held))
