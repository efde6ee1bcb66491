"""Temporal joins: ``JOIN versioned FOR SYSTEM_TIME AS OF probe.time ON ...``.

Event-time temporal join (Flink's ``TemporalRowTimeJoinOperator``)::

    SELECT order_id, price, orders.currency, conversion_rate, order_time
    FROM orders
    LEFT JOIN currency_rates FOR SYSTEM_TIME AS OF orders.order_time
    ON orders.currency = currency_rates.currency

The right side is a *versioned table*: a table with a ``PRIMARY KEY ... NOT
ENFORCED`` and an event-time attribute (each row is the version of its key
from its time on), or a deduplicated view keeping the last row per key
(``ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts DESC) = 1``; a row older
than its key's latest is then no version, as the deduplication drops it).
A probe row (left) joins the version of its key valid at its time: the
latest version with ``version time <= probe time``, unless that version is a
deletion (``-D`` of an updating right side; ``-U`` rows are not versions).
Of equal version times the later arrival wins. INNER drops a probe without a
valid version (or whose pair fails the rest of ``ON``), LEFT pads it with
nulls. Probe rows are held until the watermark (the lesser of both inputs')
passes their time, then joined and emitted in arrival order; right versions
older than the latest one at or below the watermark are dropped, as no
future probe (time above the watermark) can need them. The output is
insert-only and keeps the probe side's time attribute. State is keyed by the
join keys and split by key group on restore. Batch mode joins at end of
input, with the same result.

Processing-time temporal join / lookup join (``AS OF`` a column that is not
the probe side's event-time attribute, e.g. ``PROCTIME()``, or a right side
without an event-time attribute, as Nexmark's q13 side input): the right
table is read whole when the job starts and each probe row joins its
current rows (the last row per primary key if the table declares one; every
matching row otherwise). Stateless: a restart reads the table again.
"""
from __future__ import annotations

import struct
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from fastops.core.arrow import from_ipc, to_ipc
from fastops.core.messages import MAX_WATERMARK, MIN_WATERMARK
from fastops.core.partitioning import KeyGroups
from fastops.core.watermarks import to_ms
from fastops.datastream import DataStream
from fastops.operators.base import Operator
from fastops.runtime.graph import Node
from fastops.table.changelog import OP_COLUMN, _pack_parts, _unpack_parts, materialize
from fastops.table.expressions import Call, Col, Expr, Lit, as_column_expr, broadcast
from fastops.table.join_index import JoinKeys
from fastops.table.plan import (
    Filter,
    PlanError,
    PlanNode,
    Project,
    Scan,
    _conjuncts,
    compile_plan,
    infer_type,
    insert_only_of,
    stream_sources,
    to_table,
)
from fastops.table.setops import common_type
from fastops.table.topn import Rank
from fastops.table.types import to_sql

__all__ = ["LookupJoin", "LookupJoinOperator", "TemporalJoin", "TemporalJoinOperator", "TemporalTableFunction",
           "TemporalTableFunctionCall", "Versioned", "temporal_join_of", "versioned"]


# ---------------------------------------------------------------- versioned tables

@dataclass
class Versioned:
    """What a versioned table is made of: ``node``'s rows are its versions,
    ``time_col`` their version time, ``primary_key`` the key; ``dedup``: rows
    older than their key's latest are no versions (a keep-last deduplication)."""

    node: PlanNode
    time_col: str | None
    primary_key: list
    dedup: bool = False


def _dedup_rank(node: PlanNode) -> bool:
    """A keep-last deduplication on the time attribute: ROW_NUMBER() over one
    descending time column, row number 1."""
    if not isinstance(node, Rank) or node.rank_range != (1, 1) or len(node.order) != 1:
        return False
    col, asc, _ = node.order[0]
    return not asc and col == node.inputs[0].time_col


def versioned(node: PlanNode) -> Versioned:
    """``node`` read as a versioned table (see the module docs): through
    projections and filters down to a connector table (its PRIMARY KEY and
    WATERMARK) or a deduplicating ROW_NUMBER() view."""
    if isinstance(node, Project):
        v = versioned(node.inputs[0])
        items = node.items
        if v.node is not node.inputs[0]:  # a deduplication was taken apart: its row number is 1
            rank = node.inputs[0]
            while not isinstance(rank, Rank):
                rank = rank.inputs[0]
            rn = rank.rank_col
            items = [(n, e.transform(lambda x: Lit(1, pa.int64()) if isinstance(x, Col) and x.col == rn else None))
                     for n, e in items]
        out = node if v.node is node.inputs[0] else Project(v.node, items)
        names = {e.col: n for n, e in items if isinstance(e, Col)}
        time_col = names.get(v.time_col) if v.time_col is not None else None
        pk = [names[k] for k in v.primary_key] if all(k in names for k in v.primary_key) else []
        return Versioned(out, time_col, pk, v.dedup)
    if isinstance(node, Filter):
        v = versioned(node.inputs[0])
        if v.node is not node.inputs[0]:
            raise PlanError(f"a temporal join's versioned view filters its deduplicated rows ({node.predicate!r}); "
                            "filter the rows before ROW_NUMBER() instead")
        return Versioned(node, v.time_col, v.primary_key, v.dedup)
    if _dedup_rank(node):
        assert isinstance(node, Rank)
        child = insert_only_of(node.inputs[0])
        return Versioned(child, node.order[0][0], list(node.keys), True)
    return Versioned(node, node.time_col, list(getattr(node, "primary_key", None) or []))


