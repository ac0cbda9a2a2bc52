"""openpi's wire protocol both ways: the arrays codec against openpi-client's, the openpi server against the real
``WebsocketClientPolicy``, the openpi chunk model (concurrent, ordered, checked, clear errors) against it and
against an openpi-style server, and a real-env rollout through it bit-identical to the local model."""

import asyncio
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request

import numpy as np
import pytest
import torch
import websockets
from openpi_client import msgpack_numpy
from openpi_client.websocket_client_policy import WebsocketClientPolicy
from websockets.asyncio.server import serve
from websockets.frames import CloseCode
from websockets.sync.client import connect

from isaaclab_suspend.runs import ChunkModelSource, RlActorModelCfg
from isaaclab_suspend.names import TOKEN_ENV
from isaaclab_suspend.chunking import ActionChunkingPolicy
from isaaclab_suspend.tasks.embedded import make_default_model
from isaaclab_suspend.serving import (
    BatchingCfg,
    OpenpiChunkModel,
    OpenpiChunkModelCfg,
    OpenpiPolicyServer,
    OpenpiPolicyServerCfg,
    OpenpiServerError,
)
from isaaclab_suspend.serving import WireLimitsCfg, msgpack_arrays
from isaaclab_suspend.tasks.env_factory import open_env

from isaaclab_suspend.serving import parse_address
from helpers import DEADLINE_S

pytestmark = pytest.mark.slow  # openpi's server and client over websockets

H = 8
TASK = "Isaac-Cartpole-Suspendable"


def _client(server, **kwargs) -> OpenpiChunkModel:
    host, port = server.address
    return OpenpiChunkModel(OpenpiChunkModelCfg(host=host, port=port, **kwargs))


def echo(obs_rows, env_ids):
    """A chunk that encodes its row: the sum of the ``policy`` row, the step index and the action index."""
    total = obs_rows["policy"].double().sum(1)
    return (total.view(-1, 1, 1) + torch.arange(H).view(1, H, 1) + 0.5 * torch.arange(2)).float()


def test_codec_speaks_openpi_msgpack_numpy_both_ways():
    message = {"observation/state": np.arange(6, dtype=np.float32).reshape(2, 3), "step": np.int64(7),
               "image": np.zeros((4, 4, 3), np.uint8), "prompt": "balance the pole", "nested": {"x": [1, 2.5]}}
    for decoded in (msgpack_arrays.unpackb(msgpack_numpy.packb(message)),
                    msgpack_numpy.unpackb(msgpack_arrays.packb(message))):
        assert decoded.keys() == message.keys() and decoded["prompt"] == message["prompt"]
        for key in ("observation/state", "image"):
            assert decoded[key].dtype == message[key].dtype and np.array_equal(decoded[key], message[key])
        assert decoded["step"] == 7 and decoded["step"].dtype == np.int64 and decoded["nested"] == {"x": [1, 2.5]}
    assert not msgpack_arrays.unpackb(msgpack_arrays.packb(np.ones(3)))[0:1].flags.writeable  # zero-copy view
    for refused in (np.array([1 + 2j]), np.array([None], dtype=object)):
        with pytest.raises(ValueError, match="refused"):
            msgpack_arrays.packb(refused)
    forged = msgpack_numpy.packb({"x": {"__ndarray__": True, "data": b"\0" * 16, "dtype": "<c16", "shape": [1]}})
    with pytest.raises(ValueError, match="refused"):
        msgpack_arrays.unpackb(forged)
    short = msgpack_numpy.packb({"x": {"__ndarray__": True, "data": b"\0" * 3, "dtype": "<f4", "shape": [2]}})
    with pytest.raises(ValueError, match="arrived with 3 bytes"):
        msgpack_arrays.unpackb(short)
    with pytest.raises(ValueError, match="Not a msgpack message"):
        msgpack_arrays.unpackb(b"\xc1")
    # a forged message of empty maps or 1-byte scalars would decode one Python object per byte: every object
    # counts, containers and scalars alike
    for forged in ([[{}] * 1000] * 5, [[0] * 1000] * 5, {str(i): 0 for i in range(2100)}, [b""] * 5000):
        with pytest.raises(ValueError, match="at most 4096 msgpack objects"):
            msgpack_arrays.unpackb(msgpack_numpy.packb(forged))
    for shape in ([float("inf")], [2**62, 2**62], [-1], [True], "ab", [1] * 40):
        forged = msgpack_numpy.packb({"x": {"__ndarray__": True, "data": b"", "dtype": "<f4", "shape": shape}})
        with pytest.raises(ValueError, match="shape must be at most 32 non-negative integers|arrived with"):
            msgpack_arrays.unpackb(forged)
    with pytest.raises(TypeError, match="type Tensor"):
        msgpack_arrays.packb({"x": torch.zeros(1)})


