"""What the sketches share: the byte format's header and its bounds-checked
reader, argument checks, kernel status codes, and the hash sources the
kernels read (one per Arrow chunk or NumPy array), weights and value types.

The byte format (a common 8-byte header, then each sketch's body) is
described in :mod:`fastops.core.sketches`.
"""
from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pat

from fastops._kernels import sketch as _sketch
from fastops._kernels.sketch import HashSource
from fastops.core import arrow as _arrow
from fastops.core import hashing

MAGIC = b"FOSK"
VERSION = 1
_HEADER = struct.Struct("<4sHBB")
T_HLL, T_CMS, T_KLL, T_SS, T_BLOOM, T_RESERVOIR = 1, 2, 3, 4, 5, 6
_TYPE_NAMES = {1: "HyperLogLog", 2: "CountMinSketch", 3: "KLL", 4: "SpaceSaving",
               5: "BloomFilter", 6: "Reservoir"}
_EMPTY_U8 = np.zeros(0, dtype=np.uint8)
_EMPTY_I64 = np.zeros(0, dtype=np.int64)
_U64_MAX = 2**64 - 1
_I64_MIN, _I64_MAX = -2**63, 2**63 - 1


def _check_int(name: str, value: Any, lo: int, hi: int) -> int:
    if not isinstance(value, (int, np.integer)) or isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    value = int(value)
    if not lo <= value <= hi:
        raise ValueError(f"{name} must be in [{lo}, {hi}], got {value}")
    return value


def _check_seed(seed: Any) -> int:
    return _check_int("seed", seed, 0, _U64_MAX)


def _status(st: int, who: str) -> int:
    """Raise for a negative kernel status; return it otherwise."""
    if st >= 0:
        return st
    if st == _sketch.STATUS_NOMEM:
        raise MemoryError(f"{who}: out of memory")
    if st == _sketch.STATUS_NEGATIVE_WEIGHT:
        raise ValueError(f"{who}: negative weights are not allowed here")
    if st == _sketch.STATUS_TOO_MANY_LEVELS:
        raise OverflowError(f"{who}: too many items")
    raise ValueError(f"{who}: kernel reported invalid sizes (status {st})")


def _header(type_id: int, flags: int = 0) -> bytes:
    return _HEADER.pack(MAGIC, VERSION, type_id, flags)


class _Reader:
    """Bounds-checked reads of a bytes object: every read raises ValueError
    when the input is too short."""

    def __init__(self, data: Any, type_id: int):
        if isinstance(data, (bytearray, memoryview)):
            data = bytes(data)
        if not isinstance(data, bytes):
            raise TypeError(f"from_bytes expects bytes, got {type(data).__name__}")
        self.data = data
        self.pos = 0
        self.name = _TYPE_NAMES[type_id]
        magic, version, tid, flags = self.unpack(_HEADER)
        if magic != MAGIC:
            raise ValueError(f"{self.name}.from_bytes: bad magic {magic!r}")
        if version != VERSION:
            raise ValueError(f"{self.name}.from_bytes: unsupported version {version}")
        if tid != type_id:
            found = _TYPE_NAMES.get(tid, f"type {tid}")
            raise ValueError(f"{self.name}.from_bytes: the bytes hold a {found}")
        self.flags = flags

    def unpack(self, st: struct.Struct) -> tuple:
        if self.pos + st.size > len(self.data):
            raise ValueError(f"{self.name}.from_bytes: truncated input")
        out = st.unpack_from(self.data, self.pos)
        self.pos += st.size
        return out

    def array(self, dtype: Any, count: int) -> np.ndarray:
        dtype = np.dtype(dtype)
        if count < 0 or count > (len(self.data) - self.pos) // dtype.itemsize:
            raise ValueError(f"{self.name}.from_bytes: truncated input")
        out = np.frombuffer(self.data, dtype=dtype.newbyteorder("<"), count=count,
                            offset=self.pos).astype(dtype)
        self.pos += count * dtype.itemsize
        return out

    def blob(self) -> bytes:
        (length,) = self.unpack(struct.Struct("<Q"))
        if length > len(self.data) - self.pos:
            raise ValueError(f"{self.name}.from_bytes: truncated input")
        out = self.data[self.pos:self.pos + length]
        self.pos += length
        return out

    def end(self) -> None:
        if self.pos != len(self.data):
            raise ValueError(f"{self.name}.from_bytes: {len(self.data) - self.pos} "
                             "trailing bytes")

    def fail(self, msg: str) -> None:
        raise ValueError(f"{self.name}.from_bytes: {msg}")


