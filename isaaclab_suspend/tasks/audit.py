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
    steps: int = 40
    """Env steps of each run."""
    suspend_at: int = 5
    """Step at which :attr:`env` is suspended."""
    suspend_steps: int = 13
    """Steps it stays suspended."""
    env: int = 0
    """The env suspended."""
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
            if not 0 < at < at + steps < self.steps or not 0 <= env < self.num_envs:
                raise ValueError(f"need 0 < step < step + steps < {self.steps} and 0 <= env < num_envs for each"
                                 f" suspension (got env {env}, step {at}, steps {steps}).")

    @property
    def all_windows(self) -> list[tuple[int, int, int]]:
        """Every suspension, ``(env, step, steps)``."""
        return [(self.env, self.suspend_at, self.suspend_steps), *map(tuple, self.windows)]


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

    @property
    def passed(self) -> bool:
        """Whether every env retraced the never-suspended run bit for bit."""
        return not self.divergences

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
        if self.not_compared:
            lines.append("Not compared: buffers that already differ before the suspension, where both runs did the"
                         " same (scratch memory allocated uninitialized, e.g. Warp's wp.empty): "
                         + ", ".join(sorted(self.not_compared)))
        if self.passed:
            lines.append("No divergence: suspended-then-resumed envs retrace the never-suspended run bit for bit.")
        else:
            table = PrettyTable(["env", "quantity", "first active step", "max error", "likely cause"])
            table.align["quantity"] = "l"
            for env, name, step, error, cause in self.divergences:
                table.add_row([env, name, step, f"{error:.3g}", cause])
            lines.append(str(table))
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
    reference, _, _ = _rollout(cfg, False, actions)
    ours, drawn, drawn_per_env = _rollout(cfg, True, actions)
    first_suspension = min(at for _, at, _ in cfg.all_windows)
    audit = SuspensionAudit(cfg, drawn=drawn, drawn_per_env=drawn_per_env, compared=len(reference[0][0]))
    cause = "shared random generator" if drawn else "leak"
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


def _rollout(args: SuspensionAuditCfg, suspend: bool, actions: ActionFn | None
             ) -> tuple[list[list[dict]], dict[str, int], dict[str, int]]:
    """Per env, the compared quantities of each of its active steps; the shared and the per-env generators' draws
    after suspension."""
    attrs = {"seed": args.seed, **({"suspend__unfrozen_parts": list(args.unfrozen)} if args.unfrozen else {})}
    attrs["suspend__per_env_random"] = args.per_env_random
    _clear_task_caches()
    with open_env(args.task, args.num_envs, args.device, list(args.overrides), suspendable=True,
                  deterministic=args.deterministic, verbose=args.verbose, **attrs) as env:
        obs, _ = env.reset()
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
            if actions is None:
                obs, _, _, _, _ = env.step(0.5 * torch.sin(0.37 * count.unsqueeze(1) + 0.9 * phase))
            else:
                obs, _, _, _, _ = env.step(actions(obs, env))
            terms = _split_obs(env, obs)
            terms.update({f"reward.{t}": rm._step_reward[:, i] for i, t in enumerate(rm.active_terms)})
            for e in torch.nonzero(active).flatten().tolist():
                state = {f"state.{k}": v for k, v in sm.env_state(e).items()}
                state.update({k: v[e].clone() for k, v in terms.items()})
                trajectory[e].append(state)
            count += active.to(env.device)
        return trajectory, drawn, drawn_per_env
