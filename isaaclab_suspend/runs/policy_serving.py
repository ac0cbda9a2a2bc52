"""A chunk model from any source (:data:`~.chunk_models.CHUNK_MODELS`) served to other processes over one of the
wires (the project's TCP wire, openpi's, GR00T's): what ``scripts/serve_policy.py`` runs.

Example::

    from isaaclab_suspend.runs import ChunkModelSource, EmbeddedModelCfg, make_policy_server
    from isaaclab_suspend.serving import PolicyServerCfg

    source = ChunkModelSource(EmbeddedModelCfg(chunk_length=16), "Isaac-Cartpole-Suspendable")
    with make_policy_server(source, PolicyServerCfg(port=5555)) as server:
        server.serve_forever()
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..tasks.env_factory import open_env
from .chunk_models import ChunkModelSource, EmbeddedModelCfg, RlActorModelCfg

if TYPE_CHECKING:
    from ..serving import (Gr00tPolicyServer, Gr00tPolicyServerCfg, OpenpiPolicyServer, OpenpiPolicyServerCfg,
                           PolicyServer, PolicyServerCfg)


def make_policy_server(source: ChunkModelSource, cfg: PolicyServerCfg | OpenpiPolicyServerCfg | Gr00tPolicyServerCfg
                       ) -> PolicyServer | OpenpiPolicyServer | Gr00tPolicyServer:
    """The server of ``cfg``'s protocol (``cfg.class_type``) serving ``source``'s model, with the emulated latency
    of the source if any; ``cfg``'s task, H and action dim are set from the source (what the server's metadata
    tells its clients). An RL actor is built on a one-env instance of its task, on the source's device.

    Raises:
        ValueError, OSError: If the model cannot be built, the cfg is invalid or the address cannot be bound.
    """
    cfg.chunk_length, cfg.device = source.chunk_length, source.device
    if isinstance(source.cfg, RlActorModelCfg):
        with open_env(source.task, 1, source.device) as env:
            model = source.make(env)
            cfg.action_dim, cfg.task = env.action_manager.total_action_dim, source.task
    elif isinstance(source.cfg, EmbeddedModelCfg):
        model = source.make()
        cfg.task = source.task
    else:  # a checkpoint (its task, if it names one, and dims) or another server's client
        model = source.make()
        cfg.task = getattr(source.model, "task", None) or None
        cfg.action_dim = getattr(source.model, "action_dim", cfg.action_dim)
    return cfg.class_type(model, cfg)
