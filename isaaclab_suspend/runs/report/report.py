"""An evaluation's report: one self-contained HTML page (no network, no server, figures embedded as base64 PNG)
made from the run log alone, so that it can be rebuilt, shared and checked later.

The run log is JSON lines, each with a ``record`` kind: one ``run`` line (what ran: header, scoring, quota,
provenance), then per schedule one ``schedule`` line (its figures as the printed table has them, its timeline, on
a camera task frame strips of a few episodes) followed by its ``episode`` lines (the episode log's records, in the
order the episodes ended). The page shows the headline per schedule (success with a 95 % Wilson interval, episodes
per env against the quota, episode lengths, model calls, useful env-steps/s against the overlap bound, time
suspended), the fairness of the count (the same episodes counted first-N, as IsaacLab-Arena and GR00T count, beside
per-env quotas), the chunk timeline, the camera's frames of a few episodes and the provenance (task, overrides,
seed, device, versions, commit, policy).
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import MISSING

from isaaclab.utils import configclass

from ...chunking.stats import table_figures
from ..paired import wilson as wilson_interval
from .timeline import ChunkTimeline, plot_timelines


def write_run_log(path: str, run: Mapping,
                  schedules: Mapping[str, tuple[Mapping, list[dict], ChunkTimeline | None, list[dict]]]) -> str:
    """Write the run log (module docstring) to ``path``: ``run`` (header, scoring, per_env, num_envs, has_success,
    provenance) and, per schedule, its ``(figures, episode records, timeline or None, frame strips)`` (the strips
    of :meth:`~.frames.EpisodeFrames.strips`, none for a task without cameras). Returns the path."""
    path = os.path.abspath(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as file:
        file.write(json.dumps({"record": "run", **run}) + "\n")
        for name, (figures, episodes, timeline, strips) in schedules.items():
            timeline = timeline.as_record() if timeline is not None else None
            file.write(json.dumps({"record": "schedule", "schedule": name, "figures": figures,
                                   "timeline": timeline, "frames": strips}) + "\n")
            file.writelines(json.dumps({"record": "episode", "schedule": name, **episode}) + "\n"
                            for episode in episodes)
    return path


def read_run_log(path: str) -> tuple[dict, dict[str, dict]]:
    """The ``run`` record and, per schedule, ``{"figures", "timeline", "episodes"}`` of the run log at ``path``.

    Raises:
        ValueError: If the file is not a run log (an episode log of ``--episode_log`` alone has no run line).
    """
    run, schedules = None, {}
    with open(path) as file:
        for number, line in enumerate(file, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                kind = record.pop("record")
                if kind == "run":
                    run = record
                elif kind == "schedule":
                    schedules[record["schedule"]] = {**record, "episodes": []}
                elif kind == "episode":
                    schedules[record.pop("schedule")]["episodes"].append(record)
            except (ValueError, KeyError, TypeError, AttributeError):
                raise ValueError(f"'{path}' line {number} is not a run log record (JSON with a 'record' kind of"
                                 " run, schedule or episode, written by eval.py --report).") from None
    if run is None:
        raise ValueError(f"'{path}' has no run record: it is not a run log of eval.py --report (an --episode_log"
                         " alone does not hold the run's figures).")
    return run, schedules


@configclass
class EvalReportCfg:
    """Where a report is made from and written to (:func:`write_report`)."""

    log_path: str = MISSING
    """The run log (:func:`write_run_log`)."""
    output_path: str | None = None
    """The HTML page (None: ``report.html`` beside the log, which the page links to)."""
    hist_bins: int = 20
    """Bins of the episode length histogram."""


def write_report(cfg: EvalReportCfg) -> str:
    """Write the HTML report of the run log ``cfg.log_path``; returns the page's path.

    Raises:
        ValueError: If the log is not a run log.
    """
    run, schedules = read_run_log(cfg.log_path)
    path = os.path.abspath(cfg.output_path or os.path.join(os.path.dirname(os.path.abspath(cfg.log_path)),
                                                           "report.html"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    log_link = os.path.relpath(os.path.abspath(cfg.log_path), os.path.dirname(path))
    with open(path, "w") as file:
        file.write(render_report(run, schedules, log_link, cfg.hist_bins))
    return path


def fairness(episodes: list[dict], num_envs: int, per_env: int | None) -> dict[str, list[dict]]:
    """The same run's episodes counted three ways: ``per-env quota`` (the first K of every env, K the run's quota
    or, without one, the most every env reached), ``first-N`` (the first N = num_envs x K to end, as
    IsaacLab-Arena and GR00T count) and ``all scored`` (what the printed table counts)."""
    per_env_episodes = [[e for e in episodes if e["env_id"] == env] for env in range(num_envs)]
    quota = per_env if per_env is not None else min(len(e) for e in per_env_episodes)
    quota_set = [e for env_episodes in per_env_episodes for e in env_episodes[:quota]]
    return {f"per-env quota (K = {quota})": quota_set, f"first-N (N = {num_envs * quota})": episodes[:num_envs * quota],
            "all scored": episodes}


def _rate(episodes: list[dict], has_success: bool) -> str:
    """Success rate with its 95 % Wilson interval, as text."""
    if not episodes or not has_success:
        return "n/a"
    wins = sum(bool(e["success"]) for e in episodes)
    low, high = wilson_interval(wins, len(episodes))
    return f"{wins / len(episodes):.3f} [{low:.3f}, {high:.3f}]"


def _png(fig) -> str:
    """A matplotlib figure as an ``<img>`` with its PNG embedded (the figure is closed)."""
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    return f'<img alt="figure" src="data:image/png;base64,{base64.b64encode(buffer.getvalue()).decode()}">'


def _figures_html(run: Mapping, schedules: Mapping[str, dict], bins: int) -> str:
    """Episode lengths (histogram) and episodes per env (bars, the quota as a line), one colour per schedule."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (lengths, per_env) = plt.subplots(1, 2, figsize=(11, 3.2))
    num_envs = run["num_envs"]
    width = 0.8 / max(len(schedules), 1)
    for i, (name, schedule) in enumerate(schedules.items()):
        episode_lengths = [e["length"] for e in schedule["episodes"]]
        if episode_lengths:
            lengths.hist(episode_lengths, bins=bins, alpha=0.6, label=name)
        counts = [sum(e["env_id"] == env for e in schedule["episodes"]) for env in range(num_envs)]
        per_env.bar([env + (i - (len(schedules) - 1) / 2) * width for env in range(num_envs)], counts, width,
                    label=name)
    if run.get("per_env"):
        per_env.axhline(run["per_env"], color="black", linewidth=1, linestyle="--", label="quota")
    lengths.set(xlabel="episode length [steps]", ylabel="episodes", title="episode lengths")
    per_env.set(xlabel="env", ylabel="episodes scored", title="episodes scored per env")
    for ax in (lengths, per_env):
        if ax.get_legend_handles_labels()[0]:  # no episode ended: an empty histogram
            ax.legend(fontsize=8)
    fig.tight_layout()
    return _png(fig)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], cell_attrs: Sequence[Sequence[str]] | None = None
           ) -> str:
    """An HTML table; ``cell_attrs`` (same shape as ``rows``) adds attributes to the cells."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = []
    for r, row in enumerate(rows):
        cells = "".join(f"<td{(' ' + cell_attrs[r][c]) if cell_attrs else ''}>{html.escape(str(cell))}</td>"
                        for c, cell in enumerate(row))
        body.append(f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _headline(run: Mapping, schedules: Mapping[str, dict]) -> str:
    """One row per schedule: success with its interval, episodes and their spread over the envs, lengths, model
    calls, useful env-steps/s against the overlap bound, time suspended; the numbers as the printed table's."""
    rows, attrs = [], []
    per_env = run.get("per_env")
    for name, schedule in schedules.items():
        shown = table_figures(schedule["figures"])
        episodes = schedule["episodes"]
        counts = [sum(e["env_id"] == env for e in episodes) for env in range(run["num_envs"])]
        met = f"quota {per_env} met by {sum(c >= per_env for c in counts)}/{len(counts)} envs" if per_env else (
            f"{min(counts)}-{max(counts)} per env")
        success = _rate(episodes, run["has_success"])
        lengths = [e["length"] for e in episodes]
        spread = f"{min(lengths)}-{max(lengths)}" if lengths else "-"
        rows.append([name, shown.get("success_rate", "n/a"), success, f"{shown.get('episodes_scored', '0')} ({met})",
                     f"{shown.get('mean_episode_length', 'n/a')} ({spread})", shown.get("inference_calls", "-"),
                     shown.get("calls_per_1000_steps", "-"),
                     f"{shown.get('active_env_steps_per_s', '-')} / {shown.get('overlap_bound', '-')}",
                     f"{shown.get('suspended_env_steps', '-')} ({shown.get('suspended_fraction', '-')})"])
        keys = [None, "success_rate", None, "episodes_scored", "mean_episode_length", "inference_calls",
                "calls_per_1000_steps", "active_env_steps_per_s", "suspended_env_steps"]
        attrs.append([f'data-schedule="{html.escape(name)}"' + (f' data-figure="{k}"' if k else "") for k in keys])
    header = ["schedule", "success rate", "success, 95 % Wilson interval", "episodes scored", "mean length (range)",
              "model calls", "calls / 1000 steps", "useful env-steps/s / overlap bound",
              "suspended env-steps (fraction)"]
    return _table(header, rows, attrs)


