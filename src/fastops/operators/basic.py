"""Stateless, vectorised transformations: map, filter, flat_map, select, and
the watermark assigner."""
from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.acero as acero
import pyarrow.compute as pc

from fastops.core.messages import MAX_WATERMARK, Watermark
from fastops.core.partitioning import KeyGroups
from fastops.core.watermarks import to_ms
from fastops.operators.base import Operator, OperatorContractError, check_batch

BatchFn = Callable[[pa.RecordBatch], Any]


def evaluate(batch: pa.RecordBatch, columns: dict[str, Any]) -> pa.RecordBatch:
    """Project ``batch`` to ``columns`` (name -> pyarrow.compute expression or column name)."""
    exprs = [pc.field(v) if isinstance(v, str) else v for v in columns.values()]
    for name, e in zip(columns, exprs):
        if not isinstance(e, pc.Expression):
            raise TypeError(f"column {name!r}: expected a column name or a pyarrow.compute "
                            f"expression (fastops.col(...)), got {type(e).__name__}")
    decl = acero.Declaration.from_sequence([
        acero.Declaration("table_source", acero.TableSourceNodeOptions(pa.Table.from_batches([batch]))),
        acero.Declaration("project", acero.ProjectNodeOptions(exprs, list(columns))),
    ])
    table = decl.to_table(use_threads=False)
    return check_batch(table, "select")


class _SameSchema:
    """Every batch a function returns must have the schema of its first one."""

    schema: pa.Schema | None = None

    def _checked(self, batch: pa.RecordBatch, what: str) -> pa.RecordBatch:
        if self.schema is None:
            self.schema = batch.schema
        elif not batch.schema.equals(self.schema):
            raise OperatorContractError(
                f"{what}: the function returned a batch with schema ({_schema_text(batch.schema)}) "
                f"but earlier batches had ({_schema_text(self.schema)})")
        return batch


def _schema_text(schema: pa.Schema) -> str:
    return ", ".join(f"{f.name}: {f.type}" for f in schema)


class Map(_SameSchema, Operator):
    """``fn(batch) -> batch``; with a declared ``schema``, every batch it returns has it."""

    def __init__(self, fn: BatchFn, name: str = "map", schema: pa.Schema | None = None):
        self.fn = fn
        self.name = name
        self.schema = schema

    def process(self, batch: pa.RecordBatch) -> list:
        what = f"map {self.name!r}"
        return [self._checked(check_batch(self.fn(batch), what), what)]


class FlatMap(_SameSchema, Operator):
    """``fn(batch) -> iterable of batches`` (or None for nothing)."""

    def __init__(self, fn: BatchFn, name: str = "flat_map"):
        self.fn = fn
        self.name = name

    def process(self, batch: pa.RecordBatch) -> list:
        result = self.fn(batch)
        if result is None:
            return []
        what = f"flat_map {self.name!r}"
        if isinstance(result, (pa.RecordBatch, pa.Table)):
            return [self._checked(check_batch(result, what), what)]
        if not isinstance(result, Iterable):
            raise OperatorContractError(
                f"{what}: the function must return an iterable of "
                f"pyarrow.RecordBatch, got {type(result).__name__}")
        return [self._checked(check_batch(b, what, "yield"), what) for b in result]


class Filter(Operator):
    """Keep rows where a predicate holds.

    The predicate is a pyarrow.compute expression (``fastops.col("v") > 0``) or
    a function of the batch returning a boolean mask (or an already filtered
    batch). Null in the mask drops the row, as SQL's WHERE does.
    """

    def __init__(self, predicate: pc.Expression | BatchFn, name: str = "filter"):
        if not isinstance(predicate, pc.Expression) and not callable(predicate):
            raise TypeError(f"filter needs an expression or a function, got {type(predicate).__name__}")
        self.predicate = predicate
        self.name = name

    def process(self, batch: pa.RecordBatch) -> list:
        if isinstance(self.predicate, pc.Expression):
            return [batch.filter(self.predicate)]
        mask = self.predicate(batch)
        if isinstance(mask, (pa.RecordBatch, pa.Table)):
            return [check_batch(mask, f"filter {self.name!r}")]
        if isinstance(mask, pa.ChunkedArray):
            mask = mask.combine_chunks()
        if isinstance(mask, np.ndarray):
            mask = pa.array(mask)
        if not isinstance(mask, pa.Array) or not pa.types.is_boolean(mask.type):
            got = mask.type if isinstance(mask, pa.Array) else type(mask).__name__
            raise OperatorContractError(
                f"filter {self.name!r}: the function must return a boolean mask "
                f"(pyarrow/NumPy) or a RecordBatch, got {got}")
        if len(mask) != batch.num_rows:
            raise OperatorContractError(
                f"filter {self.name!r}: mask has {len(mask)} values for a batch of {batch.num_rows} rows")
        return [batch.filter(mask, null_selection_behavior="drop")]


