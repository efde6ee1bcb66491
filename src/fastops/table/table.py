"""``Table``: a lazy relational query, in PyFlink's Table API style.

>>> import fastops as fo
>>> from fastops.table import col
>>> t_env = fo.TableEnvironment(mode="batch")
>>> t = t_env.from_elements([(1, "Hi"), (2, "Hello")], ["id", "data"])
>>> t.where(col("id") > 1).select(col("data")).to_pandas()["data"].tolist()
['Hello']

Every operation returns a new Table (nothing runs until ``execute``,
``to_pandas``, ``to_arrow`` or ``collect``). Expressions are
:class:`fastops.table.expressions.Expr` (``col``, ``lit``); a bare string in
``select`` / ``group_by`` names a column, ``"*"`` all of them.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa

from fastops.core.durations import parse_duration
from fastops.runtime.errors import JobFailed
from fastops.table.changelog import OP_COLUMN, ROW_KINDS, materialize
from fastops.table.distinct import agg_calls, expand_distinct
from fastops.table.expressions import (
    AggCall,
    Alias,
    Call,
    Cast,
    Col,
    Expr,
    ExpressionError,
    InTable,
    Interval,
    WindowProp,
    as_column_expr,
    as_expr,
)
from fastops.table.functions import UDFError, UserDefinedTableFunction
from fastops.table.over import OverWindowSpec, plan_over, resolve_over_refs
from fastops.table.plan import (
    Aggregate,
    Distinct,
    Filter,
    Lateral,
    PlanError,
    PlanNode,
    Project,
    Sort,
    Union,
    WindowDef,
    _conjuncts,
    compile_plan,
    explain_plan,
    infer_type,
    insert_only_of,
    join_of,
    to_table,
    window_time_expr,
)
from fastops.table.printing import render
from fastops.table.row import Row
from fastops.table.rowops import aggregate_of, flat_aggregate_of, flat_map_of, map_of
from fastops.table.schema import TableSchema
from fastops.table.setops import SemiJoin, SetOp
from fastops.table.temporal import TemporalTableFunction, TemporalTableFunctionCall
from fastops.table.types import to_sql

__all__ = [
    "AggregatedTable",
    "CloseableIterator",
    "GroupedTable",
    "Ordering",
    "Row",
    "Session",
    "Slide",
    "Table",
    "TableResult",
    "TableSchema",
    "Tumble",
    "build_aggregate",
]


# ---------------------------------------------------------------- rows and results

class ColumnNotFound(AttributeError, KeyError):
    """``table.x`` / ``table["x"]`` of a column the table does not have."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class CloseableIterator:
    """The rows of ``TableResult.collect()``: an iterator that is also a context
    manager with ``close()`` (PyFlink's ``CloseableIterator``), so that
    ``with result.collect() as rows: for r in rows: ...`` works. The job has
    finished when the result exists, so closing only ends the iteration."""

    def __init__(self, rows: Iterator[Row]):
        self._rows: Iterator[Row] | None = rows

    def __iter__(self) -> CloseableIterator:
        return self

    def __next__(self) -> Row:
        if self._rows is None:
            raise StopIteration
        return next(self._rows)

    def close(self) -> None:
        self._rows = None

    def __enter__(self) -> CloseableIterator:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class TableResult:
    """The result of ``execute()`` / ``execute_sql``: rows (with row kinds in
    streaming mode), ``print()``, ``collect()``, ``to_pandas()``, ``to_arrow()``."""

    def __init__(self, data: pa.Table, schema: pa.Schema, streaming: bool, job_result: Any = None,
                 raw: bool = False):
        self._data = data
        self._schema = schema
        self._streaming = streaming
        self.job_result = job_result
        self._raw = raw  # EXPLAIN: print the text itself (Flink's raw-content style)
        self._content_widths = False  # column widths from the content, not the types

    @property
    def schema(self) -> pa.Schema:
        return self._schema

    def get_table_schema(self) -> TableSchema:
        """The result's columns (PyFlink's TableSchema; also behaves as the pyarrow.Schema)."""
        return TableSchema(self._schema)

    def _kinds(self) -> list[str]:
        if OP_COLUMN in self._data.schema.names:
            return [ROW_KINDS[k] for k in self._data.column(OP_COLUMN).to_pylist()]
        return ["+I"] * self._data.num_rows

    def _rows(self) -> list[tuple]:
        data = self._data.select(self._schema.names)
        cols = [c.to_pylist() for c in data.columns]
        return list(zip(*cols)) if cols else [()] * data.num_rows

    def collect(self) -> CloseableIterator:
        """Rows in emission order (changelog rows included in streaming mode), as
        a closeable iterator: ``with result.collect() as rows: ...``."""
        names = self._schema.names
        return CloseableIterator(Row.of(vals, names, kind) for vals, kind in zip(self._rows(), self._kinds()))

    def to_string(self) -> str:
        if self._raw:
            return "".join(f"{r[0]}\n" for r in self._rows())
        kinds = self._kinds() if self._streaming else None
        # widths by type in both modes, as PyFlink's TableResult.print()
        return render(self._schema.names, self._schema.types, self._rows(), kinds,
                      by_type=not self._content_widths)

    def print(self) -> None:
        """The PyFlink grid: column widths from the types, an ``op`` column in
        streaming mode, ``N rows in set``."""
        print(self.to_string(), end="")

    def to_arrow(self) -> pa.Table:
        """Final rows (a changelog applied)."""
        return materialize(self._data).select(self._schema.names)

    def to_pandas(self) -> Any:
        return self.to_arrow().to_pandas()

    def changelog(self) -> pa.Table:
        """Every emitted row with an ``op`` column of row kinds (``+I``, ``-U``, ``+U``, ``-D``)."""
        data = self._data.select(self._schema.names)
        return data.append_column("op", pa.array(self._kinds(), pa.string()))

    def wait(self, timeout_ms: int | None = None) -> None:
        return None

    def get_job_client(self) -> Any:
        return None

    def __repr__(self) -> str:
        return f"TableResult({self._data.num_rows} rows, columns {self._schema.names})"


