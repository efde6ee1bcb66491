"""Inputs produced by Python code: generator functions (optionally paced to a
rate) and iterators of batches."""
from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Any, Callable

import pyarrow as pa

from fastops.connectors.base import END, Reader, Source
from fastops.core.arrow import as_batch


class _Pace:
    """The schedule of one paced split: ``base`` rows, then ``rate`` rows per
    second from ``t0`` (its first read). The source keeps it across restores,
    so a restored reader is behind by the time the job was down, as a
    broker's producers go on while its consumer is away."""

    def __init__(self, rate: float, base: int):
        self.rate = rate
        self.base = base
        self.t0: float | None = None

    def due(self, now: float) -> float:
        """Rows the schedule has offered by ``now``."""
        return self.base + (0.0 if self.t0 is None else self.rate * (now - self.t0))


class _IterReader(Reader):
    """Reads an iterator; position = items read (a replay skips that many).
    With a ``pace``, reads no faster than its schedule; its backlog is how
    many rows it is behind it."""

    def __init__(self, it: Iterator[Any], name: str, skip: int = 0, pace: Callable[[int], _Pace] | None = None):
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

    def read(self) -> Any:
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
        if self.pace is not None:
            now = time.perf_counter()
            if self.pace.t0 is None:
                self.pace.t0 = now
            ahead = (self.rows - self.pace.due(now)) / self.pace.rate
            if ahead > 0:
                time.sleep(ahead)
        return item

    def position(self) -> Any:
        return self.count

    def backlog(self) -> int | None:
        if self.pace is None:
            return None
        return max(0, int(self.pace.due(time.perf_counter()) - self.rows))


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
    source to that many rows per second. ``deterministic=True`` declares that
    calling ``fn`` again yields the same batches, which makes it replayable.
    Every reader reads all of ``fn()``, so the source cannot change its
    parallelism (``rescale_positions`` raises ValueError).
    """

    def __init__(self, fn: Callable[[], Iterable[Any]], rate: float | None = None,
                 deterministic: bool = False, name: str = "from_generator"):
        if not callable(fn):
            raise TypeError(f"from_generator needs a callable, got {type(fn).__name__}")
        if rate is not None and (isinstance(rate, bool) or not isinstance(rate, (int, float))
                                 or not rate > 0 or rate == float("inf")):
            raise ValueError(f"rate must be a finite number > 0 rows/s, got {rate!r}")
        self.fn = fn
        self.rate = rate
        self.replayable = deterministic
        self.name = name
        self._paces: dict[int, _Pace] = {}  # by split: kept across restores in this process

    def open(self, index: int, parallelism: int, position: Any = None) -> Reader:
        return _IterReader(iter(self.fn()), self.name, skip=position or 0,
                           pace=None if self.rate is None else lambda rows: self._pace(index, position, rows))

    def _pace(self, index: int, position: Any, rows: int) -> _Pace:
        """Split ``index``'s schedule: a new one for a fresh start (or a restore
        from another process), the one it had for a restore."""
        pace = self._paces.get(index)
        if position is None or pace is None:
            pace = self._paces[index] = _Pace(float(self.rate or 0), rows)
        return pace
