"""Audit a task for suspension: does a suspended-then-resumed env retrace the run that never suspended it?

Runs the task twice in a SuspendableManagerBasedRLEnv (never suspended; env ``--env`` suspended for
``--suspend_steps`` steps from ``--suspend_at``, then resumed), each env's action a function of its own
active-step count, and compares per env and active step every observation term, every reward term and every
per-env buffer the suspension manager froze (physics, actuators, sensors, manager terms). Prints a table of
what diverges (env, quantity, first active step, max error, likely cause) and exits 1 on any divergence, 0 if
bit-exact, 2 on bad input. Any ManagerBasedRLEnvCfg task works, also of another package (``--import``).

Isaac Lab draws randomness from one global torch generator: a suspended env that skips a draw shifts the draws
of the others. The audit reports which managers drew from it after the suspension began; a divergence with no
such draw is a leak, one with draws may be the shifted generator (rerun with degenerate random ranges).

Example::

    tools/run.sh python scripts/audit_suspension.py --task Isaac-PushCube-Suspendable --num_envs 4 --steps 40
"""

from __future__ import annotations

import argparse
import math
import sys

import torch
from prettytable import PrettyTable

from isaaclab_suspend.managers.frozen_rows import bits
from isaaclab_suspend.managers.suspension_manager import PARTS
from isaaclab_suspend.utils import import_task_modules, open_env

_WATCHED = (("action_manager", "process_action"), ("command_manager", "compute"), ("event_manager", "apply"),
            ("observation_manager", "compute"))


def _watch_randomness(env, drawn: dict[str, int]) -> None:
    """Count, per manager call, the calls that advanced the global torch generator."""
    for owner_name, method in _WATCHED:
        owner = getattr(env, owner_name)
        call = getattr(owner, method)

        def wrapped(*args, _call=call, _label=f"{owner_name}.{method}", **kwargs):
            before = torch.random.get_rng_state()
            out = _call(*args, **kwargs)
            if not torch.equal(before, torch.random.get_rng_state()):
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


def _rollout(args, suspend: bool) -> tuple[list[list[dict]], dict[str, int]]:
    attrs = {"suspend__unfrozen_parts": list(args.unfrozen)} if args.unfrozen else {}
    with open_env(args.task, args.num_envs, args.device, args.overrides, suspendable=True, **attrs) as env:
        obs, _ = env.reset()
        drawn: dict[str, int] = {}
        sm, rm = env.suspension_manager, env.reward_manager
        count = torch.zeros(env.num_envs, device=env.device)
        phase = torch.arange(env.action_manager.total_action_dim, device=env.device)
        trajectory = [[] for _ in range(env.num_envs)]
        for step in range(args.steps):
            if suspend and step == args.suspend_at:
                env.suspend_envs([args.env])
                _watch_randomness(env, drawn)
            if suspend and step == args.suspend_at + args.suspend_steps:
                env.resume_envs([args.env])
            active = env.active_mask.cpu()
            obs, _, _, _, _ = env.step(0.5 * torch.sin(0.37 * count.unsqueeze(1) + 0.9 * phase))
            terms = _split_obs(env, obs)
            terms.update({f"reward.{t}": rm._step_reward[:, i] for i, t in enumerate(rm.active_terms)})
            for e in torch.nonzero(active).flatten().tolist():
                state = {f"state.{k}": v for k, v in sm.env_state(e).items()}
                state.update({k: v[e].clone() for k, v in terms.items()})
                trajectory[e].append(state)
            count += active.to(env.device)
        return trajectory, drawn


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", required=True, help="gym task id (a ManagerBasedRLEnvCfg task)")
    parser.add_argument("--import", dest="modules", nargs="*", default=[], help="modules that register the task")
    parser.add_argument("--num_envs", type=int, default=4)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--suspend_at", type=int, default=5)
    parser.add_argument("--suspend_steps", type=int, default=13)
    parser.add_argument("--env", type=int, default=0, help="env to suspend")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--unfrozen", nargs="*", default=[], help="parts left unfrozen (SuspendCfg.unfrozen_parts)")
    parser.add_argument("overrides", nargs="*", help="Hydra-style cfg overrides, e.g. presets=newton_featherstone")
    args = parser.parse_args()
    if args.num_envs < 2 or not 0 <= args.env < args.num_envs:
        parser.error(f"need --num_envs >= 2 and 0 <= --env < --num_envs (got {args.num_envs}, {args.env}).")
    if set(args.unfrozen) - set(PARTS):
        parser.error(f"unknown --unfrozen parts {sorted(set(args.unfrozen) - set(PARTS))}; known: {list(PARTS)}.")
    if not 0 < args.suspend_at < args.suspend_at + args.suspend_steps < args.steps:
        parser.error("need 0 < --suspend_at < --suspend_at + --suspend_steps < --steps.")
    try:
        import_task_modules(args.modules)
        torch.use_deterministic_algorithms(True, warn_only=True)  # torch.empty buffers hold NaN, not garbage
        reference, _ = _rollout(args, suspend=False)
        ours, drawn = _rollout(args, suspend=True)
    except (ValueError, TypeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2

    table = PrettyTable(["env", "quantity", "first active step", "max error", "likely cause"])
    table.align["quantity"] = "l"
    scratch: set[str] = set()
    for e in range(args.num_envs):
        first: dict[str, tuple[int, float]] = {}
        for i, state in enumerate(ours[e]):
            for name, value in state.items():
                ref = reference[e][i][name]
                if not torch.equal(bits(value), bits(ref)):
                    error = float((value.double() - ref.double()).abs().nan_to_num(math.inf).max())
                    step, worst = first.get(name, (i, 0.0))
                    first[name] = (step, max(worst, error))
        cause = "shared random generator" if drawn else "leak"
        for name, (step, error) in sorted(first.items(), key=lambda x: x[1][0]):
            if step >= args.suspend_at:
                table.add_row([e, name, step, f"{error:.3g}", cause])
            elif name.startswith("state."):  # both runs did the same so far: memory nothing wrote yet
                scratch.add(name)
            else:
                table.add_row([e, name, step, f"{error:.3g}", "nondeterministic (before the suspension)"])
    compared = len(reference[0][0])
    print(f"Task {args.task}: env {args.env} suspended at step {args.suspend_at} for {args.suspend_steps} steps,"
          f" {args.num_envs} envs, {args.steps} steps, {compared} quantities per env and step.")
    print("Global torch generator drawn after suspension by: " + (", ".join(f"{k} ({v} steps)" for k, v in drawn.items())
                                                                  or "nothing (a divergence is a leak)"))
    if scratch:
        print("Not compared: buffers that already differ before the suspension, where both runs did the same (scratch"
              " memory allocated uninitialized, e.g. Warp's wp.empty): " + ", ".join(sorted(scratch)))
    if not table.rows:
        print("No divergence: suspended-then-resumed envs retrace the never-suspended run bit for bit.")
        return 0
    print(table)
    return 1


if __name__ == "__main__":
    sys.exit(main())
