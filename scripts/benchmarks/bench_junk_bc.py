"""Does junk in the demos hurt behaviour cloning? The same chunk policy trained on ``hold`` and ``global_clock`` data.

The expert (the task's embedded chunk model, or a chunk policy of ``scripts/train_chunk_policy.py`` with
``--expert_checkpoint``) is recorded with ``scripts/record.py`` under ``hold`` (an env reset mid-chunk records
the zero action it holds until the next tick: junk) and under ``global_clock`` (it waits suspended and
records nothing); both files are cut to the same first ``--episodes`` demos. The same chunk policy is trained
on each for every seed of ``--train_seeds``, and every policy and the expert are evaluated under
``global_clock`` on the same env set-up. Junk samples are the leading exactly-zero actions of a demo; on
push-cube the table adds the cube's distance to its target at the end of the scored episodes. Method:
docs/behaviour_cloning.rst; results: docs/results.rst.

Example::

    tools/run.sh python scripts/benchmarks/bench_junk_bc.py --task Isaac-PushCube-Suspendable --episodes 64 \\
        --train_seeds 0 1 2 --plot docs/_static/bc_junk_push_cube.png

    # a 16-action chunk policy cloned from the rsl_rl expert as the expert
    tools/run.sh python scripts/benchmarks/bench_junk_bc.py --task Isaac-PushCube-Suspendable --episodes 64 \\
        --expert_checkpoint outputs/bc_rl/push_cube_rl_bc.pt --out_dir outputs/bench_junk_bc_learned_expert

    # on pixels: image chunk policies trained from the scene camera's frames
    tools/run.sh python scripts/benchmarks/bench_junk_bc.py --task Isaac-PushCube-Camera-Suspendable \\
        --camera scene_camera --expert_checkpoint outputs/bc_rl/push_cube_camera_state_bc.pt --batch_size 128
"""

from __future__ import annotations

import argparse
import os

from prettytable import PrettyTable

from isaaclab_suspend import cli  # light: torch and Isaac Lab are imported after parsing, where they are used
from isaaclab_suspend.benchmarks.junk_experiment import (SCHEDULES, evaluate_under_global_clock, means_table,
                                                         record_expert)

