"""Per-step recording cost: SuspendableRecorderManager against Isaac Lab's stock RecorderManager.

Both managers record the same terms (Isaac Lab's ``ActionStateRecorderManagerCfg``: initial state, post-step
states, actions, policy observations, processed actions) on the same env instance, at the same time: a
stand-in recorder forwards every hook call of the env to both, in an order that alternates step by step, and
times each. Both see the same data and export the same episodes to HDF5 files (each with its default
compression: gzip 2 for Isaac Lab's, none for ours on state data). Reported per env step:

* step hooks: ``record_pre_step``, ``record_post_physics_decimation_step`` and ``record_post_step`` (the
  terms' own calls, e.g. ``scene.get_state``, plus the storing);
* episode ends: ``record_pre_reset``, ``record_post_reset`` and ``reset``, without the HDF5 write;
* HDF5 write on the step thread: Isaac Lab's ``HDF5DatasetFileHandler`` calls; for ours ``export_episodes``
  (the ended episodes left in their buffer slots, or handed over at once), the hand-over of the ended
  episodes due and the writer's check at each step (a gather per tensor into the memory shared with the
  writer, any wait for a full queue; taken out of the step hooks) and the final drain of the queue at close;
* writer process: its CPU time, beside the steps, warm-up included.

The total is the step hooks plus the episode ends plus the HDF5 write on the step thread. Example::

    tools/run.sh python scripts/benchmarks/bench_recording.py --num_envs 64 512 --steps 300
"""

from __future__ import annotations

import argparse
import tempfile

from prettytable import PrettyTable

from isaaclab_suspend import cli
from isaaclab_suspend.benchmarks.recording_timing import measure_recording


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", default="Isaac-Cartpole-Suspendable")
    parser.add_argument("--num_envs", type=cli.positive_int, nargs="+", default=[64, 512])
    parser.add_argument("--steps", type=cli.positive_int, default=300, help="measured env steps per size")
    parser.add_argument("--warmup", type=cli.non_negative_int, default=20, help="env steps before measuring")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as out_dir:
        rows = [row for n in args.num_envs for row in measure_recording(args.task, n, args.steps, args.warmup, out_dir)]
    table = PrettyTable(["num_envs", "recorder", "step hooks", "stock / ours", "episode ends", "HDF5 write",
                         "of it final drain", "write share", "total", "stock / ours ", "writer process"])
    for r in rows:
        ours = "hooks_x" in r
        table.add_row([r["num_envs"], r["manager"], f"{r['hooks_ms']:.3f}", f"{r['hooks_x']:.1f}x" if ours else "",
                       f"{r['ends_ms']:.3f}", f"{r['write_ms']:.3f}", f"{r['drain_ms']:.3f}" if ours else "",
                       f"{100 * r['share']:.0f} %", f"{r['total_ms']:.3f}", f"{r['total_x']:.1f}x" if ours else "",
                       f"{r['writer_ms']:.3f}" if ours else ""])
    episodes = [r["episodes"] for r in rows[::2]]
    print(f"\nTask {args.task}, random actions, desynchronised episodes, {args.steps} steps per size, CPU; both"
          f" recorders on the same env, hook by hook; ms per env step of the step thread (writer process: CPU)."
          f" Episodes ended: {episodes}.")
    print(table)


if __name__ == "__main__":
    main()