# ---------------------------------------------------------------- planning

def _split_keys(cond: Expr | None, left: pa.Schema, right: pa.Schema
                ) -> tuple[list[tuple[Expr, Expr]], Expr | None]:
    """The equalities of ``cond`` between an expression of the left columns and
    one of the right columns, and the rest of the condition."""
    ls, rs = set(left.names), set(right.names)
    pairs, rest = [], []
    for c in _conjuncts(cond):
        if isinstance(c, Call) and c.fn == "equal" and len(c.args) == 2:
            a, b = c.args
            ca, cb = a.columns(), b.columns()
            if ca and cb and ca <= ls and cb <= rs:
                pairs.append((a, b))
                continue
            if ca and cb and ca <= rs and cb <= ls:
                pairs.append((b, a))
                continue
        rest.append(c)
    residual = None
    for c in rest:
        residual = c if residual is None else Call("and_kleene", [residual, c])
    return pairs, residual


def _key_columns(node: PlanNode, exprs: Sequence[Expr], prefix: str) -> tuple[PlanNode, list[str]]:
    """Columns holding ``exprs`` (computed ones added to ``node`` as ``prefix<i>``)."""
    names, extra = [], []
    for i, e in enumerate(exprs):
        if isinstance(e, Col):
            names.append(e.col)
        else:
            names.append(f"{prefix}{i}")
            extra.append((f"{prefix}{i}", e))
    if extra:
        node = Project(node, [(n, Col(n)) for n in node.schema.names] + extra)
    return node, names


def temporal_join_of(left: PlanNode, right: PlanNode, condition: Expr | None, how: str, as_of: Expr,
                     streaming: bool, right_name: str = "the versioned table",
                     primary_key: Sequence[str] | None = None, version_time: str | None = None) -> PlanNode:
    """``left [LEFT] JOIN right FOR SYSTEM_TIME AS OF as_of ON condition``: an
    event-time temporal join when ``as_of`` is ``left``'s time attribute and
    ``right`` a versioned table with an event-time attribute, else a lookup
    join against the current rows of ``right`` (read whole). ``primary_key``
    and ``version_time`` (a temporal table function's) override the table's
    own key and time attribute (a ``version_time`` that is not its event-time
    attribute makes it a lookup join)."""
    if how not in ("inner", "left outer"):
        raise PlanError(f"a temporal join is INNER or LEFT, not {how.upper()}")
    if not isinstance(as_of, Col):
        raise PlanError(f"FOR SYSTEM_TIME AS OF {as_of!r}: the time must be a column of the probe side "
                        "(its event-time attribute, or a PROCTIME() column); time travel to a fixed time is "
                        "not supported")
    left = insert_only_of(left)
    if left.changelog:
        raise PlanError("the probe side of a temporal join must be insert-only (it is an updating table)")
    pairs, rest = _split_keys(condition, left.schema, right.schema)
    if not pairs:
        raise PlanError(f"a temporal join needs an equality between the two sides in ON; got {condition!r}")
    v = versioned(right)
    if primary_key is not None:
        v = Versioned(v.node, v.time_col if version_time == v.time_col else None, list(primary_key), v.dedup)
    event_time = as_of.col == left.time_col and v.time_col is not None
    if event_time and not v.primary_key:
        raise PlanError(f"an event-time temporal join needs a primary key on {right_name} (PRIMARY KEY (k) NOT "
                        "ENFORCED, or a ROW_NUMBER() deduplication view); it has the time attribute "
                        f"{v.time_col!r} but no key")
    lnode, lkeys = _key_columns(left, [a for a, _ in pairs], "__tkl")
    rnode, rkeys = _key_columns(v.node if event_time else right, [b for _, b in pairs], "__tkr")
    for a, b in zip(lkeys, rkeys):
        common_type(lnode.schema.field(a).type, rnode.schema.field(b).type, f"temporal join key {a} = {b}")
    if event_time:
        missing = [k for k in v.primary_key if k not in rkeys]
        if missing:  # named as the query names them (not as renamed apart from the probe's columns)
            shown = {n: e.col for n, e in right.items if isinstance(e, Col)} if isinstance(right, Project) else {}
            pk, miss = (", ".join(shown.get(k, k) for k in ks) for ks in (v.primary_key, missing))
            raise PlanError(f"an event-time temporal join must join on the primary key of {right_name} "
                            f"({pk}); ON does not compare {miss}")
        assert v.time_col is not None
        node: PlanNode = TemporalJoin(lnode, rnode, lkeys, rkeys, how, rest, as_of.col, v.time_col, v.dedup,
                                      streaming)
    else:
        if stream_sources(right):
            raise PlanError(f"the lookup side of a temporal join ({right_name}) must be a table that can be read "
                            "whole (a file or in-memory table), not a DataStream")
        node = LookupJoin(lnode, rnode, lkeys, rkeys, how, rest, v.primary_key, v.time_col, right_name)
    keep = list(left.schema.names) + list(right.schema.names)
    if list(node.schema.names) != keep:
        node = Project(node, [(n, Col(n)) for n in keep])
    return node


