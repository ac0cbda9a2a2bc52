"""Deprecated: :mod:`isaaclab_suspend.chunking` (the chunking core), with the episode accounting in
:mod:`isaaclab_suspend.runs` and the timeline in :mod:`isaaclab_suspend.runs.report`."""

from ..chunking import *  # noqa: F401,F403
from ..deprecation import warn_moved
from ..runs import EpisodeLedger, EpisodeOutcomes  # noqa: F401
from ..runs.report import ChunkTimeline, plot_timelines  # noqa: F401

warn_moved("isaaclab_suspend.policies", "isaaclab_suspend.chunking")
