"""Transports: chunk models served to and called from other processes.

* the project's TCP protocol (``wire``): :class:`PolicyServer` and :class:`RemoteChunkModel` (``remote``);
* openpi's websocket protocol both ways (``openpi_server``, ``openpi_client``) and its msgpack array codec
  (``msgpack_arrays``);
* request batching across clients into one model call (``batching``);
* ``HOST:PORT`` / ``openpi://HOST:PORT`` addresses to a connected chunk model (``remote_address``).

Nothing in :mod:`isaaclab_suspend.policies` imports from here: a transport is just another chunk model.
"""

from .batching import BatchingCfg, BatchingChunkModel
from .openpi_client import OpenpiChunkModel, OpenpiChunkModelCfg, OpenpiServerError
from .openpi_server import OpenpiPolicyServer, OpenpiPolicyServerCfg
from .remote import PolicyServer, PolicyServerCfg, PolicyServerError, RemoteChunkModel, RemoteChunkModelCfg
from .remote_address import OPENPI_SCHEME, connect_remote, parse_address
from .wire import ProtocolError, WireLimitsCfg

__all__ = [
    "OPENPI_SCHEME",
    "BatchingCfg",
    "BatchingChunkModel",
    "OpenpiChunkModel",
    "OpenpiChunkModelCfg",
    "OpenpiPolicyServer",
    "OpenpiPolicyServerCfg",
    "OpenpiServerError",
    "PolicyServer",
    "PolicyServerCfg",
    "PolicyServerError",
    "ProtocolError",
    "RemoteChunkModel",
    "RemoteChunkModelCfg",
    "WireLimitsCfg",
    "connect_remote",
    "parse_address",
]
