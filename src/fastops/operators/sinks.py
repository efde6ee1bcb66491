"""Sinks: the last operator of a chain. They emit nothing downstream."""
from __future__ import annotations

import os
import sys
import threading
from typing import Any, Callable, Optional, TextIO

import pyarrow as pa

from fastops.operators.base import Operator


class CollectResult:
    """Batches collected by every parallel instance of a collect sink."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.batches: dict[int, list[pa.RecordBatch]] = {}
        self.schema: Optional[pa.Schema] = None

    def add(self, task_index: int, batch: pa.RecordBatch) -> None:
        with self._lock:
            if self.schema is None:
                self.schema = batch.schema
            if batch.num_rows:
                self.batches.setdefault(task_index, []).append(batch)

    def reset(self) -> None:
        with self._lock:
            self.batches.clear()

    def table(self) -> pa.Table:
        with self._lock:
            batches = [b for i in sorted(self.batches) for b in self.batches[i]]
        if not batches:
            return (self.schema or pa.schema([])).empty_table()
        return pa.Table.from_batches(batches)


class Sink(Operator):
    """Base of sinks: counts the rows it writes (``JobResult.rows_out``)."""

    def process(self, batch: pa.RecordBatch) -> list:
        if self.ctx.metrics is not None:
            self.ctx.metrics.sink_rows += batch.num_rows
        self.write(batch)
        return []

    def write(self, batch: pa.RecordBatch) -> None:
        raise NotImplementedError


class CollectSink(Sink):
    def __init__(self, result: CollectResult, name: str = "collect"):
        self.result = result
        self.name = name

    def write(self, batch: pa.RecordBatch) -> None:
        self.result.add(self.ctx.task_index, batch)


class FunctionSink(Sink):
    """Calls ``fn(batch)`` for every batch."""

    def __init__(self, fn: Callable[[pa.RecordBatch], Any], name: str = "sink_to"):
        if not callable(fn):
            raise TypeError(f"sink_to needs a callable, got {type(fn).__name__}")
        self.fn = fn
        self.name = name

    def write(self, batch: pa.RecordBatch) -> None:
        self.fn(batch)


class PrintSink(Sink):
    """Prints every row, prefixed by the task number when parallel (as Flink)."""

    def __init__(self, stream: Optional[TextIO] = None, name: str = "print"):
        self.stream = stream
        self.name = name

    def write(self, batch: pa.RecordBatch) -> None:
        out = self.stream or sys.stdout
        prefix = f"{self.ctx.task_index + 1}> " if self.ctx.parallelism > 1 else ""
        names = batch.schema.names
        lines = [prefix + "+I[" + ", ".join(str(row[n]) for n in names) + "]" for row in batch.to_pylist()]
        if lines:
            out.write("\n".join(lines) + "\n")


class FileSink(Sink):
    """One Parquet or Arrow IPC file per parallel task in ``directory``."""

    def __init__(self, directory: str, fmt: str, name: Optional[str] = None):
        if fmt not in ("parquet", "ipc"):
            raise ValueError(f"unknown file format {fmt!r}")
        self.directory = os.fspath(directory)
        self.fmt = fmt
        self.name = name or f"sink_to_{fmt}"
        self._writer: Any = None

    def open(self, ctx) -> None:
        super().open(ctx)
        os.makedirs(self.directory, exist_ok=True)
        self.path = os.path.join(self.directory, f"part-{ctx.task_index:05d}.{'parquet' if self.fmt == 'parquet' else 'arrow'}")

    def _open_writer(self, schema: pa.Schema) -> None:
        if self.fmt == "parquet":
            import pyarrow.parquet as pq

            self._writer = pq.ParquetWriter(self.path, schema)
        else:
            self._writer = pa.ipc.new_file(self.path, schema)

    def write(self, batch: pa.RecordBatch) -> None:
        if self._writer is None:
            self._open_writer(batch.schema)
        self._writer.write_batch(batch)

    def close(self) -> list:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        return []
