"""GR00T's msgpack messages: arrays in both of its encodings and its modality configs, read without pickle.

GR00T's policy server and client (Isaac-GR00T ``gr00t/policy/server_client.py``) put numpy arrays on the wire
in one of two encodings, depending on their generation:

* ``npy`` (N1.6): ``{"__ndarray_class__": True, "as_npy": <bytes of numpy's .npy format>}``. Every server
  generation reads it, so the client sends it.
* ``msgpack_numpy`` (newer): msgpack-numpy's map with bytes keys ``{b"nd": True, b"type": dtype.str,
  b"kind": b"", b"shape": [...], b"data": <raw C-order bytes>}``; ``b"nd": False`` is a numpy scalar.

Both are read; a reply goes out in the encoding its request came in. Only the numeric dtypes of
:data:`~isaaclab_suspend.serving.base.ALLOWED_DTYPES` are accepted (``kind == b"O"``, object, void and
big-endian dtypes are refused, nothing is unpickled), each array's byte count must equal its shape times its
item size before anything is viewed, and decoded arrays are read-only views of the received bytes (no copy;
the npy header is parsed with numpy's ``read_array_header``, never ``np.load``, which would allocate the
array a forged header announces). A modality config arrives under ``__ModalityConfig_class__`` (N1.6) or
``__ModalityConfig__`` (newer), its ``as_json`` a map (or a JSON string, as N1.5 sent it), and is decoded to
that plain dict only where a config is expected (``unpackb(..., configs=True)``: the client reading the reply
of ``get_modality_config``); elsewhere a marked map stays a plain map and its JSON is never parsed. A JSON
string counts against the same object cap as the msgpack around it, bounded before it is parsed.
:func:`modality_config` marks a config with both markers, so that either client generation reads it.
"""

from __future__ import annotations

import io
import json
from typing import Any

import msgpack
import numpy as np

from .. import msgpack_arrays
from ..base import ALLOWED_DTYPES

NPY = "npy"
"""The N1.6 array encoding (numpy's .npy bytes)."""
MSGPACK_NUMPY = "msgpack_numpy"
"""The newer array encoding (msgpack-numpy's map)."""
ENCODINGS = (NPY, MSGPACK_NUMPY)
"""The array encodings, the default first."""
CONFIG_MARKERS = ("__ModalityConfig_class__", "__ModalityConfig__")
"""The modality config markers of N1.6 and of the newer generation."""


def _dtype(text: Any) -> np.dtype:
    """The dtype of a peer's dtype string, if it is one of :data:`ALLOWED_DTYPES`."""
    if isinstance(text, bytes):
        text = text.decode("ascii", "replace")
    if not isinstance(text, str) or text not in ALLOWED_DTYPES:
        raise ValueError(f"An array of dtype {str(text)[:24]!r} cannot travel: only {sorted(ALLOWED_DTYPES)}.")
    return np.dtype(text)


def _view(data: Any, dtype: np.dtype, shape: Any, fortran: bool = False) -> np.ndarray:
    """A read-only view of ``data`` as an array, after checking the shape against the byte count."""
    if not isinstance(shape, (list, tuple)) or len(shape) > 8 or not all(type(n) is int and n >= 0 for n in shape):
        raise ValueError(f"An array's shape must be at most 8 non-negative integers, got {str(shape)[:80]}.")
    if not isinstance(data, (bytes, memoryview)):
        raise ValueError(f"An array's data must be bytes, got {type(data).__name__}.")
    count = int(np.prod(shape, dtype=object))  # Python ints: a forged shape cannot overflow
    if count * dtype.itemsize != len(data):
        raise ValueError(f"An array of shape {tuple(shape)} and dtype {dtype} arrived with {len(data)} bytes.")
    return np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C")


_NPY_HEADERS = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
"""The header readers of the .npy versions numpy writes for numeric arrays."""


def _from_npy(data: Any) -> np.ndarray:
    if not isinstance(data, bytes):
        raise ValueError(f"'as_npy' must be bytes, got {type(data).__name__}.")
    stream = io.BytesIO(data)
    try:
        read_header = _NPY_HEADERS.get(np.lib.format.read_magic(stream))
        if read_header is None:
            raise ValueError("an .npy version other than 1.0 and 2.0")
        shape, fortran, dtype = read_header(stream, max_header_size=10_000)
    except (ValueError, SyntaxError, TypeError) as err:
        raise ValueError(f"'as_npy' is not a .npy array: {str(err)[:120]}") from None
    return _view(memoryview(data)[stream.tell():], _dtype(dtype.str), list(shape), fortran)


