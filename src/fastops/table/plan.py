"""The logical plan of a Table, and its translation to a DataStream job.

A :class:`fastops.table.Table` is a lazy tree of plan nodes. ``compile``
turns it into DataStream operators of the one engine:

==================  =========================================================
node                operators
==================  =========================================================
Scan                ``from_arrow`` / ``from_parquet`` / ``from_csv`` / a given
                    DataStream, then (streaming mode, if the table declares
                    one) ``with_watermark``
Filter, Project     :class:`~fastops.table.operators.EvalOperator` (fused)
Aggregate, window   ``key_by(...).window(Tumbling | Sliding | Session).aggregate``
                    (the engine's window operator); CUMULATE is expanded to
                    tumbling windows of its step (``CumulateExpand``)
Aggregate, none     streaming: :class:`~fastops.table.changelog.ChangelogAggregate`
                    (``+I``/``-U``/``+U``); batch: ``FinalAggregate`` (the same
                    running aggregate, emitted once at end of input)
Join                :class:`~fastops.table.operators.StreamJoin`: streaming, it emits
                    as rows arrive (outer joins: a changelog; interval joins: state
                    dropped by watermark, insert-only); batch mode and updating
                    inputs: one join at end of input
Union               ``DataStream.union``
Sort / Limit        ``GatherSort`` at parallelism 1 (bounded inputs)
WindowTVF           ``WindowAssign`` (a TVF read as a table)
Lateral             ``LateralExpand`` (table functions, ``UNNEST``)
==================  =========================================================

Event time: a table's time attribute is the column of its ``WATERMARK``
declaration (DDL) or of the DataStream it came from. A window TVF may name
any timestamp / integer-ms column; without a declared watermark (and always
in batch mode) windows fire at the end of input, so every row counts.
"""
from __future__ import annotations

import copy
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from fastops.core import aggregates as agg
from fastops.core.arrow import is_binary_like
from fastops.core.window.assigners import Session, Sliding, Tumbling, bound_type
from fastops.datastream import DataStream, StreamEnvironment
from fastops.operators.base import Operator
from fastops.operators.basic import ProcessingTimeWatermarks
from fastops.runtime.graph import Node
from fastops.table.aggregates import StringMinMax
from fastops.table.changelog import OP_COLUMN, ChangelogAggregate, insert_only
from fastops.table.expressions import AggCall, Call, Col, Expr, ExpressionError, Interval, Lit, broadcast
from fastops.table.formats import CsvTableSource
from fastops.table.operators import (
    CumulateExpand,
    DistinctRows,
    EvalOperator,
    FinalAggregate,
    GatherSort,
    LateralExpand,
    StreamJoin,
    WindowAssign,
)
from fastops.table.retract import RETRACTING, RetractAggregate
from fastops.table.session_tvf import SessionAssign
from fastops.table.types import to_sql

__all__ = [
    "Aggregate",
    "Distinct",
    "Filter",
    "Join",
    "Lateral",
    "PlanError",
    "PlanNode",
    "Project",
    "Scan",
    "Sort",
    "SqlError",
    "Union",
    "Unnest",
    "UnnestCall",
    "WindowDef",
    "WindowTVF",
    "compile_plan",
    "explain_plan",
    "join_of",
    "split_equi_join",
]

_ids = itertools.count()
_TS = pa.timestamp("ms")


class PlanError(ValueError):
    """A query that cannot be planned (unknown column, unsupported construct)."""


class SqlError(PlanError):
    """A SQL statement that cannot be parsed or planned; says what and where."""


def empty_batch(schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array([], f.type) for f in schema], schema=schema)


def infer_type(e: Expr, schema: pa.Schema) -> pa.DataType:
    """The result type of ``e`` over rows of ``schema`` (evaluated on no rows)."""
    try:
        v = e.eval(empty_batch(schema))
    except ExpressionError as exc:
        raise PlanError(str(exc)) from None
    except KeyError as exc:
        raise PlanError(f"column {exc} not found (columns: {schema.names})") from None
    v = broadcast(v, 0)
    return v.type


class PlanNode:
    schema: pa.Schema
    time_col: str | None = None
    changelog: bool = False
    inputs: list = []

    def __init__(self) -> None:
        self.id = next(_ids)

    def label(self) -> str:
        return type(self).__name__


class Scan(PlanNode):
    """A catalog table: an Arrow table, files, or a DataStream."""

    def __init__(self, kind: str, payload: Any, schema: pa.Schema, time_col: str | None = None,
                 watermark_ms: int | None = None, name: str = "table", batch_size: int = 65536,
                 primary_key: Sequence[str] = (), computed: Sequence[tuple[str, Expr]] = ()):
        super().__init__()
        self.kind = kind  # "arrow" | "parquet" | "csv" | "stream" | "redis-stream" | "source" (a Source)
        self.primary_key = list(primary_key)  # PRIMARY KEY ... NOT ENFORCED (a versioned table's key)
        self.payload = payload
        # a DDL's computed columns (name AS expr) follow the physical ones, evaluated on each batch read
        self.physical_schema = schema
        self.computed = list(computed)
        self.schema = pa.schema(list(schema) + [pa.field(n, infer_type(e, schema)) for n, e in self.computed])
        self.time_col = time_col
        self.watermark_ms = watermark_ms
        self.name = name
        self.batch_size = batch_size
        self.inputs = []

    def label(self) -> str:
        wm = f", watermark {self.time_col} - {self.watermark_ms} ms" if self.watermark_ms is not None else ""
        return f"Scan({self.name}: {self.kind}, fields=[{', '.join(self.schema.names)}]{wm})"


