"""Evaluation reporting: the chunking policy's figures, episode outcomes and a timeline of what each env did."""

from .outcomes import EpisodeOutcomes
from .stats import ChunkingStats, format_figure, stats_table
from .timeline import ChunkTimeline, plot_timelines

__all__ = ["ChunkTimeline", "ChunkingStats", "EpisodeOutcomes", "format_figure", "plot_timelines", "stats_table"]
