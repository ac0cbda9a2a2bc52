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
import resource
import tempfile
import time
from collections import defaultdict

import torch
from prettytable import PrettyTable

from isaaclab.envs.mdp.recorders.recorders_cfg import ActionStateRecorderManagerCfg
from isaaclab.managers import RecorderManager

from isaaclab_suspend import cli
from isaaclab_suspend.recording import SuspendableRecorderManager
from isaaclab_suspend.utils import open_env

STEP_HOOKS = ("record_pre_step", "record_post_physics_decimation_step", "record_post_step")
RESET_HOOKS = ("record_pre_reset", "record_post_reset", "reset")


class TimedRecorders:
    """Stands in for ``env.recorder_manager``: forwards each hook to every manager (in an order that alternates at
    every ``record_pre_step``) and times each call."""

    def __init__(self, managers: dict[str, RecorderManager]):
        self.managers = managers
        self.seconds: dict[str, dict[str, float]] = {name: defaultdict(float) for name in managers}
        self._order = list(managers)

    @property
    def active_terms(self) -> list[str]:
        return next(iter(self.managers.values())).active_terms

    def __getattr__(self, hook: str):
        if hook not in STEP_HOOKS + RESET_HOOKS:
            raise AttributeError(hook)

        def forward(*args, **kwargs):
            if hook == "record_pre_step":
                self._order.reverse()
            out = {}
            for name in self._order:
                start = time.perf_counter()
                out = getattr(self.managers[name], hook)(*args, **kwargs)
                self.seconds[name][hook] += time.perf_counter() - start
            return out  # reset() returns a log dict: both managers return {}

        return forward

    def time_calls(self, name: str, obj, methods: tuple[str, ...], key: str) -> None:
        """Time the calls of ``obj.<methods>`` for manager ``name`` under ``key``."""
        for method in methods:
            original = getattr(obj, method)

            def timed(*args, _original=original, **kwargs):
                start = time.perf_counter()
                out = _original(*args, **kwargs)
                self.seconds[name][key] += time.perf_counter() - start
                return out

            setattr(obj, method, timed)


def measure(task: str, num_envs: int, steps: int, warmup: int, out_dir: str) -> list[dict]:
    def cfg(name: str) -> ActionStateRecorderManagerCfg:
        return ActionStateRecorderManagerCfg(dataset_export_dir_path=out_dir, dataset_filename=f"{name}_{num_envs}")

    with open_env(task, num_envs, recorders=cfg("suspendable")) as env:
        managers = {"Isaac Lab RecorderManager": RecorderManager(cfg("stock"), env),
                    "SuspendableRecorderManager": env.recorder_manager}
        timed = env.recorder_manager = TimedRecorders(managers)
        stock, ours = managers.values()
        timed.time_calls("Isaac Lab RecorderManager", stock._dataset_file_handler,
                         ("add_env_args", "write_episode", "flush"), "hdf5")
        timed.time_calls("SuspendableRecorderManager", ours, ("export_episodes",), "hdf5")
        # inside record_pre_step: the hand-over of the episodes due and the writer's check
        timed.time_calls("SuspendableRecorderManager", ours, ("_check_writer",), "check")
        children_cpu = sum(resource.getrusage(resource.RUSAGE_CHILDREN)[:2])  # user + system seconds
        gen, resets = torch.Generator().manual_seed(0), 0
        env.reset()
        cli.desync_episodes(env, gen)  # so that some episodes end (and are exported) at most steps
        for step in range(warmup + steps):
            if step == warmup:
                for seconds in timed.seconds.values():
                    seconds.clear()
                resets = 0
            _, _, term, trunc, _ = env.step(2.0 * torch.rand(num_envs, 1, generator=gen) - 1.0)
            resets += int((term | trunc).sum())
        start, ours_seconds = time.perf_counter(), timed.seconds["SuspendableRecorderManager"]
        ours.close()  # what is still queued counts as written on the step thread
        ours_seconds["drain"] = time.perf_counter() - start
        ours_seconds["writer"] = sum(resource.getrusage(resource.RUSAGE_CHILDREN)[:2]) - children_cpu
        env.recorder_manager = ours
        managers["Isaac Lab RecorderManager"].close()
    rows = []
    for name, seconds in timed.seconds.items():
        hooks = (sum(seconds[h] for h in STEP_HOOKS) - seconds["check"]) / steps
        ends = (sum(seconds[h] for h in RESET_HOOKS) - seconds["hdf5"]) / steps
        write = (seconds["hdf5"] + seconds["check"] + seconds["drain"]) / steps
        total = hooks + ends + write
        rows.append({"num_envs": num_envs, "manager": name, "hooks_ms": 1e3 * hooks, "ends_ms": 1e3 * ends,
                     "write_ms": 1e3 * write, "drain_ms": 1e3 * seconds["drain"] / steps, "share": write / total,
                     "total_ms": 1e3 * total, "writer_ms": 1e3 * seconds["writer"] / steps, "episodes": resets})
    stock, ours = rows
    for key in ("hooks", "total"):
        ours[f"{key}_x"] = stock[f"{key}_ms"] / ours[f"{key}_ms"]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", default="Isaac-Cartpole-Suspendable")
    parser.add_argument("--num_envs", type=cli.positive_int, nargs="+", default=[64, 512])
    parser.add_argument("--steps", type=cli.positive_int, default=300, help="measured env steps per size")
    parser.add_argument("--warmup", type=cli.non_negative_int, default=20, help="env steps before measuring")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as out_dir:
        rows = [row for n in args.num_envs for row in measure(args.task, n, args.steps, args.warmup, out_dir)]
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
