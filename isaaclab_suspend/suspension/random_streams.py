"""Per-env random streams of an env: which of its terms draw from them, and which cannot.

Isaac Lab draws every random number from torch's one generator, in batches over the envs: a suspended env that skips
a draw shifts every later draw of the others, and is handed other numbers after it resumes. With
:attr:`SuspendCfg.per_env_random`, :class:`RandomStreams` routes each drawing term's samplers to a
:class:`~isaaclab_suspend.suspension.per_env_rng.PerEnvGenerator` while the term runs, with the term's env ids as
rows: observation noise (``NoiseCfg`` functions and ``NoiseModel`` instances), random observation delays
(``DelayBuffer``), event terms in every mode and the event manager's interval timers, and command resampling
(``CommandTerm._resample``). An event term whose module draws from Python's ``random`` (Isaac Lab's stack tasks
place their cubes so) is called once per env id, with ``random`` seeded from that env's stream and its own state
restored after. What env ``i`` draws is then a function of (seed, ``i``, its episode, its active step in the episode,
the term); what it draws while reset, of (seed, ``i``, its episode, the term) alone. Terms it cannot
route are named at start-up with what to change, and a draw from torch's generator during a step outside the routed
terms is named in a warning once per call site.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import logging
import random
import re
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

import torch
from prettytable import PrettyTable

from isaaclab.managers import EventManager
from isaaclab.utils import noise

from . import per_env_rng
from .per_env_rng import PerEnvGenerator

if TYPE_CHECKING:
    from isaaclab.envs import ManagerBasedRLEnv

logger = logging.getLogger(__name__)

_UNROUTABLE = (
    (r"\bnp\.random\b|\bnumpy\.random\b", "draws from NumPy's generator: draw with torch.rand/randn/randint"),
    (r"\brandom\.(random|uniform|randint|choice|gauss|shuffle|sample)\(", "draws from Python's random module: draw"
     " with torch.rand/randn/randint"),
    (r"\bwp\.rand", "draws inside a Warp kernel with its own seed: draw the values with torch and pass them in"),
    (r"\brandom_(yaw_)?orientation\(", "calls a TorchScript sampler (isaaclab.utils.math.random_orientation),"
     " whose draws cannot be routed: sample the quaternion with torch.randn and normalise it"),
    (r"\b(randperm|multinomial|bernoulli|exponential_|geometric_|cauchy_|log_normal_|random_)\(",
     "uses a torch sampler the streams do not route: build it from torch.rand"),
    (r"\bgenerator\s*=", "passes its own torch generator: drop it"),
)
"""Source patterns of draws the streams cannot make per-env, with what to change."""

_PYTHON_RANDOM = re.compile(r"\brandom\.(random|uniform|randint|randrange|choice|choices|gauss|normalvariate|shuffle|"
                            r"sample|triangular)\(")
"""Calls of Python's ``random`` module in a term's module source: the term is then called once per env."""

_SAMPLER_FILES = ("isaaclab/utils/math.py", "suspension/per_env_rng.py")
"""Files of samplers that draw for their caller: a draw is named by the first frame outside them."""


class _Routed:
    """A term callable whose calls draw from the per-env streams; attributes are the wrapped term's.

    ``rows_arg`` is the position of the env ids among the call's arguments (None: all envs); an interval-mode
    event term also redraws its timer for the envs it fires for (:meth:`RandomStreams._retime`). With
    ``python_random`` (an event term whose module draws from Python's ``random``) the term is called once per env id
    (:meth:`_call_per_env`)."""

    def __init__(self, func, name: str, generator: PerEnvGenerator, rows_arg: int | None, rows_kw: str = "env_ids",
                 retime=None, python_random: bool = False):
        self.__wrapped__ = func
        self._name, self._generator, self._retime = name, generator, retime
        self._rows_arg, self._rows_kw = rows_arg, rows_kw
        self._python_random = python_random

    def __call__(self, *args, **kwargs):
        env_ids = None
        if self._rows_arg is not None:
            env_ids = args[self._rows_arg] if len(args) > self._rows_arg else kwargs.get(self._rows_kw)
        if self._python_random:
            return self._call_per_env(args, kwargs, env_ids)
        with self._generator.route(self._name, env_ids):
            if self._retime is not None:
                self._retime(env_ids)
            return self.__wrapped__(*args, **kwargs)

    def _call_per_env(self, args: tuple, kwargs: dict, env_ids) -> None:
        """Call the term once per env id, with Python's ``random`` seeded from a draw of that env's stream (its
        torch draws routed to it too), and ``random``'s own state restored after: a term that loops over its env ids
        drawing from ``random`` (Isaac Lab's ``randomize_object_pose``) then draws per env. Its env ids are read on
        the host, as such a term reads them itself."""
        gen = self._generator
        rows = gen.rows(env_ids)
        rows = torch.arange(gen.num_envs, device=gen.device) if rows is None else rows
        keys = gen.bits(rows, 1, gen.offset(f"{self._name}.python_random", 0)).view(-1).tolist()
        if self._retime is not None:
            with gen.route(self._name, rows):
                self._retime(rows)
        positional = self._rows_arg is not None and len(args) > self._rows_arg
        state = random.getstate()
        try:
            for row, key in zip(rows.split(1), keys):
                random.seed(key)
                if positional:
                    args = (*args[: self._rows_arg], row, *args[self._rows_arg + 1:])
                else:
                    kwargs[self._rows_kw] = row
                with gen.route(self._name, row):
                    self.__wrapped__(*args, **kwargs)
        finally:
            random.setstate(state)
        if gen.drawn is not None:  # the audit's record: it drew, from Python's random
            gen.drawn[self._name] = gen.drawn.get(self._name, 0) + 1

    def __getattr__(self, attr: str):
        try:
            wrapped = self.__dict__["__wrapped__"]
        except KeyError:  # not initialised yet (a copy being made)
            raise AttributeError(attr) from None
        return getattr(wrapped, attr)


class RandomStreams:
    """Owns an env's per-env random streams: routes its drawing terms to them and reports what it covers.

    Built in two parts because startup events draw before the other managers exist: :meth:`route_events` before
    Isaac Lab applies them, :meth:`route_managers` once every manager is built. The env calls :meth:`step` around
    each step (active envs count a step) and :meth:`resetting` around each reset.
    """

    def __init__(self, seed: int, num_envs: int, device: str):
        self.generator = PerEnvGenerator(seed, num_envs, device)
        """The per-env counter-based generator."""
        self.covered: list[tuple[str, str]] = []
        """(term, what is routed) of each term that draws per env."""
        self.not_per_env: list[tuple[str, str]] = []
        """(term, why and what to change) of each term the streams cannot make per-env."""
        self.unrouted: dict[str, int] = {}
        """Call sites that drew from torch's generator during a step outside the routed terms, with counts."""
        self._event_manager: EventManager | None = None
        self._scratch: dict[torch.device, torch.Generator] = {}
        self._events_routed = False
        per_env_rng.install()

    """
    Start-up.
    """

    def route_events(self, event_manager: EventManager) -> None:
        """Route the event manager before Isaac Lab applies the startup events: its terms are routed at its first
        ``apply`` or ``reset`` (once they are resolved), its timers drawn per env (``_retime``)."""
        em = self._event_manager = event_manager
        apply = em.apply
        reset = self._routed_method(em.reset, "event_manager.reset", 0)

        def routed_apply(mode: str, *args, **kwargs):
            """Interval timers are drawn before the fired env ids are known: a scratch generator serves that draw,
            and each fired term redraws its envs' timers from their streams."""
            if mode != "prestartup":
                self._route_event_terms()
            if mode != "interval":
                return apply(mode, *args, **kwargs)
            with self._scratch_draws():
                return apply(mode, *args, **kwargs)

        def routed_reset(*args, **kwargs):
            self._route_event_terms()
            return reset(*args, **kwargs)

        em.apply, em.reset = routed_apply, routed_reset

    def _route_event_terms(self) -> None:
        """Wrap every event term (resolved first, so class terms are instances) in a :class:`_Routed`."""
        em, gen = self._event_manager, self.generator
        if self._events_routed:
            return
        self._events_routed = True
        if not em._is_scene_entities_resolved:
            em._resolve_terms_callback(None)
        for mode, cfgs in em._mode_term_cfgs.items():
            for index, (name, cfg) in enumerate(zip(em._mode_term_names[mode], cfgs)):
                label = f"event.{name}"
                if mode == "prestartup":
                    self.not_per_env.append((label, "prestartup: applied before the env exists (torch's generator)"))
                    continue
                if mode == "interval" and cfg.is_global_time:
                    self.not_per_env.append((label, "interval with is_global_time=True fires for all envs at once:"
                                                    " set is_global_time=False"))
                    continue
                retime = None
                if mode == "interval":
                    retime = lambda ids, i=index, c=cfg, n=label: self._retime(i, c, n, ids)  # noqa: E731
                    retime(None)  # the timers drawn when the manager was built
                per_env = draws_python_random(cfg.func)
                self._cover(label, f"{mode} event, on its env ids" + (", and its timer" if retime else "")
                            + (", once per env (Python's random seeded per env)" if per_env else ""), cfg.func,
                            python_random_routed=per_env)
                cfg.func = _Routed(cfg.func, label, gen, 1, retime=retime, python_random=per_env)

    def route_managers(self, env: ManagerBasedRLEnv) -> None:
        """Route observation noise, random observation delays and command resampling (and the event terms, if no
        startup event routed them yet)."""
        self._route_event_terms()
        gen, om = self.generator, env.observation_manager
        for group, cfgs in om._group_obs_term_cfgs.items():
            for term, cfg in zip(om._group_obs_term_names[group], cfgs):
                label = f"obs.{group}.{term}"
                if isinstance(cfg.noise, noise.NoiseCfg):
                    cfg.noise = copy.copy(cfg.noise)  # a noise cfg may be shared by several terms
                    self._cover(f"{label}.noise", type(cfg.noise).__name__, cfg.noise.func)
                    cfg.noise.func = _Routed(cfg.noise.func, f"{label}.noise", gen, None)
                elif isinstance(cfg.noise, noise.NoiseModelCfg) and isinstance(cfg.noise.func, noise.NoiseModel):
                    model = cfg.noise.func
                    model.reset = self._routed_method(model.reset, f"{label}.noise.reset", 0)
                    cfg.noise.func = _Routed(model, f"{label}.noise", gen, None)
                    self._cover(f"{label}.noise", type(model).__name__, model)
                delay = om._group_obs_term_delay_buffer[group].get(term)
                if delay is not None and delay._hold_prob is not None and delay.history_length > 0:
                    delay.compute = self._routed_method(delay.compute, f"{label}.delay", None)
                    delay.reset = self._routed_method(delay.reset, f"{label}.delay.reset", 0, "batch_ids")
                    self._cover(f"{label}.delay", "DelayBuffer lags")
        for name, term in env.command_manager._terms.items():
            term._resample = self._routed_method(term._resample, f"command.{name}", 0)
            self._cover(f"command.{name}", f"{type(term).__name__} resampling", type(term))

    def _cover(self, label: str, what: str, func=None, python_random_routed: bool = False) -> None:
        """File a routed term as covered, or as not per-env if its source draws in a way that cannot be routed
        (Python's ``random`` can, for an event term called per env: ``python_random_routed``)."""
        reasons = unroutable_reasons(func) if func is not None else []
        if python_random_routed:
            reasons = [why for why in reasons if "Python's random" not in why]
        self.covered.append((label, what))
        self.not_per_env += [(label, reason) for reason in reasons]

    def _routed_method(self, method, name: str, rows_arg: int | None, rows_kw: str = "env_ids"):
        routed = _Routed(method, name, self.generator, rows_arg, rows_kw)
        return lambda *args, **kwargs: routed(*args, **kwargs)

    def _retime(self, index: int, cfg, name: str, env_ids) -> None:
        """Draw the interval timers of the fired envs (None: all) from their streams, as Isaac Lab does."""
        lower, upper = cfg.interval_range_s
        gen = self.generator
        rows = gen.rows(env_ids)
        time_left = self._event_manager._interval_term_time_left[index]
        n = gen.num_envs if rows is None else rows.shape[0]
        sample = gen.uniform(rows, (n,), f"{name}.timer", dtype=time_left.dtype) * (upper - lower) + lower
        time_left[slice(None) if rows is None else rows] = sample

    @contextlib.contextmanager
    def _scratch_draws(self) -> Iterator[None]:
        """``torch.rand`` outside the routed terms of the block draws from a scratch generator, so that torch's own
        is left alone."""
        scratch, seed, routed = self._scratch, self.generator.seed, torch.rand

        def rand(*size, device=None, **kwargs):
            if per_env_rng.active_block() is not None or "generator" in kwargs:
                return routed(*size, device=device, **kwargs)
            where = torch.device(device if device is not None else "cpu")
            if where not in scratch:
                scratch[where] = torch.Generator(device=where).manual_seed(seed)
            return per_env_rng.ORIGINAL["rand"](*size, device=device, generator=scratch[where], **kwargs)

        with _patched(torch, "rand", rand):
            yield

    """
    Step.
    """

    @contextlib.contextmanager
    def step(self, active: torch.Tensor | None) -> Iterator[None]:
        """An env step: the ``active`` envs (bool, (num_envs,); None: all) count one more step, and draws from
        torch's generator outside the routed terms are named."""
        self.generator.advance(active)
        with per_env_rng.watching(self._note_unrouted):
            yield

    def resetting(self, env_ids) -> contextlib.AbstractContextManager:
        """A reset of ``env_ids`` (see :meth:`PerEnvGenerator.resetting`)."""
        return self.generator.resetting(env_ids)

    def restart(self, seed: int) -> None:
        """The streams keyed by ``seed``, every env's episode count from 0 (see :meth:`PerEnvGenerator.restart`)."""
        self._scratch.clear()
        self.generator.restart(seed)

    def _note_unrouted(self, sampler: str) -> None:
        """Count a draw from torch's generator during a step outside the routed terms; warn at a new call site."""
        frame = sys._getframe(2)
        while frame is not None and frame.f_code.co_filename.endswith(_SAMPLER_FILES):
            frame = frame.f_back
        site = f"{frame.f_code.co_filename}:{frame.f_code.co_name}" if frame else "?"
        if site not in self.unrouted:
            logger.warning("Per-env random streams: %s drew from torch's shared generator (%s) during a step, outside"
                           " the routed terms: it is not per-env", site, sampler)
        self.unrouted[site] = self.unrouted.get(site, 0) + 1

    """
    Reporting.
    """

    def __str__(self) -> str:
        table = PrettyTable(["term", "per-env draws"])
        table.title = f"Per-env random streams (seed {self.generator.seed}): {len(self.covered)} terms"
        table.align = "l"
        for row in self.covered:
            table.add_row(list(row))
        lines = [str(table)]
        if self.not_per_env:
            lines.append("Not per-env (they draw from torch's shared generator): " + "; ".join(
                f"{term}: {why}" for term, why in self.not_per_env))
        lines.append("Other terms (actions, rewards, terminations, curricula, observation functions) are not routed:"
                     " a draw of theirs during a step is named in a warning.")
        return "\n".join(lines)


@contextlib.contextmanager
def _patched(owner, name: str, value) -> Iterator[None]:
    previous = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, previous)


def unroutable_reasons(func) -> list[str]:
    """Why the source of ``func`` (a function, a class or an instance of one) draws in a way the streams cannot
    route; empty if it does not or the source is not available."""
    target = func if inspect.isfunction(func) or inspect.isclass(func) else type(func)
    try:
        source = inspect.getsource(target)
    except (OSError, TypeError):
        return []
    return [why for pattern, why in _UNROUTABLE if re.search(pattern, source)]


def draws_python_random(func) -> bool:
    """Whether the module of ``func`` (a function, a class or an instance of one) imports Python's ``random`` and
    calls its samplers: the term may draw through a helper of its module (Isaac Lab's ``randomize_object_pose``
    through ``sample_object_poses``)."""
    target = func if inspect.isfunction(func) or inspect.isclass(func) else type(func)
    module = inspect.getmodule(target)
    if module is None or getattr(module, "random", None) is not random:
        return False
    try:
        source = inspect.getsource(module)
    except (OSError, TypeError):
        return False
    return _PYTHON_RANDOM.search(source) is not None
