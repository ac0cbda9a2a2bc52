"""The GR00T server and client against hostile peers on loopback: sizes a request declares, JSON inside msgpack,
history lengths from a server, half-sent ZeroMQ frames. Each attack is bounded in memory (tracemalloc in the
process, ``VmHWM`` of a server process) and a well-formed client is served meanwhile. No test measures how fast
anything happens: each waits for the event it expects (a reply, a drop) with a deadline that is only reached when
it never comes."""

import contextlib
import json
import os
import re
import socket
import struct
import subprocess
import sys
import threading
import time
import tracemalloc

import msgpack
import numpy as np
import pytest
import torch
import zmq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import DEADLINE_S, ROOT, eval_remote

from isaaclab_suspend.chunking import ObservationHistories
from isaaclab_suspend.serving import (Gr00tChunkModel, Gr00tChunkModelCfg, Gr00tPolicyServer, Gr00tPolicyServerCfg,
                                      Gr00tServerError)
from isaaclab_suspend.serving.gr00t import codec as gr00t_codec

pytestmark = pytest.mark.slow  # hostile peers against the GR00T server

H = 4
MAX_BATCH = 64


def _echo(obs_rows, env_ids):
    return torch.zeros(len(env_ids), H, 1)


def _array(shape, data=b"", dtype="<f4") -> dict:
    """A msgpack-numpy array map of any declared shape (GR00T's newer encoding)."""
    return {b"nd": True, b"type": dtype, b"kind": b"", b"shape": list(shape), b"data": data}


class _Req:
    """A raw REQ socket to a GR00T server: sends any msgpack, returns the decoded reply and its latency [s]."""

    def __init__(self, port: int):
        self.context = zmq.Context()
        self.socket = self.context.socket(zmq.REQ)
        self.socket.setsockopt(zmq.RCVTIMEO, int(DEADLINE_S * 1e3))
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.connect(f"tcp://127.0.0.1:{port}")

    def __call__(self, message: bytes) -> tuple[object, float]:
        start = time.perf_counter()
        self.socket.send(message)
        reply = msgpack.unpackb(self.socket.recv(), strict_map_key=False)
        return reply, time.perf_counter() - start

    def close(self):
        self.socket.close()
        self.context.term()


@pytest.fixture(scope="module")
def server():
    cfg = Gr00tPolicyServerCfg(port=0, chunk_length=H, keys={"state.policy": "policy"}, max_batch=MAX_BATCH)
    with Gr00tPolicyServer(_echo, cfg) as served:
        req = _Req(served.address[1])
        yield served, req
        req.close()


def _good_call(req: _Req) -> float:
    """One well-formed request, answered with a chunk; its latency [s], to print."""
    state = np.zeros((2, 1, 4), np.float32)
    observation = {"state.policy": _array(state.shape, state.tobytes())}
    reply, elapsed = req(msgpack.packb({"data": {"observation": observation}}))
    assert np.frombuffer(reply[0]["action.action"][b"data"], np.float32).size == 2 * H, reply
    return elapsed


def test_declared_batch_of_2_28_rows_is_refused_before_anything_is_built(server):
    """The issue's 47-byte request: a zero-width state of B = 2^28 rows passed the byte check (0 == 0) and took
    the server from 1.0 to 6.1 GiB for 17 s. Now one error naming the bound, with under 1 MiB allocated."""
    served, req = server
    message = msgpack.packb({"data": {"observation": {"state.policy": _array([2**28, 1, 0])}}})
    assert len(message) < 100
    tracemalloc.start()
    reply, _ = req(message)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert f"B must be 1 to {MAX_BATCH} (max_batch)" in reply["error"], reply
    assert peak < 2**20, peak
    _good_call(req)


