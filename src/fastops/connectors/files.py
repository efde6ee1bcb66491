"""File inputs: Parquet, CSV and Arrow IPC through ``pyarrow.dataset``."""
from __future__ import annotations

import glob as _glob
import os
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds

from fastops.connectors.base import END, Reader, Source, check_batch_size
from fastops.connectors.units import Cursor, Plan, rescale_positions, split_plan


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
    of ``p`` reads fragments ``i, i + p, ...`` in order, and its position is
    ``(fragments done, rows read of the next)``. After a change of parallelism
    (``rescale_positions``) a reader reads the fragments its dict position
    lists (see ``fastops.connectors.units``)."""

    def __init__(self, path: str | Sequence[str], fmt: str, batch_size: int = 65536,
                 schema: pa.Schema | None = None, file_format: ds.FileFormat | None = None):
        """``file_format``: how pyarrow reads the files, when not ``fmt``'s
        defaults (a header-less CSV, say)."""
        if fmt not in ("parquet", "csv", "ipc"):
            raise ValueError(f"unknown file format {fmt!r}")
        self.batch_size = check_batch_size(batch_size)  # before reading any file
        self.fmt = fmt
        self.name = f"from_{fmt}"
        files = _expand(path)
        reading = file_format or ("arrow" if fmt == "ipc" else fmt)
        self.dataset = ds.dataset(files, format=reading, schema=schema)
        frags = list(self.dataset.get_fragments())
        if schema is None and fmt != "csv" and len(frags) > 1:
            # the dataset takes the first file's schema; a column that is all
            # null in one file and typed in another is merged instead
            self.dataset = ds.dataset(files, format=reading, schema=_unified_schema(frags))
            frags = list(self.dataset.get_fragments())
        if fmt == "parquet":
            frags = [rg for f in frags for rg in f.split_by_row_group()]
        self.fragments = frags
        self._unit_rows: list[int] | None = None  # rows per fragment, once asked

    def unit_rows(self, unit: int) -> int:
        """Rows of fragment ``unit`` (Parquet / IPC metadata; not for CSV)."""
        if self._unit_rows is None:
            self._unit_rows = [_fragment_rows(f) for f in self.fragments]
        return self._unit_rows[unit]

    def splits(self) -> int:
        return max(1, len(self.fragments))

    def schema(self) -> pa.Schema:
        return self.dataset.schema

    def open(self, index: int, parallelism: int, position: Any = None) -> Reader:
        if isinstance(position, dict):
            return _FileReader(self, self._plan(index, parallelism, position), compact=False)
        return _FileReader(self, self._plan(index, parallelism, position), compact=True)

    def rescale_positions(self, positions: list, parallelism: int) -> list:
        """Deal the fragments the old readers had not finished over
        ``parallelism`` new readers, round robin; one read in part keeps its
        row offset (see ``Source.rescale_positions``)."""
        return rescale_positions(self.name, positions, parallelism, self._plan)

    def _plan(self, index: int, parallelism: int, position: Any) -> Plan:
        n = len(self.fragments)
        if isinstance(position, dict):
            return Plan.from_position(position, n, self.name)
        mine = len(range(index, n, parallelism))
        frag, rows = (0, 0) if position is None else _pair(position)
        if frag is None or rows is None or not 0 <= frag <= mine or rows < 0 or (frag == mine and rows):
            raise ValueError(f"source {self.name!r}: bad position {position!r} of split {index} of "
                             f"{parallelism} ((fragments done: 0 .. {mine}, rows read of the next))")
        return split_plan(index, parallelism, n, frag, rows)

    def total_rows(self) -> int | None:
        """Rows in all, from Parquet metadata or Arrow IPC files; None for CSV
        (known only by reading it)."""
        if self.fmt == "csv":
            return None
        return sum(_fragment_rows(f) for f in self.fragments)

    def rows_at(self, index: int, parallelism: int, position: Any) -> int:
        """Rows split ``index`` of ``parallelism`` had read at ``position``
        ((fragments done, rows read of the next), or a dict position: its
        finished fragments and rows read)."""
        if position is None:
            return 0
        plan = self._plan(index, parallelism, position)
        return plan.rows_read(lambda u: _fragment_rows(self.fragments[u]))


def _unified_schema(fragments: list) -> pa.Schema:
    """One schema for files whose schemas differ only where a column of one
    is all null; ValueError naming the file and column that do not fit."""
    merged = fragments[0].physical_schema
    for f in fragments[1:]:
        try:
            merged = pa.unify_schemas([merged, f.physical_schema])
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise ValueError(f"file {f.path!r} does not match the schema of the files before it: {exc}; "
                             f"pass schema= to read them as one type") from None
    return merged


def _pair(position: Any) -> tuple[int | None, int | None]:
    """``(fragments done, rows)`` of a compact position (a list after JSON);
    None for what is not an int."""
    if not isinstance(position, (tuple, list)) or len(position) != 2:
        return None, None
    a, b = position
    ok = [v if isinstance(v, int) and not isinstance(v, bool) else None for v in (a, b)]
    return ok[0], ok[1]


def _checked(batches: Iterator[pa.RecordBatch], fragment: Any, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """The batches of one file; a file that cannot be read as the source's
    schema is a ValueError naming the file, not an Arrow error mid-job."""
    try:
        yield from batches
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise ValueError(f"file {fragment.path!r} cannot be read as the source's schema "
                         f"({', '.join(f'{f.name}: {f.type}' for f in schema)}): {exc}") from None


class _FileReader(Reader):
    """Reads the fragments of its plan in order; position: ``(fragments done,
    rows read of the next)`` (``compact``, a split of the source) or the plan
    left, as a dict."""

    def __init__(self, source: FileSource, plan: Plan, compact: bool):
        self.cursor = Cursor(plan)
        self.compact = compact
        self._source = source
        self._it = self._batches(source)

    def _batches(self, source: FileSource) -> Iterator[pa.RecordBatch]:
        while (unit := self.cursor.unit) is not None:
            skip = self.cursor.rows  # resuming inside a fragment
            scanner = source.fragments[unit].scanner(schema=source.dataset.schema,
                                                     batch_size=source.batch_size, use_threads=False)
            for b in _checked(scanner.to_batches(), source.fragments[unit], source.dataset.schema):
                if skip >= b.num_rows:
                    skip -= b.num_rows
                    continue
                if skip:
                    b, skip = b.slice(skip), 0
                if b.num_rows:
                    yield b
            self.cursor.next_unit()

    def read(self) -> Any:
        b = next(self._it, None)
        if b is None:
            return END
        self.cursor.rows += b.num_rows
        return b

    def position(self) -> Any:
        if self.compact:
            return (self.cursor.finished, self.cursor.rows)
        return self.cursor.plan().to_position()

    def backlog(self) -> int | None:
        """Unread rows of its fragments; None for CSV (counted only by reading)."""
        if self._source.fmt == "csv":
            return None
        return self.cursor.rows_left(self._source.unit_rows)
