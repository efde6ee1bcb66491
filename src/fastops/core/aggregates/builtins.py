"""The built-in aggregates: ``count``, ``sum``, ``min``, ``max``, ``mean``,
``var``, ``stddev``, ``first``, ``last`` (types and null rules: see
:mod:`fastops.core.aggregates`).

Their state is columnar (:class:`~fastops.core.aggregates.records.Columns`)
and their loops are kernels in ``fastops._kernels.window``:
:func:`update_builtins` adds a batch's rows to every built-in of an
aggregator in one pass.
"""
from __future__ import annotations

import builtins as _builtins  # min, max and sum below are the aggregates'

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pat

from fastops._kernels import window as _window
from fastops.core.aggregates.base import SlotAggregate, register
from fastops.core.aggregates.records import (
    Columns,
    ResultPlan,
    _numeric_storage,
    _Records,
    _valid,
    as_storage,
    from_storage,
)

__all__ = [
    "BuiltinAggregate",
    "Count",
    "FirstLast",
    "MinMax",
    "Moments",
    "Sum",
    "SumOverflowError",
    "builtin_layout",
    "count",
    "first",
    "last",
    "max",
    "mean",
    "min",
    "stddev",
    "sum",
    "sum_overflow",
    "update_builtins",
    "var",
]

#: Raised when an int64 ``sum`` leaves the int64 range (an ``OverflowError``;
#: ``aggregate``, ``column`` and ``output`` name the aggregate where known).
SumOverflowError = _window.SumOverflowError
_I64_MAX = 2**63 - 1

_EMPTY_U8 = np.zeros(0, dtype=np.uint8)
_EMPTY_I64 = np.zeros(0, dtype=np.int64)
_COUNT_OP = _window.OPS["count"]
_SUM_I64 = _window.OPS["sum_i64"]


def builtin_layout(aggs: list[BuiltinAggregate], states: list[Columns]) -> tuple[np.ndarray, np.ndarray]:
    """Merge codes (``_window.OPS``) and record word offsets of built-ins with
    these states: fixed once the states are placed, so computed once."""
    return (np.array([a._op() for a in aggs], dtype=np.int64),
            np.array([st.off for st in states], dtype=np.int64))


def update_builtins(aggs: list[BuiltinAggregate], store: _Records, ops: np.ndarray,
                    offs: np.ndarray, slots: np.ndarray, columns: list[pa.Array | None],
                    ts: np.ndarray, size: int) -> None:
    """Add row ``i`` of each aggregate's input column to slot ``slots[i]``
    (``< 0``: skipped; nulls skipped), every aggregate in one pass over the
    rows. ``store``: the records the built-ins share (``Columns.share``),
    grown to ``size`` slots; ``ops`` / ``offs``: from :func:`builtin_layout`;
    ``ts``: event times (int64, one per row; ``first``/``last``). A column
    read by several aggregates is converted once."""
    store.ensure(size)
    vals, valids, voffs = [], [], []
    inputs: dict = {}
    for a, op, col in zip(aggs, ops.tolist(), columns):
        if col is None or op == _COUNT_OP:
            vals.append(_EMPTY_I64)
        else:
            key = (id(col), a._dtype)
            v = inputs.get(key)
            if v is None:
                v = inputs[key] = as_storage(col, a._dtype).view(np.int64)
            vals.append(v)
        v, off = (_EMPTY_U8, 0) if col is None else _valid(col)
        valids.append(v)
        voffs.append(off)
    for a, op, col in zip(aggs, ops.tolist(), columns):  # uint64 values beyond int64 wrap in as_storage
        if op == _SUM_I64 and col is not None and pat.is_uint64(col.type) and (pc.max(col).as_py() or 0) > _I64_MAX:
            raise sum_overflow(a, detail=f"a value of {a.column!r} is {pc.max(col).as_py()}, beyond int64")
    try:
        _window.agg_update(slots, ts, ops, store.rec, offs, vals, valids, np.array(voffs, dtype=np.int64))
    except SumOverflowError as exc:
        raise sum_overflow(aggs[exc.aggregates[0]]) from None


