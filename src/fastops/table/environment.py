"""``TableEnvironment``: the catalog, SQL entry points and conversions.

>>> import fastops as fo
>>> t_env = fo.TableEnvironment(mode="batch")
>>> t_env.create_temporary_view("t", t_env.from_elements([(1, "a"), (2, "b")], ["id", "s"]))
>>> t_env.sql_query("SELECT s FROM t WHERE id > 1").to_pandas()["s"].tolist()
['b']

Modes: ``"streaming"`` (default; results carry row kinds, a GROUP BY without
a window is a changelog, a declared WATERMARK drives the windows) and
``"batch"`` (final results only; windows close at the end of input).
"""
from __future__ import annotations

import os
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from fastops.connectors.datagen import datagen_source
from fastops.connectors.nexmark import nexmark_source
from fastops.connectors.postgres import with_credentials
from fastops.connectors.postgres_lookup import PostgresTableSource
from fastops.connectors.redis import redis_stream_options
from fastops.core import arrow as _arrow
from fastops.core.durations import parse_duration
from fastops.datastream import DataStream, StreamEnvironment
from fastops.operators.base import OperatorContext
from fastops.table.expressions import Call, Col
from fastops.table.formats import write_csv
from fastops.table.functions import (
    AggregateFunction,
    UserDefinedAggregateFunction,
    UserDefinedScalarFunction,
    UserDefinedTableFunction,
)
from fastops.table.plan import PlanError, Scan, compile_plan, insert_only_of
from fastops.table.table import Table, TableResult, message_result, ok_result
from fastops.table.temporal import TemporalTableFunction
from fastops.table.types import to_arrow, to_sql

__all__ = ["EnvironmentSettings", "TableEnvironment"]


class EnvironmentSettings:
    """PyFlink-style settings: ``EnvironmentSettings.in_streaming_mode()``."""

    def __init__(self, mode: str):
        self.mode = mode

    @staticmethod
    def in_streaming_mode() -> EnvironmentSettings:
        return EnvironmentSettings("streaming")

    @staticmethod
    def in_batch_mode() -> EnvironmentSettings:
        return EnvironmentSettings("batch")

    def is_streaming_mode(self) -> bool:
        return self.mode == "streaming"


@dataclass
class ConnectorTable:
    """A table declared by ``CREATE TABLE ... WITH (...)``."""

    name: str
    schema: pa.Schema
    options: dict
    time_col: str | None = None
    watermark_ms: int | None = None
    primary_key: list = field(default_factory=list)
    computed: list = field(default_factory=list)  # (name, Expr): columns computed from the physical ones
    scan: Any = None  # the plan node reading the table, when shared by the queries that name it


def _schema_of(schema: Any, n_cols: int | None = None) -> tuple[list[str] | None, pa.Schema | None]:
    """(names, typed schema) from names, (name, type) pairs or a pa.Schema."""
    if schema is None:
        return None, None
    if isinstance(schema, pa.Schema):
        return schema.names, schema
    schema = list(schema)
    if all(isinstance(s, str) for s in schema):
        return schema, None
    fields = []
    for s in schema:
        if not (isinstance(s, (tuple, list)) and len(s) == 2):
            raise TypeError(f"schema entries must be names or (name, type) pairs, got {s!r}")
        fields.append(pa.field(s[0], to_arrow(s[1])))
    return [f.name for f in fields], pa.schema(fields)


