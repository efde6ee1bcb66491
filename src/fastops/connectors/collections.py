"""In-memory inputs: collections, pandas DataFrames and Arrow tables, in batches."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from fastops.connectors.base import END, Reader, Source, check_batch_size


def _to_batches(table: pa.Table, batch_size: int | None) -> list[pa.RecordBatch]:
    if batch_size is not None:
        batch_size = check_batch_size(batch_size)
    return table.to_batches(max_chunksize=batch_size) if table.num_rows else []


class _ListReader(Reader):
    """Reads a list of batches; position = batches read."""

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

    def total_rows(self) -> int:
        """Rows in all (for progress bars)."""
        return self.table.num_rows

    def rows_at(self, index: int, parallelism: int, position: Any) -> int:
        """Rows split ``index`` of ``parallelism`` had read at ``position`` (batches read)."""
        if position is None:
            return 0
        return sum(b.num_rows for b in self.batches[index::parallelism][:int(position)])
