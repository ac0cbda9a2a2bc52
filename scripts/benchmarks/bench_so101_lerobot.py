"""Clean against junk demos on the SO-101 with LeRobot's trainer: one ACT (``lerobot-train``) per planner demo set,
recorded under ``hold`` and ``global_clock`` (``--start_std``: also ``global_clock`` from noisy arm starts;
``--planner_cfg grasp_noise=0.015``: a planner that misses and recovers), evaluated in the follower's action space
under suspension beside the planner and trivial baselines. Stages, each skipped where its output exists:
1. ``record.py``: ``--episodes`` successful demos per set on the pose-IK lift (``--cameras``: its camera variant,
   wrist and front cameras at 128x96), same seed, desynchronised starts, with the IK's joint targets;
2. ``export_lerobot.py --robot so101_follower --environment_state cube_pose_b --cameras``: state only, degrees and
   0-100 (``--cameras``: also ``lr_<set>_cameras``, with both cameras' videos, as a real follower records);
3. ``lerobot-train``: one state-only ACT per set, the same config, side by side, one thread each;
4. ``eval.py --episodes_per_env K --schedule global_clock`` at each ``--eval_seeds``: the planner, each ACT (on the
   joint-target task), and zero, start-pose and random joint targets. Method: docs/lerobot.rst; figures:
   docs/results.rst.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys

import torch
from prettytable import PrettyTable

from isaaclab_suspend import cli, runs
from isaaclab_suspend.lerobot import so101
from isaaclab_suspend.tasks.env_factory import open_env

TASK = "IsaacContrib-Lift-Cube-SO101-IK-Abs-Suspendable"
CAMERA_TASK = "IsaacContrib-Lift-Cube-SO101-IK-Abs-Camera-Suspendable"
JOINT_TASK = so101.follower_task(TASK)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=cli.positive_int, default=100, help="successful demos per schedule")
    parser.add_argument("--num_envs", type=cli.positive_int, default=10, help="envs of the recordings")
    parser.add_argument("--chunk", type=cli.positive_int, default=16, help="H of the planner and of ACT")
    parser.add_argument("--seed", type=cli.env_seed, default=1, help="seed of the recordings")
    parser.add_argument("--start_std", type=cli.non_negative_float, default=0.0, help="see above (0: none) [rad]")
    parser.add_argument("--cameras", action="store_true", help="record on the camera variant (see above)")
    parser.add_argument("--planner_cfg", action="append", default=[], metavar="KEY=VALUE",
                        help="a field of the planner's cfg while it records every set (record.py's flag)")
    parser.add_argument("--steps", type=cli.positive_int, default=12000, help="lerobot-train steps per run")
    parser.add_argument("--act", type=shlex.split, help="further lerobot-train arguments, one quoted string",
                        default="--batch_size=64 --policy.dim_model=256 --policy.dim_feedforward=1024"
                                " --policy.n_encoder_layers=2 --policy.optimizer_lr=1e-4 --policy.use_vae=false")
    parser.add_argument("--eval_envs", type=cli.positive_int, default=8)
    parser.add_argument("--episodes_per_env", type=cli.positive_int, default=2)
    parser.add_argument("--eval_seeds", type=cli.non_negative_int, nargs="+", default=[0, 1])
    parser.add_argument("--out_dir", default="outputs/bench_so101", help="datasets, exports, checkpoints, logs")
    return parser.parse_args()


def _run(command: list[str], log: str, wait: bool = True):
    """Run ``command`` from the repository root, its output to ``log``; raise if it fails."""
    with open(log, "w") as out:
        process = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                   env={**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"})
    if wait and process.wait() != 0:
        raise RuntimeError(f"{' '.join(command[:3])} ... failed: see {log}")
    return process


def script(name: str, *args) -> list[str]:  # the command line of scripts/<name>
    return [sys.executable, os.path.join(ROOT, "scripts", name), *map(str, args)]


def evaluate(args: argparse.Namespace, base: str, label: str, policy: list[str]) -> dict:
    """Success rate and mean length over the ``--eval_seeds`` runs of ``eval.py`` (their episode logs)."""
    records = []
    for seed in args.eval_seeds:
        log = os.path.join(base, f"eval_{label}_{seed}.jsonl")
        if not os.path.exists(log):
            _run(script("eval.py", *policy, "--num_envs", args.eval_envs, "--episodes_per_env", args.episodes_per_env,
                        "--seed", seed, "--desync", "--schedule", "global_clock", "--model.chunk_length", args.chunk,
                        "--episode_log", log + ".tmp", "--timeline", "", "--quiet"), log + ".out")
            os.replace(log + ".tmp", log)
        with open(log) as f:
            records += [json.loads(line) for line in f]
    return {"episodes": len(records), "success": sum(r["success"] for r in records) / max(len(records), 1),
            "length": sum(r["length"] for r in records) / max(len(records), 1)}


def baselines(args: argparse.Namespace, path: str) -> dict[str, dict]:
    """Zero targets, the start pose held and random targets on the joint-target task, each for as many steps as one
    evaluation's episodes could take (first eval seed); kept in ``path`` (JSON)."""
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    rows = {}
    with open_env(JOINT_TASK, args.eval_envs) as env:
        steps = int(env.max_episode_length) * args.episodes_per_env
        generator = torch.Generator(env.device).manual_seed(args.eval_seeds[0])
        for name, policy in (("zero joint targets", runs.ConstantPolicy(env, 0.0)),
                             ("start pose held", runs.HoldPosePolicy(env, so101.STATE_TERM)),
                             ("random targets in [-1, 1] rad", runs.RandomPolicy(env, generator))):
            f = runs.score(env, policy, runs.start_episodes(env, args.eval_seeds[0], desync=True), steps)
            rows[name] = {"episodes": f["episodes_scored"], "success": f["success_rate"] or 0.0,
                          "length": f["mean_episode_length"] or 0.0}
    with open(path, "w") as f:
        json.dump(rows, f)
    return rows


