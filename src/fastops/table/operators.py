"""Operators the Table API plugs into DataStream jobs (``DataStream.transform``).

All are vectorised over record batches: expressions are evaluated column-at-a-
time with ``pyarrow.compute``; aggregation, window assignment and joins use
the engine's kernels or Arrow's.
"""
from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from fastops.core.aggregates import Count
from fastops.core.arrow import as_batch, from_ipc, to_ipc
from fastops.core.keys import KeyTable
from fastops.core.messages import MAX_WATERMARK, MIN_WATERMARK
from fastops.core.partitioning import KeyGroups
from fastops.core.watermarks import to_ms
from fastops.core.window.aggregator import WindowAggregator
from fastops.core.window.assigners import GlobalWindow, Sliding, Tumbling, bound_type, check_event_times
from fastops.operators.base import Operator
from fastops.operators.window import Shards
from fastops.table.changelog import OP_COLUMN, _pack_parts, _unpack_parts, materialize
from fastops.table.expressions import Expr, PyArrowExpr, broadcast
from fastops.table.join_index import HeldRows, JoinKeys, JoinSide

__all__ = [
    "CumulateExpand",
    "DistinctRows",
    "EvalOperator",
    "FinalAggregate",
    "GatherSort",
    "LateralExpand",
    "StreamJoin",
    "WindowAssign",
    "evaluate_items",
]

_TS = pa.timestamp("ms")


def evaluate_items(batch: pa.RecordBatch, items: Sequence[tuple[str, Expr]],
                   schema: pa.Schema | None = None) -> pa.RecordBatch:
    n = batch.num_rows
    arrays = []
    for i, (_, e) in enumerate(items):
        v = broadcast(e.eval(batch), n)
        if schema is not None:
            t = schema.field(i).type
            if v.type != t:
                v = v.cast(t)
        arrays.append(v)
    names = [name for name, _ in items]
    if schema is not None:
        return pa.RecordBatch.from_arrays(arrays, schema=schema)
    return pa.RecordBatch.from_arrays(arrays, names=names)


class EvalOperator(Operator):
    """``WHERE`` then ``SELECT``: keep rows where ``predicate`` is true (null
    drops the row), then compute ``items`` (name, expression). The op column
    of a changelog passes through."""

    def __init__(self, items: Sequence[tuple[str, Expr]] | None, predicate: Expr | None = None,
                 schema: pa.Schema | None = None, name: str = "calc"):
        self.items = None if items is None else list(items)
        self.predicate = predicate
        self.schema = schema
        self.name = name

    def process(self, batch: pa.RecordBatch) -> list:
        if self.predicate is not None and batch.num_rows:
            mask = broadcast(self.predicate.eval(batch), batch.num_rows)
            if not pa.types.is_boolean(mask.type):
                raise TypeError(f"WHERE condition {self.predicate!r} has type {mask.type}, not BOOLEAN")
            batch = batch.filter(mask, null_selection_behavior="drop")
        if self.items is None:
            return [batch]
        has_op = batch.schema.get_field_index(OP_COLUMN) >= 0
        schema = self.schema
        if schema is not None and has_op and schema.get_field_index(OP_COLUMN) < 0:
            schema = schema.append(pa.field(OP_COLUMN, pa.int8()))
        items = self.items + ([(OP_COLUMN, _OpRef())] if has_op else [])
        return [evaluate_items(batch, items, schema)]


class _OpRef(Expr):
    def eval(self, batch):
        return batch.column(OP_COLUMN)


class FinalAggregate(Operator):
    """Batch GROUP BY without a window: aggregate everything, emit at the end.

    A global aggregate (no keys) over no rows still gives one row (``COUNT``
    0, others null), as SQL does."""

    def __init__(self, keys: Sequence[str], aggs: dict, out_schema: pa.Schema, in_schema: pa.Schema):
        self.keys = list(keys)
        self.out_schema = out_schema
        self.aggs = dict(aggs)
        self.name = "group_by"
        self.shards = Shards(lambda: WindowAggregator(GlobalWindow(), self.keys, self.aggs, time=None,
                                                      schema=in_schema), self.keys)
        self.seen = False

    def process(self, batch: pa.RecordBatch) -> list:
        if batch.num_rows:
            self.seen = True
            self.shards.process(batch)
        return []

    def close(self) -> list:
        if not self.seen:
            if self.keys or self.ctx.task_index != 0:
                return []
            arrays = []
            for a, f in zip(self.aggs.values(), self.out_schema):
                arrays.append(pa.array([0], f.type) if isinstance(a, Count) else pa.nulls(1, f.type))
            return [pa.RecordBatch.from_arrays(arrays, schema=self.out_schema)]
        return self.shards.flush()

    def snapshot(self) -> bytes | None:
        return self.shards.snapshot()

    def restore(self, state: bytes | None) -> None:
        if state is not None:
            self.seen = True
            self.shards.restore(state)

    def restore_groups(self, states: Sequence[bytes | None], groups: KeyGroups) -> None:
        self.seen = any(s is not None for s in states)
        self.shards.restore_groups(states, groups, self.name)


