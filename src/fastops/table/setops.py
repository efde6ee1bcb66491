"""Set operations and subquery joins: ``INTERSECT`` / ``EXCEPT`` (and ``ALL``),
``IN`` / ``EXISTS`` / ``NOT IN`` / ``NOT EXISTS`` subqueries (semi and anti
joins), and ``VALUES``.

``INTERSECT`` / ``EXCEPT``: rows are compared whole (nulls equal, as SQL's
set operations do). Per distinct row the operator counts its copies on each
side; the output holds ``min(l, r)`` copies (INTERSECT ALL), ``max(l - r,
0)`` (EXCEPT ALL), or one copy while ``l > 0 and r > 0`` (INTERSECT) / ``l >
0 and r == 0`` (EXCEPT). In streaming mode every batch emits the change of
those numbers: ``+I`` per copy gained, ``-D`` per copy lost, so INTERSECT
[ALL] of insert-only inputs is insert-only and EXCEPT [ALL] a changelog
(a row is retracted once the right side has it). Updating inputs count
their retractions.

Semi / anti joins (Flink's ``StreamingSemiAntiJoinOperator``): a left row
is emitted while it has (semi) or has not (anti) a matching right row; keys
compared with ``=`` (null matches nothing) and the rest of a correlated
subquery's condition evaluated on each pair. In streaming mode a semi join
emits a left row when its first match arrives (insert-only) and an anti
join emits it at once and retracts it (``-D``) when its first match
arrives. Only the left rows without a match are held (a matched one can
never change again for insert-only inputs). ``NOT IN`` follows SQL's three
valued logic: a left row is kept only if the subquery is empty, or its value
is not null, equals no right value and no right value is null; it runs in
one task (a null on the right affects every left row). Updating inputs and
batch mode: one join at end of input.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from fastops.core.arrow import as_batch, from_ipc, to_ipc
from fastops.core.keys import KeyTable
from fastops.core.partitioning import KeyGroups
from fastops.datastream import DataStream
from fastops.operators.base import Operator
from fastops.runtime.graph import Node
from fastops.table.changelog import OP_COLUMN, _pack_parts, _unpack_parts, materialize
from fastops.table.expressions import Cast, Col, Expr, ExpressionError, broadcast
from fastops.table.join_index import JoinKeys, JoinSide
from fastops.table.plan import PlanError, PlanNode, Project, infer_type, insert_only_of
from fastops.table.types import to_sql

__all__ = ["SemiJoin", "SemiJoinOperator", "SetOp", "SetOpOperator", "common_type", "values_table"]

_OP = pa.int8()


def _kinds(batch: pa.RecordBatch, names: Sequence[str]) -> tuple[pa.RecordBatch, np.ndarray]:
    """The columns ``names`` of ``batch`` and +1 / -1 per row (its row kind)."""
    i = batch.schema.get_field_index(OP_COLUMN)
    sign = np.ones(batch.num_rows, np.int64)
    if i >= 0:
        ops = batch.column(i).to_numpy(zero_copy_only=False)
        sign[(ops == 1) | (ops == 3)] = -1
    return batch.select(list(names)), sign


def _with_ops(batch: pa.RecordBatch | pa.Table, ops: np.ndarray | None) -> list:
    if batch.num_rows == 0:
        return []
    if ops is not None:
        batch = batch.append_column(OP_COLUMN, pa.array(ops.astype(np.int8), _OP))
    return [as_batch(batch)]


def common_type(a: pa.DataType, b: pa.DataType, what: str) -> pa.DataType:
    """The type two columns meet in (a set operation's column, a value list's)."""
    if a == b or pa.types.is_null(b):
        return a
    if pa.types.is_null(a):
        return b
    num = lambda t: pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
    if num(a) and num(b):
        if pa.types.is_floating(a) or pa.types.is_floating(b):
            return pa.float64()
        if pa.types.is_decimal(a) or pa.types.is_decimal(b):
            return pa.float64() if not (pa.types.is_decimal(a) and pa.types.is_decimal(b)) else \
                pa.decimal128(38, max(a.scale, b.scale))
        return pa.int64()
    strings = (pa.types.is_string, pa.types.is_large_string)
    if any(f(a) for f in strings) and any(f(b) for f in strings):
        return pa.large_string() if pa.types.is_large_string(a) or pa.types.is_large_string(b) else pa.string()
    if pa.types.is_timestamp(a) and pa.types.is_timestamp(b) and a.tz == b.tz:
        return pa.timestamp("ms", a.tz)
    raise PlanError(f"{what}: {to_sql(a)} and {to_sql(b)} have no common type")


def _aligned(node: PlanNode, schema: pa.Schema) -> PlanNode:
    """``node``'s columns as ``schema``'s (names and types, by position)."""
    if node.schema.names == schema.names and node.schema.types == schema.types:
        return node
    items: list[tuple[str, Expr]] = []
    for f, g in zip(schema, node.schema):
        e: Expr = Col(g.name)
        if f.type != g.type:
            e = Cast(e, f.type)
        items.append((f.name, e))
    return Project(node, items)


# ---------------------------------------------------------------- INTERSECT / EXCEPT

def _copies(kind: str, keep_all: bool, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """How many copies of a row with ``left`` / ``right`` copies per side the result holds."""
    if kind == "intersect":
        return np.minimum(left, right) if keep_all else ((left > 0) & (right > 0)).astype(np.int64)
    return np.maximum(left - right, 0) if keep_all else ((left > 0) & (right <= 0)).astype(np.int64)


class SetOpOperator(Operator):
    """INTERSECT / EXCEPT [ALL] of two inputs (0: left, 1: right) with the same
    columns; see the module docs. ``emit_ops``: the output carries row kinds."""

    def __init__(self, kind: str, keep_all: bool, schema: pa.Schema, incremental: bool, emit_ops: bool):
        self.kind = kind
        self.keep_all = keep_all
        self.schema = schema
        self.incremental = incremental
        self.emit_ops = emit_ops
        self.name = f"{kind}{' all' if keep_all else ''}"
        self._reset()

    def _reset(self) -> None:
        self.rows = KeyTable(self.schema.names)
        self.counts = np.zeros((2, 0), np.int64)

    def _count(self, side: int, batch: pa.RecordBatch) -> tuple[np.ndarray, np.ndarray]:
        """Count the batch's rows; (the distinct rows it touched, their copies before)."""
        data, sign = _kinds(batch, self.schema.names)
        if data.schema != self.schema:
            data = data.cast(self.schema)
        ids = self.rows.lookup_or_insert(list(data.columns))
        ng = self.rows.num_groups
        if self.counts.shape[1] < ng:
            grown = np.zeros((2, max(ng, 2 * self.counts.shape[1], 64)), np.int64)
            grown[:, :self.counts.shape[1]] = self.counts
            self.counts = grown
        touched = np.unique(ids)
        before = _copies(self.kind, self.keep_all, self.counts[0, touched], self.counts[1, touched])
        np.add.at(self.counts[side], ids, sign)
        return touched, before

    def process_input(self, input_index: int, batch: pa.RecordBatch) -> list:
        if batch.num_rows == 0:
            return []
        touched, before = self._count(1 if input_index else 0, batch)
        if not self.incremental:
            return []
        after = _copies(self.kind, self.keep_all, self.counts[0, touched], self.counts[1, touched])
        delta = after - before
        changed = np.flatnonzero(delta)
        if len(changed) == 0:
            return []
        ids = np.repeat(touched[changed], np.abs(delta[changed]))
        ops = np.repeat(np.where(delta[changed] > 0, 0, 3), np.abs(delta[changed]))
        return _with_ops(self.rows.keys_batch(ids).cast(self.schema), ops if self.emit_ops else None)

    def close(self) -> list:
        if self.incremental or self.rows.num_groups == 0:
            return []
        n = self.rows.num_groups
        copies = _copies(self.kind, self.keep_all, self.counts[0, :n], self.counts[1, :n])
        ids = np.repeat(np.arange(n, dtype=np.int64), copies)
        return _with_ops(self.rows.keys_batch(ids).cast(self.schema), None)

    def snapshot(self) -> bytes | None:
        n = self.rows.num_groups
        if n == 0:
            return None
        t = pa.Table.from_batches([self.rows.keys_batch().cast(self.schema)])
        t = t.append_column("__left", pa.array(self.counts[0, :n]))
        t = t.append_column("__right", pa.array(self.counts[1, :n]))
        return to_ipc(t)

    def restore(self, state: bytes | None) -> None:
        self._load([state], None)

    def restore_groups(self, states: Sequence[bytes | None], groups: KeyGroups) -> None:
        self._load(states, groups)

    def _load(self, states: Sequence[bytes | None], groups: KeyGroups | None) -> None:
        self._reset()
        for s in states:
            if s is None:
                continue
            t = from_ipc(s)
            if groups is not None:
                t = t.filter(pa.array(groups.mask(t, self.schema.names)))
            if t.num_rows == 0:
                continue
            for side, col in ((0, "__left"), (1, "__right")):
                counts = t.column(col).to_numpy()
                data = as_batch(t.select(self.schema.names))
                reps = np.abs(counts)
                if reps.sum() == 0:
                    self.rows.lookup_or_insert(list(data.columns))
                    continue
                rows = data.take(pa.array(np.repeat(np.arange(t.num_rows), reps)))
                rows = rows.append_column(OP_COLUMN, pa.array(np.repeat(np.where(counts > 0, 0, 3), reps), _OP))
                self._count(side, rows)


