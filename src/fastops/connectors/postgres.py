"""PostgreSQL out, exactly once: two-phase commit per checkpoint (psycopg 3).

Each sink task writes an epoch (the rows between two checkpoints) in one
transaction and, when the checkpoint barrier passes, ``PREPARE TRANSACTION``
seals it under a global id ``fastops:{sink id}:p{parallelism}:t{task}:e{epoch}``
(the handle stored in the checkpoint). When the checkpoint completes the
prepared transactions it covers are committed (``COMMIT PREPARED``). A
prepared transaction survives the crash of the job and of the server, so the
commit can wait for recovery: restoring checkpoint ``n`` commits the prepared
transactions its handles list and rolls back every other prepared
transaction of the sink (later epochs, which the replay writes again), so
none is left behind and no row is lost or doubled whichever moment the job
died at, between prepare and commit too.

Modes
    ``append``: every row is inserted, by ``COPY ... FROM STDIN`` (CSV written
    by Arrow) as batches arrive. ``upsert``: rows are keyed by ``key`` (the
    table needs a primary key or unique index on exactly those columns); a
    changelog (an ``__op`` column of row kinds, 0 ``+I``, 1 ``-U``, 2 ``+U``,
    3 ``-D``, as the Table API emits) is reduced per key within the epoch
    (the last change wins; ``-U`` is dropped since its ``+U`` follows) and
    applied at the barrier with ``INSERT ... ON CONFLICT (key) DO UPDATE`` and
    ``DELETE``. Buffering an upsert epoch until its barrier means its row locks
    are taken only after the previous epoch committed.

Each epoch's transaction also records ``(sink, task, epoch, rows)`` in a
progress table (``fastops_sink_epochs`` by default), so a restore that falls
back past epochs already committed is recognised: an append sink refuses it
(its rows cannot be taken back), an upsert sink replays over them.
"""
from __future__ import annotations

import contextlib
import io
import logging
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from fastops.connectors.sinks import TransactionalSink
from fastops.operators.base import OperatorContext

# psycopg, an optional dependency (pip install fastops[connectors]), is imported on first use
psycopg: Any = None
sql: Any = None

__all__ = ["MODES", "OP_COLUMN", "PostgresSink", "PostgresTarget", "pg_type", "prepare_target", "with_credentials"]

log = logging.getLogger("fastops")

MODES = ("append", "upsert")
OP_COLUMN = "__op"  # row kinds of a changelog (fastops.table.changelog): +I, -U, +U, -D
_INSERT, _UPDATE_BEFORE, _UPDATE_AFTER, _DELETE = 0, 1, 2, 3
PROGRESS_TABLE = "fastops_sink_epochs"
_REDUCE_ROWS = 1 << 17  # an upsert buffer is reduced by key past this many rows
_FINAL_WAIT_S = 5.0  # at the end of input: how long to wait for the previous epoch's commit

# Arrow type -> PostgreSQL types a column of it may be written to (format_type names)
_INTS = ("smallint", "integer", "bigint", "numeric", "real", "double precision")
_COMPATIBLE = {
    "int8": _INTS, "int16": _INTS, "uint8": _INTS,
    "int32": _INTS[1:], "uint16": _INTS[1:],
    "int64": ("bigint", "numeric"), "uint32": ("bigint", "numeric"), "uint64": ("numeric",),
    "float": ("real", "double precision", "numeric"), "double": ("double precision", "numeric"),
    "halffloat": ("real", "double precision", "numeric"),
    "bool": ("boolean",),
    "string": ("text", "character varying", "character", "json", "jsonb", "uuid"),
    "binary": ("bytea",),
    "date32": ("date",), "date64": ("date",),
    "timestamp": ("timestamp without time zone", "timestamp with time zone"),
    "decimal": ("numeric",),
}


def _require_psycopg() -> Any:
    global psycopg, sql
    if psycopg is None:
        try:  # deferred: importing psycopg takes a tenth of a second that jobs without this sink should not pay
            import psycopg as pg
            from psycopg import sql as pg_sql
        except ImportError:
            raise ImportError("the PostgreSQL sink needs psycopg 3: pip install 'fastops[connectors]' "
                              "(or pip install 'psycopg[binary]')") from None
        psycopg, sql = pg, pg_sql
    return psycopg