class DistinctRows(Operator):
    """Emit each distinct row (over ``columns``) the first time it arrives.

    A key table maps rows to dense group ids; ids beyond the previous group
    count are new, and the first row of each new id is emitted. Nulls equal
    nulls, as in SQL's DISTINCT."""

    def __init__(self, columns: Sequence[str]):
        self.columns = list(columns)
        self.keys = KeyTable(self.columns)
        self.name = "distinct"

    def process(self, batch: pa.RecordBatch) -> list:
        if batch.num_rows == 0:
            return []
        before = self.keys.num_groups
        ids = self.keys.lookup_or_insert([batch.column(c) for c in self.columns])
        fresh = np.flatnonzero(ids >= before)
        if len(fresh) == 0:
            return []
        _, first = np.unique(ids[fresh], return_index=True)
        rows = np.sort(fresh[first])
        return [batch.select(self.columns).take(pa.array(rows))]

    def snapshot(self) -> bytes | None:
        return to_ipc(self.keys.snapshot())

    def restore(self, state: bytes | None) -> None:
        if state is not None:
            self.keys = KeyTable.restore(as_batch(from_ipc(state)))

    def restore_groups(self, states: Sequence[bytes | None], groups: KeyGroups) -> None:
        """Keep the rows seen so far whose values (the key) are in ``groups``."""
        if not self.columns:  # one group for all rows: not partitioned by key
            super().restore_groups(states, groups)
            return
        self.keys = KeyTable(self.columns)
        for state in states:
            old = KeyTable.restore(as_batch(from_ipc(state))) if state is not None else None
            if old is None or old.num_groups == 0:
                continue
            seen = old.keys_batch()
            if self.keys.types is None:
                self.keys = KeyTable(self.columns, types=old.types)
            self.keys.lookup_or_insert(seen.filter(pa.array(groups.mask(seen, self.columns))).columns)


class GatherSort(Operator):
    """``ORDER BY`` / ``LIMIT`` over a bounded input: buffer, then sort at the end
    (a changelog is applied first). Nulls sort first ascending, last
    descending (Flink's default)."""

    def __init__(self, keys: Sequence[tuple[str, bool]], limit: int | None, offset: int = 0):
        self.keys = list(keys)
        self.limit = limit
        self.offset = offset
        self.name = "sort" if keys else "limit"

    def open(self, ctx) -> None:
        super().open(ctx)
        self.batches: list[pa.RecordBatch] = []
        self.rows = 0

    def process(self, batch: pa.RecordBatch) -> list:
        if batch.num_rows:
            self.batches.append(batch)
            self.rows += batch.num_rows
        return []

    def close(self) -> list:
        if not self.batches:
            return []
        t = materialize(pa.Table.from_batches(self.batches))
        if self.keys:
            idx = np.arange(t.num_rows)
            # stable multi-key sort, last key first; nulls first for ASC, last for DESC
            for name, asc in reversed(self.keys):
                col = t.column(name).take(pa.array(idx))
                order = pc.sort_indices(pa.table({"x": col}), sort_keys=[
                    ("x", "ascending" if asc else "descending", "at_start" if asc else "at_end")])
                idx = idx[order.to_numpy()]
            t = t.take(pa.array(idx))
        end = None if self.limit is None else self.offset + self.limit
        t = t.slice(self.offset, None if end is None else max(end - self.offset, 0))
        return [b for b in t.combine_chunks().to_batches() if b.num_rows]


_HOW = {"inner": (False, False), "left outer": (True, False), "right outer": (False, True),
        "full outer": (True, True)}


