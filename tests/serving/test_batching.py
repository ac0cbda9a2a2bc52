"""Batching policy server: concurrent requests of several clients share one model call, each client gets its own
rows in its own order, structures that cannot be concatenated are served apart, errors reach every request."""

import threading
import time
import types

import pytest
import torch

from isaaclab_suspend.serving import batching
from isaaclab_suspend.serving.batching import PATIENCE
from isaaclab_suspend.serving import (
    BatchingCfg,
    BatchingChunkModel,
    TcpPolicyServer,
    TcpPolicyServerCfg,
    TcpChunkModel,
    TcpChunkModelCfg,
)

from helpers import DEADLINE_S

pytestmark = pytest.mark.slow  # served models batching concurrent clients

H = 4


class Recording:
    """A chunk model whose chunk of a row is the row's ``x`` value repeated, recording each call's batch size.
    With a ``gate``, each call waits for it to be set after recording its batch size (and fails if it is not set
    within :data:`DEADLINE_S`): the test knows the call is in progress and holds it there."""

    def __init__(self):
        self.batches: list[int] = []
        self.gate: threading.Event | None = None

    def __call__(self, obs_rows, env_ids):
        assert not torch.is_grad_enabled()
        self.batches.append(len(env_ids))
        if self.gate is not None and not self.gate.wait(DEADLINE_S):
            raise TimeoutError("the test never let the model call go on")
        x = obs_rows["x"].reshape(len(env_ids), -1)[:, :1].float()
        if (x < 0).any():
            raise ValueError("negative observation")
        return x.view(-1, 1, 1).expand(-1, H, 2).clone()



MAX_WAIT_S = 2.0**-6
"""``max_wait_s`` of the tests that move the batcher's clock: a power of two, so that its halves add up exactly."""


class StillClock:
    """The batcher's clock, standing still until the test moves :attr:`now`: a batch closes at ``max_wait_s``
    only once the test says that much time passed, whatever the machine's load. :attr:`reads` counts the worker's
    looks at it: while it holds a batch it looks again at least every ``max_wait_s`` (its condition's timeout)."""

    def __init__(self):
        self.now = 0.0
        self.reads = 0

    def monotonic(self) -> float:
        self.reads += 1
        return self.now


@pytest.fixture
def clock(monkeypatch) -> StillClock:
    """A :class:`StillClock` in place of the batching module's ``time`` (it reads nothing else of it)."""
    still = StillClock()
    monkeypatch.setattr(batching, "time", types.SimpleNamespace(monotonic=still.monotonic))
    return still


def _until(condition, what: str) -> None:
    """Wait until ``condition()`` holds, something another thread does; fail if it does not within DEADLINE_S."""
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"never happened within {DEADLINE_S:g} s: {what}"
        time.sleep(0.001)


def _held_until_max_wait(batcher: BatchingChunkModel, clock: StillClock, *request):
    """Submit ``request``, one that closes no batch on its own (other clients are waited for): the worker holds
    it while the clock stands still and at half ``max_wait_s`` (it looked at the clock twice each time, without
    answering), then moves the clock on to ``max_wait_s``; returns its future, which only that can answer."""
    future = batcher.submit(*request)
    for passed in (0.0, batcher.cfg.max_wait_s / 2):
        clock.now += passed
        reads = clock.reads
        _until(lambda: clock.reads >= reads + 2 or future.done(), "the worker looks at its clock")
        assert not future.done(), f"the batch closed after {passed:g} s, before max_wait_s"
    clock.now += batcher.cfg.max_wait_s / 2
    return future


def _clients_in_threads(call, clients: int, rounds: int) -> list[list[torch.Tensor]]:
    results = [[] for _ in range(clients)]
    errors = []
    barrier = threading.Barrier(clients)

    def client(k):
        try:
            for r in range(rounds):
                barrier.wait()
                rows = {"x": torch.full((3 + k, 2), float(100 * k + r))}
                results[k].append(call(rows, torch.arange(3 + k)))
        except BaseException as err:  # noqa: BLE001 - reported below; the others must not wait for this client
            errors.append(err)
            barrier.abort()

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads), "a client hung"
    assert errors == [], f"clients failed: {errors}"
    assert all(len(r) == rounds for r in results)
    return results


def test_concurrent_clients_share_one_call_and_get_their_own_rows_in_order(clock):
    model = Recording()
    batcher = BatchingChunkModel(model, BatchingCfg(max_wait_s=5.0))
    for k in range(4):  # client k sends 3 + k rows: its key
        batcher.register_client(3 + k)
    results = _clients_in_threads(lambda rows, ids: batcher.submit(rows, ids, len(ids)).result(), clients=4,
                                  rounds=5)
    # every client waiting closes the batch at once (the clock stands still: never at max_wait_s): 5 calls of
    # 3 + 4 + 5 + 6 rows
    assert model.batches == [18] * 5 and batcher.calls == 5 and batcher.requests == 20
    for k, chunks in enumerate(results):
        assert [c.shape for c in chunks] == [(3 + k, H, 2)] * 5
        assert all(torch.all(c == 100 * k + r) for r, c in enumerate(chunks))  # own rows, own order
    batcher.close()
    with pytest.raises(RuntimeError, match="closed"):
        batcher({"x": torch.zeros(1, 2)}, torch.arange(1))


