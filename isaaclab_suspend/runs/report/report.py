"""An evaluation's report: one self-contained HTML page (no network, no server, figures embedded as base64 PNG)
made from the run log alone (:mod:`.run_log`), so that it can be rebuilt, shared and checked later.

The page answers first which run is better, by how much and how sure (the verdict of every two runs,
:mod:`~isaaclab_suspend.runs.paired`), then keeps counts (exact) apart from timings (one run, noisy; an emulated
latency is marked), then shows the episode lengths and the episodes per env, the fairness of the count (first-N
against per-env quotas), the chunk timeline with its model calls, a sortable table of every episode, the camera's
frames of a few episodes, every figure with its definition and the provenance.

Everything from the log is escaped; images are re-encoded PNG (:func:`~.run_log.reencoded_png`); the one link,
to the log, is a relative file name; a Content-Security-Policy lets only the page's own sorting script run and
loads nothing from anywhere. Rendering takes time linear in the episodes and timeline cells the log holds.
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import math
import os
import urllib.parse
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import MISSING

from isaaclab.utils import configclass

from ...chunking.stats import table_figures
from ..outputs import new_file
from ..paired import run_verdicts
from ..paired import wilson as wilson_interval
from .run_log import read_run_log
from .timeline import ChunkTimeline, plot_timelines

TIMINGS = ("inference_s", "simulation_s", "wall_s", "active_env_steps_per_s", "overlap_bound")
"""Figures that are timings of one run on one machine (noisy); every other figure is a count or a ratio of counts,
exact for the run's seed."""
DEFINITIONS = {
    "steps": "env steps the run took (every env steps together)",
    "inference_calls": "model calls (one call plans chunks for a batch of envs)",
    "calls_per_1000_steps": "model calls per 1000 env steps",
    "rows_inferred": "env rows the model was run on, summed over calls",
    "envs_served": "envs that took a chunk, summed over calls",
    "mean_envs_per_call": "envs served per model call",
    "fetch_efficiency": "mean envs served per call over the number of envs",
    "active_env_steps": "env-steps in which an env acted (useful steps)",
    "suspended_env_steps": "env-steps in which an env waited suspended (frozen, its time stopped)",
    "held_env_steps": "env-steps in which an env held its last action",
    "suspended_fraction": "suspended env-steps over all env-steps",
    "episodes_completed": "episodes that ended in the run, counted or not",
    "episodes_scored": "episodes counted in the success rate (see scoring)",
    "mean_episode_length": "mean active steps of the scored episodes",
    "success_rate": "scored episodes that ended by the task's success term, over the scored episodes",
    "inference_s": "seconds spent in model calls (with an emulated latency: including it)",
    "simulation_s": "seconds spent in env.step",
    "wall_s": "seconds from the first step to the last (including an emulated latency, slept or virtual)",
    "active_env_steps_per_s": "useful env-steps per wall second",
    "overlap_bound": "env-steps per second if every env acted every step and inference cost no time",
    "roughness": "mean |a_t - a_(t-1)| over consecutive executed actions",
    "boundary_roughness": "roughness where the second action starts a new chunk",
    "within_chunk_roughness": "roughness inside a chunk",
}
"""What each figure of the printed table means (shown beside it)."""
EPISODE_COLUMNS = {"run": "the run (arm and schedule)", "env": "env index", "episode": "its index within the env",
                   "start hash": "hash of the episode's initial state (equal hashes: equal starts)",
                   "success": "ended by the success term", "length": "active env steps",
                   "return": "sum of its rewards", "calls": "model calls that served it",
                   "suspended steps": "steps it waited suspended"}
"""The per-episode table's columns and what each means."""
MAX_EPISODE_ROWS = 2000
"""Episodes listed in the per-episode table (the log holds them all)."""
_SORT_SCRIPT = ("document.querySelectorAll('table.sortable th').forEach((th,i)=>th.onclick=()=>{"
                "const b=th.closest('table').tBodies[0],d=th.dataset.asc=th.dataset.asc?'':'1';"
                "[...b.rows].sort((x,y)=>{const p=x.cells[i].dataset.v,q=y.cells[i].dataset.v;"
                "return (isNaN(p)||isNaN(q)?p.localeCompare(q):p-q)*(d?1:-1)}).forEach(r=>b.appendChild(r))});")
