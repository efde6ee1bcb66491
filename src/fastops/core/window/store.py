"""What every window strategy shares: the key table, the slot table, the
aggregates' state per slot, late rows and the output rows.

A slot is one row of aggregate state: a (group, pane), a session, or a group
of a running aggregate. The strategies in ``panes``, ``sessions`` and
``global_window`` decide which slot a row goes to and when slots fire; the
:class:`WindowStore` keeps the rest, in one place.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from fastops._kernels import window as _window
from fastops.core import arrow as _arrow
from fastops.core.aggregates import (
    BuiltinAggregate,
    Columns,
    ResultPlan,
    SlotAggregate,
    SumOverflowError,
    _Records,
    builtin_layout,
    sum_overflow,
    update_builtins,
)
from fastops.core.keys import KeyTable
from fastops.core.watermarks import MIN_WATERMARK
from fastops.core.window.assigners import TIME_LIMIT

__all__ = ["SlotTable", "WindowStore"]

I64_MIN = -(2**63)
I64_MAX = 2**63 - 1
FAR = TIME_LIMIT  # the kernels' range of window bounds
TS = pa.timestamp("ms")
RESERVED = ("window_start", "window_end")


def clamp(v: int) -> int:
    """``v`` within the kernels' range of window bounds."""
    return max(-FAR, min(FAR, v))


def timestamps(ms: np.ndarray, type: pa.DataType = TS) -> pa.Array:
    """int64 ms as a timestamp[ms] array (of ``type``: its time zone), sharing the memory."""
    ms = np.ascontiguousarray(ms, dtype=np.int64)
    return pa.Array.from_buffers(type, len(ms), [None, pa.py_buffer(ms)])


class SlotTable:
    """The slots' bookkeeping, kept by the kernels: per slot its group
    (``s_group``), the next slot of its list (``s_next``: a pane's chunk or
    a group's sessions) and flags (``s_flags``); ``free``, slots to reuse;
    ``counters``, the high-water mark (``counters[0]``) and the counts each
    kind of window keeps (see ``_kernels/window.pyx``)."""

    NAMES = ("counters", "free", "s_group", "s_next", "s_flags")

    def __init__(self) -> None:
        self.counters = np.zeros(12, dtype=np.int64)
        self.free = np.zeros(64, dtype=np.int64)
        self.s_group = np.zeros(64, dtype=np.int64)
        self.s_next = np.full(64, -1, dtype=np.int64)
        self.s_flags = np.zeros(64, dtype=np.uint8)

    @property
    def high(self) -> int:
        """The high-water mark: slots below it have been used."""
        return int(self.counters[0])

    def ensure(self, extra: int) -> int:
        """Room for ``extra`` slots beyond the high-water mark; returns the slots needed."""
        need = int(self.counters[0]) + extra
        self.s_group = _arrow.grown(self.s_group, need)
        self.s_next = _arrow.grown(self.s_next, need, -1)
        self.s_flags = _arrow.grown(self.s_flags, need)
        self.free = _arrow.grown(self.free, need)
        return need

    def arrays(self) -> dict[str, np.ndarray]:
        return {k: getattr(self, k) for k in self.NAMES}

    def restore(self, arrays: Mapping[str, np.ndarray]) -> None:
        for k in self.NAMES:
            setattr(self, k, arrays[k])


