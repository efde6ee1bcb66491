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

Aggregate (batch-wise; the accumulator is any picklable value)::

    class WeightedAvg(AggregateFunction):
        def create_accumulator(self): return [0.0, 0]
        def accumulate(self, acc, values): ...   # values: a pyarrow Array of one group's rows
        def merge(self, acc, other): ...
        def get_value(self, acc): ...
    wavg = udaf(WeightedAvg(), result_type="DOUBLE")

``udaf(fn, result_type=..., func_type="pandas")`` also takes a plain function
of a pandas Series (all of a group's values at once, PyFlink's pandas UDAF);
it is then run over the group's values gathered at the end.

Table function: ``udtf(fn, result_types=[...], names=[...])``: ``fn(*row)``
yields tuples, each becoming one output row (``Table.join_lateral``).
"""
from __future__ import annotations

import io
import pickle
from collections.abc import Sequence
from typing import Any, Callable

import numpy as np
import pyarrow as pa

from fastops.core.aggregates import SlotAggregate
from fastops.table.expressions import AggCall, Pack, UdfCall, as_column_expr
from fastops.table.types import to_arrow, to_sql

__all__ = [
    "AggregateFunction",
    "ScalarFunction",
    "TableFunction",
    "UDFError",
    "UserDefinedAggregateFunction",
    "UserDefinedScalarFunction",
    "UserDefinedTableFunction",
    "udaf",
    "udf",
    "udtf",
]


class UDFError(TypeError):
    """A user-defined function returned something that does not fit its declaration."""


class ScalarFunction:
    """Base class for class-style scalar UDFs: override ``eval``."""

    def eval(self, *args: Any) -> Any:
        raise NotImplementedError


class AggregateFunction:
    """Base class for aggregate UDFs (PyFlink's AggregateFunction, batch-wise)."""

    def create_accumulator(self) -> Any:
        raise NotImplementedError

    def accumulate(self, accumulator: Any, *values: Any) -> Any:
        """Add a group's rows (pyarrow arrays) to ``accumulator``; return it (or None if changed in place)."""
        raise NotImplementedError

    def merge(self, accumulator: Any, other: Any) -> Any:
        raise NotImplementedError

    def get_value(self, accumulator: Any) -> Any:
        raise NotImplementedError


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
        if func_type not in ("general", "pandas", "arrow"):
            raise ValueError(f"func_type must be 'general' (row-wise), 'pandas' or 'arrow', got {func_type!r}")
        self.fn = fn
        self.result_type = to_arrow(result_type)
        self.func_type = func_type
        self.name = name or _name_of(fn, "udf")

    def __call__(self, *args: Any) -> Any:
        return UdfCall(self, [as_column_expr(a) for a in args])

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
        if result_type is None:
            raise TypeError("udaf needs a result_type")
        self.result_type = to_arrow(result_type)
        if isinstance(fn, AggregateFunction):
            self.impl = fn
            self.name = name or type(fn).__name__
        elif callable(fn):
            self.impl = _SeriesAggregate(fn, func_type)
            self.name = name or _name_of(fn, "udaf")
        else:
            raise TypeError(f"udaf needs an AggregateFunction or a function, got {type(fn).__name__}")

    def __call__(self, *args: Any) -> Any:
        if not args:
            raise TypeError(f"aggregate function {self.name!r} needs at least one argument")
        exprs = [as_column_expr(a) for a in args]
        if len(exprs) == 1:
            return AggCall("udaf", exprs[0], udaf=self)
        return AggCall("udaf", Pack(exprs), udaf=self)  # several arguments travel as one struct column

    def slot_aggregate(self, column: str) -> SlotAggregate:
        return PythonSlotAggregate(self, column)

    def __repr__(self) -> str:
        return f"udaf({self.name}, {to_sql(self.result_type)})"


class _SeriesAggregate(AggregateFunction):
    """A function of all of a group's values: one pandas Series (or pyarrow
    array) per argument, their rows in the same order."""

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
        for d, s in zip(dst.tolist(), src.tolist()):
            if s not in state:
                continue
            if d not in state:
                state[d] = impl.merge(impl.create_accumulator(), state[s])
            else:
                res = impl.merge(state[d], state[s])
                state[d] = state[d] if res is None else res
        return state

    def result(self, state, slots):
        impl = self.fn.impl
        vals = [impl.get_value(state[s]) if s in state else None for s in slots.tolist()]
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
        if isinstance(result_types, (str, pa.DataType)):
            result_types = [result_types]
        self.fn = fn
        self.result_types = [to_arrow(t) for t in result_types]
        self.names = list(names) if names is not None else [f"f{i}" for i in range(len(self.result_types))]
        if len(self.names) != len(self.result_types):
            raise ValueError("udtf: names and result_types differ in length")
        self.name = name or _name_of(fn, "udtf")

    def __call__(self, *args: Any) -> TableFunctionCall:
        return TableFunctionCall(self, [as_column_expr(a) for a in args])

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
                if k == 1 and not isinstance(r, (tuple, list)):
                    r = (r,)
                if len(r) != k:
                    raise UDFError(f"table function {self.name!r} declared {k} columns but yielded {r!r}")
                idx.append(i)
                for j in range(k):
                    out[j].append(r[j])
        arrays_out = []
        for j, t in enumerate(self.result_types):
            try:
                arrays_out.append(pa.array(out[j], type=t))
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as exc:
                raise UDFError(f"table function {self.name!r} column {self.names[j]!r} is declared "
                               f"{to_sql(t)} but got {out[j][:3]} ({exc})") from None
        return np.asarray(idx, dtype=np.int64), arrays_out


class TableFunctionCall:
    def __init__(self, fn: UserDefinedTableFunction, args: list):
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
