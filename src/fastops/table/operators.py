"""Operators the Table API plugs into DataStream jobs (``DataStream.transform``).

All are vectorised over record batches: expressions are evaluated column-at-a-
time with ``pyarrow.compute``; aggregation, window assignment and joins use
the engine's kernels or Arrow's.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from fastops.operators.base import Operator
from fastops.table.changelog import OP_COLUMN, materialize
from fastops.table.expressions import Expr, broadcast

__all__ = ["EvalOperator", "FinalAggregate", "DistinctRows", "GatherSort", "HashJoin", "WindowAssign", "CumulateExpand",
           "LateralExpand", "evaluate_items"]

_TS = pa.timestamp("ms")


def evaluate_items(batch: pa.RecordBatch, items: Sequence[tuple[str, Expr]],
                   schema: Optional[pa.Schema] = None) -> pa.RecordBatch:
    n = batch.num_rows
    arrays = []
    for i, (name, e) in enumerate(items):
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

    def __init__(self, items: Optional[Sequence[tuple[str, Expr]]], predicate: Optional[Expr] = None,
                 schema: Optional[pa.Schema] = None, name: str = "calc"):
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
        from fastops.window import WindowAggregator
        from fastops.windows import GlobalWindow

        self.keys = list(keys)
        self.out_schema = out_schema
        self.aggs = dict(aggs)
        self.name = "group_by"
        self.aggregator = WindowAggregator(GlobalWindow(), self.keys, self.aggs, time=None, schema=in_schema)
        self.seen = False

    def process(self, batch: pa.RecordBatch) -> list:
        if batch.num_rows:
            self.seen = True
            self.aggregator.process(batch)
        return []

    def close(self) -> list:
        if not self.seen:
            if self.keys or self.ctx.task_index != 0:
                return []
            from fastops.agg import Count

            arrays = []
            for (name, a), f in zip(self.aggs.items(), self.out_schema):
                arrays.append(pa.array([0], f.type) if isinstance(a, Count) else pa.nulls(1, f.type))
            return [pa.RecordBatch.from_arrays(arrays, schema=self.out_schema)]
        out = self.aggregator.flush()
        return [out] if out.num_rows else []

    def snapshot(self) -> Optional[bytes]:
        return self.aggregator.snapshot().to_bytes()

    def restore(self, state: Optional[bytes]) -> None:
        from fastops.window import State

        if state is not None:
            self.seen = True
            self.aggregator.restore(State.from_bytes(state))


class DistinctRows(Operator):
    """Emit each distinct row (over ``columns``) the first time it arrives.

    A key table maps rows to dense group ids; ids beyond the previous group
    count are new, and the first row of each new id is emitted. Nulls equal
    nulls, as in SQL's DISTINCT."""

    def __init__(self, columns: Sequence[str]):
        from fastops.keys import KeyTable

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

    def snapshot(self) -> Optional[bytes]:
        import io

        snap = self.keys.snapshot()
        sink = io.BytesIO()
        with pa.ipc.new_stream(sink, snap.schema) as w:
            w.write_batch(snap)
        return sink.getvalue()

    def restore(self, state: Optional[bytes]) -> None:
        from fastops.keys import KeyTable

        if state is not None:
            t = pa.ipc.open_stream(state).read_all().combine_chunks()
            batch = pa.RecordBatch.from_arrays([c.combine_chunks() if c.num_chunks else pa.array([], c.type)
                                                for c in t.columns], schema=t.schema)
            self.keys = KeyTable.restore(batch)


class GatherSort(Operator):
    """``ORDER BY`` / ``LIMIT`` over a bounded input: buffer, then sort at the end
    (a changelog is applied first). Nulls sort first ascending, last
    descending (Flink's default)."""

    def __init__(self, keys: Sequence[tuple[str, bool]], limit: Optional[int], offset: int = 0):
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


