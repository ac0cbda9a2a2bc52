"""Audit a task for suspension: does a suspended-then-resumed env retrace the run that never suspended it?

Runs the task twice in a SuspendableManagerBasedRLEnv (never suspended; env ``--env`` suspended for
``--suspend_steps`` steps from ``--suspend_at``, then resumed), each env's action a function of its own
active-step count, and compares per env and active step every observation term, every reward term and every
per-env buffer the suspension manager froze (physics, actuators, sensors, manager terms). Prints a table of
what diverges (env, quantity, first active step, max error, likely cause) and exits 1 on any divergence, 0 if
bit-exact, 2 on bad input. Any ManagerBasedRLEnvCfg task works, also of another package (``--import``).

Each env draws from its own random stream (``SuspendCfg.per_env_random``): any divergence is a leak, and the
terms that drew after the suspension began are named. With ``--shared_rng`` (Isaac Lab's one global generator) a
suspended env that skips a draw shifts the draws of the others: a divergence after such a draw is marked "shared
random generator", one with no draw is a leak.

With ``--planner`` each env is driven by the task's embedded chunk model (replanned every step from its own
observation) instead of a sine sweep, and ``--windows`` adds suspensions: on the SO-101 lift, one env suspended
while its gripper closes on the cube and another while it holds the cube up.

Examples::

    tools/run.sh python scripts/audit_suspension.py --task Isaac-PushCube-Suspendable --num_envs 4 --steps 40
    tools/run.sh python scripts/audit_suspension.py --task IsaacContrib-Stack-Cube-SO101-v0 --import isaaclab_tasks
    tools/run.sh python scripts/audit_suspension.py --task IsaacContrib-Lift-Cube-SO101-IK-Abs-Suspendable \
        --planner --num_envs 3 --steps 53 --suspend_at 4 --suspend_steps 6 --windows 1:45:6 2:50:2
"""

from __future__ import annotations

import sys

from isaaclab_suspend import cli  # light: torch and Isaac Lab are imported after parsing, where they are used


def main(argv: list[str] | None = None) -> int:
    parser = cli.script_parser(__doc__)
    parser.add_argument("--task", required=True, help="gym task id (a ManagerBasedRLEnvCfg task)")
    cli.add_import_arg(parser)
    parser.add_argument("--num_envs", type=cli.positive_int, default=4)
    parser.add_argument("--steps", type=cli.positive_int, default=40)
    parser.add_argument("--suspend_at", type=cli.positive_int, default=5)
    parser.add_argument("--suspend_steps", type=cli.positive_int, default=13)
    parser.add_argument("--env", type=cli.non_negative_int, default=0, help="env to suspend")
    parser.add_argument("--windows", nargs="*", type=cli.suspension_window, default=[], metavar="ENV:STEP:STEPS",
                        help="more suspensions: env ENV suspended at step STEP for STEPS steps")
    parser.add_argument("--planner", action="store_true",
                        help="drive each env with the task's embedded chunk model instead of a sine sweep")
    parser.add_argument("--device", type=cli.device, default="cpu")
    parser.add_argument("--seed", type=cli.env_seed, default=42, help="seed of both runs, in [0, 2**32)")
    parser.add_argument("--presets", default=None, metavar="NAME[,NAME]",
                        help="Isaac Lab cfg presets, e.g. newton_featherstone (as the other scripts take them)")
    parser.add_argument("--unfrozen", nargs="*", default=[], help="parts left unfrozen (SuspendCfg.unfrozen_parts)")
    cli.add_deterministic_arg(parser, "auto")
    parser.add_argument("--shared_rng", action="store_true",
                        help="draw from Isaac Lab's one shared generator instead of per-env random streams")
    cli.add_quiet_arg(parser)
    parser.add_argument("overrides", nargs="*", type=cli.env_override, metavar="env.KEY=VALUE",
                        help="Hydra overrides of the task cfg, e.g. env.events.randomize_joint_state.params.std=0.2"
                             " (the seed is --seed)")
    args = parser.parse_args(argv)
    from isaaclab_suspend.tasks.embedded import planner_actions
    from isaaclab_suspend.tasks.audit import SuspensionAuditCfg, audit_suspension
    from isaaclab_suspend.tasks.env_factory import import_task_modules

    cfg = SuspensionAuditCfg(task=args.task, num_envs=args.num_envs, steps=args.steps, suspend_at=args.suspend_at,
                             suspend_steps=args.suspend_steps, env=args.env, windows=args.windows, device=args.device,
                             seed=args.seed, unfrozen=list(args.unfrozen), overrides=cli.env_overrides(args),
                             per_env_random=not args.shared_rng, deterministic=args.deterministic,
                             verbose=args.verbose)
    try:
        cfg.check()
    except ValueError as err:
        parser.error(str(err))
    try:
        import_task_modules(args.modules)
        audit = audit_suspension(cfg, planner_actions(args.task) if args.planner else None)
    except (ValueError, TypeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(audit)
    return 0 if audit.passed else 1


if __name__ == "__main__":
    sys.exit(main())
