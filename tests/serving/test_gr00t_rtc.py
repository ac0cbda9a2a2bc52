"""Real-time chunking over GR00T's wire: the ``rtc`` schedule through :class:`Gr00tChunkModel` against the project's
:class:`Gr00tPolicyServer` gives the local model's actions bit for bit on real Cartpole; the options a client sends
(names, shapes, per-key split) as a reference GR00T server sees them; batched requests keep each row's prefix;
hostile options are answered with an error and the server lives on."""

import threading

import numpy as np
import pytest
import torch

from isaaclab_suspend.chunking import ActionChunkingPolicy, RtcScheduleCfg
from isaaclab_suspend.tasks.cartpole.chunk_model import CartpoleLQRCfg, CartpoleLQRChunkModel
from isaaclab_suspend.serving import (
    BatchingCfg,
    Gr00tChunkModel,
    Gr00tChunkModelCfg,
    Gr00tPolicyServer,
    Gr00tPolicyServerCfg,
    TcpPolicyServer,
    TcpPolicyServerCfg,
    TcpChunkModel,
    TcpChunkModelCfg,
)

from test_chunking_policy import env  # noqa: F401  (Cartpole, N envs, a termination when a pole falls)
from test_gr00t import GENERATIONS, ReferenceClient, ReferenceServer, state_of
from test_rtc import H, N, START, PrefixRecorder, _run

pytestmark = pytest.mark.slow  # a GR00T server and client over real Cartpole

KEYS = {"state.cartpole": "policy"}


def _server_cfg(**kwargs):
    return Gr00tPolicyServerCfg(port=0, chunk_length=H, action_dim=1, keys=KEYS, **kwargs)


def test_rtc_through_the_gr00t_server_equals_the_local_model(env):
    """``rtc`` with d = 2 on Cartpole, resets mid-chunk (suspended envs get delay 0): the LQR planner served over
    GR00T's wire, in both forms, takes the local planner's actions bit for bit, and the server's model was given
    each launch's prefix and per-row delays."""
    local = CartpoleLQRChunkModel(CartpoleLQRCfg(chunk_length=H))
    served = PrefixRecorder()
    steps = 60
    env.reset(seed=0)  # the first reset of a new env draws differently from the later ones
    policy = ActionChunkingPolicy(local, env, chunk_length=H, schedule=RtcScheduleCfg(delay_steps=2))
    local_actions = _run(env, policy, steps, START)[0]
    policy.close()
    with Gr00tPolicyServer(served, _server_cfg()) as server:
        for form in ("flat", "nested"):
            served.calls.clear()
            remote = Gr00tChunkModel(Gr00tChunkModelCfg(port=server.address[1], keys=KEYS, form=form,
                                                        rtc_options=True))
            assert remote.accepts_prefix
            policy = ActionChunkingPolicy(remote, env, chunk_length=H, schedule=RtcScheduleCfg(delay_steps=2))
            remote_actions = _run(env, policy, steps, START)[0]
            policy.close()
            remote.close()
            assert torch.equal(remote_actions, local_actions)
            prefixed = [(prefix, delay) for prefix, delay, _ in served.calls if prefix is not None]
            assert served.calls[0][0] is None and len(prefixed) == len(served.calls) - 1 >= steps // (H - 2) - 1
            assert all(prefix.shape == (N, 2, 1) and prefix.dtype == torch.float32 for prefix, _ in prefixed)
            delays = torch.cat([delay for _, delay in prefixed])
            assert set(delays.tolist()) == {0, 2}  # envs suspended at a launch start the chunk from index 0
    # without the options the same server plans from the observation alone: other actions
    with Gr00tPolicyServer(served, _server_cfg()) as server:
        plain = Gr00tChunkModel(Gr00tChunkModelCfg(port=server.address[1], keys=KEYS))
        assert not plain.accepts_prefix
        policy = ActionChunkingPolicy(plain, env, chunk_length=H, schedule=RtcScheduleCfg(delay_steps=2))
        assert not torch.equal(_run(env, policy, steps, START)[0], local_actions)
        policy.close()
        with pytest.raises(ValueError, match="sends no prefix: set Gr00tChunkModelCfg.rtc_options"):
            plain({"policy": torch.zeros(2, 4)}, torch.arange(2), prefix=torch.zeros(2, 2, 1),
                  delay=torch.tensor([2, 2]))
        plain.close()