class StreamJoin(Operator):
    """The Table API's equi-join, in every mode (Flink's regular and interval joins).

    Input 0 is the left side, input 1 the right; both arrive with their
    final, distinct column names. A pair matches when its keys are equal
    (null keys match nothing, as in SQL) and ``condition`` is true on it.
    ``how``: inner, left outer, right outer, full outer.

    ``incremental`` (streaming mode): each new batch of one side is joined
    with the rows of the other side held so far, then held itself, so a pair
    is emitted once, when the later of its two rows arrives.

    - Regular outer join: a row without a match is emitted at once as
      ``+I (row, NULLs)``; when its first match arrives, ``-D (row, NULLs)``
      then ``+I (row, match)`` (the output carries row kinds).
    - Interval join (``bounds = (lo, hi)``: a pair can only match if
      ``lo <= t_right - t_left <= hi``, over the time columns ``times``): a
      left row can no longer match once the watermark reaches ``t + hi``, a
      right row once it reaches ``t - lo`` (later rows have times above the
      watermark). Such rows are dropped from state; an outer row that never
      matched is emitted then as ``+I (row, NULLs)``, so the output is
      insert-only. A row arriving when it can no longer match future rows is
      joined with what is held and not kept (Flink's behaviour for late rows).

    Each side's held rows are indexed by key
    (:class:`~fastops.table.join_index.JoinSide`), so a batch costs
    amortised ``O(batch log n + matches)``, not ``O(rows held)``.

    Otherwise (batch mode, updating inputs) both sides are held and joined
    once at end of input, the changelogs applied first.
    """

    def __init__(self, left_keys: Sequence[str], right_keys: Sequence[str], how: str,
                 left_schema: pa.Schema, right_schema: pa.Schema, condition: Expr | None = None,
                 bounds: tuple[int, int] | None = None, times: tuple = (None, None),
                 incremental: bool = False):
        self.keys = (list(left_keys), list(right_keys))
        self.how = how
        self.outer = _HOW[how]
        self.schemas = (left_schema, right_schema)
        self.key_types = [_common_type(left_schema.field(a).type, right_schema.field(b).type)
                          for a, b in zip(*self.keys)]
        self.condition = condition
        # the columns of each side the condition reads (all of them if it holds a pyarrow expression)
        used = None if condition is None or _opaque(condition) else condition.columns()
        self.cond_schemas = tuple(pa.schema([f for f in s if used is None or f.name in used]) for s in self.schemas)
        self.bounds = bounds if incremental else None
        self.times = times
        self.incremental = incremental
        self.changelog = incremental and bounds is None and any(self.outer)
        # how long past its own time a row of each side can still match
        self.reach = None if self.bounds is None else (self.bounds[1], -self.bounds[0])
        kind = "interval" if self.bounds is not None else ("streaming" if incremental else "at end")
        self.name = f"join({how}, {kind})"

    def open(self, ctx) -> None:
        super().open(ctx)
        self._reset()

    def _reset(self) -> None:
        self.key_ids = JoinKeys(self.key_types, [f"{a} = {b}" for a, b in zip(*self.keys)])
        self.sides = (JoinSide(), JoinSide())  # streaming: held rows, indexed by key
        self.pending: tuple[list, list] = ([], [])  # at end of input: the input batches
        self.watermark = MIN_WATERMARK

    def held(self) -> int:
        """Rows held in state (both sides)."""
        if not self.incremental:
            return sum(b.num_rows for p in self.pending for b in p)
        return self.sides[0].live + self.sides[1].live

    def touched(self) -> int:
        """Keys, index entries and held rows read or moved so far: the work of
        matching, which per batch must not grow with the rows held."""
        return self.key_ids.touched + self.sides[0].touched + self.sides[1].touched

    def _ids(self, side: int, rows) -> np.ndarray:
        return self.key_ids.ids([rows.column(k) for k in self.keys[side]])

    # -- input --------------------------------------------------------------------------
    def process_input(self, input_index: int, batch: pa.RecordBatch) -> list:
        side = 0 if input_index == 0 else 1
        if batch.num_rows == 0:
            return []
        if not self.incremental:
            self.pending[side].append(batch)
            return []
        other = 1 - side
        n = batch.num_rows
        ids = self._ids(side, batch)
        held = self.sides[other]
        ni, oi = self._pairs(side, batch, ids, held)
        counts = np.bincount(ni, minlength=n).astype(np.int64)
        out = self._emit(side, batch, held, ni, oi, counts)
        held.count_matches(oi)
        if self.reach is None:  # a regular join holds every row
            self.sides[side].add(batch, ids, counts)
            return out
        ts = _ms(batch, self.times[side])
        alive = ts + self.reach[side] > self.watermark
        if alive.all():
            self.sides[side].add(batch, ids, counts, ts)
            return out
        # the others can match nothing later: padded now if unmatched, not kept
        if self.outer[side]:
            out += self._padded(side, batch, np.flatnonzero(~alive & (counts == 0)))
        keep = np.flatnonzero(alive)
        if len(keep):
            self.sides[side].add(batch.take(pa.array(keep)), ids[keep], counts[keep], ts[keep])
        return out

    def on_watermark(self, t_ms: int) -> list:
        if t_ms <= self.watermark:
            return []
        self.watermark = t_ms
        if self.reach is None:
            return []
        out: list = []
        for side in (0, 1):
            s = self.sides[side]
            if s.live == 0:
                continue
            gone = s.expire(t_ms - self.reach[side])
            if self.outer[side] and len(gone):
                out += self._padded(side, s.rows, gone[s.matched.values[gone] == 0])
        self._compact()
        return out

    def _compact(self) -> None:
        """Rebuild a side once its expired rows outnumber its live ones, and
        both sides with fresh key ids once most key ids belong to no held row."""
        a, b = self.sides
        if self.key_ids.num_ids > 2 * (a.live + b.live) + 1024:
            ids = self.key_ids.shrink([a.live_ids(), b.live_ids()])
            a.compact(ids[0])
            b.compact(ids[1])
            return
        for s in self.sides:
            if s.needs_compaction():
                s.compact()

    def close(self) -> list:
        if self.incremental:
            return self.on_watermark(MAX_WATERMARK) if self.bounds is not None else []
        left, right = (materialize(_table(p)) if p else None for p in self.pending)
        if left is None or left.num_rows == 0:
            if not self.outer[1] or right is None:
                return []
            return self._padded(1, right, np.arange(right.num_rows))
        li = ri = np.zeros(0, np.int64)
        if right is not None and right.num_rows:
            held = JoinSide()
            held.add(as_batch(right), self._ids(1, right), np.zeros(right.num_rows, np.int64))
            li, ri = self._pairs(0, left, self._ids(0, left), held)
        out = self._output(left, right, li, ri)
        if self.outer[0]:
            out += self._padded(0, left, np.flatnonzero(np.bincount(li, minlength=left.num_rows) == 0))
        if self.outer[1] and right is not None:
            out += self._padded(1, right, np.flatnonzero(np.bincount(ri, minlength=right.num_rows) == 0))
        return out

    # -- matching -----------------------------------------------------------------------
    def _pairs(self, side: int, new, new_ids: np.ndarray, held: JoinSide) -> tuple[np.ndarray, np.ndarray]:
        """Matching (row of ``new``, row of ``held``) pairs, ordered by new row then held row."""
        ni, oi = held.find(new_ids)
        if self.condition is not None and len(ni):
            li, ri = (ni, oi) if side == 0 else (oi, ni)
            lt, rt = (new, held.rows) if side == 0 else (held.rows, new)
            ls, rs = self.cond_schemas
            cols = _take(lt, ls, li) + _take(rt, rs, ri)
            if cols:
                pairs = pa.RecordBatch.from_arrays(cols, names=ls.names + rs.names)
            else:  # a condition naming no columns: evaluated over len(ni) rows of nothing
                pairs = pa.record_batch([pa.nulls(len(ni))], names=["_"]).select([])
            mask = broadcast(self.condition.eval(pairs), len(ni))
            ok = pc.fill_null(mask, False).to_numpy(zero_copy_only=False)
            ni, oi = ni[ok], oi[ok]
        return ni, oi

    # -- output -------------------------------------------------------------------------
    def _emit(self, side: int, new: pa.RecordBatch, held: JoinSide, ni: np.ndarray, oi: np.ndarray,
              counts: np.ndarray) -> list:
        """What a new batch of ``side`` emits: its pairs, and (regular outer join)
        its unmatched rows padded, and ``-D`` for held rows matched the first time."""
        other = 1 - side
        if not self.changelog:
            return self._output(*_by_side(side, new, held.rows, ni, oi))
        # events per new row i, in order: [-D pad+held j, +I i+j] per pair, or +I i+pad
        first = np.zeros(len(ni), dtype=bool)  # the pair is the first match of its held row
        if self.outer[other] and len(oi):
            cand = np.flatnonzero(held.matched.values[oi] == 0)
            _, at = np.unique(oi[cand], return_index=True)
            first[cand[at]] = True
        lone = np.flatnonzero(counts == 0) if self.outer[side] else np.zeros(0, np.int64)
        # each pair takes 1 or 2 slots, each lone row 1; slots follow the new rows
        width = np.concatenate([1 + first, np.ones(len(lone), np.int64)])
        order = np.argsort(np.concatenate([ni, lone]), kind="stable")  # two sorted runs
        at = np.empty(len(order), np.int64)
        at[order] = np.cumsum(width[order]) - width[order]
        pair_at, lone_at = at[:len(ni)], at[len(ni):]
        total = len(ni) + int(first.sum()) + len(lone)
        ev_new, ev_old = np.empty(total, np.int64), np.empty(total, np.int64)
        ev_op = np.zeros(total, np.int64)
        d = pair_at[first]
        ev_new[d], ev_old[d], ev_op[d] = -1, oi[first], 3
        ev_new[pair_at + first], ev_old[pair_at + first] = ni, oi
        ev_new[lone_at], ev_old[lone_at] = lone, -1
        return self._output(*_by_side(side, new, held.rows, ev_new, ev_old), ops=ev_op)

    def _padded(self, side: int, rows, idx: np.ndarray) -> list:
        """``rows[idx]`` of ``side`` with nulls for the other side (``+I``)."""
        if len(idx) == 0:
            return []
        none = np.full(len(idx), -1, np.int64)
        li, ri = (idx, none) if side == 0 else (none, idx)
        lt, rt = (rows, None) if side == 0 else (None, rows)
        return self._output(lt, rt, li, ri, ops=np.zeros(len(idx), np.int64) if self.changelog else None)

    def _output(self, left, right, li: np.ndarray, ri: np.ndarray, ops: np.ndarray | None = None) -> list:
        """Rows ``left[li] ++ right[ri]`` (index -1: nulls), with row kinds ``ops`` if given."""
        if len(li) == 0:
            return []
        arrays = _take(left, self.schemas[0], li) + _take(right, self.schemas[1], ri)
        names = list(self.schemas[0].names) + list(self.schemas[1].names)
        if ops is not None:
            arrays.append(pa.array(ops.astype(np.int8)))
            names.append(OP_COLUMN)
        return [pa.RecordBatch.from_arrays(arrays, names=names)]

    # -- state --------------------------------------------------------------------------
    def snapshot(self) -> bytes | None:
        parts = [struct.pack("<q", self.watermark)]
        for side in (0, 1):
            if not self.incremental:
                t = _table(self.pending[side]) if self.pending[side] else None
                matched = None if t is None else np.zeros(t.num_rows, np.int64)
            else:
                s = self.sides[side]
                t = s.rows.to_table()
                live = np.flatnonzero(s.alive.values)
                if t is not None and len(live) < t.num_rows:
                    t = t.take(pa.array(live))
                matched = s.matched.values[live]
            if t is None:
                parts.append(b"")
                continue
            t = t.append_column("__matched", pa.array(matched))
            if self.bounds is not None:
                t = t.append_column("__ts", pa.array(self.sides[side].ts.values[live]))
            parts.append(to_ipc(t))
        return _pack_parts(parts)

    def restore(self, state: bytes | None) -> None:
        """Load a snapshot; the key index is rebuilt from the held rows."""
        if state is not None:
            self._load([state], None)

    def restore_groups(self, states: Sequence[bytes | None], groups: KeyGroups) -> None:
        """Hold the rows of ``states`` whose key (the left keys for left rows, the
        right keys for right rows) is in ``groups``; the watermark is the least of theirs."""
        if not self.keys[0]:  # a cross join: any row may meet any other, not partitioned by key
            super().restore_groups(states, groups)
            return
        self._load(states, groups)

    def _load(self, states: Sequence[bytes | None], groups: KeyGroups | None) -> None:
        self._reset()
        loaded = [_unpack_parts(s) for s in states if s is not None]
        if loaded:
            self.watermark = min(struct.unpack("<q", parts[0])[0] for parts in loaded)
        for parts in loaded:
            for side, data in ((0, parts[1]), (1, parts[2])):
                if not data:
                    continue
                t = from_ipc(data)
                if groups is not None:
                    t = t.filter(pa.array(groups.mask(t, self.keys[side])))
                matched = t.column("__matched").to_numpy().astype(np.int64)
                ts = t.column("__ts").to_numpy().astype(np.int64) if "__ts" in t.schema.names else None
                t = t.drop_columns([c for c in ("__matched", "__ts") if c in t.schema.names])
                if t.num_rows == 0:
                    continue
                if not self.incremental:
                    self.pending[side].append(as_batch(t))
                else:
                    self.sides[side].add(as_batch(t), self._ids(side, t), matched, ts)


