"""Aggregates for window and keyed aggregation, and the plug-in protocol.

Built-ins: ``count()`` (rows), ``count(col)`` (non-null values), ``sum``,
``min``, ``max``, ``mean``, ``var`` / ``stddev`` (``ddof=1`` sample, ``ddof=0``
population; Welford updates, Chan merges), ``first`` / ``last`` (by event
time). SQL null rules: null inputs are skipped and a slot without a non-null
value gives null (``count`` gives 0).

Types
    ``sum`` of integers is int64; a sum that leaves the int64 range raises
    :class:`SumOverflowError` naming the aggregate and its column (never a
    wrapped value; see :func:`sum`). ``sum`` of floats is float64 with Neumaier
    compensation. ``mean``/``var``/``stddev`` are float64. ``min``, ``max``,
    ``first``, ``last`` keep the input type (integers, floats, bool, timestamp,
    date, time, duration); float NaN values are ignored by ``min``/``max``
    (as pandas does). ``min``/``max`` of strings and binary compare bytes
    (:class:`StringMinMax`, picked by :func:`for_input`); other types raise
    ``TypeError`` naming the column and type.

Slots and state
    A *slot* is one accumulator (one key in one window or pane), a dense int64
    id allocated by the window aggregator and reused after purge. An
    aggregate object is configuration only; its per-slot state is one value
    returned by ``new_state`` and threaded through the calls below (for the
    built-ins: :class:`Columns`, one record of a few 8-byte fields per slot,
    readable as one NumPy array per field).

Plug-ins
    Subclass :class:`SlotAggregate` and make a constructor reachable as
    ``fastops.core.aggregates.<name>(...)`` with :func:`register`. The aggregator calls
    ``update`` once per batch, ``merge`` to combine sessions, ``combine``
    to build sliding windows from their panes (the default uses ``merge``
    and ``result``), ``result`` at emission, ``reset`` at purge, and
    ``to_bytes``/``from_bytes`` in snapshots. ``update`` and ``merge`` may see
    slot ids beyond the current size (for ``merge``: fresh destination slots
    that hold nothing yet) and must grow the state to cover them.
"""
from __future__ import annotations

import builtins as _builtins
from typing import Any, Callable, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pat

from fastops._kernels import window as _window
from fastops.core import arrow as _arrow

__all__ = [
    "SlotAggregate",
    "SumOverflowError",
    "count",
    "first",
    "last",
    "max",
    "mean",
    "min",
    "register",
    "registered",
    "stddev",
    "sum",
    "var",
]

#: Raised when an int64 ``sum`` leaves the int64 range (an ``OverflowError``;
#: ``aggregate``, ``column`` and ``output`` name the aggregate where known).
SumOverflowError = _window.SumOverflowError
_I64_MAX = 2**63 - 1

_EMPTY_U8 = np.zeros(0, dtype=np.uint8)
_EMPTY_I64 = np.zeros(0, dtype=np.int64)


