"""Nexmark's queries on fastops: the benchmark's SQL files, run as written.

``queries/`` holds nexmark's ``ddl_gen.sql`` (the ``datagen`` table of the
``nexmark`` connector, see ``fastops.connectors.nexmark``), ``ddl_views.sql``
(the ``person``, ``auction`` and ``bid`` views) and ``q0.sql`` ..
``q22.sql`` from the nexmark repository (``nexmark-flink/src/main/resources/
queries``). They are unchanged but for q10's sink, a partitioned filesystem
table there and a ``blackhole`` table here.

>>> from fastops.apps.nexmark import run_query
>>> run_query("q2", events=5000).column_names
['auction', 'price']

``run_query`` creates the tables and views, runs the query file's statements
and returns the rows the ``INSERT INTO`` would have written (the final rows:
a changelog applied), under the sink table's column names. nexmark's
``count_char`` UDF (``CREATE FUNCTION count_char AS 'com.github.nexmark.
flink.udf.CountChar'`` in q14) is the Python function below, registered
instead of the Java class.
"""
from __future__ import annotations

import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from fastops.table import TableEnvironment
from fastops.table.functions import udf

__all__ = ["QUERIES", "create_tables", "datagen_ddl", "query_statements", "query_text", "run_query",
           "runnable_queries"]

QUERIES_DIR = Path(__file__).parent / "queries"
QUERIES = tuple(f"q{i}" for i in range(23))
_COUNT_CHAR_CLASS = "com.github.nexmark.flink.udf.CountChar"
SIDE_INPUT_ROWS = 10_000  # nexmark's side_input_gen.sh: rows "i,i" for i < 10000


def query_text(name: str) -> str:
    """The SQL file ``name`` (``"q5"``, ``"ddl_gen"``, ``"ddl_views"``)."""
    path = QUERIES_DIR / f"{name}.sql"
    if not path.exists():
        raise KeyError(f"no Nexmark query {name!r} (queries: {', '.join(QUERIES)})")
    return path.read_text()


def query_statements(text: str) -> list[str]:
    """The statements of a SQL file: comments dropped, split at ``;``."""
    code = re.sub(r"--[^\n]*", "", text)
    return [s.strip() for s in code.split(";") if s.strip()]


def datagen_ddl(events: int, rate: int = 10_000, proportions: Sequence[int] = (1, 3, 46),
                options: dict | None = None) -> str:
    """nexmark's ``ddl_gen.sql`` with its placeholders filled (``${TPS}`` is
    the event-time rate) and ``options`` (more WITH options of the
    ``nexmark`` connector, such as ``seed``) added."""
    p, a, b = proportions
    text = query_text("ddl_gen")
    for key, value in (("TPS", rate), ("EVENTS_NUM", events), ("PERSON_PROPORTION", p),
                       ("AUCTION_PROPORTION", a), ("BID_PROPORTION", b)):
        text = text.replace("${" + key + "}", str(int(value)))
    if options:
        extra = "".join(f",\n    '{k}' = '{v}'" for k, v in options.items())
        end = text.rindex(")")
        text = text[:end].rstrip() + extra + "\n" + text[end:]
    return text


def create_tables(t_env: TableEnvironment, events: int, rate: int = 10_000,
                  proportions: Sequence[int] = (1, 3, 46), options: dict | None = None) -> None:
    """The ``datagen`` table and nexmark's views over it in ``t_env``."""
    for stmt in query_statements(datagen_ddl(events, rate, proportions, options)):
        t_env.execute_sql(stmt)
    for stmt in query_statements(query_text("ddl_views").replace("${NEXMARK_TABLE}", "datagen")):
        t_env.execute_sql(stmt)


@udf(result_type="BIGINT", func_type="arrow", name="count_char")
def count_char(s: Any, character: Any) -> Any:
    """nexmark's CountChar: how many bytes of ``s`` are the first byte of
    ``character`` (0 for a null string)."""
    c = character if isinstance(character, pa.Scalar) else character[0]
    pattern = re.escape(c.as_py()[:1])
    return pc.fill_null(pc.count_substring_regex(s, pattern), 0).cast(pa.int64())


_INSERT = re.compile(r"^INSERT\s+INTO\s+(\S+)\s+(.*)$", re.IGNORECASE | re.DOTALL)
_CREATE_COUNT_CHAR = re.compile(r"^CREATE\s+FUNCTION\s+count_char\s+AS\s+'" + re.escape(_COUNT_CHAR_CLASS) + "'",
                                re.IGNORECASE)


def run_query(name: str, events: int = 10_000, rate: int = 10_000, parallelism: int = 1,
              mode: str = "streaming", batch_size: int = 65_536, options: dict | None = None,
              proportions: Sequence[int] = (1, 3, 46)) -> pa.Table:
    """Run Nexmark query ``name`` over ``events`` generated events (event time
    at ``rate`` events per second); returns what its ``INSERT INTO`` writes,
    as final rows named as the sink table's columns. ``options``: more WITH
    options of the nexmark connector (``seed``, ``batch-size``, ...)."""
    t_env = TableEnvironment(mode=mode, parallelism=parallelism, batch_size=batch_size)
    opts = {"batch-size": batch_size, **(options or {})}
    create_tables(t_env, events, rate, proportions, opts)
    result: pa.Table | None = None
    text = query_text(name)
    if "${FLINK_HOME}" in text:  # q13's side input, as nexmark's SideInputGenerator writes it
        home = Path(tempfile.mkdtemp(prefix="nexmark-"))
        (home / "data").mkdir()
        (home / "data" / "side_input.txt").write_text("".join(f"{i},{i}\n" for i in range(SIDE_INPUT_ROWS)))
        text = text.replace("${FLINK_HOME}", str(home))
    for stmt in query_statements(text):
        if _CREATE_COUNT_CHAR.match(stmt):
            t_env.create_temporary_function("count_char", count_char)
            continue
        insert = _INSERT.match(stmt)
        if insert is None:
            t_env.execute_sql(stmt)
            continue
        sink = t_env._tables.get(insert.group(1))
        rows = t_env.sql_query(insert.group(2)).execute().to_arrow()
        names = sink.schema.names if sink is not None and len(sink.schema) == rows.num_columns else None
        result = rows.rename_columns(names) if names else rows
    if result is None:
        raise ValueError(f"Nexmark query {name!r} has no INSERT INTO")
    return result


def runnable_queries(events: int = 2000, rate: int = 1000) -> dict[str, str | None]:
    """Each query and why it does not run (None: it runs) on a small input."""
    out: dict[str, str | None] = {}
    for q in QUERIES:
        try:
            run_query(q, events=events, rate=rate)
            out[q] = None
        except Exception as exc:  # every failure is reported, by query
            out[q] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return out
