"""Hash partitioning: partition ids by three schemes, and a counting-sort scatter.

Schemes (``h = hash64(key columns, seed)``):

- ``"hash"``: ``h % num_partitions``;
- ``"key_group"``: Flink's scheme: ``key_group = h % max_parallelism`` and
  ``owner = key_group * num_partitions // max_parallelism``, so each task owns
  a contiguous range of key groups (``key_group_range``) and rescaling moves
  whole key groups; an explicit owner table (``owners=``, e.g. from
  ``assign_key_groups(..., how="fewest_moves")``) replaces the ranges;
- ``"consistent"``: a ring of ``virtual_nodes`` points per partition (point =
  ``XXH64(le8(partition) || le8(vnode), seed)``); a key belongs to the first
  point clockwise from its hash. Adding one partition moves about ``1/(n+1)``
  of the keys.
"""
from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Union

import numpy as np
import pyarrow as pa
import pyarrow.types as pat

from fastops._kernels import core as _core
from fastops.core import arrow as _arrow
from fastops.core.hashing import _check_seed, hash_columns

SCHEMES = ("hash", "key_group", "consistent")
_LUT_BITS = 16
MAX_KEY_GROUPS = 1 << 24    # Flink allows 32768
MAX_RING_POINTS = 1 << 26

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
    if isinstance(num_partitions, bool) or not isinstance(num_partitions, (int, np.integer)) \
            or num_partitions < 1:
        raise ValueError(f"num_partitions must be an int >= 1, got {num_partitions!r}")
    if num_partitions > 2**31 - 1:
        raise ValueError(f"num_partitions too large: {num_partitions}")
    if scheme == "key_group":
        if isinstance(max_parallelism, bool) or not isinstance(max_parallelism, (int, np.integer)) \
                or max_parallelism < 1:
            raise ValueError(f"max_parallelism must be an int >= 1, got {max_parallelism!r}")
        if num_partitions > max_parallelism:
            raise ValueError(
                f"num_partitions ({num_partitions}) must not exceed max_parallelism "
                f"({max_parallelism}) with key groups"
            )
    if scheme == "key_group" and max_parallelism > MAX_KEY_GROUPS:
        raise ValueError(f"max_parallelism must be <= {MAX_KEY_GROUPS}, got {max_parallelism}")
    if scheme == "consistent" and isinstance(virtual_nodes, (int, np.integer)) \
            and num_partitions * virtual_nodes > MAX_RING_POINTS:
        raise ValueError(
            f"a ring of num_partitions * virtual_nodes = {num_partitions * virtual_nodes} "
            f"points exceeds {MAX_RING_POINTS}")
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


