"""PyFlink's row-based operations: ``map``, ``flat_map``, ``aggregate``, ``flat_aggregate``.

==================  ==========================================================
operation           plan
==================  ==========================================================
``map(f)``          a projection computing ``f`` (its arguments, or a Row of
                    every column when ``f`` is given without arguments), then
                    its ROW result flattened into one column per field
``flat_map(f)``     the lateral join of ``f`` (a table function) keeping only
                    its columns
``aggregate(f)``    :class:`RowAggregate`: per group, an AggregateFunction's
                    ``get_value`` (a ROW result flattened into columns)
``flat_aggregate``  :class:`RowAggregate`: per group, the rows a
                    TableAggregateFunction's ``emit_value`` yields
==================  ==========================================================

Output columns are named by the fields of the function's ROW result type (or
the names given with ``.alias(...)``); a non-ROW result is one column, ``_c0``
for ``map`` / ``aggregate`` and ``f0`` for ``flat_aggregate``.

:class:`RowAggregateOperator` keeps one accumulator per group and calls the
function once per row (``accumulate``, or ``retract`` for a ``-U`` / ``-D``
row of an updating input). In batch mode it emits each group's rows at the
end of input. In streaming mode it emits after each batch, for every group
the batch touched: ``aggregate`` as a GROUP BY does (``+I`` for a new group,
``-U`` old / ``+U`` new when the value changed, ``-D`` when every row of the
group was retracted); ``flat_aggregate`` retracts the group's previously
emitted rows (``-D``) and inserts the ones ``emit_value`` yields now (``+I``),
as Flink's table aggregation does.
"""
from __future__ import annotations

import pickle
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from fastops.core.partitioning import KeyGroups
from fastops.operators.base import Operator
from fastops.table.changelog import OP_COLUMN
from fastops.table.expressions import Alias, Call, Col, Expr, Lit, broadcast
from fastops.table.functions import (
    MultiAlias,
    TableAggregateCall,
    TableFunctionCall,
    UdfCall,
    UDFError,
    UserDefinedAggregateFunction,
    UserDefinedScalarFunction,
    UserDefinedTableAggregateFunction,
    UserDefinedTableFunction,
    result_type_of,
)
from fastops.table.plan import Lateral, PlanError, PlanNode, Project, insert_only_of
from fastops.table.row import Row, to_python
from fastops.table.types import to_sql

__all__ = ["RowAggregate", "RowAggregateOperator", "aggregate_of", "flat_aggregate_of", "flat_map_of", "map_of"]


def _data_columns(node: PlanNode) -> list[str]:
    return [n for n in node.schema.names if n != OP_COLUMN]


def _result_columns(t: pa.DataType, names: Sequence[str] | None, scalar_name: str,
                    what: str) -> list[pa.Field]:
    """The output columns of a result of type ``t``: its fields if a ROW, else one."""
    fields = list(t) if pa.types.is_struct(t) else [pa.field(scalar_name, t)]
    if names is not None:
        if len(names) != len(fields):
            raise PlanError(f"{what}: {len(names)} names {list(names)} for the {len(fields)} columns "
                            f"of its result {to_sql(t)}")
        fields = [f.with_name(n) for f, n in zip(fields, names)]
    return fields


class RowUdfCall(Expr):
    """A scalar UDF of whole rows: a Row of ``columns`` per call (``map(f)``)."""

    def __init__(self, udf: UserDefinedScalarFunction, columns: Sequence[str]):
        self.udf = udf
        self.cols = list(columns)

    def columns(self) -> set[str]:
        return set(self.cols)

    def eval(self, batch: Any) -> Any:
        n = batch.num_rows
        if n == 0:
            return pa.array([], self.udf.result_type)
        return self.udf.evaluate_rows([batch.column(c) for c in self.cols], self.cols, n)

    def __repr__(self) -> str:
        return f"{self.udf.name}(*)"