class Project(PlanNode):
    def __init__(self, child: PlanNode, items: Sequence[tuple[str, Expr]]):
        super().__init__()
        self.inputs = [child]
        self.items = list(items)
        names = [n for n, _ in self.items]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise PlanError(f"duplicate output column name(s) {dup}: give them different aliases")
        fields = [pa.field(n, infer_type(e, child.schema)) for n, e in self.items]
        self.schema = pa.schema(fields)
        self.changelog = child.changelog
        tc = child.time_col
        self.time_col = None
        for n, e in self.items:
            if isinstance(e, Col) and e.col == tc:
                self.time_col = n
                break

    def label(self) -> str:
        return "Calc(select=[" + ", ".join(n if isinstance(e, Col) and e.col == n else f"{e!r} AS {n}"
                                          for n, e in self.items) + "])"


class Filter(PlanNode):
    def __init__(self, child: PlanNode, predicate: Expr):
        super().__init__()
        if predicate.contains_agg():
            raise PlanError(f"aggregate in a WHERE condition: {predicate!r} (use HAVING)")
        t = infer_type(predicate, child.schema)
        if not (pa.types.is_boolean(t) or pa.types.is_null(t)):
            raise PlanError(f"condition {predicate!r} has type {to_sql(t)}, not BOOLEAN")
        self.inputs = [child]
        self.predicate = predicate
        self.schema = child.schema
        self.time_col = child.time_col
        self.changelog = child.changelog

    def label(self) -> str:
        return f"Calc(where=[{self.predicate!r}])"


@dataclass
class WindowDef:
    """A group window: kind ``tumble`` / ``hop`` / ``cumulate`` / ``session``
    over ``time_col``; sizes in ms (``slide`` is HOP's slide and CUMULATE's step)."""

    kind: str
    time_col: str
    size: int = 0
    slide: int = 0
    gap: int = 0
    offset: int = 0
    partition: list = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.kind in ("tumble", "hop", "cumulate") and self.size <= 0:
            raise PlanError(f"{self.kind.upper()} window size must be > 0, got {self.size} ms")
        if self.kind in ("hop", "cumulate") and self.slide <= 0:
            raise PlanError(f"{self.kind.upper()} window {'slide' if self.kind == 'hop' else 'step'} "
                            f"must be > 0, got {self.slide} ms")
        if self.kind == "hop" and self.slide > self.size:
            raise PlanError(f"HOP slide ({self.slide} ms) must not exceed its size ({self.size} ms)")
        if self.kind == "cumulate" and self.size % self.slide:
            raise PlanError(f"CUMULATE max size ({self.size} ms) must be a multiple of its step ({self.slide} ms)")
        if self.kind == "session" and self.gap <= 0:
            raise PlanError(f"SESSION gap must be > 0, got {self.gap} ms")

    def engine_window(self) -> Any:
        if self.kind == "tumble":
            return Tumbling(self.size, self.offset)
        if self.kind == "hop":
            return Sliding(self.size, self.slide, self.offset)
        if self.kind == "cumulate":
            return Tumbling(self.slide)
        return Session(self.gap)

    def describe(self) -> str:
        if self.kind == "tumble":
            return f"TUMBLE(time_col=[{self.time_col}], size=[{self.size} ms])"
        if self.kind == "hop":
            return f"HOP(time_col=[{self.time_col}], size=[{self.size} ms], slide=[{self.slide} ms])"
        if self.kind == "cumulate":
            return f"CUMULATE(time_col=[{self.time_col}], max_size=[{self.size} ms], step=[{self.slide} ms])"
        return f"SESSION(time_col=[{self.time_col}], gap=[{self.gap} ms])"


class WindowTVF(PlanNode):
    """``TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), ...))``: the input plus
    ``window_start``, ``window_end``, ``window_time``."""

    def __init__(self, child: PlanNode, window: WindowDef):
        super().__init__()
        if window.time_col not in child.schema.names:
            raise PlanError(f"DESCRIPTOR column {window.time_col!r} not found (columns: {child.schema.names})")
        t = child.schema.field(window.time_col).type
        if not (pa.types.is_timestamp(t) or pa.types.is_integer(t) or pa.types.is_date(t)):
            raise PlanError(f"window time column {window.time_col!r} has type {to_sql(t)}; "
                            "it must be a TIMESTAMP (or integer milliseconds)")
        child = insert_only_of(child)
        if child.changelog:
            raise PlanError("a window TVF over an updating table is not supported")
        self.inputs = [child]
        self.window = window
        bt = bound_type(t)  # the time column's zone (TIMESTAMP_LTZ stays LTZ)
        self.schema = pa.schema(list(child.schema) + [pa.field("window_start", bt), pa.field("window_end", bt),
                                                      pa.field("window_time", bt)])
        self.time_col = "window_time"

    def label(self) -> str:
        return f"WindowTableFunction({self.window.describe()})"


