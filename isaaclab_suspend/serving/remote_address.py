"""One address for every served policy: ``host:port`` (the project's protocol), ``openpi://host:port`` or
``gr00t://host:port``."""

from __future__ import annotations

from .gr00t_client import GR00T_SCHEME, Gr00tChunkModelCfg
from .openpi_client import OPENPI_SCHEME, OpenpiChunkModelCfg
from .remote_client import RemoteChunkModelCfg


def parse_address(address: str) -> RemoteChunkModelCfg | OpenpiChunkModelCfg | Gr00tChunkModelCfg:
    """The client cfg of the server at ``address`` (nothing is connected).

    Raises:
        ValueError: If ``address`` is none of ``host:port``, ``openpi://host:port`` and ``gr00t://host:port``.
    """
    if address.startswith(GR00T_SCHEME):
        return Gr00tChunkModelCfg.parse(address)
    if address.startswith(OPENPI_SCHEME):
        return OpenpiChunkModelCfg.parse(address)
    return RemoteChunkModelCfg.parse(address)


def remote_model_cfg(address: str, chunk_length: int | None = None, keys: dict[str, str] | None = None,
                     prompt: str | None = None, form: str = "flat", rtc_options: bool = False
                     ) -> RemoteChunkModelCfg | OpenpiChunkModelCfg | Gr00tChunkModelCfg:
    """The client cfg of the policy served at ``address`` with the options that apply to its protocol (nothing is
    connected: ``cfg.class_type(cfg)`` connects).

    Args:
        address: ``host:port`` of a :class:`PolicyServer`, ``openpi://host:port`` or ``gr00t://host:port``.
        chunk_length: openpi / GR00T: actions H to take from each reply (None: the server's must say).
        keys: openpi / GR00T: request key -> observation path of the env (None: the paths themselves).
        prompt: openpi / GR00T: text sent with every observation.
        form: GR00T: ``flat`` or ``nested`` observations.
        rtc_options: GR00T: send the ``rtc`` schedule's prefix as real-time chunking options.

    Raises:
        ValueError: If the address is malformed, or openpi / GR00T options are given for the project's protocol.
    """
    cfg = parse_address(address)
    if isinstance(cfg, Gr00tChunkModelCfg):
        cfg.chunk_length, cfg.keys, cfg.prompt, cfg.form = chunk_length, keys or None, prompt, form
        cfg.rtc_options = rtc_options
    elif isinstance(cfg, OpenpiChunkModelCfg):
        cfg.chunk_length, cfg.keys, cfg.prompt = chunk_length, keys or None, prompt
    elif keys or prompt is not None:
        raise ValueError(f"Observation keys and a prompt are openpi and GR00T options: use --remote"
                         f" {OPENPI_SCHEME}{address} or {GR00T_SCHEME}{address}.")
    return cfg
