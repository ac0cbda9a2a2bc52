"""The run cfgs are checked before any env is built: a bad field, an output that
exists, is a symbolic link or a folder, a chunk length or writer count past the memory bounds end in one
``ValueError`` from the library call, and in one line with exit status 2 from the scripts; nothing is written,
replaced or allocated. Each library case passes an ``open_env`` that fails the test if it is ever called."""

from __future__ import annotations

import contextlib
import os

import pytest

from isaaclab_suspend.runs import (EmbeddedModelCfg, EvaluationCfg, RecordingCfg, RunEnvCfg, evaluate, record,
                                   write_evaluation_report, write_timeline)
from isaaclab_suspend.runs.report import EvalReportCfg, write_report, write_run_log

from helpers import check_usage_errors, load_script


@contextlib.contextmanager
def _no_env(cfg: RunEnvCfg):
    raise AssertionError(f"an env was opened for {cfg}: the cfg should have been refused before")
    yield  # noqa: unreachable - a generator for contextmanager


@pytest.fixture
def files(tmp_path):
    """An existing dataset (its bytes must survive), a symbolic link to it, a dangling link and a folder."""
    existing = tmp_path / "old.hdf5"
    existing.write_bytes(b"earlier episodes")
    os.symlink(existing, tmp_path / "link.hdf5")
    os.symlink(tmp_path / "nowhere.hdf5", tmp_path / "dangling.hdf5")
    (tmp_path / "folder").mkdir()
    return tmp_path


RECORDING_CASES = {  # fields of RecordingCfg -> what the one line says
    "zero envs": ({"env": RunEnvCfg(num_envs=0)}, "RunEnvCfg.num_envs must be an integer >= 1, got 0"),
    "negative seed": ({"env": RunEnvCfg(seed=-1)}, "RunEnvCfg.seed must be an integer in [0, 4294967295], got -1"),
    "cpu:7": ({"env": RunEnvCfg(device="cpu:7")}, "'cpu:7' is not a device this package runs on"),
    "a cuda device past the count": ({"env": RunEnvCfg(device="cuda:99")}, "'cuda:99': this machine has"),
    "zero episodes": ({"episodes": 0}, "RecordingCfg.episodes must be an integer >= 1, got 0"),
    "negative episodes": ({"episodes": -2}, "RecordingCfg.episodes must be an integer >= 1, got -2"),
    "zero per env": ({"episodes": None, "episodes_per_env": 0}, "RecordingCfg.episodes_per_env must be an integer"),
    "unknown export": ({"export": "nope"}, "RecordingCfg.export must be one of ['all', 'succeeded', 'separate']"),
    "zero chunk length": ({"model": EmbeddedModelCfg(chunk_length=0)}, "chunk_length must be an integer >= 1"),
    "H past the queue bound": ({"model": EmbeddedModelCfg(chunk_length=100_000_000), "env": RunEnvCfg(num_envs=2)},
                               "needs 2.2 GiB of chunk queues (num_envs x chunk_length x (4 x action_dim + 8) bytes),"
                               " over the 1 GiB bound"),
    "a billion writers": ({"writers": 1_000_000_000}, "RecordingCfg.writers is 1000000000, more than the"),
    "a folder as output": ({"output": "{tmp}/folder"}, "RecordingCfg.output: '{tmp}/folder' is a directory"),
    "an existing output": ({"output": "{tmp}/old.hdf5"}, "RecordingCfg.output: '{tmp}/old.hdf5' exists: pass"
                                                         " overwrite=True to replace it"),
    "a symbolic link": ({"output": "{tmp}/link.hdf5", "overwrite": True}, "'{tmp}/link.hdf5' is a symbolic link"),
    "a dangling link": ({"output": "{tmp}/dangling.hdf5"}, "'{tmp}/dangling.hdf5' is a symbolic link"),
}


@pytest.mark.parametrize("fields, message", RECORDING_CASES.values(), ids=RECORDING_CASES.keys())
def test_record_refuses_a_bad_cfg_before_any_env_and_writes_nothing(files, fields, message):
    fields = {k: v.format(tmp=files) if isinstance(v, str) else v for k, v in fields.items()}
    fields.setdefault("output", str(files / "new.hdf5"))
    before = sorted(os.listdir(files))
    with pytest.raises(ValueError) as refused:
        record(RecordingCfg(show_progress=False, **fields), open_env=_no_env)
    assert message.format(tmp=files) in str(refused.value) and "\n" not in str(refused.value), refused.value
    assert sorted(os.listdir(files)) == before and (files / "old.hdf5").read_bytes() == b"earlier episodes"


