"""In-memory inputs: collections, pandas DataFrames and Arrow tables, in batches."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from fastops.connectors.base import END, Reader, Source, check_batch_size
from fastops.connectors.units import Cursor, Plan, rescale_positions, split_plan


def _to_batches(table: pa.Table, batch_size: int | None) -> list[pa.RecordBatch]:
    if batch_size is not None:
        batch_size = check_batch_size(batch_size)
    return table.to_batches(max_chunksize=batch_size) if table.num_rows else []


class _ListReader(Reader):
    """Reads a list of batches; position = batches read."""

    def __init__(self, batches: Sequence[pa.RecordBatch], start: int = 0):
        self.batches = batches
        self.pos = start
        self._left = sum(b.num_rows for b in batches[start:])

    def read(self) -> Any:
        if self.pos >= len(self.batches):
            return END
        b = self.batches[self.pos]
        self.pos += 1
        self._left -= b.num_rows
        return b

    def backlog(self) -> int:
        return self._left

    def position(self) -> Any:
        return self.pos


class _PlanReader(Reader):
    """Reads the batches of a unit plan (``fastops.connectors.units``); position:
    the plan left, as a dict."""

    def __init__(self, batches: Sequence[pa.RecordBatch], plan: Plan):
        self.batches = batches
        self.cursor = Cursor(plan)

    def read(self) -> Any:
        while (unit := self.cursor.unit) is not None:
            b, skip = self.batches[unit], self.cursor.rows
            self.cursor.next_unit()
            if skip < b.num_rows:
                return b.slice(skip) if skip else b
        return END

    def position(self) -> Any:
        return self.cursor.plan().to_position()

    def backlog(self) -> int:
        return self.cursor.rows_left(lambda u: self.batches[u].num_rows)


class TableSource(Source):
    """An in-memory table (from a collection, pandas or Arrow), in batches.

    Split ``i`` of ``p`` reads batches ``i, i + p, i + 2p, ...``; its position
    is the number it read. After a change of parallelism (``rescale_positions``)
    a reader reads the batches its dict position lists (see
    ``fastops.connectors.units``).
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
        if isinstance(position, dict):
            return _PlanReader(self.batches, Plan.from_position(position, len(self.batches), self.name))
        mine = self.batches[index::parallelism]
        return _ListReader(mine, position or 0)

    def rescale_positions(self, positions: list, parallelism: int) -> list:
        """Deal the batches the old readers had not read over ``parallelism``
        new readers, round robin (see ``Source.rescale_positions``)."""
        return rescale_positions(self.name, positions, parallelism, self._plan)

    def _plan(self, index: int, parallelism: int, position: Any) -> Plan:
        n = len(self.batches)
        if isinstance(position, dict):
            return Plan.from_position(position, n, self.name)
        mine = len(range(index, n, parallelism))
        if position is None:
            position = 0
        if isinstance(position, bool) or not isinstance(position, int) or not 0 <= position <= mine:
            raise ValueError(f"source {self.name!r}: bad position {position!r} of split {index} of "
                             f"{parallelism} (batches read: 0 .. {mine})")
        return split_plan(index, parallelism, n, position)

    def total_rows(self) -> int:
        """Rows in all (for progress bars)."""
        return self.table.num_rows

    def rows_at(self, index: int, parallelism: int, position: Any) -> int:
        """Rows split ``index`` of ``parallelism`` had read at ``position``
        (batches read, or a dict position: its finished batches and rows read)."""
        if position is None:
            return 0
        if isinstance(position, dict):
            plan = Plan.from_position(position, len(self.batches), self.name)
            return plan.rows_read(lambda u: self.batches[u].num_rows)
        return sum(b.num_rows for b in self.batches[index::parallelism][:int(position)])