class SlotAggregate:
    """Base class of aggregates with per-slot state (see module docs).

    Attributes
    ----------
    column
        Input column name, or None for an aggregate without input (``count()``).
    name
        Short name for messages and ``repr``.
    """

    column: str | None = None
    name: str = "aggregate"
    #: True: ``update`` also gets the rows' event times (int64 ms) as ``ts``
    needs_time: bool = False

    def output_type(self, input_type: pa.DataType | None) -> pa.DataType:
        """Arrow type of ``result`` for inputs of ``input_type``."""
        raise NotImplementedError

    def validate(self, input_type: pa.DataType | None) -> None:
        """Raise ``TypeError`` naming the column and type if unsupported."""

    def new_state(self) -> Any:
        """The state of zero slots."""
        raise NotImplementedError

    def update(self, state: Any, slots: np.ndarray, values: pa.Array) -> Any:
        """Row ``i`` of ``values`` goes into slot ``slots[i]`` (nulls already
        removed), in row order. Grows the state to ``max(slots) + 1`` slots;
        returns it. With ``needs_time``, called as ``update(state, slots,
        values, ts)``."""
        raise NotImplementedError

    def merge(self, state: Any, dst: np.ndarray, src: np.ndarray) -> Any:
        """``state[dst[i]] <- state[dst[i]] (+) state[src[i]]`` for each ``i`` in order."""
        raise NotImplementedError

    def result(self, state: Any, slots: np.ndarray) -> pa.Array:
        """One value per slot of ``slots``, in order."""
        raise NotImplementedError

    def combine(self, state: Any, rows: np.ndarray, src: np.ndarray, nrows: int,
                top: int) -> tuple[Any, pa.Array]:
        """Results of ``nrows`` output rows; row ``r`` merges the slots
        ``src[i]`` with ``rows[i] == r`` in order (sliding windows: a window
        from its panes; every row has at least one slot). Slots ``top, top + 1, ...`` (beyond every live slot)
        may serve as scratch and are left empty. Returns ``(state, results)``.

        This default merges rows of several slots into scratch slots with
        ``merge`` and reads rows of one slot directly.
        """
        result_slots = np.empty(nrows, dtype=np.int64)
        dst = np.empty(len(rows), dtype=np.int64)
        msrc = np.empty(len(rows), dtype=np.int64)
        m, nm = _window.pairs_plan(rows, src, nrows, top, np.empty(nrows, dtype=np.int64),
                                   result_slots, dst, msrc)
        if nm:
            state = self.merge(state, dst[:nm], msrc[:nm])
        out = self.result(state, result_slots)
        if m:
            state = self.reset(state, np.arange(top, top + m, dtype=np.int64))
        return state, out

    def reset(self, state: Any, slots: np.ndarray) -> Any:
        """Empty ``slots`` (purged) so they can be reused."""
        raise NotImplementedError

    def to_bytes(self, state: Any) -> bytes:
        raise NotImplementedError

    def from_bytes(self, data: bytes) -> Any:
        raise NotImplementedError

    def describe(self) -> str:
        """A stable text naming the aggregate and its parameters (checked on restore)."""
        return f"{type(self).__module__}.{type(self).__name__}({self.column!r})"

    def __repr__(self) -> str:
        return f"agg.{self.name}({'' if self.column is None else repr(self.column)})"


# ---------------------------------------------------------------- columnar state

class _Records:
    """An ``(n_slots, width)`` int64 record array, grown by doubling, rows
    64-byte aligned; several :class:`Columns` may share it (each its words)."""

    __slots__ = ("rec",)

    def __init__(self, width: int, size: int = 0):
        self.rec = aligned_records(size, width)

    @property
    def size(self) -> int:
        return len(self.rec)

    def ensure(self, n: int) -> None:
        self.rec = _arrow.grown(self.rec, n)


def record_width(words: int) -> int:
    """Words per record row: up to 8 rounded up to a power of two, so that an
    aligned row never straddles two cache lines."""
    return 1 << (words - 1).bit_length() if 0 < words <= 8 else words


def aligned_records(n: int, width: int) -> np.ndarray:
    """Zeroed ``(n, width)`` int64 records in pool memory, starting on a
    64-byte boundary."""
    return _arrow.zeros(n * width, np.int64).reshape(n, width)