def message_result(rows: Sequence[Sequence[Any]], names: Sequence[str], types: Sequence[pa.DataType],
                   raw: bool = False) -> TableResult:
    """A small result of a statement (``OK``, ``SHOW TABLES``, ``DESCRIBE``, ``EXPLAIN``)."""
    arrays = [pa.array([r[i] for r in rows], t) for i, t in enumerate(types)]
    schema = pa.schema([pa.field(n, t) for n, t in zip(names, types)])
    result = TableResult(pa.Table.from_arrays(arrays, schema=schema), schema, streaming=False, raw=raw)
    result._content_widths = True  # Flink sizes a statement's grid (DESCRIBE, SHOW) by its content
    return result


def ok_result() -> TableResult:
    return message_result([("OK",)], ["result"], [pa.string()])


# ---------------------------------------------------------------- group windows

def _ms(value: Any, what: str) -> int:
    if isinstance(value, Interval):
        return value.ms
    if isinstance(value, Expr):
        raise TypeError(f"{what} must be a duration ('10 min', lit(10).minutes, an int of ms), got {value!r}")
    return parse_duration(value)


def _time_name(on: Any) -> str:
    e = as_column_expr(on)
    if not isinstance(e, Col):
        raise TypeError(f"a window must be .on() a time column, got {on!r}")
    return e.col


class GroupWindow:
    def __init__(self, kind: str, size: int = 0, slide: int = 0, gap: int = 0,
                 time_col: str | None = None, alias_name: str | None = None):
        self.kind, self.size, self.slide, self.gap = kind, size, slide, gap
        self.time_col = time_col
        self.alias_name = alias_name

    def on(self, time_field: Any) -> GroupWindow:
        return GroupWindow(self.kind, self.size, self.slide, self.gap, _time_name(time_field), self.alias_name)

    def alias(self, name: str) -> GroupWindow:
        return GroupWindow(self.kind, self.size, self.slide, self.gap, self.time_col, name)

    def every(self, slide: Any) -> GroupWindow:
        if self.kind != "hop":
            raise TypeError("every() applies to Slide windows")
        return GroupWindow(self.kind, self.size, _ms(slide, "slide"), self.gap, self.time_col, self.alias_name)

    def definition(self) -> WindowDef:
        if self.time_col is None:
            raise PlanError("the window needs .on(time column)")
        if self.alias_name is None:
            raise PlanError("the window needs .alias(name) to be grouped on")
        if self.kind == "hop" and not self.slide:
            raise PlanError("a Slide window needs .every(slide)")
        return WindowDef(self.kind, self.time_col, self.size, self.slide, self.gap)


class Tumble:
    """``Tumble.over("10 min").on(col("ts")).alias("w")``."""

    @staticmethod
    def over(size: Any) -> GroupWindow:
        return GroupWindow("tumble", size=_ms(size, "Tumble size"))


class Slide:
    """``Slide.over("10 min").every("5 min").on(col("ts")).alias("w")``."""

    @staticmethod
    def over(size: Any) -> GroupWindow:
        return GroupWindow("hop", size=_ms(size, "Slide size"))


class Session:
    """``Session.with_gap("10 min").on(col("ts")).alias("w")``."""

    @staticmethod
    def with_gap(gap: Any) -> GroupWindow:
        return GroupWindow("session", gap=_ms(gap, "Session gap"))


class Ordering:
    def __init__(self, expr: Expr, ascending: bool):
        self.expr = expr
        self.ascending = ascending


Expr.asc = property(lambda self: Ordering(self, True))  # type: ignore[attr-defined]
Expr.desc = property(lambda self: Ordering(self, False))  # type: ignore[attr-defined]


# ---------------------------------------------------------------- aggregation planning

_WINDOW_COLS = ("window_start", "window_end", "window_time")


