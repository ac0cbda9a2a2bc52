"""eval.py's runs never overwrite each other: each run writes one folder (by default a new
``outputs/eval/<date>_<task>_<n>``) holding its report, run log, timeline and figures, printed once; ``--output``
picks it, and a file of an earlier run is replaced only with ``--overwrite``. ``--report DIR`` is the deprecated
spelling of ``--output DIR``."""

from __future__ import annotations

import contextlib
import io
import os
import re

import pytest

from helpers import check_usage_errors, load_script

RUN = ("--num_envs", "2", "--steps", "4", "--quiet")
FILES = ["episodes.jsonl", "report.html", "results.json", "timeline.png"]


def _eval(*args: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert load_script("eval").main([*RUN, *args]) == 0
    return out.getvalue()


@pytest.mark.slow  # two runs of eval.py in this process
def test_each_run_gets_its_own_folder_and_an_earlier_one_is_kept(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    outputs = [_eval(), _eval()]
    folders = sorted((tmp_path / "outputs" / "eval").iterdir())
    assert [re.sub(r"^\d{4}-\d\d-\d\d_", "", f.name) for f in folders] == ["Isaac-Cartpole-Suspendable_1",
                                                                         "Isaac-Cartpole-Suspendable_2"]
    for folder, out in zip(folders, outputs):
        assert sorted(os.listdir(folder)) == FILES and out.count(str(folder)) == 1, out
        assert f"Run folder: {folder}: timeline.png" in out
    first = {name: (folders[0] / name).read_bytes() for name in FILES}
    check_usage_errors(load_script("eval"), {(*RUN, "--output", str(folders[0])): "exists: pass --overwrite"}, capsys)
    assert {name: (folders[0] / name).read_bytes() for name in FILES} == first  # nothing of the first run replaced
    assert load_script("eval").parse_args([*RUN, "--output", str(folders[0]), "--overwrite"])  # asked for: fine


def test_report_dir_is_the_deprecated_output_and_report_none_writes_no_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    evaluate = load_script("eval")
    args = evaluate.parse_args(["--report", str(tmp_path / "mine"), "--num_envs", "2"])
    assert "--report DIR is deprecated and goes in 0.5.0: use --output DIR" in capsys.readouterr().err
    assert args.output == args.report == str(tmp_path / "mine") and args.timeline == str(tmp_path / "mine" /
                                                                                          "timeline.png")
    args = evaluate.parse_args(["--report", "", "--timeline", "", "--num_envs", "2"])
    assert args.output is None and args.results is None and not args.report and not args.timeline
    assert not (tmp_path / "outputs").exists()