class Project(Operator):
    """``select`` / ``with_columns`` with pyarrow.compute expressions."""

    def __init__(self, columns: dict[str, Any], keep_existing: bool, name: str = "select"):
        self.columns = columns
        self.keep_existing = keep_existing
        self.name = name

    def process(self, batch: pa.RecordBatch) -> list:
        if self.keep_existing:
            cols = {n: n for n in batch.schema.names if n not in self.columns}
            cols.update(self.columns)
            ordered = {n: cols[n] for n in batch.schema.names if n in cols}
            ordered.update({n: e for n, e in self.columns.items() if n not in ordered})
            return [evaluate(batch, ordered)]
        missing = [v for v in self.columns.values() if isinstance(v, str) and v not in batch.schema.names]
        if missing:
            raise KeyError(f"select: column {missing[0]!r} not in stream (columns: {batch.schema.names})")
        return [evaluate(batch, self.columns)]


class ProcessingTimeWatermarks(Operator):
    """Watermarks from the wall clock, for windows over a processing-time
    attribute (``PROCTIME()``): after each batch, and when its task's source
    has nothing to read (``on_processing_time``), the watermark is now, so a
    processing-time window closes when the clock passes its end even while no
    row arrives. Upstream watermarks are replaced, the final one passes."""

    generates_watermarks = True
    TICK_MS = 10  # the least step of a watermark sent between batches

    def __init__(self, name: str = "proctime_watermarks"):
        self.name = name
        self.sent = -(1 << 62)

    def _now(self) -> list:
        now = int(time.time() * 1000)
        if now <= self.sent:
            return []
        self.sent = now
        return [Watermark(now)]

    def process(self, batch: pa.RecordBatch) -> list:
        return [batch, *self._now()]

    def on_processing_time(self) -> list:
        return self._now() if int(time.time() * 1000) - self.sent >= self.TICK_MS else []

    def on_watermark(self, t_ms: int) -> list:
        return [Watermark(MAX_WATERMARK)] if t_ms == MAX_WATERMARK else []


class WatermarkAssigner(Operator):
    """Emit watermarks from an event-time column with a watermark strategy.

    Upstream watermarks are replaced by this operator's own (as Flink's
    ``assign_timestamps_and_watermarks``); the final watermark at end of input
    still passes.
    """

    generates_watermarks = True
    state_combines = True  # restore_groups takes the least watermark

    def __init__(self, column: str, strategy_factory: Callable[[], Any],
                 idle_timeout_ms: int | None = None, name: str = "watermark"):
        self.column = column
        self.strategy_factory = strategy_factory
        self.idle_timeout_ms = idle_timeout_ms
        self.name = name

    def open(self, ctx) -> None:
        super().open(ctx)
        self.strategy = self.strategy_factory()

    def process(self, batch: pa.RecordBatch) -> list:
        idx = batch.schema.get_field_index(self.column)
        if idx < 0:
            raise KeyError(f"with_watermark: time column {self.column!r} not in stream "
                           f"(columns: {batch.schema.names})")
        out: list = [batch]
        if batch.num_rows:
            ts = to_ms(batch.column(idx), self.column)
            wm = self.strategy.on_batch(ts)
            if wm is not None:
                out.append(Watermark(int(wm)))
        return out

    def on_watermark(self, t_ms: int) -> list:
        return [Watermark(MAX_WATERMARK)] if t_ms == MAX_WATERMARK else []

    def snapshot(self) -> bytes | None:
        cur = getattr(self.strategy, "current", None)
        return None if cur is None else int(cur).to_bytes(8, "little", signed=True)

    def restore(self, state: bytes | None) -> None:
        if state is not None and hasattr(self.strategy, "restore"):
            self.strategy.restore(int.from_bytes(state, "little", signed=True))

    def restore_groups(self, states: Sequence[bytes | None], groups: KeyGroups) -> None:
        """Not keyed: start from the least watermark of the earlier tasks, so no
        row a new task reads is behind a watermark it already sent."""
        held = [int.from_bytes(s, "little", signed=True) for s in states if s is not None]
        if held and hasattr(self.strategy, "restore"):
            self.strategy.restore(min(held))