def slot_aggregate(call: AggCall, column: str | None, input_type: pa.DataType | None = None) -> Any:
    """The ``fastops.core.aggregates`` aggregate computing ``call`` over ``column`` (of ``input_type``)."""
    fn = call.fn
    if call.distinct:
        raise PlanError(f"{call!r}: DISTINCT here is not supported")
    if fn == "count":
        return agg.count(column)
    if column is None:
        raise PlanError(f"{fn.upper()}(*) is not a valid aggregate")
    if fn in ("min", "max") and input_type is not None and is_binary_like(input_type):
        return StringMinMax(column, fn == "max")
    simple = {"sum": agg.sum, "avg": agg.mean, "min": agg.min, "max": agg.max}
    if fn in simple:
        return simple[fn](column)
    if fn in ("stddev_pop", "stddev_samp", "var_pop", "var_samp"):
        f = agg.stddev if fn.startswith("stddev") else agg.var
        return f(column, ddof=0 if fn.endswith("pop") else 1)
    if fn == "approx_count_distinct":
        maker = getattr(agg, "approx_distinct", None)
        if maker is None:
            raise PlanError("APPROX_COUNT_DISTINCT needs the sketch aggregate fastops.core.aggregates.approx_distinct, "
                            "which is not available in this build")
        return maker(column)
    if fn == "approx_percentile":
        maker = getattr(agg, "approx_quantile", None)
        if maker is None:
            raise PlanError("PERCENTILE_APPROX needs the sketch aggregate fastops.core.aggregates.approx_quantile, "
                            "which is not available in this build")
        return maker(column, *call.params)
    if fn == "udaf":
        return call.udaf.slot_aggregate(column)
    raise PlanError(f"unknown aggregate function {fn!r}")


def agg_output_type(a: Any, input_type: pa.DataType | None, call: AggCall) -> pa.DataType:
    try:
        if hasattr(a, "bind"):
            a.bind(input_type)
        else:
            a.validate(input_type)
        return a.output_type(input_type)
    except TypeError as exc:
        raise PlanError(f"{call!r}: {exc}") from None


class Aggregate(PlanNode):
    """GROUP BY ``keys`` (columns of the child) computing ``aggs`` (name, AggCall
    over a child column or ``*``), optionally in a window.

    Output: ``window_start, window_end`` (windowed), the keys, the aggregates.
    """

    def __init__(self, child: PlanNode, keys: Sequence[str], aggs: Sequence[tuple[str, AggCall]],
                 window: WindowDef | None, streaming: bool):
        super().__init__()
        self.keys = list(keys)
        self.aggs = list(aggs)
        self.window = window
        self.streaming = streaming
        if window is not None:  # a streaming GROUP BY takes the changelog of an outer join as it comes
            child = insert_only_of(child)
        self.inputs = [child]
        if child.changelog and window is not None:
            raise PlanError("a window aggregation of an updating (changelog) table is not supported; "
                            "aggregate the insert-only input instead, or use batch mode")
        if child.changelog:  # streaming GROUP BY of a changelog: aggregates that take retractions
            bad = [c for _, c in self.aggs if c.fn not in RETRACTING or c.udaf is not None or c.distinct]
            if bad:
                raise PlanError(f"{bad[0]!r} over an updating (changelog) table is not supported; the "
                                "aggregates that take retractions are COUNT, SUM, AVG, MIN, MAX, STDDEV_POP, "
                                "STDDEV_SAMP, VAR_POP, VAR_SAMP")
        for k in self.keys:
            if k not in child.schema.names:
                raise PlanError(f"GROUP BY column {k!r} not found (columns: {child.schema.names})")
        fields = []
        if window is not None:
            t = child.schema.field(window.time_col).type if window.time_col in child.schema.names else None
            fields += [pa.field("window_start", bound_type(t)), pa.field("window_end", bound_type(t))]
        fields += [child.schema.field(k) for k in self.keys]
        self.slot_aggs = []
        self.input_types = []
        for name, call in self.aggs:
            column = call.arg.col if isinstance(call.arg, Col) else None
            t = None if column is None else child.schema.field(column).type
            a = slot_aggregate(call, column, t)
            self.input_types.append(t)
            fields.append(pa.field(name, agg_output_type(a, t, call)))
            self.slot_aggs.append(a)
        if not self.aggs:
            raise PlanError("an aggregation needs at least one aggregate")
        self.schema = pa.schema(fields)
        self.changelog = streaming and window is None
        self.time_col = None

    def make_aggs(self) -> dict:
        return {name: slot_aggregate(call, call.arg.col if isinstance(call.arg, Col) else None, t)
                for (name, call), t in zip(self.aggs, self.input_types)}

    def label(self) -> str:
        w = f"window=[{self.window.describe()}], " if self.window is not None else ""
        kind = "WindowAggregate" if self.window is not None else "GroupAggregate"
        return (f"{kind}({w}groupBy=[{', '.join(self.keys)}], "
                f"select=[{', '.join(f'{c!r} AS {n}' for n, c in self.aggs)}])")


