"""Statements beyond queries: ``CREATE / DROP FUNCTION`` and statement sets.

``CREATE [TEMPORARY] [SYSTEM] FUNCTION [IF NOT EXISTS] name AS 'module.attr'
[LANGUAGE PYTHON]`` imports ``module`` and registers its attribute ``attr``,
which must be a ``udf`` / ``udaf`` / ``udtf`` object (PyFlink's rule; a
plain Python function must be wrapped first). ``LANGUAGE JAVA`` / ``SCALA``
are refused; without ``LANGUAGE`` the name is read as a Python one.
``DROP [TEMPORARY] [SYSTEM] FUNCTION [IF EXISTS] name`` removes it.

``EXECUTE STATEMENT SET BEGIN INSERT INTO ...; INSERT INTO ...; END`` and
the Table API's ``t_env.create_statement_set()`` (``add_insert_sql``,
``add_insert``, ``execute``) run every INSERT as one job: the queries are
compiled into one dataflow and the sink tables written when it finished.
Its result has one column per sink (``default_catalog.default_database.<t>``),
each ``-1``, as Flink's.
"""
from __future__ import annotations

import importlib
import re
from typing import Any

import pyarrow as pa

from fastops.datastream import StreamEnvironment
from fastops.runtime.errors import JobFailed
from fastops.table.functions import (
    UDFError,
    UserDefinedAggregateFunction,
    UserDefinedScalarFunction,
    UserDefinedTableFunction,
)
from fastops.table.plan import Compiler, PlanError, SqlError, stream_sources, to_table
from fastops.table.table import Table, TableResult, message_result, ok_result

__all__ = ["StatementSet", "create_function", "drop_function", "run_statement", "split_statements"]

_CREATE_FUNCTION = re.compile(
    r"^\s*CREATE\s+(?:TEMPORARY\s+)?(?:SYSTEM\s+)?FUNCTION\s+(IF\s+NOT\s+EXISTS\s+)?([`\"]?)([\w.$]+)\2\s+AS\s+"
    r"'([^']*)'(?:\s+LANGUAGE\s+(\w+))?\s*;?\s*$", re.IGNORECASE | re.DOTALL)
_DROP_FUNCTION = re.compile(
    r"^\s*DROP\s+(?:TEMPORARY\s+)?(?:SYSTEM\s+)?FUNCTION\s+(IF\s+EXISTS\s+)?([`\"]?)([\w.$]+)\2\s*;?\s*$",
    re.IGNORECASE | re.DOTALL)
_FUNCTION_STATEMENT = re.compile(r"^\s*(CREATE|DROP)\s+(TEMPORARY\s+)?(SYSTEM\s+)?FUNCTION\b", re.IGNORECASE)
_STATEMENT_SET = re.compile(r"^\s*EXECUTE\s+STATEMENT\s+SET\s+BEGIN\b(.*)\bEND\s*;?\s*$",
                            re.IGNORECASE | re.DOTALL)
_UDF_TYPES = (UserDefinedScalarFunction, UserDefinedAggregateFunction, UserDefinedTableFunction)


def run_statement(t_env: Any, stmt: str) -> TableResult | None:
    """Run ``stmt`` if it is one of this module's statements, else None."""
    if _FUNCTION_STATEMENT.match(stmt):
        m = _CREATE_FUNCTION.match(stmt)
        if m is not None:
            return create_function(t_env, m.group(3), m.group(4), m.group(5), bool(m.group(1)))
        m = _DROP_FUNCTION.match(stmt)
        if m is not None:
            return drop_function(t_env, m.group(3), bool(m.group(1)))
        raise SqlError(f"cannot read the statement {stmt.strip()[:80]!r}; expected CREATE [TEMPORARY] FUNCTION "
                       "name AS 'module.function' LANGUAGE PYTHON or DROP [TEMPORARY] FUNCTION [IF EXISTS] name")
    m = _STATEMENT_SET.match(stmt)
    if m is not None:
        s = StatementSet(t_env)
        for part in split_statements(m.group(1)):
            s.add_insert_sql(part)
        return s.execute()
    return None


