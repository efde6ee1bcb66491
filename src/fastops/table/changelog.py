"""Changelog streams: row kinds and the non-windowed GROUP BY operator.

A changelog batch carries its row kinds in an ``int8`` column named
:data:`OP_COLUMN` (``0`` ``+I`` insert, ``1`` ``-U`` retract the old value,
``2`` ``+U`` the new value, ``3`` ``-D`` delete), as Flink's RowKind.

:class:`ChangelogAggregate` is a streaming GROUP BY without a window: the
running aggregate (``fastops.WindowAggregator`` with a global window) plus the
last value emitted per group. After each batch, a group seen for the first
time gives ``+I``; a group whose value changed gives ``-U`` (old) then ``+U``
(new); a group whose value did not change gives nothing (as Flink's
GroupAggFunction). Updates are per batch: two rows of one group in one batch
give one update (Flink, one row at a time, would give two); the final state is
the same.

:func:`materialize` applies a changelog: the rows left after every ``-U`` /
``-D`` cancelled a matching earlier row.
"""
from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from fastops.core.arrow import as_batch, from_ipc, to_ipc
from fastops.core.keys import KeyTable
from fastops.core.window.aggregator import State, WindowAggregator
from fastops.core.window.assigners import GlobalWindow
from fastops.operators.base import Operator

__all__ = ["OP_COLUMN", "ROW_KINDS", "ChangelogAggregate", "insert_only", "materialize"]

OP_COLUMN = "__op"
ROW_KINDS = ("+I", "-U", "+U", "-D")
_OP_TYPE = pa.int8()