def _fairness_html(run: Mapping, schedules: Mapping[str, dict]) -> str:
    """The :func:`fairness` counts of each schedule, and which envs scored no episode (then no quota is met)."""
    rows, notes = [], []
    for name, schedule in schedules.items():
        scored = {e["env_id"] for e in schedule["episodes"]}
        if missing := [env for env in range(run["num_envs"]) if env not in scored]:
            notes.append(f"{name}: envs {', '.join(map(str, missing))} scored no episode, so no per-env quota above 0"
                         " is met; a longer run (or --episodes_per_env) makes one.")
        for counting, episodes in fairness(schedule["episodes"], run["num_envs"], run.get("per_env")).items():
            mean = (f"{sum(e['length'] for e in episodes) / len(episodes):.1f}" if episodes else "n/a")
            rows.append([name, counting, len(episodes), _rate(episodes, run["has_success"]), mean])
    table = _table(["schedule", "counting", "episodes", "success, 95 % Wilson interval", "mean length"], rows)
    return table + "".join(f"<p>{html.escape(note)}</p>" for note in notes)


def _all_figures(schedules: Mapping[str, dict]) -> str:
    """Every figure of the printed table, schedules as columns (``data-figure`` / ``data-schedule`` cells)."""
    shown = {name: table_figures(s["figures"]) for name, s in schedules.items()}
    keys = list(dict.fromkeys(k for figures in shown.values() for k in figures))
    rows = [[key, *(shown[name].get(key, "-") for name in schedules)] for key in keys]
    attrs = [["", *(f'data-figure="{key}" data-schedule="{html.escape(name)}"' for name in schedules)] for key in keys]
    return _table(["figure", *schedules], rows, attrs)


