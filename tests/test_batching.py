"""Batching policy server: concurrent requests of several clients share one model call, each client gets its own
rows in its own order, structures that cannot be concatenated are served apart, errors reach every request."""

import threading
import time

import pytest
import torch

from isaaclab_suspend.serving.batching import PATIENCE
from isaaclab_suspend.serving import (
    BatchingCfg,
    BatchingChunkModel,
    PolicyServer,
    PolicyServerCfg,
    RemoteChunkModel,
    RemoteChunkModelCfg,
)

H = 4


class Recording:
    """A chunk model whose chunk of a row is the row's ``x`` value repeated, recording each call's batch size."""

    def __init__(self, delay_s: float = 0.0):
        self.batches: list[int] = []
        self.delay_s = delay_s

    def __call__(self, obs_rows, env_ids):
        assert not torch.is_grad_enabled()
        self.batches.append(len(env_ids))
        time.sleep(self.delay_s)
        x = obs_rows["x"].reshape(len(env_ids), -1)[:, :1].float()
        if (x < 0).any():
            raise ValueError("negative observation")
        return x.view(-1, 1, 1).expand(-1, H, 2).clone()


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


def test_concurrent_clients_share_one_call_and_get_their_own_rows_in_order():
    model = Recording()
    batcher = BatchingChunkModel(model, BatchingCfg(max_wait_s=5.0))
    for k in range(4):  # client k sends 3 + k rows: its key
        batcher.register_client(3 + k)
    results = _clients_in_threads(lambda rows, ids: batcher.submit(rows, ids, len(ids)).result(), clients=4,
                                  rounds=5)
    # every client waiting closes the batch at once (no 5 s wait): 5 calls of 3 + 4 + 5 + 6 rows
    assert model.batches == [18] * 5 and batcher.calls == 5 and batcher.requests == 20
    for k, chunks in enumerate(results):
        assert [c.shape for c in chunks] == [(3 + k, H, 2)] * 5
        assert all(torch.all(c == 100 * k + r) for r, c in enumerate(chunks))  # own rows, own order
    batcher.close()
    with pytest.raises(RuntimeError, match="closed"):
        batcher({"x": torch.zeros(1, 2)}, torch.arange(1))


def test_max_rows_max_wait_structures_and_errors():
    model = Recording(delay_s=0.05)
    batcher = BatchingChunkModel(model, BatchingCfg(max_wait_s=0.02, max_rows=8))
    for client in "abc":
        batcher.register_client(client)
    start = time.perf_counter()
    assert torch.all(batcher({"x": torch.ones(2, 2)}, torch.arange(2)) == 1)  # one of 3 clients: max_wait_s
    assert 0.02 <= time.perf_counter() - start < 1.0
    model.delay_s, model.batches = 0.2, []
    first = batcher.submit({"x": torch.ones(1, 2)}, torch.arange(1))  # runs alone while the others queue
    time.sleep(0.05)
    futures = [batcher.submit({"x": torch.full((5, 2), 2.0)}, torch.arange(5)),
               batcher.submit({"x": torch.full((5, 2), 3.0)}, torch.arange(5)),  # max_rows 8: next call
               batcher.submit({"x": torch.full((1, 3), 4.0)}, torch.arange(1))]  # another row shape
    assert torch.all(first.result(5) == 1)
    assert [f.result(5)[0, 0, 0].item() for f in futures] == [2.0, 3.0, 4.0]
    assert model.batches == [1, 5, 5, 1]
    model.delay_s = 0.0
    for client in "ab":  # both waited for: one call
        batcher.register_client(client)
    bad = [batcher.submit({"x": torch.full((1, 2), v)}, torch.arange(1), c) for v, c in ((-1.0, "a"), (5.0, "b"))]
    for future in bad:  # both requests of the failing call get its error
        with pytest.raises(ValueError, match="negative observation"):
            future.result(5)
    assert torch.all(batcher({"x": torch.ones(1, 2)}, torch.arange(1)) == 1)  # the worker lives on
    # a malformed request is refused at submit, so it can neither fail nor shift the rows of a shared call
    calls = len(model.batches)
    with pytest.raises(ValueError, match="'x' must have one row per env id \\(2\\), got shape \\(3, 2\\)"):
        batcher.submit({"x": torch.ones(3, 2)}, torch.arange(2))
    with pytest.raises(ValueError, match="env_ids must be a 1-D integer tensor, got torch.float32"):
        batcher.submit({"x": torch.ones(2, 2)}, torch.arange(2.0))
    assert len(model.batches) == calls
    batcher.close()


def test_a_client_that_sends_nothing_costs_at_most_patience_waits():
    """A connected client that never sends (only a ``hello``) is waited for in PATIENCE batches, then not until
    its first request; from then on it is waited for until it leaves."""
    model = Recording()
    batcher = BatchingChunkModel(model, BatchingCfg(max_wait_s=0.3))
    batcher.register_client("busy")
    batcher.register_client("silent")
    waits = []
    for _ in range(PATIENCE + 3):
        start = time.perf_counter()
        batcher.submit({"x": torch.ones(1, 2)}, torch.arange(1), "busy").result(5)
        waits.append(time.perf_counter() - start)
    assert all(w >= 0.3 for w in waits[:PATIENCE]) and all(w < 0.25 for w in waits[PATIENCE:]), waits
    silent = batcher.submit({"x": torch.ones(1, 2)}, torch.arange(1), "silent")  # back: waited for again
    assert silent.result(5).shape == (1, H, 2)
    start = time.perf_counter()
    batcher.submit({"x": torch.ones(1, 2)}, torch.arange(1), "busy").result(5)
    assert time.perf_counter() - start >= 0.3
    batcher.forget_client("silent")  # gone: not waited for
    start = time.perf_counter()
    batcher.submit({"x": torch.ones(1, 2)}, torch.arange(1), "busy").result(5)
    assert time.perf_counter() - start < 0.25
    batcher.close()


def test_policy_server_batches_its_clients():
    """Four clients of one PolicyServer (one connection each): one model call per round with batching, four
    without, the same chunks either way."""
    for batching, calls_per_round in ((BatchingCfg(max_wait_s=5.0), 1), (None, 4)):
        model = Recording()
        with PolicyServer(model, PolicyServerCfg(port=0, chunk_length=H, batching=batching)) as server:
            host, port = server.address
            clients = [RemoteChunkModel(RemoteChunkModelCfg(host=host, port=port)) for _ in range(4)]
            results = _clients_in_threads(lambda rows, ids: clients[int(rows["x"].shape[0]) - 3](rows, ids), 4, 3)
            for client in clients:
                client.close()
        assert len(model.batches) == 3 * calls_per_round
        for k, chunks in enumerate(results):
            assert all(c.shape == (3 + k, H, 2) and torch.all(c == 100 * k + r) for r, c in enumerate(chunks))
