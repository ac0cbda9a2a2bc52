"""A figure comparing groups of evaluation runs (e.g. policies trained on two datasets, several seeds each)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence


def plot_runs(rows: Sequence[Mapping], group_key: str, groups: Sequence[str], metrics: Sequence[tuple[str, str]],
              path: str, title: str, reference: Mapping | None = None, colors: Sequence[str] | None = None) -> None:
    """One panel per metric: the mean of each group as a bar, each run as a dot, ``reference`` as a dashed line.

    Args:
        rows: One dict per run, with ``group_key`` and every metric key.
        group_key: The key naming a run's group; ``groups`` are its values, in panel order.
        metrics: ``(key, axis label)`` per panel.
        path: PNG file (its folder is created).
        title: Figure title.
        reference: A run to draw as a line in the panels of its keys (e.g. the expert).
        colors: One matplotlib colour per group.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = colors or [f"C{i}" for i in range(len(groups))]
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.2 * len(metrics), 3.6), squeeze=False)
    for ax, (key, label) in zip(axes[0], metrics):
        for i, group in enumerate(groups):
            values = [r[key] for r in rows if r[group_key] == group]
            ax.bar(i, sum(values) / len(values), color=colors[i], alpha=0.35, width=0.6)
            ax.scatter([i] * len(values), values, color=colors[i], zorder=3)
        if reference is not None and key in reference:
            ax.axhline(reference[key], color="black", linestyle="--", linewidth=1, label="expert")
            ax.legend(loc="lower right", fontsize=8)
        ax.set_xticks(range(len(groups)), [f"{g}\ndata" for g in groups])
        ax.set_ylabel(label)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=120)
