"""User-defined functions: scalar (``udf``), aggregate (``udaf``) and table (``udtf``).

Scalar::

    @udf(result_type="BIGINT")                    # row-wise (PyFlink's default)
    def add(a, b): return a + b

    @udf(result_type="DOUBLE", func_type="pandas")  # vectorised: pandas Series in and out
    def scale(x): return x * 2.5

    @udf(result_type="DOUBLE", func_type="arrow")   # vectorised: pyarrow arrays in and out
    def plus1(x): return pc.add(x, 1)

A vectorised function gets one array (or Series) per argument for a whole
batch and must return one value per row. Results are checked: a wrong length
or a value that cannot become the declared type raises :class:`UDFError`,
naming the function, the declared type and what came back.

Aggregate, row-wise as PyFlink's (the accumulator is any picklable value,
often a mutable :class:`~fastops.table.row.Row`)::

    class WeightedAvg(AggregateFunction):
        def create_accumulator(self): return Row(0, 0)
        def accumulate(self, acc, value, weight):   # once per row, with its values
            acc[0] += value * weight
            acc[1] += weight
        def retract(self, acc, value, weight): ...  # a retracted row (updating inputs)
        def merge(self, acc, accs): ...             # accs: other accumulators
        def get_value(self, acc): return acc[0] / acc[1] if acc[1] else None
    wavg = udaf(WeightedAvg(), result_type="DOUBLE")

A class that sets ``batch_wise = True`` is called batch-wise instead:
``accumulate(acc, *arrays)`` once per group and batch with pyarrow arrays of
the group's rows, ``merge(acc, other)`` with one other accumulator; it may
return the new accumulator (or None if it changed it in place). Without the
marker an AggregateFunction is row-wise, so a class written for PyFlink runs
unchanged. The result type may also come from ``get_result_type()``.

``udaf(fn, result_type=..., func_type="pandas")`` also takes a plain function
of a pandas Series (all of a group's values at once, PyFlink's pandas UDAF);
it is then run over the group's values gathered at the end.

Table function: ``udtf(fn, result_types=[...], names=[...])``: ``fn(*row)``
yields tuples (or Rows), each becoming one output row (``Table.join_lateral``,
``Table.flat_map``).

Table aggregate function (``udtaf``, PyFlink's TableAggregateFunction, for
``group_by(...).flat_aggregate(...)``): row-wise ``accumulate`` (and
``retract``) as an AggregateFunction's, and ``emit_value(acc)`` yielding the
group's rows.
"""
from __future__ import annotations

import copy
import io
import pickle
from collections.abc import Sequence
from typing import Any, Callable

import numpy as np
import pyarrow as pa

from fastops.core.aggregates import SlotAggregate
from fastops.table.expressions import AggCall, Expr, ExpressionError, Pack, UdfCall, as_column_expr
from fastops.table.row import Row, to_python
from fastops.table.types import to_arrow, to_sql

__all__ = [
    "AggregateFunction",
    "MultiAlias",
    "ScalarFunction",
    "TableAggregateFunction",
    "TableFunction",
    "UDFError",
    "UserDefinedAggregateFunction",
    "UserDefinedScalarFunction",
    "UserDefinedTableAggregateFunction",
    "UserDefinedTableFunction",
    "result_type_of",
    "udaf",
    "udf",
    "udtaf",
    "udtf",
]


class UDFError(TypeError):
    """A user-defined function returned something that does not fit its declaration."""


class ScalarFunction:
    """Base class for class-style scalar UDFs: override ``eval``."""

    def eval(self, *args: Any) -> Any:
        raise NotImplementedError


