"""The wire format of the ``tcp`` wire (the project's own), and the limits every peer checks before it allocates anything.

A message, both ways: a 4-byte big-endian header length, a JSON header, then the raw bytes of the arrays the
header lists (name, dtype, shape), nested observation groups named ``group/term``. No pickle: a message can
only carry numbers and a few strings. A peer cannot make the reader allocate more than
:class:`WireLimitsCfg` allows: the header length, the array count, each shape and the total size are checked
first, and a message must arrive whole within a deadline, so a silent or slow peer cannot hold a reader.

:func:`check_array_specs` is the validation alone, for transports that frame messages their own way.
"""

from __future__ import annotations

import json
import math
import socket
import struct
import time
from collections.abc import Callable, Mapping

import numpy as np
import torch

from ...tensor_tree import flatten_names, unflatten_names
from ..base import ALLOWED_DTYPES, WireLimitsCfg

_LENGTH = struct.Struct(">I")

PROTOCOL_VERSION = 1
"""Version of the wire format and of :class:`~.server.TcpPolicyServer`'s requests; client and server must
agree."""

class ProtocolError(ConnectionError):
    """A peer sent something that breaks the wire format or its limits; the connection cannot go on."""


ArraySpec = tuple[str, np.dtype, tuple[int, ...]]
"""One array of a message: name, dtype, shape."""


def check_array_specs(specs: object, limits: WireLimitsCfg, budget: int) -> list[ArraySpec]:
    """Validate the ``arrays`` list of a header: ``[[name, dtype string, shape], ...]``.

    Args:
        specs: The list as decoded from the header (anything: it comes from the peer).
        limits: The limits to check against.
        budget: Bytes the arrays may take together (what is left of the message cap).

    Returns:
        The specs with numpy dtypes and int shapes, in order.

    Raises:
        ProtocolError: If the list is malformed, a dtype is not allowed, names repeat or clash with a group,
            or the count, a shape or the total size exceeds the limits.
    """
    if not isinstance(specs, list):
        raise ProtocolError(f"'arrays' must be a list, got {type(specs).__name__}")
    if len(specs) > limits.max_arrays:
        raise ProtocolError(f"{len(specs)} arrays exceed the limit of {limits.max_arrays}")
    checked, names, total = [], set(), 0
    for spec in specs:
        if not (isinstance(spec, list) and len(spec) == 3 and isinstance(spec[0], str) and isinstance(spec[1], str)
                and isinstance(spec[2], list)):
            raise ProtocolError(f"an array entry must be [name, dtype, shape], got {str(spec)[:80]}")
        name, dtype, shape = spec
        if not 0 < len(name) <= limits.max_name_chars or "" in name.split("/"):
            raise ProtocolError(f"array name {name[:80]!r} is empty, has an empty group or exceeds"
                                f" {limits.max_name_chars} characters")
        if dtype not in ALLOWED_DTYPES:
            raise ProtocolError(f"array '{name}' has dtype {dtype[:16]!r}; allowed: {sorted(ALLOWED_DTYPES)}")
        if len(shape) > limits.max_dims or not all(type(n) is int and n >= 0 for n in shape):
            raise ProtocolError(f"array '{name}' has shape {str(shape)[:80]}: at most {limits.max_dims}"
                                " non-negative integer dims")
        elements = math.prod(shape)
        if elements > limits.max_array_elements:
            raise ProtocolError(f"array '{name}' has {elements} elements, over the limit of"
                                f" {limits.max_array_elements}")
        groups = {"/".join(name.split("/")[:i]) for i in range(1, name.count("/") + 1)}
        if name in names or groups & names or any(n.startswith(f"{name}/") for n in names):
            raise ProtocolError(f"array name '{name}' repeats or clashes with a group")
        names.add(name)
        dtype = np.dtype(dtype)
        total += elements * dtype.itemsize
        if total > budget:
            raise ProtocolError(f"the arrays take over {budget} bytes, the rest of the message limit")
        checked.append((name, dtype, tuple(shape)))
    return checked