def _timeline_html(run: Mapping, schedules: Mapping[str, dict]) -> str:
    timelines = {name: ChunkTimeline.from_record(s["timeline"]) for name, s in schedules.items() if s["timeline"]}
    if not timelines:
        return "<p>No timeline in the log (the run was made without one).</p>"
    buffer = io.BytesIO()
    plot_timelines(timelines, buffer, title=run["header"])
    data = base64.b64encode(buffer.getvalue()).decode()
    return f'<img alt="chunk timeline" src="data:image/png;base64,{data}">'


def _frames_html(schedules: Mapping[str, dict]) -> str:
    """The frame strips of each schedule (camera tasks), captioned with the episode's outcome."""
    parts = []
    for name, schedule in schedules.items():
        for strip in schedule.get("frames") or []:
            caption = (f"{name}: env {strip['env_id']}, episode {strip['episode']},"
                       f" {'success' if strip['success'] else 'failure'}, {strip['length']} steps; {strip['camera']}"
                       f" at steps {', '.join(map(str, strip['steps']))}")
            parts.append(f'<figure><img class="frames" alt="{html.escape(caption)}" src="data:image/png;base64,'
                         f'{strip["png"]}"><figcaption>{html.escape(caption)}</figcaption></figure>')
    if not parts:
        return ""
    return "<h2>Episodes seen by the camera</h2>\n" + "\n".join(parts)


def _provenance_html(run: Mapping, log_link: str) -> str:
    p = run["provenance"]
    rows = [["task", p["task"]], ["cfg overrides", " ".join(p["overrides"]) or "none"], ["seed", p["seed"]],
            ["device", p["device"]], ["policy", p["policy"]], ["commit", p["commit"] or "not a git checkout"],
            ["command", p["command"]], ["host", p["host"]],
            ["versions", ", ".join(f"{k} {v}" for k, v in p["versions"].items())]]
    link = f'<p>Episode log (this page is rebuilt from it by <code>scripts/report.py</code>): ' \
           f'<a href="{html.escape(log_link)}">{html.escape(log_link)}</a></p>'
    return f'<div class="provenance">{_table(["", ""], rows)}</div>' + link


_STYLE = """body{font-family:sans-serif;margin:1.5em auto;max-width:1200px;color:#222}
table{border-collapse:collapse;margin:.5em 0 1em}td,th{border:1px solid #ccc;padding:.2em .6em;text-align:right}
th{background:#f0f0f0}td:first-child{text-align:left}img{max-width:100%}h2{border-bottom:1px solid #ddd}
code{background:#f4f4f4}img.frames{height:160px;width:auto;image-rendering:pixelated}
.provenance td{text-align:left}.provenance thead{display:none}"""


def render_report(run: Mapping, schedules: Mapping[str, dict], log_link: str = "episodes.jsonl",
                  hist_bins: int = 20) -> str:
    """The HTML page of a run log read by :func:`read_run_log` (``log_link``: the log, relative to the page)."""
    title = html.escape(run["header"])
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Evaluation: {title}</title>
<style>{_STYLE}</style></head><body>
<h1>Evaluation report</h1>
<p id="header">{title}</p>
<p>Episodes scored: {html.escape(run["scoring"])}.</p>
<h2>Headline</h2>
{_headline(run, schedules)}
{_figures_html(run, schedules, hist_bins)}
<h2>Fairness: which episodes are counted</h2>
<p>Counting the first episodes to finish (first-N, as IsaacLab-Arena and GR00T count) over-represents the short ones;
a per-env quota takes the same number from every env. Both are counted here from the same run's episodes.</p>
{_fairness_html(run, schedules)}
<h2>Chunk timeline</h2>
<p>The first envs of each schedule: active, holding, suspended (grey); dots: chunks received; crosses: resets; blue
lines: model calls.</p>
{_timeline_html(run, schedules)}
{_frames_html(schedules)}
<h2>All figures</h2>
{_all_figures(schedules)}
<h2>Provenance</h2>
{_provenance_html(run, log_link)}
</body></html>
"""