def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", default="Isaac-PushCube-Suspendable", help="a task with an embedded chunk model")
    parser.add_argument("--num_envs", type=cli.positive_int, default=16, help="envs of the recordings")
    parser.add_argument("--episodes", type=cli.positive_int, default=64, help="demos kept in each dataset (held equal)")
    parser.add_argument("--chunk", type=cli.positive_int, default=16, help="H of the expert and of the trained policy")
    parser.add_argument("--expert_checkpoint", default=None,
                        help="chunk policy checkpoint of scripts/train_chunk_policy.py to use as the expert (recorded"
                             " with record.py --checkpoint; its task must be --task and its H --chunk); default: the"
                             " task's embedded chunk model")
    parser.add_argument("--seed", type=cli.env_seed, default=42, help="seed of the recordings and of the evaluations")
    parser.add_argument("--train_seeds", type=cli.non_negative_int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--arch", default="mlp", choices=("mlp", "transformer"))
    parser.add_argument("--camera", default=None, help="train image chunk policies on this camera's frames (camera tasks)")
    parser.add_argument("--batch_size", type=cli.positive_int, default=256)
    parser.add_argument("--train_steps", type=cli.positive_int, default=3000, help="gradient steps per training run")
    parser.add_argument("--eval_envs", type=cli.positive_int, default=32)
    parser.add_argument("--eval_steps", type=cli.positive_int, default=600)
    parser.add_argument("--out_dir", default="outputs/bench_junk_bc", help="datasets and checkpoints")
    parser.add_argument("--plot", default="outputs/bench_junk_bc/bc_junk.png", help="PNG path ('' for none)")
    args = parser.parse_args(argv)
    from isaaclab_suspend.learning import load_chunk_policy
    from isaaclab_suspend.tasks.embedded import tasks_with_chunk_model

    if args.task not in tasks_with_chunk_model():
        parser.error(f"--task '{args.task}' has no embedded chunk model; tasks with one: {tasks_with_chunk_model()}")
    args.expert = None
    if args.expert_checkpoint is not None:
        try:
            args.expert = load_chunk_policy(args.expert_checkpoint)
        except (FileNotFoundError, ValueError) as err:
            parser.error(str(err))
        if args.expert.chunk_length != args.chunk:
            parser.error(f"--expert_checkpoint '{args.expert_checkpoint}' plans {args.expert.chunk_length} actions per"
                         f" chunk, --chunk is {args.chunk}: the expert's H must be the H of the trained policies")
        if args.expert.task and args.expert.task != args.task:
            parser.error(f"--expert_checkpoint '{args.expert_checkpoint}' was trained on '{args.expert.task}',"
                         f" --task is '{args.task}'")
    return args


def evaluate(args: argparse.Namespace, model, label: str) -> dict:
    """``model`` evaluated under ``global_clock`` on the experiment's evaluation set-up."""
    return evaluate_under_global_clock(args.task, model, args.chunk, args.eval_envs, args.eval_steps, args.seed, label)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    from isaaclab_suspend.learning import BCTrainerCfg, ChunkDataset, ChunkPolicyCfg, load_chunk_policy
    from isaaclab_suspend.learning import save_chunk_policy, train_bc
    from isaaclab_suspend.learning.image_chunk_dataset import ImageChunkDataset
    from isaaclab_suspend.learning.image_chunk_policy import ImageChunkPolicyCfg
    from isaaclab_suspend.tasks.embedded import make_default_model

    datasets, figures = {}, {}
    for schedule in SCHEDULES:
        expert = ["--checkpoint", args.expert.path] if args.expert else []  # none: the embedded model
        path = record_expert(args.task, schedule, expert, os.path.join(args.out_dir, args.task, f"{schedule}.hdf5"),
                             args.chunk, args.num_envs, args.episodes, args.seed)
        with_all = ChunkDataset(path, args.chunk)
        if len(with_all.demo_names) < args.episodes:
            raise RuntimeError(f"{path} holds {len(with_all.demo_names)} demos, fewer than --episodes {args.episodes}.")
        demos = with_all.demo_names[: args.episodes]
        datasets[schedule] = (ImageChunkDataset(path, args.chunk, args.camera, demos) if args.camera
                              else ChunkDataset(path, args.chunk, demos=demos))
        junk, junk_episodes = datasets[schedule].junk()
        figures[schedule] = {"samples": datasets[schedule].num_samples, "junk": junk, "junk_episodes": junk_episodes}
    expert = evaluate(args, args.expert or make_default_model(args.task, args.chunk), "expert")
    rows = []
    policy_cfg = (ImageChunkPolicyCfg(chunk_length=args.chunk, camera=args.camera) if args.camera
                  else ChunkPolicyCfg(chunk_length=args.chunk, arch=args.arch))
    for schedule in SCHEDULES:
        for seed in args.train_seeds:
            cfg = BCTrainerCfg(epochs=10**6, max_steps=args.train_steps, batch_size=args.batch_size, seed=seed)
            net, history = train_bc(datasets[schedule], policy_cfg, cfg, progress=False)
            ckpt = os.path.join(args.out_dir, args.task, f"bc_{schedule}_seed{seed}.pt")
            save_chunk_policy(ckpt, net, datasets[schedule].task, {"val_loss": history.val_loss[-1]})
            result = evaluate(args, load_chunk_policy(ckpt), f"{schedule} data, seed {seed}")
            rows.append({"dataset": schedule, "seed": seed, "val_loss": history.val_loss[-1], **result})

    report(args, figures, rows, expert)


def report(args: argparse.Namespace, figures: dict, rows: list[dict], expert: dict) -> None:
    """The runs as a table, the means per dataset as a second one, and the plot."""
    from isaaclab_suspend.runs.report.runs_plot import plot_runs

    table = PrettyTable(["policy", "demos", "samples", "junk samples", "junk episodes", "train seed", "val loss",
                         "episodes scored", "success rate", "mean episode length", "final distance [m]",
                         "inference calls"])
    expert_name = f"expert ({os.path.basename(args.expert.path)})" if args.expert is not None else "expert (embedded)"
    for r in [{"dataset": None, **expert}, *rows]:
        f = figures.get(r["dataset"], {})
        table.add_row([f"BC on {r['dataset']} data" if r["dataset"] else expert_name,
                       *([args.episodes, f["samples"], f["junk"], f["junk_episodes"], r["seed"], f"{r['val_loss']:.4f}"]
                         if f else ["-"] * 6), r["episodes_scored"], f"{r['success_rate']:.3f}",
                       f"{r['mean_episode_length']:.1f}", f"{r['final_distance']:.4f}", r["inference_calls"]])
    means = means_table(rows)
    expert_source = f"chunk policy {args.expert_checkpoint}" if args.expert is not None else "embedded chunk model"
    print(f"\n{args.task}: expert ({expert_source}) recorded with {args.num_envs} envs, H = {args.chunk}, seed"
          f" {args.seed}, desynchronised starts, first {args.episodes} demos of each file; BC"
          f" {f'image ({args.camera})' if args.camera else args.arch}, batch {args.batch_size}, {args.train_steps}"
          f" steps per seed; evaluated under global_clock, {args.eval_envs} envs,"
          f" {args.eval_steps} steps, desynchronised starts, episodes that started and ended in the run.\n{table}"
          f"\n{means}")
    if args.plot:
        success = expert["has_success"]
        metrics = [("success_rate", "success rate")] * success
        metrics += [("mean_episode_length", "mean episode length [steps]")]
        metrics += [("final_distance", "cube-target distance at the end [m]")] * success
        plot_runs(rows, "dataset", SCHEDULES, [*metrics, ("val_loss", "validation loss (own data)")], args.plot,
                  f"{args.task}: BC chunk policy (H = {args.chunk}, {args.episodes} demos, seeds {args.train_seeds}),"
                  " evaluated under global_clock", reference=expert, colors=["tab:red", "tab:green"])
        print(f"Plot: {args.plot}")


if __name__ == "__main__":
    main()