def main() -> None:
    args = parse_args()
    task = CAMERA_TASK if args.cameras else TASK
    base = os.path.abspath(os.path.join(args.out_dir, task))
    os.makedirs(base, exist_ok=True)
    common = [a for kv in args.planner_cfg for a in ("--model.planner_overrides", kv)]
    sets = {"hold": ("hold", common), "global_clock": ("global_clock", common)}  # label: schedule, record.py args
    if args.start_std:  # Isaac Lab's reset noise of the arm's joints
        sets["global_clock_varied"] = "global_clock", [*common, "env.events.randomize_joint_state.params.std="
                                                       f"{args.start_std}"]
    runs = {}
    for label, (clock, extra) in sets.items():
        path, root = os.path.join(base, f"so101_{label}.hdf5"), os.path.join(base, f"lr_{label}")
        if not os.path.exists(path):
            _run(script("record.py", "--task", task, "--num_envs", args.num_envs, "--episodes", args.episodes,
                        "--export", "succeeded", "--schedule", clock, "--model.chunk_length", args.chunk, "--desync",
                        "--seed", args.seed, "--output", path, "--quiet", *extra), f"{base}/record_{label}.log")
        for out, cameras in ((root, ["--cameras"]), (root + "_cameras", [])):  # state only; with the cameras
            if (cameras or args.cameras) and not os.path.exists(out):
                _run(script("export_lerobot.py", path, "--output", out, "--robot", so101.ROBOT, "--environment_state",
                            "cube_pose_b", "--repo_id", f"local/so101_{label}", *cameras, "--quiet"), out + ".log")
        output = os.path.join(base, f"act_{label}")
        if not os.path.exists(os.path.join(output, "checkpoints", "last")):
            runs[label] = _run([os.path.join(os.path.dirname(sys.executable), "lerobot-train"), "--policy.type=act",
                                f"--dataset.repo_id=local/so101_{label}", f"--dataset.root={root}", "--seed=0",
                                "--policy.device=cpu", "--policy.push_to_hub=false", f"--steps={args.steps}",
                                f"--policy.chunk_size={args.chunk}", f"--policy.n_action_steps={args.chunk}", *args.act,
                                "--log_freq=100", "--save_freq=500", "--num_workers=0", "--wandb.enable=false",
                                f"--output_dir={output}"], os.path.join(base, f"train_{label}.log"), wait=False)
    for label, run in runs.items():  # side by side, one thread each
        if run.wait() != 0:
            raise RuntimeError(f"lerobot-train on {label} data failed: see {base}/train_{label}.log")
    rows = {"planner (pose IK, embedded)": evaluate(args, base, "planner", ["--task", TASK])}
    for label in sets:
        rows[f"ACT on {label} demos"] = evaluate(args, base, f"act_{label}", ["--checkpoint", os.path.join(
            base, f"act_{label}", "checkpoints", "last", "pretrained_model")])
    rows.update(baselines(args, os.path.join(base, "baselines.json")))
    table = PrettyTable(["policy", "episodes scored", "success rate", "mean episode length", "vs planner"])
    planner = rows["planner (pose IK, embedded)"]["success"]
    for name, r in rows.items():
        table.add_row([name, r["episodes"], f"{r['success']:.3f}", f"{r['length']:.1f}",
                       f"{r['success'] / planner:.2f}" if planner else "-"])
    print(f"\n{task}: {args.episodes} planner demos per set ({args.num_envs} envs, H = {args.chunk}, seed {args.seed},"
          f" planner cfg {args.planner_cfg or 'default'}); ACT: lerobot-train, {args.steps} steps,"
          f" {' '.join(args.act)}; under global_clock, {args.eval_envs} envs x {args.episodes_per_env} episodes, seeds"
          f" {args.eval_seeds}, on {JOINT_TASK} (planner: {TASK}).\n{table}")


if __name__ == "__main__":
    main()
