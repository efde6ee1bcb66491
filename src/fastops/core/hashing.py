"""``hash64``: stable 64-bit hashes of Arrow columns (XXH64).

The hash of a value is XXH64 of its little-endian bytes (strings and binary
of any layout, regular, large or view: their bytes) with the given seed, so
it can be checked against the ``xxhash`` package and stored in checkpoints.
Conventions:

- floats: ``-0.0`` hashes as ``0.0``; every NaN as the canonical quiet NaN;
- booleans: one byte, 0 or 1;
- temporal types: their integer storage (date32: int32 days; timestamp,
  date64, time, duration: their int32/int64 in the column's unit);
- dictionary arrays: the hash of the value, not of the index;
- nulls: ``null_hash(seed) = XXH64(b"fastops:null", seed)``;
- several columns: ``h = hash(c0)``, then ``h = XXH64(le8(h) || le8(hash(ck)), seed)``.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Union

import numpy as np
import pyarrow as pa
import pyarrow.types as pat

from fastops._kernels import core as _core
from fastops.core import arrow as _arrow

ArrayLike = Union[pa.Array, pa.ChunkedArray, np.ndarray]

NULL_TOKEN = b"fastops:null"
# the kernel hashing fixed-width values of each byte width
_HASH_WORDS: dict[int, Callable[[Any, int, np.ndarray], None]] = {
    8: _core.hash_u64, 4: _core.hash_u32, 2: _core.hash_u16, 1: _core.hash_u8}


def hash_bytes(data: bytes, seed: int = 0) -> int:
    """XXH64 of one byte string (checksums and fingerprints use it too)."""
    buf = np.frombuffer(data, dtype=np.uint8) if data else np.zeros(0, dtype=np.uint8)
    return _core.hash_bytes(buf, _check_seed(seed))


def null_hash(seed: int = 0) -> int:
    """The hash every null gets: ``XXH64(b"fastops:null", seed)``."""
    return hash_bytes(NULL_TOKEN, seed)


def _check_seed(seed: int) -> int:
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    if not 0 <= int(seed) < 2**64:
        raise ValueError(f"seed must be in [0, 2**64), got {seed}")
    return int(seed)


def supports(t: pa.DataType) -> bool:
    """Whether ``hash64`` accepts arrays of type ``t``."""
    if pat.is_dictionary(t):
        return supports(t.value_type)
    if pat.is_float16(t):  # no canonical -0.0 / NaN handling defined for halves
        return False
    return (
        _arrow.fixed_width_bytes(t) is not None
        or pat.is_boolean(t)
        or _arrow.is_binary_like(t)
        or _arrow.view_storage(t) is not None
        or pat.is_null(t)
    )


def _hash_chunk(arr: pa.Array, seed: int, out: np.ndarray) -> None:
    """Hash one Arrow array into ``out`` (same length)."""
    n = len(arr)
    if n == 0:
        return
    arr = _arrow.without_views(arr)  # string_view / binary_view: the same bytes, as offsets + data
    t = arr.type
    if pat.is_null(t):
        out[:] = null_hash(seed)
        return
    if pat.is_dictionary(t):
        dict_hashes = np.empty(len(arr.dictionary), dtype=np.uint64)
        _hash_chunk(arr.dictionary, seed, dict_hashes)
        idx = _arrow.fixed_values(arr.indices, np.dtype(arr.indices.type.to_pandas_dtype()))
        if len(dict_hashes):
            # slots under null indices hold arbitrary values: clip, then the
            # validity pass below overwrites them
            np.take(dict_hashes, idx, out=out, mode="clip")
    elif pat.is_floating(t) and t.bit_width == 64:
        _core.hash_f64(_arrow.fixed_values(arr, np.uint64), seed, out)
    elif pat.is_floating(t) and t.bit_width == 32:
        _core.hash_f32(_arrow.fixed_values(arr, np.uint32), seed, out)
    elif pat.is_boolean(t):
        _core.hash_bits(_arrow.bit_values(arr), arr.offset, seed, out)
    elif _arrow.is_binary_like(t):
        offsets, data = _arrow.binary_parts(arr)
        _core.hash_binary(offsets, data, seed, out)
    else:
        width = _arrow.fixed_width_bytes(t)
        if width not in _arrow.UINT_FOR_WIDTH:
            raise TypeError(f"hash64 does not support type {t}")
        values = _arrow.fixed_values(arr, _arrow.UINT_FOR_WIDTH[width])
        _HASH_WORDS[width](values, seed, out)
    valid = _arrow.validity(arr)
    if valid is not None:
        _core.hash_set_nulls(valid, arr.offset, null_hash(seed), out)


def hash_column(values: pa.Array | pa.ChunkedArray, seed: int, out: np.ndarray) -> None:
    """Hash every chunk of one column into ``out``."""
    pos = 0
    for chunk in _arrow.chunks(values):
        _hash_chunk(chunk, seed, out[pos : pos + len(chunk)])
        pos += len(chunk)


def _is_column_list(values: Any) -> bool:
    return isinstance(values, (list, tuple)) and len(values) > 0 and all(
        isinstance(v, (pa.Array, pa.ChunkedArray, np.ndarray)) for v in values
    )


def hash_columns(columns: Sequence[pa.Array | pa.ChunkedArray], seed: int = 0,
                 names: Sequence[str] | None = None) -> np.ndarray:
    """Combined row hashes of equal-length columns, as a NumPy uint64 array."""
    seed = _check_seed(seed)
    if not columns:
        raise ValueError("hash64 needs at least one column")
    n = len(columns[0])
    for i, col in enumerate(columns):
        if len(col) != n or not supports(col.type):
            label = f"column {names[i]!r}" if names else f"column {i}"
            if len(col) != n:
                raise ValueError(f"{label} has {len(col)} rows, expected {n}")
            raise TypeError(f"hash64 does not support type {col.type} ({label})")
    out, _ = _arrow.empty(n, np.uint64)
    hash_column(columns[0], seed, out)
    if len(columns) > 1:
        tmp, _ = _arrow.empty(n, np.uint64)
        for col in columns[1:]:
            hash_column(col, seed, tmp)
            _core.hash_combine(out, tmp, seed)
    return out


def hash64(values: ArrayLike | Sequence[ArrayLike], seed: int = 0) -> pa.UInt64Array:
    """Stable 64-bit hash of every row: XXH64 of the value's little-endian bytes.

    Parameters
    ----------
    values
        A pyarrow Array or ChunkedArray, a NumPy array, or a list of them
        (a multi-column key: one combined hash per row).
    seed
        XXH64 seed, an int in ``[0, 2**64)``.

    Returns
    -------
    pyarrow.UInt64Array
        One hash per row, never null (nulls hash to ``null_hash(seed)``).

    Examples
    --------
    >>> import pyarrow as pa, xxhash
    >>> h = hash64(pa.array([1], pa.int64()))
    >>> h[0].as_py() == xxhash.xxh64_intdigest((1).to_bytes(8, "little"))
    True
    """
    if _is_column_list(values):
        cols = [_arrow.as_array(v, f"column {i}") for i, v in enumerate(values)]
    else:
        cols = [_arrow.as_array(values)]
    out = hash_columns(cols, seed)
    return pa.Array.from_buffers(pa.uint64(), len(out), [None, pa.py_buffer(out)])
