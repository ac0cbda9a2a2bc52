"""GR00T's wire, one server for several env processes: K processes of N Cartpole envs each run a chunk schedule
through :class:`~isaaclab_suspend.serving.Gr00tChunkModel` (one ``get_action`` per model call, B = the served
envs), first against GR00T's service pattern (a REP socket answering one request at a time, as GR00T's
``PolicyServer`` does), then against :class:`~isaaclab_suspend.serving.Gr00tPolicyServer` with batching, both
with the same emulated model latency. Prints ``get_action`` calls and model calls per tick and useful (active)
env-steps/s over the measured ticks, after warm-up ticks.

Example::

    tools/run.sh python scripts/benchmarks/bench_gr00t.py --clients 4 --num_envs 16 --latency 0.2
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import threading

import torch
from prettytable import PrettyTable

TASK = "Isaac-Cartpole-Suspendable"
KEYS = {"state.cartpole": "policy"}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=4, help="env processes K")
    parser.add_argument("--num_envs", type=int, default=16, help="envs per process")
    parser.add_argument("--latency", type=float, default=0.2, help="emulated latency of a model call [s]")
    parser.add_argument("--chunk", type=int, default=16)
    parser.add_argument("--schedule", default="global_clock")
    parser.add_argument("--warmup_ticks", type=int, default=2)
    parser.add_argument("--ticks", type=int, default=4, help="measured ticks per run")
    parser.add_argument("--presets", default="newton_mjwarp",
                        help="physics of the env processes (newton_featherstone: the cheaper CPU solver)")
    parser.add_argument("--batch_wait_ms", type=float, default=1000.0, help="batching server: longest wait")
    return parser.parse_args()


def client(rank: int, args: argparse.Namespace, pipe) -> None:
    """An env process: for each port it receives, run the schedule and send (seconds, active env-steps, calls)."""
    from isaaclab_suspend.benchmarks.server_clients import env_process
    from isaaclab_suspend.serving import Gr00tChunkModel, Gr00tChunkModelCfg

    env_process(rank, pipe, TASK, args.num_envs, args.chunk, args.schedule, args.warmup_ticks, args.ticks,
                lambda port: Gr00tChunkModel(Gr00tChunkModelCfg(port=port, keys=KEYS, timeout_s=120.0)),
                (f"presets={args.presets}",))


class RepServer:
    """GR00T's service pattern: a REP socket, one request at a time, the model call then the emulated latency."""

    def __init__(self, model, args: argparse.Namespace):
        import zmq

        from isaaclab_suspend.serving import gr00t_codec

        self.model, self.codec, self.calls = model, gr00t_codec, 0
        self.config = {"state": gr00t_codec.modality_config([0], ["cartpole"]),
                       "action": gr00t_codec.modality_config(list(range(args.chunk)), ["action"])}
        self.context = zmq.Context()
        self.socket = self.context.socket(zmq.REP)
        self.port = self.socket.bind_to_random_port("tcp://127.0.0.1")
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self) -> None:
        import zmq

        from isaaclab_suspend.serving.gr00t.server import observation_rows

        try:
            while True:
                request, encoding = self.codec.unpackb(self.socket.recv())
                if request["endpoint"] == "get_action":
                    rows, batch, _ = observation_rows(request["data"]["observation"], KEYS)
                    reply = [{"action.action": self.model(rows, torch.arange(batch)).numpy()}, {}]
                    self.calls += 1
                else:
                    reply = {"status": "ok"} if request["endpoint"] == "ping" else self.config
                self.socket.send(self.codec.packb(reply, encoding))
        except zmq.ContextTerminated:  # closed, also while a request of a finished client was answered
            self.socket.close(linger=0)

    def close(self) -> None:
        self.context.term()


def run(port: int, pipes: list, args: argparse.Namespace, calls) -> tuple[float, float, float]:
    """``get_action`` calls per tick and client, model calls per tick (while every client measures) and useful
    env-steps/s of all clients against the server at ``port``; ``calls()`` counts its model calls."""
    from isaaclab_suspend.benchmarks.server_clients import measure

    figures, window = measure(pipes, port, calls)
    return (sum(f[2] for f in figures) / len(pipes) / args.ticks, (window.stop - window.start) / args.ticks,
            sum(f[1] for f in figures) / max(f[0] for f in figures))


def main() -> None:
    args = parse_args()
    import isaaclab_suspend.tasks  # noqa: F401  (registers the task and its embedded model)
    from isaaclab_suspend.chunking import LatencyCfg, LatencyEmulator
    from isaaclab_suspend.tasks.embedded import make_default_model
    from isaaclab_suspend.serving import BatchingCfg, Gr00tPolicyServer, Gr00tPolicyServerCfg

    model = LatencyEmulator(make_default_model(TASK, args.chunk), LatencyCfg(fixed_s=args.latency))
    context = mp.get_context("spawn")
    pipes, processes = [], []
    for rank in range(args.clients):
        parent, child = context.Pipe()
        processes.append(context.Process(target=client, args=(rank, args, child), daemon=True))
        processes[-1].start()
        pipes.append(parent)
    assert all(pipe.recv() == "ready" for pipe in pipes)
    rep = RepServer(model, args)
    rep_figures = run(rep.port, pipes, args, lambda: rep.calls)
    rep.close()
    batching = BatchingCfg(max_wait_s=args.batch_wait_ms / 1e3, max_rows=args.clients * args.num_envs)
    cfg = Gr00tPolicyServerCfg(port=0, chunk_length=args.chunk, keys=KEYS, batching=batching)
    with Gr00tPolicyServer(model, cfg) as server:
        figures = run(server.address[1], pipes, args, lambda: server.batcher.calls)
    table = PrettyTable(["server", "get_action/tick/client", "model calls/tick", "env-steps/s"], align="r")
    for name, row in (("REP, one request at a time", rep_figures), ("project, batching", figures)):
        table.add_row([name, f"{row[0]:.2f}", f"{row[1]:.2f}", f"{row[2]:.0f}"])
    for pipe, process in zip(pipes, processes):
        pipe.send(None)
        process.join(60)
    print(f"\n{TASK} ({args.presets}), {args.clients} env processes x {args.num_envs} envs, embedded model with {args.latency * 1e3:g} ms"
          f" emulated latency per call, H = {args.chunk}, {args.schedule}, {args.warmup_ticks} warm-up +"
          f" {args.ticks} measured ticks, batch wait {args.batch_wait_ms:g} ms:")
    print(table)
    print(f"speed-up of the batching server: {figures[2] / rep_figures[2]:.2f}x")


if __name__ == "__main__":
    main()
