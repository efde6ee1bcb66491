"""Hash partitioning: partition ids by three schemes, and a counting-sort scatter.

Schemes (``h = hash64(key columns, seed)``):

- ``"hash"``: ``h % num_partitions``;
- ``"key_group"``: Flink's scheme: ``key_group = h % max_parallelism`` and
  ``owner = key_group * num_partitions // max_parallelism``, so each task owns
  a contiguous range of key groups (``key_group_range``) and rescaling moves
  whole key groups;
- ``"consistent"``: a ring of ``virtual_nodes`` points per partition (point =
  ``XXH64(le8(partition) || le8(vnode), seed)``); a key belongs to the first
  point clockwise from its hash. Adding one partition moves about ``1/(n+1)``
  of the keys.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Sequence, Union

import numpy as np
import pyarrow as pa
import pyarrow.types as pat

from fastops import _arrow, _core
from fastops.hashing import hash_columns

SCHEMES = ("hash", "key_group", "consistent")
_LUT_BITS = 16

Batch = Union[pa.RecordBatch, pa.Table]


def _key_columns(batch: Batch, by: str | Sequence[str]) -> tuple[list, list[str]]:
    if not isinstance(batch, (pa.RecordBatch, pa.Table)):
        raise TypeError(f"batch must be a pyarrow RecordBatch or Table, got {type(batch).__name__}")
    names = [by] if isinstance(by, str) else list(by)
    if not names:
        raise ValueError("partitioning needs at least one key column in 'by'")
    cols = []
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"key column names must be strings, got {name!r}")
        idx = batch.schema.get_field_index(name)
        if idx < 0:
            raise KeyError(f"key column {name!r} not in batch (columns: {batch.schema.names})")
        cols.append(batch.column(idx))
    return cols, names


def _check_parallelism(num_partitions: int, scheme: str, max_parallelism: int,
                       virtual_nodes: int) -> None:
    if scheme not in SCHEMES:
        raise ValueError(f"unknown partitioning scheme {scheme!r}; expected one of {SCHEMES}")
    if not isinstance(num_partitions, (int, np.integer)) or num_partitions < 1:
        raise ValueError(f"num_partitions must be an int >= 1, got {num_partitions!r}")
    if num_partitions > 2**31 - 1:
        raise ValueError(f"num_partitions too large: {num_partitions}")
    if scheme == "key_group":
        if not isinstance(max_parallelism, (int, np.integer)) or max_parallelism < 1:
            raise ValueError(f"max_parallelism must be an int >= 1, got {max_parallelism!r}")
        if num_partitions > max_parallelism:
            raise ValueError(
                f"num_partitions ({num_partitions}) must not exceed max_parallelism "
                f"({max_parallelism}) with key groups"
            )
    if scheme == "consistent" and (not isinstance(virtual_nodes, (int, np.integer)) or virtual_nodes < 1):
        raise ValueError(f"virtual_nodes must be an int >= 1, got {virtual_nodes!r}")


@lru_cache(maxsize=64)
def _ring(num_partitions: int, virtual_nodes: int, seed: int):
    """Sorted ring points, their owners and a lookup table on the top bits."""
    part = np.repeat(np.arange(num_partitions, dtype=np.uint64), virtual_nodes)
    vnode = np.tile(np.arange(virtual_nodes, dtype=np.uint64), num_partitions)
    points = part.copy()  # point = XXH64(le8(p) || le8(v), seed)
    _core.hash_combine(points, vnode, seed)
    order = np.argsort(points, kind="stable")
    points = np.ascontiguousarray(points[order])
    owners = np.ascontiguousarray(part[order].astype(np.int32))
    shift = 64 - _LUT_BITS
    buckets = np.arange((1 << _LUT_BITS) + 1, dtype=np.uint64)
    lut = np.searchsorted(points >> np.uint64(shift), buckets, side="left").astype(np.int64)
    for arr in (points, owners, lut):
        arr.setflags(write=False)
    return points, owners, lut, shift


def ids_from_hashes(hashes: np.ndarray, num_partitions: int, scheme: str = "hash",
                    max_parallelism: int = 128, virtual_nodes: int = 64,
                    seed: int = 0) -> np.ndarray:
    """Partition ids (int32) for precomputed 64-bit key hashes."""
    _check_parallelism(num_partitions, scheme, max_parallelism, virtual_nodes)
    out = np.empty(len(hashes), dtype=np.int32)
    if scheme == "hash":
        _core.partition_modulo(hashes, num_partitions, out)
    elif scheme == "key_group":
        _core.partition_key_group(hashes, num_partitions, max_parallelism, out)
    else:
        points, owners, lut, shift = _ring(int(num_partitions), int(virtual_nodes), int(seed))
        _core.partition_ring(hashes, points, owners, lut, shift, out)
    return out


def partition_ids(batch: Batch, by: str | Sequence[str], num_partitions: int,
                  scheme: str = "hash", max_parallelism: int = 128,
                  virtual_nodes: int = 64, seed: int = 0) -> np.ndarray:
    """The partition of every row of ``batch`` by its key columns ``by``.

    Returns a NumPy int32 array of ids in ``[0, num_partitions)``. The same key
    always gets the same id, in any batch.
    """
    _check_parallelism(num_partitions, scheme, max_parallelism, virtual_nodes)
    cols, names = _key_columns(batch, by)
    hashes = hash_columns(cols, seed, names)
    return ids_from_hashes(hashes, num_partitions, scheme, max_parallelism, virtual_nodes, seed)


def key_group_range(index: int, num_partitions: int, max_parallelism: int = 128) -> range:
    """The key groups owned by task ``index`` of ``num_partitions`` (as Flink)."""
    _check_parallelism(num_partitions, "key_group", max_parallelism, 1)
    if not 0 <= index < num_partitions:
        raise ValueError(f"index must be in [0, {num_partitions}), got {index}")
    start = (index * max_parallelism + num_partitions - 1) // num_partitions
    end = ((index + 1) * max_parallelism - 1) // num_partitions
    return range(start, end + 1)


# ---------------------------------------------------------------- scatter

def _scatter_array(arr: pa.Array, dest: np.ndarray, perm: list) -> pa.Array:
    """Reorder one array so that row i lands at ``dest[i]``."""
    n = len(arr)
    t = arr.type
    valid = _arrow.validity(arr)
    out_valid = None
    if valid is not None:
        vbuf = np.zeros((n + 7) // 8, dtype=np.uint8)
        _core.scatter_bits(valid, arr.offset, dest, vbuf)
        out_valid = pa.py_buffer(vbuf)
    null_count = arr.null_count
    width = _arrow.fixed_width_bytes(t)
    if width in _arrow.UINT_FOR_WIDTH:
        values = _arrow.fixed_values(arr, _arrow.UINT_FOR_WIDTH[width])
        out = np.empty(n, dtype=values.dtype)
        _core.scatter_words(values, dest, out)
        return pa.Array.from_buffers(t, n, [out_valid, pa.py_buffer(out)], null_count)
    if pat.is_boolean(t):
        bits = np.zeros((n + 7) // 8, dtype=np.uint8)
        _core.scatter_bits(_arrow.bit_values(arr), arr.offset, dest, bits)
        return pa.Array.from_buffers(t, n, [out_valid, pa.py_buffer(bits)], null_count)
    if _arrow.is_binary_like(t):
        offsets, data = _arrow.binary_parts(arr)
        out_offsets = np.empty(n + 1, dtype=offsets.dtype)
        out_data = np.empty(int(offsets[-1] - offsets[0]), dtype=np.uint8)
        _core.scatter_binary(offsets, data, dest, out_offsets, out_data)
        return pa.Array.from_buffers(
            t, n, [out_valid, pa.py_buffer(out_offsets), pa.py_buffer(out_data)], null_count
        )
    # Other types (nested, decimal, dictionary): Arrow's own vectorised take.
    if not perm:
        p = np.empty(n, dtype=np.int64)
        p[dest] = np.arange(n, dtype=np.int64)
        perm.append(pa.array(p))
    return arr.take(perm[0])


def partition(batch: Batch, by: str | Sequence[str], num_partitions: int,
              scheme: str = "hash", max_parallelism: int = 128,
              virtual_nodes: int = 64, seed: int = 0) -> list[pa.RecordBatch]:
    """Split ``batch`` into ``num_partitions`` record batches by key.

    A counting sort in a ``nogil`` kernel (one pass to count, one to place),
    then one scatter per column and zero-copy slices. Row order inside each
    partition is kept; empty partitions are empty batches with the schema.
    A Table is combined into one batch first.
    """
    ids = partition_ids(batch, by, num_partitions, scheme, max_parallelism, virtual_nodes, seed)
    return scatter_by_ids(batch, ids, num_partitions)


def scatter_by_ids(batch: Batch, ids: np.ndarray, num_partitions: int) -> list[pa.RecordBatch]:
    """Split ``batch`` by precomputed partition ids (int32 in ``[0, P)``)."""
    if isinstance(batch, pa.Table):
        batch = batch.combine_chunks().to_batches()[0] if batch.num_rows else pa.RecordBatch.from_pylist([], schema=batch.schema)
    n = batch.num_rows
    if len(ids) != n:
        raise ValueError(f"{len(ids)} partition ids for {n} rows")
    bounds = np.empty(num_partitions + 1, dtype=np.int64)
    dest = np.empty(n, dtype=np.int64)
    ids = np.ascontiguousarray(ids, dtype=np.int32)
    if _core.partition_plan(ids, bounds, dest) != 0:
        raise ValueError(f"partition ids must be in [0, {num_partitions})")
    perm: list = []
    arrays = [_scatter_array(col, dest, perm) for col in batch.columns]
    whole = pa.RecordBatch.from_arrays(arrays, schema=batch.schema)
    return [whole.slice(int(bounds[p]), int(bounds[p + 1] - bounds[p])) for p in range(num_partitions)]


def moved_fraction(keys: pa.Array | pa.ChunkedArray | np.ndarray | Sequence,
                   old_num: int, new_num: int, scheme: str = "hash",
                   max_parallelism: int = 128, virtual_nodes: int = 64,
                   seed: int = 0) -> float:
    """Share of the distinct ``keys`` whose owner changes from ``old_num`` to
    ``new_num`` partitions under ``scheme``.

    Modulo hashing moves most keys (about ``1 - 1/max(old, new)`` when one
    partition is added); consistent hashing about ``|new - old| / max(old, new)``;
    key groups move whole groups, ``1/2`` when parallelism doubles.
    """
    arr = _arrow.as_array(keys, "keys")
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    distinct = arr.unique()
    if len(distinct) == 0:
        return 0.0
    hashes = hash_columns([distinct], seed)
    before = ids_from_hashes(hashes, old_num, scheme, max_parallelism, virtual_nodes, seed)
    after = ids_from_hashes(hashes, new_num, scheme, max_parallelism, virtual_nodes, seed)
    return float(np.mean(before != after))