class AggregateFunction:
    """Base class for aggregate UDFs (PyFlink's AggregateFunction).

    Row-wise (PyFlink's contract): ``accumulate(acc, *values)`` once per row
    with its values (``retract`` likewise for a retracted row), ``merge(acc,
    accs)`` with an iterable of other accumulators; they change ``acc`` in
    place. A subclass that sets ``batch_wise = True`` gets pyarrow arrays of a
    group's rows instead, and ``merge(acc, other)`` one other accumulator."""

    batch_wise: bool = False

    def create_accumulator(self) -> Any:
        raise NotImplementedError

    def accumulate(self, accumulator: Any, *values: Any) -> Any:
        """Add one row's values (batch-wise: a group's rows as pyarrow arrays) to ``accumulator``."""
        raise NotImplementedError

    def merge(self, accumulator: Any, other: Any) -> Any:
        raise NotImplementedError

    def get_value(self, accumulator: Any) -> Any:
        raise NotImplementedError


class TableAggregateFunction:
    """Base class for table aggregate UDFs (PyFlink's TableAggregateFunction):
    ``create_accumulator()``, row-wise ``accumulate(acc, *values)`` (and
    ``retract``), and ``emit_value(acc)`` yielding the group's rows (Rows,
    tuples, or single values for a one-column result)."""

    def create_accumulator(self) -> Any:
        raise NotImplementedError

    def accumulate(self, accumulator: Any, *values: Any) -> None:
        raise NotImplementedError

    def emit_value(self, accumulator: Any) -> Any:
        raise NotImplementedError


def result_type_of(t: Any) -> pa.DataType:
    """An Arrow type from a declared result type; a row type given as a schema
    (``DataTypes.ROW([...])``) becomes a struct."""
    if isinstance(t, pa.Schema):
        return pa.struct(list(t))
    return to_arrow(t)


class MultiAlias(Expr):
    """A call named with several names (``agg(col("b")).alias("c", "d")``): the
    names of the columns its row result is flattened into (``aggregate``,
    ``flat_aggregate``, ``map``)."""

    def __init__(self, expr: Expr, names: Sequence[str]):
        self.expr = expr
        self.names = list(names)

    def children(self):
        return [self.expr]

    def with_children(self, kids):
        return MultiAlias(kids[0], self.names)

    def contains_agg(self):
        return self.expr.contains_agg()

    def eval(self, batch):
        raise ExpressionError(f"{self!r}: several names apply to a row result of map / aggregate / "
                              "flat_aggregate, not inside an expression")

    def __repr__(self):
        return f"{self.expr!r} AS ({', '.join(self.names)})"


class ScalarUdfCall(UdfCall):
    """A scalar UDF call that may take several names (its row result flattened by ``map``)."""

    def alias(self, *names: str) -> Expr:
        return super().alias(*names) if len(names) == 1 else MultiAlias(self, names)


class UdafCall(AggCall):
    """A UDAF call that may take several names (its row result flattened by ``aggregate``)."""

    def alias(self, *names: str) -> Expr:
        return super().alias(*names) if len(names) == 1 else MultiAlias(self, names)


class TableFunction:
    def eval(self, *args: Any) -> Any:
        raise NotImplementedError


def _name_of(fn: Any, default: str) -> str:
    """A function's ``__name__`` (``default`` for a callable without one)."""
    return str(getattr(fn, "__name__", default))


