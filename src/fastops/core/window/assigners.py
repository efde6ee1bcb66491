"""Window assigners: frozen dataclasses that validate themselves.

Event time is int64 milliseconds. A window is the half-open interval
``[start, end)``.

- ``Tumbling(size, offset=0)``: ``start = floor((t - offset) / size) * size + offset``.
- ``Sliding(size, slide, offset=0)``: every window of length ``size`` whose
  start is ``offset + j * slide`` (for integer ``j``, negative too) and that
  contains ``t``; the latest is ``floor((t - offset) / slide) * slide + offset``.
  ``slide <= size``; the aggregator keeps panes of width ``gcd(size, slide)``.
- ``Session(gap)``: per key, rows whose intervals ``[t, t + gap]`` touch or
  overlap are one session ``[first_t, last_t + gap)`` (as Flink's
  ``TimeWindow.intersects``, which is inclusive).
- ``GlobalWindow()``: no window, a running aggregate per key.

Event times must keep their windows' bounds within ``+-2**62`` ms (about 146
million years; :func:`event_time_range`), so that no bound overflows int64.

Durations go through :func:`fastops.core.durations.parse_duration`.

Window bounds are ``timestamp[ms]``, in the time zone of the event-time
column when it has one (:func:`bound_type`): a zone-aware column gives
zone-aware bounds, the same instants (windows are aligned in UTC, as Flink
aligns ``TIMESTAMP_LTZ`` windows; shift them with ``offset``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.types as pat

from fastops.core.durations import parse_duration, parse_positive_duration
from fastops.core.watermarks import first_outside


def _set(obj: Any, name: str, value: Any) -> None:
    object.__setattr__(obj, name, value)


TIME_LIMIT = 2**62  # ms: every window bound the kernels compute lies in [-TIME_LIMIT, TIME_LIMIT]
_MAX_SPAN = TIME_LIMIT // 2  # ms, about 73 million years: event times keep room (see event_time_range)


def bound_type(time_type: pa.DataType | None) -> pa.DataType:
    """The type of window bounds over an event-time column of ``time_type``:
    ``timestamp[ms]`` with the column's time zone (none for integer, date or
    zone-naive columns).

    >>> bound_type(pa.timestamp("us", tz="Europe/Berlin"))
    TimestampType(timestamp[ms, tz=Europe/Berlin])
    """
    tz = time_type.tz if time_type is not None and pat.is_timestamp(time_type) else None
    return pa.timestamp("ms", tz=tz)


def _span(value: Any, what: str) -> int:
    """A window size or gap: a positive duration of at most 2**61 ms."""
    ms = parse_positive_duration(value, what)
    if ms > _MAX_SPAN:
        raise ValueError(f"{what} must be at most 2**61 ms (about 73 million years), got {value!r}")
    return ms


@dataclass(frozen=True)
class Tumbling:
    """Fixed, non-overlapping windows of ``size`` ms, shifted by ``offset``."""

    size: Any
    offset: Any = 0

    def __post_init__(self) -> None:
        _set(self, "size", _span(self.size, "Tumbling size"))
        off = parse_duration(self.offset)
        _set(self, "offset", off % self.size)  # an offset of k*size changes nothing

    @property
    def slide(self) -> int:
        return self.size

    @property
    def pane(self) -> int:
        return self.size

    def assign(self, t: int) -> list[tuple[int, int]]:
        """The windows ``(start, end)`` containing ``t`` (Python model, for docs and tests)."""
        start = (t - self.offset) // self.size * self.size + self.offset
        return [(start, start + self.size)]

    def assign_rows(self, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Vectorised: ``(row index, window start)`` for every (row, window) pair."""
        ts = np.asarray(ts, dtype=np.int64)
        return np.arange(len(ts), dtype=np.int64), (ts - self.offset) // self.size * self.size + self.offset


