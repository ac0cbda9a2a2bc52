"""A counter-based random generator with one stream per env and episode, and the routing of torch's samplers to it.

Every value drawn for env ``i`` is a counter-based hash, SplitMix64's mixer over Weyl sequences, nested:

* ``env_key = mix(seed_key + i * gamma)``, with ``seed_key`` a 64-bit hash of the seed;
* ``episode_key = mix(env_key + k * gamma)`` for env ``i``'s ``k``-th episode (its reset count);
* two streams per episode: the **reset stream** ``mix(episode_key)``, drawn from while the env is being reset
  (reset events, the first interval timers, the first command, ...), and the **step streams**
  ``mix(episode_key + (s + 1) * gamma)``, drawn from by everything else at the env's ``s``-th active step of the
  episode (interval events, command resampling, observation noise and delays);
* the value at position ``p`` of a stream is ``mix(stream_key + p * gamma)``, a draw taking the positions
  ``offset + [0, m)`` with ``offset`` a hash of (the drawing term, the draw's index within the term's call); a
  float32 takes only the top bits, which the mixer's last step leaves alone.

So what env ``i`` is handed depends on (seed, ``i``, episode ``k``, step ``s`` of that episode, the term), never
on the global step, on the other envs or on how long its earlier episodes ran: the ``k``-th episode of env ``i``
starts from the same state whatever the policy, and a suspended env, whose counters stand still, draws after its
resume what it would have drawn. Everything is vectorised over envs in integer torch ops on the env device,
without a host sync.

While a :func:`PerEnvGenerator.route` block is active, ``torch.rand``, ``randn``, ``randint``, ``rand_like``,
``randn_like``, ``randint_like``, ``normal`` and ``Tensor.uniform_`` / ``normal_`` (so also Isaac Lab's
``sample_uniform``, ``sample_log_uniform``, ``sample_gaussian``, ...) draw from it: a draw whose leading dim has one
row per env id of the block, or one per env, takes those envs' streams. Other draws (another leading dim, an
explicit ``generator`` or ``out``) keep torch's generator and are reported. The samplers are patched once per
process; outside a block they call torch's own, unchanged, and blocks are per thread.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import sys
import threading
from collections.abc import Callable, Iterator, Sequence

import torch

logger = logging.getLogger(__name__)

_GAMMA = 0x9E3779B97F4A7C15
"""SplitMix64's increment between consecutive positions of a stream."""
_M1, _M2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
"""SplitMix64's mixer multipliers."""
_POSITIONS = 1 << 20
"""Positions a draw may take per env row; a draw's offset is a multiple of it."""


def _s64(x: int) -> int:
    """``x`` as a signed 64-bit value (torch's int64), wrapping."""
    x &= (1 << 64) - 1
    return x - (1 << 64) if x >> 63 else x


def _mix_int(x: int) -> int:
    """SplitMix64's mixer on a Python int (unsigned 64-bit)."""
    x &= (1 << 64) - 1
    x = ((x ^ (x >> 30)) * _M1) & ((1 << 64) - 1)
    x = ((x ^ (x >> 27)) * _M2) & ((1 << 64) - 1)
    return x ^ (x >> 31)


def _mix_(x: torch.Tensor, full: bool = True) -> torch.Tensor:
    """SplitMix64's mixer in place on an int64 tensor (logical shifts as arithmetic shift and mask). Without
    ``full`` the last xorshift is left out: it changes only the low 33 bits, so the top 31 are the same."""
    for shift, mult in ((30, _M1), (27, _M2), (31, None)):
        if mult is None and not full:
            break
        t = x >> shift
        t &= (1 << (64 - shift)) - 1
        x ^= t
        if mult is not None:
            x *= _s64(mult)
    return x


