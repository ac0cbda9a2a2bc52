"""Runs under ``torchrun``: every process one shard of the run, rank 0 gathers and merges what they made.

torchrun sets ``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK``. Under it ``eval.py``, ``record.py`` and ``replay.py``
run shard ``RANK/WORLD_SIZE`` (the seeds and files of ``--shard``), the env on ``cuda:LOCAL_RANK`` where CUDA is
there, and :func:`run_ranks` opens a ``torch.distributed`` process group (NCCL on GPUs, gloo on the CPU). Each rank hands
rank 0 one :class:`RankStatus` with one gather: from the script's report step when the rank succeeded
(:func:`gather_results`, :func:`gather_datasets`, :func:`gather_replay`), from :func:`run_ranks` when it failed. Rank 0
merges only when every rank succeeded, writing each merged file under a temporary name renamed at the end, and
then broadcasts the run's exit status, with which every rank exits. A rank that dies hard never reports: rank 0's
gather fails (gloo: the peer's connection closes; otherwise the timeout) or torchrun's agent terminates rank 0;
either way nothing is merged and the shard files stay.

The gather waits at most ``$ISAACLAB_SUSPEND_DIST_TIMEOUT`` seconds (default 1800) for the slowest rank.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

from ..datasets.shards import Shard, merge_datasets, merge_results
from ..recording.recorder_manager import dataset_file_paths
from .errors import fail

TIMEOUT_ENV = "ISAACLAB_SUSPEND_DIST_TIMEOUT"
"""Environment variable: seconds rank 0 waits for the other ranks' statuses (default 1800)."""


@dataclass(frozen=True)
class Launch:
    """This process's place in a torchrun launch."""

    rank: int
    world_size: int
    local_rank: int

    @classmethod
    def from_env(cls) -> Launch | None:
        """The launch that torchrun's ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` describe; None outside torchrun."""
        if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
            return None
        return cls(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ.get("LOCAL_RANK", "0")))

    @property
    def shard(self) -> Shard:
        """Shard ``rank`` of ``world_size``."""
        return Shard(self.rank, self.world_size)

    def device(self, default: str) -> str:
        """``cuda:LOCAL_RANK`` where CUDA is there (``cuda:0`` where the process sees fewer GPUs, as Isaac Lab
        does), else ``default``."""
        if not torch.cuda.is_available():
            return default
        return f"cuda:{self.local_rank if self.local_rank < torch.cuda.device_count() else 0}"


@dataclass
class RankStatus:
    """What a rank hands rank 0: its exit status (0: success) and, on success, what rank 0 merges."""

    rank: int
    code: int
    payload: object = None


@dataclass
class _State:
    launch: Launch
    reported: bool = False
    verdict: int | None = None
    broken: bool = False


_STATE: _State | None = None


def is_other_rank() -> bool:
    """True on torchrun's ranks other than 0, which print no progress bars or tables."""
    return os.environ.get("RANK", "0") != "0" and "WORLD_SIZE" in os.environ


def apply_launch(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Under torchrun, make ``args`` shard ``RANK/WORLD_SIZE`` on the rank's device (``parser.error`` if
    ``--shard`` splits the run too); outside it, nothing."""
    launch = Launch.from_env()
    if launch is None:
        return
    if args.shard.count > 1:
        parser.error(f"--shard {args.shard.index}/{args.shard.count} under torchrun: torchrun already splits the run"
                     f" ({launch.world_size} ranks); drop --shard")
    args.shard = launch.shard
    args.device = rank_device(args.device)


def merged_path(path: str) -> str | None:
    """Under torchrun, the file rank 0 merges the ranks' ``path`` (this rank's shard file) into; None outside."""
    launch = Launch.from_env()
    return None if launch is None else launch.shard.unshard(path)


def rank_device(device: str) -> str:
    """Under torchrun the rank's device (``Launch.device``), else ``device``."""
    launch = Launch.from_env()
    return device if launch is None else launch.device(device)