class TemporalTableFunction:
    """A versioned table as a function of time (PyFlink's
    ``Table.create_temporal_table_function(time_attribute, primary_key)``):
    ``probe.join_lateral(rates(col("o_time")), col("currency") == col("r_currency"))``
    is the temporal join ``JOIN rates FOR SYSTEM_TIME AS OF o_time``."""

    kind = "temporal"

    def __init__(self, table: Any, time_attribute: str, primary_key: Sequence[str]):
        for c in [time_attribute, *primary_key]:
            if c not in table.schema.names:
                raise PlanError(f"create_temporal_table_function: no column {c!r} (columns: {table.schema.names})")
        self.table = table
        self.time_attribute = time_attribute
        self.primary_key = list(primary_key)

    def __call__(self, *args: Any) -> TemporalTableFunctionCall:
        if len(args) != 1:
            raise PlanError(f"a temporal table function takes one time argument, got {len(args)}")
        return TemporalTableFunctionCall(self, args[0])


class TemporalTableFunctionCall:
    def __init__(self, fn: TemporalTableFunction, as_of: Any):
        self.fn = fn
        self.as_of = as_of

    def join(self, left: PlanNode, condition: Expr | None, how: str, streaming: bool) -> PlanNode:
        """The temporal join of ``left`` with this call's versioned table."""
        if condition is None:
            raise PlanError("join_lateral with a temporal table function needs a join predicate comparing the key, "
                            "e.g. col('currency') == col('r_currency')")
        fn = self.fn
        return temporal_join_of(left, fn.table._node, condition, how, as_column_expr(self.as_of), streaming,
                                "the temporal table function's table", fn.primary_key, fn.time_attribute)


def _check_condition(condition: Expr | None, left: PlanNode, right: PlanNode) -> None:
    clash = set(left.schema.names) & set(right.schema.names)
    if clash:
        raise PlanError(f"join sides share column name(s) {sorted(clash)}; rename one side first")
    if condition is not None:
        t = infer_type(condition, pa.schema(list(left.schema) + list(right.schema)))
        if not (pa.types.is_boolean(t) or pa.types.is_null(t)):
            raise PlanError(f"join condition {condition!r} has type {to_sql(t)}, not BOOLEAN")


def _join_schema(left: PlanNode, right: PlanNode, how: str) -> pa.Schema:
    rf = [f.with_nullable(True) for f in right.schema] if how == "left outer" else list(right.schema)
    return pa.schema(list(left.schema) + rf)


def _where(lkeys: Sequence[str], rkeys: Sequence[str], condition: Expr | None) -> str:
    cond = " AND ".join(f"{a} = {b}" for a, b in zip(lkeys, rkeys))
    return cond + (f" AND {condition!r}" if condition is not None else "")


