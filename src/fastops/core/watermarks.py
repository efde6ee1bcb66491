"""Event-time conversion and watermark strategies.

``to_ms`` turns an event-time column into int64 milliseconds since the epoch:
integer columns are taken as milliseconds, ``timestamp`` columns of any unit
are converted (sub-millisecond units round towards minus infinity, so a row
stays in the window of its true instant), ``date32`` / ``date64`` become the
midnight of the day. Time zones do not matter here: Arrow stores UTC instants
(window bounds get the column's zone back, see :func:`fastops.core.window.assigners.bound_type`).

Watermark strategies see every batch's event times (``on_batch``) and return
the new watermark when it advances, else ``None``. A watermark never moves
backwards: a smaller candidate is ignored, not an error. As in Flink, the
watermark after seeing a maximum timestamp ``m`` is ``m - bound - 1`` (rows
with ``t > watermark`` are still expected).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.types as pat

from fastops.core import arrow as _arrow
from fastops.core.durations import parse_duration

MIN_WATERMARK = -(2**63)
_PER_MS = {"ms": 1, "us": 1000, "ns": 1_000_000}  # per timestamp unit ("s" is multiplied)


def first_outside(values: np.ndarray, lo: int, hi: int) -> int:
    """Index of the first value outside ``[lo, hi]``, or -1 if there is none."""
    if len(values) == 0 or (values.min() >= lo and values.max() <= hi):
        return -1
    return int(np.flatnonzero((values < lo) | (values > hi))[0])


def to_ms(values: pa.Array | pa.ChunkedArray | np.ndarray, name: str = "time") -> np.ndarray:
    """Event times of a column as a NumPy int64 array of milliseconds.

    Raises ``TypeError`` naming the column for a non-temporal, non-integer
    column and ``ValueError`` if it holds nulls.
    """
    if isinstance(values, np.ndarray):
        if values.dtype.kind == "M":
            values = pa.array(values)
        elif values.dtype.kind in "iu":
            return values.astype(np.int64, copy=False)
        else:
            raise TypeError(f"time column {name!r} has dtype {values.dtype}; expected integer "
                            "milliseconds, timestamp or date")
    if not isinstance(values, (pa.Array, pa.ChunkedArray)):
        raise TypeError(f"time column {name!r} must be an Arrow or NumPy array, "
                        f"got {type(values).__name__}")
    t = values.type
    if not (pat.is_integer(t) or pat.is_timestamp(t) or pat.is_date(t)):
        raise TypeError(f"time column {name!r} has type {t}; expected integer milliseconds, "
                        "timestamp or date")
    if values.null_count:
        raise ValueError(f"time column {name!r} has {values.null_count} null(s); "
                         "every row needs an event time")
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
    if pat.is_uint64(t):
        raw = _arrow.fixed_values(values, np.uint64)
        if len(raw) and raw.max() > np.uint64(2**63 - 1):
            raise ValueError(f"time column {name!r} has values beyond int64 milliseconds")
        return raw.view(np.int64)
    if pat.is_integer(t):
        return _arrow.fixed_values(values, np.dtype(t.to_pandas_dtype())).astype(np.int64, copy=False)
    if pat.is_date32(t):
        return _arrow.fixed_values(values, np.int32).astype(np.int64) * 86_400_000
    raw = _arrow.fixed_values(values, np.int64)  # timestamp / date64
    if pat.is_date64(t):
        return raw
    unit = t.unit
    if unit == "ms":
        return raw
    if unit == "s":
        limit = (2**63 - 1) // 1000
        row = first_outside(raw, -limit, limit)
        if row >= 0:
            raise ValueError(f"time column {name!r}: row {row} has {int(raw[row])} s, "
                             "which does not fit in int64 milliseconds")
        return raw * 1000
    return np.floor_divide(raw, _PER_MS[unit])


class BoundedOutOfOrderness:
    """Watermark ``max(ts) - max_out_of_orderness - 1``: rows may arrive up to
    ``max_out_of_orderness`` ms behind the latest one seen and still be on time."""

    def __init__(self, max_out_of_orderness: Any = 0) -> None:
        bound = parse_duration(max_out_of_orderness)
        if bound < 0:
            raise ValueError(f"max_out_of_orderness must be >= 0, got {max_out_of_orderness!r}")
        self.max_out_of_orderness = bound
        self.current: int = MIN_WATERMARK
        self.max_timestamp: int | None = None

    def on_batch(self, ts_ms: Any) -> int | None:
        """Observe a batch's event times; the new watermark if it advanced, else None."""
        ts = ts_ms if isinstance(ts_ms, np.ndarray) else to_ms(ts_ms)
        if len(ts) == 0:
            return None
        m = int(ts.max())
        if self.max_timestamp is None or m > self.max_timestamp:
            self.max_timestamp = m
        return self.advance(self.max_timestamp - self.max_out_of_orderness - 1)

    def advance(self, candidate: int) -> int | None:
        """Move to ``candidate`` if it is ahead; backwards moves are ignored."""
        candidate = max(int(candidate), MIN_WATERMARK)
        if candidate > self.current:
            self.current = candidate
            return candidate
        return None

    def restore(self, current: int) -> None:
        """Resume from a checkpointed watermark."""
        self.current = int(current)
        self.max_timestamp = None if self.current == MIN_WATERMARK else (
            self.current + self.max_out_of_orderness + 1)

    def __repr__(self) -> str:
        return f"BoundedOutOfOrderness({self.max_out_of_orderness} ms, current={self.current})"


class MonotonousTimestamps(BoundedOutOfOrderness):
    """Timestamps never decrease: watermark ``max(ts) - 1`` (Flink's ascending
    timestamps). A row behind the watermark is late for the window operator."""

    def __init__(self) -> None:
        super().__init__(0)

    def __repr__(self) -> str:
        return f"MonotonousTimestamps(current={self.current})"
