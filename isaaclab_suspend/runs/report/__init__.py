"""A run's report: the run log (JSON lines, read as untrusted data), its self-contained HTML page, the chunk
timeline of what each env did, frame strips of a camera task's episodes, the success-rate plot across runs and the
run's provenance."""

from .frames import EpisodeFrames
from .report import EvalReportCfg, render_report, wilson_interval, write_report
from .run_log import read_run_log, reencoded_png, write_run_log
from .run_provenance import run_provenance
from .timeline import ChunkTimeline, plot_timelines

__all__ = ["ChunkTimeline", "EpisodeFrames", "EvalReportCfg", "plot_timelines", "read_run_log", "reencoded_png",
           "render_report", "run_provenance", "wilson_interval", "write_report", "write_run_log"]