class Columns:
    """Per-slot state of a built-in aggregate: one record of 8-byte words per slot.

    ``rec`` is an ``(n_slots, W)`` int64 array whose words ``off, off + 1,
    ...`` hold this aggregate's fields; :meth:`share` puts the aggregates of
    one aggregator side by side in one array, so a row's update touches one
    cache line for all of them. ``state[name]`` is the strided view of one
    field with its dtype (int64 or float64, the same bytes), so results,
    resets and snapshots stay columnar. The first field is always ``cnt``.
    """

    __slots__ = ("names", "off", "spec", "store")

    def __init__(self, spec: dict[str, np.dtype], size: int = 0):
        self.spec = {k: np.dtype(v) for k, v in spec.items()}
        if next(iter(self.spec)) != "cnt" or any(d.itemsize != 8 for d in self.spec.values()):
            raise ValueError("aggregate state needs 'cnt' first and 8-byte fields")
        self.names = list(self.spec)
        self.store = _Records(len(self.spec), size)
        self.off = 0

    @staticmethod
    def share(states: list[Columns]) -> _Records:
        """Move ``states`` into one record array (contents kept), each at its own
        words; returns its store (of one word per record for no states)."""
        width = record_width(_builtins.max(_builtins.sum(len(st.names) for st in states), 1))
        size = _builtins.max((st.size for st in states), default=0)
        store = _Records(width, size)
        off = 0
        for st in states:
            store.rec[: st.size, off : off + len(st.names)] = st.rec[:, st.off : st.off + len(st.names)]
            st.store, st.off = store, off
            off += len(st.names)
        return store

    @property
    def rec(self) -> np.ndarray:
        """The whole record array (possibly shared: this state's words start at ``off``)."""
        return self.store.rec

    @property
    def size(self) -> int:
        return self.store.size

    def ensure(self, n: int) -> None:
        """Grow (doubling) to at least ``n`` slots; new slots are empty."""
        self.store.ensure(n)

    def __getitem__(self, k: str) -> np.ndarray:
        return self.store.rec.view(self.spec[k])[:, self.off + self.names.index(k)]

    def final_words(self, plan: list[tuple[str, int]]) -> tuple[np.ndarray, np.ndarray]:
        """A result plan's record words (this state's offset added) and codes."""
        return (np.array([self.off + self.names.index(k) for k, _ in plan], dtype=np.int64),
                np.array([c for _, c in plan], dtype=np.int64))

    def to_bytes(self) -> bytes:
        return _arrow.to_ipc(pa.RecordBatch.from_arrays(
            [pa.array(np.ascontiguousarray(self[k])) for k in self.names], names=self.names))

    @classmethod
    def from_bytes(cls, spec: dict[str, np.dtype], data: bytes) -> Columns:
        batch = _arrow.from_ipc(data).combine_chunks()
        if list(batch.schema.names) != list(spec):
            raise ValueError(f"aggregate state has fields {batch.schema.names}, expected {list(spec)}")
        out = cls(spec, batch.num_rows)
        for k in spec:
            out[k][:] = np.asarray(batch.column(k).to_numpy(zero_copy_only=False), dtype=spec[k])
        return out


def _numeric_storage(t: pa.DataType) -> np.dtype | None:
    """Storage dtype (int64 / float64) of a numeric-like type, None if unsupported."""
    if pat.is_floating(t):
        return None if t.bit_width == 16 else np.dtype(np.float64)
    if pat.is_integer(t) or pat.is_boolean(t) or pat.is_temporal(t):
        return np.dtype(np.int64)
    return None


def as_storage(arr: pa.Array, dtype: np.dtype) -> np.ndarray:
    """Values of a numeric-like array as contiguous int64 or float64 (nulls: garbage)."""
    t = arr.type
    n = len(arr)
    if pat.is_boolean(t):
        bits = np.unpackbits(_arrow.bit_values(arr), bitorder="little", count=arr.offset + n)
        return bits[arr.offset:].astype(dtype)
    if pat.is_floating(t):
        src = np.dtype(np.float32 if t.bit_width == 32 else np.float64)
    else:
        width = t.bit_width // 8
        signed = not pat.is_unsigned_integer(t)
        src = np.dtype(f"{'int' if signed else 'uint'}{width * 8}")
    vals = _arrow.fixed_values(arr, src)
    if vals.dtype == dtype:
        return np.ascontiguousarray(vals)
    return vals.astype(dtype)


def from_storage(vals: np.ndarray, null: np.ndarray | None, t: pa.DataType) -> pa.Array:
    """An Arrow array of type ``t`` from int64/float64 storage; ``null`` marks nulls.
    Built from buffers, sharing the memory where ``t`` is 8 bytes wide:
    ``pa.array`` given an integer type reads every value (about 1 ns each)."""
    n = len(vals)
    validity, nnull = _arrow.bitmap(None if null is None else ~null)
    if pat.is_boolean(t):
        data = pa.py_buffer(np.packbits(vals.astype(bool), bitorder="little"))
    elif pat.is_floating(t):
        data = pa.py_buffer(np.ascontiguousarray(vals, dtype=np.float32 if t.bit_width == 32 else np.float64))
    else:
        width = t.bit_width // 8
        signed = not pat.is_unsigned_integer(t)
        dt = np.dtype(f"{'int' if signed else 'uint'}{width * 8}")
        data = pa.py_buffer(np.ascontiguousarray(vals.astype(dt, copy=False)))
    return pa.Array.from_buffers(t, n, [validity, data], null_count=nnull)