def build_aggregate(child: PlanNode, key_exprs: Sequence[Expr], items: Sequence[tuple[str, Expr]],
                    having: Expr | None, window: WindowDef | None, streaming: bool,
                    window_alias: str | None = None) -> PlanNode:
    """GROUP BY ``key_exprs`` then SELECT ``items`` (and HAVING): the plan
    pre-projects computed keys and aggregate arguments, aggregates, filters,
    then projects the select list over keys and aggregate results."""
    distinct = _distinct_calls(items, having)
    if distinct:
        return _distinct_aggregate(child, key_exprs, items, having, window, streaming, window_alias, distinct)
    aggs: dict[str, tuple[str, AggCall]] = {}
    keys: dict[str, str] = {}  # repr(expr) -> key column
    pre: list[tuple[str, Expr]] = []
    needs_pre = False
    key_names: list[str] = []
    for i, k in enumerate(key_exprs):
        if isinstance(k, Col) and window_alias is not None and k.col == window_alias:
            continue
        if window is not None and isinstance(k, Col) and k.col in _WINDOW_COLS:
            continue
        if k.contains_agg():
            raise PlanError(f"aggregate in GROUP BY: {k!r}")
        if isinstance(k, Col):
            if k.col not in child.schema.names:
                raise PlanError(f"GROUP BY column {k.col!r} not found (columns: {child.schema.names})")
            name = k.col
        else:
            name = f"__k{i}"
            needs_pre = True
        if name in key_names:
            continue
        keys[repr(k)] = name
        key_names.append(name)
        pre.append((name, k))

    def rewrite(e: Expr) -> Expr:
        def fn(node: Expr) -> Expr | None:
            if isinstance(node, AggCall):
                r = repr(node)
                out_cast = None
                if node.arg is not None and node.fn in ("sum", "avg", "min", "max"):
                    t = infer_type(node.arg, child.schema)
                    if pa.types.is_decimal(t):  # aggregated as DOUBLE, returned as DECIMAL(38, s)
                        node = AggCall(node.fn, Cast(node.arg, pa.float64()), node.params, node.udaf,
                                       node.distinct)
                        out_cast = pa.decimal128(38, t.scale if node.fn != "avg" else max(t.scale, 6))
                if r not in aggs:
                    aggs[r] = (f"__agg{len(aggs)}", node)
                ref: Expr = Col(aggs[r][0])
                return Cast(ref, out_cast) if out_cast is not None else ref
            if isinstance(node, WindowProp):
                if window is None or not (isinstance(node.ref, Col) and node.ref.col == window_alias):
                    raise PlanError(f"{node!r}: no group window named {node.ref!r}")
                if node.prop == "start":
                    return Col("window_start")
                if node.prop == "end":
                    return Col("window_end")
                return window_time_expr()
            if isinstance(node, Alias):
                return None
            r = repr(node)
            if r in keys:
                return Col(keys[r])
            if window is not None and isinstance(node, Col) and node.col == "window_time":
                return window_time_expr()
            return None
        return e.transform(fn)

    out_items = [(n, rewrite(e)) for n, e in items]
    having_r = rewrite(having) if having is not None else None
    allowed = set(key_names) | {n for n, _ in aggs.values()}
    if window is not None:
        allowed |= {"window_start", "window_end"}
    for n, e in out_items + ([("HAVING", having_r)] if having_r is not None else []):
        bad = sorted(e.columns() - allowed)
        if bad:
            raise PlanError(f"column {bad[0]!r} (in {n}) is neither grouped nor aggregated: "
                            f"add it to GROUP BY or use it inside an aggregate")
    if not aggs:  # e.g. SELECT k FROM t GROUP BY k: any aggregate keeps the groups
        aggs["COUNT(*)"] = ("__agg0", AggCall("count", None))
    agg_list = []
    for j, (name, call) in enumerate(aggs.values()):
        if call.arg is not None and call.arg.contains_agg():
            raise PlanError(f"nested aggregate {call!r}")
        if call.arg is None or isinstance(call.arg, Col):
            if isinstance(call.arg, Col) and call.arg.col not in child.schema.names:
                raise PlanError(f"column {call.arg.col!r} not found (columns: {child.schema.names})")
            agg_list.append((name, call))
            if call.arg is not None:
                pre.append((call.arg.col, call.arg))
        else:
            arg_name = f"__a{j}"
            pre.append((arg_name, call.arg))
            agg_list.append((name, AggCall(call.fn, Col(arg_name), call.params, call.udaf, call.distinct)))
            needs_pre = True
    src = child
    if needs_pre:
        seen: dict[str, Expr] = {}
        for n, e in pre:
            seen.setdefault(n, e)
        if window is not None:
            seen.setdefault(window.time_col, Col(window.time_col))
        src = Project(child, list(seen.items()))
    if having_r is None:
        # the select list is the aggregate's output in order (renames only): name the
        # aggregates after it and skip the projection
        names = (["window_start", "window_end"] if window is not None else []) + key_names + \
            [n for n, _ in agg_list]
        if len(out_items) == len(names) and all(isinstance(e, Col) and e.col == c
                                                for (_, e), c in zip(out_items, names)):
            nk = len(names) - len(agg_list)
            if all(n == c for (n, _), c in zip(out_items[:nk], names[:nk])):
                renamed = [(out_items[nk + i][0], call) for i, (_, call) in enumerate(agg_list)]
                if len({n for n, _ in out_items}) == len(out_items):
                    return Aggregate(src, key_names, renamed, window, streaming)
    node: PlanNode = Aggregate(src, key_names, agg_list, window, streaming)
    if having_r is not None:
        node = Filter(node, having_r)
    return Project(node, out_items)