class Distinct(PlanNode):
    """The distinct rows of an insert-only input (first occurrence, in arrival order)."""

    def __init__(self, child: PlanNode):
        super().__init__()
        child = insert_only_of(child)
        if child.changelog:
            raise PlanError("DISTINCT over an updating (changelog) table is not supported in streaming mode")
        self.inputs = [child]
        self.schema = child.schema
        self.time_col = None

    def label(self) -> str:
        return f"Distinct(fields=[{', '.join(self.schema.names)}])"


class Join(PlanNode):
    """``left JOIN right ON cond``: ``left_keys = right_keys`` (at least one
    equality) and a ``condition`` on the pair for the rest of ``ON``.

    In streaming mode the join emits as rows arrive. ``bounds = (lo, hi)``
    says the condition holds only if ``lo <= t_right - t_left <= hi`` over the
    two inputs' time attributes (an *interval join*): rows are then dropped
    from the join's state once the watermark passes the last time they can
    match, and outer rows without a match are emitted (with nulls) then, so
    the output is insert-only. A regular streaming outer join keeps every row
    and emits a changelog: ``+I (row, NULLs)`` at once, retracted by ``-D``
    when the row's first match arrives. A join of updating (changelog) inputs
    in streaming mode, and every join in batch mode, runs at end of input."""

    def __init__(self, left: PlanNode, right: PlanNode, left_keys: Sequence[str], right_keys: Sequence[str],
                 how: str, condition: Expr | None = None, streaming: bool = False):
        super().__init__()
        if how not in ("inner", "left outer", "right outer", "full outer"):
            raise PlanError(f"unsupported join type {how!r}")
        clash = set(left.schema.names) & set(right.schema.names)
        if clash:
            raise PlanError(f"join sides share column name(s) {sorted(clash)}; rename one side first")
        self.inputs = [left, right]
        self.left_keys = list(left_keys)
        self.right_keys = list(right_keys)
        self.how = how
        self.condition = condition
        lf = [f.with_nullable(True) if how in ("right outer", "full outer") else f for f in left.schema]
        rf = [f.with_nullable(True) if how in ("left outer", "full outer") else f for f in right.schema]
        self.schema = pa.schema(lf + rf)
        if condition is not None:
            t = infer_type(condition, pa.schema(list(left.schema) + list(right.schema)))
            if not (pa.types.is_boolean(t) or pa.types.is_null(t)):
                raise PlanError(f"join condition {condition!r} has type {to_sql(t)}, not BOOLEAN")
        self.times = (left.time_col, right.time_col)
        self.bounds = interval_bounds(condition, self.left_keys, self.right_keys, left.schema, right.schema,
                                      self.times)
        self.incremental = streaming and not (left.changelog or right.changelog)
        self.changelog = self.incremental and how != "inner" and self.bounds is None
        self.time_col = None

    def label(self) -> str:
        cond = " AND ".join(f"{a} = {b}" for a, b in zip(self.left_keys, self.right_keys))
        if self.condition is not None:
            cond += f" AND {self.condition!r}"
        kind = self.how.replace(" ", "_").upper()
        if self.bounds is not None:
            lo, hi = self.bounds
            return (f"IntervalJoin(joinType=[{kind}], windowBounds=[{self.times[1]} - {self.times[0]} "
                    f"in [{lo}, {hi}] ms], where=[{cond}])")
        return f"Join(joinType=[{kind}], where=[{cond}])"


def join_of(left: PlanNode, right: PlanNode, condition: Expr | None, how: str, streaming: bool) -> Join:
    """The Join node for ``ON condition``: equalities between the sides become
    the keys, the rest is evaluated on each matching pair."""
    lk, rk, rest = split_equi_join(condition, left.schema.names, right.schema.names)
    if not lk:
        raise PlanError(f"join condition {condition!r} has no equality between the two sides "
                        "(cross and pure theta joins are not supported)")
    return Join(left, right, lk, rk, how, rest, streaming)


def split_equi_join(cond: Expr | None, left: Sequence[str], right: Sequence[str]
                    ) -> tuple[list[str], list[str], Expr | None]:
    """Equalities ``left_col = right_col`` of an AND-ed join condition, and the rest."""
    lk, rk, rest = [], [], []
    ls, rs = set(left), set(right)
    for c in _conjuncts(cond):
        args = c.args if isinstance(c, Call) and c.fn == "equal" else []
        if len(args) == 2 and isinstance(args[0], Col) and isinstance(args[1], Col):
            a, b = args[0].col, args[1].col
            if a in ls and b in rs:
                lk.append(a)
                rk.append(b)
                continue
            if b in ls and a in rs:
                lk.append(b)
                rk.append(a)
                continue
        rest.append(c)
    residual = None
    for c in rest:
        residual = c if residual is None else Call("and_kleene", [residual, c])
    return lk, rk, residual


def _conjuncts(cond: Expr | None) -> list[Expr]:
    """The terms of an AND-ed condition (none for no condition)."""
    if cond is None:
        return []
    if isinstance(cond, Call) and cond.fn == "and_kleene":
        return [t for a in cond.args for t in _conjuncts(a)]
    return [cond]


