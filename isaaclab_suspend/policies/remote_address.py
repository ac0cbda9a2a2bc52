"""One address option for every served policy: ``host:port`` (the project's protocol) or ``openpi://host:port``."""

from __future__ import annotations

import argparse

from .openpi_client import OpenpiChunkModel, OpenpiChunkModelCfg
from .remote import RemoteChunkModel, RemoteChunkModelCfg

OPENPI_SCHEME = "openpi://"
"""Prefix of the address of a server speaking openpi's websocket protocol."""


def add_openpi_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--openpi_keys`` and ``--prompt``, the options of ``--remote openpi://HOST:PORT``, to a script's parser
    (read them with :func:`parse_key_pairs` and pass them to :func:`connect_remote`)."""
    parser.add_argument("--openpi_keys", nargs="+", default=None, metavar="OPENPI_KEY=PATH",
                        help="--remote openpi://: observation paths sent under openpi keys (default: the paths)")
    parser.add_argument("--prompt", default=None, help="--remote openpi://: text sent with every observation")


def parse_key_pairs(items) -> dict[str, str]:
    """``["observation/state=policy", ...]`` as ``{"observation/state": "policy", ...}``.

    Raises:
        ValueError: If an item is not ``OPENPI_KEY=PATH``.
    """
    pairs = {}
    for item in items:
        key, _, path = item.partition("=")
        if not key or not path:
            raise ValueError(f"Observation keys are OPENPI_KEY=PATH pairs (e.g. observation/state=policy), got"
                             f" '{item}'.")
        pairs[key] = path
    return pairs


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
    if address.startswith(OPENPI_SCHEME):
        return OpenpiChunkModel(OpenpiChunkModelCfg.parse(address, chunk_length=chunk_length, keys=keys or None,
                                                          prompt=prompt))
    if keys or prompt is not None:
        raise ValueError(f"Observation keys and a prompt are openpi options: use --remote openpi://{address}.")
    return RemoteChunkModel(RemoteChunkModelCfg.parse(address))
