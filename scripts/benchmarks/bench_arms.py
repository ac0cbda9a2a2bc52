"""Env-steps/s of an arm task: Isaac Lab's stock env with its own solver setting, the stock env with MuJoCo-Warp's
``update_data_interval = 1`` (what suspension needs), and the suspendable env with none and with half of the envs
suspended; physics steps/s beside (env-steps/s x decimation x substeps). With ``--record``, the suspendable env
recording states and actions (``DatasetRecorderManagerCfg``; the export of the open episodes and the writer's final
flush timed too); with ``--camera_task``, that task (the same arm with cameras) stepped and recorded likewise, its
camera frames/s beside. One run, side by side, on these cores; the load average is printed with the table (the
machine may be shared).

Example::

    tools/run.sh python scripts/benchmarks/bench_arms.py --task IsaacContrib-Stack-Cube-SO101-v0 --num_envs 4 16 64
    tools/run.sh python scripts/benchmarks/bench_arms.py --task IsaacContrib-Lift-Cube-SO101-IK-Abs-Suspendable \
        --camera_task IsaacContrib-Lift-Cube-SO101-IK-Abs-Camera-Suspendable --record --num_envs 4 16
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import torch
from prettytable import PrettyTable

from isaaclab.sensors import Camera

from isaaclab_suspend import cli
from isaaclab_suspend.recording import DatasetRecorderManagerCfg
from isaaclab_suspend.tasks.env_factory import open_env

CONFIGS = (
    ("stock, task's interval", False, None, 0.0, False),
    ("stock, interval 1", False, 1, 0.0, False),
    ("suspendable, none suspended", True, 1, 0.0, False),
    ("suspendable, half suspended", True, 1, 0.5, False),
)
"""(label, suspendable, update_data_interval (None: the task's), fraction suspended, recording)."""
RECORDING = ("suspendable, recording", True, 1, 0.0, True)
CAMERAS = (("cameras, none suspended", True, 1, 0.0, False), ("cameras, recording", True, 1, 0.0, True))


def measure(task: str, num_envs: int, suspendable: bool, interval: int | None, fraction: float, record: bool,
            steps: int) -> tuple[float, float, float]:
    """Env-steps/s, physics steps/s (suspended envs count: they are stepped) and camera frames/s over ``steps``
    steps after 5 warm-up steps; recording into a temporary directory, its export and final flush timed."""
    attrs = {"sim__physics__solver_cfg__update_data_interval": interval} if interval is not None else {}
    with tempfile.TemporaryDirectory() as out_dir:
        recorders = DatasetRecorderManagerCfg(dataset_export_dir_path=out_dir, dataset_filename="arms")
        with open_env(task, num_envs, suspendable=suspendable, episode_length_s=1e6,
                      recorders=recorders if record else None, **attrs) as env:
            env.reset()
            action = torch.zeros(num_envs, env.action_manager.total_action_dim, device=env.device)
            for _ in range(5):
                env.step(action)
            if fraction:
                env.suspend_envs(torch.arange(round(fraction * num_envs)))
            start = time.perf_counter()
            for _ in range(steps):
                env.step(action)
            if record:
                env.recorder_manager.export_episodes()
                env.recorder_manager.close()  # hands every episode over and waits until it is written
            rate = steps * num_envs / (time.perf_counter() - start)
            substeps = env.cfg.decimation * getattr(env.cfg.sim.physics, "num_substeps", 1)
            cameras = sum(isinstance(s, Camera) for s in env.scene.sensors.values())
    return rate, rate * substeps, rate * cameras


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", default="IsaacContrib-Stack-Cube-SO101-v0")
    parser.add_argument("--num_envs", type=cli.positive_int, nargs="+", default=[4, 16, 64])
    parser.add_argument("--steps", type=cli.positive_int, default=20, help="timed env steps per configuration")
    parser.add_argument("--record", action="store_true", help="also time the suspendable env recording")
    parser.add_argument("--camera_task", default=None, help="the same arm with cameras, timed and recorded too")
    args = parser.parse_args()
    runs = [(args.task, c) for c in CONFIGS + ((RECORDING,) if args.record else ())]
    runs += [(args.camera_task, c) for c in CAMERAS] if args.camera_task else []
    table = PrettyTable(["envs", "configuration", "env-steps/s", "physics steps/s", "camera frames/s", "vs stock"])
    for num_envs in args.num_envs:
        base = None
        for task, (label, suspendable, interval, fraction, record) in runs:
            rate, physics, frames = measure(task, num_envs, suspendable, interval, fraction, record, args.steps)
            base = base or rate
            table.add_row([num_envs, label, f"{rate:.1f}", f"{physics:.0f}", f"{frames:.0f}" if frames else "-",
                           f"{rate / base:.2f}"])
            print(table.rows[-1], f"load average {os.getloadavg()[0]:.1f}", flush=True)
    cameras = f" (cameras: {args.camera_task})" if args.camera_task else ""
    print(f"\n{args.task}{cameras}, {args.steps} timed steps per configuration, zero actions; load average (1, 5, 15"
          f" min): {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(table)


if __name__ == "__main__":
    main()
