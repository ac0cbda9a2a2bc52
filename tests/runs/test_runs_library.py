"""The library runs without argument parsing: docs/examples/run_from_python.py evaluates and records with cfgs
only, and its figures are those of the scripts that map flags to the same cfgs."""

from __future__ import annotations

import os
import sys

import h5py
import pytest

from isaaclab_suspend import cli
from isaaclab_suspend.chunking import ActionChunkingPolicyCfg
from isaaclab_suspend.runs import (CHUNK_MODELS, ChunkLengthError, ChunkModelSource, EmbeddedModelCfg, RlActorModelCfg,
                                   make_chunking_policy, make_policy_server)
from isaaclab_suspend.serving import TcpPolicyServerCfg

from helpers import load_script

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "docs", "examples"))


def test_the_docs_example_evaluates_and_records_with_cfgs_only(tmp_path):
    import run_from_python

    figures = run_from_python.main(str(tmp_path), num_envs=4, steps=120, episodes=4)
    evaluation, recording = figures["evaluation"], figures["recording"]
    assert evaluation["global_clock"]["inference_calls"] < evaluation["any"]["inference_calls"]
    assert evaluation["global_clock"]["steps"] == evaluation["any"]["steps"] == 120
    assert recording.written == 4 and recording.finished and not recording.interrupted
    with h5py.File(recording.paths[0]) as f:
        assert len(f["data"]) == 4
        assert f["data"].attrs["env_args"]  # the file says how its chunks were scheduled
    # the script's flags map to the same cfg: eval.py's parse gives the library's evaluation
    evaluate = load_script("eval")
    args = evaluate.parse_args(["--compare", "any,global_clock", "--num_envs", "4", "--steps", "120", "--seed", "7",
                                "--desync", "--model.chunk_length", "16"])
    cfg = cli.evaluation_cfg(args)
    assert cfg.schedules == ["any", "global_clock"] and cfg.steps == 120 and cfg.env.desync and cfg.env.seed == 7
    assert cfg.model == EmbeddedModelCfg(chunk_length=16) and args.source.chunk_length == 16


def test_every_source_has_a_cfg_and_a_source_refuses_what_does_not_fit():
    assert set(CHUNK_MODELS) == {"embedded", "chunk_policy", "lerobot", "rl_actor", "tcp", "openpi", "gr00t"}
    source = ChunkModelSource(EmbeddedModelCfg(chunk_length=8), "Isaac-PushCube-Suspendable")
    assert (source.task, source.chunk_length, source.describe()) == ("Isaac-PushCube-Suspendable", 8, "embedded model")
    with pytest.raises(ValueError, match="has no embedded chunk model"):
        ChunkModelSource(EmbeddedModelCfg(), "Isaac-Cartpole")
    with pytest.raises(ChunkLengthError, match="plans 1 actions per chunk"):  # an RL actor is closed loop
        ChunkModelSource(RlActorModelCfg(chunk_length=4), "Isaac-Cartpole-Suspendable")
    with pytest.raises(TypeError, match="A chunk model cfg must be a registered source cfg"):
        ChunkModelSource(object())


def test_a_run_refuses_another_h_or_schedule_and_serving_copies_its_cfg():
    """H is the source's and the schedule the run's: a chunking cfg naming others is refused, never overwritten;
    make_policy_server serves under a copy of its cfg."""
    source = ChunkModelSource(EmbeddedModelCfg(chunk_length=8), "Isaac-Cartpole-Suspendable")
    with pytest.raises(ValueError, match="chunk_length is 16 but the embedded source executes H = 8"):
        make_chunking_policy(ActionChunkingPolicyCfg(chunk_length=16), source, None, "global_clock")
    with pytest.raises(ValueError, match="schedule is 'any' but the run's schedule is 'global_clock'"):
        make_chunking_policy(ActionChunkingPolicyCfg(chunk_length=None, schedule="any"), source, None, "global_clock")
    cfg = TcpPolicyServerCfg(port=0)
    with make_policy_server(source, cfg) as server:
        assert (server.cfg.chunk_length, server.cfg.task) == (8, "Isaac-Cartpole-Suspendable")
    assert (cfg.chunk_length, cfg.task) == (TcpPolicyServerCfg().chunk_length, None)
