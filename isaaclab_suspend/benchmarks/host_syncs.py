"""Host-device synchronisations of a step loop: counted or forbidden, and predicted from what the chunking loop
knows on the host before a step.

On a GPU, torch's own synchronisations are CUDA's (``torch.cuda.set_sync_debug_mode``: a device-to-host copy, a
stream sync); on the CPU nothing synchronises, so the tensor methods that would (:data:`SYNC_METHODS`,
:data:`SYNC_FUNCTIONS`) are spied on instead. Warp's synchronising calls (:data:`WARP_SYNCS`: ``wp.synchronize*``,
``array.numpy`` / ``array.list``) are spied on, on both.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import math
import os
import sys
import warnings
from collections.abc import Callable, Iterator

import torch
import warp as wp

from ..chunking import ActionChunkingPolicy

SYNC_METHODS = ("__bool__", "__int__", "__float__", "__index__", "item", "tolist", "nonzero", "numpy", "cpu")
"""Tensor methods that copy a value to the host (``cpu`` too: a device-to-host copy on a GPU)."""
SYNC_FUNCTIONS = ("equal", "allclose", "is_nonzero")
"""torch functions that return a Python bool read from the device."""
WARP_SYNCS = (
    (wp, ("synchronize", "synchronize_device", "synchronize_stream", "synchronize_event")),
    (wp.array, ("numpy", "list")),
)
"""Warp's synchronising calls, by owner: the module's ``synchronize*`` and the array's copies to the host."""


@contextlib.contextmanager
def spy_syncs(on_sync: Callable[[str], None], torch_methods: bool = True) -> Iterator[None]:
    """Call ``on_sync(name)`` before every call of Warp's :data:`WARP_SYNCS` and, with ``torch_methods``, of
    :data:`SYNC_METHODS` and :data:`SYNC_FUNCTIONS`, inside the block; the call then goes through (unless
    ``on_sync`` raises)."""
    owners = list(WARP_SYNCS)
    if torch_methods:
        owners += [(torch.Tensor, SYNC_METHODS), (torch, SYNC_FUNCTIONS)]
    originals = [(owner, name, getattr(owner, name)) for owner, names in owners for name in names]

    def spy(label, original):
        def call(*args, **kwargs):
            on_sync(label)
            return original(*args, **kwargs)

        return call

    for owner, name, original in originals:
        setattr(owner, name, spy(f"{owner.__name__}.{name}", original))
    try:
        yield
    finally:
        for owner, name, original in originals:
            setattr(owner, name, original)


def _raise(label: str) -> None:
    raise AssertionError(f"host sync: {label}()")


@contextlib.contextmanager
def forbid_syncs(device: str) -> Iterator[None]:
    """Raise on any host sync inside the block: CUDA's sync debug mode set to ``error`` (and Warp's calls spied
    on) on a GPU, the spy on :data:`SYNC_METHODS` on the CPU."""
    if str(device).startswith("cuda"):
        with _sync_debug_mode("error"), spy_syncs(_raise, torch_methods=False):
            yield
    else:
        with spy_syncs(_raise):
            yield


@contextlib.contextmanager
def _sync_debug_mode(mode: str) -> Iterator[None]:
    torch.cuda.set_sync_debug_mode(mode)
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode("default")


@dataclasses.dataclass
class SyncCount:
    """Host syncs counted by :func:`count_syncs`."""

    torch: int = 0
    """torch's: CUDA's synchronising calls on a GPU, the :data:`SYNC_METHODS` calls on the CPU."""
    warp: int = 0
    """Warp's :data:`WARP_SYNCS` calls."""
    sites: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    """Syncs per place in the Python code that made them (``folder/module.py:line``)."""

    @property
    def total(self) -> int:
        return self.torch + self.warp

    def add(self, other: SyncCount) -> None:
        self.torch, self.warp = self.torch + other.torch, self.warp + other.warp
        self.sites.update(other.sites)


def _site(filename: str, lineno: int) -> str:
    return f"{'/'.join(filename.split(os.sep)[-2:])}:{lineno}"