def _check_total(who: str, total: int, add: int) -> None:
    """Raise OverflowError when ``total + add`` leaves the int64 range."""
    if not _I64_MIN <= total + add <= _I64_MAX:
        raise OverflowError(f"{who}: total_weight {total} + {add} does not fit in int64")


def _to_arrow(values: Any) -> pa.Array | pa.ChunkedArray:
    if isinstance(values, (pa.RecordBatch, pa.Table)):
        raise TypeError("expected one column (an Array), got a "
                        f"{type(values).__name__}; pass batch.column(name)")
    if isinstance(values, np.ndarray) and values.ndim != 1:
        raise ValueError(f"values must be one-dimensional, got shape {values.shape}")
    return _arrow.without_views(_arrow.as_array(values))  # string_view kept as large_string


class _Src(NamedTuple):
    """A hash source for the kernels (see ``fastops._kernels.sketch``)."""
    mode: HashSource
    a: np.ndarray
    b: np.ndarray
    valid: np.ndarray
    voff: int
    n: int


_NP_MODES = {np.dtype(np.int64): HashSource.FIXED8, np.dtype(np.uint64): HashSource.FIXED8,
             np.dtype(np.int32): HashSource.FIXED4, np.dtype(np.uint32): HashSource.FIXED4,
             np.dtype(np.float64): HashSource.FLOAT64, np.dtype(np.float32): HashSource.FLOAT32}


def _np_source(arr: np.ndarray) -> _Src | None:
    mode = _NP_MODES.get(arr.dtype)
    if mode is None or arr.ndim != 1:
        return None
    arr = np.ascontiguousarray(arr)
    if arr.dtype.byteorder == ">":
        return None
    return _Src(mode, arr.view(np.uint8), _EMPTY_U8, _EMPTY_U8, 0, len(arr))


def _chunk_source(arr: pa.Array, seed: int) -> _Src | None:
    """How the kernels read one Arrow chunk; None when every row is null."""
    t = arr.type
    n = len(arr)
    if n == 0 or pat.is_null(t) or arr.null_count == n:
        return None
    valid = _arrow.validity(arr)
    voff = arr.offset
    if valid is None:
        valid, voff = _EMPTY_U8, 0
    if pat.is_floating(t) and t.bit_width in (32, 64):
        dt = np.dtype(np.uint64 if t.bit_width == 64 else np.uint32)
        mode = HashSource.FLOAT64 if t.bit_width == 64 else HashSource.FLOAT32
        return _Src(mode, _arrow.fixed_values(arr, dt).view(np.uint8), _EMPTY_U8, valid, voff, n)
    width = _arrow.fixed_width_bytes(t)
    if width in (4, 8) and not pat.is_floating(t) and not pat.is_decimal(t):
        dt = np.dtype(np.uint64 if width == 8 else np.uint32)
        mode = HashSource.FIXED8 if width == 8 else HashSource.FIXED4
        return _Src(mode, _arrow.fixed_values(arr, dt).view(np.uint8), _EMPTY_U8, valid, voff, n)
    if _arrow.is_binary_like(t):
        offsets, data = _arrow.binary_parts(arr)
        mode = HashSource.BINARY64 if offsets.dtype == np.int64 else HashSource.BINARY32
        return _Src(mode, np.ascontiguousarray(offsets).view(np.uint8), data, valid, voff, n)
    if not hashing.supports(t):
        raise TypeError(f"sketches cannot hash values of type {t}")
    hashes = hashing.hash_columns([arr], seed)
    if arr.null_count:
        bits = pc.is_valid(arr)
        return _Src(HashSource.HASHES, hashes.view(np.uint8), _EMPTY_U8, _arrow.bit_values(bits),
                    bits.offset, n)
    return _Src(HashSource.HASHES, hashes.view(np.uint8), _EMPTY_U8, _EMPTY_U8, 0, n)


