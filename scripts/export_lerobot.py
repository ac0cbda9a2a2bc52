"""Export a recorded HDF5 dataset to a LeRobot dataset (v3.0), with GR00T's modality.json beside it.

One LeRobot episode per demo and one frame per recorded sample: ``action``, ``observation.state`` (the
``policy`` group), ``observation.images.<cam>`` per camera, other per-sample vectors as extra features, the task
text, fps from the task's control rate. The mapping back to the env (term slices, padding, source) is in
``meta/isaaclab_suspend.json``; ``eval.py --checkpoint`` reads it to run a LeRobot policy trained on the export.
Layout: docs/lerobot.rst; figures: docs/results.rst.

Examples::

    # cameras as AV1 videos (LeRobot's default, lossy)
    tools/run.sh python scripts/export_lerobot.py datasets/push_cube_camera.hdf5 --output datasets/lerobot/push_cube

    # lossless (PNG frames in the parquet files), with a task text
    tools/run.sh python scripts/export_lerobot.py datasets/push_cube_camera.hdf5 --output datasets/lerobot/pc_png \\
        --no_video --task "push the red cube onto the green strip" --repo_id local/push_cube

    # state only (no camera) from the same recording, for a state-only policy
    tools/run.sh python scripts/export_lerobot.py datasets/push_cube_camera.hdf5 --output datasets/lerobot/pc_state \\
        --cameras
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from tqdm import tqdm

from isaaclab_suspend import cli  # light: torch, Isaac Lab and LeRobot are imported after parsing, where they are used


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = cli.script_parser(__doc__)
    parser.add_argument("dataset", help="HDF5 dataset of scripts/record.py")
    parser.add_argument("--output", required=True, help="LeRobot dataset root (a new directory)")
    parser.add_argument("--repo_id", default="", help="LeRobot repo id (default: local/<output's name>)")
    parser.add_argument("--task", default="", help="task text of every frame (default: the recorded task id)")
    parser.add_argument("--robot", default="", choices=("", cli.SO101_ROBOT),
                        help="write observation.state and action in a real robot's names and units (so101_follower:"
                             " the SO-101's joint positions and joint targets, recorded in radians, come out as"
                             " shoulder_pan.pos ... gripper.pos in degrees and 0-100, with its robot_type and GR00T's"
                             " SO-100/SO-101 modality.json, and no other features)")
    parser.add_argument("--environment_state", nargs="+", default=[], metavar="TERM",
                        help="policy observation terms written as observation.environment_state (e.g. cube_pose_b:"
                             " what a state-only policy needs to know of the scene)")
    parser.add_argument("--cameras", nargs="*", metavar="CAM",
                        help="cameras exported (default: all recorded; the flag alone: none, a state-only dataset)")
    videos = parser.add_mutually_exclusive_group()
    videos.add_argument("--no_video", action="store_true", help="store frames as PNG (lossless) instead of mp4")
    videos.add_argument("--vcodec", default="libsvtav1", choices=cli.VCODECS, help="video codec (lossy)")
    cli.add_quiet_arg(parser)
    args = parser.parse_args(argv)
    if not os.path.isfile(args.dataset):
        parser.error(f"dataset file not found: '{args.dataset}'")
    if os.path.exists(args.output):
        parser.error(f"--output '{args.output}' exists: choose a new directory (the export never overwrites)")
    cli.check_output_args(parser, args, "output")  # its folder can be made here, before the dataset is read
    args.on_interrupt = f"Interrupted: nothing exported ('{args.output}' removed)."
    return args


def export(args: argparse.Namespace) -> None:
    from isaaclab_suspend.datasets import DatasetReader
    from isaaclab_suspend.lerobot.export import LeRobotExportCfg, export_lerobot

    with DatasetReader(args.dataset) as reader:  # the totals for the bar; a bad file stops here
        total = sum(int(reader.demo_attrs(name).get("num_samples", 0)) for name in reader.demo_names)
    cfg = LeRobotExportCfg(output=args.output, repo_id=args.repo_id, task=args.task, use_videos=not args.no_video,
                           vcodec=args.vcodec, robot=args.robot,
                           environment_state=tuple(args.environment_state),
                           cameras=None if args.cameras is None else tuple(args.cameras))
    start = time.perf_counter()
    done = [0]  # frames exported (a disabled bar counts none)

    def progress(frames: int) -> None:
        bar.update(frames - done[0])
        done[0] = frames

    with tqdm(total=total, desc="frames", unit="fr", disable=args.quiet, delay=1.0) as bar:  # none before an error
        sidecar = export_lerobot(args.dataset, cfg, progress=progress)
    frames = done[0]
    seconds = time.perf_counter() - start
    images = "no cameras" if not sidecar.cameras else (
        f"cameras {sidecar.cameras} as {'PNG (lossless)' if args.no_video else args.vcodec + ' video (lossy)'}")
    print(f"{sidecar.source['demos']} episodes, {frames} frames of '{sidecar.source['env_name']}' exported to"
          f" {os.path.abspath(args.output)} in {seconds:.1f} s ({frames / max(seconds, 1e-9):.0f} frames/s);"
          f" state {sidecar.state.dim} ({list(sidecar.state.terms)}), action {sidecar.action.dim}, {images},"
          f" extra features {list(sidecar.extras)}, task '{sidecar.task}'.")


def main(argv: list[str] | None = None) -> int:
    return cli.run(export, parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