def pg_type(t: pa.DataType) -> str:
    """The PostgreSQL type ``create=True`` gives a column of Arrow type ``t``."""
    if pa.types.is_dictionary(t):
        return pg_type(t.value_type)
    if pa.types.is_timestamp(t):
        return "timestamp with time zone" if t.tz is not None else "timestamp without time zone"
    if pa.types.is_decimal(t):
        return f"numeric({t.precision}, {t.scale})"
    key = _kind(t)
    if key in ("int8", "uint8"):
        return "smallint"
    if key in _COMPATIBLE:
        return _COMPATIBLE[key][0] if key not in ("int16", "int32", "uint16") else \
            {"int16": "smallint", "int32": "integer", "uint16": "integer"}[key]
    raise TypeError(f"no PostgreSQL type for Arrow {t}")


def _kind(t: pa.DataType) -> str:
    if pa.types.is_dictionary(t):
        return _kind(t.value_type)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return "binary"
    if pa.types.is_timestamp(t):
        return "timestamp"
    if pa.types.is_decimal(t):
        return "decimal"
    return str(t)


def _base_type(pg: str) -> str:
    """``character varying(20)`` -> ``character varying``; ``numeric(10,2)`` -> ``numeric``."""
    return re.sub(r"\(.*\)", "", pg).replace("[]", "").strip()


def normalize_dsn(dsn: str) -> str:
    """Flink's ``jdbc:postgresql://...`` is also accepted."""
    return dsn[5:] if isinstance(dsn, str) and dsn.startswith("jdbc:") else dsn


def connect(dsn: str, application_name: str = "fastops", autocommit: bool = False) -> Any:
    """A connection; ValueError naming the DSN (without its password) when it fails."""
    pg = _require_psycopg()
    try:
        conn = pg.connect(normalize_dsn(dsn), connect_timeout=5, autocommit=autocommit,
                          application_name=application_name)
    except pg.Error as exc:
        raise ValueError(f"cannot connect to PostgreSQL at {redact(dsn)!r}: "
                         f"{str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}") from None
    conn.execute("SET TimeZone TO 'UTC'")
    if not autocommit:
        conn.commit()
    return conn


def with_credentials(url: str, user: str | None = None, password: str | None = None) -> str:
    """A DSN from Flink's JDBC options: ``url`` (``jdbc:postgresql://...`` or
    ``postgresql://...``) with ``username`` and ``password`` added."""
    _require_psycopg()
    extra = {k: v for k, v in (("user", user), ("password", password)) if v}
    return psycopg.conninfo.make_conninfo(normalize_dsn(url), **extra) if extra else normalize_dsn(url)


def redact(dsn: str) -> str:
    """``dsn`` with its password hidden."""
    dsn = re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", str(dsn))
    return re.sub(r"(password\s*=\s*)\S+", r"\1***", dsn)


def _split_table(table: str) -> tuple[str | None, str]:
    if not isinstance(table, str) or not table:
        raise ValueError(f"table must be a name such as 'results' or 'public.results', got {table!r}")
    schema, _, name = table.rpartition(".")
    return (schema or None), name


@dataclass
class PostgresTarget:
    """What the sink writes to, checked against the server before the job runs."""

    dsn: str
    table: str
    mode: str
    key: tuple[str, ...]
    columns: list[str]  # the stream's columns written (no op column)
    types: dict[str, str] = field(default_factory=dict)  # table column -> format_type
    sink_id: str = ""
    progress_table: str | None = PROGRESS_TABLE
    changelog: bool = False

    def ident(self) -> Any:
        schema, name = _split_table(self.table)
        return sql.Identifier(schema, name) if schema else sql.Identifier(name)


def _regclass(conn: Any, table: str) -> str:
    """``table`` as to_regclass reads it: quoted, so its case is kept."""
    return _ident(table).as_string(conn)


def _table_columns(conn: Any, table: str) -> dict[str, str] | None:
    """Column -> format_type of ``table`` (None: no such table)."""
    row = conn.execute("SELECT to_regclass(%s)::oid", (_regclass(conn, table),)).fetchone()
    if row is None or row[0] is None:
        return None
    cols = conn.execute("SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
                        "WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
                        (row[0],)).fetchall()
    return dict(cols)


