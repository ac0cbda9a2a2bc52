"""GR00T's ZeroMQ wire both ways, against reference peers written here from the spec (Isaac-GR00T
``gr00t/policy/server_client.py``): a REQ client of each generation (N1.6: arrays as .npy bytes, config marker
``__ModalityConfig_class__``; newer: msgpack-numpy maps, ``__ModalityConfig__``) against the project's server,
a REP server against the project's client, the history rings, and a real-env rollout through the server."""

import io
import math
import os
import subprocess
import sys
import threading
import types

import msgpack
import numpy as np
import pytest
import torch
import zmq

from isaaclab_suspend.chunking import ActionChunkingPolicy, ObservationHistory
from isaaclab_suspend.tasks.embedded import make_default_model
from isaaclab_suspend.serving import batching
from isaaclab_suspend.serving import (
    BatchingCfg,
    Gr00tChunkModel,
    Gr00tChunkModelCfg,
    Gr00tPolicyServer,
    Gr00tPolicyServerCfg,
    Gr00tServerError,
)
from isaaclab_suspend.serving.gr00t import codec as gr00t_codec
from isaaclab_suspend.tasks.env_factory import open_env

from helpers import DEADLINE_S

pytestmark = pytest.mark.slow  # GR00T's wire, servers and clients

TASK = "Isaac-Cartpole-Suspendable"
H = 8
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# --- the reference peers' encodings, from the spec ---------------------------------------------------------------

def encode_n16(obj):
    if isinstance(obj, np.ndarray):
        stream = io.BytesIO()
        np.save(stream, obj, allow_pickle=False)
        return {"__ndarray_class__": True, "as_npy": stream.getvalue()}
    return obj


def encode_newer(obj):
    if isinstance(obj, np.ndarray):
        return {b"nd": True, b"type": obj.dtype.str, b"kind": b"", b"shape": obj.shape, b"data": obj.tobytes()}
    return obj


def decode_n16(obj):
    if "__ModalityConfig_class__" in obj:
        return ("config", obj["as_json"])
    if "__ndarray_class__" in obj:
        return np.load(io.BytesIO(obj["as_npy"]), allow_pickle=False)
    return obj


def decode_newer(obj):
    if "__ModalityConfig__" in obj:
        return ("config", obj["as_json"])
    if b"nd" in obj:
        assert obj[b"kind"] == b""
        return np.frombuffer(obj[b"data"], dtype=np.dtype(obj[b"type"])).reshape(obj[b"shape"])
    return obj


GENERATIONS = {"n1.6": (encode_n16, decode_n16), "newer": (encode_newer, decode_newer)}


class ReferenceClient:
    """GR00T's PolicyClient as the spec describes it: a REQ socket, one msgpack frame each way."""

    def __init__(self, port, generation, token=None):
        self.encode, self.decode = GENERATIONS[generation]
        self.token = token
        self.context = zmq.Context()
        self.socket = self.context.socket(zmq.REQ)
        self.socket.setsockopt(zmq.RCVTIMEO, 10_000)
        self.socket.connect(f"tcp://127.0.0.1:{port}")

    def call(self, endpoint, data=None):
        request = {"endpoint": endpoint, **({"data": data} if data is not None else {})}
        if self.token:
            request["api_token"] = self.token
        self.socket.send(msgpack.packb(request, default=self.encode))
        raw = self.socket.recv()
        return msgpack.unpackb(raw, object_hook=self.decode), raw

    def close(self):
        self.socket.close(linger=0)
        self.context.term()


def state_of(rows):
    return rows["policy"].numpy()[:, None].astype(np.float32)  # (B, T = 1, D)


@pytest.fixture(scope="module")
def model():
    return make_default_model(TASK, H)


