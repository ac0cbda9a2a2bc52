"""``eval.py --models A,B --output DIR`` on the push-cube planner and the planner at 0.6x its actions: the printed
verdict is the page's and the log's, the page's numbers are the printed table's, it renders in a real browser
(headless Chromium) at a phone's 390 px with no console error, no sideways overflow, visible model-call marks and
the headline numbers of its log, and ``scripts/report.py`` rebuilds it from the log alone. The evaluations run
through eval.py's ``main(argv)`` in the test process; report.py's rebuild and eval.py's refusal of a file run the
real entry points."""

import contextlib
import html
import io
import json
import math
import os
import re
import subprocess
import sys

import pytest
from helpers import load_script

import browser
from isaaclab_suspend.runs import paired, run_names
from isaaclab_suspend.runs.report.timeline import CALL_COLOR

pytestmark = pytest.mark.slow  # the evaluation report through eval.py, report.py and headless Chromium

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _script(name: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, os.path.join(ROOT, "scripts", name), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def _eval(*args: str) -> str:
    """eval.py's ``main(args)`` in the test process, ``sys.argv`` its command line (the log records the command):
    its stdout (the exit status must be 0)."""
    out, argv = io.StringIO(), sys.argv
    sys.argv = [os.path.join(ROOT, "scripts", "eval.py"), *args]
    try:
        with contextlib.redirect_stdout(out):
            status = load_script("eval").main(list(args))
    finally:
        sys.argv = argv
    assert status == 0, out.getvalue()[-3000:]
    return out.getvalue()


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """The issue's comparison, ``eval.py --models embedded,embedded:action_scale=0.6 --output DIR``, on push-cube
    with 4 envs, one episode each of 3 s (180 steps): the planner succeeds in some 140 steps, the planner at 0.6x
    its actions times out, so the verdict has discordant pairs."""
    directory = tmp_path_factory.mktemp("report") / "report"
    stdout = _eval("--task", "Isaac-PushCube-Suspendable", "--models", "embedded,embedded:action_scale=0.6",
                   "--num_envs", "4", "--episodes_per_env", "1", "--output", str(directory), "--timeline", "",
                   "env.episode_length_s=3")
    return directory, stdout


def _log(directory) -> tuple[dict, dict]:
    lines = [json.loads(line) for line in open(directory / "episodes.jsonl")]
    schedules = {r["schedule"]: r for r in lines if r["record"] == "schedule"}
    for name, schedule in schedules.items():
        schedule["episodes"] = [r for r in lines if r["record"] == "episode" and r["schedule"] == name]
    return next(r for r in lines if r["record"] == "run"), schedules


def test_report_figures_equal_the_printed_table(report):
    directory, stdout = report
    assert f"Run folder: {directory}: report.html (open it in a browser), episodes.jsonl (the run log)" in stdout
    page = (directory / "report.html").read_text()
    cells = {(m["schedule"], m["figure"]): html.unescape(m["value"]) for m in re.finditer(
        r'<td data-figure="(?P<figure>\w+)" data-schedule="(?P<schedule>\w+)">(?P<value>[^<]*)</td>', page)}
    rows = re.findall(r"^\| (\w+) +\|(.*)\|$", stdout, re.MULTILINE)
    assert len(rows) > 15, stdout
    for figure, values in rows[1:]:  # the first row is the header: figure | A | B
        for schedule, value in zip(("A", "B"), values.split("|")):
            assert cells[(schedule, figure)] == value.strip(), (schedule, figure)
    headline = {(m["schedule"], m["figure"]): m["value"] for m in re.finditer(
        r'<td data-schedule="(?P<schedule>\w+)" data-figure="(?P<figure>\w+)">(?P<value>[^<]*)</td>', page)}
    for (schedule, figure), value in headline.items():
        assert value.split(" ")[0] == cells[(schedule, figure)], (schedule, figure, value)
    assert {figure for _, figure in headline} >= {"success_rate", "inference_calls", "calls_per_1000_steps",
                                                 "active_env_steps_per_s", "suspended_env_steps", "episodes_scored"}
    # the log's episodes are the table's
    _, schedules = _log(directory)
    for name, schedule in schedules.items():
        episodes = schedule["episodes"]
        assert len(episodes) == int(cells[(name, "episodes_scored")]) > 0
        assert f"{sum(e['success'] for e in episodes) / len(episodes):.3f}" == cells[(name, "success_rate")]


def _wilson(wins: int, n: int) -> str:
    z = 1.96
    p = wins / n
    centre, half = p + z * z / (2 * n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return f"[{max((centre - half) / (1 + z * z / n), 0):.3f}, {min((centre + half) / (1 + z * z / n), 1):.3f}]"


def test_the_printed_verdict_is_the_pages_and_the_logs(report):
    """The verdict of B (the planner at 0.6x) against A: one sentence, printed and on the page, whose numbers are
    those of the log's episodes; paired exactly when every (env, episode) of the log has one start hash in both."""
    directory, stdout = report
    printed = re.findall(r"^Verdict: (.*)$", stdout, re.MULTILINE)
    page = (directory / "report.html").read_text()
    shown = [html.unescape(m) for m in re.findall(r'<p class="verdict" data-a="A" data-b="B">([^<]*)</p>', page)]
    run, schedules = _log(directory)
    a, b = schedules["A"], schedules["B"]
    verdict = paired.compare(a["episodes"], b["episodes"], "A", "B", a["figures"], b["figures"], run["has_success"])
    assert printed == shown == [verdict["sentence"]], (printed, shown)
    hashes = [{(e["env_id"], e["episode"]): e.get("start_hash") for e in s["episodes"]} for s in (a, b)]
    assert verdict["paired"] == (hashes[0] == hashes[1] and None not in hashes[0].values())
    wins = [sum(e["success"] for e in s["episodes"]) for s in (a, b)]
    assert (verdict["wins_a"], verdict["wins_b"]) == tuple(wins) and wins[0] > wins[1], verdict
    assert f"B succeeds in {wins[1]} of 4" in verdict["sentence"] and f"A in {wins[0]}" in verdict["sentence"]
    calls = b["figures"]["inference_calls"] / a["figures"]["inference_calls"]
    assert f"model calls x{calls:.2f}" in verdict["sentence"]
    assert all("return" in e for e in a["episodes"] + b["episodes"]) and "return " in verdict["sentence"]
    assert "A succeeds more often than B" in page


CALL_PIXELS = """(() => {{ const img = [...document.images].find(i => i.alt === 'chunk timeline');
  const c = document.createElement('canvas'); c.width = img.naturalWidth; c.height = img.naturalHeight;
  const g = c.getContext('2d'); g.drawImage(img, 0, 0); const d = g.getImageData(0, 0, c.width, c.height).data;
  let n = 0; for (let i = 0; i < d.length; i += 4)
    if (Math.abs(d[i] - {}) < 40 && Math.abs(d[i + 1] - {}) < 40 && Math.abs(d[i + 2] - {}) < 40) n++;
  return n; }})()""".format(*(int(CALL_COLOR[i:i + 2], 16) for i in (1, 3, 5)))
"""Pixels of the chunk timeline within reach of the model calls' colour."""


@browser.needs_chromium
def test_report_renders_in_chromium_at_390_px_with_the_verdict_and_the_logs_headline(report):
    directory, _ = report
    sort_by_length = ("(() => { const t = document.querySelector('table.sortable'), column = () =>"
                      " [...t.tBodies[0].rows].map(r => +r.cells[5].textContent), th = t.tHead.rows[0].cells[5];"
                      " th.click(); const up = column(); th.click(); return [up, column()]; })()")
    shown = browser.render(str(directory / "report.html"), width=390,
                           probes={"calls": CALL_PIXELS, "lengths": sort_by_length})
    assert shown.errors == [] and shown.requests == [] and shown.images == 2 and shown.broken_images == 0, shown
    assert shown.overflow == 0, "the page scrolls sideways at 390 px"
    run, schedules = _log(directory)
    assert run["header"] in shown.text and "Fairness" in shown.text and "Provenance" in shown.text
    assert run["date"] in shown.text
    a, b = schedules["A"], schedules["B"]
    verdict = paired.compare(a["episodes"], b["episodes"], "A", "B", a["figures"], b["figures"], run["has_success"])
    assert verdict["sentence"] in shown.text
    calls = sum(len(s["timeline"]["inference_steps"]) for s in schedules.values())
    assert shown.values["calls"] >= 5 * calls, (shown.values, calls)  # each call a visible tick
    lengths = [e["length"] for s in schedules.values() for e in s["episodes"]]
    assert shown.values["lengths"] == [sorted(lengths), sorted(lengths, reverse=True)], "a click on 'length' sorts"
    for name, schedule in schedules.items():
        figures, episodes = schedule["figures"], schedule["episodes"]
        wins = sum(e["success"] for e in episodes)
        row = re.search(rf"^{name}\t(\d.*)$", shown.text, re.MULTILINE)[1].split("\t")
        assert row[0] == f"{wins / len(episodes):.3f}"
        assert row[1] == f"{wins / len(episodes):.3f} {_wilson(wins, len(episodes))}"
        assert row[2].startswith(f"{len(episodes)} (")
        assert row[4] == f"{sum(e['return'] for e in episodes) / len(episodes):.2f}"
        assert row[5:7] == [str(figures["inference_calls"]), f"{figures['calls_per_1000_steps']:.1f}"]
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert commit and commit in shown.text


def test_run_names_cross_arms_with_schedules():
    assert list(run_names([], ["any", "hold"])) == ["any", "hold"]
    assert run_names(["A", "B"], ["hold"]) == {"A": ("A", "hold"), "B": ("B", "hold")}
    assert list(run_names(["A", "B"], ["any", "hold"])) == ["A_any", "A_hold", "B_any", "B_hold"]


@browser.needs_chromium
def test_the_browser_check_sees_console_errors_and_broken_images(tmp_path):
    page = tmp_path / "bad.html"
    page.write_text('<p>x</p><img src="data:image/png;base64,AAAA"><script>console.error("boom")</script>')
    shown = browser.render(str(page))
    assert shown.broken_images == 1 and any("boom" in e for e in shown.errors), shown


def test_report_script_rebuilds_the_page_from_the_log_alone(report, tmp_path):
    directory, _ = report
    log = tmp_path / "episodes.jsonl"
    log.write_text((directory / "episodes.jsonl").read_text())  # the log alone, elsewhere
    run = _script("report.py", str(log))
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip() == f"Report: {tmp_path / 'report.html'}"
    assert (tmp_path / "report.html").read_text() == (directory / "report.html").read_text()


def test_report_that_is_a_file_is_refused_before_the_run(tmp_path):
    """eval.py's real entry point, in a process of its own: exit status 2 and the one usage line, no env built."""
    existing = tmp_path / "report.html"
    existing.write_text("kept")
    run = _script("eval.py", "--output", str(existing), "--steps", "16")
    assert run.returncode == 2 and "--output" in run.stderr and "is a file: give a folder" in run.stderr, run.stderr
    assert existing.read_text() == "kept" and "Traceback" not in run.stderr


def test_report_script_refuses_an_episode_log_in_one_line(tmp_path, capsys):
    log = tmp_path / "episodes.jsonl"
    log.write_text('{"env_id": 0, "episode": 0, "success": true, "length": 300}\n')
    status, err = load_script("report").main([str(log)]), capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1, err
    assert "is not a run log record" in err and "Traceback" not in err


@browser.needs_chromium
def test_camera_task_report_shows_frames_of_its_episodes(tmp_path):
    """On a camera task the log keeps a strip of the scene camera's frames of a few episodes of the first envs,
    each within its episode, and the page shows them. Episodes of 2 s (120 steps) and 150 steps: each env ends an
    episode, its frames kept every 120 / 6 steps."""
    _eval("--task", "Isaac-PushCube-Camera-Suspendable", "--num_envs", "2", "--steps", "150", "--desync", "--chunk",
          "8", "--output", str(tmp_path), "--timeline", "", "env.episode_length_s=2")
    _, schedules = _log(tmp_path)
    strips = schedules["global_clock"]["frames"]
    assert strips and all(s["camera"] == "scene_camera" and len(s["steps"]) >= 3 for s in strips), strips
    for strip in strips:
        episode = next(e for e in schedules["global_clock"]["episodes"]
                       if (e["env_id"], e["episode"]) == (strip["env_id"], strip["episode"]))
        assert strip["success"] == episode["success"] and 0 <= min(strip["steps"])
        assert max(strip["steps"]) < episode["length"] + episode["suspended_steps"]
    shown = browser.render(str(tmp_path / "report.html"))
    assert shown.errors == [] and shown.broken_images == 0 and shown.images == 2 + len(strips), shown
    assert "Episodes seen by the camera" in shown.text and "scene_camera at steps" in shown.text