def _unique_keys(conn: Any, table: str) -> list[list[str]]:
    """Column lists of the table's primary key and unique indexes."""
    rows = conn.execute(
        "SELECT array_agg(a.attname ORDER BY k.ord) FROM pg_index i "
        "CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord) "
        "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum "
        "WHERE i.indrelid = to_regclass(%s) AND i.indisunique AND i.indpred IS NULL GROUP BY i.indexrelid",
        (_regclass(conn, table),)).fetchall()
    return [list(r[0]) for r in rows]


def prepare_target(dsn: str, table: str, schema: pa.Schema | None, mode: str = "append",
                   key: str | Sequence[str] | None = None, create: bool = False, sink_id: str | None = None,
                   progress_table: str | None = PROGRESS_TABLE) -> PostgresTarget:
    """Check everything that can be checked before the job starts, naming what
    is wrong: the mode and key, the DSN (connecting), the server's
    ``max_prepared_transactions``, the table (created from ``schema`` with
    ``create=True``), each column's type against the table's, and for upsert a
    primary key or unique index on ``key``. ``schema``: the stream's, or None
    when it is only known once rows arrive (checked then)."""
    _require_psycopg()
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    keys: tuple[str, ...] = (key,) if isinstance(key, str) else tuple(key or ())
    if mode == "upsert" and not keys:
        raise ValueError("mode='upsert' needs key= (the column(s) rows are upserted on)")
    if mode == "append" and keys:
        raise ValueError("key= applies to mode='upsert'; an append sink inserts every row")
    _split_table(table)
    names = [n for n in schema.names if n != OP_COLUMN] if schema is not None else []
    changelog = schema is not None and OP_COLUMN in schema.names
    if changelog and mode == "append":
        raise ValueError(f"the stream is a changelog (column {OP_COLUMN!r}: updates and deletes); "
                         "write it with mode='upsert' and key=")
    missing = [k for k in keys if schema is not None and k not in names]
    if missing:
        raise ValueError(f"key column(s) {missing} not in the stream (columns: {names})")
    sink = sink_id or f"{table}"
    if not re.fullmatch(r"[A-Za-z0-9_.\-]+", sink):
        raise ValueError(f"sink_id may hold letters, digits, '_', '.' and '-', got {sink!r}")
    target = PostgresTarget(dsn, table, mode, keys, names, sink_id=sink, progress_table=progress_table,
                            changelog=changelog)
    with connect(dsn) as conn:
        max_prepared = int(conn.execute("SHOW max_prepared_transactions").fetchone()[0])
        if max_prepared <= 0:
            raise ValueError(f"PostgreSQL at {redact(dsn)!r} has max_prepared_transactions = 0: the sink commits "
                             "each checkpoint's rows by two-phase commit (PREPARE TRANSACTION). Set "
                             "max_prepared_transactions to at least the sink's parallelism times 2 (postgresql.conf, "
                             "then restart the server)")
        cols = _table_columns(conn, table)
        if cols is None:
            if not create:
                raise ValueError(f"table {table!r} does not exist in {redact(dsn)!r}; create it, or pass "
                                 "create=True to make it from the stream's columns")
            if schema is None:
                raise ValueError(f"create=True cannot make table {table!r}: the stream's columns are not known "
                                 "before it runs (after map / process); create the table first")
            conn.execute(_create_sql(target, schema))
            conn.commit()
            cols = _table_columns(conn, table)
            assert cols is not None
        target.types = cols
        if schema is not None:
            check_columns(target, schema)
        if mode == "upsert":
            uniques = _unique_keys(conn, table)
            if not any(sorted(u) == sorted(keys) for u in uniques):
                raise ValueError(f"table {table!r} has no primary key or unique index on {list(keys)}, which "
                                 f"INSERT ... ON CONFLICT needs (it has: {uniques or 'none'}); add one, e.g. "
                                 f"ALTER TABLE {table} ADD PRIMARY KEY ({', '.join(keys)})")
        if progress_table:
            conn.execute(sql.SQL("CREATE TABLE IF NOT EXISTS {} (sink text, task int, epoch bigint, rows bigint, "
                                 "committed timestamptz DEFAULT now(), PRIMARY KEY (sink, task, epoch))")
                         .format(_ident(progress_table)))
            conn.commit()
    return target


def _ident(name: str) -> Any:
    schema, table = _split_table(name)
    return sql.Identifier(schema, table) if schema else sql.Identifier(table)


