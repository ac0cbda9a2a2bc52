"""msgpack with numpy arrays, as openpi's ``openpi_client.msgpack_numpy`` puts them on the wire.

An array travels as a map ``{b"__ndarray__": True, b"data": raw bytes, b"dtype": dtype.str, b"shape": [...]}``
and a numpy scalar as ``{b"__npgeneric__": True, b"data": value, b"dtype": dtype.str}``. Object, void and
complex dtypes are refused both ways: a message can only carry numbers, strings and containers, never code.
Decoded arrays are read-only views of the received bytes (no copy).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgpack
import numpy as np

REFUSED_KINDS = ("V", "O", "c")
"""numpy dtype kinds that are never packed nor unpacked: void, object, complex."""


def _check_dtype(dtype: np.dtype) -> np.dtype:
    if dtype.kind in REFUSED_KINDS:
        raise ValueError(f"Arrays of dtype {dtype} cannot travel (object, void and complex dtypes are refused).")
    return dtype


def _encode(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        _check_dtype(obj.dtype)
        return {b"__ndarray__": True, b"data": np.ascontiguousarray(obj).tobytes(), b"dtype": obj.dtype.str,
                b"shape": list(obj.shape)}
    if isinstance(obj, np.generic):
        _check_dtype(obj.dtype)
        return {b"__npgeneric__": True, b"data": obj.item(), b"dtype": obj.dtype.str}
    raise TypeError(f"Cannot pack an object of type {type(obj).__name__}: send numpy arrays (a tensor:"
                    " .cpu().numpy()), numbers and strings.")


def _field(obj: dict, name: str) -> Any:
    """A field of an array map, whether its keys arrived as bytes (openpi) or as strings."""
    return obj[name.encode()] if name.encode() in obj else obj[name]


def _decode(obj: dict) -> Any:
    if b"__ndarray__" in obj or "__ndarray__" in obj:
        dtype = _check_dtype(np.dtype(_field(obj, "dtype")))
        shape = tuple(int(n) for n in _field(obj, "shape"))
        data = _field(obj, "data")
        if len(data) != dtype.itemsize * int(np.prod(shape, dtype=np.int64)):
            raise ValueError(f"An array of shape {shape} and dtype {dtype} arrived with {len(data)} bytes.")
        return np.frombuffer(data, dtype=dtype).reshape(shape)
    if b"__npgeneric__" in obj or "__npgeneric__" in obj:
        return _check_dtype(np.dtype(_field(obj, "dtype"))).type(_field(obj, "data"))
    return obj


def packb(obj: Any) -> bytes:
    """Encode ``obj`` (dicts, lists, numbers, strings, bytes, numpy arrays and scalars).

    Raises:
        ValueError: If an array has an object, void or complex dtype.
        TypeError: If ``obj`` holds anything else (a torch tensor: convert it with ``.cpu().numpy()``).
    """
    return msgpack.packb(obj, default=_encode)


MAX_CONTAINERS = 1024
"""Most maps and lists one message may hold, each of at most as many entries: a few per array in a real
observation, while a forged message of empty maps would otherwise decode one Python object per byte."""


def unpackb(data: bytes, decode: Callable[[dict], Any] = _decode) -> Any:
    """Decode a message of :func:`packb` (or of openpi's ``msgpack_numpy``); arrays come back read-only.

    Args:
        data: The message.
        decode: Turns each decoded map into what it stands for (default: openpi's array maps); another
            transport's codec passes its own and keeps the container caps.

    Raises:
        ValueError: If the message is not msgpack, holds more than :data:`MAX_CONTAINERS` maps and lists (or one
            with more entries), or an array is malformed or of a refused dtype.
    """
    containers = 0

    def count(obj):
        nonlocal containers
        containers += 1
        if containers > MAX_CONTAINERS:
            raise ValueError(f"A message may hold at most {MAX_CONTAINERS} maps and lists (msgpack_arrays.MAX_CONTAINERS).")
        return obj

    try:
        return msgpack.unpackb(data, object_hook=lambda obj: decode(count(obj)), list_hook=count,
                               max_map_len=MAX_CONTAINERS, max_array_len=MAX_CONTAINERS)
    except (msgpack.UnpackException, msgpack.ExtraData, TypeError, KeyError) as err:
        raise ValueError(f"Not a msgpack message of arrays: {type(err).__name__}: {err}") from None
