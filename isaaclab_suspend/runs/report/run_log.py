"""An evaluation's run log: JSON lines, each with a ``record`` kind: one ``run`` line (what ran: header, scoring,
quota, date, latency, provenance), then per run (an arm under a schedule) one ``schedule`` line (its figures as the
printed table has them, its timeline, on a camera task frame strips of a few episodes, its schedule and policy)
followed by its ``episode`` lines (the episode log's records, in the order the episodes ended).

A log is a file people share, so :func:`read_run_log` reads it as untrusted data: the file's size, the counts it
declares and every text are bounded before anything is allocated, every field is checked for its type and range,
and every embedded image is decoded and re-encoded as PNG (anything else is refused). A bad log raises one
:class:`ValueError` line naming the file, the line and what is wrong.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import math
import os
from collections.abc import Mapping

from ..outputs import new_file
from .timeline import ChunkTimeline

MAX_LOG_BYTES = 256 * 2**20
"""Largest run log read [bytes]."""
MAX_ENVS = 65536
"""Largest ``num_envs`` a log may declare."""
MAX_TEXT = 4096
"""Longest text field (header, scoring, command, a name) [characters]."""
MAX_TIMELINE_CELLS = 4_000_000
"""Largest timeline (envs x steps)."""
MAX_FRAME_STRIPS = 64
"""Most frame strips per run."""
MAX_FRAME_PIXELS = 4_000_000
"""Largest frame strip image (width x height)."""
MAX_COUNT = 10**12
"""Largest count (steps, episode index, length, calls)."""


def write_run_log(path: str, run: Mapping, schedules: Mapping[str, tuple]) -> str:
    """Write the run log to ``path`` (a temporary file beside it, then renamed): ``run`` (header, scoring,
    per_env, num_envs, has_success, date, latency, provenance) and, per run, its ``(figures, episode records,
    timeline or None, frame strips[, {chunk_schedule, policy}])`` (the strips of
    :meth:`~.frames.EpisodeFrames.strips`, none for a task without cameras). Returns the path."""
    path = os.path.abspath(path)
    with new_file(path, True, "run log") as file:  # written whole; whether to replace it: the caller's check
        file.write(json.dumps({"record": "run", **run}) + "\n")
        for name, (figures, episodes, timeline, strips, *about) in schedules.items():
            about = about[0] if about else {}
            timeline = timeline.as_record() if timeline is not None else None
            file.write(json.dumps({"record": "schedule", "schedule": name, **about, "figures": figures,
                                   "timeline": timeline, "frames": strips}) + "\n")
            file.writelines(json.dumps({"record": "episode", "schedule": name, **episode}) + "\n"
                            for episode in episodes)
    return path


def _is_int(value: object, low: int = 0, high: int = MAX_COUNT) -> bool:
    return type(value) is int and low <= value <= high


def _is_text(value: object, limit: int = MAX_TEXT) -> bool:
    return isinstance(value, str) and len(value) <= limit


def _is_number(value: object) -> bool:
    return type(value) in (int, float) and (type(value) is int or not math.isinf(value))


def _need(ok: bool, what: str) -> None:
    if not ok:
        raise ValueError(what)


def _check_run(r: dict) -> None:
    _need(_is_text(r.get("header")), f"'header' must be text of at most {MAX_TEXT} characters")
    _need(_is_text(r.get("scoring")), f"'scoring' must be text of at most {MAX_TEXT} characters")
    _need(_is_int(r.get("num_envs"), 1, MAX_ENVS), f"'num_envs' must be an integer in [1, {MAX_ENVS}]")
    _need(r.get("per_env") is None or _is_int(r["per_env"], 1), "'per_env' must be a positive integer or null")
    _need(type(r.get("has_success")) is bool, "'has_success' must be true or false")
    for key in ("date", "latency"):
        _need(r.get(key) is None or _is_text(r[key], 200), f"'{key}' must be short text or null")
    _need(type(r.get("virtual_latency", False)) is bool, "'virtual_latency' must be true or false")
    p = r.get("provenance")
    _need(isinstance(p, dict), "'provenance' must be an object")
    for key in ("task", "device", "policy", "command", "host"):
        _need(_is_text(p.get(key)), f"provenance '{key}' must be text of at most {MAX_TEXT} characters")
    _need(p.get("commit") is None or _is_text(p["commit"], 100), "provenance 'commit' must be short text or null")
    _need(p.get("seed") is None or _is_int(p["seed"], -2**63, 2**64), "provenance 'seed' must be an integer or null")
    overrides, versions = p.get("overrides"), p.get("versions")
    _need(isinstance(overrides, list) and len(overrides) <= 256 and all(map(_is_text, overrides)),
          "provenance 'overrides' must be a list of texts")
    _need(isinstance(versions, dict) and len(versions) <= 64 and all(
        _is_text(k, 100) and _is_text(v, 100) for k, v in versions.items()), "provenance 'versions' must map names"
          " to version texts")


def _check_figures(figures: object, num_envs: int) -> None:
    _need(isinstance(figures, dict) and len(figures) <= 256, "'figures' must be an object")
    for key, value in figures.items():
        _need(_is_text(key, 100), "a figure's name must be short text")
        ok = value is None or _is_number(value) or _is_text(value, 200) or (
            isinstance(value, list) and len(value) <= num_envs and all(map(_is_number, value)))
        _need(ok, f"figure '{key}' must be a number")


def _check_timeline(t: object) -> None:
    if t is None:
        return
    _need(isinstance(t, dict), "'timeline' must be an object or null")
    envs, status = t.get("envs"), t.get("status")
    _need(_is_int(envs, 1, MAX_ENVS) and isinstance(status, list) and len(status) == envs,
          "the timeline's 'status' must hold one row per env ('envs')")
    steps = len(status[0]) if status and isinstance(status[0], str) else -1
    _need(steps >= 0 and envs * steps <= MAX_TIMELINE_CELLS,
          f"the timeline must have at most {MAX_TIMELINE_CELLS} cells (envs x steps)")
    _need(all(isinstance(row, str) and len(row) == steps and not row.strip("012") for row in status),
          "each timeline row must be a string of status digits 0-2, all of one length")
    for key in ("served", "reset"):
        rows = t.get(key)
        _need(isinstance(rows, list) and len(rows) == envs and all(
            isinstance(row, list) and len(row) <= steps and all(_is_int(s, 0, steps - 1) for s in row)
            for row in rows), f"the timeline's '{key}' must list, per env, steps within the timeline")
    calls = t.get("inference_steps")
    _need(isinstance(calls, list) and len(calls) <= steps and all(_is_int(s, 0, steps - 1) for s in calls),
          "the timeline's 'inference_steps' must be steps within the timeline")


def reencoded_png(data: object) -> str:
    """``data`` (base64 text) decoded, checked to be a PNG of at most ``MAX_FRAME_PIXELS`` pixels and encoded
    again, as base64: the page holds only pixels this function wrote.

    Raises:
        ValueError: If ``data`` is not a base64 PNG image.
    """
    from PIL import Image

    _need(isinstance(data, str) and len(data) <= 4 * MAX_FRAME_PIXELS, "a frame's 'png' must be base64 text")
    try:
        raw = base64.b64decode(data, validate=True)
        with Image.open(io.BytesIO(raw), formats=["PNG"]) as image:
            width, height = image.size
            _need(width * height <= MAX_FRAME_PIXELS, f"a frame image must have at most {MAX_FRAME_PIXELS} pixels")
            pixels = image.convert("RGB")
    except (binascii.Error, OSError, Image.DecompressionBombError, SyntaxError):
        raise ValueError("a frame's 'png' is not a base64 PNG image") from None
    buffer = io.BytesIO()
    pixels.save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def _check_frames(frames: object) -> list[dict]:
    if frames is None:
        return []
    _need(isinstance(frames, list) and len(frames) <= MAX_FRAME_STRIPS,
          f"'frames' must be a list of at most {MAX_FRAME_STRIPS} strips")
    strips = []
    for s in frames:
        _need(isinstance(s, dict), "a frame strip must be an object")
        _need(all(_is_int(s.get(k)) for k in ("env_id", "episode", "length")) and type(s.get("success")) is bool,
              "a frame strip needs integer 'env_id', 'episode', 'length' and a boolean 'success'")
        _need(isinstance(s.get("steps"), list) and len(s["steps"]) <= 64 and all(map(_is_int, s["steps"])),
              "a frame strip's 'steps' must be a list of steps")
        _need(_is_text(s.get("camera")), "a frame strip's 'camera' must be text")
        strips.append({**s, "png": reencoded_png(s.get("png"))})
    return strips


def _check_episode(e: dict, num_envs: int) -> None:
    _need(_is_int(e.get("env_id"), 0, num_envs - 1), f"an episode's 'env_id' must be an integer in [0, {num_envs})")
    for key in ("episode", "length", "suspended_steps", "calls", "end_step"):
        _need(_is_int(e.get(key)), f"an episode's '{key}' must be a non-negative integer")
    _need(type(e.get("success")) is bool, "an episode's 'success' must be true or false")
    _need("return" not in e or (_is_number(e["return"]) and not math.isnan(e["return"])),
          "an episode's 'return' must be a finite number")
    _need(e.get("start_hash") is None or _is_text(e["start_hash"], 64), "an episode's 'start_hash' must be short text")
    _need(e.get("demo") is None or _is_text(e["demo"], 200), "an episode's 'demo' must be short text")


def read_run_log(path: str) -> tuple[dict, dict[str, dict]]:
    """The ``run`` record and, per run, ``{"figures", "timeline", "frames", "episodes", ...}`` of the run log at
    ``path``, every field checked (module docstring).

    Raises:
        ValueError: If the file is too large or is not a well-formed run log (one line saying where and what).
    """
    size = os.path.getsize(path)
    if size > MAX_LOG_BYTES:
        raise ValueError(f"'{path}' is {size} bytes, more than a run log's {MAX_LOG_BYTES}: not read.")
    run, schedules = None, {}
    with open(path, encoding="utf-8", errors="strict") as file:
        number = 0
        try:
            for number, line in enumerate(file, 1):
                if not line.strip():
                    continue
                record = json.loads(line)
                _need(isinstance(record, dict), "not a JSON object")
                kind = record.pop("record", None)
                if kind == "run":
                    _need(run is None, "a second run record")
                    _check_run(record)
                    run = record
                elif kind == "schedule":
                    _need(run is not None, "a schedule record before the run record")
                    name = record.get("schedule")
                    _need(_is_text(name, 1000) and name not in schedules, "'schedule' must be a new name (text)")
                    for key in ("chunk_schedule", "policy"):
                        _need(record.get(key) is None or _is_text(record[key]), f"'{key}' must be text")
                    _check_figures(record.get("figures"), run["num_envs"])
                    _check_timeline(record.get("timeline"))
                    schedules[name] = {**record, "frames": _check_frames(record.get("frames")), "episodes": []}
                elif kind == "episode":
                    name = record.pop("schedule", None)
                    _need(isinstance(name, str) and name in schedules, "an episode of no schedule record before it")
                    _check_episode(record, run["num_envs"])
                    schedules[name]["episodes"].append(record)
                else:
                    raise ValueError("no 'record' kind of run, schedule or episode")
        except UnicodeDecodeError:
            raise ValueError(f"'{path}' is not UTF-8 text: not a run log of eval.py --report.") from None
        except RecursionError:
            raise ValueError(f"'{path}' line {number}: JSON nested too deeply for a run log record.") from None
        except ValueError as err:
            reason = "not JSON" if isinstance(err, json.JSONDecodeError) else err
            raise ValueError(f"'{path}' line {number} is not a run log record ({reason}); a run log is written by"
                             " eval.py --report.") from None
    if run is None:
        raise ValueError(f"'{path}' has no run record: it is not a run log of eval.py --report (an --episode_log"
                         " alone does not hold the run's figures).")
    return run, schedules