def _valid(values: pa.Array) -> tuple[np.ndarray, int]:
    v = _arrow.validity(values)
    return (_EMPTY_U8, 0) if v is None else (v, values.offset)


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
        if op == _SUM_I64 and pat.is_uint64(col.type) and (pc.max(col).as_py() or 0) > _I64_MAX:
            raise sum_overflow(a, detail=f"a value of {a.column!r} is {pc.max(col).as_py()}, beyond int64")
    try:
        _window.agg_update(slots, ts, ops, store.rec, offs, vals, valids, np.array(voffs, dtype=np.int64))
    except SumOverflowError as exc:
        raise sum_overflow(aggs[exc.aggregates[0]]) from None


_COUNT_OP = _window.OPS["count"]
_SUM_I64 = _window.OPS["sum_i64"]


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


class ResultColumns:
    """Result columns under construction: one int64 column per word of a
    ``ResultPlan`` and one null-byte column per nullable aggregate (zeroed,
    1 where null), with their null counts."""

    def __init__(self, plan: ResultPlan, capacity: int):
        self.cols = _arrow.empty(len(plan.words) * capacity, np.int64)[0].reshape(len(plan.words), capacity)
        nn = len(plan.cnt_words)
        self.nulls = _arrow.zeros(nn * capacity, np.uint8).reshape(nn, capacity)  # kernels write only nulls
        self.nnull = np.zeros(len(plan.cnt_words), dtype=np.int64)
        self.plan = plan

    @property
    def capacity(self) -> int:
        return self.cols.shape[1]

    def grown(self, rows: int, capacity: int) -> ResultColumns:
        """A copy of the first ``rows`` rows with room for ``capacity``."""
        out = ResultColumns(self.plan, capacity)
        out.cols[:, :rows] = self.cols[:, :rows]
        out.nulls[:, :rows] = self.nulls[:, :rows]
        out.nnull[:] = self.nnull
        return out


class ResultPlan:
    """How the records of built-in aggregates (side by side, :meth:`Columns.share`)
    become their results inside one kernel pass (``_window.gather_fields``,
    or ``dense_window`` for sliding windows): each aggregate's
    :meth:`~BuiltinAggregate.final_plan` words, and a null column per
    nullable aggregate. The records' other words (count fields beside the
    values, error terms) are never written out."""

    def __init__(self, aggs: list, states: list[Columns]):
        words, codes, cnt_words = [], [], []
        self.parts: list[tuple[Any, list[tuple[str, np.dtype]], int, int]] = []  # agg, fields, first col, null col
        for a, st in zip(aggs, states):
            plan = a.final_plan()
            w, c = st.final_words(plan)
            self.parts.append((a, [(k, st.spec[k]) for k, _ in plan], len(words),
                               len(cnt_words) if a.nullable else -1))
            words += w.tolist()
            codes += c.tolist()
            if a.nullable:
                cnt_words.append(st.off)
        self.words = np.array(words, dtype=np.int64)
        self.codes = np.array(codes, dtype=np.int64)
        self.cnt_words = np.array(cnt_words, dtype=np.int64)

    def columns(self, rec: np.ndarray, slots: np.ndarray | None = None) -> ResultColumns:
        """Result columns of the records ``rec[slots]`` (None: every row in order)."""
        out = ResultColumns(self, len(rec) if slots is None else len(slots))
        _window.gather_fields(rec, self.words, self.codes, self.cnt_words, slots, out.cols, out.nulls, out.nnull)
        return out

    def results(self, out: ResultColumns, n: int | None = None) -> list[pa.Array]:
        """Each aggregate's result array from the first ``n`` rows (None: all)."""
        n = out.capacity if n is None else n
        results = []
        for a, fields, col, nc in self.parts:
            cols = [out.cols[col + j, :n].view(dt) for j, (_, dt) in enumerate(fields)]
            null = out.nulls[nc, :n].view(bool) if nc >= 0 and out.nnull[nc] else None
            results.append(a.from_final(cols, null))
        return results


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

    def output_type(self, input_type):
        return pa.int64()

    def validate(self, input_type):
        return None

    def _op(self):
        return _window.OPS["count"]

    nullable = False

    def final_plan(self):
        return [("cnt", _window.FINAL["word"])]

    def from_final(self, cols, null):
        return from_storage(cols[0], None, pa.int64())