def map_of(node: PlanNode, func: Any) -> PlanNode:
    """``Table.map``: a scalar UDF call (or a UDF, given whole rows), its ROW result flattened."""
    names = None
    if isinstance(func, MultiAlias):
        func, names = func.expr, func.names
    if isinstance(func, UserDefinedScalarFunction):
        names = func.alias_names if names is None else names
        call: Expr = RowUdfCall(func, _data_columns(node))
        t = func.result_type
        what = func.name
    elif isinstance(func, UdfCall):
        call, t, what = func, func.udf.result_type, func.udf.name
    else:
        raise TypeError(f"map() takes a scalar UDF or a call of one, got {func!r}")
    fields = _result_columns(t, names, "_c0", f"map({what})")
    if not pa.types.is_struct(t):
        return Project(node, [(fields[0].name, call)])
    inner = Project(node, [("__map", call)])
    return Project(inner, [(f.name, Call("struct_field", [Col("__map"), Lit(src.name)]))
                           for f, src in zip(fields, t)])


def flat_map_of(node: PlanNode, func: Any) -> PlanNode:
    """``Table.flat_map``: the rows a table function yields, its columns only."""
    if isinstance(func, UserDefinedTableFunction):
        call = func.row_call(_data_columns(node))
    elif isinstance(func, TableFunctionCall):
        call = func
    else:
        raise TypeError(f"flat_map() takes a table function (udtf) or a call of one, got {func!r}")
    out_names = list(call.names)
    inner = TableFunctionCall(call.fn, call.args)
    inner.names = [f"__f{i}" for i in range(len(out_names))]
    lateral = Lateral(node, inner)
    return Project(lateral, [(n, Col(f"__f{i}")) for i, n in enumerate(out_names)])


# ---------------------------------------------------------------- aggregate / flat_aggregate

class _PandasRows:
    """A vectorised (pandas) aggregate function as a row-wise one: the group's
    rows are kept, and the function gets them as a DataFrame (whole rows) or
    one Series per argument."""

    def __init__(self, fn: Any, columns: Sequence[str] | None, nargs: int):
        self.fn = fn
        self.columns = list(columns) if columns is not None else None
        self.nargs = nargs

    def create_accumulator(self) -> list:
        return []

    def accumulate(self, acc: list, *values: Any) -> None:
        acc.append(tuple(values[0]) if self.columns is not None else values)

    def retract(self, acc: list, *values: Any) -> None:
        row = tuple(values[0]) if self.columns is not None else values
        if row in acc:
            acc.remove(row)

    def get_value(self, acc: list) -> Any:
        import pandas as pd  # the table extra

        if self.columns is not None:
            v = self.fn(pd.DataFrame(acc, columns=self.columns))
        else:
            v = self.fn(*[pd.Series([r[i] for r in acc]) for i in range(self.nargs)])
        return v.item() if isinstance(v, np.generic) else v


