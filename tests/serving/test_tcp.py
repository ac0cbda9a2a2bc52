"""Remote chunk models: exact round trips, the same rollout as the local model on the real env, clear errors
for a dead, slow, failing or incompatible server, and serve_policy.py + eval.py --remote end to end."""

import os
import re
import signal
import socket
import struct
import subprocess
import sys
import threading

import pytest
import torch

from isaaclab_suspend.datasets import DatasetReader
from isaaclab_suspend.chunking import ActionChunkingPolicy
from isaaclab_suspend.tasks.embedded import make_default_model
from isaaclab_suspend.serving import (
    TcpPolicyServer,
    TcpPolicyServerCfg,
    TcpChunkModel,
    TcpChunkModelCfg,
    WireLimitsCfg,
)
from isaaclab_suspend.serving.tcp.protocol import receive_message
from isaaclab_suspend.tasks.env_factory import open_env

from isaaclab_suspend.serving import parse_address
from helpers import DEADLINE_S, wait_for

pytestmark = pytest.mark.slow  # served models end to end, scripts in processes

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
H = 8



def _client(server: TcpPolicyServer, **kwargs) -> TcpChunkModel:
    host, port = server.address
    return TcpChunkModel(TcpChunkModelCfg(host=host, port=port, **kwargs))


def _free_port() -> int:
    with TcpPolicyServer(lambda rows, ids: None, TcpPolicyServerCfg(port=0)) as server:
        return server.address[1]


def echo(obs_rows, env_ids):
    """A chunk that encodes the rows it got: env id + the sum of every observation term of the row."""
    total = sum(t.double().reshape(len(env_ids), -1).sum(1) for t in (obs_rows["policy"], obs_rows["extra"]["steps"]))
    return (env_ids.double() + total).view(-1, 1, 1).expand(-1, H, 2).float().clone()


def test_rows_and_nested_groups_round_trip_exactly():
    obs = {"policy": torch.randn(5, 3, dtype=torch.float64), "extra": {"steps": torch.arange(5, dtype=torch.int32)}}
    env_ids = torch.tensor([4, 0, 2])
    rows = {"policy": obs["policy"][env_ids], "extra": {"steps": obs["extra"]["steps"][env_ids]}}
    with TcpPolicyServer(echo, TcpPolicyServerCfg(port=0, chunk_length=H, action_dim=2, task="T")) as server:
        received = []
        server.model = lambda r, ids: received.append((r, ids)) or echo(r, ids)
        client = _client(server)
        assert client.chunk_length == H and client.metadata["task"] == "T"
        chunk = client(rows, env_ids)
        assert torch.equal(chunk, echo(rows, env_ids)) and chunk.dtype == torch.float32
        got, ids = received[0]
        assert torch.equal(ids, env_ids) and torch.equal(got["policy"], rows["policy"])
        assert got["policy"].dtype == torch.float64 and got["extra"]["steps"].dtype == torch.int32
        assert torch.equal(got["extra"]["steps"], rows["extra"]["steps"])


def test_remote_model_serves_the_real_env_like_the_local_one():
    """global_clock with the Cartpole LQR model served remotely: every chunk equals the local model's on the same
    rows, and 100 steps (time-outs mid-chunk, suspended envs resumed with a chunk) take bit-identical actions to
    the same run with the local model."""
    local = make_default_model("Isaac-Cartpole-Suspendable", H)
    with open_env("Isaac-Cartpole-Suspendable", 4) as env, \
            TcpPolicyServer(local, TcpPolicyServerCfg(port=0, chunk_length=H, action_dim=1)) as server:
        remote = _client(server)
        remote.check_env(env)
        chunks = []

        def remote_checked_against_local(obs_rows, env_ids):
            chunks.append((remote(obs_rows, env_ids), local(obs_rows, env_ids)))
            return chunks[-1][0]

        def rollout(model) -> tuple[torch.Tensor, dict]:
            policy = ActionChunkingPolicy(model, env, chunk_length=H, schedule="global_clock")
            obs, _ = env.reset(seed=3)
            env.episode_length_buf[:] = torch.tensor([250, 262, 275, 290])  # time-outs mid-chunk
            actions = []
            for _ in range(100):
                actions.append(policy.act(obs).clone())
                obs, _, terminated, truncated, _ = env.step(actions[-1])
                policy.observe(terminated | truncated)
            policy.reset()  # resumes the envs it suspended
            return torch.stack(actions), policy.stats

        env.reset(seed=3)  # the very first reset reads zero joint velocities, later ones the sampled ones
        remote_actions, stats = rollout(remote_checked_against_local)
        local_actions, _ = rollout(local)
        assert stats["suspended_env_steps"] > 0 and stats["episodes_completed"] >= 4
        assert len(chunks) == 13 and all(torch.equal(r, l) for r, l in chunks)
        assert torch.equal(remote_actions, local_actions)
        with TcpPolicyServer(local, TcpPolicyServerCfg(port=0, action_dim=3)) as wrong, \
                pytest.raises(ValueError, match="returns 3-dim actions"):
            _client(wrong).check_env(env)
        with TcpPolicyServer(local, TcpPolicyServerCfg(port=0, task="Isaac-PushCube-Suspendable")) as wrong, \
                pytest.raises(ValueError, match="serves a policy of 'Isaac-PushCube-Suspendable'"):
            _client(wrong).check_env(env)


