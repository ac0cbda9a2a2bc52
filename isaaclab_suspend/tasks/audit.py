"""Suspension audit: does a suspended-then-resumed env retrace the run that never suspended it?

The task runs twice in a :class:`~isaaclab_suspend.envs.SuspendableManagerBasedRLEnv` (never suspended; one env
suspended for a while, then resumed), each env's action a function of its own active-step count, and every
observation term, reward term and per-env buffer the suspension manager froze (physics, actuators, sensors,
manager terms; the event manager's global-step stamps in the env's own time) is compared per env and active step. By default each env draws from its own random stream
(:attr:`~isaaclab_suspend.suspension.SuspendCfg.per_env_random`): every divergence is a leak, and the audit names the terms that drew after
the suspension began. With Isaac Lab's one shared generator a suspended env that skips a draw shifts the others'
draws, so the audit records which managers drew from it after the suspension began; a divergence after such a
draw is marked "shared random generator", one without is a leak. ``scripts/audit_suspension.py`` is its command
line.

An audit proves something only about what ran: so it also checks that every interval event and a reset ran
inside each suspension (for another env) and after it (for the resumed env). Steps left to it are chosen so that
they do (:func:`coverage_gap`); a run too short is not passed, and the report names what never ran.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from prettytable import PrettyTable

from isaaclab.utils import configclass

from ..names import MAX_SEED
from ..suspension.frozen_rows import bits
from ..suspension.suspension_manager import PARTS
from .env_factory import open_env


@configclass
class SuspensionAuditCfg:
    """What :func:`audit_suspension` runs."""

    task: str = "Isaac-PushCube-Suspendable"
    """Gym task id (any ``ManagerBasedRLEnvCfg`` task; import the module that registers it first)."""
    num_envs: int = 4
    """Envs of each run (at least 2, so that an env that is never suspended is compared too)."""
    steps: int | None = None
    """Env steps of each run (None: the last suspension's end plus :func:`coverage_gap` steps, so that the
    resumed env fires every interval event and resets after its resume)."""
    suspend_at: int = 5
    """Step at which :attr:`env` is suspended."""
    suspend_steps: int | None = None
    """Steps it stays suspended (None: :func:`coverage_gap` steps, at least :data:`MIN_SUSPEND_STEPS`, so that the
    other envs fire every interval event and reset inside the suspension; at most what :attr:`steps` leaves)."""
    env: int = 0
    """The env suspended."""
    exercise_all: bool = True
    """Require every interval event and a reset to run inside each suspension (for another env) and after it (for
    the resumed env); False for an audit of chosen windows (one mid-grasp, say), which then names what did not run
    without failing on it."""
    windows: list[tuple[int, int, int]] = []
    """More suspensions, ``(env, step, steps)`` each: e.g. one env suspended while its gripper closes, another
    while it holds a cube up."""
    device: str = "cpu"
    """Device of the env."""
    seed: int = 42
    """Seed of both runs (a task whose cfg has none, as Isaac Lab's own, would draw its reset events differently)."""
    unfrozen: list[str] = []
    """Parts left unfrozen (:attr:`~isaaclab_suspend.suspension.SuspendCfg.unfrozen_parts`), to see what each part's freeze does."""
    overrides: list[str] = []
    """Hydra-style cfg overrides, e.g. ``presets=newton_featherstone``."""
    per_env_random: bool = True
    """Per-env random streams (:attr:`~isaaclab_suspend.suspension.SuspendCfg.per_env_random`); False: Isaac Lab's shared generator."""
    deterministic: str = "auto"
    """Isaac Lab's reproducible physics (:func:`~isaaclab_suspend.tasks.env_factory.deterministic_physics`): by
    default on a CUDA device, where two runs of a contact task differ without it and no resume could match."""
    verbose: bool = False
    """Print Isaac Lab's set-up tables and the suspension manager's report of each env it builds."""

    def check(self) -> None:
        """Raise a ``ValueError`` saying which setting is out of range."""
        if self.num_envs < 2 or not 0 <= self.env < self.num_envs:
            raise ValueError(f"need num_envs >= 2 and 0 <= env < num_envs (got {self.num_envs}, {self.env}).")
        if not 0 <= self.seed <= MAX_SEED:
            raise ValueError(f"seed {self.seed} is out of range: must be in [0, {MAX_SEED}].")
        if any(override.partition("=")[0] == "env.seed" for override in self.overrides):
            raise ValueError("the audit's seed is its seed setting (--seed), not an env.seed= override.")
        if set(self.unfrozen) - set(PARTS):
            raise ValueError(f"unknown unfrozen parts {sorted(set(self.unfrozen) - set(PARTS))}; known: {list(PARTS)}.")
        for env, at, steps in self.all_windows:
            if steps is None:  # chosen once the task is open
                steps = 1
            end = self.steps if self.steps is not None else math.inf
            if not 0 < at < at + steps < end or not 0 <= env < self.num_envs:
                raise ValueError(f"need 0 < step < step + steps < {self.steps} and 0 <= env < num_envs for each"
                                 f" suspension (got env {env}, step {at}, steps {steps}).")

    @property
    def all_windows(self) -> list[tuple[int, int, int]]:
        """Every suspension, ``(env, step, steps)``."""
        return [(self.env, self.suspend_at, self.suspend_steps), *map(tuple, self.windows)]

    def with_steps(self, gap: int) -> SuspensionAuditCfg:
        """A copy with :attr:`suspend_steps` and :attr:`steps` chosen for a task whose interval events all fire and
        whose envs all reset within ``gap`` steps (:func:`coverage_gap`), where left None.

        Raises:
            ValueError: If the steps given leave no room for the suspension.
        """
        suspend_steps = self.suspend_steps
        if suspend_steps is None:
            suspend_steps = max(gap, MIN_SUSPEND_STEPS)
            if self.steps is not None:
                suspend_steps = min(suspend_steps, self.steps - self.suspend_at - 1)
        cfg = self.replace(suspend_steps=suspend_steps)
        if cfg.steps is None:
            cfg.steps = max(at + steps for _, at, steps in cfg.all_windows) + gap + 1
        cfg.check()
        return cfg


MIN_SUSPEND_STEPS = 13
"""Fewest steps the audit suspends an env for when it chooses: longer than the delays and histories of the tasks
here, so that a part left unfrozen shows after the resume."""


def coverage_gap(env) -> int:
    """Steps within which every active env of ``env`` fires each interval event again (its timer is at most the
    upper end of the term's ``interval_range_s``) and resets (an episode lasts at most ``max_episode_length`` steps
    when the task has a time-out term), plus one: a suspension that long sees each of them for the other envs, and
    the suspended env sees each of them that long after its resume."""
    em, step_dt = env.event_manager, env.step_dt
    gap = [math.ceil(cfg.interval_range_s[1] / step_dt) for cfg in em._mode_term_cfgs.get("interval", [])]
    tm = env.termination_manager
    if any(tm.get_term_cfg(name).time_out for name in tm.active_terms):
        gap.append(int(env.max_episode_length))
    return max(gap, default=0) + 1


@dataclass
class SuspensionAudit:
    """What :func:`audit_suspension` found."""

    cfg: SuspensionAuditCfg
    divergences: list[tuple[int, str, int, float, str]] = field(default_factory=list)
    """(env, quantity, first active step, max error, likely cause) of each diverging quantity."""
    drawn: dict[str, int] = field(default_factory=dict)
    """Manager calls that drew from the global torch generator after the suspension began, with their counts."""
    drawn_per_env: dict[str, int] = field(default_factory=dict)
    """Terms that drew from the per-env random streams after the suspension began, with their counts of calls."""
    not_compared: set[str] = field(default_factory=set)
    """Buffers that already differ before the suspension where both runs did the same (uninitialised scratch)."""
    compared: int = 0
    """Quantities compared per env and step."""
    exercised: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Per interval event (``event.NAME``) and ``reset``: how often it ran inside the suspensions (for the other
    envs) and after them (for the resumed envs)."""
    not_exercised: list[str] = field(default_factory=list)
    """What never ran inside a suspension or after it, in words: the audit proves nothing about it."""

    @property
    def passed(self) -> bool:
        """Whether every env retraced the never-suspended run bit for bit, with every interval event and a reset
        run inside each suspension and after it (unless :attr:`SuspensionAuditCfg.exercise_all` is False)."""
        return not self.divergences and not (self.not_exercised and self.cfg.exercise_all)

    def __str__(self) -> str:
        c = self.cfg
        windows = "; ".join(f"env {e} suspended at step {at} for {n} steps" for e, at, n in c.all_windows)
        lines = [f"Task {c.task}: {windows}, {c.num_envs} envs, {c.steps} steps, {self.compared} quantities per env"
                 " and step.",
                 "Global torch generator drawn after suspension by: "
                 + (", ".join(f"{k} ({v} steps)" for k, v in self.drawn.items()) or "nothing (a divergence is a leak)")]
        if c.per_env_random:
            lines.append("Per-env random streams drawn after suspension by: "
                         + (", ".join(f"{k} ({v} calls)" for k, v in self.drawn_per_env.items()) or "nothing"))
        lines.append("Run inside the suspensions (other envs) and after them (resumed envs): " + ", ".join(
            f"{k} ({inside} and {after} times)" for k, (inside, after) in self.exercised.items()) + ".")
        if self.not_compared:
            lines.append("Not compared: buffers that already differ before the suspension, where both runs did the"
                         " same (scratch memory allocated uninitialized, e.g. Warp's wp.empty): "
                         + ", ".join(sorted(self.not_compared)))
        if not self.divergences:
            lines.append("No divergence: suspended-then-resumed envs retrace the never-suspended run bit for bit"
                         + (" in what ran." if self.not_exercised else "."))
        else:
            table = PrettyTable(["env", "quantity", "first active step", "max error", "likely cause"])
            table.align["quantity"] = "l"
            for env, name, step, error, cause in self.divergences:
                table.add_row([env, name, step, f"{error:.3g}", cause])
            lines.append(str(table))
        if self.not_exercised:
            lines.append(("Not audited, it never ran: " if c.exercise_all else "Not run (windows chosen): ")
                         + "; ".join(self.not_exercised) + "." + (" Omit --steps and --suspend_steps"
                         " (SuspensionAuditCfg.steps and suspend_steps None) to let the audit choose them, or give"
                         " more." if c.exercise_all else ""))
        return "\n".join(lines)


ActionFn = Callable[[dict, object], torch.Tensor]
"""``actions(obs, env) -> (num_envs, action_dim)``: each env's action from its own observation."""


def audit_suspension(cfg: SuspensionAuditCfg, actions: ActionFn | None = None) -> SuspensionAudit:
    """Run :attr:`SuspensionAuditCfg.task` never suspended and suspended-then-resumed, and compare them.

    Each env's action is a function of its own active-step count (a sine sweep), or of its own observation with
    ``actions`` (e.g. the task's planner, so that suspensions fall mid-grasp).

    Raises:
        ValueError: If a setting is out of range or the task cannot be built.
    """
    cfg.check()
    torch.use_deterministic_algorithms(True, warn_only=True)  # torch.empty buffers hold NaN, not garbage
    reference = _rollout(cfg, False, actions)
    cfg = reference.cfg
    run = _rollout(cfg, True, actions)
    reference, ours, drawn, drawn_per_env = reference.trajectory, run.trajectory, run.drawn, run.drawn_per_env
    first_suspension = min(at for _, at, _ in cfg.all_windows)
    audit = SuspensionAudit(cfg, drawn=drawn, drawn_per_env=drawn_per_env, compared=len(reference[0][0]))
    audit.exercised, audit.not_exercised = _exercised(cfg, run.ran)
    cause = ("shared random generator" if drawn else f"draws not per-env ({', '.join(run.not_per_env)})"
             if run.not_per_env else "leak")
    for e in range(cfg.num_envs):
        first: dict[str, tuple[int, float]] = {}
        for i, state in enumerate(ours[e]):
            for name, value in state.items():
                ref = reference[e][i][name]
                if not torch.equal(bits(value), bits(ref)):
                    error = float((value.double() - ref.double()).abs().nan_to_num(math.inf).max())
                    step, worst = first.get(name, (i, 0.0))
                    first[name] = (step, max(worst, error))
        for name, (step, error) in sorted(first.items(), key=lambda x: x[1][0]):
            if step >= first_suspension:
                audit.divergences.append((e, name, step, error, cause))
            elif name.startswith("state."):  # both runs did the same so far: memory nothing wrote yet
                audit.not_compared.add(name)
            else:
                audit.divergences.append((e, name, step, error, "nondeterministic (before the suspension)"))
    return audit


def _exercised(cfg: SuspensionAuditCfg, ran: dict[str, torch.Tensor]) -> tuple[dict[str, tuple[int, int]], list[str]]:
    """How often each of ``ran`` (name -> (steps, num_envs) bool: it ran for the env at the step) ran inside the
    suspensions for the other envs and after them for the resumed env, and what never did, in words."""
    counts, missing = {}, []
    for name, mask in ran.items():
        inside = after = 0
        for env, at, steps in cfg.all_windows:
            others = torch.ones(cfg.num_envs, dtype=torch.bool)
            others[env] = False
            window = int(mask[at:at + steps, others].sum())
            resumed = int(mask[at + steps:, env].sum())
            if not window:
                missing.append(f"{name} never ran inside env {env}'s suspension (steps {at}-{at + steps - 1})")
            if not resumed:
                missing.append(f"{name} never ran for env {env} after its resume (steps {at + steps}-{cfg.steps - 1})")
            inside, after = inside + window, after + resumed
        counts[name] = (inside, after)
    return counts, missing


_WATCHED = (("action_manager", "process_action"), ("command_manager", "compute"), ("event_manager", "apply"),
            ("observation_manager", "compute"))


def _watch_randomness(env, drawn: dict[str, int]) -> None:
    """Count, per manager call, the calls that advanced the global torch generator (of the env's device too)."""
    device = torch.device(env.device)

    def rng_state() -> list[torch.Tensor]:
        state = [torch.random.get_rng_state()]
        if device.type == "cuda":
            state.append(torch.cuda.get_rng_state(device))
        return state

    for owner_name, method in _WATCHED:
        owner = getattr(env, owner_name)
        call = getattr(owner, method)

        def wrapped(*args, _call=call, _label=f"{owner_name}.{method}", **kwargs):
            before = rng_state()
            out = _call(*args, **kwargs)
            if not all(torch.equal(a, b) for a, b in zip(before, rng_state())):
                label = _label + (f"({kwargs['mode']})" if "mode" in kwargs else "")
                drawn[label] = drawn.get(label, 0) + 1
            return out

        setattr(owner, method, wrapped)


def _split_obs(env, obs: dict) -> dict[str, torch.Tensor]:
    """Observation per term (concatenated groups split by term width)."""
    om, out = env.observation_manager, {}
    for group, terms in om.active_terms.items():
        value = obs[group]
        if not isinstance(value, torch.Tensor):
            out.update({f"obs.{group}.{t}": v for t, v in value.items()})
            continue
        widths = [math.prod(d) for d in om.group_obs_term_dim[group]]
        if sum(widths) != value.shape[-1]:
            out[f"obs.{group}"] = value
            continue
        out.update({f"obs.{group}.{t}": v for t, v in zip(terms, value.split(widths, dim=-1))})
    return out


def _clear_task_caches() -> None:
    """Make a second build of a task in this process draw what the first drew: Isaac Lab's lift tasks cache the
    object point clouds they sample at construction (drawing from the global generator), so a second build would
    skip those draws and its startup events (actuator gains, friction, masses) would come out differently."""
    try:
        from isaaclab_tasks.core.lift.mdp.utils import clear_pointcloud_caches
    except ImportError:
        return
    clear_pointcloud_caches()


@dataclass
class _Run:
    """One run of the audit."""

    cfg: SuspensionAuditCfg
    """The cfg it ran, its steps chosen."""
    trajectory: list[list[dict]]
    """Per env, the compared quantities of each of its active steps."""
    drawn: dict[str, int]
    """Manager calls that drew from the shared generator after the suspension began."""
    drawn_per_env: dict[str, int]
    """Terms that drew from the per-env streams after the suspension began."""
    ran: dict[str, torch.Tensor]
    """Per interval event (``event.NAME``) and ``reset``, whether it ran for each env at each step. Shape:
    (steps, num_envs), bool, on the host."""
    not_per_env: list[str]
    """Terms that draw in a way the per-env streams cannot route (named at start-up, besides prestartup events) or
    that made a draw no env row maps to."""


def _rollout(args: SuspensionAuditCfg, suspend: bool, actions: ActionFn | None) -> _Run:
    """Run ``args`` (its steps chosen first if left None), suspending or not."""
    attrs = {"seed": args.seed, **({"suspend__unfrozen_parts": list(args.unfrozen)} if args.unfrozen else {})}
    attrs["suspend__per_env_random"] = args.per_env_random
    _clear_task_caches()
    with open_env(args.task, args.num_envs, args.device, list(args.overrides), suspendable=True,
                  deterministic=args.deterministic, verbose=args.verbose, **attrs) as env:
        if args.steps is None or args.suspend_steps is None:
            args = args.with_steps(coverage_gap(env))
        obs, _ = env.reset()
        timers = env.event_manager._interval_term_time_left
        names = [f"event.{name}" for name in env.event_manager._mode_term_names.get("interval", [])]
        ran = {name: torch.zeros(args.steps, env.num_envs, dtype=torch.bool) for name in [*names, "reset"]}
        drawn: dict[str, int] = {}
        drawn_per_env: dict[str, int] = {}
        sm, rm = env.suspension_manager, env.reward_manager
        count = torch.zeros(env.num_envs, device=env.device)
        phase = torch.arange(env.action_manager.total_action_dim, device=env.device)
        trajectory = [[] for _ in range(env.num_envs)]
        first_suspension = min(at for _, at, _ in args.all_windows)
        for step in range(args.steps):
            if suspend and step == first_suspension:
                _watch_randomness(env, drawn)
                if env.random_streams is not None:
                    env.random_streams.generator.drawn = drawn_per_env
            for e, at, steps in args.all_windows if suspend else ():
                if step == at:
                    env.suspend_envs([e])
                if step == at + steps:
                    env.resume_envs([e])
            active = env.active_mask.cpu()
            before = [t.cpu().clone() for t in timers]
            if actions is None:
                obs, _, terminated, truncated, _ = env.step(0.5 * torch.sin(0.37 * count.unsqueeze(1) + 0.9 * phase))
            else:
                obs, _, terminated, truncated, _ = env.step(actions(obs, env))
            ran["reset"][step] = (terminated | truncated).cpu()
            for name, timer, earlier in zip(names, timers, before):  # a firing draws the timer anew: it grows
                ran[name][step] = (timer.cpu() > earlier).expand(env.num_envs) & ~ran["reset"][step]
            terms = _split_obs(env, obs)
            terms.update({f"reward.{t}": rm._step_reward[:, i] for i, t in enumerate(rm.active_terms)})
            for e in torch.nonzero(active).flatten().tolist():
                state = {f"state.{k}": v for k, v in sm.env_state(e).items()}
                state.update({k: v[e].clone() for k, v in terms.items()})
                trajectory[e].append(state)
            count += active.to(env.device)
        streams = env.random_streams
        not_per_env = sorted({*(term for term, why in streams.not_per_env if not why.startswith("prestartup")),
                              *streams.generator.unmapped} if streams is not None else ())
        return _Run(args, trajectory, drawn, drawn_per_env, ran, not_per_env)
