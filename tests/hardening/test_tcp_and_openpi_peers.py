"""The policy server and client against hostile peers, all on loopback: forged lengths and shapes, garbage,
slow, silent and excess connections, forged replies, tokens. The server under fuzz is ``serve_policy.py`` in
its own process, so its resident memory is measured alone; a well-formed client is served throughout, without
waiting for the hostile peers. No test measures how fast anything happens: each waits for the event it expects
(a drop, a reply, a state of the server) with a deadline that is only reached when it never comes."""

import asyncio
import contextlib
import json
import logging
import os
import re
import socket
import struct
import subprocess
import sys
import threading
import time
import tracemalloc
import types

import msgpack
import numpy as np
import pytest
import torch
import websockets
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import DEADLINE_S, ROOT, check_usage_errors, eval_remote, load_script, wait_for

from openpi_client import msgpack_numpy
from openpi_client.websocket_client_policy import WebsocketClientPolicy
from websockets.asyncio.server import serve as ws_serve
from websockets.sync.client import connect as ws_connect

from isaaclab_suspend.names import TOKEN_ENV
from isaaclab_suspend.serving import batching, msgpack_arrays
from isaaclab_suspend.serving.batching import PATIENCE, BatchingCfg
from isaaclab_suspend.serving.openpi.client import OpenpiChunkModel, OpenpiChunkModelCfg
from isaaclab_suspend.serving.openpi.server import OpenpiPolicyServer, OpenpiPolicyServerCfg
from isaaclab_suspend.serving.tcp.server import TcpPolicyServer, TcpPolicyServerCfg
from isaaclab_suspend.serving.tcp.client import TcpServerError, TcpChunkModel, TcpChunkModelCfg
from isaaclab_suspend.serving import WireLimitsCfg
from isaaclab_suspend.serving.tcp.protocol import ProtocolError, encode_message, receive_message

pytestmark = pytest.mark.slow  # hostile peers against the three wires' servers

H = 4
MESSAGE_MB, CONNECTIONS = 4, 8
"""Caps of the fuzzed server: the documented bound of its resident memory is 2x idle + 4 MiB x 8."""
ROWS, IDS = {"policy": torch.zeros(2, 4)}, torch.arange(2)



def _unread(sock: socket.socket) -> int:
    """Bytes sent on ``sock`` that the process at the other end has not read yet: what our end has not had
    acknowledged, and what waits in the other end's receive queue (Linux ``/proc/net/tcp``; 0 once either end
    is closed)."""
    def name(address) -> str:
        return f"{int.from_bytes(socket.inet_aton(address[0]), 'little'):08X}:{address[1]:04X}"

    try:
        ours, theirs = name(sock.getsockname()), name(sock.getpeername())
    except OSError:  # no longer connected
        return 0
    unread = 0
    with open("/proc/net/tcp") as table:
        for line in table.readlines()[1:]:
            local, remote, _, queues = line.split()[1:5]
            tx_queue, rx_queue = (int(v, 16) for v in queues.split(":"))
            if (local, remote) == (ours, theirs):
                unread += tx_queue
            elif (local, remote) == (theirs, ours):
                unread += rx_queue
    return unread


def _open(sock: socket.socket) -> bool:
    """Whether the other end still holds the connection: nothing from it, not even a close (a look that does not
    wait)."""
    timeout = sock.gettimeout()
    sock.setblocking(False)
    try:
        sock.recv(1, socket.MSG_PEEK)  # data or b"" (closed): either way it sent something
        return False
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        sock.settimeout(timeout)


def _frame(header: bytes, payload: bytes = b"", length: int | None = None) -> bytes:
    return struct.pack(">I", len(header) if length is None else length) + header + payload


def _header(arrays, kind="infer") -> bytes:
    return json.dumps({"type": kind, "arrays": arrays}).encode()


HELLO = _frame(_header([], "hello"))

# headers that announce anything: forged shapes and dtypes, nesting, names that clash
dims = st.one_of(st.integers(0, 8), st.integers(2**20, 2**62), st.integers(-5, -1), st.just(True), st.text(max_size=3))
spec = st.one_of(
    st.tuples(st.text(max_size=12), st.sampled_from(["<f4", "|u1", "|O", "<U8", ">f8", "<c8", "x"]),
              st.lists(dims, max_size=10)).map(list),
    st.lists(st.integers() | st.text(max_size=4), max_size=4),
)
header_bytes = st.one_of(
    st.lists(spec, max_size=6).map(_header),
    st.recursive(st.none() | st.integers() | st.text(max_size=8), lambda x: st.lists(x) | st.dictionaries(
        st.text(max_size=6), x), max_leaves=20).map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=200),
    st.just(b"[" * 5000),
)
frames = st.one_of(
    st.tuples(header_bytes, st.binary(max_size=300)).map(lambda hp: _frame(*hp)),
    st.tuples(header_bytes, st.sampled_from([2**32 - 1, 2**31, 65537, 0, 1])).map(
        lambda hl: _frame(hl[0], length=hl[1])),
    st.binary(max_size=64),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=frames)