class RowAggregate(PlanNode):
    """GROUP BY ``keys`` with a row-wise aggregate (``table_agg`` False: one row
    per group) or table aggregate function (rows per group).

    ``args`` are the function's argument expressions, or None: it takes a Row
    of ``columns`` (the input table's). Output: the keys, then the result's columns; in
    streaming mode a changelog."""

    def __init__(self, child: PlanNode, keys: Sequence[str], columns: Sequence[str], impl: Any,
                 args: Sequence[Expr] | None,
                 result_fields: Sequence[pa.Field], table_agg: bool, streaming: bool, name: str,
                 row_result: bool):
        super().__init__()
        child = insert_only_of(child)
        for k in keys:
            if k not in child.schema.names:
                raise PlanError(f"GROUP BY column {k!r} not found (columns: {_data_columns(child)})")
        if child.changelog and not callable(getattr(impl, "retract", None)):
            raise PlanError(f"{name} over an updating (changelog) table needs a retract() method")
        self.inputs = [child]
        self.keys = list(keys)
        self.impl = impl
        self.args = None if args is None else list(args)
        self.row_columns = list(columns)
        self.result_fields = list(result_fields)
        self.table_agg = table_agg
        self.streaming = streaming
        self.fn_name = name
        self.row_result = row_result
        clash = [f.name for f in self.result_fields if f.name in self.keys]
        if clash:
            raise PlanError(f"{name}: result column {clash[0]!r} clashes with a grouping key; rename it "
                            "with .alias(...)")
        self.schema = pa.schema([child.schema.field(k) for k in self.keys] + self.result_fields)
        self.changelog = streaming
        self.time_col = None

    def label(self) -> str:
        kind = "GroupTableAggregate" if self.table_agg else "GroupAggregate"
        return (f"{kind}(groupBy=[{', '.join(self.keys)}], select=[{self.fn_name}], "
                f"fields=[{', '.join(self.schema.names)}])")

    def compile(self, compiler: Any) -> Any:
        s = compiler.build(self.inputs[0])
        keys, impl, args, cols = self.keys, self.impl, self.args, self.row_columns
        fields, table_agg, streaming = self.result_fields, self.table_agg, self.streaming
        out = self.schema
        name, row_result = self.fn_name, self.row_result
        factory = lambda: RowAggregateOperator(keys, impl, args, cols, fields, table_agg, streaming, out, name,
                                               row_result)
        label = "flat_aggregate" if table_agg else "aggregate"
        if keys:
            return s.key_by(*keys).transform(label, factory)
        return s._then(label, factory, 1, "forward" if s.node.parallelism == 1 else "rebalance")