_CSP = ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'sha256-"
        + base64.b64encode(hashlib.sha256(_SORT_SCRIPT.encode()).digest()).decode() + "'; form-action 'none';"
        " base-uri 'none'")
_STYLE = """body{font-family:sans-serif;margin:1em auto;max-width:1200px;padding:0 .5em;color:#222}
p,li,dd,figcaption{overflow-wrap:anywhere}.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.2em .6em;text-align:right}
th{background:#f0f0f0}td:first-child{text-align:left}img{max-width:100%;height:auto}h2{border-bottom:1px solid #ddd}
code{background:#f4f4f4;overflow-wrap:anywhere}img.frames{height:160px;width:auto;max-width:100%;object-fit:contain;
image-rendering:pixelated}.provenance td,table.text td{text-align:left}.verdict{font-size:1.1em}.lead{font-weight:bold}
dl.defs{font-size:.85em;color:#555}dl.defs dt{font-weight:bold;display:inline}dl.defs dd{display:inline;margin:0 1em 0 .3em}
table.sortable th{cursor:pointer}.note{color:#8a5a00}"""


@configclass
class EvalReportCfg:
    """Where a report is made from and written to (:func:`write_report`)."""

    log_path: str = MISSING
    """The run log (:func:`~.run_log.write_run_log`)."""
    output_path: str | None = None
    """The HTML page (None: ``report.html`` beside the log, which the page links to)."""
    hist_bins: int = 20
    """Bins of the episode length histogram."""
    overwrite: bool = False
    """Replace a page that exists (else it is refused, after the log was read)."""


def write_report(cfg: EvalReportCfg) -> str:
    """Write the HTML report of the run log ``cfg.log_path``; returns the page's path. The page is written to a
    temporary file beside it, then renamed: a bad log leaves an existing page as it was.

    Raises:
        ValueError: If the log is not a well-formed run log, or the page would replace the log, a directory, a
            symbolic link, or a page that exists without ``cfg.overwrite``.
    """
    log = os.path.abspath(cfg.log_path)
    path = os.path.abspath(cfg.output_path or os.path.join(os.path.dirname(log), "report.html"))
    if path == log or (os.path.exists(path) and os.path.samefile(path, log)):
        raise ValueError(f"The page '{path}' would replace its own run log: give another output.")
    if os.path.isdir(path) or os.path.islink(path):
        raise ValueError(f"The page '{path}' is a {'directory' if os.path.isdir(path) else 'symbolic link'}: give"
                         " a file path.")
    run, schedules = read_run_log(log)
    page = render_report(run, schedules, os.path.relpath(log, os.path.dirname(path)), cfg.hist_bins)
    with new_file(path, cfg.overwrite, "EvalReportCfg.output_path", keep=[log]) as file:  # whole; never the log itself
        file.write(page)
    return path


def _per_env(episodes: Sequence[Mapping]) -> dict[int, list[Mapping]]:
    """The episodes of each env that scored any, in the order they ended."""
    by_env: dict[int, list[Mapping]] = {}
    for e in episodes:
        by_env.setdefault(e["env_id"], []).append(e)
    return by_env


def fairness(episodes: list[dict], num_envs: int, per_env: int | None) -> dict[str, list[dict]]:
    """The same run's episodes counted three ways: ``per-env quota`` (the first K of every env, K the run's quota
    or, without one, the most every env reached), ``first-N`` (the first N = num_envs x K to end, as
    IsaacLab-Arena and GR00T count) and ``all scored`` (what the printed table counts)."""
    by_env = _per_env(episodes)
    quota = per_env if per_env is not None else (min(map(len, by_env.values())) if len(by_env) == num_envs else 0)
    quota_set = [e for env_episodes in by_env.values() for e in env_episodes[:quota]]
    return {f"per-env quota (K = {quota})": quota_set, f"first-N (N = {num_envs * quota})": episodes[:num_envs * quota],
            "all scored": episodes}