class SetOp(PlanNode):
    """``left INTERSECT | EXCEPT [ALL] right``: the left side's columns."""

    def __init__(self, left: PlanNode, right: PlanNode, kind: str, keep_all: bool, streaming: bool):
        super().__init__()
        if len(left.schema) != len(right.schema):
            raise PlanError(f"{kind.upper()} of {len(left.schema)} and {len(right.schema)} columns")
        fields = [pa.field(f.name, common_type(f.type, g.type, f"{kind.upper()} column {f.name!r}"))
                  for f, g in zip(left.schema, right.schema)]
        schema = pa.schema(fields)
        for f in schema:
            if pa.types.is_nested(f.type):
                raise PlanError(f"{kind.upper()} compares whole rows; column {f.name!r} of type {to_sql(f.type)} "
                                "cannot be compared")
        self.inputs = [_aligned(left, schema), _aligned(right, schema)]
        self.kind = kind
        self.keep_all = keep_all
        self.schema = schema
        self.incremental = streaming
        updating = left.changelog or right.changelog
        self.changelog = streaming and (kind == "except" or updating)
        self.time_col = None

    def label(self) -> str:
        return f"{'Intersect' if self.kind == 'intersect' else 'Minus'}(all=[{str(self.keep_all).lower()}])"

    def compile(self, compiler: Any) -> Any:
        left, right = (compiler.build(c) for c in self.inputs)
        keys = tuple(self.schema.names)
        kind, keep_all, schema = self.kind, self.keep_all, self.schema
        incremental, emit_ops = compiler.streaming, self.changelog
        factory = lambda: SetOpOperator(kind, keep_all, schema, incremental, emit_ops)
        env = compiler.env
        g = Node(f"{kind}{'_all' if keep_all else ''}", env.parallelism, factory=factory,
                 inputs=[left._edge("hash", keys, 0), right._edge("hash", keys, 1)])
        return DataStream(env, g)