dims = st.one_of(st.integers(0, 3), st.integers(MAX_BATCH - 1, MAX_BATCH + 1), st.integers(2**20, 2**40))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape=st.lists(dims, min_size=1, max_size=6), nested=st.booleans())
def test_any_declared_shape_is_served_or_refused_within_the_bounds(server, shape, nested):
    """Any shape, with the bytes it declares when they are few (else none): a chunk of B <= max_batch rows, or
    one error; never a zero-size feature served, never more than 4 MiB allocated, always answered."""
    served, req = server
    count = int(np.prod(shape, dtype=object))
    array = _array(shape, bytes(4 * count) if count <= 4096 else b"")
    observation = {"state": {"policy": array}} if nested else {"state.policy": array}
    tracemalloc.start()
    reply, _ = req(msgpack.packb({"data": {"observation": observation}}))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    valid = len(shape) >= 3 and 0 < count <= 4096 and shape[0] <= MAX_BATCH
    if valid:  # the model takes any width
        chunk = reply[0]["action" if nested else "action.action"]
        assert len(chunk[b"data"]) == 4 * shape[0] * H, reply
    else:
        assert isinstance(reply, dict) and "error" in reply, (shape, reply)
    assert peak < 4 * 2**20, (shape, peak)


# --- JSON inside msgpack --------------------------------------------------------------------------------------------

json_values = st.recursive(st.none() | st.integers() | st.text(alphabet="ab,:[]{}\"\\", max_size=6),
                           lambda x: st.lists(x, max_size=5) | st.dictionaries(st.text(max_size=4), x, max_size=5),
                           max_leaves=40)


def _json_objects(value) -> int:
    if isinstance(value, dict):
        return 1 + sum(1 + _json_objects(v) for v in value.values())
    if isinstance(value, list):
        return 1 + sum(map(_json_objects, value))
    return 1


@settings(max_examples=300, deadline=None)
@given(value=json_values, separators=st.sampled_from([(",", ":"), (", ", ": ")]))
def test_json_object_bound_holds_for_any_json(value, separators):
    """The bound checked before a config's JSON string is parsed is never below what it decodes to."""
    text = json.dumps(value, separators=separators)
    assert gr00t_codec._json_objects_at_most(text) >= _json_objects(value)
    assert gr00t_codec._json_objects_at_most(text.encode()) >= _json_objects(value)


def _marker_flood(lists: int) -> bytes:
    return msgpack.packb({"endpoint": "ping", "data": {"__ModalityConfig__": True,
                                                        "as_json": "[" + "[]," * (lists - 1) + "[]]"}})


def test_config_markers_are_not_parsed_by_the_server_and_are_bounded_in_the_client():
    """The issue's unauthenticated ping of a marker whose JSON held 22M empty lists (+1.7 GiB, every client blocked
    for 7 s): the server never parses a config, so a 3 MB one costs its copy and no more (parsing it would build
    a million lists), with or without a token; the client parses one only in the get_modality_config reply,
    bounded by the object cap."""
    flood = _marker_flood(10**6)
    for token in ("s3cret", None):
        cfg = Gr00tPolicyServerCfg(port=0, chunk_length=H, keys={"state.policy": "policy"}, token=token)
        with Gr00tPolicyServer(_echo, cfg) as served:
            req = _Req(served.address[1])
            tracemalloc.start()
            reply, _ = req(flood)
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            assert reply == ({"error": "Unauthorized: Invalid API token"} if token else
                             {"status": "ok", "message": "Server is running", "task": None}), reply
            assert peak < 3 * len(flood), peak
            req.close()
    reply, _ = gr00t_codec.unpackb(flood)
    assert reply["data"]["as_json"].startswith("[[],")  # a plain map: not decoded where no config is expected
    tracemalloc.start()
    with pytest.raises(ValueError, match="at most 4096 objects, JSON of modality configs included"):
        gr00t_codec.unpackb(flood, configs=True)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 3 * len(flood), peak
    deep = msgpack.packb({"__ModalityConfig__": True, "as_json": "[" * 3000 + "]" * 3000})
    with pytest.raises(ValueError, match="at most 4096 objects|not JSON"):
        gr00t_codec.unpackb(deep, configs=True)


# --- what a server's modality config may make the client allocate ---------------------------------------------------

