"""Cost of serving a chunk model remotely: per-call latency of the local model and of the same model behind a
:class:`~isaaclab_suspend.serving.TcpPolicyServer` on this machine (loopback TCP), interleaved call by call.

Example::

    tools/run.sh python scripts/benchmarks/bench_remote.py --batch_sizes 16 64 256 --calls 200
"""

from __future__ import annotations

import argparse
import socket
import time

import torch
from prettytable import PrettyTable

from isaaclab_suspend import cli
from isaaclab_suspend.serving import TcpPolicyServer, TcpPolicyServerCfg, TcpChunkModel, TcpChunkModelCfg
from isaaclab_suspend.tasks.embedded import make_default_model, tasks_with_chunk_model
from isaaclab_suspend.serving.tcp.protocol import send_message

OBS_DIMS = {"Isaac-Cartpole-Suspendable": 4, "Isaac-PushCube-Suspendable": 5}
"""Width of the ``policy`` observation group of each task (the embedded models read it)."""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", default="Isaac-Cartpole-Suspendable", choices=tasks_with_chunk_model())
    parser.add_argument("--chunk", type=cli.positive_int, default=16)
    parser.add_argument("--batch_sizes", type=cli.positive_int, nargs="+", default=[16, 64, 256])
    parser.add_argument("--calls", type=cli.positive_int, default=200, help="calls per batch size and model")
    return parser.parse_args()


def median_ms(times: list[float]) -> float:
    return 1e3 * sorted(times)[len(times) // 2]


def wire_bytes(header: dict, arrays: dict) -> int:
    """Bytes of one message on the wire (length prefix, JSON header and arrays)."""
    sender, receiver = socket.socketpair()
    with sender, receiver:
        send_message(sender, header, arrays)
        sender.shutdown(socket.SHUT_WR)
        return sum(len(data) for data in iter(lambda: receiver.recv(1 << 16), b""))


def main() -> None:
    args = parse_args()
    local = make_default_model(args.task, args.chunk)
    table = PrettyTable(["batch", "local ms/call", "remote ms/call", "overhead ms", "request bytes", "reply bytes"])
    table.align = "r"
    with TcpPolicyServer(local, TcpPolicyServerCfg(port=0, chunk_length=args.chunk)) as server:
        host, port = server.address
        remote = TcpChunkModel(TcpChunkModelCfg(host=host, port=port))
        for batch in args.batch_sizes:
            rows = {"policy": torch.randn(batch, OBS_DIMS[args.task])}
            env_ids = torch.arange(batch)
            times = {"local": [], "remote": []}
            for _ in range(args.calls):
                for name, model in (("local", local), ("remote", remote)):
                    start = time.perf_counter()
                    chunk = model(rows, env_ids)
                    times[name].append(time.perf_counter() - start)
            request = wire_bytes({"type": "infer"}, {**rows, "env_ids": env_ids})
            reply = wire_bytes({"type": "chunk"}, {"chunk": chunk})
            local_ms, remote_ms = median_ms(times["local"]), median_ms(times["remote"])
            table.add_row([batch, f"{local_ms:.3f}", f"{remote_ms:.3f}", f"{remote_ms - local_ms:.3f}",
                           request, reply])
    print(f"{args.task} embedded chunk model, H = {args.chunk}, median of {args.calls} interleaved calls, loopback TCP:")
    print(table)


if __name__ == "__main__":
    main()
