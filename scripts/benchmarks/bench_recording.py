"""Per-step recording cost: SuspendableRecorderManager against Isaac Lab's stock RecorderManager.

Both managers record the same terms (Isaac Lab's ``ActionStateRecorderManagerCfg``: initial state, post-step
states, actions, policy observations, processed actions) on the same env instance, at the same time: a
stand-in recorder forwards every hook call of the env to both, in an order that alternates step by step, and
times each. Both therefore see the same data, the same episodes and the same exports (both write HDF5
files, gzip level 2 as Isaac Lab's default). Reported per env step:

* step hooks: ``record_pre_step``, ``record_post_physics_decimation_step`` and ``record_post_step`` (the
  terms' own calls, e.g. ``scene.get_state``, plus the storing);
* episode ends: ``record_pre_reset`` (success, export), ``record_post_reset`` and ``reset``, without the
  HDF5 write itself, averaged over all steps;
* HDF5 write: Isaac Lab's ``HDF5DatasetFileHandler.add_env_args``, ``write_episode`` and ``flush``, which both
  managers call with the same episodes (reported apart: it is the same code for both).

The recording cost is the step hooks plus the episode ends; the total adds the HDF5 write.

Example::

    tools/run.sh python scripts/benchmarks/bench_recording.py --num_envs 64 512 --steps 300
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import defaultdict

import torch
from prettytable import PrettyTable

from isaaclab.envs.mdp.recorders.recorders_cfg import ActionStateRecorderManagerCfg
from isaaclab.managers import RecorderManager

from isaaclab_suspend import cli
from isaaclab_suspend.managers import SuspendableRecorderManager
from isaaclab_suspend.utils import open_env

STEP_HOOKS = ("record_pre_step", "record_post_physics_decimation_step", "record_post_step")
RESET_HOOKS = ("record_pre_reset", "record_post_reset", "reset")


class TimedRecorders:
    """Stands in for ``env.recorder_manager``: forwards each hook to every manager and times each call.

    The order of the managers alternates at every ``record_pre_step``, so neither always runs first.
    """

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

    def time_writes(self, name: str, handler) -> None:
        """Time the HDF5 writes of manager ``name`` under the key ``"hdf5"``."""
        for method in ("add_env_args", "write_episode", "flush"):
            original = getattr(handler, method)

            def timed(*args, _original=original, **kwargs):
                start = time.perf_counter()
                out = _original(*args, **kwargs)
                self.seconds[name]["hdf5"] += time.perf_counter() - start
                return out

            setattr(handler, method, timed)


def measure(task: str, num_envs: int, steps: int, warmup: int, out_dir: str) -> list[dict]:
    def cfg(name: str) -> ActionStateRecorderManagerCfg:
        return ActionStateRecorderManagerCfg(dataset_export_dir_path=out_dir, dataset_filename=f"{name}_{num_envs}")

    with open_env(task, num_envs, recorders=cfg("suspendable")) as env:
        assert isinstance(env.recorder_manager, SuspendableRecorderManager)
        managers = {"Isaac Lab RecorderManager": RecorderManager(cfg("stock"), env),
                    "SuspendableRecorderManager": env.recorder_manager}
        timed = env.recorder_manager = TimedRecorders(managers)
        for name, manager in managers.items():
            timed.time_writes(name, manager._dataset_file_handler)
        gen = torch.Generator().manual_seed(0)
        env.reset()
        # desynchronised episodes, so that some end (and are exported) at most steps
        env.episode_length_buf[:] = torch.randint(0, int(env.max_episode_length), (num_envs,), generator=gen)
        resets = 0
        for step in range(warmup + steps):
            if step == warmup:
                for seconds in timed.seconds.values():
                    seconds.clear()
                resets = 0
            _, _, term, trunc, _ = env.step(2.0 * torch.rand(num_envs, 1, generator=gen) - 1.0)
            resets += int((term | trunc).sum())
        env.recorder_manager = managers["SuspendableRecorderManager"]
        managers["Isaac Lab RecorderManager"].close()
    rows = []
    for name, seconds in timed.seconds.items():
        hooks = sum(seconds[h] for h in STEP_HOOKS) / steps
        write = seconds["hdf5"] / steps
        ends = sum(seconds[h] for h in RESET_HOOKS) / steps - write
        rows.append({"num_envs": num_envs, "manager": name, "hooks_ms": 1e3 * hooks, "ends_ms": 1e3 * ends,
                     "cost_ms": 1e3 * (hooks + ends), "write_ms": 1e3 * write, "total_ms": 1e3 * (hooks + ends + write),
                     "episodes": resets})
    stock, ours = rows
    for key in ("hooks", "cost", "total"):
        ours[f"{key}_x"] = stock[f"{key}_ms"] / ours[f"{key}_ms"]
    for row in rows:
        print(row, flush=True)
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
    table = PrettyTable(["num_envs", "recorder", "step hooks", "stock / ours", "episode ends", "recording cost",
                         "stock / ours ", "HDF5 write", "total", "stock / ours  "])
    for r in rows:
        ours = "hooks_x" in r
        table.add_row([r["num_envs"], r["manager"], f"{r['hooks_ms']:.3f}", f"{r['hooks_x']:.1f}x" if ours else "",
                       f"{r['ends_ms']:.3f}", f"{r['cost_ms']:.3f}", f"{r['cost_x']:.1f}x" if ours else "",
                       f"{r['write_ms']:.3f}", f"{r['total_ms']:.3f}", f"{r['total_x']:.1f}x" if ours else ""])
    episodes = [r["episodes"] for r in rows[::2]]
    print(f"\nTask {args.task}, random actions, desynchronised episodes, {args.steps} steps per size, CPU; both"
          f" recorders on the same env, hook by hook; ms per env step. Episodes ended: {episodes}.")
    print(table)


if __name__ == "__main__":
    main()
