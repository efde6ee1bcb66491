"""The state of a streaming join, probed without rescanning what is held.

A regular join holds every row of both inputs for ever, so a new batch must
find its matches in time that depends on the batch and its matches, not on
the rows held. Three pieces:

- :class:`JoinKeys`: the key columns of a row -> a dense key id (one id space
  for both inputs, exact equality by :class:`~fastops.core.keys.KeyTable`); a row
  with a null in any key column gets ``-1`` and matches nothing, as in SQL.
- :class:`~fastops._kernels.keys.KeyChains`: key id -> held row numbers, a chain per
  key as in a hash join's build side (compiled): adding a batch costs the
  batch, a probe its keys plus its matches.
- :class:`HeldRows`: the rows themselves: columns of 1- to 8-byte values in
  growable NumPy arrays (taking ``k`` rows is one gather), the others as Arrow
  batches concatenated geometrically (a chunk is merged into the one before
  it while that one is not bigger), so there are ``O(log n)`` chunks,
  appending is amortised ``O(batch log n)`` and taking ``k`` rows costs
  ``O(k)`` plus one slice per chunk.

:class:`JoinSide` puts them together with per-row match counts and event
times for one input. Rows expire (interval joins) through a
:class:`TimeQueue` (sorted runs of (time, row) with a cursor each, so an
expiry does not scan the rows held); an expired row stays in place with a
liveness flag, and the side is compacted (rebuilt from its live rows) once
the expired rows outnumber the live ones, which costs amortised ``O(log n)``
per expired row. ``touched`` counts the index entries, rows and
keys each piece has read or moved, so tests can check the work per batch.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pat

from fastops._kernels.keys import KeyChains
from fastops.core.arrow import UINT_FOR_WIDTH, as_batch, bitmap, fixed_values, fixed_width_bytes, grown
from fastops.core.keys import KeyTable

__all__ = ["HeldRows", "JoinKeys", "JoinSide", "TimeQueue"]

_EMPTY = np.zeros(0, np.int64)


def _merge_runs(runs: list, size, merge) -> int:
    """Merge the last of ``runs`` into the one before while that one is not
    bigger, so sizes at least double from last to first (``O(log n)`` runs,
    each entry moved ``O(log n)`` times in all); returns the entries moved."""
    moved = 0
    while len(runs) > 1 and size(runs[-2]) <= size(runs[-1]):
        runs[-2:] = [merge(runs[-2], runs[-1])]
        moved += size(runs[-1])
    return moved


def _merge_sorted(k1: np.ndarray, r1: np.ndarray, k2: np.ndarray, r2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two runs sorted by key (the first's entries first among equal keys) as one."""
    k, r = np.concatenate([k1, k2]), np.concatenate([r1, r2])
    order = np.argsort(k, kind="stable")  # two sorted runs: a linear merge
    return k[order], r[order]


def _key_storage(t: pa.DataType) -> pa.DataType:
    """The type a key column is grouped in: its own, or one the key table
    takes with the same equality (a decimal's text is exact for one decimal
    type)."""
    if pat.is_decimal(t):
        return pa.string()
    if pat.is_fixed_size_binary(t):
        return pa.binary()
    if pat.is_floating(t) and t.bit_width == 16:
        return pa.float32()
    return t