class RowAggregateOperator(Operator):
    """Accumulators per group, called once per row; emits per batch (streaming,
    a changelog) or at end of input (batch)."""

    def __init__(self, keys: Sequence[str], impl: Any, args: Sequence[Expr] | None, row_columns: Sequence[str],
                 result_fields: Sequence[pa.Field], table_agg: bool, streaming: bool, schema: pa.Schema,
                 fn_name: str, row_result: bool):
        self.keys = list(keys)
        self.impl = impl
        self.args = None if args is None else list(args)
        self.row_columns = list(row_columns)
        self.result_fields = list(result_fields)
        self.table_agg = table_agg
        self.streaming = streaming
        self.schema = schema
        self.fn_name = fn_name
        self.row_result = row_result
        self.name = "flat_aggregate" if table_agg else "aggregate"
        self.accs: dict[tuple, Any] = {}
        self.counts: dict[tuple, int] = {}  # accumulated minus retracted rows per group
        self.emitted: dict[tuple, list[tuple]] = {}  # the rows last emitted per group (streaming)

    # -- results --------------------------------------------------------------------
    def _rows(self, acc: Any) -> list[tuple]:
        """The result rows of an accumulator (values of the result columns)."""
        k = len(self.result_fields)
        if self.table_agg:
            res = self.impl.emit_value(acc)
            emitted = [to_python(r) for r in (res if res is not None else ())]
        else:
            emitted = [to_python(self.impl.get_value(acc))]
        out = []
        for r in emitted:
            if not self.row_result or (k == 1 and not isinstance(r, (tuple, list))):
                r = (r,)
            elif r is None:
                r = (None,) * k
            if not isinstance(r, (tuple, list)) or len(r) != k:
                raise UDFError(f"{self.fn_name!r} declared {k} result columns "
                               f"({', '.join(f.name for f in self.result_fields)}) but gave {r!r}")
            out.append(tuple(r))
        return out

    def _batch(self, keys: list[tuple], rows: list[tuple], ops: list[int] | None) -> pa.RecordBatch:
        arrays = []
        for j, f in enumerate(self.schema):
            vals = [k[j] for k in keys] if j < len(self.keys) else [r[j - len(self.keys)] for r in rows]
            try:
                arrays.append(pa.array(vals, f.type))
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as exc:
                raise UDFError(f"{self.fn_name!r}: column {f.name!r} is declared {to_sql(f.type)} but got "
                               f"{vals[:3]} ({exc})") from None
        names = list(self.schema.names)
        if ops is not None:
            arrays.append(pa.array(ops, pa.int8()))
            names.append(OP_COLUMN)
        return pa.RecordBatch.from_arrays(arrays, names=names)

    # -- input ------------------------------------------------------------------------
    def process(self, batch: pa.RecordBatch) -> list:
        n = batch.num_rows
        if n == 0:
            return []
        key_cols = [batch.column(k).to_pylist() for k in self.keys]
        if self.args is None:
            cols = [batch.column(c).to_pylist() for c in self.row_columns]
            names = self.row_columns
            values: list[tuple] = [(Row.of(v, names),) for v in zip(*cols)] if cols else [(Row(),)] * n
        else:
            arg_cols = [broadcast(a.eval(batch), n).to_pylist() for a in self.args]
            values = list(zip(*arg_cols)) if arg_cols else [()] * n
        op_i = batch.schema.get_field_index(OP_COLUMN)
        ops = batch.column(op_i).to_numpy(zero_copy_only=False) if op_i >= 0 else None
        impl = self.impl
        touched: dict[tuple, None] = {}
        for i in range(n):
            key = tuple(kc[i] for kc in key_cols)
            acc = self.accs.get(key)
            if acc is None:
                acc = self.accs[key] = impl.create_accumulator()
            if ops is not None and ops[i] in (1, 3):
                impl.retract(acc, *values[i])
                self.counts[key] = self.counts.get(key, 0) - 1
            else:
                impl.accumulate(acc, *values[i])
                self.counts[key] = self.counts.get(key, 0) + 1
            touched[key] = None
        if not self.streaming:
            return []
        return self._emit_changes(list(touched))

    def _emit_changes(self, keys: list[tuple]) -> list:
        out_keys: list[tuple] = []
        out_rows: list[tuple] = []
        out_ops: list[int] = []

        def put(key: tuple, rows: list[tuple], op: int) -> None:
            for r in rows:
                out_keys.append(key)
                out_rows.append(r)
                out_ops.append(op)

        for key in keys:
            old = self.emitted.get(key)
            if self.counts.get(key, 0) <= 0:  # every row of the group retracted: the group is gone
                if old:
                    put(key, old, 3)
                self.emitted.pop(key, None)
                self.accs.pop(key, None)
                self.counts.pop(key, None)
                continue
            new = self._rows(self.accs[key])
            if self.table_agg:
                if old:
                    put(key, old, 3)
                put(key, new, 0)
            elif old is None:
                put(key, new, 0)
            elif old != new:
                put(key, old, 1)
                put(key, new, 2)
            self.emitted[key] = new
        if not out_rows:
            return []
        return [self._batch(out_keys, out_rows, out_ops)]

    def close(self) -> list:
        if self.streaming:
            return []
        if not self.accs:
            # a global aggregate over no rows still gives its one row, as SQL's
            if self.keys or self.table_agg or self.ctx.task_index != 0:
                return []
            return [self._batch([()], self._rows(self.impl.create_accumulator()), None)]
        out_keys, out_rows = [], []
        for key, acc in self.accs.items():
            for r in self._rows(acc):
                out_keys.append(key)
                out_rows.append(r)
        if not out_rows:
            return []
        return [self._batch(out_keys, out_rows, None)]

    # -- state ------------------------------------------------------------------------
    def snapshot(self) -> bytes | None:
        return pickle.dumps((self.accs, self.counts, self.emitted))  # accumulator values (data), not code

    def restore(self, state: bytes | None) -> None:
        if state is not None:
            self.accs, self.counts, self.emitted = pickle.loads(state)

    def restore_groups(self, states: Sequence[bytes | None], groups: KeyGroups) -> None:
        """At another parallelism: the groups of the keys in ``groups``, from every earlier task's state."""
        given = [pickle.loads(s) for s in states if s is not None]
        if not self.keys and len(given) > 1:
            raise ValueError(f"operator {self.name!r} aggregates without a key, so the state of "
                             f"{len(given)} tasks cannot be shared out again")
        self.accs, self.counts, self.emitted = {}, {}, {}
        for accs, counts, emitted in given:
            keys = list(accs)
            if self.keys and keys:
                cols = {k: pa.array([key[i] for key in keys], self.schema.field(k).type)
                        for i, k in enumerate(self.keys)}
                owned = np.asarray(groups.mask(pa.table(cols), self.keys), dtype=bool)
                keys = [key for key, mine in zip(keys, owned) if mine]
            for key in keys:
                self.accs[key] = accs[key]
                self.counts[key] = counts.get(key, 0)
                if key in emitted:
                    self.emitted[key] = emitted[key]