def _sources(values: Any, seed: int) -> Iterator[tuple[int, int, _Src | None, Any]]:
    """(row offset, rows, source or None, the chunk) for each chunk of ``values``."""
    if isinstance(values, np.ndarray):
        src = _np_source(values)
        if src is not None:
            yield 0, len(values), src, values
            return
    arr = _to_arrow(values)
    pos = 0
    for chunk in _arrow.chunks(arr):
        yield pos, len(chunk), _chunk_source(chunk, seed), chunk
        pos += len(chunk)


def _length(values: Any) -> int:
    return len(values)


def _weights(weights: Any, n: int, who: str) -> np.ndarray | None:
    """Weights as a contiguous int64 NumPy array of length ``n`` (or None)."""
    if weights is None:
        return None
    if isinstance(weights, (int, np.integer)) and not isinstance(weights, bool):
        return np.full(n, int(weights), dtype=np.int64)
    if isinstance(weights, (pa.Array, pa.ChunkedArray)):
        if weights.null_count:
            raise ValueError(f"{who}: weights must not contain nulls")
        if not pat.is_integer(weights.type):
            raise TypeError(f"{who}: weights must be integers, got {weights.type}")
        weights = weights.to_numpy(zero_copy_only=False)
    w = np.asarray(weights)
    if w.ndim != 1:
        raise ValueError(f"{who}: weights must be one-dimensional")
    if w.dtype.kind not in "iu":
        if w.dtype.kind == "f" and len(w) and np.all(np.isfinite(w)) and np.all(w == np.round(w)):
            pass
        elif len(w):
            raise TypeError(f"{who}: weights must be integers, got dtype {w.dtype}")
    if len(w) != n:
        raise ValueError(f"{who}: {len(w)} weights for {n} values")
    if w.dtype == np.uint64 and len(w) and w.max() > np.iinfo(np.int64).max:
        raise ValueError(f"{who}: weight too large for int64")
    return np.ascontiguousarray(w, dtype=np.int64)


def _valid_weight(chunk: Any, n: int, w: np.ndarray | None) -> int:
    """Total weight of the non-null rows of a chunk (weight 1 each if ``w`` is None)."""
    nulls = 0 if isinstance(chunk, np.ndarray) else chunk.null_count
    if w is None:
        return n - nulls
    if nulls:
        ok = chunk.is_valid().to_numpy(zero_copy_only=False)
        return int(w[ok].sum())
    return int(w.sum())


def _no_weights(weights: Any, who: str) -> None:
    if weights is not None:
        raise ValueError(f"{who} does not take weights (a repeated value does not change it)")


def _reduce(obj: Any) -> tuple:
    return (type(obj).from_bytes, (obj.to_bytes(),))


def _ipc_table(data: bytes, who: str) -> pa.Table:
    try:
        table = _arrow.from_ipc(pa.py_buffer(data))
        table.validate(full=True)
    except (pa.ArrowException, OSError, ValueError, TypeError, IndexError) as exc:
        raise ValueError(f"{who}.from_bytes: corrupt value data ({exc})") from None
    return table


def _held_type_ok(t: pa.DataType) -> bool:
    """Whether an update can leave values of type ``t`` in a sketch (not a
    dictionary, which updates decode, nor a view, which they widen)."""
    return not pat.is_dictionary(t) and _arrow.view_storage(t) is None


def _plain(chunk: Any) -> pa.Array:
    """A chunk as a plain (non-dictionary) Arrow array."""
    if isinstance(chunk, np.ndarray):
        return pa.array(chunk)
    if pat.is_dictionary(chunk.type):
        return chunk.dictionary_decode()
    return chunk