def sum_overflow(a: SlotAggregate, output: str | None = None, where: str = "",
                 detail: str = "") -> SumOverflowError:
    """The error for the int64 ``sum`` ``a`` whose total left the int64 range:
    names the aggregate, its column, the output column (``output``) and
    ``where`` it happened, and says what to do."""
    col = a.column
    label = f"{a.name}({col!r})" + (f" (output column {output!r})" if output else "")
    exc = SumOverflowError(
        f"{label} overflowed int64{' ' + where if where else ''}: "
        f"{detail or f'a partial sum of column {col!r} left [-2**63, 2**63 - 1]'}. Cast {col!r} to "
        f"float64 before aggregating (exact up to 2**53) or sum smaller units")
    exc.aggregate, exc.column, exc.output, exc.detail = a, col, output, detail
    return exc


class BuiltinAggregate(SlotAggregate):
    """A built-in: columnar state, kernels in ``fastops._kernels.window``
    (:func:`update_builtins` adds rows to several at once)."""

    needs_input = True
    fields: dict[str, np.dtype] = {}

    def __init__(self, column: str | None):
        if column is not None and not isinstance(column, str):
            raise TypeError(f"{self.name}: column must be a str, got {type(column).__name__}")
        if self.needs_input and column is None:
            raise TypeError(f"{self.name} needs an input column")
        self.column = column
        self._dtype = np.dtype(np.float64)

    def bind(self, input_type: pa.DataType | None) -> None:
        """Fix the input type (validates it)."""
        self.validate(input_type)
        if input_type is not None:
            st = _numeric_storage(input_type)
            if st is not None:
                self._dtype = st

    def _state_spec(self) -> dict[str, np.dtype]:
        return dict(self.fields)

    def new_state(self) -> Columns:
        return Columns(self._state_spec())

    def update(self, state: Columns, slots: np.ndarray, values: pa.Array) -> Columns:
        slots = np.ascontiguousarray(slots, dtype=np.int64)
        if len(slots):
            update_builtins([self], state.store, *builtin_layout([self], [state]), slots, [values],
                            np.arange(len(slots), dtype=np.int64), int(slots.max()) + 1)
        return state

    def reset(self, state: Columns, slots: np.ndarray) -> Columns:
        if len(slots):
            state["cnt"][slots] = 0
        return state

    nullable = True  # the result is null where the state counts no value

    def final_plan(self) -> list[tuple[str, int]]:
        """The state fields the result is made of, each with its
        ``_window.FINAL`` code: kernels write them as result columns."""
        raise NotImplementedError

    def from_final(self, cols: list[np.ndarray], null: np.ndarray | None) -> pa.Array:
        """The result from the columns of :meth:`final_plan` (typed as the
        state's fields) and the null mask (None: no nulls)."""
        raise NotImplementedError

    def result(self, state: Columns, slots: np.ndarray | None) -> pa.Array:
        plan = ResultPlan([self], [state])
        return plan.results(plan.columns(state.rec, slots))[0]

    def _op(self) -> int:
        """The kernels' code for this aggregate (``_window.OPS``)."""
        raise NotImplementedError

    def merge(self, state: Columns, dst: np.ndarray, src: np.ndarray) -> Columns:
        self._grow(state, dst, src)
        try:
            _window.merge_records(self._op(), dst, src, state.rec, state.off, state.rec, state.off)
        except SumOverflowError:
            raise sum_overflow(self) from None
        return state

    def to_bytes(self, state: Columns) -> bytes:
        return state.to_bytes()

    def from_bytes(self, data: bytes) -> Columns:
        return Columns.from_bytes(self._state_spec(), data)

    def _grow(self, state: Columns, *slot_arrays: np.ndarray) -> None:
        hi = 0
        for s in slot_arrays:
            if len(s):
                hi = _builtins.max(hi, int(s.max()) + 1)
        state.ensure(hi)

    def describe(self) -> str:
        return f"{self.name}({self.column!r})"


def _type_error(agg: SlotAggregate, t: pa.DataType, what: str) -> TypeError:
    return TypeError(f"{agg.name}({agg.column!r}): column {agg.column!r} has type {t}; "
                     f"{agg.name} needs {what}")