class HashJoin(Operator):
    """Equi-join of two bounded inputs (Arrow's hash join at end of input).

    Input 0 is the left side, input 1 the right; both arrive with their
    final, distinct column names. ``how``: inner, left outer, right outer,
    full outer. Null keys match nothing, as in SQL."""

    def __init__(self, left_keys: Sequence[str], right_keys: Sequence[str], how: str,
                 left_schema: pa.Schema, right_schema: pa.Schema):
        self.keys = (list(left_keys), list(right_keys))
        self.how = how
        self.schemas = (left_schema, right_schema)
        self.name = f"join({how})"

    def open(self, ctx) -> None:
        super().open(ctx)
        self.sides: tuple[list, list] = ([], [])

    def process_input(self, input_index: int, batch: pa.RecordBatch) -> list:
        if batch.num_rows:
            self.sides[0 if input_index == 0 else 1].append(batch)
        return []

    def close(self) -> list:
        left = pa.Table.from_batches(self.sides[0], schema=self.sides[0][0].schema
                                     if self.sides[0] else self.schemas[0])
        right = pa.Table.from_batches(self.sides[1], schema=self.sides[1][0].schema
                                      if self.sides[1] else self.schemas[1])
        if left.num_rows == 0 and self.how in ("inner", "left outer"):
            return []
        if right.num_rows == 0 and self.how in ("inner", "right outer"):
            return []
        return self._join(left, right, self.how)

    def _join(self, left: pa.Table, right: pa.Table, how: str) -> list:
        """Arrow's hash join, keys cast to a common type first (Arrow needs equal types)."""
        left, right = materialize(left), materialize(right)
        names = left.schema.names + right.schema.names
        for lk, rk in zip(*self.keys):
            lt, rt = left.schema.field(lk).type, right.schema.field(rk).type
            if lt != rt:
                common = _common_type(lt, rt)
                left = left.set_column(left.schema.get_field_index(lk), lk, left.column(lk).cast(common))
                right = right.set_column(right.schema.get_field_index(rk), rk, right.column(rk).cast(common))
        joined = left.join(right, keys=self.keys[0], right_keys=self.keys[1], join_type=how,
                           coalesce_keys=False, use_threads=False).select(names)
        return [b for b in joined.combine_chunks().to_batches() if b.num_rows]


class StreamingInnerJoin(HashJoin):
    """Equi inner join that emits as rows arrive (streaming mode).

    Each new batch of one side is joined with every row of the other side
    seen so far, then kept: a matching pair is emitted exactly once, when the
    later of its two rows arrives, as Flink's regular join does. Both sides
    are kept for the life of the job (no state expiry)."""

    def __init__(self, left_keys: Sequence[str], right_keys: Sequence[str],
                 left_schema: pa.Schema, right_schema: pa.Schema):
        super().__init__(left_keys, right_keys, "inner", left_schema, right_schema)
        self.name = "join(inner, streaming)"

    def process_input(self, input_index: int, batch: pa.RecordBatch) -> list:
        side = 0 if input_index == 0 else 1
        if batch.num_rows == 0:
            return []
        other = self.sides[1 - side]
        out: list = []
        if other:
            mine = pa.Table.from_batches([batch])
            theirs = pa.Table.from_batches(other)
            left, right = (mine, theirs) if side == 0 else (theirs, mine)
            out = self._join(left, right, "inner")
        self.sides[side].append(batch)
        return out

    def close(self) -> list:
        return []


def _common_type(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    """The type two join keys are compared in."""
    if pa.types.is_null(a):
        return b
    if pa.types.is_null(b):
        return a
    num = lambda t: pa.types.is_integer(t) or pa.types.is_floating(t)  # noqa: E731
    if num(a) and num(b):
        return pa.float64() if (pa.types.is_floating(a) or pa.types.is_floating(b)) else pa.int64()
    if pa.types.is_string(a) or pa.types.is_large_string(a):
        return a
    return a


def _ms(batch: pa.RecordBatch, column: str) -> np.ndarray:
    from fastops.watermarks import to_ms

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
        return assign_windows(self.kind, ts, self.size, self.slide, self.offset)

    def process(self, batch: pa.RecordBatch) -> list:
        if batch.num_rows == 0:
            return []
        rows, start, end = self.assign(_ms(batch, self.time_column))
        out = batch.take(pa.array(rows)) if len(rows) != batch.num_rows or self.kind != "tumble" else batch
        out = out.append_column("window_start", pa.array(start, _TS))
        out = out.append_column("window_end", pa.array(end, _TS))
        out = out.append_column("window_time", pa.array(end - 1, _TS))
        return [out]


def assign_windows(kind: str, ts: np.ndarray, size: int, slide: int = 0,
                   offset: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every window ``[start, end)`` containing each time in ``ts``.

    - tumble: ``start = floor((t - offset) / size) * size + offset``, ``end = start + size``;
    - hop (``slide``): starts ``floor((t - offset) / slide) * slide + offset - k * slide``
      for ``k = 0 .. ceil(size / slide) - 1`` with ``start > t - size``;
    - cumulate (``slide`` is the step): ``start = floor((t - offset) / size) * size + offset``
      and ends ``start + j * step`` for ``j`` with ``end > t`` (``size`` is the max size).
    """
    from fastops.windows import Sliding, Tumbling

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
                                          self.step, self.offset)
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
