"""Junk against clean demos with LeRobot's trainer: ACT trained by ``lerobot-train`` on ``hold`` and ``global_clock``
recordings of the push-cube camera expert, both evaluated by the project under ``global_clock``.

The expert (a chunk policy of ``scripts/train_chunk_policy.py``, ``--expert_checkpoint``) is recorded with
``scripts/record.py`` under each schedule (same seed, ``--episodes`` demos kept), as in ``bench_junk_bc.py``; each
file is exported with ``scripts/export_lerobot.py``'s exporter (lossless PNG frames: the trainer reads them faster
than video), an ACT is trained on each by ``lerobot-train`` (same config, CPU, offline, the first ``--episodes``
episodes, one thread per run, both runs side by side), and each checkpoint is loaded as a chunk model
(``eval.py --checkpoint``'s loader) and evaluated with ``bench_junk_bc.py``'s evaluation. A stage whose output
exists is not run again (delete the file or directory to redo it). Method: docs/lerobot.rst; results:
docs/results.rst.

Example::

    tools/run.sh python scripts/benchmarks/bench_lerobot_bc.py --expert_checkpoint outputs/bc_rl/push_cube_camera_state_bc.pt \\
        --episodes 64 --steps 2000 --out_dir outputs/bench_lerobot_bc
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from prettytable import PrettyTable

from bench_junk_bc import evaluate  # the evaluation of the project's experiment
from isaaclab_suspend import cli  # light: torch, Isaac Lab and LeRobot are imported after parsing
from isaaclab_suspend.benchmarks.junk_experiment import SCHEDULES, record_expert

TASK = "Isaac-PushCube-Camera-Suspendable"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--expert_checkpoint", required=True, help=f"chunk policy of the expert ({TASK}, H = --chunk)")
    parser.add_argument("--num_envs", type=cli.positive_int, default=16, help="envs of the recordings")
    parser.add_argument("--episodes", type=cli.positive_int, default=64, help="demos trained on (held equal)")
    parser.add_argument("--chunk", type=cli.positive_int, default=16, help="H of the expert; ACT's chunk_size and"
                        " n_action_steps")
    parser.add_argument("--seed", type=cli.env_seed, default=42, help="seed of the recordings and evaluations")
    parser.add_argument("--steps", type=cli.positive_int, default=2000, help="lerobot-train steps per run")
    parser.add_argument("--batch_size", type=cli.positive_int, default=8)
    parser.add_argument("--act", nargs="*", default=["--policy.dim_model=256", "--policy.dim_feedforward=1024",
                                                     "--policy.n_encoder_layers=2", "--policy.optimizer_lr=1e-4",
                                                     "--policy.optimizer_lr_backbone=1e-4"],
                        help="further lerobot-train arguments, the same for both runs")
    parser.add_argument("--eval_envs", type=cli.positive_int, default=32)
    parser.add_argument("--eval_steps", type=cli.positive_int, default=600)
    parser.add_argument("--out_dir", default="outputs/bench_lerobot_bc", help="datasets, exports and checkpoints")
    args = parser.parse_args(argv)
    from isaaclab_suspend.learning import load_chunk_policy

    args.task = TASK
    try:
        args.expert = load_chunk_policy(args.expert_checkpoint)
    except (FileNotFoundError, ValueError) as err:
        parser.error(str(err))
    if args.expert.chunk_length != args.chunk or args.expert.task != TASK:
        parser.error(f"--expert_checkpoint must be a chunk policy of {TASK} with H = --chunk {args.chunk}")
    return args


def train_command(args: argparse.Namespace, schedule: str, root: str, output: str) -> list[str]:
    """The ``lerobot-train`` command of one run (ACT, CPU, offline, the first ``--episodes`` episodes)."""
    episodes = ",".join(str(i) for i in range(args.episodes))
    return [os.path.join(os.path.dirname(sys.executable), "lerobot-train"), f"--dataset.repo_id=local/{schedule}",
            f"--dataset.root={root}", f"--dataset.episodes=[{episodes}]", "--policy.type=act", "--policy.device=cpu",
            "--policy.push_to_hub=false", "--policy.pretrained_backbone_weights=null",
            f"--policy.chunk_size={args.chunk}", f"--policy.n_action_steps={args.chunk}", *args.act,
            f"--batch_size={args.batch_size}", f"--steps={args.steps}", "--log_freq=100", "--save_freq=500",
            "--num_workers=0", "--wandb.enable=false", f"--output_dir={output}", "--seed=0"]


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    from isaaclab_suspend.lerobot.export import LeRobotExportCfg, export_lerobot
    from isaaclab_suspend.learning import ChunkDataset, load_chunk_policy

    base = os.path.abspath(os.path.join(args.out_dir, TASK))
    runs, figures = {}, {}
    for schedule in SCHEDULES:
        path, root = os.path.join(base, f"{schedule}.hdf5"), os.path.join(base, f"lr_{schedule}")
        if not os.path.exists(path):
            record_expert(TASK, schedule, ["--checkpoint", args.expert.path], path, args.chunk,
                          args.num_envs, args.episodes, args.seed)
        if not os.path.exists(root):
            export_lerobot(path, LeRobotExportCfg(output=root, repo_id=f"local/{schedule}", use_videos=False,
                                                  task="push the cube to the target"))
        data = ChunkDataset(path, args.chunk)
        data = ChunkDataset(path, args.chunk, demos=data.demo_names[: args.episodes])
        figures[schedule] = {"frames": data.num_samples, "junk": data.junk()[0]}
        output = os.path.join(base, f"act_{schedule}")
        if not os.path.exists(os.path.join(output, "checkpoints", "last")):
            log = open(os.path.join(base, f"train_{schedule}.log"), "w")
            runs[schedule] = subprocess.Popen(train_command(args, schedule, root, output), stdout=log, stderr=log,
                                              env={**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"})
    for schedule, run in runs.items():  # side by side, one thread each
        if run.wait() != 0:
            raise RuntimeError(f"lerobot-train on {schedule} data failed: see {base}/train_{schedule}.log")
    expert = evaluate(args, args.expert, "expert")
    rows = {s: evaluate(args, load_chunk_policy(os.path.join(base, f"act_{s}", "checkpoints", "last",
                                                             "pretrained_model")), f"ACT on {s} data")
            for s in SCHEDULES}
    table = PrettyTable(["policy", "demos", "frames", "junk frames", "episodes scored", "success rate",
                         "mean episode length", "final distance [m]", "inference calls"])
    for name, r in [("expert", expert), *rows.items()]:
        f = figures.get(name)
        table.add_row([f"ACT on {name} data" if f else f"expert ({os.path.basename(args.expert_checkpoint)})",
                       *([args.episodes, f["frames"], f["junk"]] if f else ["-"] * 3), r["episodes_scored"],
                       f"{r['success_rate']:.3f}", f"{r['mean_episode_length']:.1f}", f"{r['final_distance']:.4f}",
                       r["inference_calls"]])
    print(f"\n{TASK}: expert {args.expert_checkpoint} recorded with {args.num_envs} envs, H = {args.chunk}, seed"
          f" {args.seed}, desynchronised starts, first {args.episodes} demos of each file; ACT by lerobot-train,"
          f" batch {args.batch_size}, {args.steps} steps, {' '.join(args.act)}; evaluated under global_clock,"
          f" {args.eval_envs} envs, {args.eval_steps} steps, desynchronised starts.\n{table}")


if __name__ == "__main__":
    main()
