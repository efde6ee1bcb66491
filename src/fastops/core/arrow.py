"""Zero-copy access to Arrow buffers as NumPy views, for the kernels, and
the NumPy arrays kernels write into.

The one place that knows Arrow's physical layouts, both ways: buffers of an
array as views (read-only, ``np.frombuffer``; kernels take ``const``
memoryviews) and arrays built from kernel outputs.
"""
from __future__ import annotations

import io
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.types as pat
from numpy.typing import DTypeLike

_EMPTY_U8 = np.zeros(1, dtype=np.uint8)


def as_array(values: Any, what: str = "values") -> pa.Array | pa.ChunkedArray:
    """Turn an Arrow array, ChunkedArray, NumPy array or sequence into Arrow."""
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return values
    if isinstance(values, np.ndarray):
        if values.ndim != 1:
            raise ValueError(f"{what} must be one-dimensional, got shape {values.shape}")
        return pa.array(values)
    if hasattr(values, "__arrow_c_array__") or hasattr(values, "__arrow_c_stream__"):
        return pa.array(values) if hasattr(values, "__arrow_c_array__") else pa.chunked_array(values)
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as exc:
        raise TypeError(f"cannot convert {what} of type {type(values).__name__} to Arrow: {exc}") from None


def chunks(values: pa.Array | pa.ChunkedArray) -> list[pa.Array]:
    """The chunks of an array (a plain array is one chunk)."""
    if isinstance(values, pa.ChunkedArray):
        return [c for c in values.chunks if len(c)]
    return [values]


def validity(arr: pa.Array) -> np.ndarray | None:
    """The validity bitmap as uint8 (bit ``arr.offset + i``), or None if no nulls."""
    if arr.null_count == 0:
        return None
    buf = arr.buffers()[0]
    if buf is None:  # e.g. null type
        return None
    return np.frombuffer(buf, dtype=np.uint8)


def fixed_values(arr: pa.Array, dtype: DTypeLike) -> np.ndarray:
    """The values buffer of a fixed-width array, sliced to this array's rows."""
    buf = arr.buffers()[1]
    n = len(arr)
    if buf is None or n == 0:
        return np.zeros(0, dtype=dtype)
    view = np.frombuffer(buf, dtype=dtype)
    return view[arr.offset : arr.offset + n]


def bit_values(arr: pa.Array) -> np.ndarray:
    """The bit-packed values buffer of a boolean array (bit ``arr.offset + i``)."""
    buf = arr.buffers()[1]
    if buf is None or len(arr) == 0:
        return _EMPTY_U8
    return np.frombuffer(buf, dtype=np.uint8)