class TemporalJoin(PlanNode):
    """Event-time temporal join of ``left`` (probe rows, time ``left_time``)
    with the versions ``right`` (version time ``right_time``) on
    ``left_keys = right_keys`` and ``condition``; see the module docs."""

    def __init__(self, left: PlanNode, right: PlanNode, left_keys: Sequence[str], right_keys: Sequence[str],
                 how: str, condition: Expr | None, left_time: str, right_time: str, dedup: bool,
                 streaming: bool):
        super().__init__()
        _check_condition(condition, left, right)
        for side, t in ((left, left_time), (right, right_time)):
            typ = side.schema.field(t).type
            if not (pa.types.is_timestamp(typ) or pa.types.is_integer(typ) or pa.types.is_date(typ)):
                raise PlanError(f"temporal join time column {t!r} has type {to_sql(typ)}; it must be a TIMESTAMP")
        self.inputs = [left, right]
        self.left_keys, self.right_keys = list(left_keys), list(right_keys)
        self.how = how
        self.condition = condition
        self.times = (left_time, right_time)
        self.dedup = dedup
        self.streaming = streaming
        self.schema = _join_schema(left, right, how)
        self.time_col = left_time
        self.changelog = False

    def label(self) -> str:
        kind = "LEFT" if self.how == "left outer" else "INNER"
        return (f"TemporalJoin(joinType=[{kind}], where=[{_where(self.left_keys, self.right_keys, self.condition)}], "
                f"asOf=[{self.times[0]}], versionTime=[{self.times[1]}])")

    def compile(self, compiler: Any) -> Any:
        left, right = (compiler.build(c) for c in self.inputs)
        lk, rk, how, cond, times, dedup = self.left_keys, self.right_keys, self.how, self.condition, self.times, \
            self.dedup
        ls, rs = self.inputs[0].schema, self.inputs[1].schema
        incremental = compiler.streaming
        factory = lambda: TemporalJoinOperator(lk, rk, how, ls, rs, times, cond, dedup, incremental)
        env = compiler.env
        g = Node("temporal_join", env.parallelism, factory=factory,
                 inputs=[left._edge("hash", tuple(lk), 0), right._edge("hash", tuple(rk), 1)])
        return DataStream(env, g, time_column=self.time_col)


class LookupJoin(PlanNode):
    """Processing-time temporal join: ``left`` rows joined with the current
    rows of ``side`` (read whole when the job starts, or, for a jdbc table,
    queried by each batch's keys); see the module docs."""

    def __init__(self, left: PlanNode, side: PlanNode, left_keys: Sequence[str], right_keys: Sequence[str],
                 how: str, condition: Expr | None, primary_key: Sequence[str], version_time: str | None,
                 side_name: str):
        super().__init__()
        _check_condition(condition, left, side)
        self.inputs = [left]
        self.side = side
        self.left_keys, self.right_keys = list(left_keys), list(right_keys)
        self.how = how
        self.condition = condition
        self.primary_key = list(primary_key)
        self.version_time = version_time
        self.side_name = side_name
        self.schema = _join_schema(left, side, how)
        self.time_col = left.time_col
        self.changelog = False
        self._lock = threading.Lock()
        self._loaded: pa.Table | None = None

    def label(self) -> str:
        kind = "LEFT" if self.how == "left outer" else "INNER"
        # how the side is read: queried by each batch's keys, or read whole when the job starts
        read = "per batch" if _lookup_source(self.side, self.right_keys) is not None else "at start"
        return (f"LookupJoin(table=[{self.side_name}], joinType=[{kind}], "
                f"where=[{_where(self.left_keys, self.right_keys, self.condition)}], lookup=[{read}])")

    def current_rows(self) -> pa.Table:
        """The side table's current rows: read once (a batch job), the last row
        per primary key kept (by version time, then by position)."""
        with self._lock:
            if self._loaded is None:
                stream = compile_plan(self.side, False, 1)
                data = to_table(stream.collect(job_name="lookup table"), self.side.schema, self.side.changelog)
                data = materialize(data) if self.side.changelog else data
                self._loaded = _latest_per_key(data, self.primary_key, self.version_time)
            return self._loaded

    def compile(self, compiler: Any) -> Any:
        s = compiler.build(self.inputs[0])
        lk, rk, how, cond = self.left_keys, self.right_keys, self.how, self.condition
        ls, rs, load = self.inputs[0].schema, self.side.schema, self.current_rows
        lookup = _lookup_source(self.side, rk)
        s = s.transform("lookup_join", lambda: LookupJoinOperator(lk, rk, how, ls, rs, load, cond, lookup))
        return DataStream(s.env, s.node, s.tag, time_column=self.time_col)


def _lookup_source(side: PlanNode, keys: Sequence[str]) -> tuple[Any, list[str], dict[str, str]] | None:
    """(source, its columns for ``keys``, side column -> source column) when
    ``side`` is a table of a source that looks rows up by key (a jdbc table),
    seen through projections that only pick and rename columns."""
    chain = []
    node = side
    while isinstance(node, Project) and all(isinstance(e, Col) for _, e in node.items):
        chain.append(node)
        node = node.inputs[0]
    if not (isinstance(node, Scan) and node.kind == "source" and hasattr(node.payload, "lookup")) or \
            getattr(node, "computed", None):
        return None
    names = {n: n for n in node.schema.names}
    for p in reversed(chain):
        names = {n: names[e.col] for n, e in p.items if isinstance(e, Col)}
    if not all(k in names for k in keys):
        return None
    return node.payload, [names[k] for k in keys], names