def distinct_of(node: PlanNode, streaming: bool) -> PlanNode:
    """DISTINCT rows: a first-occurrence filter for insert-only input (append-only
    output in streaming mode too), a GROUP BY of every column otherwise."""
    node = insert_only_of(node)
    if not node.changelog:
        return Distinct(node)
    items = [(n, Col(n)) for n in node.schema.names]
    return build_aggregate(node, [Col(n) for n in node.schema.names], items, None, None, streaming)


def _distinct_calls(items: Sequence[tuple[str, Expr]], having: Expr | None) -> list[AggCall]:
    # MIN/MAX(DISTINCT x) = MIN/MAX(x)
    return [c for c in agg_calls(items, having) if c.distinct and c.fn not in ("min", "max")]


def _distinct_aggregate(child: PlanNode, key_exprs: Sequence[Expr], items: Sequence[tuple[str, Expr]],
                        having: Expr | None, window: WindowDef | None, streaming: bool,
                        window_alias: str | None, distinct: list[AggCall]) -> PlanNode:
    """``COUNT(DISTINCT x)`` and friends in two steps: group by the keys and ``x``
    (which makes ``x`` distinct per group), then aggregate ``x`` per group.

    Every aggregate of the query must then be a DISTINCT one over the same
    argument, and the keys plain columns. With a window in streaming mode, the
    second step is a non-windowed aggregate, so its result is a changelog
    (final state as expected)."""
    arg_reprs = {repr(c.arg) for c in distinct}
    plain = [c for c in agg_calls(items, having) if not c.distinct and c.fn not in ("min", "max")]
    if window is None and window_alias is None and (
            len(arg_reprs) != 1 or plain or not all(isinstance(k, Col) for k in key_exprs)):
        return expand_distinct(child, key_exprs, items, having, streaming, build_aggregate, _union)
    if len(arg_reprs) != 1:
        raise PlanError(f"DISTINCT aggregates over different arguments ({sorted(arg_reprs)}) are not supported")
    arg = distinct[0].arg
    if plain:
        raise PlanError(f"mixing DISTINCT and plain aggregates ({plain[0]!r}) is not supported")
    keys = [k for k in key_exprs if not (isinstance(k, Col) and (k.col == window_alias or
                                                                 (window is not None and k.col in _WINDOW_COLS)))]
    cols = [k for k in keys if isinstance(k, Col)]
    if len(cols) != len(keys):
        raise PlanError("DISTINCT aggregates need plain columns as GROUP BY keys")
    assert arg is not None, "a DISTINCT aggregate has an argument (the parser allows no COUNT(DISTINCT *))"
    inner_items: list[tuple[str, Expr]] = [(k.col, Col(k.col)) for k in cols] + [("__distinct", arg)]
    if window is None:
        inner: PlanNode = distinct_of(Project(child, inner_items), streaming)  # a changelog: a GROUP BY
    else:
        inner_items = [("window_start", Col("window_start")), ("window_end", Col("window_end"))] + inner_items
        if window_alias is not None:
            inner_items = [(n, WindowProp(Col(window_alias), n.split("_")[1]) if n.startswith("window_") else e)
                           for n, e in inner_items]
        inner = build_aggregate(child, list(key_exprs) + [arg], inner_items, None, window, streaming,
                                window_alias)

    def outer(e: Expr) -> Expr:
        def fn(node: Expr) -> Expr | None:
            if isinstance(node, AggCall):
                return AggCall(node.fn, Col("__distinct"), node.params, node.udaf, False)
            if isinstance(node, WindowProp):
                return Col("window_start") if node.prop == "start" else Col("window_end") \
                    if node.prop == "end" else window_time_expr()
            if window is not None and isinstance(node, Col) and node.col == "window_time":
                return window_time_expr()
            return None
        return e.transform(fn)

    outer_keys: list[Expr] = [Col(k.col) for k in cols]
    if window is not None:
        outer_keys = [Col("window_start"), Col("window_end")] + outer_keys
    return build_aggregate(inner, outer_keys, [(n, outer(e)) for n, e in items],
                           outer(having) if having is not None else None, None, streaming)


def _expand(exprs: Sequence[Any], schema: pa.Schema) -> list[Expr]:
    """The expressions of a select-like list; ``"*"`` expands to every column."""
    out: list[Expr] = []
    for e in exprs:
        if (isinstance(e, str) and e.strip() == "*") or (isinstance(e, Col) and e.col == "*"):
            out.extend(Col(n) for n in schema.names if n != OP_COLUMN)
        elif isinstance(e, str) and "," in e:
            out.extend(_expand([p.strip() for p in e.split(",")], schema))
        else:
            out.append(as_column_expr(e))
    return out