def apply_distributed_training(args: argparse.Namespace) -> None:
    """``train.py --distributed``, Isaac Lab's multi-GPU convention: under torchrun each rank trains on
    ``cuda:LOCAL_RANK`` with seed ``seed + RANK`` (``args.rank``; 0 without ``--distributed``) and the library
    (rsl_rl, skrl) opens its NCCL process group. Without torchrun, or without CUDA GPUs, one line and exit 2."""
    args.rank = 0
    if not args.distributed:
        return
    launch = Launch.from_env()
    if launch is None:
        raise fail("--distributed runs under torchrun: torchrun --nproc_per_node=N scripts/train.py --distributed ...")
    if not torch.cuda.is_available():
        raise fail(f"--distributed: {args.rl_library} trains several processes over NCCL, which needs CUDA GPUs,"
                   " and this machine has none; train in one process (without torchrun and --distributed)")
    args.device, args.rank = launch.device("cuda:0"), launch.rank


def share(items: Sequence) -> list:
    """This rank's share of ``items`` (every ``WORLD_SIZE``-th from ``RANK``); all of them outside torchrun."""
    launch = Launch.from_env()
    return list(items) if launch is None else list(items)[launch.rank::launch.world_size]


def run_ranks(main: Callable[[], int]) -> int:
    """Run a script's ``main()`` (its exit status); under torchrun inside a process group, reporting its status
    to rank 0 if ``main`` did not, and ending with the run's status (rank 0's, which is the worst)."""
    global _STATE
    launch = Launch.from_env()
    if launch is None:
        return main()
    timeout = timedelta(seconds=float(os.environ.get(TIMEOUT_ENV, "1800")))
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(launch.device("cuda:0"))
    dist.init_process_group(backend, timeout=timeout)
    _STATE = _State(launch)
    try:
        try:
            code = main()
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else int(exit_.code is not None)
        except KeyboardInterrupt:
            code = 130
        if not _STATE.reported:  # main failed before its report step, or has none
            try:
                statuses = _exchange(RankStatus(launch.rank, code))
                if statuses is not None:
                    code = code or _check(statuses)
            except SystemExit as exit_:
                code = exit_.code
        verdict = _verdict(code)  # every rank takes part, whatever its own status
        return code or verdict
    finally:
        with contextlib.suppress(Exception):
            dist.destroy_process_group()
        _STATE = None


def _exchange(status: RankStatus) -> list[RankStatus] | None:
    """Gather ``status`` on rank 0 (the list of every rank's there, None elsewhere); a broken group fails the rank."""
    _STATE.reported = True
    rank, world = _STATE.launch.rank, _STATE.launch.world_size
    statuses = [None] * world if rank == 0 else None
    try:
        dist.gather_object(status, statuses, dst=0)
    except Exception as err:  # noqa: BLE001  (gloo: a peer closed; timeout: a rank hangs)
        _STATE.broken = True
        who = "a rank" if rank == 0 else "rank 0"
        raise fail(f"rank {rank} of {world}: {who} ended or hung without reporting ({type(err).__name__}), so the"
                   " run failed; nothing was merged and the ranks' files are kept", 1) from None
    return statuses


def _check(statuses: list[RankStatus]) -> int:
    """0 if every rank succeeded, else one line naming the failed ranks (raised as ``SystemExit``)."""
    failed = [s for s in statuses if s.code]
    if failed:
        names = ", ".join(f"rank {s.rank} (exit status {s.code})" for s in failed)
        raise fail(f"{names} of {len(statuses)} failed (see their errors above): nothing was merged and the ranks'"
                   " files are kept", max(s.code for s in failed))
    return 0


def _verdict(code: int) -> int:
    """Rank 0 broadcasts ``code``, the run's exit status; every rank returns it (0 if the group is broken)."""
    if _STATE.verdict is not None or _STATE.broken:
        return _STATE.verdict or 0
    message = [code]
    with contextlib.suppress(Exception):
        dist.broadcast_object_list(message, src=0)
    _STATE.verdict = message[0]
    return _STATE.verdict