def test_any_bytes_give_a_message_or_a_protocol_error_within_the_limits(data):
    """receive_message on arbitrary bytes: a message, or one of the documented errors, and it never holds more
    than the message cap (measured with tracemalloc)."""
    limits = WireLimitsCfg(max_message_bytes=2**20, max_header_bytes=4096)
    a, b = socket.socketpair()
    with a, b:
        a.sendall(data)
        a.shutdown(socket.SHUT_WR)
        tracemalloc.start()
        try:
            header, arrays = receive_message(b, limits, 1.0, 1.0)
            assert isinstance(header, dict) and isinstance(arrays, dict)
        except (ProtocolError, EOFError, ConnectionError):  # not TimeoutError: every byte is there, then EOF
            pass
        finally:
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
    assert peak < limits.max_message_bytes + 2**20


def _served(client: TcpChunkModel) -> float:
    """One well-formed call (the client's time-out is :data:`DEADLINE_S`); its latency [s], to print."""
    start = time.perf_counter()
    assert client(ROWS, IDS).shape == (2, H, 1)
    return time.perf_counter() - start


def _memory_mib(pid: int) -> tuple[float, float]:
    """Resident and peak resident memory of a process [MiB]."""
    status = open(f"/proc/{pid}/status").read()
    return tuple(int(re.search(rf"{key}:\s+(\d+) kB", status)[1]) / 1024 for key in ("VmRSS", "VmHWM"))


def _read_until_closed(sock: socket.socket) -> bytes:
    """What the other end sends until it closes the connection (a reset counts as closed); a ``TimeoutError`` if
    it does not close within :data:`DEADLINE_S`."""
    sock.settimeout(DEADLINE_S)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except ConnectionError:
        pass
    return data