def _to_array(value: Any, t: pa.DataType, name: str, n: int) -> pa.Array:
    """Check and convert a UDF result to ``n`` values of type ``t``."""
    declared = to_sql(t)
    try:  # deferred: pandas is an optional dependency (the table extra), and heavy
        import pandas as pd

        if isinstance(value, (pd.Series, pd.Index)):
            value = value.to_numpy()
    except ImportError:  # pragma: no cover
        pass
    if isinstance(value, pa.ChunkedArray):
        value = value.combine_chunks()
    if pa.types.is_struct(t):
        value = _struct_rows(value, t)
    if isinstance(value, (pa.Scalar, int, float, str, bool)) or value is None:
        raise UDFError(f"function {name!r} (declared {declared}) returned a single "
                       f"{type(value).__name__} for {n} rows; a vectorised function returns one value per row")
    length = len(value) if hasattr(value, "__len__") else None
    if length is None:
        raise UDFError(f"function {name!r} (declared {declared}) returned {type(value).__name__}, "
                       f"not an array of {n} values")
    if length != n:
        raise UDFError(f"function {name!r} (declared {declared}) returned {length} values for {n} input rows")
    try:
        if isinstance(value, pa.Array):
            if value.type == t:
                return value
            got = to_sql(value.type)
            return value.cast(t)
        if isinstance(value, np.ndarray):
            got = str(value.dtype)
            if value.dtype == object:
                return pa.array(value.tolist(), type=t)
            if (np.issubdtype(value.dtype, np.floating) and pa.types.is_integer(t)) or \
                    (value.dtype.kind in "USO" and not pa.types.is_string(t)):
                raise pa.ArrowInvalid(f"{value.dtype} values")
            return pa.array(value, type=t)
        got = "Python values"
        return pa.array(list(value), type=t)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError) as exc:
        sample = value[:3] if hasattr(value, "__getitem__") else value
        first = sample.to_pylist() if isinstance(sample, pa.Array) else list(sample)
        raise UDFError(f"function {name!r} is declared to return {declared} but returned {got} "
                       f"({exc}; first values: {first})") from None


def _struct_rows(value: Any, t: pa.DataType) -> Any:
    """Values of a ROW result as pyarrow takes them: Rows as tuples; a pandas
    DataFrame (a vectorised function's result) as a struct array of its columns."""
    if hasattr(value, "iloc") and hasattr(value, "columns"):  # a pandas DataFrame
        if value.shape[1] != t.num_fields:
            raise UDFError(f"a DataFrame of {value.shape[1]} columns for the {t.num_fields} fields of {to_sql(t)}")
        arrays = [pa.array(value.iloc[:, i].tolist(), type=t.field(i).type) for i in range(t.num_fields)]
        return pa.StructArray.from_arrays(arrays, fields=list(t))
    if isinstance(value, (list, tuple)):
        return [to_python(v) if isinstance(v, (Row, list)) else v for v in value]
    return value


class UserDefinedScalarFunction:
    """A scalar UDF; call it on expressions to use it in the Table API."""

    kind = "scalar"

    def __init__(self, fn: Any, result_type: Any, func_type: str = "general", name: str | None = None,
                 input_types: Any = None, deterministic: bool = True):
        if isinstance(fn, ScalarFunction):
            fn = fn.eval
        if not callable(fn):
            raise TypeError(f"udf needs a function, got {type(fn).__name__}")
        if result_type is None:
            raise TypeError("udf needs a result_type (e.g. 'BIGINT' or DataTypes.BIGINT())")
        self.alias_names: list[str] | None = None
        if func_type not in ("general", "pandas", "arrow"):
            raise ValueError(f"func_type must be 'general' (row-wise), 'pandas' or 'arrow', got {func_type!r}")
        self.fn = fn
        self.result_type = result_type_of(result_type)
        self.func_type = func_type
        self.name = name or _name_of(fn, "udf")

    def __call__(self, *args: Any) -> Any:
        return ScalarUdfCall(self, [as_column_expr(a) for a in args])

    def alias(self, *names: str) -> UserDefinedScalarFunction:
        """Names for the columns of the row result (``table.map(f.alias("a", "b"))``)."""
        out = copy.copy(self)
        out.alias_names = list(names)
        return out

    def evaluate_rows(self, arrays: Sequence[pa.Array], names: Sequence[str], n: int) -> pa.Array:
        """The function of whole rows (``table.map(f)``): a Row of every column
        per call (general), or one pandas DataFrame of the batch (pandas)."""
        if self.func_type == "pandas":
            import pandas as pd  # the table extra

            df = pd.DataFrame({nm: a.to_pandas() for nm, a in zip(names, arrays)})
            return _to_array(self.fn(df), self.result_type, self.name, n)
        if self.func_type == "arrow":
            return _to_array(self.fn(pa.RecordBatch.from_arrays(list(arrays), names=list(names))),
                             self.result_type, self.name, n)
        cols = [a.to_pylist() for a in arrays]
        fn = self.fn
        out = [fn(Row.of(vals, names)) for vals in zip(*cols)] if cols else [fn(Row()) for _ in range(n)]
        return _to_array(out, self.result_type, self.name, n)

    def evaluate(self, arrays: Sequence[pa.Array], n: int) -> pa.Array:
        if self.func_type == "arrow":
            out = self.fn(*arrays)
        elif self.func_type == "pandas":
            out = self.fn(*[a.to_pandas() for a in arrays])
        else:
            cols = [a.to_pylist() for a in arrays]
            fn = self.fn
            out = [fn(*row) for row in zip(*cols)] if cols else [fn() for _ in range(n)]
        return _to_array(out, self.result_type, self.name, n)

    def __repr__(self) -> str:
        return f"udf({self.name}, {to_sql(self.result_type)}, {self.func_type})"