class Sum(BuiltinAggregate):
    name = "sum"

    def validate(self, input_type):
        if input_type is None or not (pat.is_integer(input_type) or pat.is_floating(input_type)) \
                or (pat.is_floating(input_type) and input_type.bit_width == 16):
            raise _type_error(self, input_type, "an integer or floating-point column")

    def _state_spec(self):
        if self._dtype == np.int64:
            return {"cnt": np.dtype(np.int64), "sum": np.dtype(np.int64)}
        return {"cnt": np.dtype(np.int64), "sum": np.dtype(np.float64), "comp": np.dtype(np.float64)}

    def output_type(self, input_type):
        return pa.int64() if pat.is_integer(input_type) else pa.float64()

    def _op(self):
        return _window.OPS["sum_i64" if self._dtype == np.int64 else "sum_f64"]

    def final_plan(self):
        return [("sum", _window.FINAL["word" if self._dtype == np.int64 else "sum_f64"])]

    def from_final(self, cols, null):
        return from_storage(cols[0], null, pa.int64() if self._dtype == np.int64 else pa.float64())


class _Ordered(BuiltinAggregate):
    """Aggregates that keep one input value per slot (min, max, first, last)."""

    def validate(self, input_type):
        st = None if input_type is None else _numeric_storage(input_type)
        if st is None:
            raise _type_error(self, input_type, "a numeric, boolean or temporal column")
        if self.name in ("min", "max") and pat.is_uint64(input_type):
            raise _type_error(self, input_type, "values that fit int64 (uint64 is not ordered here)")
        self._out = input_type

    def output_type(self, input_type):
        return input_type

    def final_plan(self):
        return [("val", _window.FINAL["word"])]

    def from_final(self, cols, null):
        return from_storage(cols[0], null, self._out)


class MinMax(_Ordered):
    def __init__(self, column, is_max):
        self.name = "max" if is_max else "min"
        self.is_max = bool(is_max)
        super().__init__(column)

    def _state_spec(self):
        return {"cnt": np.dtype(np.int64), "val": self._dtype}

    def _op(self):
        return _window.OPS[f"{self.name}_{'i64' if self._dtype == np.int64 else 'f64'}"]


class FirstLast(_Ordered):
    def __init__(self, column, is_last):
        self.name = "last" if is_last else "first"
        self.is_last = bool(is_last)
        super().__init__(column)

    def _state_spec(self):
        return {"cnt": np.dtype(np.int64), "val": self._dtype, "ts": np.dtype(np.int64)}

    def _op(self):
        return _window.OPS[self.name]