class Count(BuiltinAggregate):
    name = "count"
    needs_input = False
    fields = {"cnt": np.dtype(np.int64)}

    def output_type(self, input_type: pa.DataType | None) -> pa.DataType:
        return pa.int64()

    def validate(self, input_type: pa.DataType | None) -> None:
        return None

    def _op(self) -> int:
        return _window.OPS["count"]

    nullable = False

    def final_plan(self) -> list[tuple[str, int]]:
        return [("cnt", _window.FINAL["word"])]

    def from_final(self, cols: list[np.ndarray], null: np.ndarray | None) -> pa.Array:
        return from_storage(cols[0], None, pa.int64())


class Sum(BuiltinAggregate):
    name = "sum"

    def validate(self, input_type: pa.DataType | None) -> None:
        if input_type is None or not (pat.is_integer(input_type) or pat.is_floating(input_type)) \
                or (pat.is_floating(input_type) and input_type.bit_width == 16):
            raise _type_error(self, input_type, "an integer or floating-point column")

    def _state_spec(self) -> dict[str, np.dtype]:
        if self._dtype == np.int64:
            return {"cnt": np.dtype(np.int64), "sum": np.dtype(np.int64)}
        return {"cnt": np.dtype(np.int64), "sum": np.dtype(np.float64), "comp": np.dtype(np.float64)}

    def output_type(self, input_type: pa.DataType | None) -> pa.DataType:
        return pa.int64() if pat.is_integer(input_type) else pa.float64()

    def _op(self) -> int:
        return _window.OPS["sum_i64" if self._dtype == np.int64 else "sum_f64"]

    def final_plan(self) -> list[tuple[str, int]]:
        return [("sum", _window.FINAL["word" if self._dtype == np.int64 else "sum_f64"])]

    def from_final(self, cols: list[np.ndarray], null: np.ndarray | None) -> pa.Array:
        return from_storage(cols[0], null, pa.int64() if self._dtype == np.int64 else pa.float64())


class _Ordered(BuiltinAggregate):
    """Aggregates that keep one input value per slot (min, max, first, last)."""

    column: str

    def validate(self, input_type: pa.DataType | None) -> None:
        st = None if input_type is None else _numeric_storage(input_type)
        if st is None:
            raise _type_error(self, input_type, "a numeric, boolean or temporal column")
        if self.name in ("min", "max") and pat.is_uint64(input_type):
            raise _type_error(self, input_type, "values that fit int64 (uint64 is not ordered here)")
        self._out = input_type

    def output_type(self, input_type: pa.DataType | None) -> pa.DataType:
        return input_type

    def final_plan(self) -> list[tuple[str, int]]:
        return [("val", _window.FINAL["word"])]

    def from_final(self, cols: list[np.ndarray], null: np.ndarray | None) -> pa.Array:
        return from_storage(cols[0], null, self._out)


class MinMax(_Ordered):
    def __init__(self, column: str, is_max: bool):
        self.name = "max" if is_max else "min"
        self.is_max = bool(is_max)
        super().__init__(column)

    def _state_spec(self) -> dict[str, np.dtype]:
        return {"cnt": np.dtype(np.int64), "val": self._dtype}

    def _op(self) -> int:
        return _window.OPS[f"{self.name}_{'i64' if self._dtype == np.int64 else 'f64'}"]


class FirstLast(_Ordered):
    def __init__(self, column: str, is_last: bool):
        self.name = "last" if is_last else "first"
        self.is_last = bool(is_last)
        super().__init__(column)

    def _state_spec(self) -> dict[str, np.dtype]:
        return {"cnt": np.dtype(np.int64), "val": self._dtype, "ts": np.dtype(np.int64)}

    def _op(self) -> int:
        return _window.OPS[self.name]