def test_codec_reads_both_encodings_and_refuses_what_is_not_numbers():
    message = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "v": np.zeros((1, 2, 4, 4, 3), np.uint8),
               "s": ["x", "y"], "f": np.asfortranarray(np.arange(6.0).reshape(2, 3))}
    for generation, (encode, _) in GENERATIONS.items():
        decoded, encoding = gr00t_codec.unpackb(msgpack.packb(message, default=encode))
        assert encoding == (gr00t_codec.NPY if generation == "n1.6" else gr00t_codec.MSGPACK_NUMPY)
        for key in ("a", "v", "f"):
            assert decoded[key].dtype == message[key].dtype and np.array_equal(decoded[key], message[key])
        assert decoded["s"] == ["x", "y"] and not decoded["a"].flags.writeable
    for encoding, (_, decode) in zip(gr00t_codec.ENCODINGS, GENERATIONS.values()):
        back = msgpack.unpackb(gr00t_codec.packb(message, encoding), object_hook=decode)
        assert np.array_equal(back["a"], message["a"]) and back["a"].dtype == np.float32
    pickled = io.BytesIO()
    np.save(pickled, np.array([None], dtype=object), allow_pickle=True)
    for forged in ({"__ndarray_class__": True, "as_npy": pickled.getvalue()},
                   {"__ndarray_class__": True, "as_npy": b"\x93NUMPY garbage"},
                   {b"nd": True, b"type": "|O", b"kind": b"O", b"shape": [1], b"data": b"\x80\x04N."},
                   {b"nd": True, b"type": "<f4", b"kind": b"", b"shape": [2**40, 2**40], b"data": b"\0" * 8},
                   {b"nd": True, b"type": ">f4", b"kind": b"", b"shape": [1], b"data": b"\0" * 4}):
        with pytest.raises(ValueError):
            gr00t_codec.unpackb(msgpack.packb({"x": forged}))
    stream = io.BytesIO()  # a .npy header announcing 2^40 floats over 8 bytes: refused before any allocation
    np.lib.format.write_array_header_1_0(stream, {"descr": "<f4", "fortran_order": False, "shape": (2**40,)})
    forged = stream.getvalue() + b"\0" * 8
    with pytest.raises(ValueError, match="arrived with 8 bytes"):
        gr00t_codec.unpackb(msgpack.packb({"x": {"__ndarray_class__": True, "as_npy": forged}}))
    for marker in gr00t_codec.CONFIG_MARKERS:
        for as_json in ({"delta_indices": [0], "modality_keys": ["k"]}, '{"delta_indices": [0], "modality_keys": ["k"]}'):
            decoded, _ = gr00t_codec.unpackb(msgpack.packb({"c": {marker: True, "as_json": as_json}}), configs=True)
            assert decoded["c"] == {"delta_indices": [0], "modality_keys": ["k"]}
    with pytest.raises(TypeError, match="Tensor"):
        gr00t_codec.packb({"x": torch.zeros(1)})