def _table(batches: list) -> pa.Table:
    """Batches as one table, in the schema of the first."""
    schema = batches[0].schema
    return pa.Table.from_batches([b if b.schema == schema else b.cast(schema) for b in batches])


def _by_side(side: int, new: Any, held: Any, ni: np.ndarray, oi: np.ndarray) -> tuple[Any, Any, np.ndarray, np.ndarray]:
    """(left rows, right rows, left indices, right indices) of pairs (new, held)."""
    return (new, held, ni, oi) if side == 0 else (held, new, oi, ni)


def _take(rows, schema: pa.Schema, idx: np.ndarray) -> list:
    """The columns of ``rows`` (a table, batch or :class:`HeldRows`) at ``idx`` (-1 gives null)."""
    if rows is None or rows.num_rows == 0:
        return [pa.nulls(len(idx), f.type) for f in schema]
    if isinstance(rows, HeldRows):
        return rows.take(idx, schema.names)
    indices = pa.array(idx, mask=idx < 0) if (idx < 0).any() else pa.array(idx)
    taken = rows.select(schema.names).take(indices)
    return [c if isinstance(c, pa.Array) else c.combine_chunks() if c.num_chunks != 1 else c.chunk(0)
            for c in taken.columns]


def _opaque(e: Expr) -> bool:
    """Whether ``e`` holds a pyarrow expression, whose columns ``columns()`` does not know."""
    return isinstance(e, PyArrowExpr) or any(_opaque(c) for c in e.children())


