"""Windowed inner join of two keyed streams (Flink's window join).

Rows of both inputs are buffered per window; when the watermark reaches a
window's end (``end <= watermark``), the rows of that window are joined on the
keys with Arrow's hash join and emitted with ``window_start`` / ``window_end``.
Rows whose windows have all fired already go to the side output ``"late"``.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from fastops.core.messages import MIN_WATERMARK
from fastops.core.watermarks import to_ms
from fastops.core.window.assigners import Sliding, Tumbling, bound_type, check_event_times
from fastops.operators.base import Operator, Tagged


class WindowJoinOperator(Operator):
    def __init__(self, window: Any, left_keys: tuple[str, ...], right_keys: tuple[str, ...],
                 left_time: str, right_time: str, suffixes: tuple[str, str] = ("", "_right")):
        if not isinstance(window, (Tumbling, Sliding)):
            raise ValueError(f"a window join needs Tumbling or Sliding windows, got {type(window).__name__}")
        self.window = window
        self.keys = (list(left_keys), list(right_keys))
        self.times = (left_time, right_time)
        self.suffixes = suffixes
        self.name = "window_join"

    def open(self, ctx) -> None:
        super().open(ctx)
        self.buffers: dict[int, tuple[list, list]] = {}
        self.watermark = MIN_WATERMARK
        self.schemas: list = [None, None]

    def process_input(self, input_index: int, batch: pa.RecordBatch) -> list:
        side = 0 if input_index == 0 else 1
        for k in self.keys[side] + [self.times[side]]:
            if batch.schema.get_field_index(k) < 0:
                raise KeyError(f"window join: column {k!r} not in the {'left' if side == 0 else 'right'} "
                               f"input (columns: {batch.schema.names})")
        self.schemas[side] = batch.schema
        ts = to_ms(batch.column(self.times[side]), self.times[side])
        check_event_times(self.window, ts, self.times[side])
        rows, starts = self.window.assign_rows(ts)
        live = starts + self.window.size > self.watermark
        rows, starts = rows[live], starts[live]
        on_time = np.zeros(len(ts), dtype=bool)
        on_time[rows] = True
        # one take per window (windows are few; rows are not)
        order = np.argsort(starts, kind="stable")
        uniq, first = np.unique(starts[order], return_index=True)
        bounds = np.append(first, len(order))
        for j, start in enumerate(uniq.tolist()):
            idx = rows[order[bounds[j]:bounds[j + 1]]]
            self.buffers.setdefault(start, ([], []))[side].append(batch.take(pa.array(idx)))
        out: list = []
        if not on_time.all():
            late = batch.filter(pa.array(~on_time))
            reason = pa.array(["window already fired"] * late.num_rows)
            out.append(Tagged("late", late.append_column("reason", reason)))
        return out

    def on_watermark(self, t_ms: int) -> list:
        self.watermark = max(self.watermark, t_ms)
        size = self.window.size
        ready = sorted(s for s in self.buffers if s + size <= t_ms)
        out = []
        for start in ready:
            left_batches, right_batches = self.buffers.pop(start)
            if not left_batches or not right_batches:
                continue
            left = pa.Table.from_batches(left_batches)
            right = pa.Table.from_batches(right_batches)
            joined = left.join(right, keys=self.keys[0], right_keys=self.keys[1], join_type="inner",
                               left_suffix=self.suffixes[0] or None, right_suffix=self.suffixes[1],
                               use_threads=False)
            if joined.num_rows == 0:
                continue
            n = joined.num_rows
            bt = bound_type(left.schema.field(self.times[0]).type)  # the left time column's zone
            ws = pa.array(np.full(n, start, dtype=np.int64), bt)
            we = pa.array(np.full(n, start + size, dtype=np.int64), bt)
            joined = joined.combine_chunks()
            cols = [ws, we] + [joined.column(i).combine_chunks() for i in range(joined.num_columns)]
            names = ["window_start", "window_end"] + joined.schema.names
            out.append(pa.RecordBatch.from_arrays(cols, names=names))
        return out
