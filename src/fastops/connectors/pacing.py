"""Pacing a source to a rate in rows per second: constant, or in steps over
time (``[(0, 4000), (30, 8000)]``: 4000 rows/s, from second 30 on 8000).

A split's ``Pace`` counts the rows its schedule has offered since the split
first read; a reader never reads ahead of it, and the rows due but not read
are its backlog (what a broker would hold for a slow consumer).
"""
from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from typing import Any, Union

Rate = Union[float, Sequence[tuple[float, float]]]


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


class RateSchedule:
    """Rows per second over time, from a number or ``(from second, rate)`` steps."""

    def __init__(self, rate: Rate):
        if _is_number(rate):
            steps = [(0.0, float(rate))]  # type: ignore[arg-type]
        elif isinstance(rate, (list, tuple)) and rate and all(
                isinstance(s, (list, tuple)) and len(s) == 2 and all(_is_number(v) for v in s) for s in rate):
            steps = [(float(t), float(r)) for t, r in rate]
        else:
            raise ValueError(f"rate must be a finite number > 0 rows/s, got {rate!r} "
                             f"(or steps over time: a list of (from second, rows/s) pairs)")
        if steps[0][0] != 0 or any(b[0] <= a[0] for a, b in zip(steps, steps[1:])):
            raise ValueError(f"rate steps must start at second 0 and go up in time, got {rate!r}")
        if not all(r > 0 for _, r in steps):
            raise ValueError(f"rate must be a finite number > 0 rows/s, got {rate!r}")
        self.starts = [t for t, _ in steps]
        self.rates = [r for _, r in steps]
        # rows offered before each step
        self.before = [0.0]
        for k in range(1, len(steps)):
            self.before.append(self.before[-1] + self.rates[k - 1] * (self.starts[k] - self.starts[k - 1]))

    def scaled(self, factor: float) -> RateSchedule:
        """The same steps at ``factor`` times the rate (one of several splits)."""
        return RateSchedule([(t, r * factor) for t, r in zip(self.starts, self.rates)])

    def rate_at(self, t: float) -> float:
        return self.rates[max(0, bisect.bisect_right(self.starts, t) - 1)]

    def rows_by(self, t: float) -> float:
        """Rows offered in the first ``t`` seconds."""
        if t <= 0:
            return 0.0
        k = bisect.bisect_right(self.starts, t) - 1
        return self.before[k] + self.rates[k] * (t - self.starts[k])

    def time_of(self, rows: float) -> float:
        """The second by which ``rows`` rows are offered."""
        if rows <= 0:
            return 0.0
        k = bisect.bisect_right(self.before, rows) - 1
        return self.starts[k] + (rows - self.before[k]) / self.rates[k]


class Pace:
    """One split's schedule: ``base`` rows (read before a restore), then the
    schedule's rows from ``t0``, the split's first read (perf_counter)."""

    def __init__(self, schedule: RateSchedule, base: int = 0):
        self.schedule = schedule
        self.base = base
        self.t0: float | None = None

    def due(self, now: float) -> float:
        """Rows offered by ``now``."""
        return self.base + (0.0 if self.t0 is None else self.schedule.rows_by(now - self.t0))

    def wait(self, rows: int, now: float) -> float:
        """Seconds from ``now`` until ``rows`` rows are offered (<= 0: already);
        starts the schedule at the first call."""
        if self.t0 is None:
            self.t0 = now
        return self.t0 + self.schedule.time_of(rows - self.base) - now

    def backlog(self, rows: int, now: float) -> int:
        """Rows offered by ``now`` and not read (``rows`` read in all)."""
        return max(0, int(self.due(now) - rows))
