"""``KeyTable``: exact grouping of rows by one or more key columns.

``lookup_or_insert(columns)`` gives every row a dense int64 group id (0, 1, 2,
... in order of first appearance). The XXH64 row hash of
:func:`fastops.core.hashing.hash_columns` picks the bucket; the stored key values
decide equality: fixed-width values by their bits (floats normalised as the
hash does: ``-0.0 == 0.0`` and every NaN equal to every NaN), strings and
binary by bytes; a null equals only a null, so nulls form one group per
column position as in SQL ``GROUP BY``.

``keys(ids)`` rebuilds the key columns of given groups with their original
Arrow types (a float ``-0.0`` key comes back as ``0.0``, a NaN as the
canonical NaN). Each group keeps its 64-bit hash (``group_hashes``) so keyed
state can later be split by key group. ``snapshot()`` / ``restore()`` round
trip through Arrow arrays; ids are preserved.

Supported key types: signed/unsigned integers, float32/64, bool,
string/binary (and large and view variants), timestamp, date, time, duration;
dictionary arrays are decoded to their value type.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Optional, Union

import numpy as np
import pyarrow as pa
import pyarrow.types as pat

from fastops._kernels import keys as _keys
from fastops._kernels.keys import KeyKind
from fastops.core import arrow as _arrow
from fastops.core.hashing import hash_columns

__all__ = ["KeyTable"]

_NO_NAMES: tuple = ()


def _key_kind(t: pa.DataType) -> KeyKind | None:
    if _arrow.is_binary_like(t):
        return KeyKind.VARIABLE
    if pat.is_boolean(t) or pat.is_integer(t) or pat.is_floating(t) or pat.is_temporal(t):
        if pat.is_floating(t) and t.bit_width == 16:
            return None
        return KeyKind.FIXED
    return None


def _unpack(bitmap: np.ndarray, offset: int, n: int) -> np.ndarray:
    return np.unpackbits(bitmap, bitorder="little", count=offset + n)[offset:]


def _null_mask(arr: pa.Array) -> np.ndarray | None:
    valid = _arrow.validity(arr)
    if valid is None:
        return None
    return np.ascontiguousarray(1 - _unpack(valid, arr.offset, len(arr)))


def _fixed_u64(arr: pa.Array) -> np.ndarray:
    """A fixed-width column's values as normalised uint64 (see module docs)."""
    t = arr.type
    n = len(arr)
    if pat.is_boolean(t):
        return _unpack(_arrow.bit_values(arr), arr.offset, n).astype(np.uint64)
    if pat.is_floating(t):
        out = np.empty(n, dtype=np.uint64)
        if t.bit_width == 64:
            _keys.normalize_f64(np.ascontiguousarray(_arrow.fixed_values(arr, np.uint64)), out)
        else:
            _keys.normalize_f32(np.ascontiguousarray(_arrow.fixed_values(arr, np.uint32)), out)
        return out
    width = t.bit_width // 8
    signed = pat.is_signed_integer(t) or not pat.is_unsigned_integer(t)
    if width == 8:
        return np.ascontiguousarray(_arrow.fixed_values(arr, np.uint64))
    dtype = np.dtype(f"int{width * 8}") if signed else np.dtype(f"uint{width * 8}")
    vals = _arrow.fixed_values(arr, dtype)
    return vals.astype(np.int64 if signed else np.uint64).view(np.uint64)


# a key column as the kernel takes it (as in its stub): (uint64 values, nulls) or (offsets, data, nulls)
_Spec = Union[tuple[np.ndarray, Optional[np.ndarray]], tuple[np.ndarray, np.ndarray, Optional[np.ndarray]]]


def _storage_dtype(t: pa.DataType) -> np.dtype:
    width = t.bit_width // 8
    if pat.is_floating(t):
        return np.dtype(f"uint{width * 8}")  # bits, reinterpreted by from_buffers
    if pat.is_unsigned_integer(t):
        return np.dtype(f"uint{width * 8}")
    return np.dtype(f"int{width * 8}")