class TableEnvironment:
    """Tables, views, functions and SQL over the fastops engine.

    Parameters
    ----------
    mode
        ``"streaming"`` or ``"batch"`` (or an :class:`EnvironmentSettings`).
    parallelism
        Parallelism of keyed operators in the jobs it runs.
    batch_size
        Rows per record batch read from in-memory tables.
    """

    def __init__(self, mode: Any = "streaming", parallelism: int = 1, batch_size: int = 65536):
        if isinstance(mode, EnvironmentSettings):
            mode = mode.mode
        if mode not in ("streaming", "batch"):
            raise ValueError(f"mode must be 'streaming' or 'batch', got {mode!r}")
        self.mode = mode
        self.parallelism = int(parallelism)
        self.batch_size = int(batch_size)
        self._tables: dict[str, Any] = {}  # name -> Table | ConnectorTable
        self._views: dict[str, Table] = {}
        self._functions: dict[str, Any] = {}

    @classmethod
    def create(cls, settings: Any = None, mode: str | None = None, **kwargs: Any) -> TableEnvironment:
        if mode is None:
            mode = settings.mode if isinstance(settings, EnvironmentSettings) else (settings or "streaming")
        return cls(mode, **kwargs)

    # -- sources -----------------------------------------------------------------
    def _scan(self, table: pa.Table, name: str, rowtime: str | None = None,
              watermark: Any = None) -> Table:
        # Arrow's compute functions (filter, take, comparisons, string functions) do not
        # take string_view / binary_view: such columns are STRING / BYTES as large_*
        table = _arrow.without_views(table)
        if rowtime is not None and rowtime not in table.schema.names:
            raise KeyError(f"rowtime column {rowtime!r} not in the table (columns: {table.schema.names})")
        wm = None
        if watermark is not None:
            if rowtime is None:
                raise ValueError("a watermark needs rowtime=<time column>")
            wm = parse_duration(watermark)
        return Table(self, Scan("arrow", table, table.schema, rowtime, wm, name, self.batch_size))

    def from_arrow(self, table: Any, schema: Any = None, rowtime: str | None = None,
                   watermark: Any = None) -> Table:
        """A Table over a pyarrow Table / RecordBatch. ``rowtime`` and
        ``watermark`` (a delay such as ``"2s"``) declare event time, as a DDL
        ``WATERMARK FOR rowtime AS rowtime - delay`` would."""
        if isinstance(table, pa.RecordBatch):
            table = pa.Table.from_batches([table])
        if not isinstance(table, pa.Table):
            raise TypeError(f"from_arrow needs a pyarrow Table or RecordBatch, got {type(table).__name__}")
        names, typed = _schema_of(schema)
        if names is not None:
            if len(names) != table.num_columns:
                raise ValueError(f"schema has {len(names)} columns, the data {table.num_columns}")
            table = table.rename_columns(names)
        if typed is not None:
            table = self._cast(table, typed)
        return self._scan(table, "from_arrow", rowtime, watermark)

    @staticmethod
    def _cast(table: pa.Table, schema: pa.Schema) -> pa.Table:
        cols = []
        for f, c in zip(schema, table.columns):
            if c.type != f.type:
                try:
                    c = c.cast(f.type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                    raise TypeError(f"column {f.name!r}: cannot convert {c.type} to {to_sql(f.type)} ({exc})") from None
            cols.append(c)
        return pa.Table.from_arrays(cols, schema=schema)

    def from_pandas(self, pdf: Any, schema: Any = None, rowtime: str | None = None,
                    watermark: Any = None) -> Table:
        table = pa.Table.from_pandas(pdf, preserve_index=False)
        return self.from_arrow(table, schema, rowtime, watermark)

    def from_elements(self, elements: Sequence[Any], schema: Any = None, rowtime: str | None = None,
                      watermark: Any = None) -> Table:
        """Rows as tuples (or dicts). ``schema``: names, ``(name, type)`` pairs
        or a pyarrow schema; without one, columns are ``_1, _2, ...``."""
        rows = list(elements)
        names, typed = _schema_of(schema)
        if rows and isinstance(rows[0], dict):
            table = pa.Table.from_pylist(rows, schema=typed)
            return self._scan(table, "from_elements", rowtime, watermark)
        width = len(rows[0]) if rows else (len(names) if names else 0)
        if names is None:
            names = [f"_{i + 1}" for i in range(width)]
        for r in rows:
            if len(r) != len(names):
                raise ValueError(f"row {r!r} has {len(r)} values for {len(names)} columns {names}")
        cols: list[Sequence[Any]] = list(zip(*rows)) if rows else [[] for _ in names]
        arrays = []
        for i, n in enumerate(names):
            t = typed.field(i).type if typed is not None else None
            try:
                arrays.append(pa.array(list(cols[i]), type=t))
            except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
                raise TypeError(f"column {n!r}: values {list(cols[i])[:3]} do not fit "
                                f"{to_sql(t) if t is not None else 'one type'} ({exc})") from None
        table = pa.Table.from_arrays(arrays, names=names)
        return self._scan(table, "from_elements", rowtime, watermark)

    def from_path(self, path: str) -> Table:
        try:
            return self._lookup(path)
        except KeyError:
            raise KeyError(f"table {path!r} not found; known: {sorted(self.list_tables())}") from None

    def _lookup(self, name: str) -> Table:
        if name in self._views:
            return self._views[name]
        entry = self._tables.get(name)
        if entry is None:
            lowered = {k.lower(): k for k in list(self._tables) + list(self._views)}
            if name.lower() in lowered:
                return self._lookup(lowered[name.lower()])
            raise KeyError(name)
        if isinstance(entry, Table):
            return entry
        return self._connector_scan(entry)

    def _connector_scan(self, ct: ConnectorTable) -> Table:
        opts = ct.options
        connector = opts.get("connector")
        if connector == "redis-stream":
            return Table(self, Scan("redis-stream", redis_stream_options(ct.name, opts), ct.schema, ct.time_col,
                                    ct.watermark_ms, ct.name, self.batch_size, computed=ct.computed))
        if connector == "nexmark":  # one scan however often a query names the table: read once (Flink reuses sources)
            if ct.scan is None:
                ct.scan = Scan("source", nexmark_source(ct.name, opts, ct.schema), ct.schema, ct.time_col,
                               ct.watermark_ms, ct.name, self.batch_size, computed=ct.computed)
            return Table(self, ct.scan)
        if connector == "datagen":
            try:
                source = datagen_source(ct.name, opts, ct.schema, self.batch_size)
            except ValueError as exc:
                raise PlanError(str(exc)) from None
            return Table(self, Scan("source", source, ct.schema, ct.time_col, ct.watermark_ms, ct.name,
                                    self.batch_size, computed=ct.computed))
        if connector == "jdbc":  # read once (Flink's JDBC scan), or looked up by key in a lookup join
            return Table(self, Scan("source", self._jdbc_source(ct), ct.schema, ct.time_col, ct.watermark_ms,
                                    ct.name, self.batch_size, computed=ct.computed))
        if connector != "filesystem":
            raise PlanError(f"table {ct.name!r} (connector {connector!r}) cannot be read; "
                            "only 'filesystem', 'redis-stream', 'jdbc', 'nexmark' and 'datagen' tables are sources")
        fmt = opts.get("format", "parquet")
        path = opts.get("path")
        if fmt not in ("parquet", "csv"):
            raise PlanError(f"table {ct.name!r}: unsupported format {fmt!r} (parquet or csv)")
        if path is None:
            raise PlanError(f"table {ct.name!r}: the filesystem connector needs a 'path'")
        if os.path.isdir(path):
            files = sorted(f for f in os.listdir(path) if not f.startswith((".", "_")))
            if not files:
                raise PlanError(f"table {ct.name!r}: no files in {path!r}")
        elif not os.path.exists(path):
            raise PlanError(f"table {ct.name!r}: path {path!r} does not exist")
        return Table(self, Scan(fmt, path, ct.schema, ct.time_col, ct.watermark_ms, ct.name, self.batch_size,
                                ct.primary_key, computed=ct.computed))

    # -- catalog -------------------------------------------------------------------
    def create_temporary_view(self, view_path: str, table: Any, *fields: Any) -> None:
        if not isinstance(table, Table):
            if isinstance(table, DataStream):
                table = self.from_data_stream(table)
            elif isinstance(table, pa.Table):
                table = self.from_arrow(table)
            else:
                table = self.from_pandas(table)
        if fields:
            table = table.alias(*[f.col if isinstance(f, Col) else f for f in fields])
        if view_path in self._views:
            raise ValueError(f"temporary view {view_path!r} exists already")
        self._views[view_path] = table

    register_table = create_temporary_view

    def drop_temporary_view(self, view_path: str) -> bool:
        return self._views.pop(view_path, None) is not None

    def drop_temporary_table(self, table_path: str) -> bool:
        return self._tables.pop(table_path, None) is not None

    def list_tables(self) -> list[str]:
        """Tables and temporary views, sorted (as Flink's ``listTables``)."""
        return sorted(set(self._tables) | set(self._views))

    def list_views(self) -> list[str]:
        return sorted(self._views)

    def list_temporary_tables(self) -> list[str]:
        return sorted(self._tables)

    def list_temporary_views(self) -> list[str]:
        return self.list_views()

    def create_temporary_function(self, path: str, function: Any) -> None:
        if isinstance(function, AggregateFunction):  # PyFlink: its get_result_type() declares the type
            function = UserDefinedAggregateFunction(function, None)
        if not isinstance(function, (UserDefinedScalarFunction, UserDefinedAggregateFunction,
                                     UserDefinedTableFunction, TemporalTableFunction)):
            raise TypeError(f"create_temporary_function needs a udf / udaf / udtf, got {type(function).__name__}")
        if path.lower() in self._functions:
            raise ValueError(f"function {path!r} exists already")
        self._functions[path.lower()] = function

    create_temporary_system_function = create_temporary_function

    def create_statement_set(self) -> Any:
        """INSERTs run as one job: ``add_insert_sql(...)`` / ``add_insert(...)``,
        then ``execute()`` (``fastops.table.statements.StatementSet``)."""
        from fastops.table.statements import StatementSet  # deferred: it reads SQL with sqlglot

        return StatementSet(self)

    def drop_temporary_function(self, path: str) -> bool:
        return self._functions.pop(path.lower(), None) is not None

    drop_temporary_system_function = drop_temporary_function

    def list_user_defined_functions(self) -> list[str]:
        return sorted(self._functions)

    def _function(self, name: str) -> Any:
        return self._functions.get(name.lower())

    # -- DataStream conversion ---------------------------------------------------------
    def from_data_stream(self, stream: Any, *fields: Any) -> Table:
        """A Table over a DataStream; its event-time column (``with_watermark``)
        stays the table's time attribute and its watermarks pass through. The
        schema is read from a job over no rows unless the stream's source gives it."""
        schema = self._stream_schema(stream)
        node = Scan("stream", stream, schema, stream.time_column, None, "from_data_stream")
        t = Table(self, node)
        if fields:
            t = t.alias(*[f.col if isinstance(f, Col) else f for f in fields])
        return t

    @staticmethod
    def _stream_schema(stream: Any) -> pa.Schema:
        if getattr(stream, "schema", None) is not None:  # known as the DataStream was built
            return stream.schema
        node = stream.node
        while not node.is_source:
            if len(node.inputs) != 1:
                break
            node = node.inputs[0].upstream
        src = getattr(node, "source", None)
        schema = src.schema() if src is not None else None
        if schema is not None and stream.node.is_source:
            return schema
        # general case: infer by running the stream's operators over an empty batch
        if schema is not None:
            probe = pa.RecordBatch.from_arrays([pa.array([], f.type) for f in schema], schema=schema)
            out = _probe(stream.node, probe)
            if out is not None:
                return out
        raise PlanError("from_data_stream: cannot tell the stream's schema; start it from a collection, "
                        "Arrow, pandas or file source")

    def to_data_stream(self, table: Table) -> Any:
        """The DataStream computing ``table`` (insert-only tables; event time kept
        when the table still has its time attribute)."""
        node = insert_only_of(table._node)
        if node.changelog:
            raise PlanError("to_data_stream needs an insert-only table; use to_changelog_stream")
        return compile_plan(node, self.mode == "streaming", self.parallelism)

    def to_changelog_stream(self, table: Table) -> Any:
        """The DataStream of ``table`` with an int8 ``__op`` column (0 +I, 1 -U, 2 +U, 3 -D)."""
        return compile_plan(table._node, self.mode == "streaming", self.parallelism)

    # -- SQL ---------------------------------------------------------------------------
    def sql_query(self, query: str) -> Table:
        # deferred: the SQL face needs sqlglot, an optional dependency
        from sqlglot import exp

        from fastops.table.sql import SqlError, compile_query, parse

        tree, prep = parse(query, self._function_names())
        if not isinstance(tree, (exp.Select, exp.Union, exp.Intersect, exp.Except, exp.Values, exp.Subquery)):
            raise SqlError(f"sql_query takes a SELECT query, got {type(tree).__name__.upper()}; "
                           "use execute_sql for statements")
        return Table(self, compile_query(self, tree, prep))

    def _function_names(self) -> list[str]:
        return list(self._functions)

    def execute_sql(self, stmt: str) -> TableResult:
        """Run one statement: a query (returns its rows), CREATE TABLE / VIEW,
        DROP, INSERT INTO, SHOW TABLES / VIEWS / FUNCTIONS, DESCRIBE, EXPLAIN."""
        # deferred: the SQL face needs sqlglot, an optional dependency
        from sqlglot import exp

        from fastops.table.sql import SqlError, compile_query, parse

        s = stmt.strip().rstrip(";").strip()
        head = s.upper().split()
        if not head:
            raise SqlError("empty SQL statement")
        if head[0] == "SHOW":
            what = " ".join(head[1:])
            if what in ("TABLES", "TEMPORARY TABLES"):
                return message_result([(n,) for n in self.list_tables()], ["table name"], [pa.string()])
            if what in ("VIEWS", "TEMPORARY VIEWS"):
                return message_result([(n,) for n in self.list_views()], ["view name"], [pa.string()])
            if what in ("FUNCTIONS", "USER FUNCTIONS"):
                return message_result([(n,) for n in self.list_user_defined_functions()], ["function name"],
                                      [pa.string()])
            raise SqlError(f"unsupported statement SHOW {what}")
        if head[0] in ("DESCRIBE", "DESC"):
            name = s.split(None, 1)[1].strip().strip("`\"")
            return self._describe(name)
        if head[0] == "EXPLAIN":
            q = re.sub(r"^EXPLAIN\s+(PLAN\s+FOR\s+)?", "", s, flags=re.IGNORECASE)
            text = self.sql_query(q).explain()
            return message_result([(text,)], ["result"], [pa.string()], raw=True)
        if head[0] == "USE":
            return ok_result()
        if head[0] in ("CREATE", "DROP", "EXECUTE"):  # CREATE / DROP FUNCTION, EXECUTE STATEMENT SET
            from fastops.table.statements import run_statement  # deferred: it reads SQL with sqlglot

            done = run_statement(self, s)
            if done is not None:
                return done
        tree, prep = parse(s, self._function_names())
        if isinstance(tree, (exp.Select, exp.Union, exp.Intersect, exp.Except, exp.Values, exp.Subquery)):
            return Table(self, compile_query(self, tree, prep)).execute()
        if isinstance(tree, exp.Create):
            return self._create(tree, prep)
        if isinstance(tree, exp.Insert):
            target = tree.this
            if isinstance(target, exp.Schema):
                target = target.this
            name = target.name
            q = tree.expression
            table = Table(self, compile_query(self, q, prep))
            return self._insert_into(name, table, bool(tree.args.get("overwrite")))
        if isinstance(tree, exp.Drop):
            targets = tree.args.get("tables") or ([tree.this] if tree.this is not None else [])
            if len(targets) != 1:
                raise SqlError("DROP takes one table or view")
            name = targets[0].name
            kind = (tree.args.get("kind") or "").upper()
            gone = self._views.pop(name, None) if kind == "VIEW" else self._tables.pop(name, None)
            if gone is None and not tree.args.get("exists"):
                raise SqlError(f"{kind.lower() or 'table'} {name!r} not found")
            return ok_result()
        if isinstance(tree, exp.Describe):
            return self._describe(tree.this.name)
        raise SqlError(f"unsupported statement {type(tree).__name__.upper()}: {s[:60]!r}")

    def _create(self, tree: Any, prep: Any) -> TableResult:
        # deferred: the SQL face needs sqlglot, an optional dependency
        from sqlglot import exp

        from fastops.table.sql import QueryCompiler, Scope, ScopeCol, SqlError, compile_query, watermark_delay

        kind = (tree.args.get("kind") or "").upper()
        if kind == "VIEW":
            target = tree.this  # a Schema for CREATE VIEW v(a, b) AS ...: the view's column names
            columns = [c.name for c in target.expressions] if isinstance(target, exp.Schema) else []
            name = target.this.name if isinstance(target, exp.Schema) else target.name
            if name in self._views or name in self._tables:
                if tree.args.get("exists"):
                    return ok_result()
                raise SqlError(f"view {name!r} exists already")
            view = Table(self, compile_query(self, tree.expression, prep))
            self._views[name] = view.alias(*columns) if columns else view
            return ok_result()
        if kind != "TABLE":
            raise SqlError(f"unsupported statement CREATE {kind}")
        schema_node = tree.this
        if not isinstance(schema_node, exp.Schema):
            if tree.expression is not None:  # CREATE TABLE t AS SELECT: a view-like table
                self._tables[schema_node.name] = Table(self, compile_query(self, tree.expression, prep))
                return ok_result()
            raise SqlError("CREATE TABLE needs a column list")
        name = schema_node.this.name
        if name in self._tables or name in self._views:
            if tree.args.get("exists"):
                return ok_result()
            raise SqlError(f"table {name!r} exists already")
        fields = []
        pk: list = []
        computed_defs = []  # name AS expr, compiled over the physical columns below
        for c in schema_node.expressions:
            if isinstance(c, exp.ColumnDef):
                kind_t = c.args.get("kind")
                as_expr = [k.kind.this for k in c.args.get("constraints") or []
                           if isinstance(k.kind, exp.ComputedColumnConstraint)]
                if kind_t is None and as_expr:
                    computed_defs.append((c.name, as_expr[0]))
                    continue
                if kind_t is None:
                    raise SqlError(f"column {c.name!r} needs a type (or AS expression: a computed column)")
                try:
                    fields.append(pa.field(c.name, to_arrow(kind_t.sql()), metadata=_declared(c, kind_t)))
                except ValueError as exc:
                    raise SqlError(f"column {c.name!r}: {exc}") from None
            elif isinstance(c, exp.PrimaryKey):
                pk = [x.name for x in c.expressions]
            else:
                raise SqlError(f"unsupported CREATE TABLE element {c.sql()!r}")
        schema = pa.schema(fields)
        scope = Scope([ScopeCol(None, f.name, f.name) for f in schema])
        computed = [(n, QueryCompiler(self, prep).expr(e, scope)) for n, e in computed_defs]
        names = schema.names + [n for n, _ in computed]
        opts = {}
        props = tree.args.get("properties")
        for p in (props.expressions if props is not None else []):
            if isinstance(p, exp.Property):
                key = p.this.this if isinstance(p.this, exp.Literal) else p.name
                val = p.args.get("value")
                opts[str(key)] = val.this if isinstance(val, exp.Literal) else (val.sql() if val is not None else None)
        time_col = None
        wm = None
        if prep.watermarks:
            time_col, text = prep.watermarks[0]
            if time_col not in names:
                raise SqlError(f"WATERMARK FOR {time_col!r}: no such column in {name!r} ({names})")
            wm = watermark_delay(text, time_col)
        if "connector" not in opts and "connector.type" in opts:
            opts = _legacy_options(opts)
        if "connector" not in opts:
            raise SqlError(f"CREATE TABLE {name!r} needs WITH ('connector' = ...)")
        self._tables[name] = ConnectorTable(name, schema, opts, time_col, wm, pk, computed)
        return ok_result()

    def _describe(self, name: str) -> TableResult:
        entry = self._tables.get(name)
        extras: dict[str, str] = {}
        if isinstance(entry, ConnectorTable):
            schema, tc, wm = entry.schema, entry.time_col, entry.watermark_ms
            pk = entry.primary_key
            if entry.computed:  # computed columns follow the physical ones, "AS expr" in extras
                schema = Scan("arrow", None, schema, computed=entry.computed).schema
                extras = {n: f"AS {e!r}" for n, e in entry.computed}
        else:
            try:
                t = self._lookup(name)
            except KeyError:
                raise KeyError(f"table {name!r} not found; known: {sorted(self.list_tables())}") from None
            schema, tc, wm, pk = t.schema, t._node.time_col, getattr(t._node, "watermark_ms", None), []
        rows = []
        proctime = {n for n, e in (entry.computed if isinstance(entry, ConnectorTable) else [])
                    if isinstance(e, Call) and e.fn == "proctime"}
        for f in schema:
            meta = f.metadata or {}
            sql_type = meta.get(b"flink_type", b"").decode() or to_sql(f.type)
            sql_type += " *ROWTIME*" if f.name == tc else " *PROCTIME*" if f.name in proctime else ""
            key = f"PRI({', '.join(pk)})" if f.name in pk else ""
            wexpr = f"`{tc}` - INTERVAL '{wm / 1000:g}' SECOND" if f.name == tc and wm is not None else ""
            nullable = f.name not in pk and f.name not in proctime and b"not_null" not in meta and f.nullable
            rows.append((f.name, sql_type, nullable, key, extras.get(f.name, ""), wexpr))
        return message_result(rows, ["name", "type", "null", "key", "extras", "watermark"],
                              [pa.string(), pa.string(), pa.bool_(), pa.string(), pa.string(), pa.string()])

    def _insert_into(self, name: str, table: Table, overwrite: bool = False,
                     result: TableResult | None = None) -> TableResult:
        """Write ``table`` into the sink table ``name`` (``result``: its rows, when
        a statement set computed them already)."""
        entry = self._tables.get(name)
        if entry is None and name in self._views:
            raise PlanError(f"INSERT INTO the view {name!r} is not supported; insert into a table created "
                            "with CREATE TABLE ... WITH ('connector' = ...)")
        if entry is None:
            raise KeyError(f"sink table {name!r} not found; create it with CREATE TABLE ... WITH (...)")
        if not isinstance(entry, ConnectorTable):
            raise PlanError(f"table {name!r} is not a connector table and cannot be written to")
        if len(table.schema) != len(entry.schema):
            raise PlanError(f"INSERT INTO {name}: the query has {len(table.schema)} columns, "
                            f"the table {len(entry.schema)} ({entry.schema.names})")
        result = table.execute() if result is None else result
        data = result.to_arrow()
        data = self._cast(data.rename_columns(entry.schema.names), entry.schema)
        connector = entry.options.get("connector")
        if connector == "blackhole":
            pass
        elif connector == "print":
            for row in result.collect():
                vals = ", ".join("null" if v is None else str(v) for v in row)
                print(f"{row.get_row_kind()}[{vals}]")
        elif connector == "filesystem":
            path = entry.options.get("path")
            fmt = entry.options.get("format", "parquet")
            if path is None:
                raise PlanError(f"table {name!r}: the filesystem connector needs a 'path'")
            os.makedirs(path, exist_ok=True)
            if overwrite:
                for f in os.listdir(path):
                    os.remove(os.path.join(path, f))
            fname = os.path.join(path, f"part-{uuid.uuid4().hex[:12]}.{fmt}")
            if fmt == "parquet":
                pq.write_table(data, fname)
            elif fmt == "csv":
                write_csv(data, fname)
            else:
                raise PlanError(f"table {name!r}: unsupported format {fmt!r}")
        elif connector == "jdbc":
            self._insert_jdbc(entry, data)
        else:
            raise PlanError(f"table {name!r}: unsupported connector {connector!r} "
                            "(filesystem, print, blackhole, jdbc)")
        return message_result([(-1,)], ["default_catalog.default_database." + name], [pa.int64()])

    def _jdbc_dsn(self, entry: ConnectorTable) -> str:
        opts = entry.options
        url = opts.get("url")
        if not url:
            raise PlanError(f"table {entry.name!r}: the jdbc connector needs a 'url' ('postgresql://host:port/db')")
        return with_credentials(url, opts.get("username"), opts.get("password"))

    def _jdbc_source(self, entry: ConnectorTable) -> PostgresTableSource:
        return PostgresTableSource(self._jdbc_dsn(entry), entry.options.get("table-name", entry.name), entry.schema,
                                   self.batch_size, name=entry.name)

    def _insert_jdbc(self, entry: ConnectorTable, data: pa.Table) -> None:
        """Flink's JDBC connector options, for PostgreSQL: upsert on the
        PRIMARY KEY when the table declares one, else append; exactly once
        (one transaction, prepared and committed)."""
        dsn, target = self._jdbc_dsn(entry), entry.options.get("table-name", entry.name)
        env = StreamEnvironment(parallelism=1)
        stream = env.from_arrow(data, batch_size=self.batch_size)
        stream.sink_to_postgres(dsn, target, mode="upsert" if entry.primary_key else "append",
                                key=entry.primary_key or None)
        env.execute(f"INSERT INTO {entry.name}")

    def explain_sql(self, query: str) -> str:
        return self.sql_query(query).explain()


_LEGACY_KEYS = {"connector.type": "connector", "connector.path": "path", "format.type": "format"}


def _declared(column: Any, kind: Any) -> dict | None:
    """What DESCRIBE shows of a DDL column that its Arrow type loses: a declared
    length (VARCHAR(32)) and NOT NULL, as field metadata."""
    meta = {}
    text = kind.sql()
    if re.fullmatch(r"(VAR)?(CHAR|BINARY)\(\d+\)", text, re.IGNORECASE):
        meta["flink_type"] = text.upper()
    if any(type(k.kind).__name__ == "NotNullColumnConstraint" for k in column.args.get("constraints") or []):
        meta["not_null"] = "1"
    return meta or None


def _legacy_options(opts: dict) -> dict:
    """Flink's legacy connector options ('connector.type' = 'filesystem',
    'connector.path', 'format.type', as nexmark's q13 declares its side input)
    as today's ('connector', 'path', 'format'); a file:// path as a local path."""
    out = {_LEGACY_KEYS.get(k, k): v for k, v in opts.items()}
    path = out.get("path")
    if isinstance(path, str) and path.startswith("file://"):
        out["path"] = path[len("file://"):]
    return out


def _probe(node: Any, batch: pa.RecordBatch) -> pa.Schema | None:
    """Run the chain of single-input operators from the source to ``node`` over ``batch``."""
    chain = []
    cur = node
    while not cur.is_source:
        chain.append(cur)
        if len(cur.inputs) != 1:
            return None
        cur = cur.inputs[0].upstream
    out = batch
    for n in reversed(chain):
        op = n.factory()
        op.open(OperatorContext(n.name, 0, 1, 128))
        res = [b for b in op.process(out) if isinstance(b, pa.RecordBatch)]
        if not res:
            return None
        out = res[0]
    return out.schema