def _flink_names(exprs: Sequence[Expr], positions: Sequence[int]) -> list[str]:
    """Output names of a projection, as Flink's Table API derives them.

    An expression with a name keeps it (a column, an alias). Every aggregate
    and window property of the list is ``EXPR$<k>``, ``k`` counting them from
    0 in order of appearance, aliased or nested ones included and a repeated
    one once (``OperationExpressionsUtils``); one that is an item of its own
    keeps that name, and a second such use of it is ``EXPR$<k>_<n>``. A CAST
    of a named expression is ``<name>-<TYPE>``; anything else is ``_c<i>``,
    ``i`` its position in the projection (``ProjectionOperationFactory``)."""
    numbered: dict[str, str] = {}

    def number(e: Expr) -> None:
        if isinstance(e, (AggCall, WindowProp)):
            numbered.setdefault(repr(e), f"EXPR${len(numbered)}")
            return
        for c in e.children():
            number(c)

    def own_name(e: Expr) -> str | None:
        if isinstance(e, (AggCall, WindowProp)):
            return numbered[repr(e)]
        if isinstance(e, Cast):
            inner = own_name(e.expr)
            return f"{inner}-{to_sql(e.to)}" if inner is not None else None
        return e.name()

    for e in exprs:
        number(e)
    names: list[str] = []
    repeats = 0
    for e, i in zip(exprs, positions):
        name = own_name(e)
        if isinstance(e, (AggCall, WindowProp)) and name in names:
            name, repeats = f"{name}_{repeats}", repeats + 1
        names.append(name if name is not None else f"_c{i}")
    return names


def _named(exprs: Sequence[Any], schema: pa.Schema, first: int = 0) -> list[tuple[str, Expr]]:
    """(name, expr) for select-like lists (``_flink_names``); ``first``: the
    position in the projection of the list's first expression."""
    xs = _expand(exprs, schema)
    return list(zip(_flink_names(xs, range(first, first + len(xs))), xs))


# ---------------------------------------------------------------- Table