def _rate(episodes: list[dict], has_success: bool) -> str:
    """Success rate with its 95 % Wilson interval, as text."""
    if not episodes:
        return "No finished episode"
    if not has_success:
        return "n/a (no success term)"
    wins = sum(bool(e["success"]) for e in episodes)
    low, high = wilson_interval(wins, len(episodes))
    return f"{wins / len(episodes):.3f} [{low:.3f}, {high:.3f}]"


def _img(fig_or_png, alt: str) -> str:
    """A matplotlib figure (closed here) or PNG bytes as an ``<img>`` with the PNG embedded."""
    if not isinstance(fig_or_png, bytes):
        import matplotlib.pyplot as plt

        buffer = io.BytesIO()
        fig_or_png.savefig(buffer, format="png", dpi=100)
        plt.close(fig_or_png)
        fig_or_png = buffer.getvalue()
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{base64.b64encode(fig_or_png).decode()}">'


def _figures_html(run: Mapping, schedules: Mapping[str, dict], bins: int) -> str:
    """Episode lengths (histogram, the runs' bars side by side) and episodes scored per env (bars up to 64 envs,
    the quota as a line; a histogram of the per-env counts above), one colour per run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (lengths, per_env) = plt.subplots(1, 2, figsize=(11, 3.2))
    num_envs = run["num_envs"]
    names = [name for name, s in schedules.items() if s["episodes"]]
    if names:
        lengths.hist([[e["length"] for e in schedules[n]["episodes"]] for n in names], bins=bins,
                     label=[n[:40] for n in names],
                     color=[f"C{list(schedules).index(n)}" for n in names])
    width = 0.8 / max(len(schedules), 1)
    for i, (name, schedule) in enumerate(schedules.items()):
        counts = Counter(e["env_id"] for e in schedule["episodes"])
        if num_envs <= 64:
            per_env.bar([env + (i - (len(schedules) - 1) / 2) * width for env in range(num_envs)],
                        [counts.get(env, 0) for env in range(num_envs)], width, label=name[:40], color=f"C{i}")
        else:
            spread = Counter(counts.values())
            spread[0] = num_envs - len(counts)
            per_env.bar([k + (i - (len(schedules) - 1) / 2) * width for k in spread], list(spread.values()), width,
                        label=name[:40], color=f"C{i}")
    if run.get("per_env") and num_envs <= 64:
        per_env.axhline(run["per_env"], color="black", linewidth=1, linestyle="--", label="quota")
    lengths.set(xlabel="episode length [steps]", ylabel="episodes", title="episode lengths")
    if num_envs <= 64:
        per_env.set(xlabel="env", ylabel="episodes scored", title="episodes scored per env")
    else:
        per_env.set(xlabel="episodes scored by an env", ylabel="envs", title="envs by episodes scored")
    for ax in (lengths, per_env):
        if ax.get_legend_handles_labels()[0]:  # no episode ended: an empty histogram
            ax.legend(fontsize=8)
    fig.tight_layout()
    return (_img(fig, "episode lengths and episodes scored per env")
            + "<p class=\"def\">Left: how many scored episodes had each length (active steps), one colour per run."
              " Right: how many episodes each env scored; a fair count takes the same number from every env.</p>")


def _table(header: Sequence[str], rows: Sequence[Sequence[object]],
           cell_attrs: Sequence[Sequence[str]] | None = None, classes: str = "") -> str:
    """An HTML table in a box that scrolls sideways on a narrow screen; ``cell_attrs`` (same shape as ``rows``)
    adds attributes (already escaped) to the cells."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = []
    for r, row in enumerate(rows):
        cells = "".join(f"<td{(' ' + cell_attrs[r][c]) if cell_attrs and cell_attrs[r][c] else ''}>"
                        f"{html.escape(str(cell))}</td>" for c, cell in enumerate(row))
        body.append(f"<tr>{cells}</tr>")
    klass = f' class="{classes}"' if classes else ""
    return f'<div class="scroll"><table{klass}><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'