def _latest_per_key(data: pa.Table, key: Sequence[str], time_col: str | None) -> pa.Table:
    if not key or data.num_rows == 0:
        return data
    ids = JoinKeys([data.schema.field(k).type for k in key]).ids([data.column(k) for k in key])
    pos = np.arange(data.num_rows, dtype=np.int64)
    t = np.asarray(to_ms(data.column(time_col), time_col)) if time_col is not None else pos
    order = np.lexsort((pos, t, ids))
    last = np.ones(len(order), bool)
    last[:-1] = ids[order][1:] != ids[order][:-1]
    keep = np.sort(order[last & (ids[order] >= 0)])
    return data.take(pa.array(keep))


# ---------------------------------------------------------------- operators

def _columns(rows: pa.Table | pa.RecordBatch | None, schema: pa.Schema, idx: np.ndarray) -> list:
    """The columns of ``rows`` at ``idx`` (-1 gives null)."""
    if rows is None or rows.num_rows == 0:
        return [pa.nulls(len(idx), f.type) for f in schema]
    indices = pa.array(idx, mask=idx < 0) if (idx < 0).any() else pa.array(idx)
    taken = rows.select(schema.names).take(indices)
    out = []
    for c, f in zip(taken.columns, schema):
        if isinstance(c, pa.ChunkedArray):
            c = c.combine_chunks() if c.num_chunks != 1 else c.chunk(0)
        out.append(c if c.type == f.type else c.cast(f.type))
    return out


class _Pairs:
    """Join output of (left row, right row) index pairs: the condition on
    them, nulls for LEFT's unmatched rows, in the left rows' order."""

    def __init__(self, how: str, left_schema: pa.Schema, right_schema: pa.Schema, condition: Expr | None):
        self.outer = how == "left outer"
        self.schemas = (left_schema, right_schema)
        self.condition = condition

    def output(self, left: Any, right: Any, n_left: int, li: np.ndarray, ri: np.ndarray) -> list:
        if self.condition is not None and len(li):
            cols = _columns(left, self.schemas[0], li) + _columns(right, self.schemas[1], ri)
            pairs = pa.RecordBatch.from_arrays(cols, names=self.schemas[0].names + self.schemas[1].names)
            ok = pc.fill_null(broadcast(self.condition.eval(pairs), len(li)), False).to_numpy(zero_copy_only=False)
            li, ri = li[ok], ri[ok]
        if self.outer:
            lone = np.flatnonzero(np.bincount(li, minlength=n_left) == 0)
            li = np.concatenate([li, lone])
            ri = np.concatenate([ri, np.full(len(lone), -1, np.int64)])
            order = np.argsort(li, kind="stable")
            li, ri = li[order], ri[order]
        if len(li) == 0:
            return []
        cols = _columns(left, self.schemas[0], li) + _columns(right, self.schemas[1], ri)
        return [pa.RecordBatch.from_arrays(cols, names=self.schemas[0].names + self.schemas[1].names)]


def _key_types(left_keys: Sequence[str], right_keys: Sequence[str], ls: pa.Schema, rs: pa.Schema) -> list:
    return [common_type(ls.field(a).type, rs.field(b).type, f"temporal join key {a} = {b}")
            for a, b in zip(left_keys, right_keys)]