class Moments(BuiltinAggregate):
    """mean, var, stddev from Welford's (count, mean, M2)."""

    fields = {"cnt": np.dtype(np.int64), "mean": np.dtype(np.float64), "m2": np.dtype(np.float64)}

    def __init__(self, column, kind, ddof=1):
        if kind not in ("mean", "var", "stddev"):
            raise ValueError(f"unknown moment {kind!r}")
        if ddof not in (0, 1):
            raise ValueError(f"{kind}: ddof must be 0 (population) or 1 (sample), got {ddof!r}")
        self.name = kind
        self.ddof = int(ddof)
        super().__init__(column)

    def validate(self, input_type):
        if input_type is None or not (pat.is_integer(input_type) or pat.is_floating(input_type)) \
                or (pat.is_floating(input_type) and input_type.bit_width == 16):
            raise _type_error(self, input_type, "an integer or floating-point column")

    def bind(self, input_type):
        self.validate(input_type)
        self._dtype = np.dtype(np.float64)

    def output_type(self, input_type):
        return pa.float64()

    def _op(self):
        return _window.OPS["welford"]

    nullable = False  # null from the count, as each moment needs

    def final_plan(self):
        return [(f, _window.FINAL["word"]) for f in ("cnt", "mean", "m2")]

    def from_final(self, cols, null):
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

    def describe(self):
        return f"{self.name}({self.column!r}, ddof={self.ddof})"

    def __repr__(self):
        return f"agg.{self.name}({self.column!r}, ddof={self.ddof})"


# ---------------------------------------------------------------- strings