@pytest.fixture(scope="module")
def server_process():
    """serve_policy.py with small caps: 4 MiB per message, 8 connections, 1 s read time-out."""
    process = subprocess.Popen(
        [sys.executable, os.path.join(ROOT, "scripts", "serve_policy.py"), "--port", "0", "--chunk", str(H),
         "--max_message_mb", str(MESSAGE_MB), "--max_connections", str(CONNECTIONS), "--read_timeout", "1",
         "--idle_timeout", "60"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    line = process.stdout.readline()
    address = re.search(r"at 127\.0\.0\.1:(\d+)", line)
    assert address, line + process.stderr.read()
    yield process, ("127.0.0.1", int(address[1]))
    if process.poll() is None:
        process.terminate()
        process.communicate(timeout=30)


def test_fuzzed_server_keeps_serving_in_bounded_memory(server_process):
    """Forged lengths and shapes, garbage, slow, silent and excess connections, and connections that make the
    server hold a whole message each: every one is dropped or refused with one log line, no traceback, a
    well-formed client is served after every probe, and while silent and slow peers are held (before their
    read time-out: it never waits for them), and the peak resident memory stays below 2x idle + message cap x
    connection cap."""
    process, address = server_process
    client = TcpChunkModel(TcpChunkModelCfg(host=address[0], port=address[1], timeout_s=DEADLINE_S))
    _served(client)
    idle_rss, _ = _memory_mib(process.pid)
    times = []

    # forged header lengths and shapes, garbage: hypothesis-made, each answered with an error and closed
    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(data=frames, hello_first=st.booleans())
    def probe(data, hello_first):
        with socket.create_connection(address, timeout=DEADLINE_S) as raw:
            try:
                raw.sendall((HELLO if hello_first else b"") + data)
                raw.shutdown(socket.SHUT_WR)
            except OSError:
                pass  # the server already dropped the connection
            _read_until_closed(raw)

    probe()
    times.append(_served(client))

    # silent and slow clients: dropped after the 1 s read time-out while the good client is served
    silent = [socket.create_connection(address) for _ in range(3)]
    slow = socket.create_connection(address)
    slow.sendall(HELLO[:1])
    wait_for(lambda: not _unread(slow), "the server reads the slow client's first byte")  # its 1 s starts here
    times.append(_served(client))
    assert all(map(_open, [*silent, slow])), "the well-formed client was served only after the silent or slow ones"
    # one byte every 0.25 s (the pace of a slow client, no wait for the server): its hello would be whole after
    # 8.5 s, but it is not whole within 1 s, so it is dropped and a later byte cannot be sent
    with pytest.raises(OSError):
        for byte in HELLO[1:] + HELLO * 3:
            time.sleep(0.25)
            slow.sendall(bytes([byte]))
            times.append(_served(client))
    for sock in [*silent, slow]:
        assert _read_until_closed(sock) == b"" and sock.recv(1) == b""  # closed by the server
        sock.close()

    # connections that each make the server hold a whole message: hello, then an announced 4 MiB array sent
    # in part; then many silent connections at once: each closes the one waiting longest for its hello (or the
    # idle client), never a holder (receiving), so none is refused and the well-formed client goes on
    budget = MESSAGE_MB * 2**20 - 4096
    big = _frame(_header([["policy", "|u1", [budget]], ["env_ids", "<i8", [1]]]))
    holders = []
    for _ in range(CONNECTIONS - 1):
        sock = socket.create_connection(address)
        sock.sendall(HELLO + big + bytes(budget // 2))
        holders.append(sock)
    # the server has read all they sent (or dropped them): each is receiving before the flood comes
    wait_for(lambda: not any(map(_unread, holders)), "the server reads what the holders sent")
    _, peak_hold = _memory_mib(process.pid)
    flood = [socket.create_connection(address) for _ in range(40)]
    replies = [_read_until_closed(sock) for sock in flood]
    assert replies.count(b"") == len(flood), replies[:3]  # closed to admit the next, or after the read time-out
    times.append(_served(client))
    for sock in holders:  # dropped by the server: their message is not whole within the 1 s read time-out
        assert _read_until_closed(sock).startswith(b"\x00") and sock.recv(1) == b""
    for sock in [*holders, *flood]:
        sock.close()

    # the server accepts new clients again, and everything is still served
    other = TcpChunkModel(TcpChunkModelCfg(host=address[0], port=address[1], timeout_s=DEADLINE_S))
    times += [_served(other), _served(client)]
    rss, peak = _memory_mib(process.pid)
    bound = 2 * idle_rss + MESSAGE_MB * CONNECTIONS
    print(f"\nserver RSS: idle {idle_rss:.0f} MiB, peak {peak:.0f} MiB (while holding 7 half-sent 4 MiB messages:"
          f" {peak_hold:.0f} MiB), after {rss:.0f} MiB; bound 2 x idle + {MESSAGE_MB} MiB x {CONNECTIONS} ="
          f" {bound:.0f} MiB; slowest well-formed call {max(times) * 1000:.1f} ms")
    assert peak < bound
    assert peak - idle_rss < 2 * MESSAGE_MB * CONNECTIONS, "more than the caps allow"
    client.close()
    other.close()
    process.terminate()
    _, err = process.communicate(timeout=30)
    assert "Traceback" not in err, err[-3000:]
    drops = [line for line in err.splitlines() if "dropped" in line]
    assert sum("malformed message" in line for line in drops) >= 100, err[-3000:]  # most fuzz probes
    assert sum("no message within 1 s" in line for line in drops) >= 3, err[-3000:]  # the silent ones
    assert sum("stalled" in line for line in drops) >= CONNECTIONS, err[-3000:]  # the slow one and the holders
    assert any("exceeds the limit" in line for line in drops), err[-3000:]
    assert sum("to admit" in line for line in err.splitlines()) >= len(flood) - 1


class _FakeServer:
    """A raw TCP server that answers each message with ``replies(request_number)`` bytes."""

    def __init__(self, replies):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.address = self.sock.getsockname()
        self.replies = replies
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                for n in range(2):
                    try:
                        receive_message(conn, WireLimitsCfg(), DEADLINE_S, DEADLINE_S)
                        conn.sendall(self.replies(n))
                    except (OSError, EOFError):
                        break
                # end our side after the replies, and close only once the client has closed its own (a close
                # with something of the client's unread would reset the connection under the replies)
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_WR)
                    conn.settimeout(DEADLINE_S)
                    while conn.recv(65536):
                        pass

    def close(self):
        self.sock.close()


GOOD_HELLO = encode_message({"type": "hello", "version": 1, "chunk_length": H, "action_dim": 1, "task": None})
FORGED_REPLIES = {
    "forged length": struct.pack(">I", 2**32 - 1),
    "over the header limit": struct.pack(">I", 2**20) + b"{}",
    "garbage": b"\x00\x00\x00\x05\xff\xfe\x00\x01\x02",
    "not an object": _frame(b"[1, 2]"),
    "huge shape": _frame(_header([["chunk", "<f4", [2**40, 16, 1]]], "chunk")),
    "object dtype": _frame(_header([["chunk", "|O", [1]]], "chunk")),
    "no chunk": _frame(_header([], "chunk")),
    "int chunk": encode_message({"type": "chunk"}, {"chunk": torch.zeros(2, H, 1, dtype=torch.int32)}),
    "wrong batch": encode_message({"type": "chunk"}, {"chunk": torch.zeros(3, H, 1)}),
    "wrong H": encode_message({"type": "chunk"}, {"chunk": torch.zeros(2, H + 1, 1)}),
    "cut short": encode_message({"type": "chunk"}, {"chunk": torch.zeros(2, H, 1)})[:-5],
}
BAD_HELLOS = {
    "garbage hello": b"\x00\x00\x00\x02{]",
    "bad metadata": encode_message({"type": "hello", "version": 1, "chunk_length": "16"}),
    "zero H": encode_message({"type": "hello", "version": 1, "chunk_length": 0}),
    "other version": encode_message({"type": "hello", "version": 2, "chunk_length": 16}),
}


@pytest.mark.parametrize("case", sorted(FORGED_REPLIES))
def test_client_turns_any_bad_reply_into_one_connection_error(case):
    server = _FakeServer(lambda n: GOOD_HELLO if n == 0 else FORGED_REPLIES[case])
    try:
        client = TcpChunkModel(TcpChunkModelCfg(host=server.address[0], port=server.address[1],
                                                      timeout_s=DEADLINE_S))
        tracemalloc.start()
        with pytest.raises(ConnectionError, match=f"policy server at 127.0.0.1:{server.address[1]}"):
            client(ROWS, IDS)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert peak < 2**20, "the client allocated what a forged reply announced"
    finally:
        server.close()


@pytest.mark.parametrize("case", sorted(BAD_HELLOS))
def test_client_refuses_a_bad_hello_with_one_error(case):
    server = _FakeServer(lambda n: BAD_HELLOS[case])
    try:
        with pytest.raises(TcpServerError, match=f"policy server at 127.0.0.1:{server.address[1]}"):
            TcpChunkModel(TcpChunkModelCfg(host=server.address[0], port=server.address[1], timeout_s=DEADLINE_S))
    finally:
        server.close()


def test_eval_exits_2_with_one_line_for_a_garbage_server():
    server = _FakeServer(lambda n: b"\x00\x00\x00\x05garbage")
    try:
        run = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "eval.py"), "--remote",
                              f"127.0.0.1:{server.address[1]}"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    finally:
        server.close()
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr[-3000:]
    assert f"eval.py: error: The policy server at 127.0.0.1:{server.address[1]} sent a reply" in run.stderr


def test_connection_cap_idle_timeout_and_token(caplog, monkeypatch):
    caplog.set_level(logging.INFO)
    echo = lambda rows, ids: torch.zeros(len(ids), H, 1)  # noqa: E731
    # a half-sent request is held until the test closes it (read time-out DEADLINE_S), idle clients are closed
    cfg = TcpPolicyServerCfg(port=0, chunk_length=H, max_connections=2, idle_timeout_s=0.5, read_timeout_s=DEADLINE_S)
    with TcpPolicyServer(echo, cfg) as server:
        host, port = server.address
        clients = [TcpChunkModel(TcpChunkModelCfg(host=host, port=port, timeout_s=DEADLINE_S))
                   for _ in range(2)]
        # both idle past the time-out: closed by the server, reconnected on the next call
        wait_for(lambda: server.num_connections == 0, "the server closes both idle clients")
        assert all(c(ROWS, IDS).shape == (2, H, 1) for c in clients)
        assert sum("no message within 0.5 s" in r.message for r in caplog.records) >= 2
        holders = []  # two connections receiving a request: the server is full and nobody idle can make room
        for _ in range(2):
            holders.append(socket.create_connection((host, port)))
            holders[-1].sendall(HELLO)
            receive_message(holders[-1], WireLimitsCfg(), DEADLINE_S, DEADLINE_S)
            holders[-1].sendall(b"\0\0")
            # read before the next one connects: a holder whose bytes are still unread counts as idle, and goes
            wait_for(lambda: not _unread(holders[-1]), "the server reads the holder's first bytes")
        with pytest.raises(TcpServerError, match="refused the connection: busy: it serves at most 2 connections"
                                                    " at a time and all are receiving or being served"):
            TcpChunkModel(TcpChunkModelCfg(host=host, port=port))
        for sock in holders:
            sock.close()
        assert not any(r.exc_info for r in caplog.records)

    token_cfg = TcpPolicyServerCfg(port=0, chunk_length=H, token="s3cret")
    with TcpPolicyServer(echo, token_cfg) as server:
        host, port = server.address
        monkeypatch.delenv(TOKEN_ENV, raising=False)
        with pytest.raises(TcpServerError, match="refused the connection: wrong or missing token"):
            TcpChunkModel(TcpChunkModelCfg(host=host, port=port))
        with pytest.raises(TcpServerError, match="wrong or missing token"):
            TcpChunkModel(TcpChunkModelCfg(host=host, port=port, token="s3cre"))
        assert TcpChunkModel(TcpChunkModelCfg(host=host, port=port, token="s3cret"))(ROWS, IDS).shape[1] == H
        monkeypatch.setenv(TOKEN_ENV, "s3cret")  # how eval.py and record.py pass it
        assert TcpChunkModel(TcpChunkModelCfg(host=host, port=port))(ROWS, IDS).shape[1] == H
        with socket.create_connection((host, port)) as raw:  # no request before the hello
            raw.sendall(encode_message({"type": "infer"}, {"env_ids": IDS}))
            reply, _ = receive_message(raw, WireLimitsCfg(), DEADLINE_S, DEADLINE_S)
            assert "the first request must be 'hello'" in reply["message"]

    with pytest.raises(ValueError, match="beyond loopback, without a token"):
        TcpPolicyServer(echo, TcpPolicyServerCfg(host="0.0.0.0", port=0))
    TcpPolicyServer(echo, TcpPolicyServerCfg(host="0.0.0.0", port=0, insecure_no_token=True)).close()
    for bad in ({"max_connections": 0}, {"read_timeout_s": float("nan")}, {"token": ""},
                {"limits": WireLimitsCfg(max_message_bytes=-1)}):
        with pytest.raises(ValueError, match="must be"):
            TcpPolicyServer(echo, TcpPolicyServerCfg(port=0, **bad))


SERVE_ARGS = {
    ("--port", "70000"): "argument --port: 70000 is out of range: must be in [0, 65535]",
    ("--model.chunk_length", "0"): "--model.chunk_length 0: must be a positive integer",
    ("--max_connections", "x"): "argument --max_connections: 'x' is not an integer",
    ("--read_timeout", "nan"): "argument --read_timeout: nan is out of range: must be a finite number in (0, 3600]",
    ("--max_message_mb", "0"): "argument --max_message_mb: 0 is out of range: must be a finite number in (0, 65536]",
    ("--checkpoint", "/nonexistent.pt"): "Checkpoint '/nonexistent.pt' does not exist",
    ("--device", "tpu:0"): "argument --device: 'tpu:0'",
    ("--host", "0.0.0.0"): "beyond loopback, without a token",
    ("--wire", "openpi", "--host", "0.0.0.0"): "beyond loopback, without a token",
    ("--keys", "observation/state=policy"): "--keys needs --wire openpi or gr00t",
    ("--wire", "openpi", "--keys", "state"): "argument --keys: 'state' is not KEY=PATH",
    ("--allow_kill",): "--allow_kill needs --wire gr00t",
    ("--wire", "gr00t", "--keys", "policy=policy"): "'state.<name>' or 'video.<name>'",
    ("--model", "rl_actor", "--checkpoint", __file__): "is not a readable rsl_rl or skrl checkpoint",
    ("--batch_wait_ms", "-1"): "argument --batch_wait_ms: -1 is out of range",
    ("--host", "203.0.113.1", "--insecure_no_token"): "error: [Errno 99]",
}


def test_serve_policy_rejects_bad_arguments_with_one_line(capsys, monkeypatch):
    script = load_script("serve_policy")
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    check_usage_errors(script, SERVE_ARGS, capsys, prefix=("--port", "0"))


@pytest.mark.parametrize("protocol", ["tcp", "openpi", "gr00t"])
def test_serve_policy_on_a_port_in_use_is_one_line(protocol, capsys, monkeypatch):
    """Every protocol's server on a port another socket holds: one line and exit status 2 (GR00T's ZeroMQ socket
    raised its own error type, printed as a traceback)."""
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = str(busy.getsockname()[1])
        keys = ["--keys", "state.cartpole=policy"] if protocol == "gr00t" else []
        check_usage_errors(load_script("serve_policy"), {("--wire", protocol, "--port", port, *keys): "in use"},
                           capsys)


# --- msgpack codec: any bytes decode within the object cap or give one ValueError ---------------------------------

msgpack_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**64 - 1) | st.floats(allow_nan=False) | st.text(max_size=8)
    | st.binary(max_size=8),
    lambda inner: st.lists(inner, max_size=8) | st.dictionaries(st.text(max_size=4), inner, max_size=8),
    max_leaves=200,
)