class LookupJoinOperator(Operator):
    """Joins each row with the matching rows of a table loaded at ``open``
    (``load()``), or, given a lookup source ``lookup = (source, its key
    columns, side column -> source column)``, with the rows it gives for
    each batch's keys when the batch arrives. Stateless (the table is loaded
    again, the source queried again, after a restart)."""

    def __init__(self, left_keys: Sequence[str], right_keys: Sequence[str], how: str, left_schema: pa.Schema,
                 right_schema: pa.Schema, load: Any, condition: Expr | None = None, lookup: Any = None):
        self.keys = (list(left_keys), list(right_keys))
        self.types = _key_types(left_keys, right_keys, left_schema, right_schema)
        self.pairs = _Pairs(how, left_schema, right_schema, condition)
        self.right_schema = right_schema
        self.load = load
        self.lookup = lookup
        self.conn: Any = None
        self.name = f"lookup join({how})"

    def open(self, ctx: Any) -> None:
        super().open(ctx)
        if self.lookup is not None:
            self.conn = self.lookup[0].lookup_connection()
            return
        self._index(self.load())

    def _index(self, table: pa.Table) -> None:
        self.key_ids = JoinKeys(self.types)
        self.table = table
        ids = self.key_ids.ids([table.column(k) for k in self.keys[1]]) if table.num_rows else np.zeros(0, np.int64)
        self.order = np.argsort(ids, kind="stable")
        self.sorted_ids = ids[self.order]

    def _fetch(self, batch: pa.RecordBatch) -> None:
        """The lookup source's rows for the distinct keys of ``batch``."""
        source, columns, names = self.lookup
        ids = JoinKeys(self.types).ids([batch.column(k) for k in self.keys[0]])
        _, first = np.unique(ids, return_index=True)
        first = first[ids[first] >= 0]
        keys = [batch.column(k).take(pa.array(first)) for k in self.keys[0]]
        rows = source.lookup(self.conn, columns, keys)
        side = pa.table([rows.column(names[f.name]) for f in self.right_schema], schema=self.right_schema)
        self._index(side)

    def process(self, batch: pa.RecordBatch) -> list:
        if batch.num_rows == 0:
            return []
        if self.lookup is not None:
            self._fetch(batch)
        lid = self.key_ids.ids([batch.column(k) for k in self.keys[0]])
        lo = np.searchsorted(self.sorted_ids, lid, "left")
        hi = np.searchsorted(self.sorted_ids, lid, "right")
        reps = np.where(lid >= 0, hi - lo, 0)
        li = np.repeat(np.arange(batch.num_rows, dtype=np.int64), reps)
        within = np.arange(int(reps.sum()), dtype=np.int64) - np.repeat(np.cumsum(reps) - reps, reps)
        ri = self.order[np.repeat(lo, reps) + within]
        return self.pairs.output(batch, self.table, batch.num_rows, li, ri)

    def close(self) -> list:
        if self.conn is not None:
            self.conn.close()
            self.conn = None
        return []