EVALUATION_CASES = {
    "negative steps": ({"steps": -5}, "EvaluationCfg.steps must be an integer >= 1, got -5"),
    "zero per env": ({"steps": None, "episodes_per_env": 0}, "EvaluationCfg.episodes_per_env must be an integer"),
    "unknown schedule": ({"schedules": ["nope"]}, "EvaluationCfg.schedules must be a non-empty list of"),
    "H past the queue bound": ({"model": EmbeddedModelCfg(chunk_length=100_000_000), "env": RunEnvCfg(num_envs=2)},
                               "over the 1 GiB bound"),
    "a folder to record to": ({"record": "{tmp}/folder"}, "EvaluationCfg.record: '{tmp}/folder' is a directory"),
    "an existing dataset": ({"record": "{tmp}/old.hdf5"}, "EvaluationCfg.record: '{tmp}/old.hdf5' exists"),
    "a dataset per schedule, one a link": ({"record": "{tmp}/r.hdf5", "schedules": ["any", "hold"]},
                                           "'{tmp}/r_hold.hdf5' is a symbolic link"),
}


@pytest.mark.parametrize("fields, message", EVALUATION_CASES.values(), ids=EVALUATION_CASES.keys())
def test_evaluate_refuses_a_bad_cfg_before_any_env_and_writes_nothing(files, fields, message):
    fields = {k: v.format(tmp=files) if isinstance(v, str) else v for k, v in fields.items()}
    os.symlink(files / "old.hdf5", files / "r_hold.hdf5")
    before = sorted(os.listdir(files))
    with pytest.raises(ValueError) as refused:
        evaluate(EvaluationCfg(show_progress=False, **fields), open_env=_no_env)
    assert message.format(tmp=files) in str(refused.value) and "\n" not in str(refused.value), refused.value
    assert sorted(os.listdir(files)) == before and (files / "old.hdf5").read_bytes() == b"earlier episodes"


def test_a_report_or_timeline_that_exists_is_kept_and_a_log_is_never_its_own_page(files):
    """write_evaluation_report and write_timeline refuse a file of an earlier run (``overwrite`` False), a link or a
    folder, before they write anything; a report is never written over the log it is made from."""
    folder = files / "run"
    folder.mkdir()
    (folder / "report.html").write_text("earlier page")
    with pytest.raises(ValueError, match="report: '.*report.html' exists: pass overwrite=True"):
        write_evaluation_report(EvaluationCfg(), {}, str(folder), "header", "scoring", "policy")
    assert sorted(os.listdir(folder)) == ["report.html"] and (folder / "report.html").read_text() == "earlier page"
    with pytest.raises(ValueError, match="timeline: '.*old.hdf5' exists"):
        write_timeline({}, str(files / "old.hdf5"), "title")
    with pytest.raises(ValueError, match="is a symbolic link"):
        write_timeline({}, str(files / "link.hdf5"), "title", overwrite=True)
    with pytest.raises(ValueError, match="is a directory"):
        write_timeline({}, str(files / "folder"), "title", overwrite=True)
    log = write_run_log(str(files / "episodes.jsonl"), {"header": "h"}, {})
    kept = open(log).read()
    with pytest.raises(ValueError, match="would replace its own run log"):
        write_report(EvalReportCfg(log_path=log, output_path=log))
    assert open(log).read() == kept and (files / "old.hdf5").read_bytes() == b"earlier episodes"


def test_scripts_refuse_a_chunk_or_writer_count_past_the_bounds_in_one_line(tmp_path, capsys):
    """``eval.py --chunk 100000000`` on 2 envs and ``record.py --writers 1000000000``: one line, exit 2, while
    parsing (the cfgs' own validate: no env, no allocation); an episode log of an earlier run is kept likewise."""
    log = tmp_path / "episodes.jsonl"
    log.write_text("earlier\n")
    check_usage_errors(load_script("eval"), {
        ("--chunk", "100000000", "--num_envs", "2", "--output", str(tmp_path / "run")): "over the 1 GiB bound",
        ("--device", "cpu:7", "--output", str(tmp_path / "run")): "'cpu:7' is not a device this package runs on",
        ("--episode_log", str(log), "--output", str(tmp_path / "run")): f"'{log}' exists: pass --overwrite",
    }, capsys)
    check_usage_errors(load_script("record"), {
        ("--writers", "1000000000", "--output", str(tmp_path / "d.hdf5")): "RecordingCfg.writers is 1000000000",
        ("--episode_log", str(log), "--output", str(tmp_path / "d.hdf5")): f"'{log}' exists: pass --overwrite",
    }, capsys)
    assert not (tmp_path / "run").exists() and not (tmp_path / "d.hdf5").exists() and log.read_text() == "earlier\n"