def test_dead_closed_failing_slow_and_incompatible_servers(monkeypatch):
    port = _free_port()
    connects, connect = [], socket.create_connection

    def counted_connect(*args, **kwargs):
        connects.append(args)
        return connect(*args, **kwargs)

    # a dead server is reported at the refusal of the first connection: no retry, no wait for a time-out
    with monkeypatch.context() as patch:
        patch.setattr(socket, "create_connection", counted_connect)
        with pytest.raises(ConnectionError, match=f"No policy server at 127.0.0.1:{port} .*Connection refused"
                                                  ".*serve_policy.py"):
            TcpChunkModel(TcpChunkModelCfg(port=port))
    assert len(connects) == 1, connects

    rows, ids = {"policy": torch.zeros(2, 3), "extra": {"steps": torch.zeros(2)}}, torch.arange(2)

    def failing(obs_rows, env_ids):
        if obs_rows["policy"].sum() > 0:
            raise ValueError("bad observation")
        return echo(obs_rows, env_ids)

    server = TcpPolicyServer(failing, TcpPolicyServerCfg(port=0, chunk_length=H)).start()
    client = _client(server, timeout_s=DEADLINE_S)
    with pytest.raises(RuntimeError, match="failed: ValueError: bad observation"):
        client({**rows, "policy": torch.ones(2, 3)}, ids)
    assert client(rows, ids).shape == (2, H, 2)  # the server lives on
    object_array = b'{"type": "infer", "arrays": [["x", "|O", [1]]]}'
    for header, payload in ((b"{}", b""), (b"[1]", b""), (b"\xff", b""), (object_array, bytes(8))):
        with socket.create_connection(server.address, timeout=DEADLINE_S) as raw:  # malformed messages are dropped
            raw.sendall(struct.pack(">I", len(header)) + header + payload)
            reply, _ = receive_message(raw, WireLimitsCfg(), DEADLINE_S, DEADLINE_S)
            assert reply["type"] == "error" and "malformed message" in reply["message"], reply
            assert raw.recv(1) == b""
    assert client(rows, ids).shape == (2, H, 2)
    started, answer = threading.Event(), threading.Event()

    def slow(obs_rows, env_ids):  # a model call that ends only once the client has given up
        started.set()
        answer.wait(DEADLINE_S)
        return echo(obs_rows, env_ids)

    server.model = slow
    client.cfg.timeout_s = 0.3  # for this call only
    with pytest.raises(TimeoutError, match="did not answer within 0.3 s"):
        client(rows, ids)
    assert started.wait(DEADLINE_S), "the request never reached the model"
    client.cfg.timeout_s = DEADLINE_S
    server.model = echo
    answer.set()
    # the server finishes the slow call it was serving, and closes the connection the client gave up
    wait_for(lambda: server.num_connections == 0, "the server drops the connection the client gave up")
    assert client(rows, ids).shape == (2, H, 2)  # reconnected after the time-out
    server.close()
    with pytest.raises(ConnectionError, match="policy server at 127.0.0.1"):
        client(rows, ids)

    class FutureServer(TcpPolicyServer):
        @property
        def metadata(self):
            return {**super().metadata, "version": 99}

    with FutureServer(echo, TcpPolicyServerCfg(port=0)) as future, pytest.raises(RuntimeError, match="protocol 99"):
        _client(future)
    with pytest.raises(ValueError, match="'host:port'"):
        parse_address("localhost")


