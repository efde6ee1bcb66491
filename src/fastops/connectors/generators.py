"""Inputs produced by Python code: generator functions (optionally paced to a
rate) and iterators of batches."""
from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Any, Callable

import pyarrow as pa

from fastops.connectors.base import END, Reader, Source
from fastops.core.arrow import as_batch


class _IterReader(Reader):
    """Reads an iterator; position = items read (a replay skips that many)."""

    def __init__(self, it: Iterator[Any], rate: float | None, name: str, skip: int = 0):
        self.it = it
        self.rate = rate
        self.name = name
        self.rows = 0
        self.count = 0
        self.t0: float | None = None
        for _ in range(skip):
            if next(self.it, END) is END:
                break
            self.count += 1

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
        if self.rate:
            if self.t0 is None:
                self.t0 = time.perf_counter()
            self.rows += item.num_rows
            ahead = self.rows / self.rate - (time.perf_counter() - self.t0)
            if ahead > 0:
                time.sleep(ahead)
        return item

    def position(self) -> Any:
        return self.count


class IteratorSource(Source):
    """Batches from an iterator: read once, not replayable. Every reader reads
    the whole iterator, so it cannot change its parallelism
    (``rescale_positions`` raises ValueError)."""

    replayable = False

    def __init__(self, batches: Iterable[Any], name: str = "from_arrow"):
        self.batches = batches
        self.name = name

    def open(self, index: int, parallelism: int, position: Any = None) -> Reader:
        return _IterReader(iter(self.batches), None, self.name)


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

    def open(self, index: int, parallelism: int, position: Any = None) -> Reader:
        return _IterReader(iter(self.fn()), self.rate, self.name, skip=position or 0)