def _time_term(e: Expr, int_ok: bool) -> tuple[str, int] | None:
    """``col``, ``col +/- INTERVAL``, ``INTERVAL + col`` as (column, offset in ms);
    integer literals count as ms when the time columns are integers."""
    if isinstance(e, Col):
        return e.col, 0

    def ms(x: Expr) -> int | None:
        if isinstance(x, Interval):
            return x.ms
        if int_ok and isinstance(x, Lit) and isinstance(x.value, int) and not isinstance(x.value, bool):
            return x.value
        return None

    if isinstance(e, Call) and e.fn in ("add", "subtract") and len(e.args) == 2:
        a, b = e.args
        if isinstance(a, Col) and (off := ms(b)) is not None:
            return a.col, off if e.fn == "add" else -off
        if e.fn == "add" and isinstance(b, Col) and (off := ms(a)) is not None:
            return b.col, off
    return None


def interval_bounds(condition: Expr | None, left_keys: Sequence[str], right_keys: Sequence[str],
                    left: pa.Schema, right: pa.Schema, times: tuple) -> tuple[int, int] | None:
    """``(lo, hi)`` with ``lo <= t_right - t_left <= hi`` implied by the join
    condition over the time attributes ``times`` of the two inputs, or None if
    it bounds the difference on one side only (or not at all).

    Read from AND-ed comparisons such as ``r.ts BETWEEN l.ts - INTERVAL '5'
    SECOND AND l.ts + INTERVAL '5' SECOND`` or ``l.ts = r.ts``. A strict
    ``<`` counts as ``<=``: the bound only decides when state is dropped, the
    condition itself is still evaluated on every pair."""
    tl, tr = times
    if tl is None or tr is None or tl not in left.names or tr not in right.names:
        return None
    int_ok = pa.types.is_integer(left.field(tl).type) and pa.types.is_integer(right.field(tr).type)
    lo, hi = -2**62, 2**62
    for a, b in zip(left_keys, right_keys):
        if (a, b) == (tl, tr):
            lo, hi = max(lo, 0), min(hi, 0)
    flip = {"less": "greater", "less_equal": "greater_equal", "greater": "less", "greater_equal": "less_equal",
            "equal": "equal"}
    for c in _conjuncts(condition):
        if not (isinstance(c, Call) and c.fn in flip and len(c.args) == 2):
            continue
        x, y = _time_term(c.args[0], int_ok), _time_term(c.args[1], int_ok)
        if x is None or y is None:
            continue
        op = c.fn
        if (x[0], y[0]) == (tl, tr):  # tl + a  op  tr + b: write it as tr - tl  op'  a - b
            x, y, op = y, x, flip[op]
        if (x[0], y[0]) != (tr, tl):
            continue
        d = y[1] - x[1]  # tr + a  op  tl + b   <=>   tr - tl  op  b - a
        if op in ("less", "less_equal", "equal"):
            hi = min(hi, d)
        if op in ("greater", "greater_equal", "equal"):
            lo = max(lo, d)
    if lo == -2**62 or hi == 2**62:
        return None
    return lo, hi


class Union(PlanNode):
    def __init__(self, children: Sequence[PlanNode]):
        super().__init__()
        first = children[0]
        for c in children[1:]:
            if len(c.schema) != len(first.schema):
                raise PlanError(f"UNION ALL of {len(first.schema)} and {len(c.schema)} columns")
        self.inputs = list(children)
        self.schema = first.schema
        self.changelog = any(c.changelog for c in children)
        tcs = {c.time_col for c in children}
        self.time_col = tcs.pop() if len(tcs) == 1 else None

    def label(self) -> str:
        return f"Union(all=[true], union=[{', '.join(self.schema.names)}])"


class Sort(PlanNode):
    def __init__(self, child: PlanNode, keys: Sequence[tuple[str, bool]], limit: int | None = None,
                 offset: int = 0):
        super().__init__()
        for k, _ in keys:
            if k not in child.schema.names:
                raise PlanError(f"ORDER BY column {k!r} not found (columns: {child.schema.names})")
        if limit is not None and limit < 0:
            raise PlanError(f"LIMIT must be >= 0, got {limit}")
        self.inputs = [child]
        self.keys = list(keys)
        self.limit = limit
        self.offset = offset
        self.schema = child.schema
        self.time_col = child.time_col

    def label(self) -> str:
        order = ", ".join(f"{k} {'ASC' if a else 'DESC'}" for k, a in self.keys)
        return f"SortLimit(orderBy=[{order}], offset=[{self.offset}], fetch=[{self.limit}])"


class Lateral(PlanNode):
    def __init__(self, child: PlanNode, call: Any, left_outer: bool = False):
        super().__init__()
        self.inputs = [child]
        self.call = call
        self.left_outer = left_outer
        clash = set(call.names) & set(child.schema.names)
        if clash:
            raise PlanError(f"table function {call.fn.name!r} columns {sorted(clash)} clash with the table's")
        for a in call.args:
            infer_type(a, child.schema)
        self.schema = pa.schema(list(child.schema) + [pa.field(n, t) for n, t in
                                                      zip(call.names, call.fn.result_types)])
        self.changelog = child.changelog
        self.time_col = child.time_col

    def label(self) -> str:
        return f"Correlate(invocation=[{self.call.fn.name}], select=[{', '.join(self.schema.names)}])"