def test_server_answers_reference_clients_of_both_generations(model):
    cfg = Gr00tPolicyServerCfg(port=0, chunk_length=H, task=TASK, keys={"state.cartpole": "policy"},
                               language_key="annotation.human.task_description", token="s3cret")
    with Gr00tPolicyServer(model, cfg) as server:
        port = server.address[1]
        for generation in GENERATIONS:
            client = ReferenceClient(port, generation, token="s3cret")
            assert client.call("ping")[0]["status"] == "ok"
            config = client.call("get_modality_config")[0]
            assert config["state"] == ("config", {"delta_indices": [0], "modality_keys": ["cartpole"],
                                                  "sin_cos_embedding_keys": None, "mean_std_embedding_keys": None,
                                                  "action_configs": None})
            assert config["action"][1]["delta_indices"] == list(range(H)) and "video" not in config
            assert config["language"][1]["modality_keys"] == ["annotation.human.task_description"]
            rows = {"policy": torch.randn(3, 4)}
            expected = model(rows, torch.arange(3)).numpy()
            flat = {"state.cartpole": state_of(rows), "annotation.human.task_description": ["balance"] * 3}
            nested = {"state": {"cartpole": state_of(rows)},
                      "language": {"annotation.human.task_description": [["balance"]] * 3}}
            for observation, key in ((flat, "action.action"), (nested, "action")):
                (actions, info), raw = client.call("get_action", {"observation": observation, "options": None})
                assert list(actions) == [key] and info == {} and np.array_equal(actions[key], expected)
                assert (b"__ndarray_class__" in raw) == (generation == "n1.6")  # replied in the request's encoding
            assert client.call("reset", {"options": None})[0] == {}
            assert "without --allow_kill" in client.call("kill")[0]["error"]
            assert "lacks 'state.cartpole'" in client.call("get_action", {"observation": {"state.x": state_of(rows)}})[0]["error"]
            assert "Unknown endpoint" in client.call("nope")[0]["error"]
            client.close()
        for token in (None, "wrong"):
            intruder = ReferenceClient(port, "n1.6", token=token)
            assert intruder.call("ping")[0] == {"error": "Unauthorized: Invalid API token"}
            intruder.close()
    with pytest.raises(ValueError, match="beyond loopback, without a token"):
        Gr00tPolicyServer(model, Gr00tPolicyServerCfg(host="0.0.0.0", port=0))
    with pytest.raises(ValueError, match="'state.<name>' or 'video.<name>'"):
        Gr00tPolicyServer(model, Gr00tPolicyServerCfg(port=0, keys={"policy": "policy"}))
    with Gr00tPolicyServer(model, Gr00tPolicyServerCfg(port=0, allow_kill=True)) as killable:
        client = ReferenceClient(killable.address[1], "newer")
        assert client.call("kill")[0] is None
        killable._thread.join(5)
        assert not killable._thread.is_alive()
        client.close()


def test_server_batches_concurrent_clients_into_one_model_call(model, monkeypatch):
    calls = []

    def counted(obs_rows, env_ids):
        calls.append(len(env_ids))
        return model(obs_rows, env_ids)

    # the batcher's clock stands still: a batch never closes at max_wait_s, only once every client sent its request
    monkeypatch.setattr(batching, "time", types.SimpleNamespace(monotonic=lambda: 0.0))
    cfg = Gr00tPolicyServerCfg(port=0, chunk_length=H, batching=BatchingCfg(max_wait_s=2.0))
    with Gr00tPolicyServer(counted, cfg) as server:
        clients = [Gr00tChunkModel(Gr00tChunkModelCfg(port=server.address[1])) for _ in range(4)]
        rows = [{"policy": torch.randn(5, 4)} for _ in clients]
        results = [None] * 4

        def tick(i):
            results[i] = clients[i](rows[i], torch.arange(5))

        for _ in range(3):
            threads = [threading.Thread(target=tick, args=(i,)) for i in range(4)]
            [t.start() for t in threads]
            [t.join() for t in threads]
            for i in range(4):
                assert torch.allclose(results[i], model(rows[i], torch.arange(5)), atol=1e-5)  # its own rows
        assert calls == [20, 20, 20]  # the 4 clients of each round share one model call
        for client in clients:
            client.close()