def test_server_answers_the_real_openpi_client():
    model = make_default_model(TASK, H)
    cfg = OpenpiPolicyServerCfg(port=0, chunk_length=H, action_dim=1, task=TASK, max_connections=2,
                                limits=WireLimitsCfg(max_message_bytes=4096, max_header_bytes=1024))
    with OpenpiPolicyServer(model, cfg) as server:
        host, port = server.address
        assert urllib.request.urlopen(f"http://{host}:{port}/healthz", timeout=5).status == 200
        client = WebsocketClientPolicy(host, port)
        assert client.get_server_metadata() == {"chunk_length": H, "action_dim": 1, "task": TASK, "keys": {}}
        for _ in range(3):
            state = np.random.randn(4).astype(np.float32)
            reply = client.infer({"policy": state, "prompt": "balance"})
            expected = model({"policy": torch.from_numpy(state)[None]}, torch.zeros(1, dtype=torch.long))[0]
            assert reply["actions"].shape == (H, 1) and np.array_equal(reply["actions"], expected.numpy())
            assert reply["server_timing"]["infer_ms"] > 0 and "policy_timing" in reply
        with connect(f"ws://{host}:{port}") as second:
            second.recv()
            with connect(f"ws://{host}:{port}") as third:  # max_connections 2: the idlest, client's, makes room
                third.recv()
                with pytest.raises(websockets.ConnectionClosed):
                    client._ws.recv(timeout=5)
            second.send(b"\0" * 5000)  # over max_message_bytes
            with pytest.raises(websockets.ConnectionClosed) as closed:
                second.recv()
            assert closed.value.rcvd.code == CloseCode.MESSAGE_TOO_BIG
        client = WebsocketClientPolicy(host, port)
        with pytest.raises(RuntimeError, match="Error in inference server:(.|\n)*KeyError: 'policy'"):
            client.infer({"observation/state": np.zeros(4, np.float32)})  # an unmapped key: the model fails
        with pytest.raises(websockets.ConnectionClosed) as closed:
            client._ws.recv()
        assert closed.value.rcvd.code == CloseCode.INTERNAL_ERROR
    cfg.keys, cfg.limits = {"observation/state": "policy"}, WireLimitsCfg()
    with OpenpiPolicyServer(model, cfg) as renaming:
        client = WebsocketClientPolicy(*renaming.address)
        assert client.get_server_metadata()["keys"] == {"observation/state": "policy"}
        state = np.random.randn(4).astype(np.float32)
        reply = client.infer({"observation/state": state, "observation/wrist": np.zeros(2), "prompt": "p"})
        assert np.array_equal(reply["actions"], model({"policy": torch.from_numpy(state)[None]}, None)[0].numpy())
        with pytest.raises(RuntimeError, match="lacks the keys \\['observation/state'\\]"):
            client.infer({"policy": state})
    with OpenpiPolicyServer(model, OpenpiPolicyServerCfg(port=0, idle_timeout_s=0.2)) as idle, \
            connect("ws://{}:{}".format(*idle.address)) as connection:
        connection.recv()
        with pytest.raises(websockets.ConnectionClosed) as closed:  # no request for idle_timeout_s
            connection.recv(timeout=10)
        assert closed.value.rcvd.code == CloseCode.NORMAL_CLOSURE and "idle" in closed.value.rcvd.reason