@lru_cache(maxsize=64)
def _key_group_owners(num_partitions: int, max_parallelism: int) -> np.ndarray:
    """owner_of[g] = g * num_partitions // max_parallelism (Flink)."""
    groups = np.arange(max_parallelism, dtype=np.int64)
    owners = (groups * num_partitions // max_parallelism).astype(np.int32)
    owners.setflags(write=False)
    return owners


def _check_status(status: int, what: str) -> None:
    if status == -2:
        raise MemoryError(f"{what}: out of memory")
    if status != 0:
        raise ValueError(f"{what} failed with status {status}")


def _ids_and_counts(hashes: np.ndarray, num_partitions: int, scheme: str,
                    max_parallelism: int, virtual_nodes: int, seed: int,
                    with_counts: bool = True, small_ids: bool = False,
                    owners: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Partition ids (int32, or see ``_id_dtype``) and their histogram (int64,
    length P; empty without ``with_counts``) for hashes; ``owners``: the
    checked owner table of the key groups (None: Flink's contiguous one)."""
    hashes = np.ascontiguousarray(hashes, dtype=np.uint64)
    num_partitions = int(num_partitions)
    out, _ = _arrow.empty(len(hashes), _id_dtype(num_partitions, small_ids))
    counts = np.empty(num_partitions if with_counts else 0, dtype=np.int64)
    if scheme == "hash":
        status = _core.partition_modulo(hashes, num_partitions, out, counts)
    elif scheme == "key_group":
        if owners is None:
            owners = _key_group_owners(num_partitions, int(max_parallelism))
        status = _core.partition_lookup(hashes, owners, out, counts)
    else:
        points, owners, lut, shift = _ring(num_partitions, int(virtual_nodes), int(seed))
        status = _core.partition_ring(hashes, points, owners, lut, shift, out, counts)
    _check_status(status, f"{scheme!r} partition ids")
    return out, counts


def ids_from_hashes(hashes: np.ndarray, num_partitions: int, scheme: str = "hash",
                    max_parallelism: int = 128, virtual_nodes: int = 64,
                    seed: int = 0) -> np.ndarray:
    """Partition ids (int32) for precomputed 64-bit key hashes (``hash64`` values)."""
    _check_parallelism(num_partitions, scheme, max_parallelism, virtual_nodes)
    return _ids_and_counts(hashes, num_partitions, scheme, max_parallelism,
                           virtual_nodes, seed, with_counts=False)[0]


_EMPTY_OWNERS = np.zeros(0, dtype=np.int32)
_Placement = tuple[np.ndarray, np.ndarray, np.ndarray]  # (ids, starts, dest) of a scatter


def _fused_ids(cols: list, num_partitions: int, scheme: str, max_parallelism: int,
               seed: int, with_counts: bool, small_ids: bool,
               owners: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray] | None:
    """Ids and counts (``with_counts``; else no counts) in one kernel pass for
    the common key of one 4- or 8-byte column without nulls under ``"hash"`` or
    ``"key_group"`` (no hash array written); None when the key is anything else.
    ``owners`` as in ``_ids_and_counts``."""
    if len(cols) != 1 or scheme == "consistent":
        return None
    parts = _arrow.chunks(cols[0])
    if len(parts) != 1:
        return None
    arr = parts[0]
    width = _arrow.fixed_width_bytes(arr.type)
    if width not in (4, 8) or arr.null_count or len(arr) == 0:
        return None
    values = _arrow.fixed_values(arr, _arrow.UINT_FOR_WIDTH[width])
    if scheme != "key_group":
        owners = _EMPTY_OWNERS
    elif owners is None:
        owners = _key_group_owners(int(num_partitions), int(max_parallelism))
    out, _ = _arrow.empty(len(values), _id_dtype(num_partitions, small_ids))
    counts = np.empty(int(num_partitions) if with_counts else 0, dtype=np.int64)
    status = _core.partition_fixed(values, pat.is_floating(arr.type), _check_seed(seed),
                                   int(num_partitions), owners, out, counts)
    _check_status(status, f"{scheme!r} partition ids")
    return out, counts


def _prepare(batch: Batch, by, num_partitions, scheme, max_parallelism, virtual_nodes, seed,
             with_counts=True, small_ids=False, owners=None):
    """Partition ids of ``batch``'s rows and (``with_counts``) their
    histogram; ``small_ids``: as uint8 where ``num_partitions`` <= 256 (for
    the scatters, which read them once per pass); ``owners``: an explicit
    owner table of the key groups (checked here)."""
    _check_parallelism(num_partitions, scheme, max_parallelism, virtual_nodes)
    if owners is not None:
        if scheme != "key_group":
            raise ValueError(f"an owner table (owners=) needs scheme='key_group', not {scheme!r}")
        owners = _check_owners(owners, int(max_parallelism), int(num_partitions), "owners")
    cols, names = _key_columns(batch, by)
    fused = _fused_ids(cols, num_partitions, scheme, max_parallelism, seed, with_counts, small_ids,
                       owners)
    if fused is not None:
        return fused
    hashes = hash_columns(cols, seed, names)
    return _ids_and_counts(hashes, num_partitions, scheme, max_parallelism, virtual_nodes, seed,
                           with_counts, small_ids, owners)


def _id_dtype(num_partitions: int, small_ids: bool) -> type:
    """One byte per id where asked for and enough, else int32."""
    return np.uint8 if small_ids and int(num_partitions) <= 256 else np.int32


def partition_ids(batch: Batch, by: str | Sequence[str], num_partitions: int,
                  scheme: str = "hash", max_parallelism: int = 128,
                  virtual_nodes: int = 64, seed: int = 0,
                  owners: np.ndarray | None = None) -> np.ndarray:
    """The partition of every row of ``batch`` by its key columns ``by``.

    Parameters
    ----------
    batch
        A ``pyarrow.RecordBatch`` or ``pyarrow.Table``.
    by
        A key column name, or a list of names (a multi-column key).
    num_partitions
        Number of partitions ``P >= 1`` (``<= max_parallelism`` for key groups).
    scheme
        ``"hash"`` (``hash64 % P``), ``"key_group"`` (Flink: group
        ``hash64 % max_parallelism``, owner ``group * P // max_parallelism``) or
        ``"consistent"`` (a ring with ``virtual_nodes`` points per partition).
    seed
        The ``hash64`` seed of the key hash (and of the ring's points).
    owners
        ``"key_group"`` only: the owner (partition) of every key group, one int
        in ``[0, P)`` per group (``assign_key_groups`` makes one); a row goes
        to ``owners[hash64 % max_parallelism]``. None: Flink's contiguous
        ranges (``key_group_range``).

    Returns
    -------
    numpy.ndarray
        int32 ids in ``[0, P)``, one per row. The same key always gets the same
        id, in any batch.

    Raises
    ------
    KeyError
        A key column is missing.
    TypeError
        A key column has a type ``hash64`` does not support.
    ValueError
        Bad ``num_partitions``, ``max_parallelism``, ``virtual_nodes``, ``scheme``
        or ``owners`` (not ``max_parallelism`` ints in ``[0, P)``, or with
        another scheme).
    """
    return _prepare(batch, by, num_partitions, scheme, max_parallelism, virtual_nodes, seed,
                    with_counts=False, owners=owners)[0]


def key_group_range(index: int, num_partitions: int, max_parallelism: int = 128) -> range:
    """The key groups owned by task ``index`` of ``num_partitions`` (as Flink).

    Flink's ``KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex``:
    ``start = ceil(index * maxp / P)``, ``end = ceil((index + 1) * maxp / P) - 1``
    (inclusive). The ranges of ``index = 0 .. P-1`` are contiguous, disjoint and
    cover ``[0, max_parallelism)``; group ``g`` is in the range of
    ``g * P // max_parallelism``.
    """
    _check_parallelism(num_partitions, "key_group", max_parallelism, 1)
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
        raise TypeError(f"index must be an int, got {type(index).__name__}")
    if not 0 <= index < num_partitions:
        raise ValueError(f"index must be in [0, {num_partitions}), got {index}")
    index, num_partitions, max_parallelism = int(index), int(num_partitions), int(max_parallelism)
    start = (index * max_parallelism + num_partitions - 1) // num_partitions
    end = ((index + 1) * max_parallelism - 1) // num_partitions
    return range(start, end + 1)


# ---------------------------------------------------------------- scatter

def _scatter_binary(arr: pa.Array, ids: np.ndarray, starts: np.ndarray, dest: np.ndarray,
                    fill_dest: bool) -> pa.Array:
    """Reorder a binary-like array by partition id. With ``fill_dest`` the same
    pass fills ``dest`` (the placement every other column then follows);
    otherwise ``dest`` is already filled."""
    n = len(arr)
    offsets, data = _arrow.binary_parts(arr)
    out_offsets, offsets_buf = _arrow.empty(n + 1, offsets.dtype)
    out_data, data_buf = _arrow.empty(int(offsets[-1] - offsets[0]), np.uint8)
    _core.scatter_binary(offsets, data, ids, starts, out_offsets, out_data,
                         dest if fill_dest else dest[:0])
    out_valid = None
    valid = _arrow.validity(arr)
    if valid is not None:
        vbuf, out_valid = _arrow.empty((n + 7) // 8, np.uint8)
        _core.scatter_bits(valid, arr.offset, dest, vbuf)
    return pa.Array.from_buffers(arr.type, n, [out_valid, offsets_buf, data_buf],
                                 arr.null_count)


def _scatter_words(pending: dict, values: np.ndarray, out: np.ndarray, placement: _Placement) -> None:
    """``out[dest[i]] = values[i]`` (``placement``: ids, starts, dest), two
    columns of one width per pass (the placement is then read once for both):
    a column waits in ``pending`` for its partner; ``_flush_words`` does the
    ones left."""
    partner = pending.pop(values.dtype, None)
    if partner is None:
        pending[values.dtype] = (values, out)
    else:
        _core.scatter_words2(partner[0], values, *placement, partner[1], out)


def _flush_words(pending: dict, placement: _Placement) -> None:
    for values, out in pending.values():
        _core.scatter_words(values, *placement, out)
    pending.clear()


def _scatter_array(arr: pa.Array, ids: np.ndarray, dest: np.ndarray, starts: np.ndarray,
                   perm: list, pending: dict) -> pa.Array:
    """Reorder one array so that row i lands at ``dest[i]``; the values of
    fixed-width ones only once ``_flush_words(pending)`` has run."""
    n = len(arr)
    t = arr.type
    if _arrow.is_binary_like(t):
        return _scatter_binary(arr, ids, starts, dest, False)
    if _arrow.view_storage(t) is not None:  # string_view / binary_view: scattered as large_*, cast back
        return _scatter_binary(_arrow.without_views(arr), ids, starts, dest, False).cast(t)
    valid = _arrow.validity(arr)
    out_valid = None
    if valid is not None:
        vbuf, out_valid = _arrow.empty((n + 7) // 8, np.uint8)
        _core.scatter_bits(valid, arr.offset, dest, vbuf)
    null_count = arr.null_count
    width = _arrow.fixed_width_bytes(t)
    if width in _arrow.UINT_FOR_WIDTH:
        values = _arrow.fixed_values(arr, _arrow.UINT_FOR_WIDTH[width])
        out, out_buf = _arrow.empty(n, values.dtype)
        _scatter_words(pending, values, out, (ids, starts, dest))
        return pa.Array.from_buffers(t, n, [out_valid, out_buf], null_count)
    if pat.is_boolean(t):
        bits, bits_buf = _arrow.empty((n + 7) // 8, np.uint8)
        _core.scatter_bits(_arrow.bit_values(arr), arr.offset, dest, bits)
        return pa.Array.from_buffers(t, n, [out_valid, bits_buf], null_count)
    # Other types (nested, decimal, dictionary): Arrow's own vectorised take.
    if not perm:
        p = np.empty(n, dtype=np.int64)
        p[dest] = np.arange(n, dtype=np.int64)
        perm.append(pa.array(p))
    return arr.take(perm[0])


def partition(batch: Batch, by: str | Sequence[str], num_partitions: int,
              scheme: str = "hash", max_parallelism: int = 128,
              virtual_nodes: int = 64, seed: int = 0,
              owners: np.ndarray | None = None) -> list[pa.RecordBatch]:
    """Split ``batch`` into ``num_partitions`` record batches by key.

    Partition ``p`` holds the rows whose ``partition_ids(batch, by, ...)`` is
    ``p``, in their input order; empty partitions are empty batches with the
    batch's schema. Ids and their histogram come from one ``nogil`` pass over
    the key hashes; a counting sort places the rows (one pass); every column is
    scattered once into one output batch (below ``SMALL_BATCH`` rows: one
    Arrow ``take`` in the sorted row order), which is then sliced (zero copy).
    A Table is combined into one batch first. Parameters and errors as
    ``partition_ids``.
    """
    ids, counts = _prepare(batch, by, num_partitions, scheme, max_parallelism,
                           virtual_nodes, seed, small_ids=True, owners=owners)
    return _scatter(batch, ids, counts)


def scatter_by_ids(batch: Batch, ids: np.ndarray, num_partitions: int) -> list[pa.RecordBatch]:
    """Split ``batch`` by precomputed partition ids (int32 in ``[0, P)``)."""
    if isinstance(num_partitions, bool) or not isinstance(num_partitions, (int, np.integer)) \
            or num_partitions < 1:
        raise ValueError(f"num_partitions must be an int >= 1, got {num_partitions!r}")
    ids = np.ascontiguousarray(ids, dtype=np.int32)
    if ids.ndim != 1 or len(ids) != batch.num_rows:
        raise ValueError(f"{len(ids)} partition ids for {batch.num_rows} rows")
    counts = np.empty(int(num_partitions), dtype=np.int64)
    status = _core.partition_count(ids, counts)
    if status == -1:
        raise ValueError(f"partition ids must be in [0, {num_partitions})")
    _check_status(status, "partition count")
    return _scatter(batch, ids, counts)


def _as_batch(batch: Batch) -> pa.RecordBatch:
    if isinstance(batch, (pa.RecordBatch, pa.Table)):
        return _arrow.as_batch(batch)
    raise TypeError(f"batch must be a pyarrow RecordBatch or Table, got {type(batch).__name__}")


SMALL_BATCH = 2048
"""Batches of fewer rows are reordered by Arrow's ``take`` along the counting
sort's row order: below about this size its one call costs less than
scattering each column (whose fixed cost per column and per call is what
such batches pay for)."""


def _scatter(batch: Batch, ids: np.ndarray, counts: np.ndarray) -> list[pa.RecordBatch]:
    batch = _as_batch(batch)
    n = batch.num_rows
    P = len(counts)
    starts = np.zeros(P + 1, dtype=np.int64)
    if n < SMALL_BATCH and not any(_arrow.view_storage(t) for t in batch.schema.types):
        order = np.empty(n, dtype=np.int64)
        _check_status(_core.partition_dest(ids, counts, order, starts, True), "partition order")
        return _slices(batch.take(pa.array(order)), starts)
    counts.cumsum(out=starts[1:])
    columns = batch.columns
    arrays: list = [None] * len(columns)
    if any(_needs_dest(col) for col in columns):
        dest, _ = _arrow.empty(n, np.int32 if n < 2**31 else np.int64)
    else:  # every scatter places the rows from the ids itself
        dest = np.empty(0, np.int32)
    # the first binary column's scatter also places the rows (one pass less)
    first = next((i for i, col in enumerate(columns) if _arrow.is_binary_like(col.type)), None)
    if first is not None:
        arrays[first] = _scatter_binary(columns[first], ids, starts, dest, True)
    elif len(dest):
        _check_status(_core.partition_dest(ids, counts, dest, starts), "partition placement")
    perm: list = []
    pending: dict = {}
    for i, col in enumerate(columns):
        if arrays[i] is None:
            arrays[i] = _scatter_array(col, ids, dest, starts, perm, pending)
    _flush_words(pending, (ids, starts, dest))
    return _slices(pa.RecordBatch.from_arrays(arrays, schema=batch.schema), starts)


def _needs_dest(col: pa.Array) -> bool:
    """Whether scattering ``col`` reads the array of output rows: the
    scatters of binary values and of null-free fixed-width words place the
    rows from the ids themselves; validity bits, booleans and Arrow's take
    need the placement written out."""
    t = col.type
    if col.null_count > 0:
        return True
    if _arrow.is_binary_like(t) or _arrow.view_storage(t) is not None:
        return False
    return _arrow.fixed_width_bytes(t) not in _arrow.UINT_FOR_WIDTH


def _slices(whole: pa.RecordBatch, starts: np.ndarray) -> list[pa.RecordBatch]:
    """Partition p's rows ``starts[p]:starts[p+1]`` of ``whole`` (zero copy)."""
    bounds = starts.tolist()
    return [whole.slice(bounds[p], bounds[p + 1] - bounds[p]) for p in range(len(bounds) - 1)]


def moved_fraction(keys: pa.Array | pa.ChunkedArray | np.ndarray | Sequence,
                   old_num: int, new_num: int, scheme: str = "hash",
                   max_parallelism: int = 128, virtual_nodes: int = 64,
                   seed: int = 0) -> float:
    """Share of the distinct ``keys`` whose owner (task index) changes when the
    parallelism goes from ``old_num`` to ``new_num`` under ``scheme``.

    What to expect for keys with well-spread hashes (exact values for the
    group-level quantities; the key-level share deviates by sampling noise):

    - ``"hash"``: a key stays iff ``h % old == h % new``. For ``n -> n+1`` the
      residue pairs are uniform (Chinese remainder theorem), so ``1 - 1/(n+1)``
      of the keys move; for ``n -> 2n`` one half: most keys move.
    - ``"key_group"``: whole key groups move, and the share is the share of
      groups ``g`` with ``g*old//maxp != g*new//maxp``. Contiguous ranges shift
      almost everywhere, so ``n -> n+1`` moves about **one half** of the keys
      (not ``1/(n+1)``); ``n -> 2n`` (``maxp`` divisible by ``2n``) moves
      exactly ``1 - 1/(2n)``, since group g of task o goes to task 2o or 2o+1.
      Key groups make moving *state* cheap (whole groups, located by range),
      not moving few keys.
    - ``"consistent"``: only keys on the arcs taken by the new partition move,
      about ``1/(n+1)`` for ``n -> n+1`` (relative spread about
      ``1/sqrt(virtual_nodes)``); no key moves between two old partitions.

    Returns 0.0 for no keys.
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


# ---------------------------------------------------------------- key-group assignment

ASSIGNMENTS = ("contiguous", "fewest_moves")


def assign_key_groups(parallelism: int, max_parallelism: int, previous: np.ndarray | None = None,
                      how: str = "contiguous") -> np.ndarray:
    """The owner (task index) of every key group when ``parallelism`` tasks share
    ``max_parallelism`` key groups: int32, read-only, one entry per key group.

    ``"contiguous"``: Flink's ranges (``key_group_range``), whatever came before.
    ``"fewest_moves"``: from the ``previous`` owners (tasks ``0 .. P-1``, ``P =
    previous.max() + 1``), each task ends with ``N // P'`` or ``ceil(N / P')``
    key groups (``N = max_parallelism``, ``P' = parallelism``) and as few key
    groups as that balance allows change owner. Task ``i < min(P, P')`` keeps
    the lowest of its key groups up to its share; the extra group of the
    ``N % P'`` larger shares goes to the tasks that held the most (ties: lower
    index); the key groups left over (those of removed tasks, and a task's
    surplus) go, in key-group order, to the tasks short of their share, in task
    order. Without ``previous`` the result is the contiguous one.

    Bound: when ``previous`` is balanced (every task held ``N // P`` or
    ``ceil(N / P)``, as both assignments give), at most
    ``moved_bound(P, P', N) = |P' - P| * ceil(N / max(P, P'))`` key groups
    move; going up (``P' > P``) even at most ``floor(N * (P' - P) / P')``.

    Raises ValueError for a bad ``parallelism`` / ``max_parallelism`` / ``how``
    and for a ``previous`` that is not one int owner in ``[0, N)`` per key group.
    """
    _check_parallelism(parallelism, "key_group", max_parallelism, 1)
    if how not in ASSIGNMENTS:
        raise ValueError(f"unknown key-group assignment {how!r}; expected one of {ASSIGNMENTS}")
    n, tasks = int(max_parallelism), int(parallelism)
    before = None if previous is None else _check_owners(previous, n, n, "previous")
    if how == "contiguous" or before is None:
        return _key_group_owners(tasks, n)
    return _fewest_moves(before, tasks)


def moved_bound(old_parallelism: int, new_parallelism: int, max_parallelism: int) -> int:
    """The most key groups ``"fewest_moves"`` moves from a balanced assignment
    of ``old_parallelism`` tasks to ``new_parallelism``:
    ``|P' - P| * ceil(N / max(P, P'))``, and ``floor(N * (P' - P) / P')`` going up.
    (Ideal: ``N * |P' - P| / max(P, P')``, which the first exceeds by less than
    one key group per added or removed task.)"""
    p, q, n = int(old_parallelism), int(new_parallelism), int(max_parallelism)
    if q > p:
        return n * (q - p) // q
    return (p - q) * -(-n // p)


def _check_owners(owners: np.ndarray, max_parallelism: int, num_tasks: int, what: str) -> np.ndarray:
    """``owners`` as a contiguous int32 array after checking it has one int owner
    in ``[0, num_tasks)`` per key group; ValueError naming ``what`` otherwise."""
    arr = np.asarray(owners)
    if arr.ndim != 1 or len(arr) != max_parallelism:
        raise ValueError(f"{what} must hold one owner per key group: {max_parallelism} entries, "
                         f"got shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"{what} must hold int task indexes, got dtype {arr.dtype}")
    lo, hi = int(arr.min()), int(arr.max())
    if lo < 0 or hi >= num_tasks:
        raise ValueError(f"{what} must hold task indexes in [0, {num_tasks}), got values in [{lo}, {hi}]")
    return np.ascontiguousarray(arr, dtype=np.int32)


def _fewest_moves(before: np.ndarray, tasks: int) -> np.ndarray:
    """See ``assign_key_groups``: ``before`` checked, int32."""
    n = len(before)
    old_tasks = int(before.max()) + 1
    held = np.bincount(before, minlength=max(old_tasks, tasks)).astype(np.int64)
    # shares: N // P', one more for the N % P' tasks holding the most (ties: lower index)
    share = np.full(tasks, n // tasks, dtype=np.int64)
    holding = np.zeros(tasks, dtype=np.int64)
    common = min(old_tasks, tasks)
    holding[:common] = held[:common]
    share[np.lexsort((np.arange(tasks), -holding))[:n % tasks]] += 1
    # rank of each key group among its old owner's groups (0 = lowest id)
    order = np.argsort(before, kind="stable")
    first = np.concatenate(([0], np.cumsum(held)[:-1]))
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n) - first[before[order]]
    stays = before < tasks
    stays[stays] = rank[stays] < share[before[stays]]
    after = before.copy()
    short = share - np.bincount(before[stays], minlength=tasks)
    after[~stays] = np.repeat(np.arange(tasks, dtype=np.int32), short)
    after.setflags(write=False)
    return after


class KeyGroups:
    """The key groups one task owns (``owned[g]``, one flag per key group), and
    the key group of rows: ``hash64(key columns) % max_parallelism``, the same
    as the hash exchange."""

    def __init__(self, owned: np.ndarray):
        self.owned = np.ascontiguousarray(owned, dtype=bool)

    @classmethod
    def of_task(cls, owners: np.ndarray, index: int) -> KeyGroups:
        return cls(np.asarray(owners) == index)

    @property
    def max_parallelism(self) -> int:
        return len(self.owned)

    def groups_of(self, columns: Sequence) -> np.ndarray:
        """The key group (int64) of every row of the key ``columns``."""
        return (hash_columns(list(columns)) % np.uint64(self.max_parallelism)).astype(np.int64)

    def mask(self, batch: Batch, keys: Sequence[str]) -> np.ndarray:
        """Which rows of ``batch`` have their key (columns ``keys``) in an owned key group."""
        if batch.num_rows == 0:
            return np.zeros(0, dtype=bool)
        return self.owned[self.groups_of([batch.column(k) for k in keys])]

    def __repr__(self) -> str:
        return f"KeyGroups({int(self.owned.sum())} of {self.max_parallelism})"