class TemporalJoinOperator(Operator):
    """Event-time temporal join (see the module docs). Input 0: probe rows,
    input 1: versions (an op column: ``-U`` rows ignored, ``-D`` a deletion).

    State: the probe rows not yet joined (their time above the watermark) and
    per key the versions a future probe can need, each with its arrival
    sequence number; ``incremental=False`` (batch mode) joins at close."""

    def __init__(self, left_keys: Sequence[str], right_keys: Sequence[str], how: str, left_schema: pa.Schema,
                 right_schema: pa.Schema, times: tuple[str, str], condition: Expr | None = None,
                 dedup: bool = False, incremental: bool = True):
        self.keys = (list(left_keys), list(right_keys))
        self.schemas = (left_schema, right_schema)
        self.types = _key_types(left_keys, right_keys, left_schema, right_schema)
        self.pairs = _Pairs(how, left_schema, right_schema, condition)
        self.times = times
        self.dedup = dedup
        self.incremental = incremental
        self.name = f"temporal join({how})"
        self._reset()

    def _reset(self) -> None:
        self.key_ids = JoinKeys(self.types)
        self.seq = 0
        self.watermark = MIN_WATERMARK
        # per side: rows (a table), key ids, times, sequence numbers; right: deletions
        self.rows: list[pa.Table | None] = [None, None]
        self.ids = [np.zeros(0, np.int64), np.zeros(0, np.int64)]
        self.ts = [np.zeros(0, np.int64), np.zeros(0, np.int64)]
        self.seqs = [np.zeros(0, np.int64), np.zeros(0, np.int64)]
        self.deleted = np.zeros(0, bool)
        self.latest = np.zeros(0, np.int64)  # dedup: the latest version time per key id

    def held(self) -> int:
        """Probe rows and versions held."""
        return len(self.ids[0]) + len(self.ids[1])

    # -- input ----------------------------------------------------------------------------
    def process_input(self, input_index: int, batch: pa.RecordBatch) -> list:
        if batch.num_rows == 0:
            return []
        side = 1 if input_index else 0
        deleted = None
        if side == 1 and batch.schema.get_field_index(OP_COLUMN) >= 0:
            ops = batch.column(OP_COLUMN).to_numpy(zero_copy_only=False)
            keep = np.flatnonzero(ops != 1)  # -U: the version that follows replaces it
            batch, deleted = batch.take(pa.array(keep)), ops[keep] == 3
        batch = batch.select(self.schemas[side].names)
        ids = self.key_ids.ids([batch.column(k) for k in self.keys[side]])
        ts = np.asarray(to_ms(batch.column(self.times[side]), self.times[side]), dtype=np.int64)
        if side == 1:
            ok = ids >= 0  # a null key is no one's version
            if self.dedup:
                ok &= self._newest(ids, ts)
            if not ok.all():
                sel = np.flatnonzero(ok)
                batch, ids, ts = batch.take(pa.array(sel)), ids[sel], ts[sel]
                deleted = None if deleted is None else deleted[sel]
            self.deleted = np.concatenate([self.deleted, deleted if deleted is not None
                                           else np.zeros(len(ids), bool)])
        self._append(side, pa.Table.from_batches([batch]), ids, ts)
        return []

    def _append(self, side: int, rows: pa.Table, ids: np.ndarray, ts: np.ndarray,
                seqs: np.ndarray | None = None) -> None:
        if seqs is None:
            seqs = np.arange(self.seq, self.seq + len(ids), dtype=np.int64)
            self.seq += len(ids)
        old = self.rows[side]
        self.rows[side] = rows if old is None else pa.concat_tables([old, rows.cast(old.schema)])
        self.ids[side] = np.concatenate([self.ids[side], ids])
        self.ts[side] = np.concatenate([self.ts[side], ts])
        self.seqs[side] = np.concatenate([self.seqs[side], seqs])

    def _newest(self, ids: np.ndarray, ts: np.ndarray) -> np.ndarray:
        """Deduplication: which rows are no older than every earlier row of their key."""
        need = int(ids.max()) + 1 if len(ids) else 0
        if len(self.latest) < need:
            grown = np.full(max(need, 2 * len(self.latest)), MIN_WATERMARK, np.int64)
            grown[:len(self.latest)] = self.latest
            self.latest = grown
        valid = ids >= 0
        prior = np.full(len(ids), MIN_WATERMARK, np.int64)
        prior[valid] = self.latest[ids[valid]]
        # the greatest earlier time of the key within the batch: a running max per key
        # (encoded as segment * width + rank of the time, so one running max serves every key)
        order = np.lexsort((np.arange(len(ids)), ids))
        sid, st = ids[order], ts[order]
        uniq, rank = np.unique(st, return_inverse=True)
        width = len(uniq) + 1
        seg = np.concatenate([[0], np.cumsum(sid[1:] != sid[:-1])]).astype(np.int64)
        run = np.maximum.accumulate(seg * width + rank)
        before = np.full(len(ids), MIN_WATERMARK, np.int64)
        prev = np.flatnonzero(np.concatenate([[False], sid[1:] == sid[:-1]]))
        before[order[prev]] = uniq[run[prev - 1] - seg[prev] * width]
        newest = ts >= np.maximum(prior, before)
        np.maximum.at(self.latest, ids[valid & newest], ts[valid & newest])
        return newest

    # -- time -----------------------------------------------------------------------------
    def on_watermark(self, t_ms: int) -> list:
        if t_ms <= self.watermark:
            return []
        self.watermark = t_ms
        if not self.incremental:
            return []
        return self._fire(t_ms)

    def close(self) -> list:
        out = self._fire(MAX_WATERMARK)
        self.watermark = MAX_WATERMARK
        return out

    def _fire(self, wm: int) -> list:
        """Join the probe rows at or below ``wm`` with the versions valid at
        their times, then drop the versions no later probe needs."""
        rid, rt, rseq = self.ids[1], self.ts[1], self.seqs[1]
        order = np.lexsort((rseq, rt, rid))
        out: list = []
        ready = np.flatnonzero(self.ts[0] <= wm)
        if len(ready):
            ready = ready[np.argsort(self.seqs[0][ready], kind="stable")]
            lid, lt = self.ids[0][ready], self.ts[0][ready]
            li, ri = _version_at(rid[order], rt[order], lid, lt)
            ri = order[ri]
            ok = ~self.deleted[ri]
            li, ri = li[ok], ri[ok]
            left = self.rows[0]
            assert left is not None
            probes = left.take(pa.array(ready))
            out = self.pairs.output(probes, self.rows[1], len(ready), li, ri)
            rest = np.ones(len(self.ids[0]), bool)
            rest[ready] = False
            self._keep(0, np.flatnonzero(rest))
        if len(order):
            self._keep(1, np.sort(order[_needed(rid[order], rt[order], wm)]))
        self._maybe_rebuild_ids()
        return out

    def _keep(self, side: int, idx: np.ndarray) -> None:
        if len(idx) == len(self.ids[side]):
            return
        rows = self.rows[side]
        self.rows[side] = None if len(idx) == 0 or rows is None else rows.take(pa.array(idx)).combine_chunks()
        self.ids[side], self.ts[side], self.seqs[side] = (a[idx] for a in (self.ids[side], self.ts[side],
                                                                           self.seqs[side]))
        if side == 1:
            self.deleted = self.deleted[idx]

    def _maybe_rebuild_ids(self) -> None:
        """Fresh key ids once most belong to no held row (keys come and go)."""
        if self.key_ids.num_ids <= 2 * self.held() + 1024:
            return
        self.key_ids = JoinKeys(self.types)
        for side in (0, 1):
            rows = self.rows[side]
            self.ids[side] = np.zeros(0, np.int64) if rows is None else \
                self.key_ids.ids([rows.column(k) for k in self.keys[side]])
        if self.dedup:
            self.latest = np.full(self.key_ids.num_ids, MIN_WATERMARK, np.int64)
            np.maximum.at(self.latest, self.ids[1], self.ts[1])

    # -- state ----------------------------------------------------------------------------
    def snapshot(self) -> bytes | None:
        parts = [struct.pack("<qq", self.watermark, self.seq)]
        for side in (0, 1):
            rows = self.rows[side]
            if rows is None or len(self.ids[side]) == 0:
                parts.append(b"")
                continue
            t = rows.append_column("__t", pa.array(self.ts[side])).append_column("__seq", pa.array(self.seqs[side]))
            if side == 1:
                t = t.append_column("__deleted", pa.array(self.deleted))
            parts.append(to_ipc(t))
        return _pack_parts(parts)

    def restore(self, state: bytes | None) -> None:
        if state is not None:
            self._load([state], None)

    def restore_groups(self, states: Sequence[bytes | None], groups: KeyGroups) -> None:
        """Keep the probe rows and versions whose key is in ``groups``; the
        watermark is the least of the earlier tasks'."""
        self._load(states, groups)

    def _load(self, states: Sequence[bytes | None], groups: KeyGroups | None) -> None:
        self._reset()
        loaded = [_unpack_parts(s) for s in states if s is not None]
        if not loaded:
            return
        self.watermark = min(struct.unpack("<qq", p[0])[0] for p in loaded)
        self.seq = max(struct.unpack("<qq", p[0])[1] for p in loaded)
        extra = ["__t", "__seq", "__deleted"]
        for side in (0, 1):
            tables = [from_ipc(p[side + 1]) for p in loaded if p[side + 1]]
            if not tables:
                continue
            t = pa.concat_tables(tables)
            if groups is not None:
                t = t.filter(pa.array(groups.mask(t, self.keys[side])))
            if t.num_rows == 0:
                continue
            t = t.take(pa.array(np.argsort(t.column("__seq").to_numpy(), kind="stable")))
            if side == 1:
                self.deleted = t.column("__deleted").to_numpy(zero_copy_only=False).astype(bool)
            rows = t.drop_columns([c for c in extra if c in t.schema.names])
            ids = self.key_ids.ids([rows.column(k) for k in self.keys[side]])
            self._append(side, rows, ids, t.column("__t").to_numpy().astype(np.int64),
                         t.column("__seq").to_numpy().astype(np.int64))
        if self.dedup:
            self.latest = np.full(self.key_ids.num_ids, MIN_WATERMARK, np.int64)
            np.maximum.at(self.latest, self.ids[1], self.ts[1])