class ReferenceServer:
    """GR00T's REP server as the spec describes it, one request at a time, with a history-taking config (state
    ``[-2, 0]``, with ``video`` a camera ``video.scene`` ``[-2, 0]`` too), two action keys of 1 + 2 dims over 10 steps, N1.6 config marker and arrays."""

    def __init__(self, generation="n1.6", video=False):
        self.encode, self.decode = GENERATIONS[generation]
        marker = "__ModalityConfig_class__" if generation == "n1.6" else "__ModalityConfig__"
        modalities = [("state", [-2, 0], ["cartpole"]), ("action", list(range(10)), ["force", "extra"]),
                      ("language", [0], ["task"])] + ([("video", [-2, 0], ["scene"])] if video else [])
        self.config = {m: {marker: True, "as_json": {"delta_indices": d, "modality_keys": k}} for m, d, k in modalities}
        self.observations, self.options, self.reply = [], [], None
        self.late = threading.Event()
        """A ``"silence"`` reply waits for it (the test sets it once the client gave up), then answers late."""
        self.answered_late = threading.Event()
        """Set once the late answer is sent: the server takes requests again."""
        self.errors: list[str] = []
        self.context = zmq.Context()
        self.socket = self.context.socket(zmq.REP)
        self.port = self.socket.bind_to_random_port("tcp://127.0.0.1")
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while True:
            try:
                request = msgpack.unpackb(self.socket.recv(), object_hook=self.decode)
            except zmq.ContextTerminated:
                self.socket.close(linger=0)
                return
            endpoint = request.get("endpoint", "get_action")
            if endpoint == "ping":
                reply = {"status": "ok", "message": "Server is running"}
            elif endpoint == "get_modality_config":
                reply = self.config
            else:
                observation = request["data"]["observation"]
                self.observations.append(observation)
                self.options.append(request["data"].get("options"))
                state = observation["state.cartpole"]
                total = state.sum(axis=(1, 2), dtype=np.float32)[:, None, None]
                actions = {"action.force": total + np.arange(10, dtype=np.float32)[None, :, None],
                           "action.extra": np.zeros((len(state), 10, 2), np.float32)}
                reply = self.reply(actions) if self.reply else [actions, {}]
            silence = reply == "silence"
            if silence:  # answered late: once the client has given up on it
                if not self.late.wait(DEADLINE_S):
                    self.errors.append(f"the test never let the late answer go within {DEADLINE_S:g} s")
                self.reply, reply = None, {"late": True}
            self.socket.send(reply if isinstance(reply, bytes) else msgpack.packb(reply, default=self.encode))
            if silence:
                self.answered_late.set()

    def close(self):
        self.context.term()  # the serving thread's recv ends, and it closes its socket
        self.thread.join(5)


def test_client_against_a_reference_rep_server():
    server = ReferenceServer()
    try:
        with pytest.raises(ValueError, match="takes a language instruction"):
            Gr00tChunkModel(Gr00tChunkModelCfg(port=server.port, keys={"state.cartpole": "policy"}))
        with pytest.raises(ValueError, match="lacks \\['state.cartpole'\\]"):
            Gr00tChunkModel(Gr00tChunkModelCfg(port=server.port, keys={"state.x": "policy"}, prompt="p"))
        with pytest.raises(ValueError, match="plans 10 actions per chunk"):
            Gr00tChunkModel(Gr00tChunkModelCfg(port=server.port, chunk_length=11, prompt="p"))
        client = Gr00tChunkModel(Gr00tChunkModelCfg(port=server.port, chunk_length=4, action_dim=3,
                                                    keys={"state.cartpole": "policy"}, prompt="go"))
        assert client.chunk_length == 4 and client.action_keys == ["force", "extra"]
        with pytest.raises(RuntimeError, match="observe_step hook"):
            client({"policy": torch.zeros(2, 4)}, torch.arange(2))
        obs = {"policy": torch.arange(8.0).view(2, 4)}
        fed = client.observe_step(obs, torch.ones(2, dtype=torch.bool), torch.ones(2, dtype=torch.bool))
        chunk = client({"policy": obs["policy"][[1]], "gr00t_history": {"state.cartpole": fed["gr00t_history"]["state.cartpole"][[1]]}},
                       torch.tensor([1]))
        sent = server.observations[-1]
        assert sent["state.cartpole"].shape == (1, 2, 4) and sent["state.cartpole"].dtype == np.float32
        assert sent["task"] == ["go"]
        assert chunk.shape == (1, 4, 3) and torch.equal(chunk[0, :, 0], 2 * obs["policy"][1].sum() + torch.arange(4.0))
        for bad, match in ((lambda a: [{**a, "action.force": a["action.force"] * np.nan}, {}], "non-finite"),
                           (lambda a: [{"action.force": a["action.force"]}, {}], "'extra'"),
                           (lambda a: [{**a, "action.extra": a["action.extra"][..., :1]}, {}], "2-dim actions"),
                           (lambda a: {"error": "CUDA out of memory"}, "CUDA out of memory"),
                           (lambda a: b"ERROR", "b'ERROR'")):
            server.reply = bad
            with pytest.raises(Gr00tServerError, match=match):
                client({**obs, "gr00t_history": fed["gr00t_history"]}, torch.arange(2))
        server.reply, client.cfg.timeout_s = (lambda a: "silence"), 0.3
        with pytest.raises(TimeoutError, match="did not answer get_action within 0.3 s"):
            client({**obs, "gr00t_history": fed["gr00t_history"]}, torch.arange(2))
        server.late.set()
        assert server.answered_late.wait(DEADLINE_S) and server.errors == []
        client.cfg.timeout_s = 10.0
        assert client({**obs, "gr00t_history": fed["gr00t_history"]}, torch.arange(2)).shape == (2, 4, 3)  # new socket
        client.close()
    finally:
        server.close()
    with pytest.raises(ConnectionError, match="No GR00T policy server answers"):
        Gr00tChunkModel(Gr00tChunkModelCfg(port=server.port, connect_timeout_s=0.3))