def test_server_takes_the_token_as_openpi_api_key_and_keeps_to_loopback_without_one(monkeypatch):
    """The hardened server's rules on openpi's protocol: the token is the real client's ``api_key`` (our chunk
    model sends ``$ISAACLAB_SUSPEND_POLICY_TOKEN``), a handshake without it is refused with 401, and a server
    beyond loopback needs a token."""
    model = make_default_model(TASK, H)
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    cfg = OpenpiPolicyServerCfg(port=0, chunk_length=H, action_dim=1, task=TASK, token="s3cret")
    with OpenpiPolicyServer(model, cfg) as server:
        host, port = server.address
        state = {"policy": np.zeros(4, np.float32)}
        assert WebsocketClientPolicy(host, port, api_key="s3cret").infer(state)["actions"].shape == (H, 1)
        for api_key in (None, "wrong"):
            with pytest.raises(websockets.InvalidStatus, match="401"):
                WebsocketClientPolicy(host, port, api_key=api_key)
        with pytest.raises(ConnectionError, match="401"):
            _client(server, chunk_length=H)
        monkeypatch.setenv(TOKEN_ENV, "s3cret")
        client = _client(server, chunk_length=H)
        assert client({"policy": torch.zeros(2, 4)}, torch.arange(2)).shape == (2, H, 1)
        client.close()
    with pytest.raises(ValueError, match="beyond loopback, without a token"):
        OpenpiPolicyServer(model, OpenpiPolicyServerCfg(host="0.0.0.0", port=0, token=None))
    with pytest.raises(ValueError, match="must be a positive"):
        OpenpiPolicyServer(model, OpenpiPolicyServerCfg(port=0, max_connections=0))


def test_chunk_model_sends_one_observation_per_env_concurrently_in_order():
    calls = []

    def recording(obs_rows, env_ids):
        calls.append(len(env_ids))
        time.sleep(0.05)
        return echo(obs_rows, env_ids)

    with OpenpiPolicyServer(recording, OpenpiPolicyServerCfg(port=0, chunk_length=H, action_dim=2)) as server:
        port = server.address[1]
        model = _client(server, connections=8, prompt="go")
        assert model.chunk_length == H and model.action_dim == 2
        rows = {"policy": torch.randn(13, 4)}
        env_ids = torch.tensor([5, 0, 12, 3, 7, 1, 9, 2, 11, 4, 6, 8, 10])
        for _ in range(3):
            chunks = model(rows, env_ids)
            assert chunks.shape == (13, H, 2) and torch.equal(chunks, echo(rows, env_ids))  # env_ids order
        # 13 rows over 8 connections: at most 8 in flight, so at least two waves per call, each batched into as few
        # model calls as arrive together (8 then 5 on an idle machine; a loaded one may split a wave)
        assert sum(calls) == 3 * 13 and max(calls) <= 8 and len(calls) >= 6, calls
        assert model.requests({"policy": rows["policy"][:2]}, 2)[1]["prompt"] == "go"
        server.batcher.model = lambda obs_rows, env_ids: echo(obs_rows, env_ids)[:, : H - 1]
        with pytest.raises(RuntimeError, match=f"returns {H - 1} actions per chunk; H = {H} are needed"):
            model(rows, env_ids)
        server.batcher.model = lambda obs_rows, env_ids: echo(obs_rows, env_ids)[..., :1]
        with pytest.raises(RuntimeError, match="returns 1-dim actions; the env takes 2"):
            model(rows, env_ids)
        server.batcher.model = lambda obs_rows, env_ids: 1 / 0
        with pytest.raises(OpenpiServerError, match="failed:(.|\n)*ZeroDivisionError"):
            model(rows, env_ids)
        late, calls_in_progress = threading.Event(), [0]

        def answers_late(obs_rows, env_ids):  # once the client has given up on the batch
            calls_in_progress[0] += 1
            try:
                assert late.wait(60), "the test never let the late answers go"
                return echo(obs_rows, env_ids)
            finally:
                calls_in_progress[0] -= 1

        server.batcher.model, model.cfg.timeout_s = answers_late, 0.3
        with pytest.raises(TimeoutError, match="did not answer the requests of a batch within 0.3 s"):
            model(rows, env_ids)
        server.batcher.model = echo
        late.set()  # the late answers go to the connections the client dropped
        deadline = time.monotonic() + 60
        while calls_in_progress[0]:
            assert time.monotonic() < deadline, "the late model calls never ended"
            time.sleep(0.01)
        model.cfg.timeout_s = 30.0
        assert torch.equal(model(rows, env_ids), echo(rows, env_ids))  # reconnects after errors and time-outs
        with pytest.raises(KeyError, match="names observations \\['state'\\]"):
            _client(server, keys={"observation/state": "state"})(rows, env_ids)
        model.close()
    with pytest.raises(ConnectionError, match=f"No openpi policy server at 127.0.0.1:{port}.*--wire openpi"):
        model(rows, env_ids)
    with pytest.raises(ConnectionError, match=f"No openpi policy server at 127.0.0.1:{port}"):
        OpenpiChunkModel(OpenpiChunkModelCfg(port=port))
    with pytest.raises(ValueError, match="'openpi://host:port'"):
        parse_address("openpi://localhost")
    assert parse_address("openpi://gpu-box:8000").host == "gpu-box"