def binary_parts(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(offsets sliced to n+1 entries, whole data buffer) of a binary-like array."""
    large = pat.is_large_string(arr.type) or pat.is_large_binary(arr.type)
    odtype = np.int64 if large else np.int32
    _, obuf, dbuf = arr.buffers()[:3]
    n = len(arr)
    if obuf is None or n == 0:
        offsets = np.zeros(n + 1, dtype=odtype)
    else:
        offsets = np.frombuffer(obuf, dtype=odtype)[arr.offset : arr.offset + n + 1]
    data = _EMPTY_U8[:0] if dbuf is None else np.frombuffer(dbuf, dtype=np.uint8)
    return offsets, data


def fixed_width_bytes(t: pa.DataType) -> int | None:
    """Byte width of a fixed-width, non-boolean primitive type, else None
    (a function of the type id alone, so it is worked out once per id: this
    runs for every column of every batch)."""
    try:
        return _WIDTH_BY_ID[t.id]
    except KeyError:
        pass
    width = None
    if not (pat.is_boolean(t) or pat.is_dictionary(t)) and \
            (pat.is_integer(t) or pat.is_floating(t) or pat.is_temporal(t)):
        width = t.bit_width // 8
    _WIDTH_BY_ID[t.id] = width
    return width


_WIDTH_BY_ID: dict[int, int | None] = {}


def view_storage(t: pa.DataType) -> pa.DataType | None:
    """``large_string`` / ``large_binary`` for ``string_view`` / ``binary_view``
    (None for any other type). Kernels read offsets and data buffers, so view
    arrays are cast to these (the same values) on the way in."""
    return _VIEW_STORAGE.get(t.id)


_VIEW_STORAGE = {view().id: wide for view, wide in (
    (getattr(pa, "string_view", None), pa.large_string()),
    (getattr(pa, "binary_view", None), pa.large_binary())) if view is not None}


def without_views(data: Any) -> Any:
    """An Array / ChunkedArray / Table with its view columns cast to their
    ``view_storage`` types (Arrow's take and filter have no view kernels);
    anything else as it is."""
    if isinstance(data, pa.Table):
        if not any(view_storage(t) for t in data.schema.types):
            return data
        return pa.Table.from_arrays([without_views(c) for c in data.columns], names=data.schema.names)
    if isinstance(data, (pa.Array, pa.ChunkedArray)):
        wide = view_storage(data.type)
        return data if wide is None else data.cast(wide)
    return data


def is_binary_like(t: pa.DataType) -> bool:
    """string, large_string, binary or large_binary (offsets and data buffers)."""
    return t.id in _BINARY_IDS


_BINARY_IDS = frozenset(t.id for t in (pa.string(), pa.large_string(), pa.binary(), pa.large_binary()))


UINT_FOR_WIDTH: dict[int, type[np.unsignedinteger[Any]]] = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def empty(n: int, dtype: Any) -> tuple[np.ndarray, pa.Buffer]:
    """A writable, uninitialised NumPy array of ``n`` items backed by a buffer
    of pyarrow's default memory pool, and that buffer (64-byte aligned).

    Kernel outputs and state arrays are allocated here rather than with
    ``np.empty``: the buffer becomes part of an Arrow array without a copy,
    and large ones are recycled (see ``BlockCache``).
    """
    dtype = np.dtype(dtype)
    nbytes = n * dtype.itemsize if n > 0 else 0
    if nbytes < BlockCache.MIN_BYTES:
        buf = pa.allocate_buffer(nbytes)
    else:
        buf = pa.py_buffer(_BLOCKS.lease(nbytes))
    return np.frombuffer(buf, dtype=dtype), buf


def zeros(n: int, dtype: Any) -> np.ndarray:
    """``empty``, zeroed."""
    out = empty(n, dtype)[0]
    out[:] = 0
    return out


def pool_bytes_in_use() -> int:
    """Arrow pool bytes in use: allocated, less the released blocks waiting
    in the block cache."""
    return pa.total_allocated_bytes() - _BLOCKS.held


class BlockCache:
    """Large buffers (``MIN_BYTES`` and up) reused once released.

    An emission's columns are megabytes that live until the consumer drops
    the batch. Freed to the memory pool, such blocks go back to the system
    (mimalloc purges them within milliseconds), and the next emission pays
    the kernel's page faults and zeroing again, a cost on the order of the
    writes themselves. Here a released block waits, up to ``CAP_BYTES`` in
    all, for the next request of its size class (powers of two).

    A block is handed out as a ``_Lease`` (an array over its first bytes);
    every buffer, array or view made from it holds the lease, and the block
    returns only when the last of them is gone, so it is never reused while
    readable."""

    MIN_BYTES = 256 << 10
    CAP_BYTES = 256 << 20

    def __init__(self) -> None:
        self.free: dict[int, list[np.ndarray]] = {}
        self.held = 0  # bytes waiting in ``free``

    def lease(self, nbytes: int) -> _Lease:
        cls = (nbytes - 1).bit_length()
        try:
            block = self.free[cls].pop()  # atomic: another thread may be here too
        except (KeyError, IndexError):
            block = np.frombuffer(pa.allocate_buffer(1 << cls), dtype=np.uint8)
        else:
            self.held -= len(block)
        lease = block[:nbytes].view(_Lease)
        lease.cache, lease.block = self, block
        return lease

    def release(self, block: np.ndarray) -> None:
        if self.held + len(block) <= self.CAP_BYTES:
            self.free.setdefault((len(block) - 1).bit_length(), []).append(block)
            self.held += len(block)

    def clear(self) -> None:
        """Give every waiting block back to the memory pool."""
        self.free.clear()
        self.held = 0


class _Lease(np.ndarray):
    """A block's bytes on loan; returns the block to its cache when collected."""

    cache: BlockCache | None = None
    block: np.ndarray | None = None

    def __del__(self) -> None:
        cache, block = self.cache, self.block
        if cache is not None and block is not None:
            cache.release(block)


_BLOCKS = BlockCache()


def release_memory() -> int:
    """Give back the memory fastops keeps for reuse: the blocks waiting in
    the block cache (up to ``BlockCache.CAP_BYTES``), then the Arrow pool's
    free pages (``release_unused``). Returns the bytes the cache held.

    For a process that is done with stream jobs, or between large ones.
    Nothing still referenced is touched: live state and results keep their
    memory, and their blocks wait in the cache again once they are dropped."""
    held = _BLOCKS.held
    _BLOCKS.clear()
    pa.default_memory_pool().release_unused()
    return held


def concat(pieces: list[np.ndarray], dtype: Any) -> np.ndarray:
    """The pieces end to end, in pool memory (see ``empty``)."""
    out = empty(sum(len(p) for p in pieces), dtype)[0]
    at = 0
    for p in pieces:
        out[at:at + len(p)] = p
        at += len(p)
    return out


def grown(a: np.ndarray, n: int, fill: Any = 0) -> np.ndarray:
    """``a`` with room for ``n`` entries, or rows of a 2-D array (capacity
    doubles, at least 64; new ones ``fill``): the growth of every per-slot
    and per-row state array, records included, in pool memory (see ``empty``)."""
    if len(a) >= n:
        return a
    rows, row = max(n, 2 * len(a), 64), a.shape[1:]
    b = empty(rows * int(np.prod(row, dtype=np.int64)), a.dtype)[0].reshape((rows,) + row)
    b[: len(a)] = a
    b[len(a):] = fill
    return b


def bitmap(valid: np.ndarray | None) -> tuple[pa.Buffer | None, int]:
    """(validity buffer, null count) for the boolean mask ``valid``: no buffer
    when no entry is False (or ``valid`` is None)."""
    if valid is None:
        return None, 0
    nulls = len(valid) - int(np.count_nonzero(valid))
    return (pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None), nulls


def binary_array(t: pa.DataType, offsets: np.ndarray, data: np.ndarray,
                 valid: np.ndarray | None, what: str) -> pa.Array:
    """An array of the string / binary type ``t`` (``binary_parts`` the other
    way): int64 ``offsets`` (n + 1, from 0) into the bytes ``data``, null where
    ``valid`` is False. Types with 32-bit offsets get them narrowed; ValueError
    naming ``what`` when the bytes do not fit."""
    total = int(offsets[-1])
    if not (pat.is_large_string(t) or pat.is_large_binary(t)):
        if total >= 2**31:
            raise ValueError(f"{what}: {total} bytes do not fit in {t}'s 32-bit offsets")
        offsets = offsets.astype(np.int32)
    validity, nulls = bitmap(valid)
    return pa.Array.from_buffers(t, len(offsets) - 1, [validity, pa.py_buffer(offsets),
                                                        pa.py_buffer(data[:total])], null_count=nulls)


def as_batch(data: pa.RecordBatch | pa.Table) -> pa.RecordBatch:
    """A RecordBatch as it is, or a Table combined into one RecordBatch (an empty
    Table gives an empty batch with its schema)."""
    if isinstance(data, pa.RecordBatch):
        return data
    if data.num_rows == 0:
        return pa.RecordBatch.from_pylist([], schema=data.schema)
    return data.combine_chunks().to_batches()[0]


def to_ipc(data: pa.RecordBatch | pa.Table) -> bytes:
    """``data`` as Arrow IPC stream bytes: how states and snapshots are serialised."""
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, data.schema) as w:
        w.write(data)
    return sink.getvalue()


def from_ipc(data: Any) -> pa.Table:
    """The table of Arrow IPC stream bytes (``bytes`` or a buffer)."""
    return pa.ipc.open_stream(data).read_all()