class Table:
    """A lazy query over the catalog of a :class:`TableEnvironment`."""

    def __init__(self, t_env: Any, node: PlanNode):
        self._t_env = t_env
        self._node = node

    # -- schema and columns ----------------------------------------------------------
    def get_schema(self) -> TableSchema:
        """The columns (PyFlink's TableSchema; also behaves as the pyarrow.Schema it wraps)."""
        return TableSchema(self._node.schema)

    def __getattr__(self, name: str) -> Expr:
        """``table.a``: the column ``a`` as an expression (``col("a")``); methods and
        attributes of the Table come first (a column named like one: ``table["name"]``)."""
        if name.startswith("__") or name in ("_node", "_t_env"):
            raise AttributeError(name)
        return self._column(name)

    def __getitem__(self, name: str) -> Expr:
        """``table["a"]``: the column ``a`` as an expression (``col("a")``)."""
        if not isinstance(name, str):
            raise TypeError(f"a Table's columns are named by strings, got {name!r}")
        return self._column(name)

    def _column(self, name: str) -> Expr:
        names = self._node.schema.names
        if name not in names:
            raise ColumnNotFound(f"the table has no column named {name!r} (columns: {', '.join(names)})")
        return Col(name)

    @property
    def schema(self) -> pa.Schema:
        return self._node.schema

    @property
    def columns(self) -> list[str]:
        return list(self._node.schema.names)

    def print_schema(self) -> None:
        lines = ["("]
        fields = list(self._node.schema)
        for i, f in enumerate(fields):
            rt = " *ROWTIME*" if f.name == self._node.time_col else ""
            lines.append(f"  `{f.name}` {to_sql(f.type)}{rt}{',' if i < len(fields) - 1 else ''}")
        lines.append(")")
        print("\n".join(lines))

    def _new(self, node: PlanNode) -> Table:
        return Table(self._t_env, node)

    @property
    def _streaming(self) -> bool:
        return self._t_env.mode == "streaming"

    # -- relational operations -------------------------------------------------
    def select(self, *fields: Any) -> Table:
        items = _named(fields, self.schema)
        if any(e.contains_agg() for _, e in items):
            return self._new(build_aggregate(self._node, [], items, None, None, self._streaming))
        return self._new(Project(self._node, items))

    def where(self, predicate: Any) -> Table:
        """Rows where ``predicate`` holds; a term ``col("a").in_(table)`` (or its
        negation ``~``), AND-ed with the rest, is a semi (anti) join."""
        node = self._node
        rest: list[Expr] = []
        for term in _conjuncts(as_expr(predicate)):
            inner, negated = term, False
            if isinstance(term, Call) and term.fn == "invert" and isinstance(term.args[0], InTable):
                inner, negated = term.args[0], True
            if isinstance(inner, InTable):
                node = _in_table(node, inner, negated, self._streaming)
            else:
                rest.append(term)
        for term in rest:
            node = Filter(node, term)
        return self._new(node)

    filter = where

    def add_columns(self, *fields: Any) -> Table:
        new = _named(fields, self.schema, first=len(self.schema.names))
        clash = [n for n, _ in new if n in self.schema.names]
        if clash:
            raise PlanError(f"add_columns: column {clash[0]!r} exists already (use add_or_replace_columns)")
        return self._new(Project(self._node, [(n, Col(n)) for n in self.schema.names] + new))

    def add_or_replace_columns(self, *fields: Any) -> Table:
        # unnamed expressions go after the columns and the new named ones before them (Flink's
        # ColumnOperationUtils.addOrReplaceColumns), which gives their _c<i> position
        xs = _expand(fields, self.schema)
        positions, at = [], len(self.schema.names)
        for x in xs:
            positions.append(at)
            at += x.name() not in self.schema.names
        new = dict(zip(_flink_names(xs, positions), xs))
        items = [(n, new.pop(n, Col(n))) for n in self.schema.names]
        return self._new(Project(self._node, items + list(new.items())))

    def drop_columns(self, *fields: Any) -> Table:
        drop = set()
        for f in fields:
            e = as_column_expr(f)
            if not isinstance(e, Col) or e.col not in self.schema.names:
                raise PlanError(f"drop_columns: no column {f!r} (columns: {self.schema.names})")
            drop.add(e.col)
        return self._new(Project(self._node, [(n, Col(n)) for n in self.schema.names if n not in drop]))

    def rename_columns(self, *fields: Any) -> Table:
        ren = {}
        for f in fields:
            if not isinstance(f, Alias) or not isinstance(f.expr, Col):
                raise PlanError(f"rename_columns takes col('old').alias('new'), got {f!r}")
            if f.expr.col not in self.schema.names:
                raise PlanError(f"rename_columns: no column {f.expr.col!r} (columns: {self.schema.names})")
            ren[f.expr.col] = f.alias_name
        return self._new(Project(self._node, [(ren.get(n, n), Col(n)) for n in self.schema.names]))

    def alias(self, field: str, *fields: str) -> Table:
        names = [field, *fields]
        if len(names) != len(self.schema.names):
            raise PlanError(f"alias: {len(names)} names for {len(self.schema.names)} columns")
        return self._new(Project(self._node, [(a, Col(n)) for a, n in zip(names, self.schema.names)]))

    def group_by(self, *fields: Any) -> GroupedTable:
        return GroupedTable(self, [as_column_expr(f) for f in fields], None)

    # -- row-based operations (fastops.table.rowops) ------------------------------------
    def map(self, func: Any) -> Table:
        """Each row through a scalar UDF: ``map(f(col("a"), col("b")))``, or ``map(f)``
        with a Row of every column (pandas UDF: a DataFrame); a ROW result is
        flattened into one column per field, named after the fields."""
        return self._new(map_of(self._node, func))

    def flat_map(self, func: Any) -> Table:
        """The rows a table function (``udtf``) yields for each row, its columns
        only: ``flat_map(split(col("s")))``, or ``flat_map(split)`` with a Row of
        every column."""
        return self._new(flat_map_of(self._node, func))

    def aggregate(self, func: Any) -> AggregatedTable:
        """One aggregate UDF over the whole table, its ROW result flattened into
        columns; close it with ``select``."""
        return AggregatedTable(self, aggregate_of(self._node, [], func, self._streaming))

    def flat_aggregate(self, func: Any) -> AggregatedTable:
        """A table aggregate UDF (``udtaf``) over the whole table; close it with ``select``."""
        return AggregatedTable(self, flat_aggregate_of(self._node, [], func, self._streaming))

    def window(self, window: GroupWindow) -> GroupWindowedTable:
        if not isinstance(window, GroupWindow):
            raise TypeError(f"window() takes Tumble / Slide / Session, got {type(window).__name__}")
        return GroupWindowedTable(self, window)

    def distinct(self) -> Table:
        return self._new(distinct_of(self._node, self._streaming))

    def over_window(self, *over_windows: OverWindowSpec) -> OverWindowedTable:
        """OVER aggregates (PyFlink): ``t.over_window(Over.partition_by(col("k")).order_by(col("ts"))
        .preceding(row_interval(2)).alias("w")).select(col("k"), col("v").sum.over(col("w")))``."""
        for w in over_windows:
            if not isinstance(w, OverWindowSpec):
                raise TypeError(f"over_window() takes Over...alias(name) windows, got {type(w).__name__}")
            if w.alias_name is None:
                raise PlanError("an OVER window needs .alias(name) to be referred to")
        return OverWindowedTable(self, list(over_windows))

    def _join(self, right: Table, condition: Any, how: str) -> Table:
        cond = as_expr(condition) if condition is not None else None
        return self._new(join_of(self._node, right._node, cond, how, self._streaming))

    def join(self, right: Table, join_predicate: Any = None) -> Table:
        return self._join(right, join_predicate, "inner")

    def left_outer_join(self, right: Table, join_predicate: Any = None) -> Table:
        return self._join(right, join_predicate, "left outer")

    def right_outer_join(self, right: Table, join_predicate: Any) -> Table:
        return self._join(right, join_predicate, "right outer")

    def full_outer_join(self, right: Table, join_predicate: Any) -> Table:
        return self._join(right, join_predicate, "full outer")

    def join_lateral(self, table_function_call: Any, join_predicate: Any = None) -> Table:
        if isinstance(table_function_call, TemporalTableFunctionCall):  # a temporal join
            cond = as_expr(join_predicate) if join_predicate is not None else None
            return self._new(table_function_call.join(self._node, cond, "inner", self._streaming))
        if join_predicate is not None:
            raise PlanError("join_lateral with a predicate is not supported; filter afterwards")
        return self._new(Lateral(self._node, self._lateral_call(table_function_call)))

    def _lateral_call(self, fn: Any) -> Any:
        """A table function given without arguments takes a Row of every column."""
        if isinstance(fn, UserDefinedTableFunction):
            return fn.row_call([n for n in self.schema.names if n != OP_COLUMN])
        return fn

    def left_outer_join_lateral(self, table_function_call: Any, join_predicate: Any = None) -> Table:
        if isinstance(table_function_call, TemporalTableFunctionCall):
            cond = as_expr(join_predicate) if join_predicate is not None else None
            return self._new(table_function_call.join(self._node, cond, "left outer", self._streaming))
        return self._new(Lateral(self._node, self._lateral_call(table_function_call), left_outer=True))

    def create_temporal_table_function(self, time_attribute: Any, primary_key: Any) -> TemporalTableFunction:
        """This table as a versioned table, a function of time (PyFlink's): join it
        with ``probe.join_lateral(fn(col("o_time")), col("k") == col("r_k"))``, the
        temporal join ``FOR SYSTEM_TIME AS OF o_time`` (``fastops.table.temporal``)."""
        keys = primary_key if isinstance(primary_key, (list, tuple)) else [primary_key]
        names = []
        for c in [time_attribute, *keys]:
            e = as_column_expr(c)
            if not isinstance(e, Col):
                raise PlanError(f"create_temporal_table_function takes columns, got {e!r}")
            names.append(e.col)
        return TemporalTableFunction(self, names[0], names[1:])

    def union_all(self, other: Table) -> Table:
        return self._new(_union([self._node, other._node]))

    def intersect(self, right: Table) -> Table:
        """The distinct rows found in both tables (SQL's INTERSECT)."""
        return self._new(SetOp(self._node, right._node, "intersect", False, self._streaming))

    def intersect_all(self, right: Table) -> Table:
        """Rows found in both tables, as many times as in both (INTERSECT ALL)."""
        return self._new(SetOp(self._node, right._node, "intersect", True, self._streaming))

    def minus(self, right: Table) -> Table:
        """The distinct rows of this table not in ``right`` (SQL's EXCEPT)."""
        return self._new(SetOp(self._node, right._node, "except", False, self._streaming))

    def minus_all(self, right: Table) -> Table:
        """This table's rows less as many copies as ``right`` has (EXCEPT ALL)."""
        return self._new(SetOp(self._node, right._node, "except", True, self._streaming))

    def union(self, other: Table) -> Table:
        return self.union_all(other).distinct()

    def order_by(self, *fields: Any) -> Table:
        keys = []
        for f in fields:
            o = f if isinstance(f, Ordering) else Ordering(as_column_expr(f), True)
            if not isinstance(o.expr, Col):
                raise PlanError(f"order_by takes columns, got {o.expr!r}")
            keys.append((o.expr.col, o.ascending))
        return self._new(Sort(self._node, keys))

    def limit(self, fetch: int, offset: int = 0) -> Table:
        node = self._node
        if isinstance(node, Sort) and node.limit is None:
            return self._new(Sort(node.inputs[0], node.keys, fetch, offset))
        return self._new(Sort(node, [], fetch, offset))

    def fetch(self, fetch: int) -> Table:
        return self.limit(fetch)

    def offset(self, offset: int) -> Table:
        return self.limit(None, offset)  # type: ignore[arg-type]

    # -- running ------------------------------------------------------------------
    def explain(self) -> str:
        """The logical plan, then the physical plan of the DataStream job."""
        stream = compile_plan(self._node, self._streaming, self._t_env.parallelism)
        return "== Logical Plan ==\n" + explain_plan(self._node) + "\n\n" + stream.explain()

    def _run(self) -> tuple[pa.Table, Any]:
        stream = compile_plan(self._node, self._streaming, self._t_env.parallelism)
        try:
            data = stream.collect(job_name="table query")
        except JobFailed as exc:
            cause = exc.__cause__
            if isinstance(cause, (UDFError, ExpressionError, PlanError)):
                raise type(cause)(str(cause)) from None
            raise
        return to_table(data, self._node.schema, self._node.changelog), stream.env.last_result

    def execute(self) -> TableResult:
        data, job = self._run()
        return TableResult(data, self._node.schema, self._streaming, job)

    def to_arrow(self) -> pa.Table:
        """Final rows as a pyarrow Table (a changelog is applied)."""
        return self.execute().to_arrow()

    def to_pandas(self) -> Any:
        return self.execute().to_pandas()

    def collect(self) -> CloseableIterator:
        return self.execute().collect()

    def execute_insert(self, table_path: str, overwrite: bool = False) -> TableResult:
        return self._t_env._insert_into(table_path, self, overwrite)

    def __repr__(self) -> str:
        return f"Table({', '.join(f'{f.name} {to_sql(f.type)}' for f in self.schema)})"