def _gather(payload: object) -> list[object] | None:
    """Under torchrun, every rank's ``payload`` on rank 0 (a ``SystemExit`` there if a rank failed); the other
    ranks wait for rank 0's verdict and exit with it. Outside torchrun: None."""
    if _STATE is None:
        return None
    rank = _STATE.launch.rank
    statuses = _exchange(RankStatus(rank, 0, payload))
    if rank != 0:
        verdict = _verdict(0)
        if verdict:
            print(f"{os.path.basename(sys.argv[0])}: error: rank {rank}: the run failed on another rank (exit"
                  f" status {verdict}, see rank 0's error)", file=sys.stderr)
        raise SystemExit(verdict)
    _check(statuses)
    return [s.payload for s in statuses]


def gather_results(args: argparse.Namespace, header: str, runs: dict) -> tuple[str, dict, list[dict]]:
    """``eval.py``'s report step: the header, the figures and the verdicts of ``runs`` (its
    :class:`~isaaclab_suspend.runs.ScheduleRun` by name). Under torchrun those of every rank, on rank 0: the figures
    merged per run, the verdicts over every rank's episodes, each paired within its rank (the same env index on two
    ranks is two envs, seeded apart: ``runs.paired.run_verdicts``), its ``--record`` datasets (those of
    ``args.record_cfgs``) merged and ``--results`` the unsharded path, holding every rank's figures too. The other
    ranks exit here."""
    from ..runs.paired import run_verdicts  # the runs package imports Isaac Lab: not while a script parses

    figures = {name: run.figures for name, run in runs.items()}
    record = [path for cfg in args.record_cfgs.values() for path in dataset_file_paths(cfg)]
    mine = {"header": header, "schedules": figures, "record": record,
            "runs": {name: run.verdict_record() for name, run in runs.items()}}
    shards = _gather(mine)
    if shards is None:
        return header, figures, run_verdicts([mine["runs"]], figures)
    merged = merge_results(shards)
    if args.record:
        merge_rank_files([shard["record"] for shard in shards], args.overwrite)
        args.record = args.shard.unshard(args.record)
    if args.results:
        args.results = args.shard.unshard(args.results)
    return merged["header"], merged["schedules"], run_verdicts([shard["runs"] for shard in shards], merged["schedules"])


def gather_datasets(args: argparse.Namespace) -> list[str]:
    """``record.py``'s report step: under torchrun, on rank 0 the ranks' datasets merged into ``--output`` (and its
    ``_failed`` file), the shard files removed; ``args.paths`` outside torchrun. The other ranks exit here."""
    shards = _gather(args.paths)
    return args.paths if shards is None else merge_rank_files(shards, args.overwrite)


def gather_replay(results: list) -> list:
    """``replay.py``'s report step: under torchrun, on rank 0 every rank's replay results; ``results`` outside
    torchrun. The other ranks exit here with the run's status (rank 0's: the worst)."""
    shards = _gather(results)
    return results if shards is None else [result for shard in shards for result in shard]


def merge_rank_files(rank_paths: list[list[str]], overwrite: bool) -> list[str]:
    """Merge the ranks' HDF5 files (``rank_paths[r][j]``: rank r's j-th file) into each j's unsharded path, in
    rank order, through a temporary file renamed at the end; removes the ranks' files once all are merged.

    Raises:
        ValueError: If a merged file exists and ``overwrite`` is False.
        FileNotFoundError: If a rank's file is not visible here (give multi-node runs a shared folder).
    """
    world = len(rank_paths)
    targets = [Shard(0, world).unshard(path) for path in rank_paths[0]]
    for target in targets:
        if os.path.exists(target) and not overwrite:
            raise fail(f"'{target}' exists: pass --overwrite to replace it (the ranks' files are kept:"
                       " scripts/merge_shards.py merges them)")
    for paths in rank_paths:
        missing = [path for path in paths if not os.path.isfile(path)]
        if missing:
            raise fail(f"{missing} not found on rank 0: the ranks must write to a folder every node sees")
    for j, target in enumerate(targets):
        partial = target.removesuffix(".hdf5") + f".merging-{os.getpid()}.hdf5"
        try:
            episodes, samples = merge_datasets([paths[j] for paths in rank_paths], partial)
            os.replace(partial, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.remove(partial)
            raise
        print(f"{episodes} episodes ({samples} samples) of {world} ranks merged into {target}")
    for paths in rank_paths:
        for path in paths:
            os.remove(path)
    return targets