@contextlib.contextmanager
def count_syncs(device: str) -> Iterator[SyncCount]:
    """Count the host syncs inside the block (see :class:`SyncCount`). On a GPU torch's are the warnings of CUDA's
    sync debug mode set to ``warn``."""
    count = SyncCount()

    def on_sync(label: str) -> None:
        if label.startswith(("warp", "array")):
            count.warp += 1
        else:
            count.torch += 1
        caller = sys._getframe(2)  # on_sync <- the spy <- the code that synchronised
        count.sites[_site(caller.f_code.co_filename, caller.f_lineno)] += 1

    cuda = str(device).startswith("cuda")
    with contextlib.ExitStack() as stack:
        if cuda:
            caught = stack.enter_context(warnings.catch_warnings(record=True))
            warnings.simplefilter("always")
            stack.enter_context(_sync_debug_mode("warn"))
        stack.enter_context(spy_syncs(on_sync, torch_methods=not cuda))
        yield count
    if cuda:
        for w in caught:
            if "synchroniz" in str(w.message):
                count.torch += 1
                count.sites[_site(w.filename, w.lineno)] += 1


def fire_interval_events(env) -> None:
    """Fire every interval event term once in every env (``interval`` mode with an infinite time step), so that
    the steps counted after see no term's first call: Isaac Lab's samplers upload their bounds to the device at
    their first call and cache them (``isaaclab/utils/math.py``, ``_cached_uniform_bounds``), a host-to-device
    copy that otherwise lands in whichever step first fires the term."""
    if "interval" in env.event_manager.active_terms:
        env.event_manager.apply(mode="interval", dt=math.inf)


def run_chunk_loop(
    env,
    model,
    schedule: str,
    chunk_length: int,
    steps: int,
    watch: Callable[[bool], contextlib.AbstractContextManager],
    retired: torch.Tensor | None = None,
) -> int:
    """Run ``schedule`` for ``steps`` steps, each ``act()`` and ``observe()`` inside ``watch(quiet)``, where
    ``quiet`` is predicted from the host before the step; returns the number of quiet steps.

    A step is quiet unless it is a tick (every H steps; under ``async`` every H - d steps, where the chunk
    computed in the background is collected; its launch steps are quiet), an env's queue runs out at it
    (``any``, ``partial_batch``), or the step before it reset an env or merged a chunk (the policy then
    re-reads its host mirror of the queues). ``retired`` (bool, shape (N,)) envs are taken out of the run
    after the reset (suspended under the schedules that suspend).
    """
    policy = ActionChunkingPolicy(model, env, chunk_length=chunk_length, schedule=schedule)
    period = chunk_length
    if schedule == "async":
        period -= policy.schedule.lead(chunk_length, policy.queues.refill_at)
    obs, _ = env.reset()
    policy.reset()
    if retired is not None:
        policy.retire(retired)
    live = range(env.num_envs) if retired is None else (~retired).nonzero().flatten().tolist()
    runs_out = [0] * env.num_envs  # step at which each env's queue is empty
    previous_eventful, quiet = True, 0
    for step in range(steps):
        is_quiet = not previous_eventful and step % period != 0
        if schedule in ("any", "partial_batch"):
            is_quiet &= step < min(runs_out[i] for i in live)
        with watch(is_quiet):
            actions = policy.act(obs)
        obs, _, terminated, truncated, _ = env.step(actions)
        dones = terminated | truncated
        with watch(is_quiet):
            policy.observe(dones)
        served = policy.last_step.served
        if served is not None:
            for i in served.nonzero().flatten().tolist():
                runs_out[i] = step + chunk_length
        previous_eventful = served is not None or bool(dones.any())
        quiet += is_quiet
    policy.close()
    return quiet


def check_quiet_steps(env, model, schedule: str, chunk_length: int, steps: int) -> int:
    """:func:`run_chunk_loop` with every host sync of a quiet step raising (:func:`forbid_syncs`); returns the
    number of quiet steps."""
    return run_chunk_loop(
        env, model, schedule, chunk_length, steps,
        lambda quiet: forbid_syncs(env.device) if quiet else contextlib.nullcontext(),
    )