class _Picks:
    """Per-slot state of a string pick: the held value's bytes in one arena
    (``ref``: start, -1 for none; ``length``) and its event time (``ts``);
    ``best`` is the kernels' per-slot scratch (-1). Merges share bytes, so the
    arena only grows by values that win; it is compacted once garbage
    outweighs the live bytes."""

    __slots__ = ("_compact_at", "arena", "best", "length", "ref", "ts", "used")

    _MIN_COMPACT = 1 << 20

    def __init__(self, size: int = 0):
        self.ref = np.full(size, -1, dtype=np.int64)
        self.length = np.zeros(size, dtype=np.int64)
        self.ts = np.zeros(size, dtype=np.int64)
        self.best = np.full(size, -1, dtype=np.int64)
        self.arena = np.zeros(0, dtype=np.uint8)
        self.used = 0
        self._compact_at = self._MIN_COMPACT

    def __len__(self) -> int:
        return len(self.ref)

    def ensure(self, n: int) -> None:
        """Room for slots ``0 .. n-1`` (new ones empty)."""
        if n > len(self.ref):
            self.ref, self.best = _arrow.grown(self.ref, n, -1), _arrow.grown(self.best, n, -1)
            self.length, self.ts = _arrow.grown(self.length, n), _arrow.grown(self.ts, n)

    def hold(self, slots: np.ndarray, starts: np.ndarray, lengths: np.ndarray, data: np.ndarray,
             ts: np.ndarray | None) -> None:
        """Slot ``slots[i]`` holds the ``lengths[i]`` bytes at ``data[starts[i]:]``
        (copied into the arena) with time ``ts[i]``."""
        self.ref[slots], self.length[slots] = self._append(starts, lengths, data), lengths
        if ts is not None:
            self.ts[slots] = ts
        if self.used > self._compact_at:
            self._compact()

    def _append(self, starts: np.ndarray, lengths: np.ndarray, data: np.ndarray) -> np.ndarray:
        """Copy the values to the arena's end; returns where each starts."""
        at = np.empty(len(lengths), dtype=np.int64)
        np.cumsum(lengths, out=at)
        total = int(at[-1]) if len(at) else 0
        at -= lengths
        at += self.used
        if self.used + total > len(self.arena):
            self.arena = _arrow.grown(self.arena, self.used + total)
        _window.gather_bytes(starts, lengths, data, at, self.arena)
        self.used += total
        return at

    def _compact(self) -> None:
        """Copy the live values into a fresh arena (a value shared by several
        slots once per slot)."""
        live = np.flatnonzero(self.ref >= 0)
        old, self.arena, self.used = self.arena, np.zeros(0, dtype=np.uint8), 0
        self.ref[live] = self._append(self.ref[live], self.length[live], old)
        self._compact_at = _builtins.max(2 * self.used, self._MIN_COMPACT)

    def values(self, slots: np.ndarray, t: pa.DataType, what: str = "string aggregate") -> pa.Array:
        """The held values of ``slots`` (null where none) as an array of type
        ``t`` (string or binary, large or not; ``what`` names it in errors)."""
        slots = np.asarray(slots, dtype=np.int64)
        inside = (slots >= 0) & (slots < len(self.ref))
        refs = np.full(len(slots), -1, dtype=np.int64)
        refs[inside] = self.ref[slots[inside]]
        valid = refs >= 0
        lengths = np.zeros(len(slots), dtype=np.int64)
        lengths[valid] = self.length[slots[valid]]
        offsets = np.zeros(len(slots) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        data = np.empty(int(offsets[-1]), dtype=np.uint8)
        _window.gather_bytes(np.where(valid, refs, 0), lengths, self.arena, offsets[:-1], data)
        return _arrow.binary_array(t, offsets, data, valid, what)

    def reset(self, slots: np.ndarray) -> None:
        slots = slots[slots < len(self.ref)]
        self.ref[slots] = -1

    @classmethod
    def from_values(cls, values: pa.Array, ts: np.ndarray | None) -> _Picks:
        """The state holding ``values`` (null: none) in slots 0, 1, ..."""
        out = cls(len(values))
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        offsets, data = _arrow.binary_parts(values)
        offsets = offsets.astype(np.int64)
        held = np.flatnonzero(values.is_valid().to_numpy(zero_copy_only=False))
        if len(held):
            out.hold(held, offsets[held], offsets[held + 1] - offsets[held], data,
                     None if ts is None else np.asarray(ts, dtype=np.int64)[held])
        return out


class _StringPick(SlotAggregate):
    """Base of ``min`` / ``max`` / ``first`` / ``last`` over string and binary
    columns (the built-ins' records hold fixed-width values). State: a
    :class:`_Picks`; ``update`` and ``merge`` are single compiled passes
    (``_window.pick_candidates`` / ``pick_merge``) that compare bytes or
    times, and only winning values are copied. Its ``name`` (min, max,
    first, last) is the kernels' mode."""

    def __init__(self, column: str, name: str, label: str):
        self.column, self.name, self._label = column, name, label
        self._type: pa.DataType = pa.string()

    def validate(self, input_type: pa.DataType | None) -> None:
        if input_type is None or not _arrow.is_binary_like(input_type):
            raise TypeError(f"{self._label}({self.column}): {input_type} is not a string or binary column")
        self._type = input_type

    def output_type(self, input_type: pa.DataType | None) -> pa.DataType:
        return input_type

    def new_state(self) -> _Picks:
        return _Picks()

    def update(self, state: _Picks, slots: np.ndarray, values: pa.Array,
               ts: np.ndarray | None = None) -> _Picks:
        if len(slots) == 0:
            return state
        slots = np.ascontiguousarray(slots, dtype=np.int64)
        if values.null_count:  # the aggregator drops them; other callers may not
            keep = np.flatnonzero(values.is_valid().to_numpy(zero_copy_only=False))
            values, slots = values.take(pa.array(keep)), slots[keep]
            ts = None if ts is None else np.asarray(ts)[keep]
            if len(slots) == 0:
                return state
        ts = _EMPTY_I64 if ts is None else np.ascontiguousarray(ts, dtype=np.int64)
        state.ensure(int(slots.max()) + 1)
        offsets, data = _arrow.binary_parts(values)
        win_slots = np.empty(len(slots), dtype=np.int64)
        win_rows = np.empty(len(slots), dtype=np.int64)
        w = _window.pick_candidates(_window.PICK_MODES[self.name], slots, offsets, data, ts,
                                    state.best, state.ref, state.length, state.ts, state.arena,
                                    win_slots, win_rows)
        if w:
            rows = win_rows[:w]
            starts = offsets[rows].astype(np.int64)
            state.hold(win_slots[:w], starts, offsets[rows + 1] - starts, data,
                       ts[rows] if len(ts) else None)
        return state

    def merge(self, state: _Picks, dst: np.ndarray, src: np.ndarray) -> _Picks:
        """Pairs in order; a source counts as rows after its destination's."""
        if len(dst) == 0:
            return state
        dst = np.ascontiguousarray(dst, dtype=np.int64)
        src = np.ascontiguousarray(src, dtype=np.int64)
        state.ensure(int(_builtins.max(dst.max(), src.max())) + 1)
        _window.pick_merge(_window.PICK_MODES[self.name], dst, src, state.ref, state.length,
                           state.ts, state.arena)
        return state

    def result(self, state: _Picks, slots: np.ndarray) -> pa.Array:
        return state.values(slots, self._type, f"{self._label}({self.column})")

    def reset(self, state: _Picks, slots: np.ndarray) -> _Picks:
        state.reset(np.asarray(slots, dtype=np.int64))
        return state


class StringMinMax(_StringPick):
    """``MIN`` / ``MAX`` of a string or binary column, comparing bytes (UTF-8
    byte order is code point order), as Flink and DuckDB do."""

    def __init__(self, column: str, is_max: bool):
        self.is_max = bool(is_max)
        name = "max" if is_max else "min"
        super().__init__(column, name, name.upper())

    def to_bytes(self, state: _Picks) -> bytes:
        return _arrow.to_ipc(pa.table({"v": state.values(np.arange(len(state)), self._type)}))

    def from_bytes(self, data: bytes) -> _Picks:
        return _Picks.from_values(_arrow.from_ipc(data).column("v"), None)

    def describe(self) -> str:
        # its name before it moved here: snapshot configurations recorded it
        return f"fastops.table.aggregates.StringMinMax({self.column!r}, {self.name})"


class StringFirstLast(_StringPick):
    """``first`` / ``last`` of a string or binary column: the value of the
    smallest / largest event time, ties to the row seen first / last (as the
    built-in ``first`` / ``last`` of numbers)."""

    needs_time = True

    def __init__(self, column: str, is_last: bool):
        self.is_last = bool(is_last)
        name = "last" if is_last else "first"
        super().__init__(column, name, name)

    def to_bytes(self, state: _Picks) -> bytes:
        return _arrow.to_ipc(pa.table({"v": state.values(np.arange(len(state)), self._type),
                                       "ts": pa.array(state.ts)}))

    def from_bytes(self, data: bytes) -> _Picks:
        table = _arrow.from_ipc(data)
        return _Picks.from_values(table.column("v"), table.column("ts").to_numpy())

    def describe(self) -> str:
        return f"fastops.core.aggregates.StringFirstLast({self.column!r}, {self.name})"


def for_input(a: SlotAggregate, input_type: pa.DataType | None) -> SlotAggregate:
    """The aggregate that computes ``a`` over inputs of ``input_type``: ``min`` /
    ``max`` / ``first`` / ``last`` of a string or binary column (view types
    too) are :class:`StringMinMax` / :class:`StringFirstLast`, since the
    columnar built-ins hold fixed-width values; any other ``a`` is itself."""
    if input_type is not None and (
            _arrow.is_binary_like(input_type) or _arrow.view_storage(input_type) is not None):
        if isinstance(a, MinMax):
            return StringMinMax(a.column, a.is_max)
        if isinstance(a, FirstLast):
            return StringFirstLast(a.column, a.is_last)
    return a


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


_BUILTINS = ("count", "sum", "min", "max", "mean", "var", "stddev", "first", "last")
_REGISTRY: dict[str, Callable[..., SlotAggregate]] = {n: globals()[n] for n in _BUILTINS}


def register(name: str, factory: Callable[..., SlotAggregate]) -> None:
    """Make ``factory`` reachable as ``fastops.core.aggregates.<name>(...)``.

    Raises ``ValueError`` if ``name`` is taken (built-ins included) and
    ``TypeError`` if it is not an identifier or ``factory`` is not callable.
    """
    if not isinstance(name, str) or not name.isidentifier() or name.startswith("_"):
        raise TypeError(f"aggregate name must be a public identifier, got {name!r}")
    if not callable(factory):
        raise TypeError(f"aggregate factory for {name!r} must be callable")
    if name in _REGISTRY or name in globals():
        raise ValueError(f"aggregate {name!r} is already registered")
    _REGISTRY[name] = factory
    globals()[name] = factory


def registered() -> list[str]:
    """Names of every aggregate constructor, built-ins first."""
    return list(_REGISTRY)


from fastops.core.aggregates import sketch as _sketch_aggs  # noqa: F401  registers sketch aggregates
