"""Write a GIF of the camera images of chosen demos of a dataset, tiled side by side, and a PNG of a grid of
labelled frames (a row per demo, steps spread over each demo's length), to look at what a recording saw; a frame
whose action starts a new chunk has a yellow border (files with chunk provenance and chunks of H > 1).

Both go to ``outputs/`` (git-ignored) by default: ``outputs/<dataset stem>_<camera>.gif`` and ``.png``.

Exit status: 0 on success, 2 on bad input (no such file, demo or camera, or a dataset without images).

Examples::

    tools/run.sh python scripts/view_dataset.py datasets/push_cube_camera.hdf5
    tools/run.sh python scripts/view_dataset.py datasets/push_cube_camera.hdf5 --demos demo_0 demo_5 \\
        --camera pusher_camera --output demos.gif --png grid.png --png_steps 6
"""

from __future__ import annotations

import argparse
import os
import sys

from isaaclab_suspend import cli  # light: h5py and Isaac Lab are imported after parsing, where they are used


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = cli.script_parser(__doc__)
    parser.add_argument("dataset", help="HDF5 dataset recorded on a camera task")
    parser.add_argument("--demos", nargs="+", default=None, help="demo names (default: the first --max_demos)")
    parser.add_argument("--max_demos", type=int, default=8, help="demos shown when --demos is not given")
    parser.add_argument("--camera", default="scene_camera", help="camera term of the 'images' group")
    parser.add_argument("--columns", type=int, default=4, help="demos per row")
    parser.add_argument("--scale", type=int, default=3, help="pixel repetition of each frame")
    parser.add_argument("--fps", type=float, default=30.0, help="GIF frame rate (the task steps at 60 Hz)")
    parser.add_argument("--output", default=None, help="GIF path (default: outputs/<dataset stem>_<camera>.gif)")
    parser.add_argument("--png", default=None,
                        help="PNG path, one row per demo, --png_steps columns (default: the GIF's, .png)")
    parser.add_argument("--png_steps", type=cli.positive_int, default=4,
                        help="stills per demo in the PNG, spread over its length (first and last step included)")
    cli.add_quiet_arg(parser)  # it prints only its result
    args = parser.parse_args(argv)
    stem = os.path.splitext(os.path.basename(args.dataset))[0]
    args.output = args.output or os.path.join("outputs", f"{stem}_{args.camera}.gif")
    args.png = args.png or os.path.splitext(args.output)[0] + ".png"
    if args.columns < 1 or args.scale < 1 or args.fps <= 0 or args.max_demos < 1:
        parser.error("--columns, --scale, --max_demos and --fps must be positive")
    try:
        for path, what, suffix in ((args.output, "--output", ".gif"), (args.png, "--png", ".png")):
            if not path.lower().endswith(suffix):
                parser.error(f"{what} '{path}' must end with {suffix}")
            cli.check_writable(path, what)
    except ValueError as err:
        parser.error(str(err))
    return args


def view(args: argparse.Namespace) -> None:
    from isaaclab_suspend.datasets import DatasetError, DatasetReader
    from isaaclab_suspend.datasets.image_frames import check_tileable, load_images, mark_chunk_starts, still_steps
    from isaaclab_suspend.datasets.image_frames import tile, write_gif, write_stills

    with DatasetReader(args.dataset) as reader:
        demos = args.demos or reader.demo_names[: args.max_demos]
        if not demos:
            raise DatasetError(f"'{reader.path}' holds no demos.")
        episodes = [mark_chunk_starts(reader, demo, load_images(reader, demo, args.camera)) for demo in demos]
    check_tileable(reader.path, dict(zip(demos, episodes)), args.columns, args.scale, args.png_steps)
    for path in (args.output, args.png):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    write_gif(tile(episodes, args.columns, args.scale), args.output, args.fps)
    print(f"wrote {args.output}: {len(demos)} demos ({', '.join(demos)}), camera '{args.camera}'")
    # each demo a row, its stills spread over its own length, each labelled with its demo and step
    write_stills([[(e[t], f"{demo} t={t}") for t in still_steps(len(e), args.png_steps)]
                  for demo, e in zip(demos, episodes)], args.png, args.scale)
    print(f"wrote {args.png}: {args.png_steps} labelled stills per demo, from its first step to its last")


def main(argv: list[str] | None = None) -> int:
    """Exit status 0, or 2 with the reason on bad input."""
    args = parse_args(argv)
    try:
        view(args)
        return 0
    except (ValueError, OSError) as err:  # a bad or missing file (DatasetError), or one that cannot be written
        print(f"view_dataset.py: error: {err}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