def test_options_on_the_wire_as_a_reference_gr00t_server_reads_them():
    """Two action keys (force: 1 dim, extra: 2 dims): the prefix goes out split per key in the reply's form, float32
    (B, d, D_key), with action_horizon = rtc_overlap_steps = rtc_frozen_steps = d, the ramp rate and the per-row
    frozen steps; a call without prefix sends options None."""
    server = ReferenceServer()
    try:
        cfg = dict(port=server.port, chunk_length=4, action_dim=3, keys=KEYS, prompt="go", rtc_options=True,
                   rtc_ramp_rate=2.5)
        client = Gr00tChunkModel(Gr00tChunkModelCfg(**cfg))
        obs = {"policy": torch.arange(8.0).view(2, 4)}
        fed = client.observe_step(obs, torch.ones(2, dtype=torch.bool), torch.ones(2, dtype=torch.bool))
        rows = {**obs, "gr00t_history": fed["gr00t_history"]}
        prefix = torch.randn(2, 3, 3)
        prefix[0, 0, 0] = float.fromhex("0x1.fffffep-1")  # the last bit counts
        with pytest.raises(ValueError, match="their dims are known from its first reply"):
            client(rows, torch.arange(2), prefix=prefix, delay=torch.tensor([3, 0]))
        client(rows, torch.arange(2))
        assert server.options[-1] is None
        client(rows, torch.arange(2), prefix=prefix, delay=torch.tensor([3, 0]))
        options = server.options[-1]
        assert set(options) == {"action_horizon", "rtc_overlap_steps", "rtc_frozen_steps", "rtc_ramp_rate",
                                "previous_action", "rtc_row_frozen_steps"}
        assert (options["action_horizon"], options["rtc_overlap_steps"], options["rtc_frozen_steps"]) == (3, 3, 3)
        assert options["rtc_ramp_rate"] == 2.5
        previous = options["previous_action"]
        assert list(previous) == ["action.force", "action.extra"]
        for key, part in (("action.force", prefix[..., :1]), ("action.extra", prefix[..., 1:])):
            assert previous[key].dtype == np.float32 and np.array_equal(previous[key], part.numpy())
        rows_frozen = options["rtc_row_frozen_steps"]
        assert rows_frozen.dtype == np.int64 and rows_frozen.tolist() == [3, 0]
        client.cfg.form = "nested"  # the nested form names the keys as its replies do
        assert list(client.rtc_options(prefix, torch.tensor([3, 0]))["previous_action"]) == ["force", "extra"]
        assert client.rtc_options(prefix[:, :0], torch.tensor([0, 0])) is None  # d = 0: nothing to continue
        client.close()
    finally:
        server.close()


def _valid_options(batch, horizon=5, overlap=3, frozen=2):
    previous = np.random.default_rng(0).standard_normal((batch, horizon, 1)).astype(np.float32)
    return {"action_horizon": horizon, "rtc_overlap_steps": overlap, "rtc_frozen_steps": frozen, "rtc_ramp_rate": 5.0,
            "previous_action": {"action.action": previous}}


def _previous(options, value):
    options["previous_action"]["action.action"] = value


HOSTILE = [
    (lambda o: o.pop("rtc_frozen_steps"), "lack ['rtc_frozen_steps']"),
    (lambda o: o.update(rtc_frozen_steps=4), "'rtc_frozen_steps' <= 'rtc_overlap_steps' <= 'action_horizon'"),
    (lambda o: o.update(action_horizon=2 * H, rtc_overlap_steps=H + 1, rtc_frozen_steps=H + 1),
     "at most this server's H = 8"),
    (lambda o: o.update(rtc_frozen_steps=2.0), "must be integers"),
    (lambda o: o.update(rtc_overlap_steps=True), "must be integers"),
    (lambda o: o.update(rtc_ramp_rate=float("nan")), "'rtc_ramp_rate' must be a finite number > 0"),
    (lambda o: o.update(rtc_ramp_rate="fast"), "'rtc_ramp_rate' must be a finite number > 0"),
    (lambda o: o.update(previous_action=[1, 2]), "'previous_action' must map each action key"),
    (lambda o: o.update(previous_action={"action.other": o["previous_action"]["action.action"]}),
     "for the action key 'action'"),
    (lambda o: _previous(o, o["previous_action"]["action.action"].astype(np.float64)), "got {'action': float64"),
    (lambda o: _previous(o, o["previous_action"]["action.action"][:, :4]), "action_horizon = 5, D)"),
    (lambda o: _previous(o, o["previous_action"]["action.action"][:1]), "(B = 3, action_horizon"),
    (lambda o: _previous(o, np.full((3, 5, 2), 0.1, np.float32)), "holds 2-dim actions; this server's model takes 1"),
    (lambda o: o["previous_action"]["action.action"].__setitem__((1, 3, 0), np.nan), "non-finite actions"),
    (lambda o: o.update(rtc_row_frozen_steps=np.array([2, 3, 0])), "values in [0, rtc_frozen_steps = 2]"),
    (lambda o: o.update(rtc_row_frozen_steps=np.array([2.0, 2.0, 0.0])),
     "'rtc_row_frozen_steps' must be an integer array"),
]


