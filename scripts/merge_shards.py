"""Merge the shards of a run: the figures of ``eval.py --shard I/K --results`` into one table (from the shards' run
folders, ``--runs``: with the verdicts over every shard's episodes, each paired within its shard), and the HDF5
datasets of ``record.py --shard I/K`` (or ``eval.py --record``) into one dataset.

Files named as shards (``<stem>-shard<I>of<K>``) must come as whole sets of K, unless ``--partial``. The merged
dataset is written beside ``--output`` under a temporary name and renamed once complete: a failure leaves no
partial file (nor does Ctrl-C or SIGTERM), and an ``--output`` that is one of the inputs (under any name) is refused;
a demo holding NaN or inf is refused, as replay and export refuse it. Exit status 2 on bad input, 130 when
interrupted.

Examples::

    tools/run.sh python scripts/merge_shards.py --results outputs/eval-shard*of4.json
    tools/run.sh python scripts/merge_shards.py --runs outputs/eval/remote-shard*of4
    tools/run.sh python scripts/merge_shards.py --datasets datasets/cartpole-shard*of4.hdf5 \\
        --output datasets/cartpole.hdf5
"""

from __future__ import annotations

import argparse
import os
import sys

from isaaclab_suspend.cli.arguments import add_quiet_arg  # light: h5py and Isaac Lab are imported after parsing


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--results", nargs="+", default=[], help="JSON files of eval.py --results, one per shard")
    parser.add_argument("--runs", nargs="+", default=[], help="eval.py's run folders (--output), one per shard, or"
                        " their run logs (episodes.jsonl): the table and the verdicts over every shard's episodes")
    parser.add_argument("--datasets", nargs="+", default=[], help="HDF5 datasets, one per shard, in shard order")
    parser.add_argument("--output", default=None, help="merged dataset (with --datasets)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --output")
    parser.add_argument("--partial", action="store_true", help="merge the shards given even if some of a set of K"
                        " are missing (by default a missing shard is an error)")
    add_quiet_arg(parser)  # it prints only its result
    args = parser.parse_args(argv)
    from isaaclab_suspend.datasets.shards import check_shard_set, same_file

    if not args.results and not args.runs and not args.datasets:
        parser.error("nothing to merge: pass --results or --runs, and/or --datasets")
    if args.results and args.runs:
        parser.error("--results and --runs both give the shards' figures (a run folder holds them too): pass one")
    if args.datasets and not args.output:
        parser.error("--datasets needs --output, the merged dataset")
    if args.output and not args.output.endswith(".hdf5"):
        args.output += ".hdf5"  # as Isaac Lab's file handler names it
    if args.output and any(same_file(path, args.output) for path in args.datasets):
        parser.error(f"--output '{args.output}' is one of the --datasets (the same file): write the merge to a new"
                     " file")
    if args.output and os.path.isdir(args.output):
        parser.error(f"--output '{args.output}' is a folder")
    if args.output and os.path.lexists(args.output) and not args.overwrite:
        parser.error(f"'{args.output}' exists: pass --overwrite to replace it")
    try:
        check_shard_set(args.results, args.partial)
        check_shard_set(args.runs, args.partial)
        check_shard_set(args.datasets, args.partial)
    except ValueError as err:
        parser.error(str(err))
    return args


def merged_report(results: list[str], runs: list[str]) -> str:
    """The table of the shards' figures merged per run, under the shards' headers, from their ``results`` files
    or their ``runs`` (run folders or logs), then with the verdicts over every shard's episodes."""
    from isaaclab_suspend.datasets.shards import merge_results, read_results
    from isaaclab_suspend.chunking import stats_table

    if runs:
        from isaaclab_suspend.runs import merge_shard_logs  # torch and Isaac Lab: only for run logs

        header, figures, verdicts = merge_shard_logs(runs)
    else:
        merged = merge_results([read_results(path) for path in results])
        header, figures, verdicts = merged["header"], merged["schedules"], []
    return "\n".join([header, str(stats_table(figures)), *(f"Verdict: {v['sentence']}" for v in verdicts)])


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from isaaclab_suspend.datasets.shards import merge_datasets

    try:
        if args.results or args.runs:
            print(merged_report(args.results, args.runs))
        if args.datasets:
            episodes, samples = merge_datasets(args.datasets, args.output)
            print(f"{episodes} episodes ({samples} samples) of {len(args.datasets)} shards written to"
                  f" {os.path.abspath(args.output)}")
    except (OSError, ValueError, KeyError, TypeError) as err:  # DatasetError is a ValueError
        print(f"merge_shards.py: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the partial merge is removed
        print("merge_shards.py: interrupted: no merged dataset written.", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
