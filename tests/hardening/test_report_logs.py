"""Crafted run logs through ``scripts/report.py``, as a user who opens a shared log would: markup in every field
renders as text in headless Chromium with no script run and no request sent, a frame that is no PNG and every
malformed or oversized log end in one line and exit status 2 with an existing page kept byte for byte, and the log
is never its own page. The logs are written here (a run log is plain JSON lines); report.py's ``main`` runs in
the test process."""

import base64
import io
import json
import os

import pytest
from helpers import load_script
from PIL import Image

import browser
from isaaclab_suspend.runs.report import run_log

ATTACK = ('"><script>console.log("injected");fetch("http://127.0.0.1:9/x")</script><img src=x onerror="alert(1)">'
          '<style>@import url(http://127.0.0.1:9/s.css)</style><div style="background:url(http://127.0.0.1:9/b)">')
"""Markup that runs script, loads a style sheet and an image from elsewhere, if a page lets it through."""


def _png() -> str:
    buffer = io.BytesIO()
    Image.new("RGB", (12, 4), (200, 30, 30)).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def _lines(text: str = "t") -> list[dict]:
    """A small well-formed run log of two runs (A, B) on 2 envs, ``text`` in every text field."""
    provenance = {"task": text, "overrides": [text], "seed": 1, "device": "cpu", "policy": text, "command": text,
                  "host": text, "commit": None, "versions": {"python": "3.12"}}
    lines = [{"record": "run", "header": text, "scoring": text, "per_env": 1, "num_envs": 2, "has_success": True,
              "date": "2026-11-28T00:00:00+00:00", "latency": None, "virtual_latency": False,
              "provenance": provenance}]
    for name, success in ((f"A{text}", True), (f"B{text}", False)):
        timeline = {"envs": 2, "status": ["0012", "0102"], "served": [[0], [1]], "reset": [[3], []],
                    "inference_steps": [0, 1]}
        strip = {"env_id": 0, "episode": 0, "success": success, "length": 3, "steps": [0, 1], "camera": text,
                 "png": _png()}
        lines.append({"record": "schedule", "schedule": name, "chunk_schedule": "global_clock", "policy": text,
                      "figures": {"inference_calls": 2, "success_rate": 0.5, "episodes_scored": 2},
                      "timeline": timeline, "frames": [strip]})
        lines += [{"record": "episode", "schedule": name, "env_id": env, "episode": 0, "seed": 1, "success": success,
                   "end_step": 3, "length": 3, "suspended_steps": 0, "calls": 1, "return": 1.5,
                   "start_hash": text[:64]} for env in range(2)]
    return lines


def _write(path, lines: list) -> str:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return str(path)


def _rebuild(log: str, capsys, *args: str) -> tuple[int, str]:
    status = load_script("report").main([log, *args])
    return status, capsys.readouterr().err


@pytest.mark.slow
@browser.needs_chromium
def test_markup_in_every_field_is_text_and_runs_nothing(tmp_path, capsys):
    log = _write(tmp_path / "javascript:alert(document.domain).jsonl", _lines(ATTACK))
    status, err = _rebuild(log, capsys, "--output", str(tmp_path / "report.html"))
    assert status == 0, err
    shown = browser.render(str(tmp_path / "report.html"), width=390,
                           probes={"href": "document.querySelector('a').getAttribute('href')",
                                   "tags": "document.querySelectorAll('body script, body style, body iframe,"
                                           " img[onerror], div[style]').length"})
    assert not any("injected" in line for line in shown.console) and shown.dialogs == 0, shown
    assert shown.requests == [], shown.requests
    assert shown.values["tags"] == 1, "only the page's own sorting script"
    assert shown.values["href"] == "./javascript%3Aalert%28document.domain%29.jsonl"
    assert ATTACK in shown.text and shown.broken_images == 0 and shown.overflow == 0, shown


def test_a_frame_that_is_no_png_is_refused_and_the_page_kept(tmp_path, capsys):
    page = tmp_path / "report.html"
    page.write_text("earlier page")
    for png in ('"><script>alert(1)</script>', base64.b64encode(b"GIF89a" + bytes(20)).decode(), "AAAA"):
        lines = _lines()
        lines[1]["frames"][0]["png"] = png
        status, err = _rebuild(_write(tmp_path / "episodes.jsonl", lines), capsys, "--overwrite")
        assert status == 2 and err.count("\n") == 1 and "is not a base64 PNG image" in err, err
        assert page.read_text() == "earlier page"


