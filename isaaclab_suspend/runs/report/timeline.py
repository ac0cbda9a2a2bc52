"""Per-step timeline of the first envs of a chunking run (active, holding, suspended, resets, chunks received)."""

from __future__ import annotations

import os
import textwrap

from collections.abc import Mapping
from typing import IO, TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from ...chunking.chunking_policy import StepStatus

ACTIVE, HELD, SUSPENDED = 0, 1, 2
"""Status codes of an env in a step."""
CALL_COLOR = "#1f4e99"
"""The colour of the model-call ticks of a timeline plot."""


class ChunkTimeline:
    """Records, for the first envs, what each did at every step; kept on the device until :meth:`as_tensors`.

    Args:
        num_envs: Number of envs to record (the first ones).
    """

    def __init__(self, num_envs: int):
        self.num_envs = num_envs
        """Number of envs recorded."""
        self._status: list[torch.Tensor] = []
        self._served: list[torch.Tensor] = []
        self._reset: list[torch.Tensor] = []
        self.inference_steps: list[int] = []
        """Steps in which the model ran (host side)."""

    def record(self, status: StepStatus, dones: torch.Tensor) -> None:
        """Add one step: ``status`` from :attr:`~isaaclab_suspend.chunking.ActionChunkingPolicy.last_step`, ``dones`` of shape (N,)."""
        k = self.num_envs
        code = torch.where(status.executing[:k], ACTIVE, torch.where(status.suspended[:k], SUSPENDED, HELD))
        self._status.append(code)
        served = status.served
        if served is not None:
            self.inference_steps.append(len(self._status) - 1)
        self._served.append(served[:k] if served is not None else torch.zeros_like(dones[:k]))
        self._reset.append(dones[:k].clone())

    def as_record(self) -> dict:
        """The timeline as JSON-able lists (a run log's line, :meth:`from_record` reads it back): ``status`` one
        string of status digits per env, ``served`` and ``reset`` the steps of each env's events,
        ``inference_steps``."""
        status, served, reset = self.as_tensors()
        return {"envs": self.num_envs, "status": ["".join(map(str, row)) for row in status.tolist()],
                "served": [row.nonzero().flatten().tolist() for row in served],
                "reset": [row.nonzero().flatten().tolist() for row in reset],
                "inference_steps": list(self.inference_steps)}

    @classmethod
    def from_record(cls, record: dict) -> ChunkTimeline:
        """The timeline of :meth:`as_record`'s ``record``."""
        timeline = cls(record["envs"])
        status = torch.tensor([[int(c) for c in row] for row in record["status"]], dtype=torch.long)
        steps = status.shape[1] if status.ndim == 2 else 0
        masks = []
        for key in ("served", "reset"):
            mask = torch.zeros(timeline.num_envs, steps, dtype=torch.bool)
            for env, env_steps in enumerate(record[key]):
                mask[env, env_steps] = True
            masks.append(mask)
        timeline._status, timeline._served, timeline._reset = (list(t.unbind(1)) for t in (status, *masks))
        timeline.inference_steps = list(record["inference_steps"])
        return timeline

    def as_tensors(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Status codes, served masks and reset masks on the CPU. Shapes: (num_envs, steps) each."""
        return tuple(torch.stack(rows, dim=1).cpu() for rows in (self._status, self._served, self._reset))


def plot_timelines(timelines: Mapping[str, ChunkTimeline], path: str | IO[bytes], title: str = "") -> None:
    """Save a PNG (to a path or a binary file) with one panel per run: envs (rows) by step (columns), coloured by
    status, with a dot where an env received a chunk, a cross where it was reset, and a tick in a band above the rows
    for every model call (the legend names each mark)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch
    from matplotlib.ticker import MaxNLocator

    colors = ["#4c9f50", "#f2b134", "#b8b8b8"]  # active, held, suspended
    rows = max(t.num_envs for t in timelines.values())
    fig, axes = plt.subplots(len(timelines), 1, figsize=(12, 1.0 + (0.6 + 0.16 * rows) * len(timelines)), squeeze=False,
                             sharex=True)
    for ax, (name, timeline) in zip(axes[:, 0], timelines.items()):
        status, served, reset = timeline.as_tensors()
        ax.imshow(status.numpy(), aspect="auto", interpolation="nearest", cmap=ListedColormap(colors), vmin=0, vmax=2)
        env, step = served.nonzero(as_tuple=True)
        ax.scatter(step.numpy(), env.numpy(), s=6, c="black", marker="o", label="chunk received")
        env, step = reset.nonzero(as_tuple=True)
        ax.scatter(step.numpy(), env.numpy(), s=14, c="#c0392b", marker="x", label="reset")
        calls = timeline.inference_steps  # a band of solid ticks above the rows: visible over any status colour
        ax.scatter(calls, [-1.3] * len(calls), s=40, c=CALL_COLOR, marker="|", linewidths=1.2, label="model call")
        ax.set_ylim(timeline.num_envs - 0.5, -2.0)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel("env")
        ax.set_title(f"{name[:80]}: {len(calls)} model calls (blue ticks above the rows)", fontsize=9, loc="left")
    axes[-1, 0].set_xlabel("env step")
    handles = [Patch(color=c, label=label) for c, label in zip(colors, ("active", "holding", "suspended"))]
    handles += axes[0, 0].get_legend_handles_labels()[0]
    fig.legend(handles=handles, loc="lower center", ncol=6, fontsize=8)
    lines = textwrap.wrap(title[:600], 150)  # a long header (a checkpoint's path) wraps instead of running off the page
    if lines:
        fig.suptitle("\n".join(lines), x=0.01, ha="left", fontsize=10)
    fig.tight_layout(rect=(0, 0.04, 1, 1 - 0.2 * max(len(lines), 1) / fig.get_figheight()))
    if isinstance(path, str):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=120, format="png")
    plt.close(fig)