def stable_hash(name: str) -> int:
    """A 64-bit hash of ``name`` that is the same in every process (Python's ``hash`` of a str is not)."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "little")


class PerEnvGenerator:
    """Per-env counter-based random streams (see the module docstring).

    The owner advances the counters: :meth:`advance` once per env step (active envs only), and each reset of envs
    runs inside :meth:`resetting` (their episode counts grow by one, their step counts restart at 0, and their
    draws come from the new episode's reset stream).
    """

    def __init__(self, seed: int, num_envs: int, device: str | torch.device):
        self.seed = seed
        self.num_envs = num_envs
        self.device = torch.device(device)
        self.steps = torch.zeros(num_envs, dtype=torch.int64, device=self.device)
        """Active steps of each env in its current episode (0 from its reset). Shape: (num_envs,)."""
        self.resets = torch.zeros(num_envs, dtype=torch.int64, device=self.device)
        """Resets of each env since the env was built: the index of its current episode. Shape: (num_envs,)."""
        self._keys: dict[bool, torch.Tensor] = {}  # stream keys (num_envs, 1) by resetting, until a counter moves
        self.restart(seed)
        self._positions: dict[tuple[int, int], torch.Tensor] = {}
        self._offsets: dict[tuple[str, int], int] = {}
        self.resetting_now = False
        """Whether the envs are being reset (draws then come from their episodes' reset streams)."""
        self.drawn: dict[str, int] | None = None
        """If a dict: the number of blocks that drew, by name (the audit's record of who drew)."""
        self.unmapped: dict[str, str] = {}
        """Blocks that made a draw no env row maps to (torch's generator served it), with the draw."""

    """
    Counters.
    """

    def restart(self, seed: int) -> None:
        """Key the streams by ``seed`` and start counting every env's episodes and steps again from 0 (an env's
        ``reset(seed=...)``): the k-th episode after it draws the same whatever ran before."""
        self.seed = seed
        env_key = torch.arange(self.num_envs, dtype=torch.int64, device=self.device) * _s64(_GAMMA)
        self._env_key = _mix_(env_key + _s64(_mix_int(stable_hash(f"seed {seed}"))))
        self.steps.zero_()
        self.resets.zero_()
        self._keys.clear()

    def advance(self, active: torch.Tensor | None = None) -> None:
        """One env step: the active envs (bool, (num_envs,); None: all) count one more step."""
        if active is None:
            self.steps += 1
        else:
            self.steps += active
        self._keys.clear()

    @contextlib.contextmanager
    def resetting(self, env_ids: torch.Tensor | slice | Sequence[int] | None) -> Iterator[None]:
        """A reset of ``env_ids``: they start a new episode (reset count one more, step count 0) before the reset
        draws, which the block takes from the new episode's reset stream."""
        rows = slice(None) if env_ids is None else env_ids
        self.resets[rows] += 1
        self.steps[rows] = 0
        self._keys.clear()
        previous, self.resetting_now = self.resetting_now, True
        try:
            yield
        finally:
            self.resetting_now = previous

    def note_unmapped(self, name: str, draw: str) -> None:
        """Record (and at its first, name in a warning) a draw of block ``name`` that no env row maps to."""
        if name not in self.unmapped:
            logger.warning("Per-env random streams: %s made a draw no env row maps to (%s); torch's shared generator"
                           " served it, so it is not per-env: draw with a leading dim of one row per env id it is"
                           " called with, or one per env", name, draw)
        self.unmapped.setdefault(name, draw)

    """
    Draws.
    """

    def rows(self, env_ids: torch.Tensor | slice | Sequence[int] | None) -> torch.Tensor | None:
        """``env_ids`` as int64 indices on the device, or None for all envs in order."""
        if env_ids is None or (isinstance(env_ids, slice) and env_ids == slice(None)):
            return None
        if isinstance(env_ids, slice):
            return torch.arange(self.num_envs, device=self.device)[env_ids]
        if isinstance(env_ids, torch.Tensor):
            return env_ids.to(device=self.device, dtype=torch.int64).reshape(-1)
        return torch.as_tensor(list(env_ids), dtype=torch.int64, device=self.device)

    def stream_keys(self, resetting: bool) -> torch.Tensor:
        """The key of each env's current stream: its episode's reset stream if ``resetting``, else the stream of
        its current step in the episode (see the module docstring). Shape: (num_envs,), int64."""
        episode = _mix_(self._env_key + self.resets * _s64(_GAMMA))
        return _mix_(episode if resetting else episode.add_((self.steps + 1) * _s64(_GAMMA)))

    def bits(self, rows: torch.Tensor | None, m: int, offset: int, full: bool = True) -> torch.Tensor:
        """Random int64 values at positions ``offset + [0, m)`` of the current streams of ``rows`` (None: all envs);
        without ``full`` only their top 31 bits are random. Shape: (rows, m)."""
        key = self._keys.get(self.resetting_now)
        if key is None:  # once per step (and per reset) that draws
            key = self._keys[self.resetting_now] = self.stream_keys(self.resetting_now).unsqueeze(1)
        key = key if rows is None else key.index_select(0, rows)
        positions = self._positions.get((m, offset))
        if positions is None:  # a few per term and shape, made once
            positions = (torch.arange(m, dtype=torch.int64, device=self.device) + offset) * _s64(_GAMMA)
            self._positions[(m, offset)] = positions
        return _mix_(key + positions, full)

    def offset(self, name: str, index: int) -> int:
        """First stream position of the ``index``-th draw of block ``name``."""
        key = (name, index)
        offset = self._offsets.get(key)
        if offset is None:
            offset = _mix_int(stable_hash(f"{name}/{index}")) & ~(_POSITIONS - 1)
            self._offsets[key] = offset
        return offset

    @contextlib.contextmanager
    def route(self, name: str, env_ids: torch.Tensor | slice | Sequence[int] | None = None) -> Iterator[None]:
        """Route torch's samplers to the streams of ``env_ids`` (None: all envs) while in the block."""
        install()
        block = _Block(self, name, self.rows(env_ids))
        stack = _stack()
        stack.append(block)
        try:
            yield
        finally:
            stack.pop()
            if block.draws and self.drawn is not None:
                self.drawn[name] = self.drawn.get(name, 0) + 1

    def uniform(self, rows: torch.Tensor | None, shape: Sequence[int], name: str, index: int = 0,
                dtype: torch.dtype | None = None) -> torch.Tensor:
        """Uniform values in [0, 1) of ``shape`` whose leading dim is the rows' (float32 from 24 bits, float64
        from 53)."""
        dtype = dtype or torch.get_default_dtype()
        full = dtype == torch.float64
        z = self.bits(rows, math.prod(shape[1:]), self.offset(name, index), full)
        if full:
            u = ((z >> 11) & ((1 << 53) - 1)).to(torch.float64).mul_(2.0**-53)
        else:  # the top 24 bits, as a signed value in [-2^23, 2^23)
            u = (z >> 40).to(torch.float32).mul_(2.0**-24).add_(0.5)
        return _shaped(u, shape, dtype)

    def normal(self, rows: torch.Tensor | None, shape: Sequence[int], name: str, index: int = 0,
               dtype: torch.dtype | None = None) -> torch.Tensor:
        """Standard normal values of ``shape``: the inverse normal CDF of 24-bit uniforms at bin centres
        (``|x| <= 5.3``)."""
        z = self.bits(rows, math.prod(shape[1:]), self.offset(name, index), full=False)
        u = (z >> 40).to(torch.float32).add_(0.5).mul_(2.0**-24).add_(0.5)
        return _shaped(torch.special.ndtri(u), shape, dtype or torch.get_default_dtype())


def _shaped(x: torch.Tensor, shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
    """``x`` (rows, m) in ``dtype`` and ``shape``, without ops where nothing changes."""
    if x.dtype != dtype:
        x = x.to(dtype)
    return x if x.shape == tuple(shape) else x.view(tuple(shape))


class _Block:
    """One active :meth:`PerEnvGenerator.route` block: its rows and the draws made so far."""

    __slots__ = ("generator", "name", "rows", "num_rows", "draws")

    def __init__(self, generator: PerEnvGenerator, name: str, rows: torch.Tensor | None):
        self.generator = generator
        self.name = name
        self.rows = rows
        self.num_rows = generator.num_envs if rows is None else rows.shape[0]
        self.draws = 0

    def map(self, shape: Sequence[int], what: str) -> torch.Tensor | None | bool:
        """The rows a draw of ``shape`` takes (None: all envs), or False if none maps (then it is recorded)."""
        if len(shape) > 0 and shape[0] == self.num_rows:
            return self.rows
        if len(shape) > 0 and shape[0] == self.generator.num_envs:
            return None
        self.generator.note_unmapped(self.name, f"{what} of shape {tuple(shape)}")
        return False

    def draw(self, kind: str, shape: Sequence[int], dtype: torch.dtype | None, what: str) -> torch.Tensor | None:
        """A ``kind`` ('uniform' or 'normal') draw of ``shape``, or None if no env row maps to it."""
        rows = self.map(shape, what)
        if rows is False or math.prod(shape[1:]) >= _POSITIONS:
            return None
        sample = getattr(self.generator, kind)(rows, shape, self.name, self.draws, dtype)
        self.draws += 1
        return sample


_LOCAL = threading.local()


def _stack() -> list[_Block]:
    stack = getattr(_LOCAL, "stack", None)
    if stack is None:
        stack = _LOCAL.stack = []
    return stack


def active_block() -> _Block | None:
    """The innermost routing block of this thread, or None."""
    stack = getattr(_LOCAL, "stack", None)
    return stack[-1] if stack else None


@contextlib.contextmanager
def watching(callback: Callable[[str], None]) -> Iterator[None]:
    """In the block, a draw from torch's generator outside any routing block calls ``callback(sampler name)``
    first (this thread only)."""
    install()
    previous = getattr(_LOCAL, "watch", None)
    _LOCAL.watch = callback
    try:
        yield
    finally:
        _LOCAL.watch = previous


def _unrouted(name: str) -> None:
    """A draw outside any routing block: tell the watcher, if any."""
    watch = getattr(_LOCAL, "watch", None)
    if watch is not None:
        watch(name)


"""
Torch's samplers, routed.
"""

ORIGINAL: dict[str, Callable] = {}
"""Torch's own samplers, by name, once :func:`install` has patched them."""
ROUTED_FACTORIES = ("rand", "randn", "randint", "rand_like", "randn_like", "randint_like", "normal")
"""The ``torch`` functions routed (besides ``Tensor.uniform_`` and ``Tensor.normal_``)."""
_FACTORY_KWARGS = {"dtype", "device", "requires_grad", "layout", "pin_memory"}


def _size(args: tuple, kwargs: dict) -> tuple[int, ...] | None:
    size = kwargs.pop("size", None)
    if size is None:
        size = args[0] if len(args) == 1 and isinstance(args[0], (tuple, list, torch.Size)) else args
    try:
        return tuple(int(s) for s in size)
    except (TypeError, ValueError):
        return None


def _finish(sample: torch.Tensor, kwargs: dict) -> torch.Tensor:
    device = kwargs.get("device")
    if device is not None and torch.device(device) != sample.device:
        sample = sample.to(device)
    if kwargs.get("requires_grad"):
        sample.requires_grad_(True)
    return sample


def _plain(kwargs: dict) -> bool:
    """Whether a factory call has only arguments the streams honour (no ``generator``, ``out``, ...)."""
    return kwargs.keys() <= _FACTORY_KWARGS and kwargs.get("layout", torch.strided) == torch.strided


def _factory(kind: str, name: str) -> Callable:
    original = ORIGINAL[name]

    def sampler(*args, **kwargs):
        block = active_block()
        if block is None:
            _unrouted(name)
            return original(*args, **kwargs)
        size = _size(args, dict(kwargs)) if _plain({k: v for k, v in kwargs.items() if k != "size"}) else None
        if size is not None:
            sample = block.draw(kind, size, kwargs.get("dtype"), f"torch.{name}")
            if sample is not None:
                return _finish(sample, kwargs)
        else:
            block.generator.note_unmapped(block.name, f"torch.{name} with {sorted(kwargs)}")
        return original(*args, **kwargs)

    sampler.__name__ = sampler.__qualname__ = name
    sampler.__doc__ = original.__doc__
    return sampler


def _like(kind: str, name: str) -> Callable:
    original = ORIGINAL[name]

    def sampler(input, *args, **kwargs):
        block = active_block()
        if block is None:
            _unrouted(name)
        if block is None or args or not _plain(kwargs) or not input.is_floating_point():
            return original(input, *args, **kwargs)
        sample = block.draw(kind, input.shape, kwargs.get("dtype") or input.dtype, f"torch.{name}")
        if sample is None:
            return original(input, *args, **kwargs)
        return _finish(sample, {"device": kwargs.get("device", input.device), **kwargs})

    sampler.__name__ = sampler.__qualname__ = name
    sampler.__doc__ = original.__doc__
    return sampler


def _integers(low: int, high: int, u: torch.Tensor, dtype: torch.dtype | None) -> torch.Tensor:
    return u.mul_(high - low).floor_().add_(low).to(dtype or torch.int64)


def _randint(*args, **kwargs):
    block = active_block()
    original = ORIGINAL["randint"]
    if block is None:
        _unrouted("randint")
        return original(*args, **kwargs)
    kw = dict(kwargs)
    values = list(args)
    size = kw.pop("size", None)
    if size is None and values and isinstance(values[-1], (tuple, list, torch.Size)):
        size = values.pop()
    low, high = (0, values[0]) if len(values) == 1 else tuple(values) if len(values) == 2 else (None, None)
    low, high = kw.pop("low", low), kw.pop("high", high)
    if size is None or high is None or not _plain(kw):
        block.generator.note_unmapped(block.name, f"torch.randint with {sorted(kwargs)}")
        return original(*args, **kwargs)
    u = block.draw("uniform", tuple(int(s) for s in size), torch.float64, "torch.randint")
    if u is None:
        return original(*args, **kwargs)
    return _finish(_integers(int(low), int(high), u, kw.get("dtype")), kw)


def _randint_like(input, *args, **kwargs):
    block = active_block()
    original = ORIGINAL["randint_like"]
    kw = dict(kwargs)
    values = list(args)
    low, high = (0, values[0]) if len(values) == 1 else tuple(values) if len(values) == 2 else (None, None)
    low, high = kw.pop("low", low), kw.pop("high", high)
    if block is None:
        _unrouted("randint_like")
    if block is None or high is None or not _plain(kw):
        return original(input, *args, **kwargs)
    u = block.draw("uniform", input.shape, torch.float64, "torch.randint_like")
    if u is None:
        return original(input, *args, **kwargs)
    return _finish(_integers(int(low), int(high), u, kw.get("dtype") or input.dtype), {"device": input.device, **kw})


def _normal(*args, **kwargs):
    """``torch.normal(mean, std[, size])``, tensors or numbers, as ``mean + std * randn``."""
    block = active_block()
    original = ORIGINAL["normal"]
    if block is None:
        _unrouted("normal")
        return original(*args, **kwargs)
    kw = dict(kwargs)
    values = list(args)
    mean = kw.pop("mean", values.pop(0) if values else 0.0)
    std = kw.pop("std", values.pop(0) if values else 1.0)
    size = kw.pop("size", values.pop(0) if values else None)
    if values or not _plain(kw):
        return original(*args, **kwargs)
    tensors = [t for t in (mean, std) if isinstance(t, torch.Tensor)]
    shape = tuple(size) if size is not None else torch.broadcast_shapes(*(t.shape for t in tensors))
    dtype = kw.get("dtype") or (tensors[0].dtype if tensors else None)
    x = block.draw("normal", shape, dtype, "torch.normal")
    if x is None:
        return original(*args, **kwargs)
    x = _finish(x, {"device": tensors[0].device if tensors else None, **kw})
    return x.mul_(std).add_(mean) if not isinstance(std, torch.Tensor) else (x * std).add_(mean)


def _uniform_(self, *args, **kwargs):
    block = active_block()
    if block is None:
        _unrouted("Tensor.uniform_")
    if block is None or "generator" in kwargs or not self.is_floating_point():
        return ORIGINAL["uniform_"](self, *args, **kwargs)
    low = args[0] if args else kwargs.get("from", 0.0)
    high = args[1] if len(args) > 1 else kwargs.get("to", 1.0)
    u = block.draw("uniform", self.shape, self.dtype, "Tensor.uniform_")
    if u is None:
        return ORIGINAL["uniform_"](self, *args, **kwargs)
    return self.copy_(u.mul_(high - low).add_(low))


def _normal_(self, *args, **kwargs):
    block = active_block()
    if block is None:
        _unrouted("Tensor.normal_")
    if block is None or "generator" in kwargs or not self.is_floating_point():
        return ORIGINAL["normal_"](self, *args, **kwargs)
    mean = args[0] if args else kwargs.get("mean", 0.0)
    std = args[1] if len(args) > 1 else kwargs.get("std", 1.0)
    x = block.draw("normal", self.shape, self.dtype, "Tensor.normal_")
    if x is None:
        return ORIGINAL["normal_"](self, *args, **kwargs)
    return self.copy_(x.mul_(std).add_(mean))


_INSTALL_LOCK = threading.Lock()


def install() -> None:
    """Patch torch's samplers once per process (outside a routing block they call the originals)."""
    if ORIGINAL:
        return
    with _INSTALL_LOCK:
        if ORIGINAL:
            return
        for name in ROUTED_FACTORIES:
            ORIGINAL[name] = getattr(torch, name)
        ORIGINAL["uniform_"] = torch.Tensor.uniform_
        ORIGINAL["normal_"] = torch.Tensor.normal_
        torch.rand = _factory("uniform", "rand")
        torch.randn = _factory("normal", "randn")
        torch.rand_like = _like("uniform", "rand_like")
        torch.randn_like = _like("normal", "randn_like")
        torch.randint = _randint
        torch.randint_like = _randint_like
        torch.normal = _normal
        torch.Tensor.uniform_ = _uniform_
        torch.Tensor.normal_ = _normal_
        logger.debug("torch's samplers routed to per-env streams inside routing blocks (%s)", sys.argv[0])