class OpenpiStyleServer:
    """openpi's own server, as its ``WebsocketPolicyServer`` behaves, in a thread: metadata ``{}``, one policy
    call per observation, 50 actions of 32 dims (pi0's padded horizon), errors as text frame + 1011."""

    def __init__(self):
        self.observations = []
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server = asyncio.run_coroutine_threadsafe(self._serve(), self.loop).result()
        self.address = self.server.sockets[0].getsockname()[:2]

    async def _serve(self):
        return await serve(self._handler, "127.0.0.1", 0, compression=None, max_size=None)

    async def _handler(self, websocket):
        await websocket.send(msgpack_numpy.packb({}))
        while True:
            try:
                obs = msgpack_numpy.unpackb(await websocket.recv())
                self.observations.append(obs)
                state = obs["observation/state"]
                actions = np.tile(np.float32(state.sum()) + np.arange(50, dtype=np.float32)[:, None], (1, 32))
                await websocket.send(msgpack_numpy.packb({"actions": actions, "server_timing": {"infer_ms": 1.0}}))
            except websockets.ConnectionClosed:
                break
            except Exception as err:
                await websocket.send(f"Traceback: {err!r}")
                await websocket.close(code=CloseCode.INTERNAL_ERROR)
                break

    def close(self):
        self.server.close()
        asyncio.run_coroutine_threadsafe(self.server.wait_closed(), self.loop).result()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()


def test_chunk_model_against_an_openpi_style_server():
    server = OpenpiStyleServer()
    try:
        with pytest.raises(ValueError, match="does not say its chunk length"):
            _client(server)
        model = _client(server, chunk_length=10, action_dim=32, keys={"observation/state": "policy"}, prompt="pick")
        rows = {"policy": torch.arange(12.0).view(3, 4)}
        chunks = model(rows, torch.arange(3))
        assert chunks.shape == (3, 10, 32)  # the first H = 10 of the 50 actions
        assert torch.equal(chunks[:, :, 0], rows["policy"].sum(1, keepdim=True) + torch.arange(10.0))
        assert {o["prompt"] for o in server.observations} == {"pick"}
        assert all(o["observation/state"].shape == (4,) for o in server.observations)  # one env, no batch dim
        model.cfg.keys = {"observation/state": "extra"}
        with pytest.raises(KeyError, match="names observations \\['extra'\\]"):
            model(rows, torch.arange(3))
        model.cfg.keys = {"wrong/key": "policy"}
        with pytest.raises(OpenpiServerError, match="KeyError"):
            model(rows, torch.arange(3))
        model.close()
    finally:
        server.close()