def _common_type(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    """The type two join keys are compared in."""
    if pa.types.is_null(a):
        return b
    if pa.types.is_null(b):
        return a
    num = lambda t: pa.types.is_integer(t) or pa.types.is_floating(t)
    if num(a) and num(b):
        return pa.float64() if (pa.types.is_floating(a) or pa.types.is_floating(b)) else pa.int64()
    if pa.types.is_string(a) or pa.types.is_large_string(a):
        return a
    return a


def _ms(batch: pa.RecordBatch, column: str) -> np.ndarray:
    return np.asarray(to_ms(batch.column(column), column), dtype=np.int64)


class WindowAssign(Operator):
    """A window TVF as a table: each row once per window containing it, with
    ``window_start``, ``window_end`` and ``window_time`` (``end - 1 ms``)
    appended (TUMBLE, HOP, CUMULATE)."""

    def __init__(self, kind: str, time_column: str, size: int, slide: int = 0, offset: int = 0):
        self.kind = kind
        self.time_column = time_column
        self.size, self.slide, self.offset = size, slide, offset
        self.name = f"window_tvf({kind})"

    def assign(self, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(row index, start, end) for every (row, window) pair."""
        return assign_windows(self.kind, ts, self.size, self.slide, self.offset, self.time_column)

    def process(self, batch: pa.RecordBatch) -> list:
        if batch.num_rows == 0:
            return []
        rows, start, end = self.assign(_ms(batch, self.time_column))
        out = batch.take(pa.array(rows)) if len(rows) != batch.num_rows or self.kind != "tumble" else batch
        bt = bound_type(batch.schema.field(self.time_column).type)  # the time column's zone
        out = out.append_column("window_start", pa.array(start, bt))
        out = out.append_column("window_end", pa.array(end, bt))
        out = out.append_column("window_time", pa.array(end - 1, bt))
        return [out]


def assign_windows(kind: str, ts: np.ndarray, size: int, slide: int = 0,
                   offset: int = 0, column: str = "time") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every window ``[start, end)`` containing each time in ``ts``.

    - tumble: ``start = floor((t - offset) / size) * size + offset``, ``end = start + size``;
    - hop (``slide``): starts ``floor((t - offset) / slide) * slide + offset - k * slide``
      for ``k = 0 .. ceil(size / slide) - 1`` with ``start > t - size``;
    - cumulate (``slide`` is the step): ``start = floor((t - offset) / size) * size + offset``
      and ends ``start + j * step`` for ``j`` with ``end > t`` (``size`` is the max size).

    Raises ValueError naming ``column`` (the time column) for a time whose
    windows do not fit in int64 (see ``fastops.core.window.assigners.event_time_range``).
    """
    # every window of the three kinds lies in the tumbling window of the (max) size
    check_event_times(Tumbling(size, offset), ts, column, f"{kind.upper()}(size={size} ms)")
    n = len(ts)
    if kind == "tumble":
        r, s = Tumbling(size, offset).assign_rows(ts)
        return r, s, s + size
    if kind == "hop":
        r, s = Sliding(size, slide, offset).assign_rows(ts)
        return r, s, s + size
    if kind == "cumulate":
        step = slide
        start = (ts - offset) // size * size + offset
        first = (ts - start) // step  # index of the first step window that contains t
        steps = size // step
        reps = steps - first
        rows = np.repeat(np.arange(n, dtype=np.int64), reps)
        within = np.arange(len(rows), dtype=np.int64) - np.repeat(np.cumsum(reps) - reps, reps)
        j = np.repeat(first, reps) + within
        st = start[rows]
        return rows, st, st + (j + 1) * step
    raise ValueError(f"unknown window kind {kind!r}")


class CumulateExpand(Operator):
    """CUMULATE as tumbling windows of ``step``: each row is repeated once per
    cumulative window ``[start, start + j*step)`` containing it, with the
    window start in ``start_column`` and a shifted event time
    ``start + j*step - 1`` in ``time_out`` (so a tumbling window of ``step``
    over ``time_out``, keyed also by ``start_column``, fires at each
    cumulative window's end)."""

    def __init__(self, time_column: str, max_size: int, step: int, offset: int,
                 start_column: str, time_out: str):
        self.time_column = time_column
        self.max_size, self.step, self.offset = max_size, step, offset
        self.start_column, self.time_out = start_column, time_out
        self.name = "cumulate"

    def process(self, batch: pa.RecordBatch) -> list:
        if batch.num_rows == 0:
            return []
        rows, start, end = assign_windows("cumulate", _ms(batch, self.time_column), self.max_size,
                                          self.step, self.offset, self.time_column)
        out = batch.take(pa.array(rows))
        out = out.append_column(self.start_column, pa.array(start, pa.int64()))
        out = out.append_column(self.time_out, pa.array(end - 1, pa.int64()))
        return [out]


class LateralExpand(Operator):
    """``join_lateral`` / ``LATERAL TABLE``: each row joined with the rows its
    table function yields (``left_outer``: rows yielding none keep nulls)."""

    def __init__(self, call: Any, names: Sequence[str], left_outer: bool = False):
        self.call = call
        self.names = list(names)
        self.left_outer = left_outer
        self.name = f"lateral({call.fn.name})"

    def process(self, batch: pa.RecordBatch) -> list:
        n = batch.num_rows
        if n == 0:
            return []
        args = [broadcast(a.eval(batch), n) for a in self.call.args]
        idx, cols = self.call.fn.expand(args, n)
        if self.left_outer:
            missing = np.setdiff1d(np.arange(n), idx)
            if len(missing):
                idx = np.concatenate([idx, missing])
                cols = [pa.concat_arrays([c, pa.nulls(len(missing), c.type)]) for c in cols]
                order = np.argsort(idx, kind="stable")
                idx = idx[order]
                cols = [c.take(pa.array(order)) for c in cols]
        out = batch.take(pa.array(idx))
        has_op = out.schema.get_field_index(OP_COLUMN)
        arrays = [out.column(i) for i in range(out.num_columns) if i != has_op] + cols
        names = [f for i, f in enumerate(out.schema.names) if i != has_op] + self.names
        if has_op >= 0:
            arrays.append(out.column(has_op))
            names.append(OP_COLUMN)
        return [pa.RecordBatch.from_arrays(arrays, names=names)]
