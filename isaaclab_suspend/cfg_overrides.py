"""What a cfg override may set: the one check of every ``KEY=VALUE`` that a flag or a file hands a task's cfg (or an
embedded planner's), made before any env is built.

Two kinds of overrides. The user's (a script's trailing ``env.KEY=VALUE`` arguments and ``--presets``,
:func:`~isaaclab_suspend.tasks.env_factory.make_env_cfg`'s ``overrides``, ``--model.planner_overrides``) may set any
field, but must make sense: the forms this package supports (``env.KEY=VALUE``, ``presets=NAME``; not Hydra's
``+KEY=``, ``~KEY=`` or ``${...}`` interpolations), a value of the field's kind (a boolean only ``true`` or ``false``,
a number only where the field is one, a cfg such as a term's never replaced by a text, a list or a dict), finite
numbers, durations and sizes within :attr:`CfgOverridesCfg.bounds`, episodes of at most
:attr:`CfgOverridesCfg.max_episode_steps` steps. A file's (a dataset's ``env_args.cfg_overrides``) are data:
besides, each may only set a number or a boolean that the task's cfg already has, never a term's ``func``, a
``class_type``, a path, a text or a new key.

Imports nothing heavy (no torch or Isaac Lab): the scripts check the form of their arguments while parsing them.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import math
import re

from .names import MAX_SEED

SELECTOR_KEYS = ("presets", "physics")
"""Keys of Isaac Lab's preset selectors (``presets=NAME[,NAME]``), the overrides besides ``env.KEY=VALUE``."""
CODE_FIELDS = ("func", "class_type")
"""Fields that name code (a term's function, the class a cfg builds): never set by a file."""

_KEY = re.compile(r"env(\.[A-Za-z_][A-Za-z0-9_]*)+")
_NAMES = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(,[A-Za-z_][A-Za-z0-9_]*)*")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_BOOLS = {"true": True, "false": False}


@dataclasses.dataclass(frozen=True)
class Bound:
    """The range a number must lie in: ``[low, high]`` (``(low, high]`` with ``low_open``), an integer with
    ``integer``."""

    low: float
    high: float = math.inf
    low_open: bool = False
    integer: bool = False

    def describe(self) -> str:
        """E.g. ``an integer in [1, 10000]`` or ``a finite number > 0``."""
        return f"{'an integer' if self.integer else 'a finite number'} {self.range_text()}"

    def range_text(self) -> str:
        """E.g. ``in [1, 10000]``, ``in (0, 1]`` or ``>= 0``."""
        low, high = (f"{v:g}" if isinstance(v, float) else str(v) for v in (self.low, self.high))
        if self.high == math.inf:
            return f"{'>' if self.low_open else '>='} {low}"
        return f"in {'(' if self.low_open else '['}{low}, {high}]"

    def holds(self, value: object) -> bool:
        """Whether ``value`` is a number (not a bool) in the range."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if isinstance(value, float) and not math.isfinite(value):
            return False
        if self.integer and value != int(value):
            return False
        return self.low <= value <= self.high and not (self.low_open and value == self.low)


@dataclasses.dataclass(frozen=True)
class CfgOverridesCfg:
    """The ranges :func:`check_overrides` and :func:`check_planner_field` hold overrides to."""

    bounds: dict[str, Bound] = dataclasses.field(default_factory=lambda: {
        "sim.dt": Bound(0.0, 1.0, low_open=True),
        "dt": Bound(0.0, 1.0, low_open=True),  # a planner's env step
        "decimation": Bound(1, 10_000, integer=True),
        "sim.render_interval": Bound(1, 10_000, integer=True),
        "episode_length_s": Bound(0.0, low_open=True),
        "scene.num_envs": Bound(1, integer=True),
        "scene.env_spacing": Bound(0.0),
        "seed": Bound(0, MAX_SEED, integer=True),
        "*history_length": Bound(0, 1_000, integer=True),
        "*.std": Bound(0.0),
        "*_noise": Bound(0.0),
    })
    """Range of each key that matches a pattern (``fnmatch`` on the key without ``env.``): durations, counts and
    sizes are positive (a non-positive step or decimation divides by zero, a negative episode length ends every
    episode at once), a history of 300 million steps would allocate past any memory, seeds are numpy's."""
    max_episode_steps: int = 10**9
    """Most env steps an episode may last (``episode_length_s / (sim.dt * decimation)``): Isaac Lab counts them in
    an integer buffer."""


DEFAULT_CFG = CfgOverridesCfg()
"""The ranges the scripts and :func:`~isaaclab_suspend.tasks.env_factory.make_env_cfg` hold overrides to."""