def encode_message(header: dict, arrays: Mapping[str, torch.Tensor] | None = None, http_stop: bool = False) -> bytes:
    """``header`` and the (possibly nested) ``arrays`` as the bytes of one message.

    With ``http_stop`` the JSON header ends in CR LF CR LF (JSON white space): an HTTP server that reads the
    message as a request (openpi's websocket server) then answers or closes at once instead of waiting for the
    rest of a request."""
    arrays = {name: value.detach().cpu().contiguous().numpy() for name, value in flatten_names(arrays or {}).items()}
    header = {**header, "arrays": [[name, a.dtype.str, list(a.shape)] for name, a in arrays.items()]}
    encoded = json.dumps(header).encode() + (b"\r\n\r\n" if http_stop else b"")
    return b"".join([_LENGTH.pack(len(encoded)), encoded, *(a.tobytes() for a in arrays.values())])


def send_message(sock: socket.socket, header: dict, arrays: Mapping[str, torch.Tensor] | None = None,
                 http_stop: bool = False) -> None:
    """Send ``header`` and the (possibly nested) ``arrays`` as one message (``http_stop``: see
    :func:`encode_message`)."""
    sock.sendall(encode_message(header, arrays, http_stop))


def receive_exactly(sock: socket.socket, size: int, deadline: float) -> bytearray:
    """Receive ``size`` bytes by ``deadline`` (``time.monotonic()``); allocate ``size`` only after checking it.

    Raises:
        ConnectionError: If the peer closes the connection first.
        TimeoutError: If the deadline passes first.
    """
    buffer = bytearray(size)
    view, received = memoryview(buffer), 0
    while received < size:
        try:
            sock.settimeout(max(deadline - time.monotonic(), 1e-6))
            count = sock.recv_into(view[received:])
        except socket.timeout:
            raise TimeoutError(f"a message stalled: {received} of {size} bytes of a part arrived in time") from None
        if count == 0:
            raise ConnectionError(f"the peer closed the connection after {received} of {size} bytes")
        received += count
    return buffer


def receive_message(
    sock: socket.socket, limits: WireLimitsCfg, wait_s: float | None, read_s: float, device: str | torch.device = "cpu",
    started: Callable[[], None] | None = None,
) -> tuple[dict, dict]:
    """Receive one message: its header and its arrays as tensors on ``device``, nested again by ``/``.

    Args:
        sock: The connection.
        limits: What the message may hold; checked before each allocation.
        wait_s: Longest wait for the first byte [s] (None: no limit).
        read_s: Longest time from the first byte to the last [s].
        device: Device of the returned tensors.
        started: Called when the first byte has arrived (a server marks the connection busy from then on).

    Raises:
        EOFError: If the peer closed the connection before the first byte (a clean close).
        ConnectionError: If the connection breaks mid-message.
        TimeoutError: If no message starts within ``wait_s`` or it is not whole within ``read_s``.
        ProtocolError: If the message breaks the format or the limits.
    """
    sock.settimeout(wait_s)
    try:
        first = sock.recv(1)
    except socket.timeout:
        raise TimeoutError(f"no message within {wait_s:g} s") from None
    if not first:
        raise EOFError("the peer closed the connection")
    if started is not None:
        started()
    deadline = time.monotonic() + read_s
    (length,) = _LENGTH.unpack(first + receive_exactly(sock, _LENGTH.size - 1, deadline))
    if length > limits.max_header_bytes:
        raise ProtocolError(f"a header of {length} bytes exceeds the limit of {limits.max_header_bytes}")
    try:
        header = json.loads(receive_exactly(sock, length, deadline))
    except (ValueError, RecursionError) as err:  # UnicodeDecodeError is a ValueError
        raise ProtocolError(f"the header is not JSON ({type(err).__name__})") from None
    if not isinstance(header, dict):
        raise ProtocolError(f"the header must be a JSON object, got {type(header).__name__}")
    specs = check_array_specs(header.pop("arrays", None), limits, limits.max_message_bytes - _LENGTH.size - length)
    arrays = {}
    for name, dtype, shape in specs:
        data = receive_exactly(sock, dtype.itemsize * math.prod(shape), deadline)
        arrays[name] = torch.from_numpy(np.frombuffer(data, dtype=dtype).reshape(shape)).to(device)
    return header, unflatten_names(arrays)