def _version_at(rid: np.ndarray, rt: np.ndarray, lid: np.ndarray, lt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For versions sorted by (key id, time, arrival): the probes (key ``lid``,
    time ``lt``) that have a version at or before their time, and the position
    of the latest such version (the last arrival of equal times)."""
    if len(rid) == 0 or len(lid) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    times, rank = np.unique(np.concatenate([rt, lt]), return_inverse=True)
    width = len(times) + 1
    rc = rid * width + rank[:len(rt)]
    lc = np.where(lid >= 0, lid, 0) * width + rank[len(rt):]
    pos = np.searchsorted(rc, lc, "right") - 1
    ok = (lid >= 0) & (pos >= 0)
    ok[ok] = rid[pos[ok]] == lid[ok]
    li = np.flatnonzero(ok)
    return li, pos[li]


def _needed(rid: np.ndarray, rt: np.ndarray, wm: int) -> np.ndarray:
    """For versions sorted by (key id, time, arrival): those a probe later
    than ``wm`` may need: per key the last of equal times, and of the
    versions at or before ``wm`` only the latest."""
    n = len(rid)
    same_key_next = np.zeros(n, bool)
    same_key_next[:-1] = rid[1:] == rid[:-1]
    superseded = np.zeros(n, bool)  # a later arrival has the same key and time
    superseded[:-1] = same_key_next[:-1] & (rt[1:] == rt[:-1])
    old = rt <= wm
    older = np.zeros(n, bool)  # a later version of the key is at or before wm too
    older[:-1] = same_key_next[:-1] & old[1:]
    return ~superseded & ~(old & older)