class UserDefinedAggregateFunction:
    kind = "aggregate"

    def __init__(self, fn: Any, result_type: Any, func_type: str = "general", name: str | None = None):
        if result_type is None and callable(getattr(fn, "get_result_type", None)):
            result_type = fn.get_result_type()  # PyFlink: the function declares its result type
        if result_type is None:
            raise TypeError("udaf needs a result_type (or a get_result_type() method)")
        self.result_type = result_type_of(result_type)
        self.func_type = func_type
        self.alias_names: list[str] | None = None
        self.fn = fn
        if isinstance(fn, AggregateFunction) or (not callable(fn) and hasattr(fn, "accumulate")):
            self.impl = fn
            self.name = name or type(fn).__name__
        elif callable(fn):
            self.impl = _SeriesAggregate(fn, func_type)
            self.name = name or _name_of(fn, "udaf")
        else:
            raise TypeError(f"udaf needs an AggregateFunction or a function, got {type(fn).__name__}")

    def __call__(self, *args: Any) -> Any:
        if not args:
            raise TypeError(f"aggregate function {self.name!r} needs at least one argument "
                            "(without arguments it takes whole rows in Table.aggregate)")
        exprs = [as_column_expr(a) for a in args]
        if len(exprs) == 1 and getattr(self.impl, "batch_wise", False):
            return UdafCall("udaf", exprs[0], udaf=self)  # a group's non-null values
        # the arguments travel as one struct column: a row-wise function sees every
        # row, NULL values as None (as PyFlink calls accumulate)
        return UdafCall("udaf", Pack(exprs), udaf=self)

    def alias(self, *names: str) -> UserDefinedAggregateFunction:
        """Names for the columns of the row result (``aggregate(f.alias("c", "d"))``)."""
        out = copy.copy(self)
        out.alias_names = list(names)
        return out

    def slot_aggregate(self, column: str) -> SlotAggregate:
        return PythonSlotAggregate(self, column)

    def __repr__(self) -> str:
        return f"udaf({self.name}, {to_sql(self.result_type)})"


class _SeriesAggregate(AggregateFunction):
    """A function of all of a group's values: one pandas Series (or pyarrow
    array) per argument, their rows in the same order."""

    batch_wise = True

    def __init__(self, fn: Callable[..., Any], func_type: str):
        self.fn = fn
        self.func_type = func_type

    def create_accumulator(self):
        return []  # the batches of the arguments' values, one tuple of arrays per batch

    def accumulate(self, acc, *values):
        acc.append(values)
        return acc

    def merge(self, acc, other):
        return acc + other

    def get_value(self, acc):
        if acc:
            args = [pa.concat_arrays(list(parts)) for parts in zip(*acc)]
        else:
            args = [pa.array([], pa.null())]
        if self.func_type in ("pandas", "general"):
            v = self.fn(*[a.to_pandas() for a in args])
        else:
            v = self.fn(*args)
        return v.item() if isinstance(v, np.generic) else v