class WindowStore:
    """Key table, slot table, aggregate state, late rows and output layout
    of one aggregator.

    ``names`` / ``aggs``: the aggregates' output names and the aggregates
    that run (bound to the input types once known); ``states``: their state
    per slot. Built-in aggregates keep their records side by side in
    ``records`` (see :meth:`share_states`). ``wm`` is the watermark."""

    def __init__(self, by: Sequence[str], names: Sequence[str], aggs: Sequence[SlotAggregate], windowed: bool):
        self.by = list(by)
        self.names = list(names)
        self.windowed = windowed
        self.keys = KeyTable(self.by)
        self.slots = SlotTable()
        self.wm = MIN_WATERMARK
        self.aggs: list[SlotAggregate] = list(aggs)
        self.states: list[Any] = []
        self.out_schema: pa.Schema | None = None
        self.bounds = TS  # window bounds and late rows' watermark: the time column's zone
        self._empty_out: tuple[pa.Schema, pa.RecordBatch] | None = None
        self.late: list[pa.RecordBatch] = []
        self.rows_late = 0
        self.overflowed: SumOverflowError | None = None  # an int sum overflowed: the state is unusable
        self.share_states()

    # ------------------------------------------------------------ aggregates
    def share_states(self) -> None:
        """Built-in aggregates keep their records side by side in one array (one
        cache line per slot). Their positions, merge codes and word offsets are
        fixed from here on, so every update and emission reuses them; a pane
        window's output rows merge them into records of the same layout."""
        parts = [(i, a, st) for i, (a, st) in enumerate(zip(self.aggs, self.states))
                 if isinstance(a, BuiltinAggregate)]
        self.builtin = [i for i, _, _ in parts]
        builtins = [a for _, a, _ in parts]
        states = [st for _, _, st in parts]
        self.records: _Records = Columns.share(states)
        self.ops, self.offs = builtin_layout(builtins, states)
        self.merged = _Records(self.records.rec.shape[1])
        self.final = ResultPlan(builtins, states)

    def update(self, batch: pa.RecordBatch, slots: np.ndarray, ts: np.ndarray, capacity: int) -> None:
        """Add the rows of ``batch`` to their ``slots`` (< 0: none), event
        times ``ts``; the states have room for ``capacity`` slots."""
        n = batch.num_rows
        builtin: list[tuple] = []
        inputs: dict[str, Any] = {}  # each column fetched once
        for a, (i, st) in zip(self.aggs, enumerate(self.states)):
            values = None
            if a.column is not None:
                values = inputs.get(a.column)
                if values is None:
                    values = inputs[a.column] = batch.column(a.column)
            if isinstance(a, BuiltinAggregate):
                builtin.append((a, values))
            else:
                values = _arrow.without_views(values)  # as the aggregator's plug-in types say
                keep = slots >= 0
                if values is not None and values.null_count:
                    keep &= values.is_valid().to_numpy(zero_copy_only=False)
                if values is None:
                    values = pa.nulls(n)
                if not keep.all():
                    idx = np.flatnonzero(keep)
                    s, v, t = slots[idx], values.take(pa.array(idx)), ts[idx]
                else:
                    s, v, t = slots, values, ts
                if a.needs_time:
                    timed: Any = a  # (its update takes the rows' event times too: see SlotAggregate.update)
                    self.states[i] = timed.update(st, s, v, t)
                else:
                    self.states[i] = a.update(st, s, v)
        if builtin:
            aggs, columns = zip(*builtin)
            update_builtins(list(aggs), self.records, self.ops, self.offs, slots, list(columns), ts, capacity)

    def merge(self, dst: np.ndarray, src: np.ndarray, capacity: int) -> None:
        """Merge slots ``src`` into ``dst`` (pairwise, in order) in every aggregate."""
        for i, (a, st) in enumerate(zip(self.aggs, self.states)):
            if isinstance(a, BuiltinAggregate):
                st.ensure(capacity)
            self.states[i] = a.merge(st, dst, src)

    def reset_slots(self, slots: np.ndarray, cold: bool = False) -> None:
        """Empty ``slots`` in every aggregate (``cold``: their records are
        not in cache, see ``clear_records``)."""
        if len(slots) == 0:
            return
        if self.builtin:  # their shared records in one pass (as BuiltinAggregate.reset, for all)
            _window.clear_records(self.records.rec, slots, cold)  # sized to every slot by the updates
        for i, (a, st) in enumerate(zip(self.aggs, self.states)):
            if not isinstance(a, BuiltinAggregate):
                self.states[i] = a.reset(st, slots)

    def check_usable(self) -> None:
        if self.overflowed is not None:
            raise SumOverflowError(f"the aggregator cannot go on after an earlier error: {self.overflowed}")

    def overflow(self, exc: SumOverflowError, where: str, value_index: bool = False) -> SumOverflowError:
        """``exc`` again, naming the aggregate (``exc.aggregate``, or index
        ``exc.aggregates[0]`` among the built-ins, or with ``value_index``
        among the built-ins with values: a stack layout's), its column, its
        output name and ``where``; the aggregator refuses further work."""
        a = getattr(exc, "aggregate", None)
        if a is None and exc.aggregates:
            k = exc.aggregates[0]
            if value_index:
                k = [i for i, op in enumerate(self.ops.tolist()) if op != 0][k]
            a = self.aggs[self.builtin[k]]
        if a is not None:
            name = next((n for n, b in zip(self.names, self.aggs) if b is a), None)
            name = None if name is None or name.startswith("__") else name  # (a plan's internal name)
            exc = sum_overflow(a, name, where, getattr(exc, "detail", ""))
        self.overflowed = exc
        return exc

    # ------------------------------------------------------------ late rows
    def add_late(self, batch: pa.RecordBatch, mask: np.ndarray, count: int, reason: str) -> None:
        """The ``count`` rows of ``batch`` where ``mask`` is set go to the side output."""
        self.rows_late += count
        rows = batch.filter(pa.array(mask))
        m = rows.num_rows
        reason_col = pa.DictionaryArray.from_arrays(pa.array(np.zeros(m, dtype=np.int32)), pa.array([reason]))
        wm_col = pa.array(np.full(m, self.wm, dtype=np.int64), type=self.bounds)
        names = [n for n in rows.schema.names if n not in ("reason", "watermark")]
        cols = [rows.column(n) for n in names]
        self.late.append(pa.RecordBatch.from_arrays(cols + [reason_col.cast(pa.string()), wm_col],
                                                    names=names + ["reason", "watermark"]))

    # ------------------------------------------------------------ output
    def empty(self) -> pa.RecordBatch:
        """No output rows, in the output schema."""
        if self.out_schema is None:
            fields = ([pa.field("window_start", TS), pa.field("window_end", TS)] if self.windowed else [])
            fields += [pa.field(b, pa.null()) for b in self.by]
            fields += [pa.field(n, pa.null()) for n in self.names]
            schema = pa.schema(fields)
        else:
            schema = self.out_schema
            if self._empty_out is not None and self._empty_out[0] is schema:
                return self._empty_out[1]  # batches are immutable: one serves every call
        self._empty_out = (schema, pa.RecordBatch.from_pylist([], schema=schema))
        return self._empty_out[1]

    def build(self, starts: np.ndarray | None, ends: np.ndarray | None, groups: np.ndarray,
              slots: np.ndarray | list[pa.Array]) -> pa.RecordBatch:
        """Output rows of ``groups`` (in windows ``starts`` / ``ends``, None
        without windows); ``slots``: the slot of each row, or the aggregate
        results already computed."""
        cols = []
        if starts is not None and ends is not None:
            cols += [timestamps(starts, self.bounds), timestamps(ends, self.bounds)]
        cols += self.keys.keys(groups) if self.by else []
        if isinstance(slots, list):
            cols += slots
        else:
            cols += [a.result(st, slots) for a, st in zip(self.aggs, self.states)]
        return pa.RecordBatch.from_arrays(cols, schema=self.out_schema)