class KeyTable:
    """Dense ids for the distinct rows of key columns (see module docs).

    Parameters
    ----------
    names
        Key column names (used in error messages and by ``keys_batch``);
        may be empty: then every row is group 0.
    types
        Optional Arrow types to fix up front; otherwise the first call fixes
        them, and a later call with other types raises ``TypeError``.
    seed
        Seed of the row hash (0, as the partitioner uses).
    """

    def __init__(self, names: Sequence[str] = _NO_NAMES,
                 types: Sequence[pa.DataType] | None = None, seed: int = 0):
        self.names = [str(n) for n in names]
        self.seed = int(seed)
        self.types: list[pa.DataType] | None = None
        self._index: _keys.KeyIndex | None = None
        self._word_key = False
        self._ngroups_nokey = 0
        if types is not None:
            self._set_types(list(types))

    # ------------------------------------------------------------ helpers
    def _label(self, i: int) -> str:
        return repr(self.names[i]) if i < len(self.names) else str(i)

    def _set_types(self, types: list[pa.DataType]) -> None:
        if len(types) != len(self.names):
            raise ValueError(f"expected {len(self.names)} key types, got {len(types)}")
        kinds = []
        for i, t in enumerate(types):
            if pat.is_dictionary(t):
                t = t.value_type
                types[i] = t
            k = _key_kind(_arrow.view_storage(t) or t)
            if k is None:
                raise TypeError(f"key column {self._label(i)} has unsupported type {t} "
                                "(supported: integers, floats, bool, string/binary, temporal)")
            kinds.append(k)
        self.types = types
        self._index = _keys.KeyIndex(kinds) if kinds else None
        # one key of 8-byte integers (or temporal storage): rows without nulls
        # go straight to the kernel, which also hashes them
        t = types[0] if len(types) == 1 else None
        self._word_key = t is not None and not pat.is_floating(t) and _arrow.fixed_width_bytes(t) == 8

    def _prepare(self, columns: Sequence) -> list[pa.Array]:
        if len(columns) != len(self.names):
            raise ValueError(f"expected {len(self.names)} key columns ({self.names}), got {len(columns)}")
        arrs = []
        n = None
        for i, col in enumerate(columns):
            arr = _arrow.as_array(col, f"key column {self._label(i)}")
            if isinstance(arr, pa.ChunkedArray):
                arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
            if pat.is_dictionary(arr.type):
                arr = arr.dictionary_decode()
            if n is None:
                n = len(arr)
            elif len(arr) != n:
                raise ValueError(f"key column {self._label(i)} has {len(arr)} rows, expected {n}")
            arrs.append(arr)
        types = self.types
        if types is None:
            types = [a.type for a in arrs]
            self._set_types(types)  # sets self.types to this list (dictionaries decoded)
        for i, arr in enumerate(arrs):
            if arr.type != types[i]:
                raise TypeError(f"key column {self._label(i)} has type {arr.type}, but earlier "
                                f"batches had {types[i]}")
            arrs[i] = _arrow.without_views(arr)  # views: the same bytes, as offsets + data
        return arrs

    # ------------------------------------------------------------ API
    @property
    def num_groups(self) -> int:
        if self._index is None:
            return self._ngroups_nokey
        return self._index.num_groups

    def __len__(self) -> int:
        return self.num_groups

    def lookup_or_insert(self, columns: Sequence, hashes: np.ndarray | None = None) -> np.ndarray:
        """Group id (int64) of every row of ``columns``; new keys get new ids.

        ``hashes`` may pass precomputed ``hash_columns(columns, seed)`` values.
        """
        if not self.names:
            if columns:
                raise ValueError(f"this KeyTable has no key columns, got {len(columns)}")
            raise ValueError("a KeyTable without key columns needs lookup_n(num_rows)")
        index, types = self._index, self.types
        if hashes is None and self._word_key and len(columns) == 1 and index is not None and types is not None:
            arr = columns[0]
            if isinstance(arr, pa.Array) and arr.null_count == 0 and arr.type == types[0]:
                out = np.empty(len(arr), dtype=np.int64)
                index.lookup_or_insert_words(_arrow.fixed_values(arr, np.uint64), self.seed, out)
                return out
        arrs = self._prepare(columns)
        n = len(arrs[0])
        if hashes is None:
            hashes = hash_columns(arrs, self.seed, self.names)
        elif len(hashes) != n or hashes.dtype != np.uint64:
            raise ValueError("hashes must be a uint64 array with one entry per row")
        specs: list[_Spec] = []
        for arr in arrs:
            nulls = _null_mask(arr)
            if _arrow.is_binary_like(arr.type):
                offsets, data = _arrow.binary_parts(arr)
                offsets = np.ascontiguousarray(offsets, dtype=np.int64)
                if len(data) == 0:
                    data = np.zeros(1, dtype=np.uint8)
                specs.append((offsets, data, nulls))
            else:
                specs.append((_fixed_u64(arr), nulls))
        out = np.empty(n, dtype=np.int64)
        index = self._index
        assert index is not None  # made with the key types, which _prepare fixed
        index.lookup_or_insert(np.ascontiguousarray(hashes), specs, out)
        return out

    def lookup_n(self, n: int) -> np.ndarray:
        """Without key columns: ``n`` rows, all in group 0."""
        if self.names:
            raise ValueError("lookup_n is only for a KeyTable without key columns")
        if n:
            self._ngroups_nokey = 1
        return np.zeros(n, dtype=np.int64)

    def group_hashes(self, ids: np.ndarray | None = None) -> np.ndarray:
        """The 64-bit row hash of each group (all groups if ``ids`` is None)."""
        ids = self._ids(ids)
        if self._index is None:
            return np.zeros(len(ids), dtype=np.uint64)
        out = np.empty(len(ids), dtype=np.uint64)
        if self._index.group_hashes(ids, out) < 0:
            raise self._bad_id(ids)
        return out

    def _ids(self, ids: np.ndarray | None) -> np.ndarray:
        """``ids`` as contiguous int64 (every group for None); the kernels check the range."""
        if ids is None:
            return np.arange(self.num_groups, dtype=np.int64)
        return np.ascontiguousarray(ids, dtype=np.int64)

    def _bad_id(self, ids: np.ndarray) -> KeyError:
        bad = ids[(ids < 0) | (ids >= self.num_groups)][0]
        return KeyError(f"group id {int(bad)} out of range (0..{self.num_groups - 1})")

    def keys(self, ids: np.ndarray | None = None) -> list[pa.Array]:
        """The key columns of groups ``ids`` (all groups if None), original types."""
        ids = self._ids(ids)
        if self._index is None or self.types is None:
            if len(ids) and (ids.min() < 0 or ids.max() >= self.num_groups):
                raise self._bad_id(ids)
            return []
        n = len(ids)
        out = []
        for c, t in enumerate(self.types):
            nulls = np.empty(n, dtype=np.uint8)
            view, t = t, _arrow.view_storage(t) or t  # views are built as large_*, then cast
            if _arrow.is_binary_like(t):
                offsets = np.empty(n + 1, dtype=np.int64)
                total = self._index.binary_sizes(c, ids, offsets, nulls)
                if total < 0:
                    raise self._bad_id(ids)
                data = np.empty(max(total, 1), dtype=np.uint8)
                self._index.binary_fill(c, ids, offsets, data)
                arr = _arrow.binary_array(t, offsets, data, nulls == 0, f"key column {self._label(c)}")
            else:
                vals = _arrow.empty(n, np.uint64)[0]  # pool memory: it becomes the column
                nnull = self._index.gather_fixed(c, ids, vals, nulls)
                if nnull < 0:
                    raise self._bad_id(ids)
                if pat.is_boolean(t):
                    values = np.packbits(vals.astype(np.uint8), bitorder="little")
                else:
                    sd = _storage_dtype(t)
                    values = vals.astype(sd) if sd.itemsize < 8 else vals.view(sd)
                validity, nnull = _arrow.bitmap(nulls == 0) if nnull else (None, 0)
                arr = pa.Array.from_buffers(t, n, [validity, pa.py_buffer(values)], null_count=nnull)
            out.append(arr if view == t else arr.cast(view))
        return out

    def keys_batch(self, ids: np.ndarray | None = None) -> pa.RecordBatch:
        """``keys(ids)`` as a RecordBatch named by the key columns."""
        cols = self.keys(ids)
        if not cols:
            return pa.RecordBatch.from_arrays([], schema=pa.schema([]))
        return pa.RecordBatch.from_arrays(cols, names=self.names)

    def nbytes(self) -> int:
        return 0 if self._index is None else self._index.nbytes()

    # ------------------------------------------------------------ state
    def snapshot(self) -> pa.RecordBatch:
        """All keys in id order as a RecordBatch (schema metadata: names, seed, group count)."""
        meta = {b"fastops.core.keys.seed": str(self.seed).encode(),
                b"fastops.core.keys.ngroups": str(self.num_groups).encode(),
                b"fastops.core.keys.typed": b"1" if self.types is not None else b"0"}
        if self.types is None:
            schema = pa.schema([pa.field(n, pa.null()) for n in self.names], metadata=meta)
            return pa.RecordBatch.from_arrays([pa.nulls(0)] * len(self.names), schema=schema)
        cols = self.keys()
        schema = pa.schema([pa.field(n, t) for n, t in zip(self.names, self.types)], metadata=meta)
        return pa.RecordBatch.from_arrays(cols, schema=schema)

    @classmethod
    def restore(cls, batch: pa.RecordBatch) -> KeyTable:
        """A KeyTable equal to the one ``snapshot`` was taken from (same ids)."""
        meta = batch.schema.metadata or {}
        seed = int(meta.get(b"fastops.core.keys.seed", b"0"))
        ngroups = int(meta.get(b"fastops.core.keys.ngroups", b"0"))
        typed = meta.get(b"fastops.core.keys.typed", b"1") == b"1"
        names = batch.schema.names
        table = cls(names, types=list(batch.schema.types) if typed and names else None, seed=seed)
        if not names:
            table._ngroups_nokey = ngroups
            return table
        if batch.num_rows:
            ids = table.lookup_or_insert(batch.columns)
            if not np.array_equal(ids, np.arange(batch.num_rows)):
                raise ValueError("key snapshot holds duplicate keys")
        return table
