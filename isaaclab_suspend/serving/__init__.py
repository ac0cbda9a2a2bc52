"""Transports: chunk models served to and called from other processes.

* the project's TCP protocol (``wire``): :class:`PolicyServer` (``policy_server``) and :class:`RemoteChunkModel`
  (``remote_client``);
* openpi's websocket protocol both ways (``openpi_server``, ``openpi_client``) and its msgpack array codec
  (``msgpack_arrays``);
* GR00T's ZeroMQ protocol both ways (``gr00t_server``, ``gr00t_client``), its array codec (``gr00t_codec``) and
  its real-time chunking options (``gr00t_rtc``);
* request batching across clients into one model call (``batching``);
* ``HOST:PORT`` / ``openpi://HOST:PORT`` / ``gr00t://HOST:PORT`` addresses to a connected chunk model (``remote_address``).

Nothing in :mod:`isaaclab_suspend.chunking` imports from here: a transport is just another chunk model.
"""

from .batching import BatchingCfg, BatchingChunkModel
from .gr00t_client import GR00T_SCHEME, Gr00tChunkModel, Gr00tChunkModelCfg, Gr00tServerError
from .gr00t_server import Gr00tPolicyServer, Gr00tPolicyServerCfg
from .openpi_client import OPENPI_SCHEME, OpenpiChunkModel, OpenpiChunkModelCfg, OpenpiServerError
from .openpi_server import OpenpiPolicyServer, OpenpiPolicyServerCfg
from .policy_server import PolicyServer, PolicyServerCfg
from .remote_address import parse_address, remote_model_cfg
from .remote_client import PolicyServerError, RemoteChunkModel, RemoteChunkModelCfg
from .wire import ProtocolError, WireLimitsCfg

__all__ = [
    "GR00T_SCHEME",
    "OPENPI_SCHEME",
    "BatchingCfg",
    "BatchingChunkModel",
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
    "PolicyServer",
    "PolicyServerCfg",
    "PolicyServerError",
    "ProtocolError",
    "RemoteChunkModel",
    "RemoteChunkModelCfg",
    "WireLimitsCfg",
    "parse_address",
    "remote_model_cfg",
]