def _create_sql(target: PostgresTarget, schema: pa.Schema) -> Any:
    defs = [sql.SQL("{} {}").format(sql.Identifier(f.name), sql.SQL(pg_type(f.type)))
            for f in schema if f.name != OP_COLUMN]
    if target.key:
        defs.append(sql.SQL("PRIMARY KEY ({})").format(sql.SQL(", ").join(map(sql.Identifier, target.key))))
    return sql.SQL("CREATE TABLE IF NOT EXISTS {} ({})").format(target.ident(), sql.SQL(", ").join(defs))


def check_columns(target: PostgresTarget, schema: pa.Schema) -> None:
    """ValueError naming the first column the table lacks or types differently."""
    for f in schema:
        if f.name == OP_COLUMN:
            continue
        pg = target.types.get(f.name)
        if pg is None:
            raise ValueError(f"column {f.name!r} ({f.type}) of the stream is not a column of table "
                             f"{target.table!r} (its columns: {list(target.types)})")
        if pa.types.is_null(f.type):
            continue
        ok = _COMPATIBLE.get(_kind(f.type), ())
        if _base_type(pg) not in ok:
            raise ValueError(f"column {f.name!r} is {f.type} in the stream but {pg} in table {target.table!r}; "
                             f"{f.type} is written to {' / '.join(ok) or 'no PostgreSQL type'}: cast the column "
                             "in the stream (select / with_columns) or change the table")


@dataclass(frozen=True)
class _Gid:
    sink: str
    parallelism: int
    task: int
    epoch: int

    def text(self) -> str:
        return f"fastops:{self.sink}:p{self.parallelism}:t{self.task}:e{self.epoch}"

    @staticmethod
    def parse(gid: str) -> _Gid | None:
        m = re.fullmatch(r"fastops:(.+):p(\d+):t(\d+):e(\d+)", gid)
        return _Gid(m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4))) if m else None


