"""One address for every served policy: ``host:port`` (the project's protocol) or ``openpi://host:port``."""

from __future__ import annotations

from .openpi_client import OpenpiChunkModel, OpenpiChunkModelCfg
from .remote import RemoteChunkModel, RemoteChunkModelCfg

OPENPI_SCHEME = "openpi://"
"""Prefix of the address of a server speaking openpi's websocket protocol."""


def parse_address(address: str) -> RemoteChunkModelCfg | OpenpiChunkModelCfg:
    """The client cfg of the server at ``address`` (nothing is connected).

    Raises:
        ValueError: If ``address`` is neither ``host:port`` nor ``openpi://host:port``.
    """
    if address.startswith(OPENPI_SCHEME):
        return OpenpiChunkModelCfg.parse(address)
    return RemoteChunkModelCfg.parse(address)


def connect_remote(address: str, chunk_length: int | None = None, keys: dict[str, str] | None = None,
                   prompt: str | None = None) -> RemoteChunkModel | OpenpiChunkModel:
    """The chunk model of the policy served at ``address``.

    Args:
        address: ``host:port`` of a :class:`PolicyServer`, or ``openpi://host:port`` of an openpi server.
        chunk_length: openpi: actions H to take from each reply (None: the server's metadata must say).
        keys: openpi: request key -> observation path of the env (None: the paths themselves).
        prompt: openpi: text sent with every observation.

    Raises:
        ValueError: If the address is malformed, or openpi options are given for the project's protocol.
        ConnectionError, TimeoutError, RuntimeError: If no compatible server answers (see each model).
    """
    cfg = parse_address(address)
    if isinstance(cfg, OpenpiChunkModelCfg):
        cfg.chunk_length, cfg.keys, cfg.prompt = chunk_length, keys or None, prompt
        return OpenpiChunkModel(cfg)
    if keys or prompt is not None:
        raise ValueError(f"Observation keys and a prompt are openpi options: use --remote {OPENPI_SCHEME}{address}.")
    return RemoteChunkModel(cfg)