def _keys_and_child(child: PlanNode, keys: Sequence[Expr]) -> tuple[PlanNode, list[str], list[str]]:
    """``child`` with its computed grouping keys added as columns (an aliased key
    under its alias, another as ``__k<i>``), the key columns, and the input
    columns (those a function given whole rows sees)."""
    columns = _data_columns(child)
    names: list[str] = []
    extra: list[tuple[str, Expr]] = []
    for i, k in enumerate(keys):
        if isinstance(k, Col):
            names.append(k.col)
            continue
        name = f"__k{i}"
        if isinstance(k, Alias):
            name, k = k.alias_name, k.expr
        if name in columns:
            raise PlanError(f"grouping key {name!r} clashes with a column of the table; give it another alias")
        names.append(name)
        extra.append((name, k))
    if extra:
        child = Project(child, [(n, Col(n)) for n in columns] + extra)
    return child, names, columns


def aggregate_of(child: PlanNode, keys: Sequence[Expr], func: Any, streaming: bool) -> PlanNode:
    """``GroupedTable.aggregate`` / ``Table.aggregate``: the keys, then the
    aggregate's result columns."""
    names = None
    if isinstance(func, MultiAlias):
        func, names = func.expr, func.names
    if isinstance(func, UserDefinedAggregateFunction):
        udaf, args = func, None
        names = func.alias_names if names is None else names
    elif isinstance(func, Expr) and getattr(func, "udaf", None) is not None:
        udaf = func.udaf  # type: ignore[attr-defined]
        arg = func.arg  # type: ignore[attr-defined]
        args = list(arg.args) if type(arg).__name__ == "Pack" else [arg]
    else:
        raise TypeError(f"aggregate() takes an aggregate UDF (udaf) or a call of one, got {func!r}")
    fields = _result_columns(udaf.result_type, names, "_c0", f"aggregate({udaf.name})")
    child, key_names, columns = _keys_and_child(child, keys)
    impl = udaf.impl
    if getattr(impl, "batch_wise", False):
        fn = getattr(impl, "fn", None)
        if fn is None or udaf.func_type != "pandas":
            raise PlanError(f"aggregate({udaf.name}): a batch-wise AggregateFunction is not supported here; "
                            "write accumulate() row-wise (PyFlink's contract)")
        impl = _PandasRows(fn, columns if args is None else None, len(args or ()))
    return RowAggregate(child, key_names, columns, impl, args, fields, False, streaming, udaf.name,
                        pa.types.is_struct(udaf.result_type))


def flat_aggregate_of(child: PlanNode, keys: Sequence[Expr], func: Any, streaming: bool) -> PlanNode:
    """``GroupedTable.flat_aggregate`` / ``Table.flat_aggregate``: the keys, then
    the columns of the rows the table aggregate emits."""
    if isinstance(func, UserDefinedTableAggregateFunction):
        udtaf, args, names = func, None, func.alias_names
    elif isinstance(func, TableAggregateCall):
        udtaf, args, names = func.fn, list(func.args), func.alias_names or func.fn.alias_names
    else:
        raise TypeError(f"flat_aggregate() takes a table aggregate UDF (udtaf) or a call of one, got {func!r}")
    t = result_type_of(udtaf.result_type)
    fields = _result_columns(t, names, "f0", f"flat_aggregate({udtaf.name})")
    child, key_names, columns = _keys_and_child(child, keys)
    return RowAggregate(child, key_names, columns, udtaf.impl, args, fields, True, streaming, udtaf.name,
                        pa.types.is_struct(t))
