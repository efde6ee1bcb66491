"""Sources: collections, pandas, Arrow, files (Parquet / CSV / IPC) and generators.

A ``Source`` is a description; ``open(index, parallelism)`` gives the reader of
one split. ``Reader.read()`` returns a RecordBatch, ``None`` (no data right
now: the source is idle) or ``END``. ``position()`` is how far the reader got,
so a replayable source can be rewound to it (``open(..., position=...)``).
"""
from __future__ import annotations

import glob as _glob
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Callable

import numpy as np
import pyarrow as pa

from fastops.core.arrow import as_batch

END = object()  # the reader has nothing more, ever


class Reader:
    def read(self) -> Any:  # RecordBatch | None | END
        raise NotImplementedError

    def position(self) -> Any:
        return None

    def close(self) -> None:
        pass


class Source:
    """Base: a named, possibly splittable and replayable input."""

    name = "source"
    replayable = True

    def splits(self) -> int:
        """How many readers can share the input (1: not splittable)."""
        return 1

    def schema(self) -> pa.Schema | None:
        return None

    def open(self, index: int, parallelism: int, position: Any = None) -> Reader:
        raise NotImplementedError


MAX_BATCH_SIZE = 2**31 - 1  # rows; Arrow's scanners take a C int


def check_batch_size(value: Any) -> int:
    """``batch_size`` as an int in ``[1, 2**31 - 1]``, else TypeError / ValueError naming it."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"batch_size must be an int of rows, got {type(value).__name__} {value!r}")
    if not 1 <= value <= MAX_BATCH_SIZE:
        raise ValueError(f"batch_size must be between 1 and 2**31 - 1 rows, got {value}")
    return int(value)


def _to_batches(table: pa.Table, batch_size: int | None) -> list[pa.RecordBatch]:
    if batch_size is not None:
        batch_size = check_batch_size(batch_size)
    return table.to_batches(max_chunksize=batch_size) if table.num_rows else []


class _ListReader(Reader):
    def __init__(self, batches: Sequence[pa.RecordBatch], start: int = 0):
        self.batches = batches
        self.pos = start

    def read(self) -> Any:
        if self.pos >= len(self.batches):
            return END
        b = self.batches[self.pos]
        self.pos += 1
        return b

    def position(self) -> Any:
        return self.pos


class TableSource(Source):
    """An in-memory table (from a collection, pandas or Arrow), in batches.

    Split ``i`` of ``p`` reads batches ``i, i + p, i + 2p, ...``.
    """

    def __init__(self, table: pa.Table, batch_size: int | None = 65536, name: str = "from_arrow"):
        self.table = table
        self.batches = _to_batches(table, batch_size)
        self.name = name

    def splits(self) -> int:
        return max(1, len(self.batches))

    def schema(self) -> pa.Schema:
        return self.table.schema

    def open(self, index: int, parallelism: int, position: Any = None) -> Reader:
        mine = self.batches[index::parallelism]
        return _ListReader(mine, position or 0)


class IteratorSource(Source):
    """Batches from an iterator: read once, not replayable."""

    replayable = False

    def __init__(self, batches: Iterable[Any], name: str = "from_arrow"):
        self.batches = batches
        self.name = name

    def open(self, index: int, parallelism: int, position: Any = None) -> Reader:
        return _IterReader(iter(self.batches), None, self.name)


class _IterReader(Reader):
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


class GeneratorSource(Source):
    """Batches from ``fn``: a generator function or a callable returning an
    iterable of batches (``None`` items mean "no data now"). ``rate`` paces the
    source to that many rows per second. ``deterministic=True`` declares that
    calling ``fn`` again yields the same batches, which makes it replayable.
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


def _expand(path: str | Sequence[str]) -> list[str]:
    paths = [path] if isinstance(path, (str, os.PathLike)) else list(path)
    files: list[str] = []
    for p in paths:
        p = os.fspath(p)
        if any(ch in p for ch in "*?["):
            matched = sorted(_glob.glob(p, recursive=True))
            if not matched:
                raise FileNotFoundError(f"no file matches {p!r}")
            files.extend(matched)
        elif os.path.isdir(p):
            for root, dirs, names in os.walk(p):
                dirs[:] = sorted(d for d in dirs if not d.startswith(("_", ".")))
                files.extend(os.path.join(root, n) for n in sorted(names) if not n.startswith(("_", ".")))
        elif os.path.isfile(p):
            files.append(p)
        else:
            raise FileNotFoundError(f"no such file or directory: {p!r}")
    return files


class FileSource(Source):
    """Parquet / CSV / Arrow IPC files through ``pyarrow.dataset``: a file, a
    directory or a glob. Splits are files (and Parquet row groups); split ``i``
    of ``p`` reads fragments ``i, i + p, ...`` in order."""

    def __init__(self, path: str | Sequence[str], fmt: str, batch_size: int = 65536,
                 schema: pa.Schema | None = None):
        import pyarrow.dataset as ds

        if fmt not in ("parquet", "csv", "ipc"):
            raise ValueError(f"unknown file format {fmt!r}")
        self.batch_size = check_batch_size(batch_size)  # before reading any file
        self.name = f"from_{fmt}"
        self.dataset = ds.dataset(_expand(path), format="arrow" if fmt == "ipc" else fmt, schema=schema)
        frags = list(self.dataset.get_fragments())
        if fmt == "parquet":
            frags = [rg for f in frags for rg in f.split_by_row_group()]
        self.fragments = frags

    def splits(self) -> int:
        return max(1, len(self.fragments))

    def schema(self) -> pa.Schema:
        return self.dataset.schema

    def open(self, index: int, parallelism: int, position: Any = None) -> Reader:
        return _FileReader(self, self.fragments[index::parallelism], position)


class _FileReader(Reader):
    """Reads its fragments in order; position = (fragment, rows already read)."""

    def __init__(self, source: FileSource, fragments: list, position: Any = None):
        self.frag, self.rows = position or (0, 0)
        self._it = self._batches(source, fragments)

    def _batches(self, source: FileSource, fragments: list) -> Iterator[pa.RecordBatch]:
        while self.frag < len(fragments):
            skip = self.rows  # resuming inside a fragment
            scanner = fragments[self.frag].scanner(schema=source.dataset.schema,
                                                   batch_size=source.batch_size, use_threads=False)
            for b in scanner.to_batches():
                if skip >= b.num_rows:
                    skip -= b.num_rows
                    continue
                if skip:
                    b, skip = b.slice(skip), 0
                if b.num_rows:
                    yield b
            self.frag += 1
            self.rows = 0

    def read(self) -> Any:
        b = next(self._it, END)
        if b is not END:
            self.rows += b.num_rows
        return b

    def position(self) -> Any:
        return (self.frag, self.rows)