class PythonSlotAggregate(SlotAggregate):
    """A UDAF as a ``fastops.core.aggregates`` plug-in: one accumulator object per slot.

    ``update`` sorts the batch by slot and calls ``accumulate`` once per slot
    with that slot's rows (batch-wise, never per row)."""

    def __init__(self, fn: UserDefinedAggregateFunction, column: str):
        self.fn = fn
        self.column = column
        self.name = fn.name

    def output_type(self, input_type):
        return self.fn.result_type

    def new_state(self):
        return {}

    def update(self, state, slots, values):
        if len(slots) == 0:
            return state
        order = np.argsort(slots, kind="stable")
        s = slots[order]
        cuts = np.flatnonzero(np.diff(s)) + 1
        starts = np.concatenate([[0], cuts])
        ends = np.concatenate([cuts, [len(s)]])
        vals = values.take(pa.array(order))
        if isinstance(vals, pa.ChunkedArray):
            vals = vals.combine_chunks()
        packed = pa.types.is_struct(vals.type) and vals.type.num_fields and \
            vals.type.field(0).name.startswith("__arg")
        columns = [vals.field(i) for i in range(vals.type.num_fields)] if packed else [vals]
        impl = self.fn.impl
        if not getattr(impl, "batch_wise", False):  # PyFlink's row-wise accumulate: once per row
            pys = [c.to_pylist() for c in columns]
            accumulate = impl.accumulate
            for a, b in zip(starts.tolist(), ends.tolist()):
                slot = int(s[a])
                acc = state.get(slot)
                if acc is None:
                    acc = state[slot] = impl.create_accumulator()
                for i in range(a, b):
                    accumulate(acc, *[p[i] for p in pys])
            return state
        for a, b in zip(starts.tolist(), ends.tolist()):
            slot = int(s[a])
            acc = state.get(slot)
            if acc is None:
                acc = impl.create_accumulator()
            res = impl.accumulate(acc, *[c.slice(a, b - a) for c in columns])
            state[slot] = acc if res is None else res
        return state

    def merge(self, state, dst, src):
        impl = self.fn.impl
        row_wise = not getattr(impl, "batch_wise", False)
        for d, s in zip(dst.tolist(), src.tolist()):
            if s not in state:
                continue
            if row_wise:  # PyFlink's merge(acc, accumulators), in place
                if d not in state:
                    state[d] = impl.create_accumulator()
                impl.merge(state[d], [state[s]])
            elif d not in state:
                state[d] = impl.merge(impl.create_accumulator(), state[s])
            else:
                res = impl.merge(state[d], state[s])
                state[d] = state[d] if res is None else res
        return state

    def result(self, state, slots):
        impl = self.fn.impl
        vals = [to_python(impl.get_value(state[s])) if s in state else None for s in slots.tolist()]
        try:
            return pa.array(vals, type=self.fn.result_type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as exc:
            raise UDFError(f"aggregate function {self.fn.name!r} is declared to return "
                           f"{to_sql(self.fn.result_type)} but returned {vals[:3]} ({exc})") from None

    def reset(self, state, slots):
        for s in slots.tolist():
            state.pop(s, None)
        return state

    def to_bytes(self, state):
        buf = io.BytesIO()
        pickle.dump(state, buf)  # accumulator values (data), not code
        return buf.getvalue()

    def from_bytes(self, data):
        return pickle.loads(data)

    def describe(self):
        return f"udaf({self.fn.name!r}, {self.column!r})"


class UserDefinedTableFunction:
    kind = "table"

    def __init__(self, fn: Any, result_types: Sequence[Any], names: Sequence[str] | None = None,
                 name: str | None = None):
        if isinstance(fn, TableFunction):
            fn = fn.eval
        if not callable(fn):
            raise TypeError(f"udtf needs a function, got {type(fn).__name__}")
        if isinstance(result_types, pa.Schema):  # DataTypes.ROW([...]): its fields and names
            names = result_types.names if names is None else names
            result_types = list(result_types.types)
        if isinstance(result_types, (str, pa.DataType)):
            row = result_type_of(result_types)
            if pa.types.is_struct(row) and isinstance(result_types, str):  # 'ROW<a INT, b STRING>'
                names = [f.name for f in row] if names is None else names
                result_types = [f.type for f in row]
            else:
                result_types = [row]
        self.fn = fn
        self.result_types = [to_arrow(t) for t in result_types]
        self.names = list(names) if names is not None else [f"f{i}" for i in range(len(self.result_types))]
        if len(self.names) != len(self.result_types):
            raise ValueError("udtf: names and result_types differ in length")
        self.name = name or _name_of(fn, "udtf")

    def __call__(self, *args: Any) -> TableFunctionCall:
        return TableFunctionCall(self, [as_column_expr(a) for a in args])

    def alias(self, *names: str) -> UserDefinedTableFunction:
        """The function with its columns named ``names`` (``join_lateral(split.alias("a", "b"))``)."""
        if len(names) != len(self.result_types):
            raise ValueError(f"table function {self.name!r} has {len(self.result_types)} columns, "
                             f"got {len(names)} aliases")
        out = copy.copy(self)
        out.names = list(names)
        return out

    def row_call(self, columns: Sequence[str]) -> TableFunctionCall:
        """A call taking whole rows: ``fn(row)`` with a Row of ``columns`` (PyFlink's
        ``flat_map(f)`` / ``join_lateral(f)`` without arguments)."""
        call = TableFunctionCall(_RowInput(self, columns), [as_column_expr(c) for c in columns])
        call.names = list(self.names)
        return call

    def expand(self, arrays: Sequence[pa.Array], n: int) -> tuple[np.ndarray, list[pa.Array]]:
        """Row ``i`` yields rows; returns (source row index per output row, output columns)."""
        cols = [a.to_pylist() for a in arrays]
        idx: list[int] = []
        out: list[list] = [[] for _ in self.result_types]
        k = len(self.result_types)
        for i, row in enumerate(zip(*cols)):
            res = self.fn(*row)
            if res is None:
                continue
            for r in res:
                if isinstance(r, Row):
                    r = tuple(r)
                if k == 1 and not isinstance(r, (tuple, list)):
                    r = (r,)
                if len(r) != k:
                    raise UDFError(f"table function {self.name!r} declared {k} columns but yielded {r!r}")
                idx.append(i)
                for j in range(k):
                    out[j].append(to_python(r[j]))
        arrays_out = []
        for j, t in enumerate(self.result_types):
            try:
                arrays_out.append(pa.array(out[j], type=t))
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as exc:
                raise UDFError(f"table function {self.name!r} column {self.names[j]!r} is declared "
                               f"{to_sql(t)} but got {out[j][:3]} ({exc})") from None
        return np.asarray(idx, dtype=np.int64), arrays_out


class _RowInput:
    """A table function called with one Row of the given columns per input row."""

    def __init__(self, fn: UserDefinedTableFunction, columns: Sequence[str]):
        self.fn = fn
        self.columns = list(columns)
        self.name = fn.name
        self.result_types = fn.result_types
        self.names = fn.names

    def expand(self, arrays: Sequence[pa.Array], n: int) -> tuple[np.ndarray, list[pa.Array]]:
        inner = copy.copy(self.fn)
        user, names = self.fn.fn, self.columns
        inner.fn = lambda *vals: user(Row.of(vals, names))
        return inner.expand(arrays, n)


class TableFunctionCall:
    def __init__(self, fn: UserDefinedTableFunction | _RowInput, args: list):
        self.fn = fn
        self.args = args
        self.names = list(fn.names)

    def alias(self, *names: str) -> TableFunctionCall:
        if len(names) != len(self.fn.result_types):
            raise ValueError(f"table function {self.fn.name!r} has {len(self.fn.result_types)} columns, "
                             f"got {len(names)} aliases")
        self.names = list(names)
        return self


def udf(f: Any = None, result_type: Any = None, func_type: str = "general", name: str | None = None,
        input_types: Any = None, deterministic: bool = True) -> Any:
    """A scalar UDF from a function (also usable as ``@udf(result_type=...)``)."""
    if f is None:
        return lambda fn: UserDefinedScalarFunction(fn, result_type, func_type, name)
    return UserDefinedScalarFunction(f, result_type, func_type, name)


def udaf(f: Any = None, result_type: Any = None, func_type: str = "general", name: str | None = None,
         accumulator_type: Any = None, input_types: Any = None) -> Any:
    """An aggregate UDF from an :class:`AggregateFunction` or a function of a Series."""
    if f is None:
        return lambda fn: UserDefinedAggregateFunction(fn, result_type, func_type, name)
    return UserDefinedAggregateFunction(f, result_type, func_type, name)


def udtf(f: Any = None, result_types: Any = None, names: Sequence[str] | None = None,
         name: str | None = None, input_types: Any = None) -> Any:
    """A table UDF: ``fn(*row)`` yields tuples (one output row each)."""
    if f is None:
        return lambda fn: UserDefinedTableFunction(fn, result_types, names, name)
    return UserDefinedTableFunction(f, result_types, names, name)


class UserDefinedTableAggregateFunction:
    """A table aggregate UDF (``udtaf``): used by ``flat_aggregate``; its result
    type is a ROW (one column per field) or a single type (one column ``f0``)."""

    kind = "table_aggregate"

    def __init__(self, fn: Any, result_type: Any = None, name: str | None = None):
        if not hasattr(fn, "accumulate") or not hasattr(fn, "emit_value"):
            raise TypeError(f"udtaf needs a TableAggregateFunction (accumulate, emit_value), got {type(fn).__name__}")
        if result_type is None and callable(getattr(fn, "get_result_type", None)):
            result_type = fn.get_result_type()
        if result_type is None:
            raise TypeError("udtaf needs a result_type (or a get_result_type() method)")
        self.impl = fn
        self.result_type = result_type_of(result_type)
        self.name = name or type(fn).__name__
        self.alias_names: list[str] | None = None

    def __call__(self, *args: Any) -> TableAggregateCall:
        return TableAggregateCall(self, [as_column_expr(a) for a in args])

    def alias(self, *names: str) -> UserDefinedTableAggregateFunction:
        """Names for the result's columns (``flat_aggregate(top2.alias("v"))``)."""
        out = copy.copy(self)
        out.alias_names = list(names)
        return out

    def __repr__(self) -> str:
        return f"udtaf({self.name}, {to_sql(self.result_type)})"


class TableAggregateCall:
    """``udtaf(args)``: a table aggregate over expressions of each row."""

    def __init__(self, fn: UserDefinedTableAggregateFunction, args: list):
        self.fn = fn
        self.args = args
        self.alias_names: list[str] | None = None

    def alias(self, *names: str) -> TableAggregateCall:
        out = TableAggregateCall(self.fn, self.args)
        out.alias_names = list(names)
        return out


def udtaf(f: Any = None, result_type: Any = None, accumulator_type: Any = None, name: str | None = None,
          input_types: Any = None) -> Any:
    """A table aggregate UDF from a :class:`TableAggregateFunction` (PyFlink's ``udtaf``)."""
    if f is None:
        return lambda fn: UserDefinedTableAggregateFunction(fn, result_type, name)
    return UserDefinedTableAggregateFunction(f, result_type, name)
