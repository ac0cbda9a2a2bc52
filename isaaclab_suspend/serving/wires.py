"""The one table of wires: each wire's name, address scheme, client cfg and server cfg.

A wire is added by one row (:func:`register_wire`): its client cfg becomes the chunk-model source of its name
(``--model NAME``, ``--remote SCHEME://HOST:PORT``) and its server cfg a choice of ``serve_policy.py --wire``.
An address without a scheme is the ``tcp`` wire's (the project's own).
"""

from __future__ import annotations

import dataclasses

from ..chunking.sources import register_source
from ..deprecation import warn_moved
from .base import ChunkModelClientCfg, ClientOpener, ServerCfg, split_address
from .gr00t.client import GR00T_SCHEME, Gr00tChunkModelCfg
from .gr00t.server import Gr00tPolicyServerCfg
from .openpi.client import OPENPI_SCHEME, OpenpiChunkModelCfg
from .openpi.server import OpenpiPolicyServerCfg
from .tcp.client import TCP_SCHEME, TcpChunkModelCfg
from .tcp.server import TcpPolicyServerCfg


@dataclasses.dataclass(frozen=True)
class Wire:
    """One row of :data:`WIRES`."""

    name: str
    """The wire's one name (``--model NAME``, ``serve_policy.py --wire NAME``)."""
    scheme: str
    """The prefix of its addresses (``openpi://``)."""
    client_cfg: type[ChunkModelClientCfg]
    """The cfg of its client (a chunk-model source)."""
    server_cfg: type[ServerCfg] | None
    """The cfg of its server (None: this package serves no such wire)."""


WIRES: dict[str, Wire] = {}
"""Every wire, by name."""
OLD_NAMES = {"project": "tcp", "remote": "tcp"}
"""Names the ``tcp`` wire had before 0.4.0, accepted with a deprecation warning until 0.5.0."""


def register_wire(wire: Wire) -> Wire:
    """Add ``wire`` to :data:`WIRES` and register its client cfg as the chunk-model source ``wire.name``.

    Raises:
        ValueError: If the name or the scheme is taken by another wire.
    """
    for other in WIRES.values():
        if other.name != wire.name and wire.scheme == other.scheme:
            raise ValueError(f"Wire '{wire.name}': the scheme '{wire.scheme}' is the '{other.name}' wire's.")
    if WIRES.get(wire.name, wire) != wire:
        raise ValueError(f"A wire '{wire.name}' is registered already.")
    wire.client_cfg.scheme = wire.scheme  # a class attribute, not a field: the cfg's fields are its flags
    register_source(wire.name, ClientOpener)(wire.client_cfg)
    WIRES[wire.name] = wire
    return wire


for _row in (Wire("tcp", TCP_SCHEME, TcpChunkModelCfg, TcpPolicyServerCfg),
             Wire("openpi", OPENPI_SCHEME, OpenpiChunkModelCfg, OpenpiPolicyServerCfg),
             Wire("gr00t", GR00T_SCHEME, Gr00tChunkModelCfg, Gr00tPolicyServerCfg)):
    register_wire(_row)


def wire(name: str) -> Wire:
    """The wire called ``name`` (an old name of ``tcp`` warns).

    Raises:
        ValueError: If no wire has that name.
    """
    if name in OLD_NAMES:
        warn_moved(f"the wire name '{name}'", f"'{OLD_NAMES[name]}'")
        name = OLD_NAMES[name]
    if name not in WIRES:
        raise ValueError(f"No wire '{name}': the wires are {', '.join(WIRES)}.")
    return WIRES[name]


def parse_address(address: str) -> ChunkModelClientCfg:
    """The client cfg of the server at ``address``: ``SCHEME://HOST:PORT`` of a wire, or ``HOST:PORT`` (``tcp``);
    nothing is connected (``cfg.class_type(cfg)`` connects).

    Raises:
        ValueError: If the address has a scheme no wire has, or no ``host:port`` with a port in 1-65535.
    """
    scheme, sep, _ = address.partition("://")
    if not sep:
        row = WIRES["tcp"]
    else:
        row = next((w for w in WIRES.values() if w.scheme == f"{scheme}://"), None)
        if row is None:
            raise ValueError(f"'{address}': no wire has the scheme '{scheme}://'; the wires' schemes are"
                             f" {', '.join(w.scheme for w in WIRES.values())} (none: tcp).")
    host, port = split_address(address, row.scheme if sep else "", f"A {row.name} server's")
    return row.client_cfg(host=host, port=port)


def remote_model_cfg(address: str, **options) -> ChunkModelClientCfg:
    """The client cfg of the policy served at ``address`` (:func:`parse_address`) with ``options``: fields of that
    wire's client cfg (``chunk_length``, openpi's ``keys`` and ``prompt``, GR00T's ``form`` ...); an option left
    None is the cfg's default.

    Raises:
        ValueError: If the address is malformed, or an option is not a field of the wire's client cfg.
    """
    cfg = parse_address(address)
    for name, value in options.items():
        if value is None:
            continue
        if not hasattr(cfg, name) or name in ("class_type", "host", "port"):
            others = [w.name for w in WIRES.values() if hasattr(w.client_cfg(), name)]
            raise ValueError(f"'{name}' is not an option of the {type(cfg).source_name} wire"
                             + (f"; it is one of {', '.join(others)}" if others else "") + ".")
        setattr(cfg, name, value)
    return cfg