def _definitions(terms: Mapping[str, str]) -> str:
    """Definitions of a table's columns, beside it."""
    items = "".join(f"<dt>{html.escape(t)}</dt><dd>{html.escape(d)}</dd>" for t, d in terms.items())
    return f'<dl class="defs">{items}</dl>'


def _mean(values: Sequence[float]) -> str:
    return f"{sum(values) / len(values):.2f}" if values else "n/a"


def _verdicts(run: Mapping, schedules: Mapping[str, dict]) -> list[dict]:
    """The verdict on every two runs that differ in their policy or in their schedule, not both
    (:func:`~isaaclab_suspend.runs.paired.run_verdicts`), from the log alone."""
    return run_verdicts([schedules], {n: s["figures"] for n, s in schedules.items()}, run["has_success"])


def _lead(v: Mapping, has_success: bool) -> str:
    """Which of a verdict's two runs is better, by how much and how sure, in a few words."""
    if not v["episodes_a"] or not v["episodes_b"]:
        return "No verdict: an arm has no finished episode."
    if has_success:
        d, p = v["difference"], v["p"]
        sure = "a difference this large is unlikely by chance (p < 0.05)" if p < 0.05 else (
            "this could be chance (p >= 0.05): more episodes would tell")
        if d == 0:
            return f"{v['a']} and {v['b']} succeed equally often; {sure}."
        better, worse = (v["b"], v["a"]) if d > 0 else (v["a"], v["b"])
        return f"{better} succeeds more often than {worse}, by {100 * abs(d):.1f} points; {sure}."
    if v.get("return_difference") is not None:
        mean, low, high = v["return_difference"]
        better = v["b"] if mean > 0 else v["a"]
        sure = "its 95 % interval excludes 0" if low > 0 or high < 0 else "its 95 % interval includes 0"
        return f"{better} has the higher return, by {abs(mean):.2f}; {sure}."
    return "No success term and no return: see the figures below."


def _verdict_html(run: Mapping, schedules: Mapping[str, dict]) -> str:
    """The runs (arm, schedule, policy) and the verdict on every two, or, for one run, its success."""
    rows = [[name, s.get("policy") or run["provenance"]["policy"], s.get("chunk_schedule") or name]
            for name, s in schedules.items()]
    runs = _table(["run", "policy", "schedule"], rows, classes="text")
    verdicts = _verdicts(run, schedules)
    if not verdicts:
        name, s = next(iter(schedules.items()), ("-", {"episodes": []}))
        text = (f"{name}: success {_rate(s['episodes'], run['has_success'])} over {len(s['episodes'])} scored"
                " episodes (95 % Wilson interval)." if s["episodes"] else f"{name}: No finished episode.")
        return runs + f'<p class="verdict" id="verdict">{html.escape(text)}</p>'
    parts = [runs]
    for v in verdicts:
        attrs = f'data-a="{html.escape(v["a"])}" data-b="{html.escape(v["b"])}"'
        parts.append(f'<p class="lead">{html.escape(_lead(v, run["has_success"]))}</p>'
                     f'<p class="verdict" {attrs}>{html.escape(v["sentence"])}</p>')
    parts.append('<p class="def">Paired: both runs scored the same (env, episode) grid from equal initial states'
                 " (equal start hashes), so each episode of one is compared with the same episode of the other"
                 " (McNemar's exact test on the episodes where they disagree; Newcombe's interval of the difference)."
                 " Unpaired: the starts are not shown equal, so the rates are compared as independent samples"
                 " (Fisher's exact test). Return and length: mean difference per episode with its 95 % interval."
                 " Model calls: a count, exact. Useful env-steps/s: a timing of one run, noisy.</p>")
    return "".join(parts)


