"""msgpack with numpy arrays, as openpi's ``openpi_client.msgpack_numpy`` puts them on the wire.

An array travels as a map ``{b"__ndarray__": True, b"data": raw bytes, b"dtype": dtype.str, b"shape": [...]}``
and a numpy scalar as ``{b"__npgeneric__": True, b"data": value, b"dtype": dtype.str}``. Object, void and
complex dtypes are refused both ways: a message can only carry numbers, strings and containers, never code.
Decoded arrays are read-only views of the received bytes (no copy).
"""

from __future__ import annotations

import math
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
        shape, data = _field(obj, "shape"), _field(obj, "data")
        if not (isinstance(shape, (list, tuple)) and len(shape) <= MAX_DIMS
                and all(type(n) is int and n >= 0 for n in shape)):
            raise ValueError(f"An array's shape must be at most {MAX_DIMS} non-negative integers, got {str(shape)[:80]}.")
        if not isinstance(data, bytes) or len(data) != dtype.itemsize * math.prod(shape):
            raise ValueError(f"An array of shape {tuple(shape)} and dtype {dtype} arrived with"
                             f" {len(data) if isinstance(data, bytes) else type(data).__name__} bytes.")
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


MAX_OBJECTS = 4096
"""Most msgpack objects one message may hold, counting every map, list, key, number, string and bytes: a real
observation or reply holds a few dozen (about ten per array), while a forged message of 1-byte scalars would
otherwise decode one Python object of about 30-100 bytes per byte sent."""

MAX_DIMS = 32
"""Most dimensions of one array (numpy's own limit is 64)."""

_FIXED_SIZES = {0xC0: 0, 0xC2: 0, 0xC3: 0, 0xCA: 4, 0xCB: 8, 0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8, 0xD0: 1, 0xD1: 2,
                0xD2: 4, 0xD3: 8, 0xD4: 2, 0xD5: 3, 0xD6: 5, 0xD7: 9, 0xD8: 17}
"""Payload bytes after the type byte of the fixed-size msgpack types (nil, bools, numbers, fixext with its type)."""
_SIZED = {0xC4: (1, 0), 0xC5: (2, 0), 0xC6: (4, 0), 0xC7: (1, 1), 0xC8: (2, 1), 0xC9: (4, 1), 0xD9: (1, 0),
          0xDA: (2, 0), 0xDB: (4, 0)}
"""bin, ext and str types: bytes of their length field, and extra bytes (the ext type) before the payload."""
_CONTAINERS = {0xDC: (2, 1), 0xDD: (4, 1), 0xDE: (2, 2), 0xDF: (4, 2)}
"""array and map types: bytes of their count field, and objects per counted entry."""


def count_objects(data: bytes, limit: int = MAX_OBJECTS) -> int:
    """The number of msgpack objects in ``data``, read from the type bytes and length fields alone (nothing is
    allocated), stopping as soon as it passes ``limit``: a cost of at most ``limit`` steps whatever the size.

    Raises:
        ValueError: If ``data`` holds more than ``limit`` objects, is cut short, or is not msgpack.
    """
    view, offset, pending, count = memoryview(data), 0, 1, 0
    while pending:
        if offset >= len(view):
            raise ValueError(f"Not a msgpack message of arrays: cut short after {count} objects.")
        count, pending = count + 1, pending - 1
        if count > limit:
            raise ValueError(f"A message may hold at most {limit} msgpack objects (maps, lists, keys, numbers,"
                             " strings and bytes: msgpack_arrays.MAX_OBJECTS).")
        kind = view[offset]
        offset += 1
        if kind <= 0x7F or kind >= 0xE0:  # fixint
            continue
        if kind <= 0x8F:  # fixmap
            pending += 2 * (kind & 0x0F)
        elif kind <= 0x9F:  # fixarray
            pending += kind & 0x0F
        elif kind <= 0xBF:  # fixstr
            offset += kind & 0x1F
        elif kind in _FIXED_SIZES:
            offset += _FIXED_SIZES[kind]
        elif kind in _SIZED:
            width, extra = _SIZED[kind]
            offset += width + extra + int.from_bytes(view[offset:offset + width], "big")
        elif kind in _CONTAINERS:
            width, per_entry = _CONTAINERS[kind]
            pending += per_entry * int.from_bytes(view[offset:offset + width], "big")
            offset += width
        else:
            raise ValueError(f"Not a msgpack message of arrays: byte 0x{kind:02x} at {offset - 1} is no msgpack type.")
    if offset != len(view):
        raise ValueError(f"Not a msgpack message of arrays: {len(view) - offset} bytes after its end.")
    return count


def unpackb(data: bytes, decode: Callable[[dict], Any] = _decode) -> Any:
    """Decode a message of :func:`packb` (or of openpi's ``msgpack_numpy``); arrays come back read-only.

    Its objects are counted first (:func:`count_objects`), so decoding costs at most :data:`MAX_OBJECTS`
    Python objects plus a copy of the message, whatever was sent.

    Args:
        data: The message.
        decode: Turns each decoded map into what it stands for (default: openpi's array maps); another
            transport's codec passes its own and keeps the object bound.

    Raises:
        ValueError: If the message is not msgpack, holds more than :data:`MAX_OBJECTS` objects, or an array is
            malformed or of a refused dtype.
    """
    count_objects(data)
    try:
        return msgpack.unpackb(data, object_hook=decode)
    except (msgpack.UnpackException, msgpack.ExtraData, TypeError, KeyError, OverflowError) as err:
        raise ValueError(f"Not a msgpack message of arrays: {type(err).__name__}: {err}") from None