# ---------------------------------------------------------------- semi / anti joins

class SemiJoinOperator(Operator):
    """Left rows with (``anti=False``) or without a matching right row; see
    the module docs. Input 0 is the left side, 1 the right (with distinct
    column names); ``condition`` is evaluated on (left row, right row) pairs
    whose keys are equal. ``null_aware``: NOT IN's rules (one key)."""

    def __init__(self, left_keys: Sequence[str], right_keys: Sequence[str], anti: bool, null_aware: bool,
                 left_schema: pa.Schema, right_schema: pa.Schema, condition: Expr | None,
                 incremental: bool, emit_ops: bool):
        self.keys = (list(left_keys), list(right_keys))
        self.anti = anti
        self.null_aware = null_aware
        self.schemas = (left_schema, right_schema)
        self.types = [_key_type(left_schema.field(a).type, right_schema.field(b).type)
                      for a, b in zip(*self.keys)]
        self.condition = condition
        self.incremental = incremental
        self.emit_ops = emit_ops
        self.name = f"{'anti' if anti else 'semi'} join"
        self._reset()

    def _reset(self) -> None:
        self.key_ids = JoinKeys(self.types) if self.types else None
        self.left = JoinSide()  # left rows without a match yet (ids shifted by one: 0 is a null key)
        self.right = JoinSide()  # right rows (only read by a condition)
        self.right_count = np.zeros(0, np.int64)  # right rows per key id
        self.right_nulls = 0
        self.right_total = 0
        self.pending: tuple[list, list] = ([], [])

    def _ids(self, side: int, batch: pa.RecordBatch) -> np.ndarray:
        if self.key_ids is None:
            return np.zeros(batch.num_rows, np.int64)
        return self.key_ids.ids([batch.column(k) for k in self.keys[side]])

    def _right_counts(self, ids: np.ndarray) -> np.ndarray:
        ok = (ids >= 0) & (ids < len(self.right_count))
        out = np.zeros(len(ids), np.int64)
        out[ok] = self.right_count[ids[ok]]
        return out

    # -- input ------------------------------------------------------------------------------
    def process_input(self, input_index: int, batch: pa.RecordBatch) -> list:
        if batch.num_rows == 0:
            return []
        side = 1 if input_index else 0
        if not self.incremental:
            self.pending[side].append(batch)
            return []
        return self._right(batch) if side else self._left(batch)

    def close(self) -> list:
        if self.incremental:
            return []
        right, left = (materialize(pa.Table.from_batches(p)) if p else None for p in (self.pending[1], self.pending[0]))
        self.pending = ([], [])
        if right is not None and right.num_rows:
            self._right(as_batch(right.select(self.schemas[1].names)))
        if left is None or left.num_rows == 0:
            return []
        return self._left(as_batch(left.select(self.schemas[0].names)))

    def _left(self, batch: pa.RecordBatch) -> list:
        batch = batch.select(self.schemas[0].names)
        ids = self._ids(0, batch)
        n = batch.num_rows
        if self.null_aware:
            matched = np.full(n, self.right_total > 0)
            if self.right_total and not self.right_nulls:
                matched = (ids < 0) | (self._right_counts(ids) > 0)
        elif self.condition is None:
            matched = self._right_counts(ids) > 0
        else:
            ni, ri = self.right.find(ids)
            ok = self._holds(batch, ni, self.right.rows, ri, left_new=True)
            matched = np.zeros(n, bool)
            matched[ni[ok]] = True
        emit = np.flatnonzero(matched != self.anti)
        out = _with_ops(batch.take(pa.array(emit)), np.zeros(len(emit), np.int8) if self.emit_ops else None)
        wait = np.flatnonzero(~matched)  # can still change
        if len(wait) and self.incremental:
            self.left.add(batch.take(pa.array(wait)), ids[wait] + 1, np.zeros(len(wait), np.int64))
        return out

    def _right(self, batch: pa.RecordBatch) -> list:
        batch = batch.select(self.schemas[1].names)
        ids = self._ids(1, batch)
        valid = ids >= 0
        had_rows, had_nulls = self.right_total > 0, self.right_nulls > 0
        self.right_total += batch.num_rows
        self.right_nulls += int((~valid).sum())
        need = int(ids.max()) + 1 if len(ids) else 0
        if len(self.right_count) < need:
            grown = np.zeros(max(need, 2 * len(self.right_count), 64), np.int64)
            grown[:len(self.right_count)] = self.right_count
            self.right_count = grown
        np.add.at(self.right_count, ids[valid], 1)
        if self.condition is not None:
            self.right.add(batch, ids, np.zeros(batch.num_rows, np.int64))
        if self.left.live == 0:
            return []
        # the held left rows this batch matches
        if self.null_aware and (not had_nulls and self.right_nulls):
            rows = np.flatnonzero(self.left.alive.values)  # a null on the right: no row is kept
        else:
            probe = np.unique(ids[valid]) + 1
            if self.null_aware and not had_rows:
                probe = np.append(probe, 0)  # the first right row: null left values no longer pass
            _, rows = self.left.find(probe)
            if self.condition is not None and len(rows):
                rows = self._pairs_matched(batch, ids, rows)
            rows = np.unique(rows)
        if len(rows) == 0:
            return []
        self.left.alive.buf[rows] = False
        self.left.live -= len(rows)
        out = self.left.rows.take(rows)
        if self.left.needs_compaction():
            self.left.compact()
        table = pa.Table.from_arrays(out, schema=self.schemas[0])
        return _with_ops(table, np.full(len(rows), 3 if self.anti else 0, np.int8) if self.emit_ops else None)

    def _pairs_matched(self, batch: pa.RecordBatch, ids: np.ndarray, left_rows: np.ndarray) -> np.ndarray:
        """The held left rows (of ``left_rows``) the condition matches with a row of ``batch``."""
        lid = self.left.ids.values[left_rows] - 1
        # pairs: every held candidate with every right row of the same key
        order = np.argsort(ids, kind="stable")
        sid = ids[order]
        lo = np.searchsorted(sid, lid, "left")
        hi = np.searchsorted(sid, lid, "right")
        reps = hi - lo
        li = np.repeat(left_rows, reps)
        starts = np.repeat(lo, reps)
        within = np.arange(int(reps.sum()), dtype=np.int64) - np.repeat(np.cumsum(reps) - reps, reps)
        bi = order[starts + within]
        ok = self._holds(self.left.rows, li, batch, bi, left_new=False)
        return li[ok]

    def _holds(self, left: Any, li: np.ndarray, right: Any, ri: np.ndarray, left_new: bool) -> np.ndarray:
        """Whether the condition holds on the pairs (left[li], right[ri])."""
        if len(li) == 0:
            return np.zeros(0, bool)
        cols = _take(left, self.schemas[0], li) + _take(right, self.schemas[1], ri)
        pairs = pa.RecordBatch.from_arrays(cols, names=self.schemas[0].names + self.schemas[1].names)
        assert self.condition is not None
        mask = broadcast(self.condition.eval(pairs), len(li))
        return pc.fill_null(mask, False).to_numpy(zero_copy_only=False)

    # -- state --------------------------------------------------------------------------------
    def snapshot(self) -> bytes | None:
        def held(side: JoinSide) -> bytes:
            t = side.rows.to_table()
            if t is None or side.live == 0:
                return b""
            return to_ipc(t.take(pa.array(np.flatnonzero(side.alive.values))))

        counts = b""
        if self.key_ids is not None and self.key_ids.table is not None and self.key_ids.num_ids:
            keys = self.key_ids.table.keys_batch()
            n = keys.num_rows
            c = np.zeros(n, np.int64)
            c[:min(n, len(self.right_count))] = self.right_count[:n]
            counts = to_ipc(pa.Table.from_batches([keys]).append_column("__count", pa.array(c)))
        totals = np.array([self.right_total, self.right_nulls], "<i8").tobytes()
        pend = [to_ipc(pa.Table.from_batches(p)) if p else b"" for p in self.pending]
        return _pack_parts([held(self.left), held(self.right), counts, totals, *pend])

    def restore(self, state: bytes | None) -> None:
        if state is not None:
            self._load([state], None)

    def restore_groups(self, states: Sequence[bytes | None], groups: KeyGroups) -> None:
        same = all(t == self.schemas[0].field(a).type == self.schemas[1].field(b).type
                   for t, a, b in zip(self.types, *self.keys))
        if not self.types or self.null_aware or not same:  # state not split by the exchange's key values
            super().restore_groups(states, groups)
            return
        self._load(states, groups)

    def _load(self, states: Sequence[bytes | None], groups: KeyGroups | None) -> None:
        self._reset()
        for s in states:
            if s is None:
                continue
            parts = _unpack_parts(s)
            totals = np.frombuffer(parts[3], "<i8")

            def table(i: int, keys: Sequence[str], parts: list = parts) -> pa.Table | None:
                if not parts[i]:
                    return None
                t = from_ipc(parts[i])
                if groups is not None:
                    t = t.filter(pa.array(groups.mask(t, list(keys))))
                return t if t.num_rows else None

            if groups is None:
                self.right_total += int(totals[0])
                self.right_nulls += int(totals[1])
            t = table(2, [f"key{i}" for i in range(len(self.types))])
            if t is not None and self.key_ids is not None:
                ids = self.key_ids.ids([t.column(i) for i in range(len(self.types))])
                c = t.column("__count").to_numpy()
                self._right_grow(ids)
                self.right_count[ids[ids >= 0]] += c[ids >= 0]
                if groups is not None:
                    self.right_total += int(c.sum())
            t = table(1, self.keys[1])
            if t is not None:
                b = as_batch(t)
                self.right.add(b, self._ids(1, b), np.zeros(b.num_rows, np.int64))
            t = table(0, self.keys[0])
            if t is not None:
                b = as_batch(t)
                self.left.add(b, self._ids(0, b) + 1, np.zeros(b.num_rows, np.int64))
            for side, i in ((0, 4), (1, 5)):
                t = table(i, self.keys[side])
                if t is not None:
                    self.pending[side].extend(t.to_batches())

    def _right_grow(self, ids: np.ndarray) -> None:
        need = int(ids.max()) + 1 if len(ids) else 0
        if len(self.right_count) < need:
            grown = np.zeros(need, np.int64)
            grown[:len(self.right_count)] = self.right_count
            self.right_count = grown