def test_history_advances_only_for_moved_envs_and_refills_on_restart():
    history = ObservationHistory([-2, 0], torch.tensor([[0.0], [10.0], [20.0]]))
    yes, no = torch.tensor([True, True, True]), torch.tensor([True, False, True])
    history.push(torch.tensor([[1.0], [11.0], [21.0]]), yes, None)
    history.push(torch.tensor([[2.0], [11.0], [22.0]]), no, None)  # env 1 suspended: its ring stands still
    history.push(torch.tensor([[3.0], [12.0], [30.0]]), yes, torch.tensor([False, False, True]))  # env 2 restarts
    assert torch.equal(history.read()[..., 0], torch.tensor([[1.0, 3.0], [10.0, 12.0], [30.0, 30.0]]))


def test_real_env_rollout_through_the_server_equals_the_local_model(model):
    """global_clock on Cartpole, 60 steps with resets mid-chunk (suspended envs): the GR00T client and server give
    the local model's actions bit for bit with exactly ceil(T / H) get_action calls, one per tick."""
    steps = 60
    cfg = Gr00tPolicyServerCfg(port=0, chunk_length=H, task=TASK, keys={"state.cartpole": "policy"})
    with open_env(TASK, 4) as env, Gr00tPolicyServer(model, cfg) as server:
        def rollout(chunk_model):
            policy = ActionChunkingPolicy(chunk_model, env, chunk_length=H, schedule="global_clock")
            obs, _ = env.reset(seed=3)
            env.episode_length_buf[:] = torch.tensor([270, 275, 282, 290])
            actions = []
            for _ in range(steps):
                actions.append(policy.act(obs).clone())
                obs, _, terminated, truncated, _ = env.step(actions[-1])
                policy.observe(terminated | truncated)
            policy.reset()
            return torch.stack(actions), policy.stats

        env.reset(seed=3)  # the first reset of a new env draws differently from the later ones
        for form in ("flat", "nested"):
            remote = Gr00tChunkModel(Gr00tChunkModelCfg(port=server.address[1], keys={"state.cartpole": "policy"},
                                                        form=form))
            remote.check_env(env)
            remote_actions, stats = rollout(remote)
            local_actions, _ = rollout(model)
            assert stats["suspended_env_steps"] > 0 and stats["episodes_completed"] >= 4
            assert torch.equal(remote_actions, local_actions)
            assert remote.calls == math.ceil(steps / H) == stats["inference_calls"]
            remote.close()

        class Recording:
            """The local model with the observe_step hook: records what the policy feeds it."""

            def __init__(self):
                self.fed = []

            def __call__(self, obs_rows, env_ids):
                return model(obs_rows, env_ids)

            def observe_step(self, obs, moved, restarted):
                self.fed.append((moved.clone(), None if restarted is None else restarted.clone()))
                return obs

        recording = Recording()
        hooked_actions, stats = rollout(recording)
        assert torch.equal(hooked_actions, local_actions) and len(recording.fed) == steps
        assert recording.fed[0][1].all()  # every env starts an episode at the first step
        restarts = [r for _, r in recording.fed[1:] if r is not None]
        assert restarts and all(r.any() for r in restarts)  # None whenever no env restarted (host mirror)
        assert any(not moved.all() for moved, _ in recording.fed)  # suspended envs did not move
        for path in ("state", "policy/joint_pos_rel"):  # no group, or a term of a concatenated group: no tensor to send
            with pytest.raises(ValueError, match=f"maps 'state.cartpole' to '{path}', not an observation of the env"):
                Gr00tChunkModel(Gr00tChunkModelCfg(port=server.address[1], keys={"state.cartpole": path})).check_env(env)