def test_max_rows_max_wait_structures_and_errors(clock):
    model = Recording()
    batcher = BatchingChunkModel(model, BatchingCfg(max_wait_s=MAX_WAIT_S, max_rows=8))
    for client in "abc":
        batcher.register_client(client)
    only = _held_until_max_wait(batcher, clock, {"x": torch.ones(2, 2)}, torch.arange(2))  # one of 3: max_wait_s
    assert torch.all(only.result(DEADLINE_S) == 1)
    model.batches, model.gate = [], threading.Event()
    first = _held_until_max_wait(batcher, clock, {"x": torch.ones(1, 2)}, torch.arange(1))  # the others leave
    _until(lambda: model.batches == [1], "the first request's call starts")  # it runs alone while the others queue
    futures = [batcher.submit({"x": torch.full((5, 2), 2.0)}, torch.arange(5)),
               batcher.submit({"x": torch.full((5, 2), 3.0)}, torch.arange(5)),  # max_rows 8: next call
               batcher.submit({"x": torch.full((1, 3), 4.0)}, torch.arange(1))]  # another row shape
    model.gate.set()
    assert torch.all(first.result(DEADLINE_S) == 1)
    assert [f.result(DEADLINE_S)[0, 0, 0].item() for f in futures] == [2.0, 3.0, 4.0]
    assert model.batches == [1, 5, 5, 1]
    for client in "ab":  # both waited for: one call (the clock stands still: never at max_wait_s)
        batcher.register_client(client)
    bad = [batcher.submit({"x": torch.full((1, 2), v)}, torch.arange(1), c) for v, c in ((-1.0, "a"), (5.0, "b"))]
    for future in bad:  # both requests of the failing call get its error
        with pytest.raises(ValueError, match="negative observation"):
            future.result(DEADLINE_S)
    assert model.batches[4:] == [2]
    alive = _held_until_max_wait(batcher, clock, {"x": torch.ones(1, 2)}, torch.arange(1))  # a and b sent: waited for
    assert torch.all(alive.result(DEADLINE_S) == 1)  # the worker lives on
    # a malformed request is refused at submit, so it can neither fail nor shift the rows of a shared call
    calls = len(model.batches)
    with pytest.raises(ValueError, match="'x' must have one row per env id \\(2\\), got shape \\(3, 2\\)"):
        batcher.submit({"x": torch.ones(3, 2)}, torch.arange(2))
    with pytest.raises(ValueError, match="env_ids must be a 1-D integer tensor, got torch.float32"):
        batcher.submit({"x": torch.ones(2, 2)}, torch.arange(2.0))
    assert len(model.batches) == calls
    batcher.close()


def test_a_client_that_sends_nothing_costs_at_most_patience_waits(clock):
    """A connected client that never sends (only a ``hello``) is waited for in PATIENCE batches, then not until
    its first request; from then on it is waited for until it leaves. The batcher's clock stands still unless the
    test moves it: a batch that waits is held until max_wait_s is said to have passed, one that does not is
    answered without it."""
    model = Recording()
    batcher = BatchingChunkModel(model, BatchingCfg(max_wait_s=MAX_WAIT_S))
    batcher.register_client("busy")
    batcher.register_client("silent")

    def busy():
        return {"x": torch.ones(1, 2)}, torch.arange(1), "busy"

    for _ in range(PATIENCE):
        _held_until_max_wait(batcher, clock, *busy()).result(DEADLINE_S)
    for _ in range(3):  # no longer waited for
        batcher.submit(*busy()).result(DEADLINE_S)
    silent = _held_until_max_wait(batcher, clock, {"x": torch.ones(1, 2)}, torch.arange(1), "silent")  # busy sent
    assert silent.result(DEADLINE_S).shape == (1, H, 2)
    _held_until_max_wait(batcher, clock, *busy()).result(DEADLINE_S)  # silent is back: waited for again
    batcher.forget_client("silent")  # gone: not waited for
    batcher.submit(*busy()).result(DEADLINE_S)
    assert model.batches == [1] * (PATIENCE + 6)
    batcher.close()


def test_policy_server_batches_its_clients():
    """Four clients of one TcpPolicyServer (one connection each): one model call per round with batching, four
    without, the same chunks either way."""
    for batching, calls_per_round in ((BatchingCfg(max_wait_s=5.0), 1), (None, 4)):
        model = Recording()
        with TcpPolicyServer(model, TcpPolicyServerCfg(port=0, chunk_length=H, batching=batching)) as server:
            host, port = server.address
            clients = [TcpChunkModel(TcpChunkModelCfg(host=host, port=port)) for _ in range(4)]
            results = _clients_in_threads(lambda rows, ids: clients[int(rows["x"].shape[0]) - 3](rows, ids), 4, 3)
            for client in clients:
                client.close()
        assert len(model.batches) == 3 * calls_per_round
        for k, chunks in enumerate(results):
            assert all(c.shape == (3 + k, H, 2) and torch.all(c == 100 * k + r) for r, c in enumerate(chunks))
