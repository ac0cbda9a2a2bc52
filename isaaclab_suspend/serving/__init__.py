"""Wires: chunk models served to and called from other processes, one subpackage per wire.

* ``tcp`` (:mod:`.tcp`): the project's own wire, :class:`TcpPolicyServer` and its client :class:`TcpChunkModel`;
* ``openpi`` (:mod:`.openpi`): openpi's websocket wire both ways, with the msgpack array codec
  (:mod:`.msgpack_arrays`, shared with GR00T's);
* ``gr00t`` (:mod:`.gr00t`): GR00T's ZeroMQ wire both ways, its array codec and real-time chunking options;
* what every wire shares (:mod:`.base`): the client and server cfg bases, wire limits, address parsing;
* the table of wires (:mod:`.wires`): name, scheme, client cfg, server cfg; a row adds a wire;
* request batching across clients into one model call (:mod:`.batching`).

Nothing in :mod:`isaaclab_suspend.chunking` imports from here: a wire's client is just another chunk model.
The names of 0.3 (``PolicyServer``, ``PolicyServerCfg``, ``RemoteChunkModel``, ``RemoteChunkModelCfg``,
``PolicyServerError``) are the ``tcp`` wire's classes, with a deprecation warning, until 0.5.0.
"""

from .base import ChunkModelClientCfg, ServerCfg, WireLimitsCfg
from .batching import BatchingCfg, BatchingChunkModel
from .gr00t.client import GR00T_SCHEME, Gr00tChunkModel, Gr00tChunkModelCfg, Gr00tServerError
from .gr00t.server import Gr00tPolicyServer, Gr00tPolicyServerCfg
from .openpi.client import OPENPI_SCHEME, OpenpiChunkModel, OpenpiChunkModelCfg, OpenpiServerError
from .openpi.server import OpenpiPolicyServer, OpenpiPolicyServerCfg
from .tcp.client import TcpChunkModel, TcpChunkModelCfg, TcpServerError
from .tcp.protocol import ProtocolError
from .tcp.server import TcpPolicyServer, TcpPolicyServerCfg
from .wires import WIRES, Wire, parse_address, register_wire, remote_model_cfg, wire

_OLD_NAMES = {"PolicyServer": "TcpPolicyServer", "PolicyServerCfg": "TcpPolicyServerCfg",
              "RemoteChunkModel": "TcpChunkModel", "RemoteChunkModelCfg": "TcpChunkModelCfg",
              "PolicyServerError": "TcpServerError"}


def __getattr__(name: str) -> object:
    """The 0.3 names of the ``tcp`` wire's classes, with a deprecation warning."""
    if name in _OLD_NAMES:
        from ..deprecation import warn_moved

        warn_moved(f"isaaclab_suspend.serving.{name}", f"isaaclab_suspend.serving.{_OLD_NAMES[name]}")
        return globals()[_OLD_NAMES[name]]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "GR00T_SCHEME",
    "OPENPI_SCHEME",
    "WIRES",
    "BatchingCfg",
    "BatchingChunkModel",
    "ChunkModelClientCfg",
    "Gr00tChunkModel",
    "Gr00tChunkModelCfg",
    "Gr00tPolicyServer",
    "Gr00tPolicyServerCfg",
    "Gr00tServerError",
    "OpenpiChunkModel",
    "OpenpiChunkModelCfg",
    "OpenpiPolicyServer",
    "OpenpiPolicyServerCfg",
    "OpenpiServerError",
    "ProtocolError",
    "ServerCfg",
    "TcpChunkModel",
    "TcpChunkModelCfg",
    "TcpPolicyServer",
    "TcpPolicyServerCfg",
    "TcpServerError",
    "Wire",
    "WireLimitsCfg",
    "parse_address",
    "register_wire",
    "remote_model_cfg",
    "wire",
]
