"""A chunk model from any source (:data:`~.chunk_models.CHUNK_MODELS`) served to other processes over one of the
wires (:data:`~isaaclab_suspend.serving.wires.WIRES`): what ``scripts/serve_policy.py`` runs.

Example::

    from isaaclab_suspend.runs import ChunkModelSource, EmbeddedModelCfg, make_policy_server
    from isaaclab_suspend.serving import TcpPolicyServerCfg

    source = ChunkModelSource(EmbeddedModelCfg(chunk_length=16), "Isaac-Cartpole-Suspendable")
    with make_policy_server(source, TcpPolicyServerCfg(port=5555)) as server:
        server.serve_forever()
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..tasks.env_factory import open_env
from .chunk_models import ChunkModelSource

if TYPE_CHECKING:
    from ..serving import ServerCfg


def make_policy_server(source: ChunkModelSource, cfg: ServerCfg, verbose: bool = False):
    """The server of ``cfg``'s wire (``cfg.class_type``) serving ``source``'s model, with the emulated latency of
    the source if any, under a copy of ``cfg`` whose task, H, action dim and device are the source's (what the
    server's metadata tells its clients); ``cfg`` itself is left as it was. A model built on its env (an RL actor)
    is built on a one-env instance of its task, on the source's device (quietly unless ``verbose``).

    Raises:
        ValueError, OSError: If the model cannot be built, the cfg is invalid or the address cannot be bound.
    """
    if source.opener.needs_env:
        with open_env(source.task, 1, source.device, verbose=verbose) as env:
            model = source.make(env)
            task, action_dim = source.opener.served_identity(model, env)
    else:
        model = source.make()
        task, action_dim = source.opener.served_identity(model, None)
    served = cfg.replace(chunk_length=source.chunk_length, device=source.device, task=task,
                         action_dim=action_dim if action_dim is not None else cfg.action_dim)
    return served.class_type(model, served)