def _counts_html(run: Mapping, schedules: Mapping[str, dict]) -> str:
    """The counts of each run (exact for its seed): success with its interval, episodes and their spread over the
    envs, lengths, returns, model calls, suspended steps; the numbers as the printed table's."""
    rows, attrs = [], []
    per_env = run.get("per_env")
    for name, schedule in schedules.items():
        shown = table_figures(schedule["figures"])
        episodes = schedule["episodes"]
        counts = Counter(e["env_id"] for e in episodes)
        envs_met = sum(c >= per_env for c in counts.values()) if per_env else 0
        met = (f"quota {per_env} met by {envs_met}/{run['num_envs']} envs" if per_env else
               f"{min(counts.values()) if len(counts) == run['num_envs'] else 0}-{max(counts.values(), default=0)}"
               " per env")
        lengths = [e["length"] for e in episodes]
        returns = [e["return"] for e in episodes if "return" in e]
        success = shown.get("success_rate", "n/a") if episodes else "No finished episode"
        rows.append([name, success, _rate(episodes, run["has_success"]),
                     f"{shown.get('episodes_scored', '0')} ({met})",
                     f"{shown.get('mean_episode_length', 'n/a')} ({min(lengths)}-{max(lengths)})" if lengths else "n/a",
                     _mean(returns), shown.get("inference_calls", "-"), shown.get("calls_per_1000_steps", "-"),
                     f"{shown.get('suspended_env_steps', '-')} ({shown.get('suspended_fraction', '-')})"])
        keys = [None, "success_rate" if episodes else None, None, "episodes_scored", "mean_episode_length", None,
                "inference_calls", "calls_per_1000_steps", "suspended_env_steps"]
        attrs.append([f'data-schedule="{html.escape(name)}"' + (f' data-figure="{k}"' if k else "") for k in keys])
    header = ["run", "success rate", "success, 95 % Wilson interval", "episodes scored", "mean length (range)",
              "mean return", "model calls", "calls / 1000 steps", "suspended env-steps (fraction)"]
    defs = {"success rate": DEFINITIONS["success_rate"],
            "Wilson interval": "95 % interval of the success rate over the scored episodes",
            "episodes scored": DEFINITIONS["episodes_scored"], "mean length": DEFINITIONS["mean_episode_length"],
            "mean return": "mean sum of rewards of the scored episodes", "model calls": DEFINITIONS["inference_calls"],
            "suspended env-steps": DEFINITIONS["suspended_env_steps"]}
    return _table(header, rows, attrs) + _definitions(defs)


def _timings_html(run: Mapping, schedules: Mapping[str, dict]) -> str:
    """The timings of each run (one run on one machine: noisy), the emulated latency marked."""
    rows, attrs = [], []
    for name, schedule in schedules.items():
        shown = table_figures(schedule["figures"])
        rows.append([name, f"{shown.get('active_env_steps_per_s', '-')} / {shown.get('overlap_bound', '-')}",
                     *(shown.get(k, "-") for k in ("wall_s", "simulation_s", "inference_s"))])
        attrs.append([f'data-schedule="{html.escape(name)}"' + (f' data-figure="{k}"' if k else "") for k in
                      (None, "active_env_steps_per_s", "wall_s", "simulation_s", "inference_s")])
    table = _table(["run", "useful env-steps/s / overlap bound", "wall_s", "simulation_s", "inference_s"], rows, attrs)
    if run.get("latency"):
        how = "accounted, not slept" if run.get("virtual_latency") else "slept"
        note = (f"The inference latency is emulated ({run['latency']}, {how}): wall_s, inference_s and useful"
                " env-steps/s include it; simulation_s does not.")
    else:
        note = "No latency was emulated: the timings are this machine's."
    defs = {k: DEFINITIONS[k] for k in ("active_env_steps_per_s", "overlap_bound", "wall_s", "simulation_s",
                                        "inference_s")}
    return table + f'<p class="note">{html.escape(note)}</p>' + _definitions(defs)