class _ForgedRepServer:
    """A REP server answering ping, then ``config`` to get_modality_config (as N1.5 sent it: JSON strings)."""

    def __init__(self, config: dict):
        self.context = zmq.Context()
        self.socket = self.context.socket(zmq.REP)
        self.port = self.socket.bind_to_random_port("tcp://127.0.0.1")
        replies = {"ping": msgpack.packb({"status": "ok"}),
                   "get_modality_config": msgpack.packb({m: {"__ModalityConfig__": True, "as_json": c}
                                                         for m, c in config.items()})}
        self.thread = threading.Thread(target=self._serve, args=(replies,), daemon=True)
        self.thread.start()

    def _serve(self, replies):
        try:
            while True:
                request = msgpack.unpackb(self.socket.recv())
                self.socket.send(replies.get(request.get("endpoint"), msgpack.packb({"error": "no"})))
        except zmq.ContextTerminated:
            self.socket.close(linger=0)

    def close(self):
        self.context.term()
        self.thread.join(5)


def _modality(indices, keys) -> str:
    return json.dumps({"delta_indices": indices, "modality_keys": keys})


HOSTILE_CONFIGS = {
    "history 3e7": ({"state": _modality([-3 * 10**7, 0], ["policy"]), "action": _modality(list(range(H)), ["a"])},
                    "asks for 30000001 past steps of an observation, over this client's limit of 1024"
                    " \\(Gr00tChunkModelCfg.max_history_steps\\)"),
    "history 1e11": ({"state": _modality([-10**11, 0], ["policy"]), "action": _modality(list(range(H)), ["a"])},
                     "asks for 100000000001 past steps"),
    "H 3000": ({"state": _modality([0], ["policy"]), "action": _modality(list(range(3000)), ["a"])},
               "asks for 3000 actions per chunk, over this client's limit of 2048"),
    "65 keys": ({"state": _modality([0], [f"k{i}" for i in range(65)]), "action": _modality([0], ["a"])},
                "asks for 65 keys of a modality, over this client's limit of 64"),
    "JSON flood": ({"state": "[" + "[]," * 10**5 + "[]]", "action": _modality([0], ["a"])},
                   "at most 4096 objects, JSON of modality configs included"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_CONFIGS))
def test_client_refuses_what_a_hostile_config_would_make_it_allocate(case):
    """A server's delta_indices of [-3e7, 0] took eval.py from 1.3 to 2.1 GB, [-1e11, 0] tried 3.2 TB: each such
    config is one error naming the client's limit, with under 8 MiB allocated (before anything of the announced
    size is built)."""
    config, match = HOSTILE_CONFIGS[case]
    forged = _ForgedRepServer(config)
    try:
        tracemalloc.start()
        with pytest.raises((ValueError, Gr00tServerError), match=match):
            Gr00tChunkModel(Gr00tChunkModelCfg(port=forged.port, max_chunk_length=2048, timeout_s=DEADLINE_S,
                                               connect_timeout_s=DEADLINE_S))
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    finally:
        forged.close()
    assert peak < 8 * 2**20, peak


def test_history_rings_are_bounded_for_every_model():
    """LeRobot's n_obs_steps and a GR00T server's delta_indices feed the same rings: too long is refused before a
    ring is made."""
    with pytest.raises(ValueError, match="integer steps from -1023 to 0"):
        ObservationHistories({"policy": list(range(-10**6, 1))[:3] + [-10**6]})
    with pytest.raises(ValueError, match="integer steps from -1023 to 0"):
        ObservationHistories({"policy": [-1024, 0]})
    assert ObservationHistories({"policy": [-1023, 0]}).offsets == {"policy": [-1023, 0]}


def test_eval_exits_2_with_one_line_for_a_server_asking_for_a_long_history():
    forged = _ForgedRepServer(HOSTILE_CONFIGS["history 3e7"][0])
    try:
        run = eval_remote(f"gr00t://127.0.0.1:{forged.port}")
    finally:
        forged.close()
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr[-3000:]
    (line,) = [line for line in run.stderr.splitlines() if "error" in line]
    assert "asks for 30000001 past steps of an observation" in line, line


# --- half-sent frames -----------------------------------------------------------------------------------------------

MESSAGE_MB, PEERS = 4, 32


