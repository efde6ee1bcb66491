"""Aggregates the Table API adds on top of ``fastops.agg``.

:class:`StringMinMax` is ``MIN`` / ``MAX`` over string and binary columns,
which the engine's columnar aggregates (fixed-width state) do not take. It is
an ``agg.SlotAggregate`` plug-in, so group-by, window and changelog
aggregation run it like any other aggregate.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from fastops._arrow import is_binary_like
from fastops.agg import SlotAggregate

__all__ = ["StringMinMax"]


class StringMinMax(SlotAggregate):
    """``MIN`` / ``MAX`` of a string or binary column, comparing bytes (UTF-8
    byte order is code point order), as Flink and DuckDB do.

    State: one value per slot in a NumPy object array (``None``: no value
    yet). ``update`` first reduces the batch per slot with Arrow's grouped
    min / max, so values are compared in Python once per slot touched, never
    once per row."""

    def __init__(self, column: str, is_max: bool):
        self.column = column
        self.is_max = bool(is_max)
        self.name = "max" if is_max else "min"
        self._type: pa.DataType = pa.string()

    def validate(self, input_type: Optional[pa.DataType]) -> None:
        if input_type is None or not is_binary_like(input_type):
            raise TypeError(f"{self.name.upper()}({self.column}): {input_type} is not a string or binary column")
        self._type = input_type

    def output_type(self, input_type: Optional[pa.DataType]) -> pa.DataType:
        return input_type

    def new_state(self) -> np.ndarray:
        return np.full(0, None, dtype=object)

    @staticmethod
    def _grow(state: np.ndarray, n: int) -> np.ndarray:
        if len(state) >= n:
            return state
        grown = np.full(max(n, 2 * len(state), 16), None, dtype=object)
        grown[: len(state)] = state
        return grown

    def update(self, state: np.ndarray, slots: np.ndarray, values: pa.Array) -> np.ndarray:
        if len(slots) == 0:
            return state
        g = pa.table({"s": pa.array(slots, pa.int64()), "v": values}).group_by("s", use_threads=False) \
            .aggregate([("v", self.name)])
        s = g.column(0).to_numpy()
        state = self._grow(state, int(s.max()) + 1)
        best = (pc.max_element_wise if self.is_max else pc.min_element_wise)(
            pa.array(state[s], type=values.type), g.column(1).combine_chunks(), skip_nulls=True)
        state[s] = best.to_numpy(zero_copy_only=False)
        return state

    def merge(self, state: np.ndarray, dst: np.ndarray, src: np.ndarray) -> np.ndarray:
        """Sources that are no destination (as when sliding windows merge
        panes into scratch slots) are reduced at once, like an update;
        otherwise a merge may read a slot merged before, so pairs go in order."""
        if len(dst) == 0:
            return state
        state = self._grow(state, int(max(dst.max(), src.max())) + 1)
        if not np.isin(src, dst).any():
            return self.update(state, dst, pa.array(state[src], type=self._type))
        for d, s in zip(dst.tolist(), src.tolist()):
            a, b = state[d], state[s]
            if b is not None and (a is None or (b > a if self.is_max else b < a)):
                state[d] = b
        return state

    def result(self, state: np.ndarray, slots: np.ndarray) -> pa.Array:
        vals = np.full(len(slots), None, dtype=object)
        inside = slots < len(state)
        vals[inside] = state[slots[inside]]
        return pa.array(vals, type=self._type)

    def reset(self, state: np.ndarray, slots: np.ndarray) -> np.ndarray:
        state[slots[slots < len(state)]] = None
        return state

    def to_bytes(self, state: np.ndarray) -> bytes:
        from fastops.table.changelog import _ipc

        return _ipc(pa.table({"v": pa.array(state, type=self._type)}))

    def from_bytes(self, data: bytes) -> np.ndarray:
        from fastops.table.changelog import _unipc

        col = _unipc(data).column("v")
        return np.asarray(col.to_numpy(zero_copy_only=False), dtype=object)

    def describe(self) -> str:
        return f"fastops.table.aggregates.StringMinMax({self.column!r}, {self.name})"
