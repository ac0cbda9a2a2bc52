"""Completion-order bias: the first N episodes to finish against the same number of episodes from every env.

GR00T's simulation evaluation and IsaacLab-Arena count the first N episodes to finish. When episodes differ in
length, the envs that draw short ones finish more of them within that budget, so short episodes, which are
often the successes, are over-represented. Here push-cube runs with targets on both sides of the cube's start
(x = 0.4 m, ``--x_range``) and a long time budget (``--episode_length_s``): the scripted planner pushes a cube
ahead to its target in a short episode, but cannot pull one back, which then times out, a long failure. Each protocol runs on
the same env, seed and embedded chunk policy (``global_clock``):

* ``first N to finish``: every env runs freely; the first N = num_envs x K episodes to end are scored;
* ``K per env``: every env runs exactly K episodes and then waits suspended until all have
  (:class:`~isaaclab_suspend.runs.EpisodeLedger`, ``eval.py --episodes_per_env K``);
* ``reference``: K_ref per env (a larger K), the estimate the two are compared with.

Example::

    tools/run.sh python scripts/benchmarks/bench_fair_eval.py --num_envs 16 --episodes_per_env 1 --seeds 42 43 44 45
"""

from __future__ import annotations

import argparse
import statistics

from prettytable import PrettyTable

from isaaclab_suspend import cli  # light: torch and Isaac Lab are imported after parsing, where they are used

TASK = "Isaac-PushCube-Suspendable"


def run(env, args: argparse.Namespace, seed: int, per_env: int | None, first: int | None) -> dict:
    """One protocol on ``env`` from a fresh reset: ``per_env`` episodes from every env, or the ``first`` to end."""
    from isaaclab_suspend import runs
    from isaaclab_suspend.chunking import ActionChunkingPolicy
    from isaaclab_suspend.runs import EpisodeLedger
    from isaaclab_suspend.tasks.embedded import make_default_model

    policy = ActionChunkingPolicy(make_default_model(TASK, args.chunk), env, chunk_length=args.chunk,
                                  schedule="global_clock")
    obs = runs.start_episodes(env, seed, desync=False)  # a full reset also resumes the envs a previous run retired
    ledger = EpisodeLedger(env, per_env=per_env, retire=policy.retire, seed=seed)
    steps = 0
    for _ in runs.rollout(env, policy, obs, args.max_steps, ledger):
        steps += 1
        if first is not None and ledger.ended_count >= first:  # a host count: no device read
            break
    records = ledger.records()[:first] if first is not None else ledger.records()
    per_env_counts = [sum(r["env_id"] == i for r in records) for i in range(env.num_envs)]
    policy.close()
    return {**ledger.as_dict(records), "steps": steps, "min_per_env": min(per_env_counts),
            "max_per_env": max(per_env_counts)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--num_envs", type=cli.positive_int, default=16)
    parser.add_argument("--episodes_per_env", type=cli.positive_int, default=1, help="K")
    parser.add_argument("--reference_per_env", type=cli.positive_int, default=3, help="K of the reference run")
    parser.add_argument("--x_range", type=float, nargs=2, default=(0.0, 1.2), help="target x range [m]")
    parser.add_argument("--episode_length_s", type=float, default=8.0, help="time budget of an episode [s]")
    parser.add_argument("--chunk", type=cli.positive_int, default=16)
    parser.add_argument("--seeds", type=cli.non_negative_int, nargs="+", default=[42])
    parser.add_argument("--max_steps", type=cli.positive_int, default=20_000)
    args = parser.parse_args(argv)
    k, n = args.episodes_per_env, args.num_envs * args.episodes_per_env
    protocols = {f"first {n} to finish": (None, n), f"{k} per env": (k, None),
                 f"reference ({args.reference_per_env} per env)": (args.reference_per_env, None)}
    rows = {name: [] for name in protocols}
    env_args = argparse.Namespace(task=TASK, num_envs=args.num_envs, device="cpu", seed=args.seeds[0], presets=None)
    with cli.open_env(env_args, commands__target__x_range=tuple(args.x_range),
                      episode_length_s=args.episode_length_s) as env:
        for seed in args.seeds:
            for name, (per_env, first) in protocols.items():
                rows[name].append(run(env, args, seed, per_env, first))
                print(f"seed {seed}, {name}: {rows[name][-1]}", flush=True)
    table = PrettyTable(["protocol", "episodes", "success rate", "mean length", "episodes per env", "steps"])
    for name, runs in rows.items():
        mean = {key: statistics.fmean(r[key] for r in runs) for key in ("success_rate", "mean_episode_length",
                                                                          "steps", "episodes_scored")}
        rates = [r["success_rate"] for r in runs]
        spread = f" ({min(rates):.3f}-{max(rates):.3f})" if len(runs) > 1 else ""
        table.add_row([name, f"{mean['episodes_scored']:.0f}", f"{mean['success_rate']:.3f}{spread}",
                       f"{mean['mean_episode_length']:.1f}",
                       f"{min(r['min_per_env'] for r in runs)}-{max(r['max_per_env'] for r in runs)}",
                       f"{mean['steps']:.0f}"])
    print(f"\n{TASK}, target x in {tuple(args.x_range)} m, {args.episode_length_s:g} s episodes, {args.num_envs} envs,"
          f" H = {args.chunk}, global_clock,"
          f" seeds {args.seeds} (means over seeds, success-rate range in brackets), CPU.\n{table}")


if __name__ == "__main__":
    main()
