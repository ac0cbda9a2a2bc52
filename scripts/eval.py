"""Evaluate one or several chunk policies on a suspendable task under one or several chunk schedules, side by side.

Each schedule runs on a freshly created env with the same seed and the task's embedded chunk model
(Cartpole: LQR plans; push-cube: scripted PD plans), a chunk policy trained by ``scripts/train_chunk_policy.py``
(``--checkpoint``), one served by ``scripts/serve_policy.py`` (``--remote``) or any registered source
(``--model NAME`` with its cfg fields as ``--model.FIELD VALUE`` flags). Prints a table of figures per
schedule (inference calls, episodes, their mean length and success rate, ...) and writes one folder per run
(``--output``, by default a new ``outputs/eval/<date>_<task>_<n>``): an HTML report of the run, its run log, a PNG
timeline of the first envs (active / holding / suspended, resets, chunks, model calls) and the figures as JSON;
with ``--record``, the completed episodes as a replayable HDF5 dataset of the active env-steps. Nothing of an
earlier run is replaced unless ``--overwrite`` is given.

Examples::

    # the embedded default: Cartpole + LQR chunks, the naive trigger against the global clock
    tools/run.sh python scripts/eval.py --compare any,global_clock --desync --latency gr1

    tools/run.sh python scripts/eval.py --task Isaac-PushCube-Suspendable --schedule auto --model.chunk_length 16 \\
        --num_envs 32 --steps 600 --latency 0.02+0.001n --virtual_latency

    # two policies on the same (env, episode) grid, with the paired verdict: the planner against itself at 0.6x
    tools/run.sh python scripts/eval.py --task Isaac-PushCube-Suspendable --models embedded,embedded:action_scale=0.6 \\
        --episodes_per_env 4 --desync

    # a behaviour-cloned chunk policy (task and H from the checkpoint) under every schedule
    tools/run.sh python scripts/eval.py --checkpoint outputs/bc/push_cube.pt \\
        --compare any,hold,partial_batch,global_clock,auto --desync

    # a policy served by scripts/serve_policy.py (task and H from the server), or with openpi's protocol
    tools/run.sh python scripts/eval.py --remote 127.0.0.1:5555 --compare global_clock,async --desync
    tools/run.sh python scripts/eval.py --remote openpi://127.0.0.1:8000 --model.chunk_length 16 \\
        --model.keys observation/state=policy --model.prompt "balance the pole"
    tools/run.sh python scripts/eval.py --remote gr00t://127.0.0.1:5555 --model.keys state.cartpole=policy

    # fair figures: 4 episodes from every env (not the first to finish), one JSON line per episode
    tools/run.sh python scripts/eval.py --episodes_per_env 4 --desync --episode_log outputs/episodes.jsonl

    # shard 2 of 4 (seed + 2, files <stem>-shard2of4.*); merge_shards.py merges the shards' results and verdicts
    tools/run.sh python scripts/eval.py --remote 127.0.0.1:5555 --shard 2/4 --output outputs/eval/remote
"""

from __future__ import annotations

import argparse
import os
import sys

from isaaclab_suspend import cli  # light: torch and Isaac Lab are imported after parsing, where they are used


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = cli.script_parser(__doc__)
    cli.add_env_args(parser, per_env_random=True, deterministic="off")
    cli.add_quiet_arg(parser)
    cli.add_policy_args(parser, latency_args=True, arms=True)
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
    parser.add_argument("--overwrite", action="store_true",
                        help="replace files of an earlier run: --record datasets, the run folder's files")
    args = parser.parse_args(argv)
    args.schedules = args.compare or [args.schedule]
    cli.take_report_alias(parser, args)
    arms = cli.arm_names(parser, args)  # with arms: 2 episodes per env by default, paired
    cli.apply_episode_args(parser, args, "steps", 600)
    cli.apply_shard(parser, args, files=("record", "results", "timeline", "episode_log", "output"))
    cli.check_output_args(parser, args, "timeline", "log_dir", "record", "results", "output")
    from isaaclab_suspend.runs import dataset_recorder_cfg, run_names, schedule_suffixes  # torch, Isaac Lab: now

    args.suffixes = schedule_suffixes(list(run_names(arms, args.schedules)))  # a file per run
    cli.check_episode_logs(parser, args, list(args.suffixes.values()))
    args.record_cfgs = {s: dataset_recorder_cfg(args.record, suffix) for s, suffix in args.suffixes.items()
                        if args.record}
    try:
        for cfg in args.record_cfgs.values():
            cli.check_new_datasets(cfg, args.overwrite, "--record")
    except ValueError as err:
        parser.error(str(err))
    cli.resolve_arms(parser, args)
    cli.apply_output_args(parser, args)
    cli.check_run_cfg(parser, cli.evaluation_cfg(args), args)
    return args


def evaluate(args: argparse.Namespace) -> None:
    from isaaclab_suspend import runs
    from isaaclab_suspend.chunking import stats_table

    header = cli.describe_run(args, args.steps)
    if not args.quiet:
        print(f"{header}\nSchedules: {', '.join(args.schedules)}, a fresh env each (set-up tables: --verbose)")
    opener = cli.env_opener(*((RuntimeError,) if args.remote else ()), quiet=args.quiet)  # a lost server: one line
    results = runs.evaluate(cli.evaluation_cfg(args), args.sources or args.source, opener)
    for schedule, run in results.items():
        cli.log_episodes(args.episode_log, run.episodes, args.suffixes[schedule], args.overwrite)
    written = cli.write_eval_outputs(args, header, results)  # this shard's timeline and report, before torchrun merges
    header, figures, verdicts = cli.gather_results(args, header, results)  # under torchrun: every rank's, on rank 0
    if args.results:
        written.append(cli.write_results(args.results, header, figures, args.overwrite))
    print(f"\n{header}\n{stats_table(figures)}\nEpisodes scored: {cli.describe_scoring(args)}.",
          *(f"Verdict: {v['sentence']}" for v in verdicts),  # which is better, by how much, how sure
          *cli.describe_outputs(args, written), sep="\n")
    if args.record:
        print(f"Episodes recorded to {os.path.abspath(args.record)}"
              f"{' (one file per schedule, <stem>_<schedule>.hdf5)' if len(args.schedules) > 1 else ''}")


def main(argv: list[str] | None = None) -> int:
    return cli.run(evaluate, parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
