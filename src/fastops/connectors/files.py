"""File inputs: Parquet, CSV and Arrow IPC through ``pyarrow.dataset``."""
from __future__ import annotations

import glob as _glob
import os
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds

from fastops.connectors.base import END, Reader, Source, check_batch_size


def _expand(path: str | os.PathLike | Sequence[str | os.PathLike]) -> list[str]:
    """The files a path, directory (recursively; ``_`` / ``.`` names skipped),
    glob or list of these stands for; FileNotFoundError if one matches nothing."""
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


def _fragment_rows(fragment: Any) -> int:
    """Rows of one file fragment: Parquet row groups from the metadata, else counted."""
    groups = getattr(fragment, "row_groups", None)
    if groups:
        return sum(rg.num_rows for rg in groups)
    return fragment.count_rows()


class FileSource(Source):
    """Parquet / CSV / Arrow IPC files through ``pyarrow.dataset``: a file, a
    directory or a glob. Splits are files (and Parquet row groups); split ``i``
    of ``p`` reads fragments ``i, i + p, ...`` in order."""

    def __init__(self, path: str | Sequence[str], fmt: str, batch_size: int = 65536,
                 schema: pa.Schema | None = None):
        if fmt not in ("parquet", "csv", "ipc"):
            raise ValueError(f"unknown file format {fmt!r}")
        self.batch_size = check_batch_size(batch_size)  # before reading any file
        self.fmt = fmt
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

    def total_rows(self) -> int | None:
        """Rows in all, from Parquet metadata or Arrow IPC files; None for CSV
        (known only by reading it)."""
        if self.fmt == "csv":
            return None
        return sum(_fragment_rows(f) for f in self.fragments)

    def rows_at(self, index: int, parallelism: int, position: Any) -> int:
        """Rows split ``index`` of ``parallelism`` had read at ``position``
        (fragments done, rows read of the next)."""
        if position is None:
            return 0
        frag, rows = position
        return sum(_fragment_rows(f) for f in self.fragments[index::parallelism][:frag]) + rows


class _FileReader(Reader):
    """Reads its fragments in order; position = (fragment, rows already read)."""

    def __init__(self, source: FileSource, fragments: list, position: Any = None):
        self.frag: int
        self.rows: int
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
        b = next(self._it, None)
        if b is None:
            return END
        self.rows += b.num_rows
        return b

    def position(self) -> Any:
        return (self.frag, self.rows)