def create_function(t_env: Any, name: str, target: str, language: str | None, if_not_exists: bool) -> TableResult:
    """``CREATE FUNCTION name AS 'module.attr' LANGUAGE PYTHON``."""
    lang = (language or "PYTHON").upper()
    if lang != "PYTHON":
        raise SqlError(f"CREATE FUNCTION {name} ... LANGUAGE {lang} is not supported by fastops SQL; "
                       "fastops runs Python functions: AS 'module.function' LANGUAGE PYTHON")
    if t_env._function(name) is not None:
        if if_not_exists:
            return ok_result()
        raise SqlError(f"function {name!r} exists already (DROP FUNCTION {name} first, or CREATE FUNCTION IF NOT "
                       "EXISTS)")
    module_name, _, attr = target.rpartition(".")
    if not module_name or not attr:
        raise SqlError(f"CREATE FUNCTION {name}: AS {target!r} must name a module and an attribute, "
                       "'module.function'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise SqlError(f"CREATE FUNCTION {name}: cannot import module {module_name!r} ({exc})") from None
    if not hasattr(module, attr):
        public = sorted(n for n, v in vars(module).items() if isinstance(v, _UDF_TYPES))
        raise SqlError(f"CREATE FUNCTION {name}: module {module_name!r} has no attribute {attr!r}"
                       + (f"; its udf / udaf / udtf objects: {', '.join(public)}" if public else ""))
    fn = getattr(module, attr)
    if not isinstance(fn, _UDF_TYPES):
        raise SqlError(f"CREATE FUNCTION {name}: {target!r} is a {type(fn).__name__}, not a udf / udaf / udtf; "
                       "wrap it, e.g. my_fn = udf(f, result_type='BIGINT') (fastops.udf, udaf or udtf)")
    t_env.create_temporary_function(name, fn)
    return ok_result()


def drop_function(t_env: Any, name: str, if_exists: bool) -> TableResult:
    if not t_env.drop_temporary_function(name) and not if_exists:
        known = ", ".join(t_env.list_user_defined_functions()) or "none"
        raise SqlError(f"function {name!r} not found; known: {known}")
    return ok_result()


def split_statements(sql: str) -> list[str]:
    """The statements of ``sql`` separated by ``;`` outside quotes and comments."""
    out, cur, quote, i = [], [], "", 0
    while i < len(sql):
        ch = sql[i]
        if quote:
            cur.append(ch)
            if ch == quote:
                quote = ""
        elif ch in "'`\"":
            quote = ch
            cur.append(ch)
        elif sql.startswith("--", i):
            j = sql.find("\n", i)
            i = len(sql) if j < 0 else j
            continue
        elif ch == ";":
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
        i += 1
    out.append("".join(cur))
    return [s.strip() for s in out if s.strip()]


class StatementSet:
    """INSERTs run together as one job (PyFlink's ``StatementSet``)."""

    def __init__(self, t_env: Any):
        self._t_env = t_env
        self._inserts: list[tuple[str, Table, bool]] = []

    def add_insert_sql(self, stmt: str) -> StatementSet:
        """Add ``INSERT [OVERWRITE] INTO sink SELECT ...``."""
        # deferred: the SQL face needs sqlglot, an optional dependency
        from sqlglot import exp

        from fastops.table.sql import compile_query, parse

        tree, prep = parse(stmt.strip().rstrip(";"), self._t_env._function_names())
        if not isinstance(tree, exp.Insert):
            raise SqlError(f"a statement set holds INSERT statements, got {type(tree).__name__.upper()}: "
                           f"{stmt.strip()[:60]!r}")
        target = tree.this.this if isinstance(tree.this, exp.Schema) else tree.this
        table = Table(self._t_env, compile_query(self._t_env, tree.expression, prep))
        return self.add_insert(target.name, table, bool(tree.args.get("overwrite")))

    def add_insert(self, table_path: str, table: Table, overwrite: bool = False) -> StatementSet:
        """Add ``table`` written into the sink table ``table_path``."""
        entry = self._t_env._tables.get(table_path)
        if entry is None or isinstance(entry, Table):
            raise PlanError(f"sink table {table_path!r} not found; create it with CREATE TABLE ... WITH "
                            "('connector' = ...)")
        if len(table.schema) != len(entry.schema):
            raise PlanError(f"INSERT INTO {table_path}: the query has {len(table.schema)} columns, the table "
                            f"{len(entry.schema)} ({entry.schema.names})")
        self._inserts.append((table_path, table, overwrite))
        return self

    def explain(self) -> str:
        return "\n\n".join(f"== INSERT INTO {name} ==\n{t.explain()}" for name, t, _ in self._inserts)

    def execute(self) -> TableResult:
        """Run every INSERT in one job, then write each sink table."""
        if not self._inserts:
            raise PlanError("the statement set holds no INSERT statements")
        t_env = self._t_env
        streaming = t_env.mode == "streaming"
        nodes = [t._node for _, t, _ in self._inserts]
        streams = [s for n in nodes for s in stream_sources(n)]
        env = streams[0].env if streams else StreamEnvironment(parallelism=t_env.parallelism)
        compiler = Compiler(env, streaming)
        results = [compiler.build(n).sink_to_table(f"insert into {name}")
                   for n, (name, _, _) in zip(nodes, self._inserts)]
        try:
            env.execute("statement set")
        except JobFailed as exc:
            cause = exc.__cause__
            if isinstance(cause, (UDFError, PlanError)):
                raise type(cause)(str(cause)) from None
            raise
        for (name, table, overwrite), node, r in zip(self._inserts, nodes, results):
            data = to_table(r.table(), node.schema, node.changelog)
            t_env._insert_into(name, table, overwrite, TableResult(data, node.schema, streaming, env.last_result))
        names = [f"default_catalog.default_database.{name}" for name, _, _ in self._inserts]
        self._inserts = []
        return message_result([tuple(-1 for _ in names)], names, [pa.int64()] * len(names))