def _in_table(node: PlanNode, term: InTable, negated: bool, streaming: bool) -> PlanNode:
    """``expr IN (table)`` (``NOT IN`` if ``negated``) as a semi (null-aware anti) join."""
    right = term.table._node
    if len(right.schema) != 1:
        raise PlanError(f"in_(table) needs a table of one column, got {right.schema.names}")
    taken = set(node.schema.names)
    name = right.schema.names[0]
    new = name
    while new in taken:
        new = "_" + new
    right = Project(right, [(new, Col(name))])
    if isinstance(term.expr, Col):
        return SemiJoin(node, right, [term.expr.col], [new], negated, None, negated, streaming)
    pre = Project(node, [(n, Col(n)) for n in node.schema.names] + [("__in", term.expr)])
    out = SemiJoin(pre, right, ["__in"], [new], negated, None, negated, streaming)
    return Project(out, [(n, Col(n)) for n in node.schema.names])


def _union(nodes: list[PlanNode]) -> PlanNode:
    first = nodes[0].schema
    fixed = [nodes[0]]
    for n in nodes[1:]:
        if len(n.schema) != len(first):
            raise PlanError(f"UNION ALL of {len(first)} and {len(n.schema)} columns")
        if n.schema.names != first.names or n.schema.types != first.types:
            items = []
            for f, g in zip(first, n.schema):
                e: Expr = Col(g.name)
                if f.type != g.type:
                    e = Cast(e, f.type)
                items.append((f.name, e))
            n = Project(n, items)
        fixed.append(n)
    return Union(fixed)