def check_form(override: str, from_file: bool = False) -> None:
    """Refuse an override this package does not apply: anything but ``env.KEY=VALUE`` or ``presets=NAME[,NAME]``
    (Hydra's ``+KEY=``, ``++KEY=``, ``~KEY``), a ``${...}`` interpolation, a non-finite number; ``from_file``: also
    a value that is not a number or a boolean, and a field that names code.

    Raises:
        ValueError: Saying which override and why.
    """
    key, equals, value = override.partition("=")
    if key.startswith(("+", "~")):
        raise ValueError(f"the cfg override '{override}': Hydra's +KEY= and ~KEY= forms are not supported; override"
                         " a field the task's cfg has as env.KEY=VALUE")
    if not equals or not value:
        raise ValueError(f"the cfg override '{override}' is not KEY=VALUE")
    if key in SELECTOR_KEYS:
        if not _NAMES.fullmatch(value):
            raise ValueError(f"the cfg override '{override}': {key}= takes preset names NAME[,NAME]")
        return
    if not _KEY.fullmatch(key):
        raise ValueError(f"the cfg override '{override}': the key must be env.<field of the task's cfg>, dotted (or"
                         " presets=NAME)")
    if "${" in value:
        raise ValueError(f"the cfg override '{override}': interpolations (${{...}}) are not supported")
    number = _number(value)
    if number is not None and not math.isfinite(number):
        raise ValueError(f"the cfg override '{override}': {key[4:]} must be a finite number")
    if from_file:
        code = [name for name in key.split(".") if name in CODE_FIELDS]
        if code:
            raise ValueError(f"the cfg override '{override}' sets '{code[0]}', which names code: {_DATA_ONLY}")
        if number is None and value.lower() not in _BOOLS:
            raise ValueError(f"the cfg override '{override}' sets a text: {_DATA_ONLY}")


_DATA_ONLY = ("a dataset's cfg overrides may only set numbers and booleans that the task's cfg has (docs/datasets.rst);"
              " this file cannot be replayed as it is")


def check_data_overrides(base: object, overrides: list[str]) -> None:
    """Refuse a file's ``env.KEY=VALUE`` whose ``KEY`` is not a number or a boolean of ``base`` (the task's cfg with
    the file's presets), or whose value is not of that kind, before Hydra sees it.

    Raises:
        ValueError: Saying which override and why.
    """
    for override in overrides:
        key, _, text = override.partition("=")
        if key in SELECTOR_KEYS:
            continue
        *owner_path, name = key.split(".")[1:]
        owner = cfg_field(base, owner_path)
        old = cfg_field(owner, [name])
        if old is _MISSING:
            raise ValueError(f"the cfg override '{override}': the task's cfg has no field {key[4:]}: {_DATA_ONLY}")
        kind = type(old).__name__ if old is not None else _declared_kind(owner, name)
        if kind not in ("int", "float", "bool"):
            raise ValueError(f"the cfg override '{override}': {key[4:]} is {kind}, not a number or a boolean:"
                             f" {_DATA_ONLY}")
        if (kind == "bool") != (text.lower() in _BOOLS):
            raise ValueError(f"the cfg override '{override}': {key[4:]} is {kind} ({old!r}), got '{text}'")


def check_overrides(base: object, cfg: object, overrides: list[str], settings: CfgOverridesCfg = DEFAULT_CFG
                    ) -> None:
    """Refuse ``env.KEY=VALUE`` overrides that made ``cfg`` (Hydra's result; ``base``: the cfg without them) make no
    sense: a key ``base`` lacks, a value not of the field's kind (a boolean is only ``true`` or ``false``, a number
    only a number, a cfg never a text, a list or a dict), a number that is not finite or out of its range
    (:attr:`CfgOverridesCfg.bounds`), episodes longer than :attr:`CfgOverridesCfg.max_episode_steps`.

    Raises:
        ValueError: Saying which override and why.
    """
    timing = False
    for override in overrides:
        key, _, text = override.partition("=")
        if key in SELECTOR_KEYS:
            continue
        path = key.split(".")[1:]
        old, new = cfg_field(base, path), cfg_field(cfg, path)
        if old is _MISSING:
            raise ValueError(f"the cfg override {override}: the task's cfg has no field {key[4:]} (this package"
                             " overrides the fields a cfg has, it adds none)")
        _check_kind(override, key[4:], text, old if old is not None else _declared(cfg_field(base, path[:-1]),
                                                                                   path[-1]), new)
        if isinstance(new, float) and not math.isfinite(new):
            raise ValueError(f"the cfg override {override}: {key[4:]} must be a finite number")
        _check_bound(f"the cfg override {override}", key[4:], new, settings)
        timing |= key[4:] in ("episode_length_s", "sim.dt", "decimation")
    if timing:
        steps = cfg.episode_length_s / (cfg.sim.dt * cfg.decimation)
        if steps > settings.max_episode_steps:
            raise ValueError(f"the cfg overrides {' '.join(overrides)} make episodes of {steps:.3g} steps"
                             f" (episode_length_s / (sim.dt * decimation)); at most {settings.max_episode_steps}")


