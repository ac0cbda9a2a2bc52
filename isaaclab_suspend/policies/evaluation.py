"""Deprecated: :mod:`isaaclab_suspend.runs.report` (the run report), with the figures in
:mod:`isaaclab_suspend.chunking.stats`."""

from ..chunking.stats import ChunkingStats, format_figure, stats_table, table_figures  # noqa: F401
from ..deprecation import warn_moved
from ..runs import EpisodeLedger, EpisodeOutcomes  # noqa: F401
from ..runs.report import *  # noqa: F401,F403
from ..runs.report import run_provenance as provenance  # noqa: F401

warn_moved("isaaclab_suspend.policies.evaluation", "isaaclab_suspend.runs.report")
