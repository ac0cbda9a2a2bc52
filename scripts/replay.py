"""Replay an Isaac Lab HDF5 dataset in parallel envs, state-exactly, and check each demo's state error.

Each env resets to its demo's recorded initial state (the state alone, not the joint targets that
``InteractiveScene.reset_to`` also sets), steps the recorded actions and compares the scene state with the
recorded one after every step. Envs whose demo ended take the next demo, or are suspended when none is left.
Interval events are off (the recorded ones are re-applied from the pre-step states). Demos go back to the env
origin they were recorded at where the replay env has one (bit-exact on MuJoCo-Warp).

Checked before the env is built: the arguments, the file's ``env_args``, every demo (finite numbers only, shapes
and lengths that agree), that the replay fits in memory.

Exit status: 0 if every demo stays within ``--tolerance``, 1 if one does not, 2 on bad input or a bad file (one
line on stderr), 130 on Ctrl-C. Under torchrun the demos are split across the ranks, rank 0 reports them all with
the worst rank's exit status. ``--import MODULE`` registers a task of another package.

Examples::

    tools/run.sh python scripts/replay.py datasets/push_cube.hdf5
    tools/run.sh python scripts/replay.py datasets/push_cube.hdf5 --demos demo_0 demo_3 --tolerance 1e-6
    tools/run.sh python scripts/replay.py datasets/push_cube_camera.hdf5 --check_images   # and the images, exactly
"""

from __future__ import annotations

import argparse
import math
import sys

from tqdm import tqdm

from isaaclab_suspend import cli  # light: torch and Isaac Lab are imported after parsing, where they are used


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = cli.script_parser(__doc__)
    parser.add_argument("dataset", type=cli.existing_file, help="HDF5 dataset file")
    parser.add_argument("--task", default=None, help="task id, for a dataset that does not name one (else it must be the recorded one)")
    parser.add_argument("--num_envs", type=cli.int_in(1, cli.MAX_REPLAY_ENVS), default=None,
                        help="replay envs (default: as many as the recording had, so every demo finds its origin)")
    parser.add_argument("--demos", nargs="+", default=None, help="demo names to replay (default: all)")
    parser.add_argument("--tolerance", type=cli.float_in(0.0), default=1e-5, help="largest state error allowed (>= 0)")
    parser.add_argument("--device", type=cli.device, default="cpu")
    parser.add_argument("--shared_rng", action="store_true", help="Isaac Lab's one generator, not per-env streams")
    cli.add_deterministic_arg(parser, "auto")
    parser.add_argument("--check_images", action="store_true",
                        help="also compare the re-rendered camera images with the recorded ones (camera tasks)")
    cli.add_import_arg(parser)
    cli.add_quiet_arg(parser)
    args = parser.parse_args(argv)
    cli.resolve_task(args, default=None)  # the project's tasks are registered by now, another package's by --import
    return args


def replay(args: argparse.Namespace) -> int:
    from isaaclab_suspend.datasets import DatasetError, DatasetReader, DatasetReplayer, check_replay_fits, replay_table
    from isaaclab_suspend.datasets import check_replay_task, make_replay_env_cfg, replay_warnings
    from isaaclab_suspend.datasets.image_replay import ImageCheckingReplayer
    from isaaclab_suspend.tasks.env_factory import open_env

    with DatasetReader(args.dataset) as reader:
        task = args.task or reader.env_name
        check_replay_task(reader, task)
        if not reader.demo_names:
            raise DatasetError(f"'{reader.path}' holds no demos.")
        if unknown := sorted(set(args.demos or ()) - set(reader.demo_names)):
            raise DatasetError(f"'{reader.path}' has no demos {unknown}; it holds {len(reader.demo_names)} demos.")
        # every demo loaded and checked, and the size checked, before the env is built
        names = cli.share(args.demos or reader.demo_names)  # under torchrun: every WORLD_SIZE-th demo from RANK
        if not names:
            raise DatasetError(f"'{reader.path}' holds fewer demos than torchrun's ranks: start fewer processes.")
        demos = {name: reader.load(name, "cpu") for name in names}
        num_envs = args.num_envs or reader.recorded_num_envs or 16
        check_replay_fits(num_envs, demos, "--num_envs" if args.num_envs else f"'{reader.path}' (sim_args.num_envs)")
        try:  # the file's cfg overrides are data: checked before the env is built
            cfg = make_replay_env_cfg(task, num_envs, args.device, not args.shared_rng, reader.cfg_overrides,
                                      args.deterministic, verbose=args.verbose)
        except ValueError as err:
            raise DatasetError(f"'{reader.path}': {err}") from None
        with open_env(task, cfg=cfg, verbose=args.verbose) as env:  # an error inside is re-raised after the launcher closed, no traceback
            replayer = (ImageCheckingReplayer if args.check_images else DatasetReplayer)(env, reader, list(demos), demos)
            for warning in replay_warnings(replayer, reader, num_envs):
                print(f"[WARN] {warning}")
            with tqdm(total=len(replayer.demos), desc="demos", unit="demo",
                      disable=args.quiet or cli.is_other_rank()) as progress:
                results = replayer.run(on_done=lambda _: progress.update())
    results = cli.gather_replay(results)  # under torchrun rank 0 reports every rank's demos
    print(replay_table(results, args.check_images))
    # NaN (a diverged state) fails; with --check_images any pixel difference fails
    failed = [r.demo for r in results if not r.max_state_error <= args.tolerance or (r.max_image_error or 0) > 0]
    worst = max((r.max_state_error for r in results), key=lambda e: math.inf if math.isnan(e) else e)
    print(f"{task}: {len(results)} demos replayed in {num_envs} envs; largest state error {worst:.3g}"
          f" (tolerance {args.tolerance:g}); {len(failed)} above it{': ' + ', '.join(failed) if failed else ''}.")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.device = cli.rank_device(args.device)  # torchrun: cuda:LOCAL_RANK where CUDA is there
    return cli.run_ranks(lambda: checked_replay(args))


def checked_replay(args: argparse.Namespace) -> int:
    """:func:`replay` with the exit status of a bad file (2) or Ctrl-C (130) and one line."""
    from isaaclab_suspend.datasets import DatasetError

    try:
        return replay(args)
    except (DatasetError, FileNotFoundError) as err:
        print(f"replay.py: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\nreplay.py: interrupted.", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