class PostgresSink(TransactionalSink):
    """The sink of one task (see the module docs); made per task from a
    checked :class:`PostgresTarget`."""

    def __init__(self, target: PostgresTarget, name: str = "sink_to_postgres"):
        self.target = target
        self.name = name
        self._lock = threading.Lock()
        self._commit_conn: Any = None

    # -- connections ----------------------------------------------------------------------
    def open(self, ctx: OperatorContext) -> None:
        self.ctx = ctx
        self._app = f"fastops:{self.target.sink_id}:t{ctx.task_index}"[:63]
        self._conn = connect(self.target.dsn, self._app)
        self._sealed: list[tuple[int, str, list[pa.RecordBatch]]] = []  # (epoch, gid, upsert changes)
        self._checked = self.target.columns != []
        self._copy_sql: Any = None
        super().open(ctx)

    def _committer(self) -> Any:
        if self._commit_conn is None or self._commit_conn.closed:
            self._commit_conn = connect(self.target.dsn, self._app, autocommit=True)
        return self._commit_conn

    def _gid(self, epoch: int) -> str:
        return _Gid(self.target.sink_id, self.ctx.parallelism, self.ctx.task_index, epoch).text()

    # -- an epoch ---------------------------------------------------------------------------
    def begin(self, epoch: int) -> None:
        self._epoch = epoch
        self._rows = 0
        self._changes: list[pa.RecordBatch] = []  # upsert: this epoch's rows, reduced at the barrier
        self._buffered = 0
        self._in_tx = False
        self._copy_open: Any = None

    def _start(self) -> None:
        self._in_tx = True  # the connection's next statement begins the epoch's transaction

    def write(self, batch: pa.RecordBatch) -> None:
        if not batch.num_rows:
            return
        if not self._checked:  # the stream's columns were not known when the job was built
            self._first_batch(batch.schema)
        if self.target.mode == "append":
            self._start()
            self._copy(batch)
        else:
            self._changes.append(batch)
            self._buffered += batch.num_rows
            if self._buffered > _REDUCE_ROWS:
                reduced = _reduce(self._changes, self.target.key)
                self._changes, self._buffered = [reduced], reduced.num_rows
        self._rows += batch.num_rows

    def _first_batch(self, schema: pa.Schema) -> None:
        t = self.target
        t.columns = [n for n in schema.names if n != OP_COLUMN]
        t.changelog = OP_COLUMN in schema.names
        if t.changelog and t.mode == "append":
            raise ValueError(f"the stream is a changelog (column {OP_COLUMN!r}); write it with mode='upsert'")
        check_columns(t, schema)
        missing = [k for k in t.key if k not in t.columns]
        if missing:
            raise ValueError(f"key column(s) {missing} not in the stream (columns: {t.columns})")
        self._checked = True

    def _copy(self, batch: pa.RecordBatch) -> None:
        """Append ``batch`` to the epoch's COPY (one COPY statement per epoch)."""
        t = self.target
        if self._copy_open is None:
            if self._copy_sql is None:
                self._copy_sql = sql.SQL("COPY {} ({}) FROM STDIN (FORMAT csv)").format(
                    t.ident(), sql.SQL(", ").join(map(sql.Identifier, t.columns)))
            self._cursor = self._conn.cursor()
            self._copy_open = self._cursor.copy(self._copy_sql)
            self._copy_writer = self._copy_open.__enter__()
        self._copy_writer.write(_csv(batch.select(t.columns)))

    def _end_copy(self) -> None:
        """The epoch's COPY ends (before its transaction is prepared)."""
        if self._copy_open is not None:
            copy, self._copy_open = self._copy_open, None
            copy.__exit__(None, None, None)
            self._cursor.close()

    def _apply(self, changes: list[pa.RecordBatch]) -> int:
        """Upsert / delete the reduced changes in the open transaction; rows written."""
        if not changes:
            return 0
        t = self.target
        reduced = _reduce(changes, t.key)
        ops = reduced.column(OP_COLUMN).to_numpy(zero_copy_only=False) if t.changelog else None
        ups = reduced if ops is None else reduced.filter(pa.array(ops != _DELETE))
        dels = None if ops is None else reduced.filter(pa.array(ops == _DELETE))
        self._start()
        with self._conn.cursor() as cur:
            if ups.num_rows:
                cur.execute(self._upsert_sql(), [ups.column(c).to_pylist() for c in t.columns])
            if dels is not None and dels.num_rows:
                cur.execute(self._delete_sql(), [dels.column(c).to_pylist() for c in t.key])
        return reduced.num_rows

    def _upsert_sql(self) -> Any:
        t = self.target
        cols = sql.SQL(", ").join(map(sql.Identifier, t.columns))
        arrays = sql.SQL(", ").join(sql.SQL("%s::{}[]").format(sql.SQL(_base_array(t.types[c]))) for c in t.columns)
        rest = [c for c in t.columns if c not in t.key]
        action = sql.SQL("DO NOTHING") if not rest else sql.SQL("DO UPDATE SET {}").format(sql.SQL(", ").join(
            sql.SQL("{} = EXCLUDED.{}").format(sql.Identifier(c), sql.Identifier(c)) for c in rest))
        return sql.SQL("INSERT INTO {} ({}) SELECT * FROM unnest({}) ON CONFLICT ({}) {}").format(
            t.ident(), cols, arrays, sql.SQL(", ").join(map(sql.Identifier, t.key)), action)

    def _delete_sql(self) -> Any:
        t = self.target
        keys = sql.SQL(", ").join(map(sql.Identifier, t.key))
        arrays = sql.SQL(", ").join(sql.SQL("%s::{}[]").format(sql.SQL(_base_array(t.types[c]))) for c in t.key)
        return sql.SQL("DELETE FROM {} WHERE ({}) IN (SELECT * FROM unnest({}))").format(t.ident(), keys, arrays)

    # -- two-phase commit ---------------------------------------------------------------------
    def snapshot_barrier(self, checkpoint_id: int) -> Any:
        handle = self._seal(checkpoint_id, final=False)
        self.epoch = checkpoint_id + 1
        self.begin(self.epoch)
        return handle

    def pre_commit(self, checkpoint_id: int) -> Any:
        """At the end of input: seal the last epoch."""
        return self._seal(checkpoint_id, final=True)

    def _seal(self, epoch: int, final: bool) -> list[str]:
        """Prepare the open epoch under its gid; the handle lists every prepared,
        uncommitted gid of this task."""
        changes = self._changes
        if self.target.mode == "upsert" and changes:
            if final and self._sealed:
                changes = self._fold_sealed(changes)
            self._rows = self._apply(changes)
        if self._in_tx:
            self._end_copy()
            self._record_progress(epoch)
            gid = self._gid(self._epoch)
            self._conn.execute(sql.SQL("PREPARE TRANSACTION {}").format(sql.Literal(gid)))
            with self._lock:
                self._sealed.append((epoch, gid, changes if self.target.mode == "upsert" else []))
            self._in_tx = False
        with self._lock:
            return [gid for _, gid, _ in self._sealed]

    def _fold_sealed(self, changes: list[pa.RecordBatch]) -> list[pa.RecordBatch]:
        """End of input with epochs prepared whose checkpoint has not completed
        (none will now: a task has finished): their row locks would block the
        last epoch's upserts until the final commit, which waits for this task.
        Wait briefly for their commit; if it does not come, roll them back and
        write their changes with the last epoch's, in order, in one transaction."""
        deadline = time.monotonic() + _FINAL_WAIT_S
        while time.monotonic() < deadline:
            with self._lock:
                if not self._sealed:
                    return changes
            time.sleep(0.01)
        with self._lock:
            sealed, self._sealed = self._sealed, []
        conn = self._committer()
        for _, gid, _ in sealed:
            _finish_prepared(conn, gid, commit=False)
        log.info("%s: folded epochs %s (their checkpoints did not complete) into the last one",
                 self.name, [e for e, _, _ in sealed])
        return [b for _, _, bs in sealed for b in bs] + changes

    def _record_progress(self, epoch: int) -> None:
        t = self.target
        if not t.progress_table:
            return
        self._conn.execute(sql.SQL("INSERT INTO {} (sink, task, epoch, rows) VALUES (%s, %s, %s, %s) "
                                   "ON CONFLICT (sink, task, epoch) DO UPDATE SET rows = EXCLUDED.rows, "
                                   "committed = now()").format(_ident(t.progress_table)),
                           (t.sink_id, self.ctx.task_index, epoch, self._rows))

    def commit(self, checkpoint_id: int) -> None:
        with self._lock:
            due = [gid for e, gid, _ in self._sealed if e <= checkpoint_id]
        if not due:
            return
        conn = self._committer()
        for gid in due:
            _finish_prepared(conn, gid, commit=True)
        with self._lock:
            self._sealed = [s for s in self._sealed if s[1] not in due]

    def commit_handles(self, handles: list) -> None:
        gids = [g for h in handles if h is not None for g in (h if isinstance(h, list) else [h])]
        conn = self._committer()
        for gid in gids:
            _finish_prepared(conn, gid, commit=True)

    def _mine(self, gid: _Gid) -> bool:
        """Prepared transactions this task settles on recovery: its own at this
        parallelism; task 0 also those written at another parallelism."""
        p, i = self.ctx.parallelism, self.ctx.task_index
        return gid.sink == self.target.sink_id and (
            (gid.parallelism == p and gid.task == i) or (i == 0 and gid.parallelism != p))

    def _roll_back_mine(self, keep: set[str]) -> None:
        conn = self._committer()
        prefix = f"fastops:{self.target.sink_id}:"
        rows = conn.execute("SELECT gid FROM pg_prepared_xacts WHERE gid LIKE %s AND database = current_database()",
                            (prefix.replace("_", r"\_").replace("%", r"\%") + "%",)).fetchall()
        for (text,) in rows:
            gid = _Gid.parse(text)
            if gid is not None and self._mine(gid) and text not in keep:
                _finish_prepared(conn, text, commit=False)

    def _end_stale_sessions(self) -> None:
        """An earlier attempt's connection of this task may still hold an open
        (never prepared) transaction and its locks: end it."""
        self._committer().execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s "
            "AND pid <> pg_backend_pid() AND pid <> %s", (self._app, self._conn.info.backend_pid))

    def abort(self) -> None:
        if self._in_tx:
            copy, self._copy_open = self._copy_open, None
            if copy is not None:  # end the COPY with an error: the server drops its rows
                with contextlib.suppress(Exception):
                    copy.__exit__(RuntimeError, RuntimeError("aborted"), None)
            self._conn.rollback()
            self._in_tx = False
        self._end_stale_sessions()
        self._roll_back_mine(set())
        with self._lock:
            self._sealed = []

    def recover(self, handles: list, checkpoint_id: int) -> None:
        """Commit the checkpoint's prepared transactions, roll back this task's others."""
        gids = {g for h in handles if h is not None for g in (h if isinstance(h, list) else [h])}
        self._end_stale_sessions()
        self.commit_handles(sorted(gids))
        self._roll_back_mine(gids)
        with self._lock:
            self._sealed = []
        self.epoch = checkpoint_id + 1
        self.begin(self.epoch)

    def finished(self) -> None:
        for conn in (self._conn, self._commit_conn):
            if conn is not None and not conn.closed:
                conn.close()

    def close(self) -> list:
        return []

    # -- recovery falling back past committed epochs -------------------------------------------
    def committed_after(self, checkpoint_id: int) -> list[str]:
        t = self.target
        if not t.progress_table:
            return []
        with connect(t.dsn) as conn:
            rows = conn.execute(sql.SQL("SELECT task, epoch, rows FROM {} WHERE sink = %s AND epoch > %s "
                                        "ORDER BY epoch, task").format(_ident(t.progress_table)),
                                (t.sink_id, checkpoint_id)).fetchall()
        return [f"{t.table}: epoch {e} of task {k} ({n} rows)" for k, e, n in rows]

    def roll_back(self, checkpoint_id: int) -> list[str]:
        """A fresh start (0) begins the sink's history anew. A restore of an
        older checkpoint than epochs already committed: an upsert sink replays
        over them (the same keys get the same values); an append sink cannot
        take rows back and refuses."""
        t = self.target
        later = self.committed_after(checkpoint_id)
        if not later or not t.progress_table:
            return []
        if checkpoint_id == 0:
            with connect(t.dsn) as conn:
                conn.execute(sql.SQL("DELETE FROM {} WHERE sink = %s").format(_ident(t.progress_table)),
                             (t.sink_id,))
            return []
        if t.mode == "append":
            raise ValueError(f"{self.name}: the job restores checkpoint {checkpoint_id}, but table {t.table!r} "
                             f"already holds the rows of later epochs ({'; '.join(later[:3])}"
                             f"{'; ...' if len(later) > 3 else ''}), which an append sink cannot take back and "
                             "the replay would write again. Restore the newest checkpoint, or delete those rows "
                             f"and their entries in {t.progress_table} first")
        return [f"{d} (upsert: replayed over)" for d in later]


