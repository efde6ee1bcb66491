"""Uniform reservoir sample of rows (Algorithm L)."""
from __future__ import annotations

import struct
from typing import Any

import numpy as np
import pyarrow as pa

from fastops._kernels import sketch as _sketch
from fastops.core import arrow as _arrow
from fastops.core.sketches.common import (
    _EMPTY_U8,
    T_RESERVOIR,
    _check_int,
    _check_seed,
    _header,
    _held_type_ok,
    _ipc_table,
    _no_weights,
    _plain,
    _Reader,
    _reduce,
    _to_arrow,
)

__all__ = ["Reservoir"]


class Reservoir:
    r"""Uniform reservoir sample of rows (Li's Algorithm L), seeded.

    Keeps ``size`` rows; after ``n`` rows every ``size``-subset of them is
    equally likely: each row is in the sample with probability exactly
    :math:`\min(1, \mathrm{size}/n)`. Algorithm L draws geometric skips, so an
    update costs :math:`O(\mathrm{size}\,(1 + \log(n/\mathrm{size})))` random
    numbers in all rather than one per row. The stream of random numbers is
    splitmix64 from ``seed``: the same input in the same batches gives the
    same sample. ``update`` takes an Array / ChunkedArray / NumPy array (null
    values are skipped) or a RecordBatch / Table (every row counts). Merging
    two reservoirs draws the number of rows from each side from the exact
    hypergeometric law, so the result is a uniform sample of the union (rows
    of ``other`` are numbered after those of ``self``).

    ``size`` is at most ``MAX_SIZE = 2**22`` (an update works on size-long
    arrays, 16 bytes a row), and a reservoir counts at most ``MAX_SEEN =
    2**62`` rows: an update or merge that would pass it raises
    ``OverflowError``.

    Notes
    -----
    Binary body (flags: 0 no rows yet, 1 Array values, 2 Table rows)::

        size u64, seen u64, next i64, W f64, rng u64, filled u64,
        positions i64[filled], u64 length + Arrow IPC stream of the rows

    Examples
    --------
    >>> import numpy as np
    >>> r = Reservoir(5, seed=1)
    >>> r.update(np.arange(100))
    >>> len(r.sample())
    5
    """

    _BODY = struct.Struct("<QQqdQQ")
    MAX_SIZE = 2**22
    MAX_SEEN = 2**62

    def __init__(self, size: int, seed: int = 0):
        self.size = _check_int("size", size, 1, self.MAX_SIZE)
        self.seed = _check_seed(seed)
        self._istate = np.array([0, 0], dtype=np.int64)   # seen, next
        self._fstate = np.array([1.0], dtype=np.float64)  # W
        self._rng = np.array([self.seed], dtype=np.uint64)
        self._positions = np.zeros(0, dtype=np.int64)  # grown to ``size`` on update
        self._data: Any = None  # pa.Array or pa.Table, one row per filled slot
        self._is_table = False

    @property
    def seen(self) -> int:
        """Rows offered so far (null values of an Array not counted)."""
        return int(self._istate[0])

    def __len__(self) -> int:
        return min(self.size, self.seen)

    def _apply(self, src: np.ndarray, rows: Any, filled_before: int) -> None:
        filled = len(self)
        src = src[:filled]
        repl = np.flatnonzero(src >= 0)
        idx = np.arange(filled, dtype=np.int64)
        idx[repl] = filled_before + np.arange(len(repl))
        new = rows.take(pa.array(src[repl], pa.int64()))
        if self._data is None:
            old = new.slice(0, 0)
        else:
            old = self._data
        if self._is_table:
            both = pa.concat_tables([old, new]) if len(old) else new
        else:
            both = pa.concat_arrays([old, new]) if len(old) else new
        self._data = both.take(pa.array(idx))

    def update(self, values: Any, weights: Any = None) -> None:
        """Offer every row of the batch."""
        _no_weights(weights, "Reservoir")
        if isinstance(values, (pa.RecordBatch, pa.Table)):
            table = _arrow.without_views(pa.Table.from_batches([values])
                                         if isinstance(values, pa.RecordBatch) else values)
            if self._data is not None and not self._is_table:
                raise TypeError("this Reservoir samples Array values, got a table")
            if self._data is not None and table.schema != self._data.schema:
                raise TypeError(f"schema differs from the sampled rows: {table.schema}")
            self._is_table = True
            self._offer(table, _EMPTY_U8, 0, table.num_rows)
            return
        if self._is_table:
            raise TypeError("this Reservoir samples table rows, got an Array")
        if isinstance(values, np.ndarray):
            values = pa.array(values) if values.ndim == 1 else _to_arrow(values)
        arr = _to_arrow(values)
        for chunk in _arrow.chunks(arr):
            chunk = _plain(chunk)
            if self._data is not None and chunk.type != self._data.type:
                raise TypeError(f"Reservoir holds {self._data.type} values, got {chunk.type}")
            valid = _arrow.validity(chunk)
            if valid is None:
                self._offer(chunk, _EMPTY_U8, 0, len(chunk))
            else:
                self._offer(chunk, valid, chunk.offset, len(chunk))

    def _offer(self, rows: Any, valid: np.ndarray, voff: int, n: int) -> None:
        if n == 0:
            return
        if self.seen + n > self.MAX_SEEN:
            raise OverflowError(f"Reservoir.update: {self.seen} + {n} rows would pass "
                                "Reservoir.MAX_SEEN = 2**62")
        before = len(self)
        if len(self._positions) < self.size:
            grown = np.zeros(self.size, dtype=np.int64)
            grown[:len(self._positions)] = self._positions
            self._positions = grown
        src = np.full(self.size, -1, dtype=np.int64)
        _sketch.reservoir_update(self.size, self._fstate, self._istate, self._rng,
                                 self._positions, src, valid, voff, n)
        if (src >= 0).any() or self._data is None:
            self._apply(src, rows, before)

    def sample(self) -> Any:
        """The sampled rows (an Array, or a Table for table input)."""
        if self._data is None:
            return pa.array([], pa.null())
        return self._data

    def positions(self) -> np.ndarray:
        """Global row numbers (0-based, in offer order) of the sampled rows."""
        return self._positions[: len(self)].copy()

    def merge(self, other: Reservoir) -> Reservoir:
        """Uniform sample of the union in place; returns ``self``."""
        if not isinstance(other, Reservoir):
            raise TypeError(f"cannot merge Reservoir with {type(other).__name__}")
        if other.size != self.size:
            raise ValueError(f"cannot merge Reservoir(size={other.size}) into "
                             f"Reservoir(size={self.size})")
        if other._data is None:
            return self
        if self._data is None:
            state = self._rng[0]
            src = other.copy()
            self.__dict__.update(src.__dict__)
            self._rng = np.array([state], dtype=np.uint64)
            return self
        if self._is_table != other._is_table or (
                self._data.schema if self._is_table else self._data.type) != (
                other._data.schema if other._is_table else other._data.type):
            raise TypeError("cannot merge reservoirs of different value types")
        n1, n2 = self.seen, other.seen
        if n1 + n2 > self.MAX_SEEN:
            raise OverflowError(f"Reservoir.merge: {n1} + {n2} rows would pass "
                                "Reservoir.MAX_SEEN = 2**62")
        state, out = _sketch.splitmix_next(int(self._rng[0]))
        gen = np.random.default_rng(out)
        k = self.size
        take_total = min(k, n1 + n2)
        if n1 == 0 or n2 == 0:
            j = take_total if n2 == 0 else 0
        elif max(n1, n2) < 10**9:   # NumPy's hypergeometric takes less than 10**9
            j = int(gen.hypergeometric(n1, n2, take_total))
        else:   # the same law: how many of take_total distinct rows lie in self
            j = int(np.count_nonzero(gen.choice(n1 + n2, take_total, replace=False) < n1))
        a_idx = np.sort(gen.choice(len(self), size=j, replace=False))
        b_idx = np.sort(gen.choice(len(other), size=take_total - j, replace=False))
        pos = np.concatenate([self._positions[a_idx], other._positions[b_idx] + n1])
        if len(self._positions) < take_total:
            self._positions = np.zeros(self.size, dtype=np.int64)
        perm = gen.permutation(take_total)
        if self._is_table:
            both = pa.concat_tables([self._data.take(pa.array(a_idx, pa.int64())),
                                     other._data.take(pa.array(b_idx, pa.int64()))])
        else:
            both = pa.concat_arrays([self._data.take(pa.array(a_idx, pa.int64())),
                                     other._data.take(pa.array(b_idx, pa.int64()))])
        self._data = both.take(pa.array(perm, pa.int64()))
        self._positions[:take_total] = pos[perm]
        seen = n1 + n2
        self._istate[0] = seen
        if seen >= k:
            w = float(gen.beta(k, seen - k + 1))
            w = min(max(w, 1e-300), 1.0 - 1e-16)
            nxt, state2 = _sketch.reservoir_skip(k, w, state, seen)
            self._fstate[0] = w
            self._istate[1] = nxt
            state = state2
        self._rng[0] = state
        return self

    def copy(self) -> Reservoir:
        c = Reservoir(self.size, self.seed)
        c._istate[:] = self._istate
        c._fstate[:] = self._fstate
        c._rng[:] = self._rng
        c._positions = self._positions.copy()
        c._data = self._data
        c._is_table = self._is_table
        return c

    def to_bytes(self) -> bytes:
        filled = len(self)
        flags = 0 if self._data is None else (2 if self._is_table else 1)
        body = self._BODY.pack(self.size, self.seen, int(self._istate[1]),
                               float(self._fstate[0]), int(self._rng[0]), filled)
        if self._data is None:
            blob = b""
        elif self._is_table:
            blob = _arrow.to_ipc(self._data)
        else:
            blob = _arrow.to_ipc(pa.table({"value": self._data}))
        return (_header(T_RESERVOIR, flags) + body + self._positions[:filled].tobytes()
                + struct.pack("<Q", len(blob)) + blob)

    @classmethod
    def from_bytes(cls, data: bytes) -> Reservoir:
        r = _Reader(data, T_RESERVOIR)
        size, seen, nxt, w, rng, filled = r.unpack(cls._BODY)
        if r.flags > 2 or not 1 <= size <= cls.MAX_SIZE or filled != min(size, seen):
            r.fail(f"bad size {size} / seen {seen} / filled {filled} / flags {r.flags}")
        if seen > cls.MAX_SEEN or not (0.0 < w <= 1.0) or (seen >= size and nxt < seen):
            r.fail("bad sampler state")
        positions = r.array(np.int64, filled)
        blob = r.blob()
        r.end()
        if filled and (positions.min() < 0 or positions.max() >= seen
                       or len(np.unique(positions)) != filled):
            r.fail("bad row positions")
        out = cls(size)
        out.seed = 0
        out._istate[:] = [seen, nxt]
        out._fstate[0] = w
        out._rng[0] = rng
        out._positions = positions
        if r.flags == 0:
            if filled or blob:
                r.fail("rows present although flagged empty")
            return out
        table = _ipc_table(blob, "Reservoir")
        if table.num_rows != filled:
            r.fail("row count does not match")
        if r.flags == 1:
            if table.num_columns != 1 or not _held_type_ok(table.schema.types[0]):
                r.fail("expected one value column (not a dictionary or view)")
            out._data = table.column(0).combine_chunks()
        else:
            if any(_arrow.view_storage(t) is not None for t in table.schema.types):
                r.fail("view columns in the sampled rows")
            out._data = table.combine_chunks()
            out._is_table = True
        return out

    __reduce__ = _reduce

    def __repr__(self) -> str:
        return f"Reservoir(size={self.size}, seen={self.seen}, sampled={len(self)})"