@dataclass(frozen=True)
class Sliding:
    """Windows of ``size`` ms starting every ``slide`` ms (hopping windows)."""

    size: Any
    slide: Any
    offset: Any = 0

    def __post_init__(self) -> None:
        _set(self, "size", _span(self.size, "Sliding size"))
        _set(self, "slide", parse_positive_duration(self.slide, "Sliding slide"))
        if self.slide > self.size:
            raise ValueError(f"Sliding slide ({self.slide} ms) must not exceed size ({self.size} ms)")
        _set(self, "offset", parse_duration(self.offset) % self.slide)

    @property
    def pane(self) -> int:
        """Pane width ``gcd(size, slide)``: each row updates exactly one pane."""
        return math.gcd(self.size, self.slide)

    def assign(self, t: int) -> list[tuple[int, int]]:
        last = (t - self.offset) // self.slide * self.slide + self.offset
        out = []
        start = last
        while start > t - self.size:
            out.append((start, start + self.size))
            start -= self.slide
        return out[::-1]

    def assign_rows(self, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Vectorised: ``(row index, window start)`` for every (row, window) pair,
        ordered by row, then start."""
        ts = np.asarray(ts, dtype=np.int64)
        last = (ts - self.offset) // self.slide * self.slide + self.offset
        rows, starts = [], []
        for k in range(-(-self.size // self.slide)):
            s = last - k * self.slide
            ok = s > ts - self.size
            rows.append(np.flatnonzero(ok))
            starts.append(s[ok])
        r, s = np.concatenate(rows), np.concatenate(starts)
        order = np.lexsort((s, r))
        return r[order], s[order]


@dataclass(frozen=True)
class Session:
    """Per-key activity sessions closed by ``gap`` ms of inactivity."""

    gap: Any

    def __post_init__(self) -> None:
        _set(self, "gap", _span(self.gap, "Session gap"))


@dataclass(frozen=True)
class GlobalWindow:
    """No window: one running aggregate per key, never fired by watermarks."""


WindowSpec = Any  # Tumbling | Sliding | Session | GlobalWindow | None


def as_window(window: Any) -> Any:
    """Check a window argument; ``None`` means :class:`GlobalWindow`."""
    if window is None:
        return GlobalWindow()
    if isinstance(window, (Tumbling, Sliding, Session, GlobalWindow)):
        return window
    raise TypeError(f"window must be Tumbling, Sliding, Session, GlobalWindow or None, "
                    f"got {type(window).__name__}")


def event_time_range(window: Any) -> tuple[int, int]:
    """Event times (ms, inclusive) whose windows stay within ``+-2**62`` ms:
    ``t - span`` and ``t + span`` must, with ``span`` the window's size (a
    session's gap); any int64 for no window."""
    if isinstance(window, (Tumbling, Sliding)):
        span = window.size
    elif isinstance(window, Session):
        span = window.gap
    else:
        return -(2**63), 2**63 - 1
    return -TIME_LIMIT + span, TIME_LIMIT - span


def check_event_times(window: Any, ts: np.ndarray, column: str, label: str = "") -> int | None:
    """A ValueError naming ``column``, the first row and its value if an event
    time in ``ts`` (int64 ms) is outside ``event_time_range(window)``; callers
    check before using any row, so a refused batch leaves no trace. ``label``
    names the windows in the message (default: ``window`` itself). Returns
    the earliest time, read on the way (None for no window or no rows)."""
    if not isinstance(window, (Tumbling, Sliding, Session)) or len(ts) == 0:
        return None  # no window bounds: any time
    lo, hi = event_time_range(window)
    tmin, tmax = int(ts.min()), int(ts.max())
    if tmin >= lo and tmax <= hi:
        return tmin
    row = first_outside(ts, lo, hi)  # (one is: tmin or tmax)
    raise ValueError(f"time column {column!r}: row {row} has event time {int(ts[row])} ms, "
                     f"outside [{lo}, {hi}], the times whose windows of {label or window} fit "
                     f"in int64 milliseconds; the batch was not processed")
