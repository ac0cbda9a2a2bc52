"""``--shard I/K`` (and ``--results``; the arguments: :func:`~.arguments.add_shard_args`): one run split into K
processes, merged by ``scripts/merge_shards.py`` (under torchrun the rank is the shard and rank 0 merges:
:mod:`.distributed`).

Shard ``i/K`` runs with seed ``seed + i`` and writes ``<stem>-shard<i>of<K><ext>`` files; a recording shard writes
its part of ``--episodes`` (see :mod:`isaaclab_suspend.datasets.shards`).
"""

from __future__ import annotations

import argparse
import json
import os

from ..datasets.shards import Shard
from ..names import MAX_SEED
from ..runs.outputs import new_file
from .distributed import apply_launch


def apply_shard(parser: argparse.ArgumentParser, args: argparse.Namespace, files: tuple[str, ...] = (),
                episodes: bool = False) -> None:
    """Give ``args`` the shard's seed, its name of each file argument in ``files`` and, if ``episodes``, its part
    of ``args.episodes`` (``parser.error`` if that is none). Under torchrun the shard is the rank's
    (``distributed.apply_launch``); no ``--shard`` is shard 0/1."""
    args.shard = args.shard or Shard()
    apply_launch(parser, args)
    if args.seed is not None:
        seed = args.shard.seed(args.seed)
        if seed > MAX_SEED:
            parser.error(f"--seed {args.seed}: shard {args.shard.index} would run with seed {seed} (seed + shard), past"
                         f" the largest seed {MAX_SEED}")
        args.seed = seed
    for name in files:
        if getattr(args, name):
            setattr(args, name, args.shard.path(getattr(args, name)))
    if episodes:
        if args.episodes < args.shard.count:
            parser.error(f"--episodes {args.episodes} leaves shard {args.shard.index}/{args.shard.count} no episode:"
                         " record at least one episode per shard")
        args.episodes = args.shard.episodes(args.episodes)


def describe_shard(args: argparse.Namespace) -> str:
    """``", shard i/K"`` for the scripts' reports (empty for one shard)."""
    return f", shard {args.shard.index}/{args.shard.count}" if args.shard.count > 1 else ""


def write_results(path: str, header: str, results: dict, overwrite: bool = False) -> str:
    """Write ``{"header": header, "schedules": results}`` as JSON to ``path``, whole
    (:func:`~isaaclab_suspend.runs.outputs.new_file`: an existing file only with ``overwrite``); returns its
    absolute path."""
    with new_file(path, overwrite, "--results") as file:
        json.dump({"header": header, "schedules": results}, file, indent=1)
    return os.path.abspath(path)
