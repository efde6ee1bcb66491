"""Window and running-aggregate operators: the runtime's face of
``fastops.WindowAggregator``."""
from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from fastops.core.messages import MAX_WATERMARK
from fastops.core.window.aggregator import State, WindowAggregator
from fastops.core.window.assigners import GlobalWindow
from fastops.operators.base import Operator, Tagged


def _nonempty(batch: pa.RecordBatch | None) -> list:
    return [batch] if batch is not None and batch.num_rows else []


class WindowOperator(Operator):
    """Keyed event-time windows; late rows go to the side output ``"late"``."""

    def __init__(self, window: Any, keys: tuple[str, ...], aggs: dict[str, Any],
                 time_column: str, allowed_lateness: Any = 0):
        self.args = (window, list(keys), dict(aggs), time_column, allowed_lateness)
        self.aggregator = WindowAggregator(window, list(keys), dict(aggs), time=time_column,
                                           allowed_lateness=allowed_lateness)
        self.name = f"window({type(window).__name__})"

    def _late(self) -> list:
        late = self.aggregator.take_late()
        return [Tagged("late", late)] if late is not None and late.num_rows else []

    def process(self, batch: pa.RecordBatch) -> list:
        self.aggregator.process(batch)
        return self._late()

    def on_watermark(self, t_ms: int) -> list:
        if t_ms == MAX_WATERMARK:
            return []  # close() flushes everything at the end of input
        return _nonempty(self.aggregator.advance_watermark(t_ms))

    def close(self) -> list:
        return _nonempty(self.aggregator.flush()) + self._late()

    def snapshot(self) -> bytes | None:
        return self.aggregator.snapshot().to_bytes()

    def restore(self, state: bytes | None) -> None:
        if state is not None:
            self.aggregator.restore(State.from_bytes(state))


ARRIVAL = "__fastops_arrival"


class RunningAggregateOperator(Operator):
    """A running aggregate per key (no window): after each batch, the current
    value of every key that batch touched (an upsert stream). ``first`` /
    ``last`` follow event time if the stream has it, else arrival order."""

    def __init__(self, keys: tuple[str, ...], aggs: dict[str, Any], time_column: str | None = None):
        self.time_column = time_column
        self.aggregator = WindowAggregator(GlobalWindow(), list(keys), dict(aggs),
                                           time=time_column or ARRIVAL)
        self.name = "aggregate"
        self.arrived = 0

    def process(self, batch: pa.RecordBatch) -> list:
        if self.time_column is None:
            order = pa.array(np.arange(self.arrived, self.arrived + batch.num_rows, dtype=np.int64))
            self.arrived += batch.num_rows
            batch = batch.append_column(ARRIVAL, order)
        self.aggregator.process(batch)
        return _nonempty(self.aggregator.take_updates())

    def snapshot(self) -> bytes | None:
        return self.aggregator.snapshot().to_bytes()

    def restore(self, state: bytes | None) -> None:
        if state is not None:
            self.aggregator.restore(State.from_bytes(state))