def insert_only(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` with an all-``+I`` op column appended."""
    return batch.append_column(OP_COLUMN, pa.array(np.zeros(batch.num_rows, np.int8)))


def materialize(table: pa.Table) -> pa.Table:
    """The final rows of a changelog table (drops the op column).

    Each row counts +1 (``+I``/``+U``) or -1 (``-U``/``-D``); rows are grouped
    by all their values (nulls equal, as in GROUP BY) and kept ``count`` times.
    """
    if OP_COLUMN not in table.schema.names:
        return table
    data = table.drop_columns([OP_COLUMN])
    ops = table.column(OP_COLUMN).to_numpy()
    if not (ops != 0).any():
        return data
    sign = np.where((ops == 0) | (ops == 2), 1, -1).astype(np.int64)
    names = data.schema.names
    keys = data
    for i, f in enumerate(data.schema):
        if pa.types.is_nested(f.type):  # ROW / ARRAY values (a UDAF's) are grouped by their text
            keys = keys.set_column(i, f.name, pa.array([repr(v) for v in data.column(i).to_pylist()], pa.string()))
    keyed = keys.append_column("__sign", pa.array(sign)).append_column(
        "__first", pa.array(np.arange(len(sign), dtype=np.int64)))
    g = keyed.group_by(names, use_threads=False).aggregate([("__sign", "sum"), ("__first", "min")])
    g = g.filter(pc.greater(g.column("__sign_sum"), 0))
    g = g.sort_by("__first_min")
    reps = g.column("__sign_sum").to_numpy()
    idx = np.repeat(np.arange(g.num_rows), reps)
    if keys is not data:
        return data.take(g.column("__first_min")).take(pa.array(idx))
    return g.select(names).take(pa.array(idx))


def _same(a: pa.Array, b: pa.Array) -> np.ndarray:
    """Row-wise equality with null == null (and NaN == NaN)."""
    if pa.types.is_nested(a.type):  # a ROW / ARRAY value (a UDAF's): no compute kernel compares them
        return np.array([x == y for x, y in zip(a.to_pylist(), b.to_pylist())], dtype=bool)
    eq = pc.fill_null(pc.equal(a, b), False)
    both_null = pc.and_(pc.is_null(a), pc.is_null(b))
    out = pc.or_(eq, both_null)
    if pa.types.is_floating(a.type):
        out = pc.or_(out, pc.and_(pc.fill_null(pc.is_nan(a), False), pc.fill_null(pc.is_nan(b), False)))
    return out.to_numpy(zero_copy_only=False)


def _pack_parts(parts: list[bytes]) -> bytes:
    """Byte strings framed by their lengths: an operator's snapshot of several parts."""
    return b"".join(struct.pack("<Q", len(p)) + p for p in parts)


def _unpack_parts(data: bytes) -> list[bytes]:
    """The parts ``_pack_parts`` framed."""
    parts, i = [], 0
    while i < len(data):
        (n,) = struct.unpack_from("<Q", data, i)
        parts.append(data[i + 8:i + 8 + n])
        i += 8 + n
    return parts


class ChangelogAggregate(Operator):
    """Streaming GROUP BY (no window) emitting ``+I`` / ``-U`` / ``+U`` rows.

    Output columns: the keys, the aggregates, then :data:`OP_COLUMN`.
    """

    def __init__(self, keys: Sequence[str], aggs: dict, schema: pa.Schema | None = None):
        self.keys = list(keys)
        self.aggs = dict(aggs)
        self.schema = schema
        self.name = "group_by(changelog)"
        self.aggregator = WindowAggregator(GlobalWindow(), self.keys, self.aggs, time=None, schema=schema)
        self._reset_emitted()

    def _reset_emitted(self) -> None:
        self.groups = KeyTable(self.keys)
        self.emitted: pa.Table | None = None  # every row emitted as current, by position
        self.pos = np.zeros(0, dtype=np.int64)  # group id -> row of ``emitted`` (-1: none)

    def _gids(self, upd: pa.RecordBatch) -> np.ndarray:
        if self.keys:
            return self.groups.lookup_or_insert([upd.column(k) for k in self.keys])
        return np.zeros(upd.num_rows, dtype=np.int64)

    def process(self, batch: pa.RecordBatch) -> list:
        self.aggregator.process(batch)
        upd = self.aggregator.take_updates()
        if upd.num_rows == 0:
            return []
        gids = self._gids(upd)
        ng = int(gids.max()) + 1
        if len(self.pos) < ng:
            grown = np.full(max(ng, 2 * len(self.pos), 64), -1, dtype=np.int64)
            grown[: len(self.pos)] = self.pos
            self.pos = grown
        prev_pos = self.pos[gids]
        seen = prev_pos >= 0
        new_t = pa.Table.from_batches([upd])
        n = upd.num_rows
        base = 0 if self.emitted is None else self.emitted.num_rows
        if seen.any():
            assert self.emitted is not None  # a group seen before has its row emitted
            old = self.emitted.take(pa.array(prev_pos[seen]))
            cur = new_t.take(pa.array(np.flatnonzero(seen)))
            changed = np.zeros(old.num_rows, dtype=bool)
            for name in self.aggs:
                changed |= ~_same(old.column(name).combine_chunks(), cur.column(name).combine_chunks())
        else:
            old = None
            changed = np.zeros(0, dtype=bool)
        # one output block per changed group, in update order: -U old, +U new; new groups: +I
        seen_idx = np.flatnonzero(seen)
        keep = np.ones(n, dtype=bool)
        keep[seen_idx[~changed]] = False
        # rows of the output: from ``old`` (position k of the seen rows) or from ``new_t``
        rank_of_seen = np.full(n, -1, dtype=np.int64)
        rank_of_seen[seen_idx] = np.arange(len(seen_idx))
        rows = np.flatnonzero(keep)
        is_upd = seen[rows]
        # output index per row: 2 slots for an update, 1 for an insert
        width = np.where(is_upd, 2, 1)
        starts = np.concatenate([[0], np.cumsum(width)[:-1]]) if len(rows) else np.zeros(0, np.int64)
        total = int(width.sum())
        src_old = np.full(total, -1, dtype=np.int64)
        src_new = np.full(total, -1, dtype=np.int64)
        ops = np.zeros(total, dtype=np.int8)
        u = starts[is_upd]
        src_old[u] = rank_of_seen[rows[is_upd]]
        ops[u] = 1
        src_new[u + 1] = rows[is_upd]
        ops[u + 1] = 2
        ins = starts[~is_upd]
        src_new[ins] = rows[~is_upd]
        ops[ins] = 0
        if total:
            sel_old = src_old >= 0
            combined = new_t if old is None else pa.concat_tables([old, new_t])
            offset = 0 if old is None else old.num_rows
            take = np.where(sel_old, src_old, src_new + offset)
            out = combined.take(pa.array(take)).combine_chunks()
            out = out.append_column(OP_COLUMN, pa.array(ops, _OP_TYPE))
            parts = out.to_batches()
        else:
            parts = []
        # remember the current value of every updated group
        self.emitted = new_t if self.emitted is None else pa.concat_tables([self.emitted, new_t])
        self.pos[gids] = base + np.arange(n, dtype=np.int64)
        live = int((self.pos >= 0).sum())
        if self.emitted.num_rows > 4 * max(live, 1024):
            self._compact()
        return [b for b in parts if b.num_rows]

    def _compact(self) -> None:
        assert self.emitted is not None
        valid = np.flatnonzero(self.pos >= 0)
        self.emitted = self.emitted.take(pa.array(self.pos[valid])).combine_chunks()
        self.pos[valid] = np.arange(len(valid), dtype=np.int64)

    def snapshot(self) -> bytes | None:
        if self.emitted is not None:
            self._compact()
        parts = [self.aggregator.snapshot().to_bytes(),
                 to_ipc(self.groups.snapshot()) if self.keys else b"",
                 to_ipc(self.emitted) if self.emitted is not None else b"",
                 self.pos.astype("<i8").tobytes()]
        return _pack_parts(parts)

    def restore(self, state: bytes | None) -> None:
        if state is None:
            return
        parts = _unpack_parts(state)
        self.aggregator.restore(State.from_bytes(parts[0]))
        self._reset_emitted()
        if parts[1]:
            self.groups = KeyTable.restore(as_batch(from_ipc(parts[1])))
        if parts[2]:
            self.emitted = from_ipc(parts[2])
        self.pos = np.frombuffer(parts[3], dtype="<i8").astype(np.int64)