def check_planner_field(cfg_name: str, key: str, default: object, value: object,
                        settings: CfgOverridesCfg = DEFAULT_CFG) -> None:
    """Refuse ``value`` for the number field ``key`` of a planner's cfg (``default``: the field's default): out of
    its range (:attr:`CfgOverridesCfg.bounds`), or negative where the default is not (a planner cfg's numbers are
    magnitudes: speeds, sizes, gains, step counts, noise).

    Raises:
        ValueError: Saying which field and why.
    """
    _check_bound(f"planner override '{key}={value}'", key, value, settings)
    if isinstance(default, (int, float)) and default >= 0 and value < 0:
        raise ValueError(f"planner override '{key}={value}': {cfg_name}.{key} is a magnitude (default {default!r}):"
                         " it must be >= 0")


def cfg_field(cfg: object, path: list[str]) -> object:
    """The value at ``path`` in a cfg (attributes or dict keys), or ``_MISSING`` where it has none."""
    for name in path:
        cfg = cfg.get(name, _MISSING) if isinstance(cfg, dict) else getattr(cfg, name, _MISSING)
        if cfg is _MISSING:
            break
    return cfg


_MISSING = object()


def _declared_kind(owner: object, name: str) -> str:
    """``int``, ``float`` or ``bool`` where the cfg class of ``owner`` declares its field ``name`` (now None) as that
    or None (e.g. ``history_length: int | None``), else ``NoneType``."""
    fields = {f.name: f.type for f in dataclasses.fields(owner)} if dataclasses.is_dataclass(owner) else {}
    declared = {part.strip() for part in str(fields.get(name, "")).split("|")} - {"None"}
    return declared.pop() if len(declared) == 1 and declared <= {"int", "float", "bool"} else "NoneType"


def _declared(owner: object, name: str) -> object:
    """A value standing for the kind the cfg class of ``owner`` declares its field ``name`` (now None) as: False for
    ``bool``, 0 for ``int`` or ``float``, None for another or no declaration (:func:`_declared_kind`)."""
    return {"bool": False, "int": 0, "float": 0.0}.get(_declared_kind(owner, name))


def _check_kind(override: str, key: str, text: str, old: object, new: object) -> None:
    """Refuse ``new`` (Hydra's value of ``text``) where it is not of ``old``'s kind: a boolean takes only ``true``
    or ``false`` (``off``, ``no``, ``'false'`` are texts, and truthy), a number only a number, and a cfg (a term's,
    a sensor's, ...) is never replaced by a text, a list or a dict (set its fields, or ``null`` to remove it)."""
    if isinstance(old, bool) and not isinstance(new, bool):
        raise ValueError(f"the cfg override {override}: {key} is a boolean ({old!r}), which takes true or false,"
                         f" got {text!r}")
    if isinstance(old, (int, float)) and not isinstance(old, bool) and (
            isinstance(new, bool) or not isinstance(new, (int, float))):
        raise ValueError(f"the cfg override {override}: {key} is a number ({type(old).__name__}, {old!r}),"
                         f" got '{text}'.")
    if dataclasses.is_dataclass(old) and not (new is None or dataclasses.is_dataclass(new)):
        raise ValueError(f"the cfg override {override}: {key} is a {type(old).__name__}, which an override does not"
                         f" replace with {text!r}: set its fields (env.{key}.FIELD=VALUE), or null to remove it")


def _check_bound(what: str, key: str, value: object, settings: CfgOverridesCfg) -> None:
    for pattern, bound in settings.bounds.items():
        if fnmatch.fnmatchcase(key, pattern) and not bound.holds(value):
            raise ValueError(f"{what}: {key} must be {bound.describe()}, got {value!r}")


def _number(text: str) -> float | None:
    """``text`` as a number as Hydra reads it (``nan``, ``inf``, ``-inf`` included), or None."""
    if _NUMBER.fullmatch(text):
        return float(text)
    special = text.lower().replace(".", "")
    return float(special) if special.lstrip("+-") in ("nan", "inf") else None