class GroupedTable:
    def __init__(self, table: Table, keys: list[Expr], window: GroupWindow | None):
        self.table = table
        self.keys = keys
        self.window_ = window

    def select(self, *fields: Any) -> Table:
        t = self.table
        items = _named(fields, t.schema)
        w = self.window_.definition() if self.window_ is not None else None
        alias = self.window_.alias_name if self.window_ is not None else None
        if w is not None and not any(isinstance(k, Col) and k.col == alias for k in self.keys):
            raise PlanError(f"group_by must include the window alias {alias!r}")
        node = build_aggregate(t._node, self.keys, items, None, w, t._streaming, alias)
        return t._new(node)

    def _plain_keys(self, what: str) -> list[Expr]:
        if self.window_ is not None:
            raise PlanError(f"{what} over a group window is not supported; use select with aggregates")
        return self.keys

    def aggregate(self, func: Any) -> AggregatedTable:
        """An aggregate UDF per group, its ROW result flattened into columns after
        the keys (``group_by(col("a")).aggregate(f.alias("c", "d")).select(...)``)."""
        t = self.table
        return AggregatedTable(t, aggregate_of(t._node, self._plain_keys("aggregate"), func, t._streaming))

    def flat_aggregate(self, func: Any) -> AggregatedTable:
        """A table aggregate UDF (``udtaf``) per group: the keys, then the columns
        of the rows it emits; in streaming mode a changelog (a group's previous
        rows retracted, its new ones inserted)."""
        t = self.table
        return AggregatedTable(t, flat_aggregate_of(t._node, self._plain_keys("flat_aggregate"), func,
                                                    t._streaming))


class AggregatedTable:
    """The result of ``aggregate`` / ``flat_aggregate``, closed with ``select``
    (of its columns: the keys and the function's; no aggregates)."""

    def __init__(self, table: Table, node: PlanNode):
        self.table = table
        self.node = node

    def select(self, *fields: Any) -> Table:
        items = _named(fields, self.node.schema)
        if any(e.contains_agg() for _, e in items):
            raise PlanError("the select after aggregate / flat_aggregate takes no aggregate functions")
        return self.table._new(Project(self.node, items))


class OverWindowedTable:
    """A table with OVER windows defined (``over_window``): ``select`` computes
    aggregates ``.over(col(alias))`` for every row."""

    def __init__(self, table: Table, windows: list[OverWindowSpec]):
        self.table = table
        self.windows = {w.alias_name: w for w in windows}

    def select(self, *fields: Any) -> Table:
        t = self.table
        items = [(n, resolve_over_refs(e, self.windows)) for n, e in _named(fields, t.schema)]
        return t._new(plan_over(t._node, items, t._streaming))


class GroupWindowedTable:
    def __init__(self, table: Table, window: GroupWindow):
        self.table = table
        self.window_ = window

    def group_by(self, *fields: Any) -> GroupedTable:
        return GroupedTable(self.table, [as_column_expr(f) for f in fields], self.window_)
