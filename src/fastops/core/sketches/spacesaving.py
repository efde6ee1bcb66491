"""Space-Saving heavy hitters, weighted and mergeable."""
from __future__ import annotations

import struct
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pat

from fastops._kernels import sketch as _sketch
from fastops.core import arrow as _arrow
from fastops.core import hashing
from fastops.core.sketches.common import (
    _EMPTY_I64,
    T_SS,
    _check_int,
    _check_seed,
    _check_total,
    _header,
    _held_type_ok,
    _ipc_table,
    _length,
    _plain,
    _Reader,
    _reduce,
    _sources,
    _status,
    _valid_weight,
    _weights,
)

__all__ = ["SpaceSaving"]


class SpaceSaving:
    r"""Space-Saving heavy hitters (Metwally et al. 2005), weighted, mergeable.

    ``capacity`` counters, each an (item, count, error) triple keyed by the
    item's 64-bit hash, with one representative value kept per counter. A
    batch is counted exactly (a hash table in the kernel) and combined with
    the summary as in the mergeable Space-Saving of Cafaro et al.: an item's
    count is the sum of both sides, where a side that does not monitor it
    contributes its minimum counter (0 while not full) to count and error;
    the ``capacity`` largest counts stay. A batch is taken ``_CHUNK`` rows at
    a time; each chunk's exact counts form a summary with no error (minimum
    0), so adding it is such a merge, with the summary's minimum from before
    the chunk for the items new to it, and the bounds below carry over chunk
    by chunk.

    Error bound (``W`` = total weight, weights >= 0): for every monitored
    item :math:`\mathrm{count} - \mathrm{error} \le f \le \mathrm{count}`, and
    every unmonitored item has :math:`f \le \min \mathrm{count} \le
    W/\mathrm{capacity}`; hence every item with :math:`f > W/\mathrm{capacity}`
    is in the summary. Merges keep these bounds (with ``W = W_1 + W_2``).
    Distinct values whose 64-bit hashes collide are counted together
    (probability about ``d²/2⁶⁵`` for ``d`` distinct values).

    ``capacity`` is at most ``MAX_CAPACITY = 2**20``: an update or merge
    works on capacity-sized arrays, about 160 bytes per counter (some
    160 MiB at the maximum). ``total_weight`` is an int64: an update or
    merge that would pass its range raises ``OverflowError``.

    Notes
    -----
    Binary body::

        capacity u32, size u32, seed u64, total_weight i64,
        hashes u64[size], counts i64[size], errors i64[size],
        values: u64 length + Arrow IPC stream of one column "value" (size rows)

    Examples
    --------
    >>> import numpy as np
    >>> s = SpaceSaving(10)
    >>> s.update(np.array([1] * 50 + list(range(100, 150))))
    >>> s.top(1).column("value")[0].as_py()
    1
    """

    _BODY = struct.Struct("<IIQq")
    _CHUNK = 1 << 13
    MAX_CAPACITY = 2**20

    def __init__(self, capacity: int, seed: int = 0):
        self.capacity = _check_int("capacity", capacity, 1, self.MAX_CAPACITY)
        self.seed = _check_seed(seed)
        self.total_weight = 0
        self._size = 0
        # the summary, exactly ``size`` entries (work arrays of ``capacity``
        # entries exist only during an update)
        self._hashes = np.zeros(0, dtype=np.uint64)
        self._counts = np.zeros(0, dtype=np.int64)
        self._errs = np.zeros(0, dtype=np.int64)
        self._values: pa.Array | None = None

    def _work(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Capacity-sized copies of the summary for a kernel call."""
        cap, s = self.capacity, self._size
        h = np.zeros(cap, dtype=np.uint64)
        c = np.zeros(cap, dtype=np.int64)
        e = np.zeros(cap, dtype=np.int64)
        h[:s], c[:s], e[:s] = self._hashes, self._counts, self._errs
        return h, c, e, np.arange(cap, dtype=np.int64)

    def __len__(self) -> int:
        return self._size

    @property
    def value_type(self) -> pa.DataType | None:
        return None if self._values is None else self._values.type

    def _adopt(self, reps: np.ndarray, new_values: pa.Array, new_size: int) -> None:
        """Reorder the summary so that old entries come first, then rebuild
        the representative values with two vectorised takes."""
        reps = reps[:new_size]
        old = np.flatnonzero(reps >= 0)
        new = np.flatnonzero(reps < 0)
        perm = np.concatenate([old, new])
        self._hashes = self._hashes[:new_size][perm]
        self._counts = self._counts[:new_size][perm]
        self._errs = self._errs[:new_size][perm]
        parts = []
        if len(old):
            assert self._values is not None  # old entries have values
            parts.append(self._values.take(pa.array(reps[old])))
        if len(new):
            parts.append(new_values.take(pa.array(-reps[new] - 1)))
        if parts:
            self._values = pa.concat_arrays(parts) if len(parts) > 1 else parts[0]
        elif self._values is not None:
            self._values = self._values.slice(0, 0)
        self._size = new_size

    def _value_type_check(self, t: pa.DataType) -> None:
        if self._values is not None and t != self._values.type:
            raise TypeError(f"SpaceSaving holds {self._values.type} values, got {t}")

    def update(self, values: Any, weights: Any = None) -> None:
        """Add ``weights[i]`` (default 1, must be >= 0; 0 is skipped) of every
        non-null value."""
        n = _length(values)
        w = _weights(weights, n, "SpaceSaving")
        if w is not None and len(w) and w.min() < 0:
            raise ValueError("SpaceSaving: weights must be non-negative")
        for start, cnt, src, chunk in _sources(values, self.seed):
            if src is None:
                continue
            plain = _plain(chunk)
            self._value_type_check(plain.type)
            wc = _EMPTY_I64 if w is None else np.ascontiguousarray(w[start:start + cnt])
            add = _valid_weight(chunk, cnt, None if w is None else wc)
            _check_total("SpaceSaving.update", self.total_weight, add)
            hashes, counts, errs, reps = self._work()
            size = _status(_sketch.ss_update(hashes, counts, errs, reps, self._size,
                                             self.capacity, wc, self._CHUNK, src.mode, src.a,
                                             src.b, src.valid, src.voff, src.n, self.seed),
                           "SpaceSaving.update")
            self._hashes, self._counts, self._errs = hashes, counts, errs
            if self._values is None:
                self._values = plain.slice(0, 0)
            self._adopt(reps, plain, size)
            self.total_weight += add

    def top(self, k: int | None = None) -> pa.Table:
        """The ``k`` (default: all) largest counters, largest first: a table
        with ``value``, ``count`` (upper bound) and ``lower_bound``
        (``count - error``)."""
        size = self._size
        if k is not None:
            k = _check_int("k", k, 0, 2**31 - 1)
        order = np.argsort(-self._counts, kind="stable")[: size if k is None else k]
        vals = (self._values.take(pa.array(order, type=pa.int64()))
                if self._values is not None else pa.array([], pa.null()))
        return pa.table({
            "value": vals,
            "count": pa.array(self._counts[order], pa.int64()),
            "lower_bound": pa.array(self._counts[order] - self._errs[order], pa.int64()),
        })

    def heavy_hitters(self, phi: float) -> pa.Table:
        """Every item with ``count > phi * W`` (a superset of the items with
        frequency ``> phi W`` when ``phi >= 1/capacity``)."""
        t = self.top()
        return t.filter(pc.greater(t.column("count"), phi * self.total_weight))

    @property
    def min_count(self) -> int:
        """Upper bound on the frequency of every unmonitored item."""
        if self._size < self.capacity:
            return 0
        return int(self._counts.min())

    def _check_compatible(self, other: Any) -> None:
        if not isinstance(other, SpaceSaving):
            raise TypeError(f"cannot merge SpaceSaving with {type(other).__name__}")
        if (other.capacity, other.seed) != (self.capacity, self.seed):
            raise ValueError(f"cannot merge {other!r} into {self!r}: parameters differ")
        if other._values is not None:
            self._value_type_check(other._values.type)

    def merge(self, other: SpaceSaving) -> SpaceSaving:
        """Combine in place (bounds kept, with W = W₁ + W₂); returns ``self``."""
        self._check_compatible(other)
        _check_total("SpaceSaving.merge", self.total_weight, other.total_weight)
        if other._size == 0:
            self.total_weight += other.total_weight
            return self
        hashes, counts, errs, reps = self._work()
        size = _status(_sketch.ss_merge(hashes, counts, errs, reps, self._size, self.capacity,
                                        other._hashes, other._counts, other._errs,
                                        other.min_count),
                       "SpaceSaving.merge")
        self._hashes, self._counts, self._errs = hashes, counts, errs
        values = other._values
        assert values is not None  # other has entries
        if self._values is None:
            self._values = values.slice(0, 0)
        self._adopt(reps, values, size)
        self.total_weight += other.total_weight
        return self

    def copy(self) -> SpaceSaving:
        c = SpaceSaving(self.capacity, self.seed)
        c._hashes = self._hashes.copy()
        c._counts = self._counts.copy()
        c._errs = self._errs.copy()
        c._size = self._size
        c._values = self._values
        c.total_weight = self.total_weight
        return c

    def to_bytes(self) -> bytes:
        s = self._size
        body = self._BODY.pack(self.capacity, s, self.seed, self.total_weight)
        vals = self._values if self._values is not None else pa.array([], pa.null())
        blob = _arrow.to_ipc(pa.table({"value": vals}))
        return (_header(T_SS) + body + self._hashes.tobytes() + self._counts.tobytes()
                + self._errs.tobytes() + struct.pack("<Q", len(blob)) + blob)

    @classmethod
    def from_bytes(cls, data: bytes) -> SpaceSaving:
        r = _Reader(data, T_SS)
        capacity, size, seed, total = r.unpack(cls._BODY)
        if not 1 <= capacity <= cls.MAX_CAPACITY or size > capacity or total < 0:
            r.fail(f"bad capacity {capacity} / size {size} / total weight {total}")
        hashes = r.array(np.uint64, size)
        counts = r.array(np.int64, size)
        errs = r.array(np.int64, size)
        table = _ipc_table(r.blob(), "SpaceSaving")
        r.end()
        if size and (counts.min() < 1 or errs.min() < 0 or np.any(errs > counts)):
            r.fail("counts must be >= 1 and 0 <= error <= count")
        if size and (sum(counts.tolist()) > total or len(np.unique(hashes)) != size):
            r.fail("counts exceed the total weight, or duplicate items")
        if table.num_columns != 1 or table.num_rows != size:
            r.fail("value column does not match the counters")
        vals = table.column(0).combine_chunks()
        if vals.null_count:
            r.fail("null representative values")
        if not (pat.is_null(vals.type) and size == 0) and not (
                hashing.supports(vals.type) and _held_type_ok(vals.type)):
            r.fail(f"unsupported value type {vals.type}")
        if size and not np.array_equal(hashing.hash_columns([vals], seed), hashes):
            r.fail("values do not match their hashes")
        out = cls(capacity, seed)
        out._hashes, out._counts, out._errs = hashes, counts, errs
        out._size = size
        out._values = None if pat.is_null(vals.type) else vals
        out.total_weight = total
        return out

    __reduce__ = _reduce

    def __repr__(self) -> str:
        return (f"SpaceSaving(capacity={self.capacity}, seed={self.seed}, size={self._size}, "
                f"total_weight={self.total_weight}, min_count={self.min_count})")