def _fairness_html(run: Mapping, schedules: Mapping[str, dict]) -> str:
    """The :func:`fairness` counts of each run (one sentence where the three agree), and which envs scored no
    episode (then no quota is met)."""
    rows, notes, agree = [], [], []
    for name, schedule in schedules.items():
        scored = {e["env_id"] for e in schedule["episodes"]}
        missing = run["num_envs"] - len(scored)
        if missing:
            shown = sorted(set(range(min(run["num_envs"], 4096))) - scored)[:20]
            notes.append(f"{name}: {missing} envs ({', '.join(map(str, shown))}{', ...' if missing > 20 else ''})"
                         " scored no episode, so no per-env quota above 0 is met; a longer run (or"
                         " --episodes_per_env) makes one.")
        counted = []
        for counting, episodes in fairness(schedule["episodes"], run["num_envs"], run.get("per_env")).items():
            mean = (f"{sum(e['length'] for e in episodes) / len(episodes):.1f}" if episodes else "n/a")
            counted.append([name, counting, len(episodes), _rate(episodes, run["has_success"]), mean])
        if len({tuple(row[2:]) for row in counted}) == 1:
            agree.append(f"{name} ({counted[0][2]} episodes, success {counted[0][3]}, mean length {counted[0][4]})")
        else:
            rows += counted
    parts = []
    if agree:
        parts.append(f"<p>The three countings (per-env quota, first-N, all scored) count the same episodes for"
                     f" {html.escape('; '.join(agree))}.</p>")
    if rows:
        parts.append(_table(["run", "counting", "episodes", "success, 95 % Wilson interval", "mean length"], rows))
    return "".join(parts) + "".join(f"<p>{html.escape(note)}</p>" for note in notes)


def _all_figures(schedules: Mapping[str, dict]) -> str:
    """Every figure of the printed table, runs as columns (``data-figure`` / ``data-schedule`` cells), each with
    its kind (count or timing) and definition."""
    shown = {name: table_figures(s["figures"]) for name, s in schedules.items()}
    keys = list(dict.fromkeys(k for figures in shown.values() for k in figures))
    rows = [[key, *(shown[name].get(key, "-") for name in schedules), "timing" if key in TIMINGS else "count",
             DEFINITIONS.get(key, "")] for key in keys]
    attrs = [["", *(f'data-figure="{key}" data-schedule="{html.escape(name)}"' for name in schedules), "",
              'style="text-align:left"'] for key in keys]
    return _table(["figure", *schedules, "kind", "definition"], rows, attrs)


def _timeline_html(run: Mapping, schedules: Mapping[str, dict]) -> str:
    timelines = {name: ChunkTimeline.from_record(s["timeline"]) for name, s in schedules.items() if s["timeline"]}
    if not timelines:
        return "<p>No timeline in the log (the run was made without one).</p>"
    buffer = io.BytesIO()
    plot_timelines(timelines, buffer, title=run["header"][:300])
    return (_img(buffer.getvalue(), "chunk timeline")
            + "<p class=\"def\">Each row is one of the first envs, each column an env step: green active, yellow"
              " holding its last action, grey suspended; black dots: a chunk received; red crosses: a reset; blue"
              " ticks above the rows: a model call.</p>")


def _episodes_html(schedules: Mapping[str, dict]) -> str:
    """Every scored episode (up to :data:`MAX_EPISODE_ROWS`), sortable by any column (a click on its header)."""
    rows, attrs, total = [], [], 0
    for name, schedule in schedules.items():
        for e in schedule["episodes"]:
            total += 1
            if len(rows) >= MAX_EPISODE_ROWS:
                continue
            cells = [name, e["env_id"], e["episode"], e.get("start_hash") or "-", "yes" if e["success"] else "no",
                     e["length"], f"{e['return']:.3f}" if "return" in e else "-", e["calls"], e["suspended_steps"]]
            rows.append(cells)
            attrs.append([f'data-v="{html.escape(str(c))}"' for c in cells])
    if not rows:
        return "<p>No finished episode.</p>"
    more = (f"<p>The first {MAX_EPISODE_ROWS} of {total} episodes; the log holds them all.</p>"
            if total > MAX_EPISODE_ROWS else "")
    return (_table(list(EPISODE_COLUMNS), rows, attrs, classes="sortable") + more + _definitions(EPISODE_COLUMNS)
            + "<p class=\"def\">A click on a column's header sorts by it.</p>")