def test_served_model_drives_the_real_env_like_the_local_one():
    """global_clock on Cartpole with the LQR model behind the openpi server: 60 steps (time-outs mid-chunk,
    suspended envs) take bit-identical actions to the same run with the local model."""
    local = make_default_model(TASK, H)
    # a batch closes when every client waits (all envs send at a tick), not after a few ms that a loaded machine
    # may spend between two clients' sends
    cfg = OpenpiPolicyServerCfg(port=0, chunk_length=H, action_dim=1, task=TASK, keys={"observation/state": "policy"},
                                batching=BatchingCfg(max_wait_s=DEADLINE_S))
    with open_env(TASK, 4) as env, OpenpiPolicyServer(local, cfg) as server:
        remote = _client(server, keys={"observation/state": "policy"})
        remote.check_env(env)

        def rollout(model) -> tuple[torch.Tensor, dict]:
            policy = ActionChunkingPolicy(model, env, chunk_length=H, schedule="global_clock")
            obs, _ = env.reset(seed=3)
            env.episode_length_buf[:] = torch.tensor([270, 275, 282, 290])
            actions = []
            for _ in range(60):
                actions.append(policy.act(obs).clone())
                obs, _, terminated, truncated, _ = env.step(actions[-1])
                policy.observe(terminated | truncated)
            policy.reset()
            return torch.stack(actions), policy.stats

        env.reset(seed=3)
        remote_actions, stats = rollout(remote)
        local_actions, _ = rollout(local)
        assert stats["suspended_env_steps"] > 0 and stats["episodes_completed"] >= 4
        assert torch.equal(remote_actions, local_actions)
        assert server.batcher.calls == stats["inference_calls"]  # the envs of a tick share one model call
        with pytest.raises(ValueError, match="maps 'observation/state' to 'state'"):
            _client(server, keys={"observation/state": "state"}).check_env(env)
        # a term of the concatenated group is no tensor of the observation: refused here, not at the first call
        with pytest.raises(ValueError, match=r"to 'policy/joint_pos_rel', not an observation of the env: pass one of"
                                             r" \['policy'\]"):
            _client(server, keys={"observation/state": "policy/joint_pos_rel"}).check_env(env)
        remote.close()


def test_serve_policy_serves_the_rl_expert_to_the_real_openpi_client():
    """serve_policy.py --protocol openpi --expert: the shipped rsl_rl Cartpole actor as a chunk model with H = 1."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    server = subprocess.Popen([sys.executable, os.path.join(root, "scripts", "serve_policy.py"), "--protocol",
                               "openpi", "--port", "0", "--expert", "--keys", "observation/state=policy"],
                              cwd=root, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        lines = []  # the one-env instance that builds the actor logs first
        while not (lines and lines[-1].startswith("Serving")) and (line := server.stdout.readline()):
            lines.append(line)
        address = re.search(r"at (127\.0\.0\.1):(\d+)", lines[-1])
        assert address, "".join(lines)[-2000:]
        client = WebsocketClientPolicy(address[1], int(address[2]))
        assert client.get_server_metadata() == {"chunk_length": 1, "action_dim": 1, "task": TASK,
                                                "keys": {"observation/state": "policy"}}
        upright, tilted = (client.infer({"observation/state": np.array(s, np.float32)})["actions"]
                           for s in ([0, 0, 0, 0], [0, 0, 0.2, 0]))
        assert upright.shape == tilted.shape == (1, 1) and not np.array_equal(upright, tilted)
        with open_env(TASK, 1) as env:  # the same shipped actor, in this process: the same actions, bit for bit
            expert = ChunkModelSource(RlActorModelCfg(), TASK).make(env)
            for state, served in (([0, 0, 0, 0], upright), ([0, 0, 0.2, 0], tilted)):
                local = expert({"policy": torch.tensor([state], dtype=torch.float32)}, torch.arange(1))[0]
                assert np.array_equal(served, local.numpy())
        server.send_signal(signal.SIGINT)
        assert server.wait(30) == 0
    finally:
        if server.poll() is None:
            server.terminate()
            server.communicate(timeout=30)
