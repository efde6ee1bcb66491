"""Reading a PostgreSQL table: a bounded scan, and lookups by key.

A ``'connector' = 'jdbc'`` table of the Table API is a sink (``INSERT
INTO``), a bounded source (``SELECT ... FROM`` reads the table once, as
Flink's JDBC scan source) and a lookup source: the right side of a
processing-time temporal join (``JOIN t FOR SYSTEM_TIME AS OF o.proc_time``)
queries the rows of each batch's distinct keys when the batch arrives, so
every row sees the table as it is then (Flink's JDBC lookup function,
without its cache).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from fastops.connectors.base import END, Reader, Source
from fastops.connectors.postgres import _require_psycopg, _split_table, connect

__all__ = ["PostgresTableSource"]


def _table_ident(table: str) -> Any:
    pg = _require_psycopg()
    schema, name = _split_table(table)
    return pg.sql.Identifier(schema, name) if schema else pg.sql.Identifier(name)


def _to_arrow(rows: list[tuple], schema: pa.Schema) -> pa.Table:
    cols = list(zip(*rows)) if rows else [()] * len(schema)
    return pa.table([pa.array(list(c), f.type) for c, f in zip(cols, schema)], schema=schema)


class PostgresTableSource(Source):
    """The columns ``schema`` of PostgreSQL table ``table`` at ``dsn``."""

    def __init__(self, dsn: str, table: str, schema: pa.Schema, batch_size: int = 65536, name: str | None = None):
        self.dsn = dsn
        self.table = table
        self._schema = schema
        self.batch_size = int(batch_size)
        self.name = name or f"jdbc:{table}"
        self.replayable = True

    def schema(self) -> pa.Schema:
        return self._schema

    def _select(self) -> Any:
        pg = _require_psycopg()
        cols = pg.sql.SQL(", ").join(pg.sql.Identifier(n) for n in self._schema.names)
        return pg.sql.SQL("SELECT {} FROM {}").format(cols, _table_ident(self.table))

    def read_all(self) -> pa.Table:
        """Every row of the table, now."""
        with connect(self.dsn, autocommit=True) as conn:
            return _to_arrow(conn.execute(self._select()).fetchall(), self._schema)

    def open(self, index: int, parallelism: int, position: Any = None) -> Reader:
        return _ScanReader(self, int(position or 0))

    # -- lookups ----------------------------------------------------------------------
    def lookup_connection(self) -> Any:
        """A connection for :meth:`lookup` (the caller closes it)."""
        return connect(self.dsn, application_name="fastops lookup", autocommit=True)

    def lookup(self, conn: Any, columns: Sequence[str], keys: Sequence[pa.Array]) -> pa.Table:
        """The rows whose ``columns`` equal one of the key tuples ``keys``
        (one array per column; rows with a null key match nothing)."""
        pg = _require_psycopg()
        if not len(keys[0]):
            return _to_arrow([], self._schema)
        names = [f"k{i}" for i in range(len(columns))]
        query = pg.sql.SQL("SELECT {cols} FROM {table} AS t JOIN unnest({params}) AS k({names}) ON {on}").format(
            cols=pg.sql.SQL(", ").join(pg.sql.SQL("t.{}").format(pg.sql.Identifier(n)) for n in self._schema.names),
            table=_table_ident(self.table),
            params=pg.sql.SQL(", ").join(pg.sql.Placeholder() for _ in columns),
            names=pg.sql.SQL(", ").join(pg.sql.Identifier(n) for n in names),
            on=pg.sql.SQL(" AND ").join(pg.sql.SQL("t.{} = k.{}").format(pg.sql.Identifier(c), pg.sql.Identifier(k))
                                        for c, k in zip(columns, names)))
        rows = conn.execute(query, [k.to_pylist() for k in keys]).fetchall()
        return _to_arrow(rows, self._schema)


class _ScanReader(Reader):
    """The table read once, then handed out in batches; position = rows read."""

    def __init__(self, source: PostgresTableSource, start: int):
        self.source = source
        self.next = start
        self.data: pa.Table | None = None

    def read(self) -> Any:
        if self.data is None:
            self.data = self.source.read_all()
        if self.next >= self.data.num_rows:
            return END
        stop = min(self.next + self.source.batch_size, self.data.num_rows)
        out = self.data.slice(self.next, stop - self.next).combine_chunks().to_batches()
        self.next = stop
        return out[0] if out else pa.RecordBatch.from_pylist([], schema=self.source.schema())

    def position(self) -> Any:
        return self.next