class Unnest:
    """``UNNEST(col)`` as the table function of a ``Lateral``: a row per element
    of an ARRAY (Arrow list), per entry of a MAP (``KEY``, ``VALUE``), the
    fields of an array of ROWs as columns; a NULL or empty collection yields
    none (a LEFT join keeps its row with NULLs); ``ordinality`` appends the
    1-based position (INT). Default names are Calcite's: ``EXPR$0``, ``KEY``,
    ``VALUE``, the ROW's field names, ``ORDINALITY``."""

    name = "UNNEST"

    def __init__(self, arg_type: pa.DataType, ordinality: bool = False):
        self.arg_type = arg_type
        self.ordinality = ordinality
        if pa.types.is_map(arg_type):
            self.element: pa.DataType = pa.struct([arg_type.key_field, arg_type.item_field])
            names, types = ["KEY", "VALUE"], [arg_type.key_type, arg_type.item_type]
        elif pa.types.is_list(arg_type) or pa.types.is_large_list(arg_type) or \
                pa.types.is_fixed_size_list(arg_type):
            self.element = arg_type.value_type
            if pa.types.is_struct(self.element):
                names = [f.name for f in self.element]
                types = [f.type for f in self.element]
            else:
                names, types = ["EXPR$0"], [self.element]
        else:
            raise PlanError(f"UNNEST needs an ARRAY or MAP, got {to_sql(arg_type)}")
        if ordinality:
            names, types = names + ["ORDINALITY"], types + [pa.int32()]
        self.names: list[str] = names
        self.result_types: list[pa.DataType] = types

    def expand(self, arrays: Sequence[pa.Array], n: int) -> tuple[np.ndarray, list[pa.Array]]:
        """(source row of each element, the element columns), as ``LateralExpand`` takes them."""
        lists = arrays[0]
        if pa.types.is_map(lists.type):  # same layout as a list of (key, value) structs
            lists = lists.view(pa.list_(pa.field("entries", self.element, nullable=False)))
        parent = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False).astype(np.int64)
        flat = pc.list_flatten(lists)
        cols = flat.flatten() if pa.types.is_struct(flat.type) else [flat]
        if self.ordinality:  # position within its list: index minus the index of its list's first element
            m = len(parent)
            first = np.flatnonzero(np.diff(parent, prepend=-1)) if m else np.zeros(0, np.int64)
            counts = np.diff(np.append(first, m))
            pos = np.arange(m) - np.repeat(first, counts) + 1
            cols = cols + [pa.array(pos.astype(np.int32))]
        return parent, [c.cast(t) if c.type != t else c for c, t in zip(cols, self.result_types)]


class UnnestCall:
    """``UNNEST(arg)`` with the names of its output columns (``AS t(x, ...)``)."""

    def __init__(self, arg: Expr, fn: Unnest, names: Sequence[str]):
        self.fn = fn
        self.args = [arg]
        self.names = list(names)


def insert_only_of(node: PlanNode) -> PlanNode:
    """``node`` as an insert-only query if its updates all come from regular
    streaming outer joins: those then run at end of input (bounded inputs),
    for consumers that cannot take retractions (aggregates, DISTINCT, window
    TVFs, ``to_data_stream``). Otherwise ``node`` itself."""
    if not node.changelog:
        return node
    if isinstance(node, Join):
        kids = node.inputs
    elif isinstance(node, (Project, Filter, Lateral, Union)):
        kids = [insert_only_of(c) for c in node.inputs]
        if any(k.changelog for k in kids):
            return node
    else:
        return node
    out = copy.copy(node)
    out.id = next(_ids)
    out.inputs = list(kids)
    out.changelog = False
    if isinstance(out, Join):
        out.incremental = False
    return out


def is_proctime(node: PlanNode, column: str) -> bool:
    """Whether ``column`` of ``node`` is a processing-time attribute: a
    ``PROCTIME()`` of a projection or a DDL computed column, seen through
    projections that pass it on and filters."""
    while True:
        if isinstance(node, Filter):
            node = node.inputs[0]
            continue
        items = node.items if isinstance(node, Project) else \
            node.computed if isinstance(node, Scan) and node.computed else None
        if items is None:
            return False
        e = dict(items).get(column)
        if isinstance(e, Call) and e.fn == "proctime":
            return True
        if not (isinstance(node, Project) and isinstance(e, Col)):
            return False
        node, column = node.inputs[0], e.col


# ---------------------------------------------------------------- explain

def explain_plan(node: PlanNode, indent: int = 0) -> str:
    lines = [" " * indent + node.label()]
    for c in node.inputs:
        lines.append(explain_plan(c, indent + 2))
    return "\n".join(lines)


# ---------------------------------------------------------------- compile

