"""Where a chunk model comes from: a source cfg per kind of model, each registered under one name, and the opener
each names, which reads its file or reaches its server before any env is built.

A source is added by registration alone: a ``@configclass`` subclass of :class:`ChunkModelCfg` beside the code
that builds its model, decorated with :func:`register_source` and the :class:`ChunkModelOpener` subclass that opens
it (a wire's client cfg is registered by its row in :data:`isaaclab_suspend.serving.wires.WIRES`). The scripts'
``--model NAME`` takes any registered name, with that cfg's fields as ``--model.FIELD`` flags;
:class:`isaaclab_suspend.runs.ChunkModelSource` opens a cfg through its opener. Nothing outside a source's own
package asks which kind a cfg is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from isaaclab.utils import configclass

if TYPE_CHECKING:
    from isaaclab.envs import ManagerBasedRLEnv

    from .model import ChunkModel


@configclass
class ChunkModelCfg:
    """Base of every chunk-model source cfg: the chunk length H it executes.

    H lives here, on the source: a run given another H (a chunking cfg's, a flag's) refuses it in one line.
    """

    chunk_length: int | None = None
    """Actions executed per chunk H (None: the model's own, or :data:`~isaaclab_suspend.names.DEFAULT_CHUNK` for a
    model that has none)."""


class ChunkModelOpener:
    """Opens a :class:`ChunkModelCfg` on a device: its file read or its server reached (:attr:`model`), then, once
    the run's task is known, :meth:`bind` checks what needs the task; :meth:`make` gives the model for an env.

    The defaults suit a source that holds one model for every env (a checkpoint, a server's client).
    """

    needs_env: bool = False
    """Whether :meth:`make` builds the model on its env (an RL actor), so a server opens one to serve it."""

    def __init__(self, cfg: ChunkModelCfg, device: str):
        self.cfg, self.device = cfg, device
        self.model: ChunkModel | None = None
        """The model opened once for every env (None where :meth:`make` builds one per env)."""
        self.task: str | None = None
        """The run's task, set by :meth:`bind`."""

    @property
    def own_task(self) -> str | None:
        """The task the model was made for, if it says (a run without ``task`` runs it)."""
        return getattr(self.model, "task", None) or None

    @property
    def planned_chunk_length(self) -> int | None:
        """H the model plans (None: any, the run's or the default)."""
        return getattr(self.model, "chunk_length", None)

    def bind(self, task: str, chunk_length: int | None) -> None:
        """Check what needs the run's ``task`` and the H asked for (None: the model's), before any env exists.

        Raises:
            ValueError: If the source does not suit ``task``.
        """
        self.task = task

    def make(self, env: ManagerBasedRLEnv | None, chunk_length: int) -> ChunkModel:
        """The model for ``env`` (None: to serve it) executing ``chunk_length`` actions per chunk."""
        return self.model

    def check(self, model: ChunkModel, env: ManagerBasedRLEnv, keys_label: str) -> None:
        """Checks of ``model`` against ``env`` beyond the model's own ``check_env`` (``keys_label``: what a key map's
        errors call it)."""

    def where(self) -> str:
        """The file or address of the source ('' where it has none)."""
        return getattr(self.cfg, "path", None) or ""

    def describe(self) -> str:
        """The source in a few words, for a run's report."""
        return f"chunk policy {self.where()}"

    def served_identity(self, model: ChunkModel, env: ManagerBasedRLEnv | None) -> tuple[str | None, int | None]:
        """The task and action dim a server announces for ``model`` (None: not checked by its clients)."""
        return self.own_task, getattr(self.model, "action_dim", None)


SOURCES: dict[str, type[ChunkModelCfg]] = {}
"""Every registered source cfg, by name (``--model NAME``)."""
OPENERS: dict[type, type[ChunkModelOpener]] = {}
"""The opener of each registered source cfg."""


def register_source(name: str, opener: type[ChunkModelOpener]) -> Callable[[type], type]:
    """A class decorator registering a source cfg under ``name``, opened by ``opener``.

    Raises:
        ValueError: If ``name`` is taken by another cfg.
    """
    def register(cfg_type: type) -> type:
        if SOURCES.get(name, cfg_type) is not cfg_type:
            raise ValueError(f"A chunk-model source '{name}' is registered already ({SOURCES[name].__name__}).")
        SOURCES[name], OPENERS[cfg_type] = cfg_type, opener
        cfg_type.source_name = name
        return cfg_type

    return register


def source_name(cfg: ChunkModelCfg) -> str:
    """The registered name of ``cfg``'s source.

    Raises:
        TypeError: If ``cfg``'s class is not registered.
    """
    if type(cfg) not in OPENERS:
        raise TypeError(f"A chunk model cfg must be a registered source cfg ({', '.join(sorted(SOURCES))});"
                        f" got {type(cfg).__name__}.")
    return type(cfg).source_name