@pytest.mark.parametrize("generation", GENERATIONS)
def test_server_passes_the_options_prefix_and_refuses_hostile_options(generation):
    """A previous chunk of 5 actions with overlap 3 and 2 frozen: the model gets its last 3 actions and delay 2 per
    row (or the per-row frozen steps); each hostile option gets a one-line error naming it and the server serves
    on; a model without a prefix ignores the options, hostile or not."""
    model = CartpoleLQRChunkModel(CartpoleLQRCfg(chunk_length=H))
    rows = {"policy": torch.randn(3, 4) * 0.1}
    observation = {"state.cartpole": state_of(rows)}
    with Gr00tPolicyServer(model, _server_cfg()) as server:
        client = ReferenceClient(server.address[1], generation)
        try:
            options = _valid_options(3)
            prefix = torch.from_numpy(options["previous_action"]["action.action"][:, 2:5].copy())
            (actions, _), _ = client.call("get_action", {"observation": observation, "options": options})
            expected = model(rows, torch.arange(3), prefix=prefix, delay=torch.full((3,), 2))
            assert np.array_equal(actions["action.action"], expected.numpy())
            assert np.array_equal(actions["action.action"][:, :2], options["previous_action"]["action.action"][:, 2:4])
            options["rtc_row_frozen_steps"] = np.array([2, 0, 1])
            (actions, _), _ = client.call("get_action", {"observation": observation, "options": options})
            expected = model(rows, torch.arange(3), prefix=prefix, delay=torch.tensor([2, 0, 1]))
            assert np.array_equal(actions["action.action"], expected.numpy())
            for spoil, message in HOSTILE:
                options = _valid_options(3)
                spoil(options)
                reply, _ = client.call("get_action", {"observation": observation, "options": options})
                assert isinstance(reply, dict) and message in reply["error"], (message, reply)
                assert reply["error"].startswith("ValueError: ") and "\n" not in reply["error"]
            (actions, _), _ = client.call("get_action", {"observation": observation, "options": None})
            assert np.array_equal(actions["action.action"], model(rows, torch.arange(3)).numpy())  # served on
        finally:
            client.close()

    def plain(obs_rows, env_ids):
        return model(obs_rows, env_ids)

    with Gr00tPolicyServer(plain, _server_cfg()) as server:
        client = ReferenceClient(server.address[1], generation)
        options = _valid_options(3)
        HOSTILE[0][0](options)
        (actions, _), _ = client.call("get_action", {"observation": observation, "options": options})
        assert np.array_equal(actions["action.action"], model(rows, torch.arange(3)).numpy())
        client.close()


def test_batched_requests_keep_each_rows_prefix():
    """Three GR00T clients at once into one batching server: the two with prefixes of one length share a model call
    and each gets the chunk of its own rows, prefix and delays; the one without a prefix gets a call of its own.
    The project's TCP server with batching also announces and passes prefixes now."""
    model = PrefixRecorder()
    cfg = _server_cfg(batching=BatchingCfg(max_wait_s=2.0))
    with Gr00tPolicyServer(model, cfg) as server:
        clients = [Gr00tChunkModel(Gr00tChunkModelCfg(port=server.address[1], keys=KEYS, rtc_options=True))
                   for _ in range(3)]
        generator = torch.Generator().manual_seed(1)
        rows = [{"policy": (torch.rand(4, 4, generator=generator) - 0.5) * 0.2} for _ in clients]
        prefixes = [(torch.rand(4, 2, 1, generator=generator) - 0.5, torch.tensor([2, 0, 2, 2])),
                    (torch.rand(4, 2, 1, generator=generator) - 0.5, torch.tensor([0, 2, 2, 0])), None]
        results = [None] * 3

        def call(i):
            kwargs = {} if prefixes[i] is None else {"prefix": prefixes[i][0], "delay": prefixes[i][1]}
            results[i] = clients[i](rows[i], torch.arange(4), **kwargs)

        threads = [threading.Thread(target=call, args=(i,)) for i in range(3)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        assert sorted(len(c[2]) for c in model.calls) == [4, 8] and server.batcher.calls == 2
        lqr = model.model
        for i in range(3):
            kwargs = {} if prefixes[i] is None else {"prefix": prefixes[i][0], "delay": prefixes[i][1]}
            assert torch.equal(results[i], lqr(rows[i], torch.arange(4), **kwargs))
        for client in clients:
            client.close()
    with TcpPolicyServer(model, TcpPolicyServerCfg(port=0, chunk_length=H, action_dim=1, batching=BatchingCfg())) as server:
        remote = TcpChunkModel(TcpChunkModelCfg(port=server.address[1]))
        assert remote.accepts_prefix
        chunk = remote(rows[0], torch.arange(4), prefix=prefixes[0][0], delay=prefixes[0][1])
        assert torch.equal(chunk, lqr(rows[0], torch.arange(4), prefix=prefixes[0][0], delay=prefixes[0][1]))
        remote.close()
