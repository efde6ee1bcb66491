"""Nexmark's queries (apps/nexmark) against DuckDB on the same generated events.

The events come from ``fastops.connectors.nexmark.generate`` (the same seed
and options as the query's ``datagen`` table); ``person``, ``auction`` and
``bid`` are materialised as Arrow tables and each query is written out for
DuckDB over the finished input (``fastops.apps.nexmark.reference``), with the
window assignment explicit (``TUMBLE`` / ``HOP`` window starts from the event
time in ms, sessions by the gaps between a bidder's bids). Results are
compared as multisets of rows.

Queries that need features fastops does not have yet are ``xfail(strict=True)``
with the reason: they flip to a failure (remove the mark) once they run.
"""
from __future__ import annotations

import datetime as dt
from collections import Counter
from decimal import Decimal

import duckdb
import pyarrow as pa
import pytest

from fastops.apps.nexmark import QUERIES, create_tables, query_statements, query_text, run_query
from fastops.apps.nexmark.reference import REFERENCE, tables
from fastops.connectors.nexmark import NexmarkConfig, generate
from fastops.table import TableEnvironment

EVENTS = 6000
RATE = 200  # events per second of event time: 30 s of events, 5 ms apart (no equal times)


@pytest.fixture(scope="module")
def db():
    data = generate(NexmarkConfig(events=EVENTS, first_event_rate=RATE, next_event_rate=RATE))
    con = duckdb.connect()
    for name, table in tables(data).items():
        con.register(name, table)
    yield con
    con.close()


def _value(v):
    if isinstance(v, float):
        return round(v, 6)
    if isinstance(v, Decimal):
        return round(float(v), 6)
    if isinstance(v, dt.datetime):
        return v.replace(tzinfo=None)
    return v


def rows(table: pa.Table, columns: list[str] | None = None) -> Counter:
    # by position: to_pylist's dicts would keep one of two equal column names
    t = table.select(columns) if columns else table
    return Counter(tuple(_value(v) for v in r) for r in zip(*(c.to_pylist() for c in t.columns)))


def duck(db, sql: str) -> pa.Table:
    return db.sql(sql).to_arrow_table()


def fastops(name: str) -> pa.Table:
    return run_query(name, events=EVENTS, rate=RATE)


# what each query needs that fastops does not have yet (the test is xfail, strict, until it lands)
MISSING: dict[str, str] = {}
# compared on these columns only (ties: which of equal rows gets which rank is not defined)
COLUMNS = {"q19": ["auction", "price", "rank_number"]}


def _param(q):
    marks = [pytest.mark.xfail(reason=f"needs {MISSING[q]}", strict=True)] if q in MISSING else []
    return pytest.param(q, marks=marks, id=q)


@pytest.mark.parametrize("q", sorted(REFERENCE))
def test_reference_has_rows(db, q):
    assert duck(db, REFERENCE[q]).num_rows > 0  # the data exercises the query


@pytest.mark.parametrize("q", [_param(q) for q in QUERIES if q not in ("q6", "q12")])
def test_query_matches_duckdb(db, q):
    want = duck(db, REFERENCE[q])
    got = fastops(q)
    cols = COLUMNS.get(q)
    if q == "q4":  # Flink's AVG of a BIGINT is a BIGINT: the reference's average, truncated or not
        g = {r[0]: r[1] for r in rows(got)}
        w = {r[0]: r[1] for r in rows(want)}
        assert g.keys() == w.keys() and all(abs(g[k] - w[k]) < 1 for k in w)
        return
    if cols:
        got = got.select(cols)
        want = want.rename_columns(cols)
    assert rows(got) == rows(want)


def test_q20_select_numbers_duplicate_names(db):
    # the query's own result (not the sink's): the second dateTime and extra get Flink's names
    t_env = TableEnvironment(mode="streaming")
    create_tables(t_env, EVENTS, RATE)
    select = query_statements(query_text("q20"))[-1].split("\n", 1)[1]
    got = t_env.sql_query(select).to_arrow()
    want = duck(db, REFERENCE["q20"])
    assert got.column_names == want.column_names
    assert "dateTime0" in got.column_names and "extra0" in got.column_names
    assert rows(got) == rows(want)


def test_q12_counts_every_bid_once(db):
    # processing-time windows: the split into windows depends on the wall clock, the counts do not
    got = fastops("q12")
    per_bidder = Counter()
    for r in got.to_pylist():
        per_bidder[r["bidder"]] += r["bid_count"]
    want = {r[0]: r[1] for r in db.execute("SELECT bidder, count(*) FROM bid GROUP BY bidder").fetchall()}
    assert per_bidder == want


def test_q6_is_refused():
    # Flink does not run q6 (an OVER aggregation of Top-N's updating result); fastops refuses it too
    with pytest.raises(ValueError):
        fastops("q6")


def test_query_files_are_nexmarks():
    # the benchmark's statements: a sink table (blackhole), then INSERT INTO it
    for q in QUERIES:
        stmts = query_statements(query_text(q))
        assert stmts[-1].upper().startswith("INSERT INTO NEXMARK_" + q.upper())
        sinks = [s for s in stmts if s.upper().startswith(f"CREATE TABLE NEXMARK_{q.upper()}")]
        assert len(sinks) == 1 and "'connector' = 'blackhole'" in sinks[0]


def test_views_over_the_datagen_table(db):
    t_env = TableEnvironment(mode="batch")
    create_tables(t_env, EVENTS, RATE)
    for name in ("person", "auction", "bid"):
        got = t_env.sql_query(f"SELECT * FROM {name}").to_arrow()
        want = duck(db, f"SELECT * FROM {name}")
        assert got.column_names == want.column_names
        assert rows(got) == rows(want)
    described = {r["name"]: r["type"] for r in t_env.execute_sql("DESCRIBE datagen").to_arrow().to_pylist()}
    assert described["bid"].startswith("ROW<`auction` BIGINT, `bidder` BIGINT")
    assert described["dateTime"] == "TIMESTAMP(3) *ROWTIME*"  # the computed column, the time attribute


@pytest.mark.parametrize("q", ["q3", "q4", "q5", "q8", "q9", "q11", "q18"])
def test_query_at_parallelism_two(db, q):
    got = run_query(q, events=EVENTS, rate=RATE, parallelism=2, batch_size=1000)
    if q == "q4":  # as in test_query_matches_duckdb: an average, maybe truncated
        g, w = dict(rows(got)), dict(rows(duck(db, REFERENCE[q])))
        assert g.keys() == w.keys() and all(abs(g[k] - w[k]) < 1 for k in w)
        return
    assert rows(got) == rows(duck(db, REFERENCE[q]))


def test_q13_side_input_reads_with_flinks_legacy_options(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "side_input.txt").write_text("".join(f"{i},{i}\n" for i in range(50)))
    create = next(s for s in query_statements(query_text("q13")) if "side_input" in s.split("(")[0])
    t_env = TableEnvironment(mode="batch")
    t_env.execute_sql(create.replace("${FLINK_HOME}", str(tmp_path)))
    got = t_env.sql_query("SELECT key, `value` FROM side_input").to_arrow().to_pylist()
    assert sorted((r["key"], r["value"]) for r in got) == [(i, str(i)) for i in range(50)]
