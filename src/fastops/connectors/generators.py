"""Inputs produced by Python code: generator functions (optionally paced to a
rate) and iterators of batches."""
from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Any, Callable

import pyarrow as pa

from fastops.connectors.base import END, Reader, Source
from fastops.connectors.pacing import Pace, Rate, RateSchedule
from fastops.core.arrow import as_batch

MAX_WAIT_S = 0.05  # a paced reader ahead of its schedule waits at most this long per read


class _IterReader(Reader):
    """Reads an iterator; position = items read (a replay skips that many).
    With a ``pace``, reads no faster than its schedule; its backlog is how
    many rows it is behind it."""

    def __init__(self, it: Iterator[Any], name: str, skip: int = 0, pace: Callable[[int], Pace] | None = None):
        self.it = it
        self.name = name
        self.rows = 0
        self.count = 0
        for _ in range(skip):
            item = next(self.it, END)
            if item is END:
                break
            self.count += 1
            self.rows += item.num_rows if isinstance(item, (pa.RecordBatch, pa.Table)) else 0
        self.pace = None if pace is None else pace(self.rows)
        self.arrived: float | None = None

    def read(self) -> Any:
        if self.pace is not None:  # ahead of the schedule: wait (the task counts it idle), then read
            ahead = self.pace.wait(self.rows, time.perf_counter())
            if ahead > 0:
                time.sleep(min(ahead, MAX_WAIT_S))
                return None
            self.arrived = time.time() + ahead  # when the schedule offered the batch's first row
        item = next(self.it, END)
        if item is END or item is None:
            return item
        if isinstance(item, pa.Table):
            item = as_batch(item)
        if not isinstance(item, pa.RecordBatch):
            raise TypeError(f"source {self.name!r} must produce pyarrow.RecordBatch "
                            f"(or None when idle), got {type(item).__name__}")
        self.count += 1
        self.rows += item.num_rows
        return item

    def position(self) -> Any:
        return self.count

    def backlog(self) -> int | None:
        return None if self.pace is None else self.pace.backlog(self.rows, time.perf_counter())

    def arrival_time(self) -> float | None:
        """When the rows of the batch last read arrived (wall clock): for a
        paced reader, when its schedule offered them, so that latency counts
        the time they waited behind a slow job; None: as they were read."""
        return self.arrived


class IteratorSource(Source):
    """Batches from an iterator: read once, not replayable. Every reader reads
    the whole iterator, so it cannot change its parallelism
    (``rescale_positions`` raises ValueError)."""

    replayable = False

    def __init__(self, batches: Iterable[Any], name: str = "from_arrow"):
        self.batches = batches
        self.name = name

    def open(self, index: int, parallelism: int, position: Any = None) -> Reader:
        return _IterReader(iter(self.batches), self.name)


class GeneratorSource(Source):
    """Batches from ``fn``: a generator function or a callable returning an
    iterable of batches (``None`` items mean "no data now"). ``rate`` paces the
    source to that many rows per second, or in steps over time
    (``[(0, 4000), (30, 8000)]``, see ``fastops.connectors.pacing``); a
    paced reader behind its schedule reports the rows due as its backlog. ``deterministic=True`` declares that
    calling ``fn`` again yields the same batches, which makes it replayable.
    Every reader reads all of ``fn()``, so the source cannot change its
    parallelism (``rescale_positions`` raises ValueError).
    """

    def __init__(self, fn: Callable[[], Iterable[Any]], rate: Rate | None = None,
                 deterministic: bool = False, name: str = "from_generator"):
        if not callable(fn):
            raise TypeError(f"from_generator needs a callable, got {type(fn).__name__}")
        self.fn = fn
        self.rate = rate
        self.schedule = None if rate is None else RateSchedule(rate)
        self.replayable = deterministic
        self.name = name
        self._paces: dict[int, Pace] = {}  # by split: kept across restores in this process

    def open(self, index: int, parallelism: int, position: Any = None) -> Reader:
        return _IterReader(iter(self.fn()), self.name, skip=position or 0,
                           pace=None if self.schedule is None else lambda rows: self._pace(index, position, rows))

    def _pace(self, index: int, position: Any, rows: int) -> Pace:
        """Split ``index``'s schedule: a new one for a fresh start (or a restore
        from another process), the one it had for a restore."""
        pace = self._paces.get(index)
        if position is None or pace is None:
            assert self.schedule is not None
            pace = self._paces[index] = Pace(self.schedule, rows)
        return pace