def _json_objects_at_most(text: str | bytes) -> int:
    """An upper bound of the objects a JSON text decodes to, without parsing it: every value but the outermost
    follows one of ``[ { , :``."""
    return 1 + sum(text.count(c) for c in ((b"[", b"{", b",", b":") if isinstance(text, bytes) else "[{,:"))


class Gr00tDecoder:
    """Decodes the maps of one message; :attr:`encoding` says which array encoding it used.

    Args:
        configs: Decode modality configs (their markers' ``as_json``); else a marked map stays a plain map.
        budget: Objects the JSON strings of configs may decode to, all together.
    """

    def __init__(self, configs: bool = False, budget: int = msgpack_arrays.MAX_OBJECTS):
        self.encoding = NPY
        """``msgpack_numpy`` once an array of that encoding was read, else ``npy``."""
        self.configs = configs
        self.budget = budget

    def __call__(self, obj: dict) -> Any:
        if "__ndarray_class__" in obj:
            return _from_npy(obj.get("as_npy"))
        if b"nd" in obj:
            self.encoding = MSGPACK_NUMPY
            if obj.get(b"kind", b"") not in (b"", ""):
                raise ValueError(f"An array of kind {str(obj.get(b'kind'))[:8]} (pickled objects) is refused.")
            dtype = _dtype(obj.get(b"type"))
            if obj[b"nd"]:
                return _view(obj.get(b"data"), dtype, obj.get(b"shape"))
            return _view(obj.get(b"data"), dtype, [])[()]
        if not self.configs:
            return obj
        for marker in CONFIG_MARKERS:
            if marker in obj or marker.encode() in obj:
                config = obj.get("as_json", obj.get(b"as_json"))
                if isinstance(config, (str, bytes)):
                    self.budget -= _json_objects_at_most(config)
                    if self.budget < 0:
                        raise ValueError(f"A message may hold at most {msgpack_arrays.MAX_OBJECTS} objects, JSON of"
                                         " modality configs included (msgpack_arrays.MAX_OBJECTS).")
                    try:
                        config = json.loads(config)
                    except (ValueError, RecursionError):
                        raise ValueError("A modality config's 'as_json' is not JSON.") from None
                if not isinstance(config, dict):
                    raise ValueError(f"A modality config's 'as_json' must be a map, got {type(config).__name__}.")
                return config
        return obj


def unpackb(data: bytes | memoryview, configs: bool = False) -> tuple[Any, str]:
    """Decode a GR00T message: ``(object, array encoding it used)``; arrays come back read-only. With
    ``configs`` (a ``get_modality_config`` reply), modality configs are decoded to plain dicts.

    Raises:
        ValueError: If the message is not msgpack, breaks the container caps of :mod:`.msgpack_arrays`, or holds
            an array that is malformed, of a refused dtype, or pickled.
    """
    decoder = Gr00tDecoder(configs, msgpack_arrays.MAX_OBJECTS - msgpack_arrays.count_objects(data))
    return msgpack_arrays.unpackb(data, decoder), decoder.encoding


def packb(obj: Any, encoding: str = NPY) -> bytes:
    """Encode ``obj`` (maps, lists, numbers, strings, bytes, numpy arrays and scalars) with arrays in
    ``encoding`` (``npy`` or ``msgpack_numpy``).

    Raises:
        ValueError: If an array's dtype is not one of :data:`ALLOWED_DTYPES`.
        TypeError: If ``obj`` holds anything else (a torch tensor: ``.cpu().numpy()``).
    """
    def encode(value: Any) -> Any:
        if isinstance(value, np.generic):
            value = np.asarray(value)
        if not isinstance(value, np.ndarray):
            raise TypeError(f"Cannot pack an object of type {type(value).__name__}: send numpy arrays, numbers and"
                            " strings.")
        _dtype(value.dtype.str)
        if encoding == NPY:
            stream = io.BytesIO()
            np.save(stream, value, allow_pickle=False)
            return {"__ndarray_class__": True, "as_npy": stream.getvalue()}
        return {b"nd": True, b"type": value.dtype.str, b"kind": b"", b"shape": list(value.shape),
                b"data": np.ascontiguousarray(value).tobytes()}

    return msgpack.packb(obj, default=encode)


def modality_config(delta_indices: list[int], modality_keys: list[str]) -> dict:
    """A modality config as both generations' clients decode it: both markers, ``as_json`` a map with the
    fields of GR00T's ``ModalityConfig``."""
    return {CONFIG_MARKERS[0]: True, CONFIG_MARKERS[1]: True,
            "as_json": {"delta_indices": list(delta_indices), "modality_keys": list(modality_keys),
                        "sin_cos_embedding_keys": None, "mean_std_embedding_keys": None, "action_configs": None}}
