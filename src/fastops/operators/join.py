"""Windowed inner join of two keyed streams (Flink's window join).

Rows of both inputs are buffered per window; when the watermark reaches a
window's end (``end <= watermark``), the rows of that window are joined on the
keys with Arrow's hash join and emitted with ``window_start`` / ``window_end``.
Rows whose windows have all fired already go to the side output ``"late"``.

State (``snapshot``): the rows held per window start and side, the watermark
and the schemas of both inputs, as Arrow IPC. It is keyed: restored at
another parallelism (``restore_groups``), a task keeps the held rows whose key
(the left keys for left rows, the right keys for right rows) is in its key
groups.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from fastops.core.arrow import as_batch
from fastops.core.messages import MIN_WATERMARK
from fastops.core.partitioning import KeyGroups
from fastops.core.watermarks import to_ms
from fastops.core.window.assigners import Sliding, Tumbling, bound_type, check_event_times
from fastops.operators.base import Operator, Tagged
from fastops.operators.state import pack_state, unpack_state

_SIDES = ("left", "right")
_START = "__fastops_window_start"  # the window of a held row, in snapshots


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
        self._hold(side, batch, rows, starts)
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

    # -- state ----------------------------------------------------------------------------
    def snapshot(self) -> bytes | None:
        return pack_state("window join", {_SIDES[side]: self._held(side) for side in (0, 1)},
                          {"watermark": str(self.watermark)})

    def _held(self, side: int) -> pa.Table | None:
        """The rows ``side`` holds, with the start of their window (None: no input seen)."""
        schema = self.schemas[side]
        if schema is None:
            return None
        batches, starts = [], []
        for start in sorted(self.buffers):
            for b in self.buffers[start][side]:
                batches.append(b if b.schema == schema else b.cast(schema))
                starts.append(np.full(b.num_rows, start, dtype=np.int64))
        held = pa.Table.from_batches(batches, schema=schema)
        return held.append_column(_START, pa.array(np.concatenate(starts or [np.zeros(0, np.int64)])))

    def restore(self, state: bytes | None) -> None:
        if state is not None:
            self._load([state], None)

    def restore_groups(self, states: Sequence[bytes | None], groups: KeyGroups) -> None:
        self._load(states, groups)

    def _load(self, states: Sequence[bytes | None], groups: KeyGroups | None) -> None:
        """Hold the rows of ``states`` (those whose key is in ``groups``, if given);
        the watermark is the least of theirs."""
        self.buffers = {}
        self.schemas = [None, None]
        loaded = [unpack_state("window join", s) for s in states if s is not None]
        self.watermark = min((int(meta["watermark"]) for _, meta in loaded), default=MIN_WATERMARK)
        for parts, _ in loaded:
            for side in (0, 1):
                held = parts[_SIDES[side]]
                if held is None:
                    continue
                if groups is not None:
                    held = held.filter(pa.array(groups.mask(held, self.keys[side])))
                rows = held.drop_columns([_START])
                self.schemas[side] = rows.schema
                self._hold(side, rows, np.arange(rows.num_rows), held.column(_START).to_numpy())

    def _hold(self, side: int, data: pa.RecordBatch | pa.Table, rows: np.ndarray, starts: np.ndarray) -> None:
        """Buffer row ``rows[i]`` of ``data`` (of ``side``) in the window starting at ``starts[i]``:
        one take per window (windows are few; rows are not)."""
        order = np.argsort(starts, kind="stable")
        uniq, first = np.unique(starts[order], return_index=True)
        bounds = np.append(first, len(order))
        for j, start in enumerate(uniq.tolist()):
            part = data.take(pa.array(rows[order[bounds[j]:bounds[j + 1]]]))
            self.buffers.setdefault(start, ([], []))[side].append(as_batch(part))
