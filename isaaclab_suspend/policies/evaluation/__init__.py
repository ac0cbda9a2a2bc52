"""Evaluation reporting: the chunking policy's figures, episode outcomes, fair episode accounting (quotas and a
record per episode) and a timeline of what each env did."""

from .episode_ledger import EpisodeLedger
from .outcomes import EpisodeOutcomes
from .stats import ChunkingStats, format_figure, stats_table
from .timeline import ChunkTimeline, plot_timelines

__all__ = ["ChunkTimeline", "ChunkingStats", "EpisodeLedger", "EpisodeOutcomes", "format_figure", "plot_timelines",
           "stats_table"]
