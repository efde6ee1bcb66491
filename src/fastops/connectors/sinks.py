"""Sinks: the last operator of a chain. They emit nothing downstream.

Transactional sinks follow a two-phase commit protocol driven by checkpoints:
rows written between two checkpoints form one transaction (an *epoch*);
``pre_commit(checkpoint_id)`` seals it when the barrier passes (its handle goes
into the checkpoint), and ``commit(checkpoint_id)`` makes every sealed epoch up
to that checkpoint visible once the checkpoint is complete. On recovery,
``recover(handles)`` commits the restored checkpoint's epochs (if a crash came
between the manifest and the commit) and ``abort()`` drops everything else
that was never committed. So output is exactly-once after a crash.

A sink also knows which epochs it committed (``committed_after``): when
recovery restores a checkpoint older than the sink's last committed epoch
(newer checkpoints were damaged), ``roll_back`` takes the later epochs'
output away before the replay writes those rows again, so output is never
doubled.

The runtime sees sinks only through the protocols of
``fastops.connectors.base``; ``TransactionalSink`` here is the base class that
implements their bookkeeping. A new connector (a database, a broker)
subclasses it and implements ``begin`` / ``write`` / ``pre_commit`` /
``commit`` / ``abort`` / ``commit_handles`` and, to be safe when recovery
falls back more than one checkpoint, ``committed_after`` / ``roll_back``.
"""
from __future__ import annotations

import contextlib
import glob
import os
import re
import sys
import threading
from typing import Any, Callable, TextIO

import pyarrow as pa
import pyarrow.parquet as pq

from fastops.core.files import fsync_dir, fsync_file
from fastops.operators.base import Operator, OperatorContext


class Sink(Operator):
    """Base of sinks: counts the rows it writes (``JobResult.rows_out``)."""

    transactional = False

    def process(self, batch: pa.RecordBatch) -> list:
        if self.ctx.metrics is not None:
            self.ctx.metrics.sink_rows += batch.num_rows
        self.write(batch)
        return []

    def write(self, batch: pa.RecordBatch) -> None:
        raise NotImplementedError


class TransactionalSink(Sink):
    """Two-phase commit sink (see the module docs). ``epoch`` numbers the open
    transaction; it is the id of the checkpoint that will seal it."""

    transactional = True
    epoch = 0  # none open before ``open``

    def open(self, ctx: OperatorContext) -> None:
        super().open(ctx)
        self.epoch = 1
        self.begin(self.epoch)

    def begin(self, epoch: int) -> None:
        """Start a transaction for the rows up to checkpoint ``epoch``."""

    def pre_commit(self, checkpoint_id: int) -> Any:
        """Seal the open transaction; return a JSON-serialisable handle."""
        raise NotImplementedError

    def commit(self, checkpoint_id: int) -> None:
        """Make every sealed transaction up to ``checkpoint_id`` visible (idempotent)."""
        raise NotImplementedError

    def abort(self) -> None:
        """Drop all work that was not committed."""

    def recover(self, handles: list, checkpoint_id: int) -> None:
        """Restart after ``checkpoint_id``: commit its ``handles``, abort the rest."""
        self.commit_handles(handles)
        self.abort()
        self.epoch = checkpoint_id + 1
        self.begin(self.epoch)

    def commit_handles(self, handles: list) -> None:
        raise NotImplementedError

    def finished(self) -> None:
        """The job ended and every epoch is committed."""

    # Called on a sink made for the job (not opened) before it runs, for all
    # parallel instances at once; checkpoint_id 0 means "from the start".
    def committed_after(self, checkpoint_id: int) -> list[str]:
        """Committed output of epochs after ``checkpoint_id``: what a run
        restored from that checkpoint would write again."""
        return []

    def roll_back(self, checkpoint_id: int) -> list[str]:
        """Take away the committed output of epochs after ``checkpoint_id``
        (before a replay from that checkpoint); returns what was moved where."""
        return []

    def snapshot_barrier(self, checkpoint_id: int) -> Any:
        """Called by the task when barrier ``checkpoint_id`` passes."""
        handle = self.pre_commit(checkpoint_id)
        self.epoch = checkpoint_id + 1
        self.begin(self.epoch)
        return handle