def _key_type(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    try:
        return common_type(a, b, "join key")
    except PlanError:
        return a


def _take(rows: Any, schema: pa.Schema, idx: np.ndarray) -> list:
    if isinstance(rows, JoinSide):
        rows = rows.rows
    if hasattr(rows, "take") and not isinstance(rows, (pa.RecordBatch, pa.Table)):
        return rows.take(idx, schema.names)
    taken = rows.select(schema.names).take(pa.array(idx))
    return [c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c for c in taken.columns]


class SemiJoin(PlanNode):
    """The rows of ``left`` with (semi) or without (anti) a match in ``right``:
    ``left_keys = right_keys`` and ``condition`` over the pair (columns of the
    two sides distinct). ``null_aware``: NOT IN (one key pair, SQL's null rules)."""

    def __init__(self, left: PlanNode, right: PlanNode, left_keys: Sequence[str], right_keys: Sequence[str],
                 anti: bool, condition: Expr | None = None, null_aware: bool = False, streaming: bool = False):
        super().__init__()
        clash = set(left.schema.names) & set(right.schema.names)
        if clash:
            raise PlanError(f"semi join sides share column name(s) {sorted(clash)}")
        if null_aware and len(left_keys) != 1:
            raise PlanError("NOT IN compares one column")
        for a, b in zip(left_keys, right_keys):
            ta, tb = left.schema.field(a).type, right.schema.field(b).type
            common_type(ta, tb, f"IN / EXISTS comparison {a} = {b}")
        if condition is not None:
            t = infer_type(condition, pa.schema(list(left.schema) + list(right.schema)))
            if not (pa.types.is_boolean(t) or pa.types.is_null(t)):
                raise PlanError(f"subquery condition {condition!r} has type {to_sql(t)}, not BOOLEAN")
        self.incremental = streaming and not (left.changelog or right.changelog)
        if not self.incremental:
            left, right = insert_only_of(left), insert_only_of(right)
        self.inputs = [left, right]
        self.left_keys, self.right_keys = list(left_keys), list(right_keys)
        self.anti = anti
        self.condition = condition
        self.null_aware = null_aware
        self.schema = left.schema
        self.changelog = self.incremental and anti
        self.time_col = None

    def label(self) -> str:
        cond = " AND ".join(f"{a} = {b}" for a, b in zip(self.left_keys, self.right_keys))
        if self.condition is not None:
            cond += (" AND " if cond else "") + repr(self.condition)
        kind = "NullAwareAnti" if self.null_aware else ("LeftAnti" if self.anti else "LeftSemi")
        return f"Join(joinType=[{kind}Join], where=[{cond or 'true'}], select=[{', '.join(self.schema.names)}])"

    def compile(self, compiler: Any) -> Any:
        left, right = (compiler.build(c) for c in self.inputs)
        lk, rk = self.left_keys, self.right_keys
        ls, rs = self.inputs[0].schema, self.inputs[1].schema
        anti, null_aware, cond = self.anti, self.null_aware, self.condition
        incremental, emit_ops = compiler.streaming and self.incremental, self.changelog
        factory = lambda: SemiJoinOperator(lk, rk, anti, null_aware, ls, rs, cond, incremental, emit_ops)
        env = compiler.env
        name = "null_aware_anti_join" if null_aware else ("anti_join" if anti else "semi_join")
        if lk and not null_aware:
            g = Node(name, env.parallelism, factory=factory,
                     inputs=[left._edge("hash", tuple(lk), 0), right._edge("hash", tuple(rk), 1)])
        else:  # every left row may meet every right row: one task
            g = Node(name, 1, factory=factory,
                     inputs=[left._edge("forward" if left.node.parallelism == 1 else "rebalance", (), 0),
                             right._edge("forward" if right.node.parallelism == 1 else "rebalance", (), 1)])
        return DataStream(env, g)


# ---------------------------------------------------------------- VALUES

def values_table(rows: Sequence[Sequence[Expr]], names: Sequence[str]) -> pa.Table:
    """The rows of a ``VALUES`` list (expressions without columns) as a table;
    each column in the type its values meet in."""
    width = len(rows[0])
    if any(len(r) != width for r in rows):
        raise PlanError(f"VALUES rows have {sorted({len(r) for r in rows})} values; each needs {width}")
    one = pa.record_batch([pa.array([None])], names=["_"])
    cols: list[list[pa.Scalar]] = [[] for _ in range(width)]
    for r in rows:
        for i, e in enumerate(r):
            try:
                v = e.eval(one)
            except (ExpressionError, KeyError) as exc:
                raise PlanError(f"VALUES takes constants; {e!r}: {exc}") from None
            cols[i].append(v if isinstance(v, pa.Scalar) else v[0])
    arrays = []
    for i, vals in enumerate(cols):
        t = pa.null()
        for v in vals:
            t = common_type(t, v.type, f"VALUES column {names[i]!r}")
        if pa.types.is_null(t):
            raise PlanError(f"VALUES column {names[i]!r} holds only NULL; give it a type: CAST(NULL AS INT)")
        arrays.append(pa.array([v.cast(t).as_py() if v.is_valid else None for v in vals], t))
    return pa.table(arrays, names=list(names))