def test_eval_script_against_the_gr00t_server_and_without_one(model):
    cfg = Gr00tPolicyServerCfg(port=0, chunk_length=H, task=TASK, keys={"state.cartpole": "policy"})
    with Gr00tPolicyServer(model, cfg) as server:
        command = [sys.executable, os.path.join(ROOT, "scripts", "eval.py"), "--remote",
                   f"gr00t://127.0.0.1:{server.address[1]}", "--gr00t_keys", "state.cartpole=policy", "--num_envs",
                   "4", "--steps", "40", "--timeline", ""]
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        assert f"remote policy gr00t://127.0.0.1:{server.address[1]}" in done.stdout
        assert server.requests == math.ceil(40 / H)
        port = server.address[1]
    done = subprocess.run([*command[:3], f"gr00t://127.0.0.1:{port}", *command[4:]], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    last = done.stderr.strip().splitlines()[-1]  # argparse's usage, then one error line
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert last.startswith("eval.py: error: No GR00T policy server answers at 127.0.0.1")


def test_video_history_of_the_camera_task_is_uint8_and_freezes_with_its_env():
    """The camera task's frames under a video key taking ``[-2, 0]``: each env's ring of past frames, fed by the
    policy's observe_step hook, goes on the wire as uint8 (B, 2, H, W, 3), bit for bit the frames of two moves
    back and of now; a suspended env's ring stands still, and a restarted one is filled with its first frame."""
    server = ReferenceServer(video=True)
    keys = {"state.cartpole": "policy", "video.scene": "images/scene_camera"}
    try:
        client = Gr00tChunkModel(Gr00tChunkModelCfg(port=server.port, chunk_length=4, action_dim=3, keys=keys,
                                                    prompt="push"))
        with open_env("Isaac-PushCube-Camera-Suspendable", 3) as env:
            obs, _ = env.reset(seed=0)
            everyone = torch.ones(3, dtype=torch.bool)
            fed = client.observe_step(obs, everyone, everyone)
            frames = [obs["images"]["scene_camera"].clone()]
            moves = [everyone, everyone, torch.tensor([True, False, True]), everyone]
            for moved in moves:
                obs, *_ = env.step(torch.full((3, 1), 0.4))
                frames.append(obs["images"]["scene_camera"].clone())
                fed = client.observe_step(obs, moved, None)
            client({**obs, "gr00t_history": fed["gr00t_history"]}, torch.arange(3))
            restarted = client.observe_step(obs, everyone, torch.tensor([False, True, False]))["gr00t_history"]
        sent = server.observations[-1]["video.scene"]
        assert sent.dtype == np.uint8 and sent.shape == (3, 2, 64, 64, 3)
        assert frames[4].float().std() > 0 and not torch.equal(frames[2], frames[4])
        # envs 0 and 2 moved at every step: frames 2 and 4; env 1 stood still at step 3: its frames 1 and 4
        expected = torch.stack([torch.stack([frames[2][0], frames[4][0]]), torch.stack([frames[1][1], frames[4][1]]),
                                torch.stack([frames[2][2], frames[4][2]])])
        assert np.array_equal(sent, expected.numpy())
        assert torch.equal(restarted["video.scene"][1, 0], frames[4][1])  # refilled with the current frame
        client.close()
    finally:
        server.close()