class JoinKeys:
    """Dense key ids for the rows of both join inputs (see module docs).

    Parameters
    ----------
    types
        The type each key column (at least one) is compared in (both
        inputs cast to it; a dictionary type counts as its value type). A
        ``null``-typed key matches nothing.
    names
        How to name each key in error messages (e.g. ``"k = k2"``).
    """

    def __init__(self, types: Sequence[pa.DataType], names: Sequence[str] | None = None):
        self.types = [t.value_type if pat.is_dictionary(t) else t for t in types]
        self.names = [f"key{i}" for i in range(len(self.types))] if names is None else list(names)
        self.never = any(pat.is_null(t) for t in self.types)
        self._storage = [_key_storage(t) for t in self.types]
        self.table = self._new_table()
        self.touched = 0

    def _new_table(self) -> KeyTable | None:
        if self.never:
            return None
        return KeyTable(self.names, types=self._storage)

    @property
    def num_ids(self) -> int:
        return 0 if self.table is None else self.table.num_groups

    def ids(self, columns: Sequence[pa.Array | pa.ChunkedArray]) -> np.ndarray:
        """Key id (int64) of every row of ``columns``; ``-1`` where a key is null."""
        if len(columns) != len(self.types):
            raise ValueError(f"expected {len(self.types)} key columns, got {len(columns)}")
        n = len(columns[0])
        self.touched += n
        table = self.table
        if table is None:  # a null-typed key: nothing matches
            return np.full(n, -1, np.int64)
        cols = []
        valid = None
        for c, t, s in zip(columns, self.types, self._storage):
            if c.type != t:
                c = c.cast(t)
            if c.type != s:
                c = c.cast(s)
            if c.null_count:
                v = c.is_valid()
                valid = v if valid is None else pc.and_(valid, v)
            cols.append(c)
        if valid is None:
            return table.lookup_or_insert(cols)
        sel = np.flatnonzero(valid.to_numpy(zero_copy_only=False))
        out = np.full(n, -1, np.int64)
        if len(sel):
            at = pa.array(sel)
            out[sel] = table.lookup_or_insert([c.take(at) for c in cols])
        return out

    def shrink(self, in_use: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Start a new id space holding only the keys of ``in_use`` (arrays of
        ids); returns those arrays in new ids. Frees the keys no held row has."""
        if self.table is None:
            return [a.copy() for a in in_use]
        old = self.table
        used = np.unique(np.concatenate([a[a >= 0] for a in in_use] + [_EMPTY]))
        self.table = table = KeyTable(self.names, types=self._storage)
        lut = np.full(old.num_groups + 1, -1, np.int64)  # lut[-1] (the last slot) keeps -1
        if len(used):
            lut[used] = table.lookup_or_insert(old.keys(used))
        self.touched += len(used) + sum(len(a) for a in in_use)
        return [lut[a] for a in in_use]


class HeldRows:
    """Rows appended in batches (see module docs). Columns of 1- to 8-byte
    values (numbers, dates, times) are kept in growable NumPy arrays, so
    taking rows of them is one gather; the others (strings, booleans,
    nested, ...) as ``O(log n)`` Arrow chunks."""

    def __init__(self) -> None:
        self.schema: pa.Schema | None = None  # of the first batch appended
        self.chunks: list[pa.RecordBatch] = []  # the columns not kept as words
        self.num_rows = 0
        self.touched = 0
        self._words: dict[str, tuple[_Column, _Column | None]] = {}  # name -> (values, validity)
        self._other: list[str] = []

    @property
    def _schema(self) -> pa.Schema:
        """The schema of the rows held: read only once a batch was appended."""
        assert self.schema is not None, "no batch appended yet"
        return self.schema

    def append(self, batch: pa.RecordBatch) -> None:
        n = batch.num_rows
        if n == 0:
            return
        if self.schema is None:
            self.schema = batch.schema
            for f in batch.schema:
                width = fixed_width_bytes(f.type)
                if width in UINT_FOR_WIDTH:
                    self._words[f.name] = (_Column(UINT_FOR_WIDTH[width]), None)
                else:
                    self._other.append(f.name)
        elif batch.schema != self.schema:
            batch = batch.select(self.schema.names).cast(self.schema)
        for name, (vals, valid) in self._words.items():
            col = batch.column(name)
            values = fixed_values(col, vals.buf.dtype)
            vals.extend(values if len(values) == n else np.zeros(n, vals.buf.dtype))  # no buffer: all null
            if col.null_count and valid is None:  # the first nulls: every row before was valid
                valid = _Column(bool)
                valid.extend(np.ones(self.num_rows, bool))
                self._words[name] = (vals, valid)
            if valid is not None:
                valid.extend(col.is_valid().to_numpy(zero_copy_only=False))
        self.num_rows += n
        self.touched += n
        if self._other:
            self.chunks.append(batch.select(self._other))
            self.touched += _merge_runs(self.chunks, lambda c: c.num_rows,
                                        lambda a, b: pa.concat_batches([a, b]))

    def _word_array(self, name: str, data: np.ndarray, present: np.ndarray | None) -> pa.Array:
        """Column ``name`` (kept as words) of values ``data``, null where
        ``present`` (None: all present) is False."""
        validity, nulls = bitmap(present)
        return pa.Array.from_buffers(self._schema.field(name).type, len(data), [validity, pa.py_buffer(data)],
                                     null_count=nulls)

    def _word_column(self, name: str, idx: np.ndarray, ok: np.ndarray) -> pa.Array:
        """Column ``name`` (kept as words) at ``idx``; null where ``ok`` is False
        or the value is null."""
        vals, valid = self._words[name]
        at = np.where(ok, idx, 0) if self.num_rows else idx
        data = vals.values[at] if self.num_rows else np.zeros(len(idx), vals.buf.dtype)
        return self._word_array(name, data, ok if valid is None else ok & valid.values[at])

    def _take_chunks(self, idx: np.ndarray, names: list[str], valid: np.ndarray) -> list[pa.Array]:
        """Columns ``names`` (kept as chunks) at ``idx``: one take per chunk,
        then one to put the rows in order."""
        self.touched += len(self.chunks)
        if len(self.chunks) == 1:
            pos = idx
            taken = self.chunks[0].select(names)
        else:
            starts = np.cumsum([0] + [c.num_rows for c in self.chunks])
            chunk = np.searchsorted(starts, idx, "right") - 1  # -1 for null indices
            pieces, selected = [], []
            for c in range(len(self.chunks)):
                sel = np.flatnonzero(chunk == c)
                if len(sel):
                    pieces.append(self.chunks[c].select(names).take(pa.array(idx[sel] - starts[c])))
                    selected.append(sel)
            order = np.concatenate(selected) if selected else _EMPTY
            pos = np.full(len(idx), -1, np.int64)
            pos[order] = np.arange(len(order), dtype=np.int64)
            taken = pa.concat_batches(pieces) if pieces else self.chunks[0].select(names).slice(0, 0)
            if len(pieces) == 1 and valid.all() and np.array_equal(pos, np.arange(len(idx))):
                return list(taken.columns)
        indices = pa.array(pos, mask=~valid) if not valid.all() else pa.array(pos)
        return list(taken.take(indices).columns)

    def take(self, idx: np.ndarray, names: Sequence[str] | None = None) -> list[pa.Array]:
        """Columns ``names`` (all if None) at rows ``idx``; index -1 gives null."""
        names = list(self._schema.names) if names is None else list(names)
        valid = idx >= 0
        self.touched += len(idx)
        other = [n for n in names if n not in self._words]
        taken = dict(zip(other, self._take_chunks(idx, other, valid))) if other else {}
        return [taken[n] if n in taken else self._word_column(n, idx, valid) for n in names]

    def keep(self, idx: np.ndarray) -> None:
        """Keep only rows ``idx`` (increasing), renumbered from 0, as one chunk."""
        self.touched += self.num_rows
        table = self.to_table()
        self.chunks, self.num_rows = [], 0
        for vals, valid in self._words.values():
            vals.reset(_EMPTY.astype(vals.buf.dtype))
            if valid is not None:
                valid.reset(np.zeros(0, bool))
        if len(idx):
            assert table is not None, "rows kept of a HeldRows never appended to"
            self.append(as_batch(table.take(pa.array(idx))))

    def _held_words(self, name: str) -> pa.Array:
        """Column ``name`` (kept as words) of every row held, not copied."""
        vals, valid = self._words[name]
        return self._word_array(name, vals.values, None if valid is None else valid.values)

    def to_table(self) -> pa.Table | None:
        if self.schema is None:
            return None
        chunks = pa.Table.from_batches(self.chunks, schema=pa.schema([self.schema.field(n) for n in self._other]))
        columns = [chunks.column(n) if n not in self._words else self._held_words(n) for n in self.schema.names]
        return pa.Table.from_arrays(columns, schema=self.schema)


class TimeQueue:
    """Row numbers by event time, popped as the watermark passes them.

    Sorted runs (time, row) merged geometrically as the chunks of :class:`HeldRows`;
    each run has a cursor below which its rows were popped (watermarks only
    grow), so a pop costs ``O(runs log n + rows popped)``, not a scan of the
    rows held.
    """

    def __init__(self) -> None:
        self.runs: list[list] = []  # [sorted times, row numbers, cursor]
        self.touched = 0

    def add(self, times: np.ndarray, rows: np.ndarray) -> None:
        if len(times) == 0:
            return
        order = np.argsort(times, kind="stable")
        self.runs.append([times[order], rows[order], 0])
        # a run's entries below its cursor were popped: only the rest counts and moves
        self.touched += len(times) + _merge_runs(
            self.runs, lambda run: len(run[0]) - run[2],
            lambda a, b: [*_merge_sorted(a[0][a[2]:], a[1][a[2]:], b[0][b[2]:], b[1][b[2]:]), 0])

    def pop(self, upto: int) -> np.ndarray:
        """The rows with time ``<= upto`` not popped before, in increasing row number."""
        out = []
        for run in self.runs:
            end = int(np.searchsorted(run[0], upto, "right"))
            self.touched += 1 + max(end - run[2], 0)
            if end > run[2]:
                out.append(run[1][run[2]:end])
                run[2] = end
        self.runs = [run for run in self.runs if run[2] < len(run[0])]
        return np.sort(np.concatenate(out)) if out else _EMPTY

    def clear(self) -> None:
        self.runs = []


class _Column:
    """A growable NumPy array (capacity doubles)."""

    def __init__(self, dtype) -> None:
        self.buf = np.zeros(16, dtype)
        self.n = 0

    @property
    def values(self) -> np.ndarray:
        return self.buf[:self.n]

    def extend(self, a: np.ndarray) -> None:
        need = self.n + len(a)
        self.buf = grown(self.buf, need)
        self.buf[self.n:need] = a
        self.n = need

    def reset(self, a: np.ndarray) -> None:
        self.buf = np.zeros(max(16, len(a)), self.buf.dtype)
        self.n = 0
        self.extend(a)


class JoinSide:
    """The held rows of one join input (see module docs): the rows, and per
    row its key id, its number of matches so far, its event time, and whether
    it is live; an index from key id to live rows."""

    def __init__(self) -> None:
        self.rows = HeldRows()
        self.ids = _Column(np.int64)
        self.matched = _Column(np.int64)
        self.ts = _Column(np.int64)
        self.alive = _Column(bool)
        self.index = KeyChains(grow=grown)
        self.expiry = TimeQueue()  # rows added with a time, by time
        self.timed = False  # rows come with times (interval joins)
        self.live = 0

    @property
    def touched(self) -> int:
        return self.rows.touched + self.index.touched + self.expiry.touched

    @property
    def num_rows(self) -> int:
        """Rows stored, expired ones included (row numbers run below this)."""
        return self.ids.n

    def add(self, batch: pa.RecordBatch, ids: np.ndarray, matched: np.ndarray,
            ts: np.ndarray | None = None) -> None:
        """Hold the rows of ``batch`` with key ids ``ids`` and match counts ``matched``."""
        n = batch.num_rows
        if n == 0:
            return
        start = self.num_rows
        self.rows.append(batch)
        self.ids.extend(ids)
        self.matched.extend(matched)
        self.ts.extend(np.zeros(n, np.int64) if ts is None else ts)
        self.alive.extend(np.ones(n, bool))
        self.index.add(np.ascontiguousarray(ids, dtype=np.int64), start)
        if ts is not None:
            self.timed = True
            self.expiry.add(ts, np.arange(start, start + n, dtype=np.int64))
        self.live += n

    def find(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(query index, row number) of every live row under ``ids[i]``, by query then row."""
        q, r = self.index.find(np.ascontiguousarray(ids, dtype=np.int64))
        if self.live < self.num_rows and len(r):
            ok = self.alive.values[r]
            q, r = q[ok], r[ok]
        return q, r

    def count_matches(self, rows: np.ndarray) -> None:
        """One more match for each entry of ``rows`` (repeats count again)."""
        np.add.at(self.matched.buf, rows, 1)

    def expire(self, upto: int) -> np.ndarray:
        """Retire the live rows with time ``<= upto`` (kept stored until
        compaction); returns them, in increasing row number."""
        rows = self.expiry.pop(upto)
        self.alive.buf[rows] = False
        self.live -= len(rows)
        return rows

    def needs_compaction(self) -> bool:
        return self.num_rows - self.live > self.live

    def compact(self, ids: np.ndarray | None = None) -> None:
        """Keep only the live rows (renumbered in order); ``ids``: their new key
        ids (after :meth:`JoinKeys.shrink`), else the current ones."""
        keep = np.flatnonzero(self.alive.values)
        self.rows.keep(keep)
        self.ids.reset(self.ids.values[keep] if ids is None else ids)
        self.matched.reset(self.matched.values[keep])
        self.ts.reset(self.ts.values[keep])
        self.alive.reset(np.ones(len(keep), bool))
        rows = np.arange(len(keep), dtype=np.int64)
        self.index.clear()
        self.index.add(self.ids.values, 0)
        if self.timed:
            self.expiry.clear()
            self.expiry.add(self.ts.values, rows)
        self.live = len(keep)

    def live_ids(self) -> np.ndarray:
        return self.ids.values[self.alive.values] if self.live < self.num_rows else self.ids.values
