"""One batching policy server for several env processes: K client processes of N Cartpole envs each run the
global clock against one :class:`~isaaclab_suspend.serving.TcpPolicyServer` (emulated model latency), unbatched
(one model call per request, in turn) and batched (concurrent requests merged into one call). Prints model calls
per tick and useful (active) env-steps/s over the measured ticks, after warm-up ticks.

Example::

    tools/run.sh python scripts/benchmarks/bench_batching.py --clients 1 2 4 --num_envs 16 --latency 0.2
"""

from __future__ import annotations

import argparse
import multiprocessing as mp

from prettytable import PrettyTable

TASK = "Isaac-Cartpole-Suspendable"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 2, 4], help="env processes K")
    parser.add_argument("--num_envs", type=int, default=16, help="envs per process")
    parser.add_argument("--latency", type=float, default=0.2, help="emulated latency of a model call [s]")
    parser.add_argument("--chunk", type=int, default=16)
    parser.add_argument("--warmup_ticks", type=int, default=2)
    parser.add_argument("--ticks", type=int, default=6, help="measured ticks per run")
    parser.add_argument("--batch_wait_ms", type=float, default=1000.0,
                        help="batched server: longest wait for the other clients (brings them into step)")
    return parser.parse_args()


def client(rank: int, args: argparse.Namespace, pipe) -> None:
    """An env process: for each (host, port) it receives, run the global clock and send its figures back."""
    from isaaclab_suspend.benchmarks.server_clients import env_process
    from isaaclab_suspend.serving import TcpChunkModel, TcpChunkModelCfg

    env_process(rank, pipe, TASK, args.num_envs, args.chunk, "global_clock", args.warmup_ticks, args.ticks,
                lambda address: TcpChunkModel(TcpChunkModelCfg(host=address[0], port=address[1])))


def run(server_cfg, model, pipes: list, args: argparse.Namespace) -> tuple[float, float]:
    """Model calls per tick (K requests / requests per call) while every client measures, and useful env-steps/s
    of the clients of ``pipes`` against one server."""
    from isaaclab_suspend.benchmarks.server_clients import measure
    from isaaclab_suspend.serving import TcpPolicyServer

    rows = []

    def counted(obs_rows, env_ids):
        rows.append(len(env_ids))
        return model(obs_rows, env_ids)

    with TcpPolicyServer(counted, server_cfg) as server:
        figures, window = measure(pipes, server.address, lambda: len(rows))
    measured = rows[window]
    requests_per_call = sum(measured) / args.num_envs / len(measured)
    return len(pipes) / requests_per_call, sum(f[1] for f in figures) / max(f[0] for f in figures)


def main() -> None:
    args = parse_args()
    import isaaclab_suspend.tasks  # noqa: F401  (registers the gym ids)
    from isaaclab_suspend.chunking import LatencyCfg, LatencyEmulator
    from isaaclab_suspend.tasks.embedded import make_default_model
    from isaaclab_suspend.serving import BatchingCfg, TcpPolicyServerCfg

    model = LatencyEmulator(make_default_model(TASK, args.chunk), LatencyCfg(fixed_s=args.latency))
    context = mp.get_context("spawn")
    pipes, processes = [], []
    for rank in range(max(args.clients)):
        parent, child = context.Pipe()
        processes.append(context.Process(target=client, args=(rank, args, child), daemon=True))
        processes[-1].start()
        pipes.append(parent)
    assert all(pipe.recv() == "ready" for pipe in pipes)
    table = PrettyTable(["clients K", "envs", "calls/tick unbatched", "calls/tick batched",
                         "env-steps/s unbatched", "env-steps/s batched", "speed-up"])
    table.align = "r"
    for k in args.clients:
        unbatched = run(TcpPolicyServerCfg(port=0, chunk_length=args.chunk), model, pipes[:k], args)
        batching = BatchingCfg(max_wait_s=args.batch_wait_ms / 1e3, max_rows=k * args.num_envs)
        batched = run(TcpPolicyServerCfg(port=0, chunk_length=args.chunk, batching=batching), model, pipes[:k], args)
        table.add_row([k, k * args.num_envs, f"{unbatched[0]:.2f}", f"{batched[0]:.2f}", f"{unbatched[1]:.0f}",
                       f"{batched[1]:.0f}", f"{batched[1] / unbatched[1]:.2f}x"])
        print(f"K = {k}: {table.rows[-1]}", flush=True)
    for pipe, process in zip(pipes, processes):
        pipe.send(None)
        process.join(60)
    print(f"\n{TASK}, embedded model with {args.latency * 1e3:g} ms emulated latency per call, H = {args.chunk},"
          f" global_clock, {args.warmup_ticks} warm-up + {args.ticks} measured ticks, batch wait"
          f" {args.batch_wait_ms:g} ms:")
    print(table)


if __name__ == "__main__":
    main()
