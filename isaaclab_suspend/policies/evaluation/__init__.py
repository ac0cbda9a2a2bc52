"""Evaluation reporting: the chunking policy's figures, episode outcomes, fair episode accounting (quotas and a
record per episode), a timeline of what each env did and the HTML report of a run."""

from .episode_ledger import EpisodeLedger
from .frames import EpisodeFrames
from .outcomes import EpisodeOutcomes
from .report import EvalReportCfg, provenance, read_run_log, wilson_interval, write_report, write_run_log
from .stats import ChunkingStats, format_figure, stats_table, table_figures
from .timeline import ChunkTimeline, plot_timelines

__all__ = ["ChunkTimeline", "ChunkingStats", "EpisodeFrames", "EpisodeLedger", "EpisodeOutcomes", "EvalReportCfg",
           "format_figure", "plot_timelines", "provenance", "read_run_log", "stats_table", "table_figures",
           "wilson_interval", "write_report", "write_run_log"]
