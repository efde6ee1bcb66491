"""The SESSION window TVF read as a table.

:class:`SessionAssign` is ``TABLE(SESSION(TABLE t PARTITION BY k,
DESCRIPTOR(ts), gap))`` without an aggregation: rows are held per partition
key until their session closes (the watermark reaches its end, as the window
aggregation fires, or the input ends), then emitted each with its session's
``window_start`` (first time), ``window_end`` (last time + gap) and
``window_time`` (``end - 1 ms``). Rows
of a partition are in one session while each is less than ``gap`` after the
one before. Rows arriving after their window closed (late) are dropped.
"""
from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from fastops.core.arrow import as_batch, from_ipc, to_ipc
from fastops.core.keys import KeyTable
from fastops.core.messages import MIN_WATERMARK
from fastops.core.partitioning import KeyGroups
from fastops.core.watermarks import to_ms
from fastops.core.window.assigners import bound_type
from fastops.operators.base import Operator
from fastops.table.changelog import _pack_parts, _unpack_parts

__all__ = ["SessionAssign"]


class SessionAssign(Operator):
    """SESSION window TVF rows (see the module docs), keyed by ``partition`` (none: one task)."""

    def __init__(self, time_column: str, gap: int, partition: Sequence[str], schema: pa.Schema):
        self.time_column = time_column
        self.gap = gap
        self.partition = list(partition)
        self.schema = schema  # the input's columns
        self.name = "window_tvf(session)"
        self._reset()

    def _reset(self) -> None:
        self.held: list[pa.RecordBatch] = []
        self.watermark = MIN_WATERMARK

    def _ts(self, batch: Any) -> np.ndarray:
        return np.asarray(to_ms(batch.column(self.time_column), self.time_column), dtype=np.int64)

    def process(self, batch: pa.RecordBatch) -> list:
        if batch.num_rows == 0:
            return []
        batch = batch.select(self.schema.names)
        if self.watermark > MIN_WATERMARK:  # late: its session would have closed already
            batch = batch.filter(pa.array(self._ts(batch) + self.gap > self.watermark))
        if batch.num_rows:
            self.held.append(batch)
        return []

    def on_watermark(self, t_ms: int) -> list:
        if t_ms <= self.watermark:
            return []
        self.watermark = t_ms
        return self._emit(t_ms)

    def close(self) -> list:
        return self._emit(None)

    def _emit(self, watermark: int | None) -> list:
        """Rows of the sessions that end at or before ``watermark`` (all: None), with their windows."""
        if not self.held:
            return []
        rows = pa.Table.from_batches(self.held, schema=self.schema).combine_chunks()
        ts = self._ts(rows)
        n = rows.num_rows
        if self.partition:
            ids = KeyTable(self.partition).lookup_or_insert([rows.column(c) for c in self.partition])
        else:
            ids = np.zeros(n, np.int64)
        order = np.lexsort((ts, ids))
        sid, st = ids[order], ts[order]
        new = np.ones(n, bool)
        new[1:] = (sid[1:] != sid[:-1]) | (st[1:] - st[:-1] >= self.gap)
        session = np.cumsum(new) - 1
        start = st[new]
        last = np.maximum.reduceat(st, np.flatnonzero(new))
        end = last + self.gap
        done = np.ones(len(start), bool) if watermark is None else end <= watermark
        if not done.any():
            return []
        emit = done[session]
        out_rows = order[emit]
        keep = np.sort(order[~emit])
        self.held = [as_batch(rows.take(pa.array(keep)))] if len(keep) else []
        # emitted in time order per session, sessions by start
        s = session[emit]
        out = rows.take(pa.array(out_rows))
        bt = bound_type(self.schema.field(self.time_column).type)
        out = out.append_column("window_start", pa.array(start[s], bt))
        out = out.append_column("window_end", pa.array(end[s], bt))
        out = out.append_column("window_time", pa.array(end[s] - 1, bt))
        return [b for b in out.combine_chunks().to_batches() if b.num_rows]

    def snapshot(self) -> bytes | None:
        if not self.held and self.watermark == MIN_WATERMARK:
            return None
        rows = pa.Table.from_batches(self.held, schema=self.schema) if self.held else None
        return _pack_parts([struct.pack("<q", self.watermark), to_ipc(rows) if rows is not None else b""])

    def restore(self, state: bytes | None) -> None:
        self._load([state], None)

    def restore_groups(self, states: Sequence[bytes | None], groups: KeyGroups) -> None:
        if not self.partition:
            super().restore_groups(states, groups)
            return
        self._load(states, groups)

    def _load(self, states: Sequence[bytes | None], groups: KeyGroups | None) -> None:
        self._reset()
        loaded = [_unpack_parts(s) for s in states if s is not None]
        if loaded:
            self.watermark = min(struct.unpack("<q", p[0])[0] for p in loaded)
        for parts in loaded:
            if not parts[1]:
                continue
            t = from_ipc(parts[1])
            if groups is not None:
                t = t.filter(pa.array(groups.mask(t, self.partition)))
            if t.num_rows:
                self.held.append(as_batch(t.cast(self.schema)))