def _objects(value) -> int:
    if isinstance(value, dict):
        return 1 + sum(1 + _objects(v) for v in value.values())
    if isinstance(value, list):
        return 1 + sum(_objects(v) for v in value)
    return 1


@settings(max_examples=300, deadline=None)
@given(value=msgpack_values)
def test_msgpack_objects_are_counted_exactly_before_decoding(value):
    """count_objects agrees with the object tree, for every msgpack type (containers and scalars alike)."""
    data = msgpack.packb(value)
    assert msgpack_arrays.count_objects(data) == _objects(value)
    assert msgpack_arrays.unpackb(data) == msgpack.unpackb(data, strict_map_key=False)
    with pytest.raises(ValueError, match="at most 3 msgpack objects"):
        msgpack_arrays.count_objects(msgpack.packb([value, 0, 0]), limit=3)


@settings(max_examples=400, deadline=None)
@given(data=st.binary(max_size=300) | msgpack_values.map(msgpack.packb).map(lambda b: b[: len(b) // 2 + 1]))
def test_msgpack_any_bytes_decode_or_give_one_value_error(data):
    try:
        msgpack_arrays.unpackb(data)
    except ValueError:
        pass


@pytest.mark.parametrize("forged", ["scalars", "strings", "empty maps"])
def test_msgpack_object_floods_cost_bounded_time_and_memory(forged):
    """The issue's 4.2 MB message of about 1M scalars (passing the old 1024-container cap): refused after 4097
    objects, with under 1 MiB allocated, having read no further than those: the rest of the message may be
    anything, so the refusal costs the same whatever its size."""
    value = {"scalars": [[0] * 1000] * 1000, "strings": [[""] * 1000] * 1000, "empty maps": [[{}] * 1000] * 1000}
    data = msgpack.packb(value[forged])
    tracemalloc.start()
    with pytest.raises(ValueError, match="at most 4096 msgpack objects"):
        msgpack_arrays.unpackb(data)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 2**20, peak
    # each of the first 4097 objects takes at most 3 bytes here; 0xc1 is no msgpack type, so a reader that went on
    # past them would say so instead
    read = 3 * (msgpack_arrays.MAX_OBJECTS + 1)  # about 1 % of the message
    with pytest.raises(ValueError, match="at most 4096 msgpack objects"):
        msgpack_arrays.unpackb(data[:read] + b"\xc1" * (len(data) - read))


# --- the openpi server against hostile peers ----------------------------------------------------------------------

OPENPI_CAP = 2**20  # a message cap of 1 MiB, a budget of 4 MiB, 8 connections, 1 s read time-out


def _slow_echo(obs_rows, env_ids):
    time.sleep(0.01)  # the cost of a model call (no test waits on it)
    return torch.zeros(len(env_ids), H, 1)


@pytest.fixture
def openpi_server():
    cfg = OpenpiPolicyServerCfg(port=0, chunk_length=H, action_dim=1, max_connections=8, read_timeout_s=1.0,
                                limits=WireLimitsCfg(max_message_bytes=OPENPI_CAP), max_buffered_bytes=4 * OPENPI_CAP)
    with OpenpiPolicyServer(_slow_echo, cfg) as server:
        yield server


def _good_call(server) -> None:
    """One well-formed openpi request on a fresh connection, answered."""
    client = WebsocketClientPolicy(*server.address)
    assert client.infer({"policy": np.zeros(4, np.float32)})["actions"].shape == (H, 1)
    client._ws.close()


def _ws(server):
    connection = ws_connect("ws://{}:{}".format(*server.address), max_size=None)
    connection.recv()  # metadata
    return connection


def _half_frame(size: int) -> bytes:
    """A masked binary websocket frame announcing ``size`` bytes, with half of them."""
    return struct.pack(">BBQ", 0x82, 0x80 | 127, size) + b"\0\0\0\0" + bytes(size // 2)


def test_openpi_server_bounds_what_hostile_peers_make_it_hold(openpi_server):
    """Half-sent frames, pipelined requests, idle connections, an object flood: the server's buffered bytes stay
    within its budget, stalled frames are dropped after the read time-out, a full server makes room for a new
    client, a well-formed client is served after every probe (while stalled frames are still held: it does not
    wait for them), and a stop does not wait for half-sent frames."""
    server, budget = openpi_server, 4 * OPENPI_CAP
    _good_call(server)
    # 7 connections that each send half of an announced 1 MiB frame: the budget drops the oldest, the rest are
    # dropped after the 1 s read time-out
    holders = [_ws(server) for _ in range(7)]
    for connection in holders:
        with contextlib.suppress(OSError):  # dropped by the budget already
            connection.socket.sendall(_half_frame(OPENPI_CAP - 64))
        wait_for(lambda: not _unread(connection.socket), "the server reads the half frame (or drops it)")
        assert server.buffered_bytes <= budget
    _good_call(server)
    assert server.buffered_bytes, "the well-formed client was served only after the stalled frames were dropped"
    wait_for(lambda: not server.buffered_bytes, "the stalled frames are dropped")
    for connection in holders:
        with pytest.raises(websockets.ConnectionClosed):
            connection.recv(timeout=DEADLINE_S)
    # pipelined requests: the second is not read until the first is answered
    piped = _ws(server)
    message = msgpack_arrays.packb({"policy": np.zeros(OPENPI_CAP // 8, np.float32)})
    for _ in range(4):
        piped.send(message)
    assert server.buffered_bytes <= budget
    for _ in range(4):
        assert "actions" in msgpack_arrays.unpackb(piped.recv(timeout=DEADLINE_S))
    piped.close()
    # an object flood of 1 MiB: refused with openpi's error frame, the others are served meanwhile
    flood = _ws(server)
    flood.send(msgpack.packb([[0] * 1000] * 1000))
    assert "at most 4096 msgpack objects" in flood.recv(timeout=DEADLINE_S)
    _good_call(server)
    # 8 idle connections (the cap): a new client closes the idlest and is served at once
    idle = [_ws(server) for _ in range(8)]
    _good_call(server)
    with pytest.raises(websockets.ConnectionClosed):
        idle[0].recv(timeout=DEADLINE_S)
    # a stop while clients hold half-sent frames (and idle connections, which the server would keep for
    # idle_timeout_s = 600 s) does not wait for them
    for connection in idle[1:4]:
        with contextlib.suppress(OSError):
            connection.socket.sendall(_half_frame(OPENPI_CAP // 2))
    wait_for(lambda: not any(_unread(c.socket) for c in idle[1:4]), "the server reads the half frames")
    closing = threading.Thread(target=server.close)
    closing.start()
    closing.join(DEADLINE_S)
    assert not closing.is_alive(), "the stop waits for the clients"


def test_openpi_server_refuses_bad_authorization_cleanly(caplog, monkeypatch):
    """Two Authorization headers: 400, a wrong or missing token: 401, never a 500 or a traceback; the client
    says the token was refused and what to set."""
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    cfg = OpenpiPolicyServerCfg(port=0, chunk_length=H, token="s3cret")
    with OpenpiPolicyServer(_slow_echo, cfg) as server:
        url = "ws://{}:{}".format(*server.address)
        twice = websockets.datastructures.Headers([("Authorization", "Api-Key s3cret")] * 2)
        with pytest.raises(websockets.InvalidStatus, match="400"):
            ws_connect(url, additional_headers=twice)
        with pytest.raises(websockets.InvalidStatus, match="401"):
            ws_connect(url, additional_headers={"Authorization": "Api-Key wrong"})
        host, port = server.address
        with pytest.raises(ConnectionError, match=f"refused the token \\(HTTP 401\\): set \\${TOKEN_ENV}"):
            OpenpiChunkModel(OpenpiChunkModelCfg(host=host, port=port))
        with pytest.raises(ConnectionError, match=f"refused the token \\(HTTP 401\\): check \\${TOKEN_ENV}"):
            OpenpiChunkModel(OpenpiChunkModelCfg(host=host, port=port, token="wrong"))
    assert not any(r.exc_info or r.levelno >= logging.ERROR for r in caplog.records)


# --- clients against forged servers ---------------------------------------------------------------------------------

class _ForgedOpenpiServer:
    """A websocket server that sends ``metadata`` on connect and ``reply`` (bytes) to every request."""

    def __init__(self, metadata: dict, reply: bytes = b""):
        self.metadata, self.reply = metadata, reply
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.server = asyncio.run_coroutine_threadsafe(self._serve(), self.loop).result()
        self.port = self.server.sockets[0].getsockname()[1]

    async def _serve(self):
        return await ws_serve(self._handle, "127.0.0.1", 0, max_size=None)

    async def _handle(self, connection):
        await connection.send(msgpack_numpy.packb(self.metadata))
        async for _ in connection:
            await connection.send(self.reply)

    def close(self):
        self.server.close()
        asyncio.run_coroutine_threadsafe(self.server.wait_closed(), self.loop).result()
        self.loop.call_soon_threadsafe(self.loop.stop)


def _actions_reply(actions) -> bytes:
    return msgpack_numpy.packb({"actions": actions})


FORGED_ACTIONS = {
    "int": _actions_reply(np.zeros((H, 1), np.int64)),
    "bool": _actions_reply(np.zeros((H, 1), bool)),
    "string": _actions_reply(np.array([["a"]] * H)),
    "datetime": _actions_reply(np.zeros((H, 1), "datetime64[s]")),
    "inf shape": msgpack.packb({"actions": {b"__ndarray__": True, b"data": b"", b"dtype": "<f4",
                                            b"shape": [float("inf")]}}),
    "16.5M actions": _actions_reply(np.zeros((2**24, 1), np.float32)),
    "object flood": msgpack.packb([[0] * 1000] * 1000),
}


@pytest.mark.parametrize("case", sorted(FORGED_ACTIONS))
def test_openpi_client_refuses_forged_replies_with_one_error(case):
    """Each forged reply (to 8 envs at once) is one ConnectionError naming the server; the 64 MiB reply is
    refused by the client's 1 MiB reply cap (was accepted: 3 GiB at 40 envs)."""
    server = _ForgedOpenpiServer({"chunk_length": H, "action_dim": 1}, FORGED_ACTIONS[case])
    try:
        model = OpenpiChunkModel(OpenpiChunkModelCfg(port=server.port))
        with pytest.raises(ConnectionError, match=f"at 127.0.0.1:{server.port}"):
            model({"policy": torch.zeros(8, 4)}, torch.arange(8))
        model.close()
    finally:
        server.close()


def test_clients_bound_the_announced_chunk_length():
    server = _ForgedOpenpiServer({"chunk_length": 2**28})
    try:
        with pytest.raises(ValueError, match="H = 268435456 .* exceeds this client's limit of 4096"):
            OpenpiChunkModel(OpenpiChunkModelCfg(port=server.port))
    finally:
        server.close()
    tcp = _FakeServer(lambda n: encode_message({"type": "hello", "version": 1, "chunk_length": 2**28}))
    try:
        with pytest.raises(TcpServerError, match="announces H = 268435456 actions per chunk, over this client's"):
            TcpChunkModel(TcpChunkModelCfg(host="127.0.0.1", port=tcp.address[1]))
    finally:
        tcp.close()


def test_eval_exits_2_on_integer_actions_from_an_openpi_server():
    server = _ForgedOpenpiServer({"chunk_length": H, "action_dim": 1}, FORGED_ACTIONS["int"])
    try:
        run = eval_remote(f"openpi://127.0.0.1:{server.port}")
    finally:
        server.close()
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr[-3000:]
    assert "replied without a float 'actions' array" in run.stderr


def test_clients_name_the_other_protocol_at_once():
    """The project's client at an openpi server, and the openpi client at a project server: each says which
    address form to use, at once: from the server's first answer, not after a time-out (was 17.6 s and 'closed
    the connection'). The openpi server would wait for the rest of an HTTP request far longer than the client
    waits for its answer, so the client says it only if its hello made the server answer."""
    cfg = OpenpiPolicyServerCfg(port=0, chunk_length=H, read_timeout_s=3600.0)
    with OpenpiPolicyServer(_slow_echo, cfg) as server:
        host, port = server.address
        with pytest.raises(TcpServerError, match=f"this is an openpi server: use --remote openpi://{host}:{port}"):
            TcpChunkModel(TcpChunkModelCfg(host=host, port=port, timeout_s=DEADLINE_S))
    with TcpPolicyServer(_slow_echo, TcpPolicyServerCfg(port=0, chunk_length=H)) as server:
        host, port = server.address
        with pytest.raises(ConnectionError, match=f"called with --remote {host}:{port} \\(no openpi://\\)"):
            OpenpiChunkModel(OpenpiChunkModelCfg(host=host, port=port))


# --- the project's TCP server: idle peers cannot keep a client out, nor slow the batch ------------------------------

def test_tcp_server_admits_a_client_past_idle_peers_and_does_not_wait_for_them(caplog, monkeypatch):
    cfg = TcpPolicyServerCfg(port=0, chunk_length=H, max_connections=4, batching=BatchingCfg(max_wait_s=0.5))
    # the batcher's clock, stopped below: then no batch closes at max_wait_s, only once every client it waits for
    # has sent its request
    stopped_at = []
    monkeypatch.setattr(batching, "time", types.SimpleNamespace(
        monotonic=lambda: stopped_at[0] if stopped_at else time.monotonic()))
    with TcpPolicyServer(_slow_echo, cfg) as server:
        host, port = server.address
        silent = [socket.create_connection((host, port)) for _ in range(4)]  # no hello
        wait_for(lambda: server.num_connections == 4, "the server takes the 4 silent connections")
        # closes the oldest silent one
        client = TcpChunkModel(TcpChunkModelCfg(host=host, port=port, timeout_s=DEADLINE_S))
        greeted = []
        for _ in range(3):  # hello only, then idle: each closes another silent one
            sock = socket.create_connection((host, port))
            sock.sendall(HELLO)
            receive_message(sock, WireLimitsCfg(), DEADLINE_S, DEADLINE_S)
            greeted.append(sock)
        assert server.num_connections == 4
        for _ in range(PATIENCE):  # each batch waits max_wait_s for the hello-only peers, which send nothing
            assert client(ROWS, IDS).shape == (2, H, 1)
        stopped_at.append(time.monotonic())
        for _ in range(3):  # answered with the clock stopped: the hello-only peers are not waited for any more
            assert client(ROWS, IDS).shape == (2, H, 1)
        stopped_at.clear()
        other = TcpChunkModel(TcpChunkModelCfg(host=host, port=port))  # closes the idlest greeted peer
        assert other(ROWS, IDS).shape == (2, H, 1) and client(ROWS, IDS).shape == (2, H, 1)
        for sock in [*silent, *greeted]:
            sock.close()
    assert sum("to admit" in r.message for r in caplog.records) >= 5