class CollectResult:
    """Batches collected by every parallel instance of a collect sink.

    Only committed batches count: rows of a checkpoint that did not complete
    are dropped when the job restarts.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.committed: list[tuple[int, int, list[pa.RecordBatch]]] = []  # (task, epoch, batches)
        self.sealed: dict[tuple[int, int], list[pa.RecordBatch]] = {}
        self.schema: pa.Schema | None = None

    def __getstate__(self) -> dict:
        """A copy in another process (a task on a Ray actor) starts empty: the
        driver gathers what it commits into this one."""
        return {"schema": self.schema}

    def __setstate__(self, state: dict) -> None:
        self.__init__()  # type: ignore[misc]
        self.schema = state["schema"]

    def seal(self, task_index: int, epoch: int, batches: list[pa.RecordBatch],
             schema: pa.Schema | None) -> None:
        with self._lock:
            if self.schema is None and schema is not None:
                self.schema = schema
            self.sealed[(task_index, epoch)] = batches

    def commit(self, task_index: int, up_to_epoch: int) -> None:
        with self._lock:
            for key in sorted(k for k in self.sealed if k[0] == task_index and k[1] <= up_to_epoch):
                self.committed.append((key[0], key[1], self.sealed.pop(key)))

    def abort(self, task_index: int) -> None:
        with self._lock:
            for key in [k for k in self.sealed if k[0] == task_index]:
                del self.sealed[key]

    def reset(self) -> None:
        with self._lock:
            self.committed.clear()
            self.sealed.clear()

    def epochs_after(self, checkpoint_id: int) -> list[int]:
        with self._lock:
            return sorted({e for _, e, _ in self.committed if e > checkpoint_id})

    def drop_after(self, checkpoint_id: int) -> None:
        with self._lock:
            self.committed = [c for c in self.committed if c[1] <= checkpoint_id]

    def table(self) -> pa.Table:
        with self._lock:
            batches = [b for _, _, bs in sorted(self.committed, key=lambda c: (c[0], c[1])) for b in bs]
        if not batches:
            return (self.schema or pa.schema([])).empty_table()
        if all(b.schema.equals(batches[0].schema) for b in batches):
            return pa.Table.from_batches(batches)
        # batches of several shapes (e.g. a process function's rows and timer rows):
        # columns are unified, missing ones are null
        return pa.concat_tables([pa.Table.from_batches([b]) for b in batches], promote_options="default")


class CollectSink(TransactionalSink):
    """Collects into a ``CollectResult``; exactly-once like the file sinks."""

    def __init__(self, result: CollectResult, name: str = "collect"):
        self.result = result
        self.name = name

    def begin(self, epoch: int) -> None:
        self._open: list[pa.RecordBatch] = []
        self._schema: pa.Schema | None = None

    def write(self, batch: pa.RecordBatch) -> None:
        self._schema = self._schema or batch.schema
        if batch.num_rows:
            self._open.append(batch)

    def pre_commit(self, checkpoint_id: int) -> Any:
        self.result.seal(self.ctx.task_index, checkpoint_id, self._open, self._schema)
        return checkpoint_id

    def commit(self, checkpoint_id: int) -> None:
        self.result.commit(self.ctx.task_index, checkpoint_id)

    def commit_handles(self, handles: list) -> None:
        for h in handles:
            self.result.commit(self.ctx.task_index, int(h))

    def abort(self) -> None:
        self.result.abort(self.ctx.task_index)

    def committed_after(self, checkpoint_id: int) -> list[str]:
        return [f"{self.name}: rows of epoch {e}" for e in self.result.epochs_after(checkpoint_id)]

    def roll_back(self, checkpoint_id: int) -> list[str]:
        dropped = self.committed_after(checkpoint_id)
        self.result.drop_after(checkpoint_id)
        return [f"{d} (dropped)" for d in dropped]


class FunctionSink(Sink):
    """Calls ``fn(batch)`` for every batch (at-least-once after a restart)."""

    def __init__(self, fn: Callable[[pa.RecordBatch], Any], name: str = "sink_to"):
        if not callable(fn):
            raise TypeError(f"sink_to needs a callable, got {type(fn).__name__}")
        self.fn = fn
        self.name = name

    def write(self, batch: pa.RecordBatch) -> None:
        self.fn(batch)


class PrintSink(Sink):
    """Prints every row, prefixed by the task number when parallel (as Flink)."""

    def __init__(self, stream: TextIO | None = None, name: str = "print"):
        self.stream = stream
        self.name = name

    def write(self, batch: pa.RecordBatch) -> None:
        out = self.stream or sys.stdout
        prefix = f"{self.ctx.task_index + 1}> " if self.ctx.parallelism > 1 else ""
        names = batch.schema.names
        lines = [prefix + "+I[" + ", ".join(str(row[n]) for n in names) + "]" for row in batch.to_pylist()]
        if lines:
            out.write("\n".join(lines) + "\n")


class FileSink(TransactionalSink):
    """Parquet or Arrow IPC files in ``directory``, one per task and epoch.

    Rows go to ``directory/_pending/part-TTTTT-EEEEEE.ext`` and become
    ``directory/part-TTTTT-EEEEEE.ext`` (atomic rename) only when the checkpoint
    that seals them completes (or the job ends). Readers such as
    ``pyarrow.dataset`` skip ``_``-prefixed folders, so pending rows are never seen.

    The epoch in a file's name is the checkpoint that sealed it. A restore from
    checkpoint N moves committed files of later epochs into
    ``directory/_rolled_back_after_chk-N/``; a start from no checkpoint into a
    directory that holds committed files is refused unless ``overwrite=True``
    (which deletes them).
    """

    def __init__(self, directory: str, fmt: str, name: str | None = None, overwrite: bool = False):
        if fmt not in ("parquet", "ipc"):
            raise ValueError(f"unknown file format {fmt!r}")
        self.directory = os.fspath(directory)
        self.overwrite = overwrite
        self.fmt = fmt
        self.ext = "parquet" if fmt == "parquet" else "arrow"
        self.name = name or f"sink_to_{fmt}"
        self._writer: Any = None
        self._lock = threading.Lock()

    def open(self, ctx: OperatorContext) -> None:
        self.pending_dir = os.path.join(self.directory, "_pending")
        os.makedirs(self.pending_dir, exist_ok=True)
        self._sealed: list[tuple[int, str]] = []  # (epoch, file name), not yet committed
        super().open(ctx)

    def _file(self, epoch: int) -> str:
        return f"part-{self.ctx.task_index:05d}-{epoch:06d}.{self.ext}"

    def begin(self, epoch: int) -> None:
        self._writer = None
        self._epoch = epoch
        self._path = os.path.join(self.pending_dir, self._file(epoch))

    def write(self, batch: pa.RecordBatch) -> None:
        if self._writer is None:
            if self.fmt == "parquet":
                self._writer = pq.ParquetWriter(self._path, batch.schema)
            else:
                self._writer = pa.ipc.new_file(self._path, batch.schema)
        self._writer.write_batch(batch)

    def pre_commit(self, checkpoint_id: int) -> Any:
        """Seal the open file; the handle lists every sealed, uncommitted file
        (so a checkpoint also covers epochs of checkpoints that never completed)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
            fsync_file(self._path)
            with self._lock:
                self._sealed.append((self._epoch, os.path.basename(self._path)))
        with self._lock:
            return [name for _, name in self._sealed]

    def commit_handles(self, handles: list) -> None:
        names = [n for h in handles if h is not None for n in (h if isinstance(h, list) else [h])]
        for name in names:
            src = os.path.join(self.pending_dir, name)
            dst = os.path.join(self.directory, name)
            if os.path.exists(src):
                os.replace(src, dst)
        fsync_dir(self.directory)

    def commit(self, checkpoint_id: int) -> None:
        with self._lock:
            due = [name for epoch, name in self._sealed if epoch <= checkpoint_id]
            self._sealed = [(e, n) for e, n in self._sealed if e > checkpoint_id]
        self.commit_handles(due)

    def abort(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        mine = os.path.join(self.pending_dir, f"part-{self.ctx.task_index:05d}-*.{self.ext}")
        for path in glob.glob(mine):
            os.remove(path)
        with self._lock:
            self._sealed = []

    def finished(self) -> None:
        with contextlib.suppress(OSError):  # removed only when empty: another task may still hold files
            os.rmdir(self.pending_dir)

    def _committed(self) -> list[tuple[int, str]]:
        """(epoch, file name) of every committed file in the directory."""
        pattern = re.compile(r"part-\d{5}-(\d{6})\." + re.escape(self.ext) + "$")
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        found = [(int(m.group(1)), n) for n in names if (m := pattern.match(n))]
        return sorted(found)

    def committed_after(self, checkpoint_id: int) -> list[str]:
        return [os.path.join(self.directory, n) for e, n in self._committed() if e > checkpoint_id]

    def roll_back(self, checkpoint_id: int) -> list[str]:
        later = [n for e, n in self._committed() if e > checkpoint_id]
        if not later:
            return []
        if checkpoint_id == 0:
            if not self.overwrite:
                raise ValueError(
                    f"{self.name}: {self.directory!r} already holds {len(later)} committed file(s) "
                    f"({', '.join(later[:3])}{', ...' if len(later) > 3 else ''}) and the job starts "
                    "from no checkpoint, so it would write their rows again. Restore the checkpoint "
                    "that covers them (restore='latest' with its checkpoint_dir), write to an empty "
                    f"directory, or pass overwrite=True to {self.name}(...) to delete them")
            for n in later:
                os.remove(os.path.join(self.directory, n))
            fsync_dir(self.directory)
            return [f"{os.path.join(self.directory, n)} (deleted: overwrite=True)" for n in later]
        aside = os.path.join(self.directory, f"_rolled_back_after_chk-{checkpoint_id:06d}")
        os.makedirs(aside, exist_ok=True)
        moved = []
        for n in later:
            os.replace(os.path.join(self.directory, n), os.path.join(aside, n))
            moved.append(f"{os.path.join(self.directory, n)} -> {os.path.join(aside, n)}")
        fsync_dir(aside)
        fsync_dir(self.directory)
        return moved

    def close(self) -> list:
        return []
