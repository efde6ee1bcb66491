"""``min`` / ``max`` / ``first`` / ``last`` of string and binary columns.

The built-ins' records hold fixed-width values, so these keep the held
values' bytes in one arena per aggregate (:class:`_Picks`);
:func:`for_input` picks them for string and binary inputs.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from fastops._kernels import window as _window
from fastops.core import arrow as _arrow
from fastops.core.aggregates.base import SlotAggregate
from fastops.core.aggregates.builtins import FirstLast, MinMax

__all__ = ["StringFirstLast", "StringMinMax", "for_input"]

_EMPTY_I64 = np.zeros(0, dtype=np.int64)


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
        self._compact_at = max(2 * self.used, self._MIN_COMPACT)

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
        state.ensure(int(max(dst.max(), src.max())) + 1)
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