class Compiler:
    """Builds the DataStream for a plan (each node once)."""

    def __init__(self, env: Any, streaming: bool):
        self.env = env
        self.streaming = streaming
        self.built: dict[int, Any] = {}

    def build(self, node: PlanNode) -> Any:
        s = self.built.get(node.id)
        if s is None:
            own = getattr(node, "compile", None)  # nodes of other table modules compile themselves
            s = own(self) if own is not None else getattr(self, "_" + type(node).__name__.lower())(node)
            self.built[node.id] = s
        return s

    def _clock(self, s: Any, child: PlanNode, time_col: str) -> Any:
        """``s`` with watermarks from the wall clock when a streaming window
        reads processing time, so its windows close as the clock passes them."""
        if not (self.streaming and is_proctime(child, time_col)):
            return s
        return s.transform("proctime_watermarks", ProcessingTimeWatermarks)

    # -- nodes ------------------------------------------------------------------
    def _scan(self, node: Scan) -> Any:
        env = self.env
        if node.kind == "arrow":
            s = env.from_arrow(node.payload, batch_size=node.batch_size)
        elif node.kind == "parquet":
            s = env.from_parquet(node.payload, batch_size=node.batch_size)
        elif node.kind == "csv":
            s = env.from_source(CsvTableSource(node.payload, node.physical_schema, node.batch_size))
        elif node.kind == "redis-stream":  # the declared columns; _stream, _id, _ts filled from the entry
            s = env.from_redis_stream(schema=node.physical_schema, metadata=False, batch_size=node.batch_size,
                                      **node.payload)
        elif node.kind == "source":
            s = env.from_source(node.payload)
        elif node.kind == "stream":
            s = node.payload
            if s.env is not env:
                raise PlanError("a query mixes DataStreams of different StreamEnvironments")
            return s
        else:  # pragma: no cover
            raise PlanError(f"unknown source kind {node.kind!r}")
        if node.computed:
            items = [(n, Col(n)) for n in node.physical_schema.names] + node.computed
            schema = node.schema
            s = s.transform("computed_columns", lambda: EvalOperator(items, None, schema, "computed_columns"))
        if self.streaming and node.watermark_ms is not None and node.time_col is not None:
            s = s.with_watermark(node.time_col, max_out_of_orderness=node.watermark_ms)
        elif node.time_col is not None:
            s = DataStream(s.env, s.node, s.tag, time_column=node.time_col)
        return s

    def _calc(self, child: PlanNode, items: list | None, predicate: Expr | None,
              schema: pa.Schema | None, label: str) -> Any:
        s = self.build(child)
        return s.transform(label, lambda: EvalOperator(items, predicate, schema, label))

    def _project(self, node: Project) -> Any:
        child = node.inputs[0]
        pred = None
        if isinstance(child, Filter) and child.id not in self.built:
            pred = child.predicate
            child = child.inputs[0]
        s = self._calc(child, node.items, pred, node.schema, "calc")
        return DataStream(s.env, s.node, s.tag, time_column=node.time_col)

    def _filter(self, node: Filter) -> Any:
        return self._calc(node.inputs[0], None, node.predicate, None, "where")

    def _windowtvf(self, node: WindowTVF) -> Any:
        w = node.window
        s = self.build(node.inputs[0])
        if w.kind == "session":  # rows once their session closes, per PARTITION BY key
            schema, part = node.inputs[0].schema, list(w.partition)
            factory = lambda: SessionAssign(w.time_col, w.gap, part, schema)
            if part:
                s = s.key_by(*part).transform("window_tvf(session)", factory)
            else:
                s = s._then("window_tvf(session)", factory, 1, "forward" if s.node.parallelism == 1 else "rebalance")
            return DataStream(s.env, s.node, s.tag, time_column="window_time")
        size = w.size
        s = self._clock(s, node.inputs[0], w.time_col)
        s = s.transform(f"window_tvf({w.kind})",
                        lambda: WindowAssign(w.kind, w.time_col, size, w.slide, w.offset))
        return DataStream(s.env, s.node, s.tag, time_column="window_time")

    def _aggregate(self, node: Aggregate) -> Any:
        child = node.inputs[0]
        s = self.build(child)
        keys = list(node.keys)
        in_schema = child.schema
        if node.window is None:
            aggs_factory = node.make_aggs
            factory: Callable[[], Operator]
            if self.streaming and child.changelog:
                specs = [(n, c.fn, c.arg.col if isinstance(c.arg, Col) else None, t)
                         for (n, c), t in zip(node.aggs, node.input_types)]
                out_schema = node.schema
                factory = lambda: RetractAggregate(keys, specs, out_schema)
            elif self.streaming:
                factory = lambda: ChangelogAggregate(keys, aggs_factory(), in_schema)
            else:
                out_schema = node.schema
                factory = lambda: FinalAggregate(keys, aggs_factory(), out_schema, in_schema)
            if keys:
                return s.key_by(*keys).transform("group_by", factory)
            return s._then("group_by", factory, 1, "forward" if s.node.parallelism == 1 else "rebalance")
        w = node.window
        time_col = w.time_col
        s = self._clock(s, child, time_col)
        if w.kind == "cumulate":
            size, step, off = w.size, w.slide, w.offset
            src_time = time_col
            s = s.transform("cumulate", lambda: CumulateExpand(src_time, size, step, off, "__cstart", "__cts"))
            keys = keys + ["__cstart"]
            time_col = "__cts"
        if not keys:
            const = [(n, Col(n)) for n in in_schema.names] + [("__g", Lit(0, pa.int8()))]
            s = s.transform("key", lambda: EvalOperator(const, None, None, "key"))
            keys = ["__g"]
        s = DataStream(s.env, s.node, s.tag, time_column=time_col)
        out = s.key_by(*keys).window(w.engine_window()).aggregate(**node.make_aggs())
        if w.kind == "cumulate" or keys == ["__g"]:
            items: list = []
            for f in node.schema:
                if f.name == "window_start" and w.kind == "cumulate":
                    items.append(("window_start", _CastMs(Col("__cstart"), f.type)))
                else:
                    items.append((f.name, Col(f.name)))
            sch = node.schema
            out = out.transform("calc", lambda: EvalOperator(items, None, sch, "calc"))
        return out

    def _distinct(self, node: Distinct) -> Any:
        s = self.build(node.inputs[0])
        cols = list(node.schema.names)
        return s.key_by(*cols).transform("distinct", lambda: DistinctRows(cols))

    def _join(self, node: Join) -> Any:
        left = self.build(node.inputs[0])
        right = self.build(node.inputs[1])
        lk, rk, how, cond = node.left_keys, node.right_keys, node.how, node.condition
        ls, rs = node.inputs[0].schema, node.inputs[1].schema
        bounds, times = node.bounds, node.times
        incremental = self.streaming and node.incremental
        factory = lambda: StreamJoin(lk, rk, how, ls, rs, cond, bounds, times, incremental)
        g = Node(f"join({how})", self.env.parallelism, factory=factory,
                 inputs=[left._edge("hash", tuple(lk), 0), right._edge("hash", tuple(rk), 1)])
        return DataStream(self.env, g)

    def _union(self, node: Union) -> Any:
        streams = []
        for c in node.inputs:
            s = self.build(c)
            if node.changelog and not c.changelog:  # every input of a changelog union carries row kinds
                s = s.map(insert_only, name="insert_only")
            streams.append(s)
        if node.changelog and len({s.node.parallelism for s in streams}) > 1:
            # a changelog dealt round robin to more tasks would reorder a key's updates
            # (its -U could reach the sink before its +I): gather it in one task instead
            streams = [s if s.node.parallelism == 1 else
                       s._then("gather", Operator, 1, "rebalance") for s in streams]
        return streams[0].union(*streams[1:])

    def _sort(self, node: Sort) -> Any:
        s = self.build(node.inputs[0])
        keys, limit, offset = node.keys, node.limit, node.offset
        return s._then("sort", lambda: GatherSort(keys, limit, offset), 1,
                       "forward" if s.node.parallelism == 1 else "rebalance")

    def _lateral(self, node: Lateral) -> Any:
        s = self.build(node.inputs[0])
        call, outer = node.call, node.left_outer
        return s.transform("lateral", lambda: LateralExpand(call, call.names, outer))