def _script(name: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, os.path.join(ROOT, "scripts", name), *args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_serve_policy_eval_and_record_remote_end_to_end(tmp_path):
    """The scripts as a user runs them, side by side: eval.py and record.py as two clients of one server, eval.py
    of another task against it, and eval.py against a dead port."""
    dead = _script("eval.py", "--remote", f"127.0.0.1:{_free_port()}")
    server = _script("serve_policy.py", "--port", "0", "--chunk", str(H))
    clients = [dead]
    try:
        line = server.stdout.readline()
        address = re.search(r"at (127\.0\.0\.1:\d+)", line)
        assert address, line
        dataset = tmp_path / "remote.hdf5"
        evaluation = _script("eval.py", "--remote", address[1], "--compare", "global_clock,async", "--num_envs", "4",
                             "--steps", "48", "--timeline", "")
        recording = _script("record.py", "--remote", address[1], "--num_envs", "4",
                            "--episodes", "1", "--desync", "--output", str(dataset))
        other_task = _script("eval.py", "--remote", address[1], "--task", "Isaac-PushCube-Suspendable",
                             "--num_envs", "2", "--steps", "4", "--timeline", "")
        clients += [evaluation, recording, other_task]
        out, err = evaluation.communicate(timeout=300)
        assert evaluation.returncode == 0, err[-2000:]
        assert f"remote policy tcp://{address[1]}" in out
        assert re.search(r"\| inference_calls +\| +6 \| +8 \|", out), out[-3000:]
        out, err = recording.communicate(timeout=300)
        assert recording.returncode == 0, err[-2000:]
        assert f"remote policy tcp://{address[1]} (global_clock, H = {H})" in out and dataset.is_file()
        _, err = other_task.communicate(timeout=300)
        assert other_task.returncode == 2 and "eval.py: error:" in err and "serves a policy of" in err, err[-2000:]
        assert "Traceback" not in err
        _, err = dead.communicate(timeout=300)
        assert dead.returncode == 2 and "No policy server at 127.0.0.1" in err
        server.send_signal(signal.SIGTERM)  # kill stops it as Ctrl-C does
        out, err = server.communicate(timeout=30)
        assert server.returncode == 0 and "Stopped." in out
        # one info line per client connecting and one per client leaving (the dead port's client never came)
        connected = re.findall(r"Policy server: (127\.0\.0\.1:\d+) connected$", err, re.MULTILINE)
        left = re.findall(r"Policy server: (127\.0\.0\.1:\d+) disconnected$", err, re.MULTILINE)
        assert len(connected) >= 3 and sorted(connected) == sorted(left), err[-3000:]
    finally:
        for process in [server, *clients]:
            if process.poll() is None:
                process.terminate()
                process.communicate(timeout=30)


def test_server_dying_mid_run_exits_2_and_keeps_the_recorded_episodes(tmp_path):
    """record.py and eval.py --record as clients of a server that dies after each made 20 calls (320 steps: every
    env finished its first episode, of 300 steps): both exit with status 2 and the reason, no traceback, and
    every episode exported before is in the file, complete and readable, and the error line says which file."""
    task = "Isaac-Cartpole-Suspendable"
    local = make_default_model(task, 16)
    calls = {3: 0, 4: 0}  # by batch size: eval.py runs 3 envs, record.py 4
    enough = threading.Event()

    def counting(obs_rows, env_ids):
        calls[len(env_ids)] += 1
        if min(calls.values()) >= 20:
            enough.set()
        return local(obs_rows, env_ids)

    server = TcpPolicyServer(counting, TcpPolicyServerCfg(port=0, chunk_length=16, action_dim=1, task=task)).start()
    address = f"127.0.0.1:{server.address[1]}"
    recorded, evaluated = tmp_path / "record.hdf5", tmp_path / "eval.hdf5"
    clients = [
        _script("record.py", "--policy", "remote", "--remote", address, "--num_envs", "4", "--episodes", "1000",
                "--output", str(recorded)),
        _script("eval.py", "--remote", address, "--num_envs", "3", "--steps", "100000",
                "--record", str(evaluated), "--timeline", ""),
    ]
    try:
        assert enough.wait(timeout=400), calls
        server.close()
        for process, num_envs, path in zip(clients, (4, 3), (recorded, evaluated)):
            _, err = process.communicate(timeout=120)
            assert process.returncode == 2, err[-2000:]
            assert "error: Lost the policy server at" in err or "error: No policy server at" in err, err[-2000:]
            assert "Traceback" not in err
            # the one error line says where the episodes recorded so far are kept
            assert f"The episodes exported so far are kept in {path}; open episodes were dropped." in err, err[-2000:]
            with DatasetReader(str(path)) as reader:
                assert len(reader.demo_names) >= num_envs
                for name in reader.demo_names:
                    demo = reader.load(name, "cpu")
                    assert demo.num_samples > 0 and demo.states
                    assert all(len(v) == demo.num_samples for v in demo.states.values())
    finally:
        server.close()
        for process in clients:
            if process.poll() is None:
                process.terminate()
                process.communicate(timeout=30)