def _finish_prepared(conn: Any, gid: str, commit: bool) -> None:
    """COMMIT / ROLLBACK PREPARED ``gid``; one that is gone was finished before."""
    pg = _require_psycopg()
    verb = "COMMIT PREPARED {}" if commit else "ROLLBACK PREPARED {}"
    with contextlib.suppress(pg.errors.UndefinedObject):
        conn.execute(sql.SQL(verb).format(sql.Literal(gid)))


def _base_array(pg: str) -> str:
    """The element type to cast a parameter array to (``numeric(10,2)`` stays as it is)."""
    return pg


def _csv(batch: pa.RecordBatch) -> bytes:
    """``batch`` as PostgreSQL's COPY CSV reads it (NULL: an unquoted empty field)."""
    cols = []
    for col in batch.columns:
        if pa.types.is_dictionary(col.type):
            col = col.cast(col.type.value_type)
        elif pa.types.is_binary(col.type) or pa.types.is_large_binary(col.type):
            col = pa.array([None if v is None else "\\x" + v.hex() for v in col.to_pylist()], pa.string())
        cols.append(col)
    buf = io.BytesIO()
    pacsv.write_csv(pa.RecordBatch.from_arrays(cols, names=batch.schema.names), buf,
                    write_options=pacsv.WriteOptions(include_header=False, batch_size=max(batch.num_rows, 1)))
    return buf.getvalue()


def _reduce(changes: list[pa.RecordBatch], key: tuple[str, ...]) -> pa.RecordBatch:
    """The last change per key (``-U`` dropped: its ``+U`` follows), in order of arrival."""
    table = pa.Table.from_batches(changes) if len(changes) > 1 else pa.Table.from_batches(changes[:1])
    if OP_COLUMN in table.schema.names:
        table = table.filter(pc.not_equal(table.column(OP_COLUMN), pa.scalar(_UPDATE_BEFORE, pa.int8())))
    table = table.append_column("__seq", pa.array(np.arange(table.num_rows, dtype=np.int64)))
    last = table.group_by(list(key), use_threads=False).aggregate([("__seq", "max")]).column("__seq_max")
    out = table.take(pa.array(np.sort(last.to_numpy()))).drop_columns(["__seq"])
    return out.combine_chunks().to_batches()[0] if out.num_rows else pa.RecordBatch.from_pylist(
        [], schema=out.schema)