class _CastMs(Expr):
    """int64 milliseconds -> timestamp[ms] (``type``: with its time zone)."""

    def __init__(self, e: Expr, type: pa.DataType = _TS):
        self.e = e
        self.type = type

    def eval(self, batch):
        v = broadcast(self.e.eval(batch), batch.num_rows)
        return v.cast(pa.int64()).cast(self.type)


def window_time_expr() -> Expr:
    """``window_time = window_end - 1 ms`` (the rowtime of a window's result)."""
    return Call("subtract", [Col("window_end"), Interval(1)])


def stream_sources(node: PlanNode) -> list:
    out = []
    if isinstance(node, Scan) and node.kind == "stream":
        out.append(node.payload)
    for c in node.inputs:
        out.extend(stream_sources(c))
    return out


def compile_plan(node: PlanNode, streaming: bool, parallelism: int = 1) -> Any:
    """The DataStream computing ``node`` (in a new StreamEnvironment unless the
    plan reads DataStreams, whose environment is then used)."""
    streams = stream_sources(node)
    env = streams[0].env if streams else StreamEnvironment(parallelism=parallelism)
    return Compiler(env, streaming).build(node)


def to_table(batches_table: pa.Table, schema: pa.Schema, changelog: bool) -> pa.Table:
    """Collected output with the plan's schema (and the op column if a changelog)."""
    names = list(schema.names) + ([OP_COLUMN] if changelog else [])
    if batches_table.num_rows == 0 or batches_table.num_columns == 0:
        fields = list(schema) + ([pa.field(OP_COLUMN, pa.int8())] if changelog else [])
        return pa.table({f.name: pa.array([], f.type) for f in fields}, schema=pa.schema(fields))
    cols = []
    for n in names:
        if n not in batches_table.schema.names:
            if n == OP_COLUMN:
                cols.append(pa.array(np.zeros(batches_table.num_rows, np.int8)))
                continue
            raise PlanError(f"internal: column {n!r} missing from the job's output")
        c = batches_table.column(n)
        if n != OP_COLUMN:
            t = schema.field(n).type
            if c.type != t:
                c = c.cast(t)
        cols.append(c)
    return pa.table(cols, names=names)
