"""Nested observation dicts: the hand-written helpers of ``isaaclab_suspend.tensor_tree`` against ``tensordict``.

Times, side by side in one run (interleaved, median of ``--repeats`` blocks of ``--calls`` calls), what the
chunking policy does per inference call, selecting the rows of the served envs from the observation dict, and
what the transport, the recorder and the replay do per message or episode, flattening a nested dict to key paths
and back. The dict has the shape of a camera task's observation: two flat groups (``policy`` (N, 5),
``critic`` (N, 7)) and a nested one (``camera``: ``rgb`` (N, 3, 32, 32), ``depth`` (N, 32, 32)); half of the
envs are selected. Prints microseconds per call and the ratio tensordict / hand-written (one torch thread).

Example::

    tools/run.sh python scripts/benchmarks/bench_tensor_tree.py --num_envs 16 256 4096
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
from prettytable import PrettyTable
from tensordict import TensorDict

from isaaclab_suspend import cli
from isaaclab_suspend.tensor_tree import flatten_names, flatten_tree, select_rows, unflatten_tree


def observation(num_envs: int) -> dict:
    """An observation dict of ``num_envs`` envs (see the module docstring)."""
    return {"policy": torch.randn(num_envs, 5), "critic": torch.randn(num_envs, 7),
            "camera": {"rgb": torch.rand(num_envs, 3, 32, 32), "depth": torch.rand(num_envs, 32, 32)}}


def candidates(obs: dict, env_ids: torch.Tensor) -> dict[str, tuple[Callable, Callable]]:
    """Per operation: (hand-written, tensordict), each returning plain dicts as the callers need them."""
    n, flat = len(next(iter(obs.values()))), flatten_names(obs)
    paths = dict(flatten_tree(obs))
    return {
        "select rows": (lambda: select_rows(obs, env_ids),
                        lambda: TensorDict(obs, batch_size=[n])[env_ids].to_dict()),
        "select rows (apply)": (lambda: select_rows(obs, env_ids),
                                lambda: TensorDict(obs, batch_size=[n]).apply(
                                    lambda t: t.index_select(0, env_ids), batch_size=[len(env_ids)]).to_dict()),
        "flatten": (lambda: flatten_names(obs),
                    lambda: TensorDict(obs, batch_size=[]).flatten_keys("/").to_dict()),
        "unflatten": (lambda: unflatten_tree(paths),
                      lambda: TensorDict(flat, batch_size=[]).unflatten_keys("/").to_dict()),
    }


def check_equal(a: dict, b: dict) -> None:
    """Both implementations give the same tree (same keys, equal tensors)."""
    left, right = dict(flatten_tree(a)), dict(flatten_tree(b))
    if left.keys() != right.keys() or not all(torch.equal(left[k], right[k]) for k in left):
        raise RuntimeError("tensordict and the hand-written helper disagree")


def block(fn: Callable, calls: int) -> float:
    """Mean time of one call over ``calls`` calls [us]."""
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return 1e6 * (time.perf_counter() - start) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--num_envs", type=cli.positive_int, nargs="+", default=[16, 256, 4096])
    parser.add_argument("--calls", type=cli.positive_int, default=200, help="calls per block")
    parser.add_argument("--repeats", type=cli.positive_int, default=7, help="interleaved blocks per implementation")
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)  # the helpers differ in Python overhead; one thread keeps a shared machine's noise out
    table = PrettyTable(["N", "operation", "hand-written [us]", "tensordict [us]", "tensordict / hand"])
    table.align = "r"
    for num_envs in args.num_envs:
        obs = observation(num_envs)
        for name, (hand, td) in candidates(obs, torch.arange(0, num_envs, 2)).items():
            check_equal(hand(), td())
            block(hand, args.calls), block(td, args.calls)  # warm-up
            times = {"hand": [], "td": []}
            for _ in range(args.repeats):
                times["hand"].append(block(hand, args.calls))
                times["td"].append(block(td, args.calls))
            t_hand, t_td = statistics.median(times["hand"]), statistics.median(times["td"])
            table.add_row([num_envs, name, f"{t_hand:.1f}", f"{t_td:.1f}", f"{t_td / t_hand:.2f}x"])
            print(table.rows[-1], flush=True)
    print(f"\nMedian of {args.repeats} interleaved blocks of {args.calls} calls, CPU, one torch thread, torch"
          f" {torch.__version__}.")
    print(table)


if __name__ == "__main__":
    main()
