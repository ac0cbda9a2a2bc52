"""Evaluate a chunk policy on a suspendable task under one or several chunk schedules, side by side.

Each schedule runs on a freshly created env with the same seed and the task's embedded chunk model
(Cartpole: LQR plans; push-cube: scripted PD plans), a chunk policy trained by ``scripts/train_chunk_policy.py``
(``--checkpoint``) or one served by ``scripts/serve_policy.py`` (``--remote``). Prints a table of figures per
schedule (inference calls, episodes, their mean length and success rate, ...), saves a PNG timeline of the first
envs (active / holding / suspended, resets, chunks, model calls), an HTML report of the run (``--report``) and,
with ``--record``, the completed episodes as a replayable HDF5 dataset of the active env-steps.

Examples::

    # the embedded default: Cartpole + LQR chunks, the naive trigger against the global clock
    tools/run.sh python scripts/eval.py --compare any,global_clock --desync --latency gr1

    tools/run.sh python scripts/eval.py --task Isaac-PushCube-Suspendable --schedule auto --chunk 16 \\
        --num_envs 32 --steps 600 --latency 0.02+0.001n --virtual_latency

    # a behaviour-cloned chunk policy (task and H from the checkpoint) under every schedule
    tools/run.sh python scripts/eval.py --checkpoint outputs/bc/push_cube.pt \\
        --compare any,hold,partial_batch,global_clock,auto --desync

    # a policy served by scripts/serve_policy.py (task and H from the server), or with openpi's protocol
    tools/run.sh python scripts/eval.py --remote 127.0.0.1:5555 --compare global_clock,async --desync
    tools/run.sh python scripts/eval.py --remote openpi://127.0.0.1:8000 --chunk 16 \\
        --openpi_keys observation/state=policy --prompt "balance the pole"
    tools/run.sh python scripts/eval.py --remote gr00t://127.0.0.1:5555 --gr00t_keys state.cartpole=policy

    # fair figures: 4 episodes from every env (not the first to finish), one JSON line per episode
    tools/run.sh python scripts/eval.py --episodes_per_env 4 --desync --episode_log outputs/episodes.jsonl

    # shard 2 of 4 (seed + 2, files <stem>-shard2of4.*); scripts/merge_shards.py merges the shards' results
    tools/run.sh python scripts/eval.py --remote 127.0.0.1:5555 --shard 2/4 --results outputs/eval.json
"""

from __future__ import annotations

import argparse
import os
import sys

from tqdm import tqdm

from isaaclab_suspend import cli  # light: torch and Isaac Lab are imported after parsing, where they are used


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    cli.add_env_args(parser, per_env_random=True, deterministic="off")
    cli.add_quiet_arg(parser)
    cli.add_policy_args(parser, latency_args=True)
    cli.add_shard_args(parser, results=True)
    cli.add_episode_args(parser)
    parser.add_argument("--compare", type=cli.schedules, default=None,
                        help="comma-separated schedules to run one after the other (overrides --schedule)")
    parser.add_argument("--steps", type=cli.positive_int, default=None, help="steps to run (default 600)")
    cli.add_report_args(parser)
    parser.add_argument("--log_dir", default=None, help="TensorBoard directory (one sub-directory per schedule)")
    parser.add_argument("--record", default=None,
                        help="HDF5 file of the completed episodes, active env-steps only (one file per schedule"
                             " with --compare: <stem>_<schedule>.hdf5)")
    parser.add_argument("--overwrite", action="store_true", help="replace existing --record files")
    args = parser.parse_args(argv)
    args.schedules = args.compare or [args.schedule]
    cli.apply_episode_args(parser, args, "steps", 600)
    cli.apply_shard(parser, args, files=("record", "results", "timeline", "episode_log", "report"))
    cli.check_output_args(parser, args, "timeline", "log_dir", "record", "results", "report")
    if args.report and os.path.isfile(args.report):
        parser.error(f"--report '{args.report}' is a file: give a folder (it gets report.html and episodes.jsonl)")
    args.suffixes = {s: f"_{s}" if len(args.schedules) > 1 else "" for s in args.schedules}  # a file per schedule
    args.record_cfgs = {s: cli.dataset_recorder_cfg(args.record, args.suffixes[s]) for s in args.schedules
                        if args.record}
    try:
        for cfg in args.record_cfgs.values():
            cli.check_new_datasets(cfg, args.overwrite, "--record")
    except ValueError as err:
        parser.error(str(err))
    cli.resolve_policy(parser, args)
    return args


def run(args: argparse.Namespace, schedule: str) -> tuple[dict, list[dict], object]:
    """Run ``schedule`` on a fresh env; returns its figures, its episode records and its timeline (and frames)."""
    with cli.open_env(args, *((RuntimeError,) if args.remote else ())) as env:
        policy = cli.make_policy(args, env, schedule)  # a policy that does not fit fails before any file exists
        if args.record:
            env.start_recording(args.record_cfgs[schedule])
        obs = cli.start_episodes(env, args.seed, args.desync)
        kept = cli.RunFigures(args, env, obs)  # the timeline (and on a camera task the report's frames)
        ledger = cli.make_ledger(args, env, policy, export="all" if args.record else None)
        progress = tqdm(cli.rollout(env, policy, obs, args.steps, ledger), total=args.steps, desc=f"{schedule:>13}",
                        unit="step", disable=args.quiet or cli.is_other_rank())
        for t in progress:
            kept.record(policy.last_step, t.step, t.obs, t.dones)
            if t.step % 20 == 0:
                progress.set_postfix(calls=policy.stats_counters.inference_calls)
        policy.close()
        figures = cli.episode_figures(ledger, args.episode_log, args.suffixes[schedule])
        return {**policy.stats, **figures}, ledger.records(), kept


def evaluate(args: argparse.Namespace) -> None:
    from isaaclab_suspend.policies import stats_table

    header = cli.describe_run(args, args.steps)
    if not args.quiet:
        print(f"{header}\nSchedules: {', '.join(args.schedules)}, a fresh env each (set-up tables: --verbose)")
    runs = {s: run(args, s) for s in args.schedules}  # episodes recorded before an error are already in the file
    written = cli.write_eval_outputs(args, header, runs)  # this shard's timeline and report, before torchrun merges
    header, results = cli.gather_results(args, header, {s: r[0] for s, r in runs.items()})  # torchrun: rank 0's
    print(f"\n{header}\n{stats_table(results)}\nEpisodes scored: {cli.describe_scoring(args)}.", *written, sep="\n")
    if args.results:
        print(f"Figures written to {cli.write_results(args.results, header, results)}")
    if args.record:
        print(f"Episodes recorded to {os.path.abspath(args.record)}"
              f"{' (one file per schedule, <stem>_<schedule>.hdf5)' if len(args.schedules) > 1 else ''}")


if __name__ == "__main__":
    sys.exit(cli.run(evaluate, parse_args()))
