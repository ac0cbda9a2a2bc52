"""Host syncs of a chunking loop: the steps that must not read the device, predicted from what the loop knows on
the host before the step, and guards that fail on a sync (a spy on the CPU, CUDA's sync debug mode on a GPU)."""

import contextlib

import torch

from isaaclab_suspend.policies import ActionChunkingPolicy

SYNC_METHODS = ("__bool__", "__int__", "__float__", "__index__", "item", "tolist", "nonzero", "numpy", "cpu")
"""Tensor methods that copy a value to the host (``cpu`` too: a device-to-host copy on a GPU)."""
SYNC_FUNCTIONS = ("equal", "allclose", "is_nonzero")
"""torch functions that return a Python bool read from the device."""


@contextlib.contextmanager
def spy_forbids_syncs():
    """Fail on any :data:`SYNC_METHODS` or :data:`SYNC_FUNCTIONS` call while inside (the CPU stand-in for CUDA's
    sync debug mode)."""
    originals = [(torch.Tensor, name, getattr(torch.Tensor, name)) for name in SYNC_METHODS]
    originals += [(torch, name, getattr(torch, name)) for name in SYNC_FUNCTIONS]

    def forbidden(name):
        def call(*args, **kwargs):
            raise AssertionError(f"host sync: {name}()")

        return call

    for owner, name, _ in originals:
        setattr(owner, name, forbidden(f"{owner.__name__}.{name}"))
    try:
        yield
    finally:
        for owner, name, original in originals:
            setattr(owner, name, original)


@contextlib.contextmanager
def cuda_forbids_syncs():
    """CUDA raises on any synchronising operation (device-to-host copy, stream sync) while inside."""
    torch.cuda.set_sync_debug_mode("error")
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode("default")


def check_quiet_steps(env, model, schedule: str, chunk_length: int, steps: int, forbid_syncs) -> int:
    """Run ``schedule`` for ``steps`` steps and call act() and observe() of every step predicted quiet inside
    ``forbid_syncs()``; returns the number of quiet steps.

    A step is quiet unless it is a tick (every H steps; under ``async`` every H - d steps, where the chunk
    computed in the background is collected; its launch steps are quiet), an env's queue runs out at it
    (``any``, ``partial_batch``), or the step before it reset an env or merged a chunk (the policy then
    re-reads its host mirror of the queues).
    """
    policy = ActionChunkingPolicy(model, env, chunk_length=chunk_length, schedule=schedule)
    period = chunk_length
    if schedule == "async":
        period -= policy.schedule.lead(chunk_length, policy.queues.refill_at)
    obs, _ = env.reset()
    policy.reset()
    runs_out = [0] * env.num_envs  # step at which each env's queue is empty
    previous_eventful, quiet = True, 0
    for step in range(steps):
        is_quiet = not previous_eventful and step % period != 0
        if schedule in ("any", "partial_batch"):
            is_quiet &= step < min(runs_out)
        with forbid_syncs() if is_quiet else contextlib.nullcontext():
            actions = policy.act(obs)
        obs, _, terminated, truncated, _ = env.step(actions)
        dones = terminated | truncated
        with forbid_syncs() if is_quiet else contextlib.nullcontext():
            policy.observe(dones)
        served = policy.last_step.served
        if served is not None:
            for i in served.nonzero().flatten().tolist():
                runs_out[i] = step + chunk_length
        previous_eventful = served is not None or bool(dones.any())
        quiet += is_quiet
    policy.close()
    return quiet
