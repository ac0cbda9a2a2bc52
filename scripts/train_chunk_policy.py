"""Train a chunk policy (observation -> H actions) by behaviour cloning from an HDF5 dataset of ``record.py``.

Each sample pairs a step's ``policy`` observation with the next H actions of its episode (padded with the
last action and masked past the episode's end, as ACT does); the loss is ACT's L1 in normalised action
units over the valid steps. Episodes are split into train and validation sets. Shows a progress bar, prints
the train / validation loss of each epoch, logs them to TensorBoard and writes a checkpoint that
``scripts/eval.py --checkpoint`` and :func:`~isaaclab_suspend.learning.load_chunk_policy` load.

Example::

    tools/run.sh python scripts/record.py --task Isaac-Cartpole-Suspendable \\
        --schedule global_clock --num_envs 16 --episodes 64 --desync --output datasets/cartpole.hdf5
    tools/run.sh python scripts/train_chunk_policy.py --dataset datasets/cartpole.hdf5 --chunk 16 \\
        --epochs 50 --output outputs/bc/cartpole.pt
    tools/run.sh python scripts/eval.py --checkpoint outputs/bc/cartpole.pt --compare any,global_clock --desync
    # conditioned on committed prefixes, for real-time chunking (--schedule rtc)
    tools/run.sh python scripts/train_chunk_policy.py --dataset datasets/cartpole.hdf5 --prefix_conditioning \
        --output outputs/bc/cartpole_rtc.pt
    # from the images of a camera task's dataset (conv encoder + chunk head)
    tools/run.sh python scripts/train_chunk_policy.py --dataset datasets/push_cube_camera.hdf5 \\
        --camera scene_camera --output outputs/bc/push_cube_camera.pt
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from isaaclab_suspend import cli  # light: torch is imported after parsing, where it is used


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = cli.script_parser(__doc__)
    parser.add_argument("--dataset", required=True, help="HDF5 dataset written by scripts/record.py")
    parser.add_argument("--chunk", type=cli.positive_int, default=16, help="actions per chunk H")
    parser.add_argument("--arch", default="mlp", choices=("mlp", "transformer"))
    parser.add_argument("--camera", default=None,
                        help="learn from this camera's images (conv encoder, 'mlp' head) and the robot's own state")
    parser.add_argument("--prefix_conditioning", action="store_true",
                        help="train with random committed prefixes (training-time RTC), for --schedule rtc")
    parser.add_argument("--epochs", type=cli.positive_int, default=50)
    parser.add_argument("--steps", type=cli.positive_int, default=None,
                        help="stop after this many gradient steps in any case")
    parser.add_argument("--batch_size", type=cli.positive_int, default=256)
    parser.add_argument("--lr", type=cli.non_negative_float, default=1e-3)
    parser.add_argument("--val_fraction", type=cli.fraction, default=0.1, help="fraction of the episodes held out")
    parser.add_argument("--seed", type=cli.non_negative_int, default=0)
    parser.add_argument("--output", default=None, help="checkpoint (default: outputs/bc/<dataset stem>.pt)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing checkpoint")
    parser.add_argument("--log_dir", default=None, help="TensorBoard directory (default: beside the checkpoint)")
    parser.add_argument("--device", type=cli.device, default="cpu")
    parser.add_argument("--quiet", action="store_true", help="no progress bar nor per-epoch lines")
    args = parser.parse_args(argv)
    if args.camera and args.arch != "mlp":
        parser.error(f"--arch {args.arch}: the image policy (--camera) has an MLP chunk head only")
    if args.val_fraction == 1.0:
        parser.error("--val_fraction must lie in [0, 1): some episodes must be left to train on")
    stem = os.path.splitext(os.path.basename(args.dataset))[0]
    try:
        args.output = cli.check_writable(args.output or os.path.join("outputs", "bc", f"{stem}.pt"), "--output")
        args.log_dir = cli.check_writable(args.log_dir or os.path.splitext(args.output)[0] + "_tb", "--log_dir")
    except ValueError as err:
        parser.error(str(err))
    if os.path.exists(args.output) and not args.overwrite:
        parser.error(f"--output: '{args.output}' exists: pass --overwrite to replace it.")
    return args


def train(args: argparse.Namespace) -> None:
    from torch.utils.tensorboard import SummaryWriter

    from isaaclab_suspend.learning import BCTrainerCfg, ChunkDataset, ChunkPolicyCfg, save_chunk_policy, train_bc
    from isaaclab_suspend.learning.image_chunk_dataset import ImageChunkDataset
    from isaaclab_suspend.learning.image_chunk_policy import ImageChunkPolicyCfg

    # a DatasetError is a ValueError: one line, exit 2
    if args.camera:
        dataset = ImageChunkDataset(args.dataset, args.chunk, args.camera)
    else:
        dataset = ChunkDataset(args.dataset, args.chunk)
    print(f"{dataset}, task '{dataset.task or 'unknown'}'")
    cfg = BCTrainerCfg(epochs=args.epochs, max_steps=args.steps, batch_size=args.batch_size, lr=args.lr,
                       val_fraction=args.val_fraction, seed=args.seed, device=args.device)
    policy_cfg = (ImageChunkPolicyCfg(chunk_length=args.chunk, camera=args.camera) if args.camera
                  else ChunkPolicyCfg(chunk_length=args.chunk, arch=args.arch))
    policy_cfg.prefix_conditioning = args.prefix_conditioning
    writer = SummaryWriter(args.log_dir)
    start = time.perf_counter()
    try:
        net, history = train_bc(dataset, policy_cfg, cfg, writer=writer, progress=not args.quiet)
    finally:
        writer.close()
    seconds = time.perf_counter() - start
    info = {
        "dataset": dataset.path, "demos": len(dataset.demo_names), "samples": dataset.num_samples,
        "train_windows": history.num_train, "val_windows": history.num_val, "epochs": len(history.train_loss),
        "steps": history.steps, "seed": args.seed, "train_loss": history.train_loss[-1],
        "val_loss": history.val_loss[-1],
    }
    save_chunk_policy(args.output, net, dataset.task, info)
    print(f"{history.steps} steps, {len(history.train_loss)} epochs in {seconds:.1f} s: train loss"
          f" {history.train_loss[0]:.4f} -> {history.train_loss[-1]:.4f}, val loss {history.val_loss[-1]:.4f}"
          f" ({history.num_train} train / {history.num_val} val windows).")
    print(f"Checkpoint: {args.output}\nTensorBoard: {args.log_dir}")


def main(argv: list[str] | None = None) -> int:
    return cli.run(train, parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