def _zmtp_half_message(port: int, size: int, sent: int) -> socket.socket:
    """A raw connection that does a ZMTP 3.1 REQ peer's greeting and handshake (waiting for the server's greeting,
    as libzmq's own peers do), then sends a message whose body frame announces ``size`` bytes, ``sent`` of them."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(b"\xff" + bytes(7) + b"\x01\x7f" + b"\x03\x01" + b"NULL".ljust(20, b"\0") + bytes(32))
    sock.settimeout(DEADLINE_S)
    greeting = b""
    while len(greeting) < 64:
        greeting += sock.recv(64 - len(greeting))
    ready = b"\x05READY" + b"\x0bSocket-Type" + struct.pack(">I", 3) + b"REQ"
    with contextlib.suppress(OSError):  # dropped already
        sock.sendall(b"\x04" + bytes([len(ready)]) + ready + b"\x01\x00"  # the empty delimiter frame
                     + b"\x02" + struct.pack(">Q", size) + bytes(sent))
    return sock


def _held(sock: socket.socket) -> bool:
    """Whether the server still holds the connection: what it sent (its handshake) is read without waiting, and
    it has not closed it."""
    sock.setblocking(False)
    try:
        while sock.recv(65536):
            pass
        return False
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        sock.settimeout(DEADLINE_S)


def _closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closes the connection within :data:`DEADLINE_S` (then this end is closed too)."""
    sock.settimeout(DEADLINE_S)
    try:
        while sock.recv(65536):
            pass
        return True
    except ConnectionError:
        return True
    except TimeoutError:
        return False
    finally:
        sock.close()


def _peak_mib(pid: int) -> float:
    return int(re.search(r"VmHWM:\s+(\d+) kB", open(f"/proc/{pid}/status").read())[1]) / 1024


def test_half_sent_frames_are_bounded_and_dropped():
    """The issue's 32 unauthenticated peers each sending 14 of an announced 15 MiB frame grew the server by 449 MiB,
    held after they left. Here serve_policy.py --protocol gr00t (4 MiB messages, so a 16 MiB budget, 1 s read
    time-out) gets 32 peers sending 3.5 of an announced 4 MiB frame: the server drops the oldest past its budget
    and the rest after the time-out, one log line each, and a well-formed client is served meanwhile (while the
    newest peer is held: it does not wait for the time-out) and after."""
    process = subprocess.Popen(
        [sys.executable, os.path.join(ROOT, "scripts", "serve_policy.py"), "--protocol", "gr00t", "--port", "0",
         "--chunk", str(H), "--keys", "state.policy=policy", "--max_message_mb", str(MESSAGE_MB),
         "--read_timeout", "1"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        port = int(re.search(r"at 127\.0\.0\.1:(\d+)", process.stdout.readline())[1])
        req = _Req(port)
        times = [_good_call(req)]
        idle = _peak_mib(process.pid)
        peers = []
        for i in range(PEERS):
            peers.append(_zmtp_half_message(port, MESSAGE_MB * 2**20 - 64, 7 * MESSAGE_MB * 2**20 // 8))
            if i % 8 == 7:
                times.append(_good_call(req))
        assert _held(peers[-1]), "the well-formed client was served only after the newest peer was dropped"
        assert all(map(_closed_by_server, peers))  # past the budget, or after the read time-out
        times.append(_good_call(req))
        peak = _peak_mib(process.pid)
        print(f"\nGR00T server VmHWM: idle {idle:.0f} MiB, peak {peak:.0f} MiB under {PEERS} half-sent"
              f" {MESSAGE_MB} MiB frames (budget 16 MiB); slowest well-formed call {1e3 * max(times):.1f} ms")
        # the budget, and what arrives between two sweeps (20 ms at loopback speed); without it: 32 x 3.5 = 112 MiB
        assert peak - idle < 16 + 12 * MESSAGE_MB, (idle, peak)
        req.close()
    finally:
        process.terminate()
        _, err = process.communicate(timeout=30)
    assert "Traceback" not in err, err[-3000:]
    drops = [line for line in err.splitlines() if "GR00T server: dropped" in line]
    assert len(drops) >= PEERS and any("over the server's budget" in line for line in drops), err[-3000:]
    assert any("stalled" in line for line in drops), err[-3000:]