def test_a_page_that_exists_is_replaced_only_when_asked(tmp_path, capsys):
    page = tmp_path / "report.html"
    page.write_text("earlier page")
    log = _write(tmp_path / "episodes.jsonl", _lines())
    with pytest.raises(SystemExit) as stop:
        _rebuild(log, capsys)
    assert stop.value.code == 2 and "exists: pass --overwrite to replace it" in capsys.readouterr().err
    assert page.read_text() == "earlier page"
    assert _rebuild(log, capsys, "--overwrite")[0] == 0 and "<html" in page.read_text()


def test_a_frame_is_re_encoded(tmp_path):
    lines = _lines()
    lines[1]["frames"][0]["png"] = base64.b64encode(base64.b64decode(_png()) + b"trailing bytes").decode()
    _, schedules = run_log.read_run_log(_write(tmp_path / "episodes.jsonl", lines))
    assert base64.b64decode(schedules["At"]["frames"][0]["png"]) == base64.b64decode(_png())


def _deep(depth: int) -> str:
    return '{"record": "run", "header": ' + "[" * depth + "]" * depth + "}"


MALFORMED = {
    "missing key": lambda lines: lines[0].pop("num_envs"),
    "wrong type": lambda lines: lines[3].update(success="yes"),
    "env beyond num_envs": lambda lines: lines[3].update(env_id=5),
    "timeline index 1e12": lambda lines: lines[1]["timeline"]["served"][0].append(10**12),
    "timeline of another length": lambda lines: lines[1]["timeline"]["status"].append("0"),
    "300000 envs declared": lambda lines: lines[0].update(num_envs=300000),
    "5 MB header": lambda lines: lines[0].update(header="x" * 5_000_000),
    "episode of no schedule": lambda lines: lines.insert(1, lines.pop(3)),
    "nan return": lambda lines: lines[3].update({"return": float("nan")}),
    "not an object": lambda lines: lines.append("[1, 2]"),
    "not JSON": lambda lines: lines.append("{"),
    "200000-deep JSON": lambda lines: lines.insert(0, _deep(200000)),
    "no run line": lambda lines: lines.pop(0),
}


@pytest.mark.parametrize("case", MALFORMED)
def test_a_malformed_log_ends_in_one_line_and_keeps_the_page(tmp_path, capsys, case):
    page = tmp_path / "report.html"
    page.write_text("earlier page")
    lines = _lines()
    MALFORMED[case](lines)
    status, err = _rebuild(_write(tmp_path / "episodes.jsonl", lines), capsys, "--overwrite")
    assert status == 2 and err.count("\n") == 1 and "Traceback" not in err, (case, err[-500:])
    assert page.read_text() == "earlier page" and len(err) < 600, case


def test_a_log_over_the_size_bound_is_not_read(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(run_log, "MAX_LOG_BYTES", 100)
    status, err = _rebuild(_write(tmp_path / "episodes.jsonl", _lines()), capsys)
    assert status == 2 and "more than a run log's 100" in err, err


def test_the_log_is_never_its_own_page(tmp_path, capsys):
    log = _write(tmp_path / "episodes.jsonl", _lines())
    before = open(log).read()
    with pytest.raises(SystemExit) as stop:
        load_script("report").parse_args([log, "--output", log])
    assert stop.value.code == 2 and "is the log itself" in capsys.readouterr().err
    link = tmp_path / "page.html"
    os.symlink(log, link)
    status, err = _rebuild(log, capsys, "--output", str(link))
    assert status == 2 and "would replace its own run log" in err and open(log).read() == before, err


def test_a_run_without_a_finished_episode_says_so_instead_of_a_success_of_0(tmp_path):
    from isaaclab_suspend.runs.report import EvalReportCfg, write_report

    lines = [line for line in _lines() if not (line["record"] == "episode" and line["schedule"] == "Bt")]
    page = open(write_report(EvalReportCfg(log_path=_write(tmp_path / "episodes.jsonl", lines)))).read()
    row = page[page.index('<td data-schedule="Bt">Bt</td>'):].split("</tr>")[0]
    assert "No finished episode" in row and "0.000" not in row, row
    assert "Bt against At: no finished episode in Bt, so no verdict." in page