class Moments(BuiltinAggregate):
    """mean, var, stddev from Welford's (count, mean, M2)."""

    fields = {"cnt": np.dtype(np.int64), "mean": np.dtype(np.float64), "m2": np.dtype(np.float64)}

    def __init__(self, column: str, kind: str, ddof: int = 1):
        if kind not in ("mean", "var", "stddev"):
            raise ValueError(f"unknown moment {kind!r}")
        if ddof not in (0, 1):
            raise ValueError(f"{kind}: ddof must be 0 (population) or 1 (sample), got {ddof!r}")
        self.name = kind
        self.ddof = int(ddof)
        super().__init__(column)

    def validate(self, input_type: pa.DataType | None) -> None:
        if input_type is None or not (pat.is_integer(input_type) or pat.is_floating(input_type)) \
                or (pat.is_floating(input_type) and input_type.bit_width == 16):
            raise _type_error(self, input_type, "an integer or floating-point column")

    def bind(self, input_type: pa.DataType | None) -> None:
        self.validate(input_type)
        self._dtype = np.dtype(np.float64)

    def output_type(self, input_type: pa.DataType | None) -> pa.DataType:
        return pa.float64()

    def _op(self) -> int:
        return _window.OPS["welford"]

    nullable = False  # null from the count, as each moment needs

    def final_plan(self) -> list[tuple[str, int]]:
        return [(f, _window.FINAL["word"]) for f in ("cnt", "mean", "m2")]

    def from_final(self, cols: list[np.ndarray], null: np.ndarray | None) -> pa.Array:
        cnt, mean, m2 = cols
        if self.name == "mean":
            return pa.array(mean, type=pa.float64(), mask=cnt == 0)
        denom = cnt - self.ddof
        null = denom <= 0
        with np.errstate(divide="ignore", invalid="ignore"):
            var = np.where(null, 0.0, m2 / np.where(null, 1, denom))
        var = np.maximum(var, 0.0)
        if self.name == "stddev":
            var = np.sqrt(var)
        return pa.array(var, type=pa.float64(), mask=null)

    def describe(self) -> str:
        return f"{self.name}({self.column!r}, ddof={self.ddof})"

    def __repr__(self) -> str:
        return f"agg.{self.name}({self.column!r}, ddof={self.ddof})"


# ---------------------------------------------------------------- constructors

def count(column: str | None = None) -> SlotAggregate:
    """Rows per slot, or with ``column`` its non-null values (0 if none)."""
    return Count(column)


def sum(column: str) -> SlotAggregate:
    """Sum of non-null values: int64 for integers, float64 (compensated) for floats.

    An integer sum is checked, never wrapped: if any partial sum leaves the
    int64 range, :class:`SumOverflowError` (an ``OverflowError``) is raised,
    naming the aggregate and its column. Partial sums are those of the rows
    of a batch, of a pane or session, and of the panes of a window, in
    whichever order the engine adds them; so a total that fits raises only
    if positive or negative values alone exceed int64 (Python's exact sum
    and SQL engines that widen may still give a result there). A uint64
    value beyond int64 raises too. Cast the column to float64 to sum beyond
    that range (exact up to 2**53)."""
    return Sum(column)


def min(column: str) -> SlotAggregate:
    """Smallest non-null value (NaN ignored), input type kept; strings and
    binary compare by bytes (:class:`StringMinMax`)."""
    return MinMax(column, False)


def max(column: str) -> SlotAggregate:
    """Largest non-null value (NaN ignored), input type kept; strings and
    binary compare by bytes (:class:`StringMinMax`)."""
    return MinMax(column, True)


def mean(column: str) -> SlotAggregate:
    """Arithmetic mean (float64) of the non-null values."""
    return Moments(column, "mean")


def var(column: str, ddof: int = 1) -> SlotAggregate:
    """Variance: ``ddof=1`` sample (null for fewer than 2 values), ``ddof=0`` population."""
    return Moments(column, "var", ddof)


def stddev(column: str, ddof: int = 1) -> SlotAggregate:
    """Standard deviation: ``sqrt(var(column, ddof))``."""
    return Moments(column, "stddev", ddof)


def first(column: str) -> SlotAggregate:
    """Non-null value with the smallest event time (ties: the row seen first)."""
    return FirstLast(column, False)


def last(column: str) -> SlotAggregate:
    """Non-null value with the largest event time (ties: the row seen last)."""
    return FirstLast(column, True)



for _factory in (count, sum, min, max, mean, var, stddev, first, last):
    register(_factory.__name__, _factory)