def _frames_html(schedules: Mapping[str, dict]) -> str:
    """The frame strips of each run (camera tasks), captioned with the episode's outcome."""
    parts = []
    for name, schedule in schedules.items():
        for strip in schedule.get("frames") or []:
            caption = (f"{name}: env {strip['env_id']}, episode {strip['episode']},"
                       f" {'success' if strip['success'] else 'failure'}, {strip['length']} steps; {strip['camera']}"
                       f" at steps {', '.join(map(str, strip['steps']))}")
            parts.append(f'<figure><img class="frames" alt="{html.escape(caption)}" src="data:image/png;base64,'
                         f'{html.escape(strip["png"])}"><figcaption>{html.escape(caption)}</figcaption></figure>')
    if not parts:
        return ""
    return "<h2>Episodes seen by the camera</h2>\n" + "\n".join(parts)


def _log_link(log_link: str) -> str:
    """The log as a relative link (``./`` and the name percent-encoded: never a scheme such as ``javascript:``)."""
    href = "./" + urllib.parse.quote(log_link.replace(os.sep, "/"), safe="/")
    return f'<a href="{html.escape(href)}">{html.escape(log_link)}</a>'


def _provenance_html(run: Mapping, log_link: str) -> str:
    p = run["provenance"]
    rows = [["task", p["task"]], ["cfg overrides", " ".join(p["overrides"]) or "none"], ["seed", p.get("seed")],
            ["device", p["device"]], ["policy", p["policy"]], ["commit", p.get("commit") or "not a git checkout"],
            ["command", p["command"]], ["host", p["host"]],
            ["versions", ", ".join(f"{k} {v}" for k, v in p["versions"].items())]]
    link = ("<p>Episode log (this page is rebuilt from it by <code>scripts/report.py</code>): "
            f"{_log_link(log_link)}</p>")
    return f'<div class="provenance">{_table(["", ""], rows)}</div>' + link


def render_report(run: Mapping, schedules: Mapping[str, dict], log_link: str = "episodes.jsonl",
                  hist_bins: int = 20) -> str:
    """The HTML page of a run log read by :func:`~.run_log.read_run_log` (``log_link``: the log, relative to the
    page)."""
    title = html.escape(run["header"])
    date = html.escape(run.get("date") or "not recorded in the log")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{html.escape(_CSP)}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Evaluation: {title}</title>
<style>{_STYLE}</style></head><body>
<h1>Evaluation report</h1>
<p id="header">{title}</p>
<p>Run date: <span id="date">{date}</span>. Episodes scored: {html.escape(run["scoring"])}.</p>
<h2>Verdict</h2>
{_verdict_html(run, schedules)}
<h2>Counts (exact for this seed)</h2>
{_counts_html(run, schedules)}
<h2>Timings (one run on one machine: noisy)</h2>
{_timings_html(run, schedules)}
{_figures_html(run, schedules, hist_bins)}
<h2>Fairness: which episodes are counted</h2>
<p>Counting the first episodes to finish (first-N, as IsaacLab-Arena and GR00T count) over-represents the short ones;
a per-env quota takes the same number from every env. Both are counted here from the same run's episodes.</p>
{_fairness_html(run, schedules)}
<h2>Chunk timeline</h2>
{_timeline_html(run, schedules)}
<h2>Episodes</h2>
{_episodes_html(schedules)}
{_frames_html(schedules)}
<h2>All figures</h2>
{_all_figures(schedules)}
<h2>Provenance</h2>
{_provenance_html(run, log_link)}
<script>{_SORT_SCRIPT}</script>
</body></html>
"""
