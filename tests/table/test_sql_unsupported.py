"""Flink SQL that fastops does not run is refused by name: a SqlError that says
which construct is not supported (and where), never a parse error about a
parenthesis, an error about some other part of the query, or a query run
with the construct silently ignored (a semi join as an inner join, PARTITIONED
BY, PIVOT, DISTINCT ON, TABLESAMPLE, an INSERT column list)."""
from __future__ import annotations

import pathlib
import re

import pyarrow as pa
import pytest

import fastops as fo
from fastops.table.sql import SqlError

TUMBLE = "TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' MINUTE{extra}))"
W = " GROUP BY window_start, window_end"


def _env() -> fo.TableEnvironment:
    t_env = fo.TableEnvironment(mode="batch")
    ts = pa.array([0, 1_000, 61_000, 62_000, 125_000], pa.timestamp("ms"))
    orders = pa.table({"id": [1, 2, 3, 4, 5], "user_id": [1, 1, 2, 2, 3],
                       "amount": [10.0, 20.0, 5.0, 7.0, 1.0], "ts": ts,
                       "tags": pa.array([[1, 2], [3], [], [4], [5, 6]]), "cur": ["a", "b", "a", "a", "b"]})
    t_env.create_temporary_view("orders", t_env.from_arrow(orders, rowtime="ts"))
    t_env.create_temporary_view("users", t_env.from_arrow(
        pa.table({"user_id": [1, 2, 3], "name": ["x", "y", "z"]})))
    t_env.create_temporary_view("rates", t_env.from_arrow(
        pa.table({"cur": ["a", "b"], "rate": [1.0, 2.0], "ts": ts[:2]}), rowtime="ts"))
    t_env.execute_sql("CREATE TABLE sink (id BIGINT, amount DOUBLE) WITH ('connector' = 'blackhole')")
    return t_env


# (the statement, words of the message that name the construct)
UNSUPPORTED = {
    # the two of the report
    "match_recognize": ("SELECT * FROM orders MATCH_RECOGNIZE (PARTITION BY user_id ORDER BY ts "
                        "MEASURES A.amount AS a PATTERN (A B) DEFINE A AS A.amount > 5)", "MATCH_RECOGNIZE"),
    "with_recursive": ("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 5) "
                       "SELECT n FROM r", "WITH RECURSIVE"),
    # OVER functions other than COUNT / SUM / AVG / MIN / MAX / ROW_NUMBER, QUALIFY
    "lag": ("SELECT id, LAG(amount) OVER (PARTITION BY user_id ORDER BY ts) FROM orders", "OVER window"),
    "qualify": ("SELECT id FROM orders QUALIFY ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY ts) = 1",
                "QUALIFY"),
    # arrays and lateral forms
    # (CROSS JOIN UNNEST, LEFT JOIN UNNEST ... ON TRUE run: tests/table/test_unnest.py)
    "unnest_in_select": ("SELECT id, UNNEST(tags) FROM orders", "UNNEST in an expression"),
    "unnest_alone": ("SELECT * FROM UNNEST(tags) AS T(t)", "UNNEST in FROM without a table before it"),
    "unnest_two_arrays": ("SELECT id, a, b FROM orders CROSS JOIN UNNEST(tags, tags) AS T(a, b)",
                          "UNNEST of 2 arguments"),
    "unnest_left_on": ("SELECT id, t FROM orders LEFT JOIN UNNEST(tags) AS T(t) ON t > 1",
                       "LEFT JOIN UNNEST without ON TRUE"),
    "unnest_right": ("SELECT id, t FROM orders RIGHT JOIN UNNEST(tags) AS T(t) ON TRUE", "RIGHT JOIN UNNEST"),
    "lateral_subquery": ("SELECT o.id, x.m FROM orders o, LATERAL (SELECT MAX(amount) AS m FROM users) x",
                         "LATERAL (subquery)"),
    # time travel (temporal joins run: tests/table/test_temporal_join.py)
    "time_travel": ("SELECT * FROM rates FOR SYSTEM_TIME AS OF TIMESTAMP '2024-01-01 00:00:00'",
                    "FOR SYSTEM_TIME AS OF"),
    # grouping
    "group_by_all": ("SELECT user_id, SUM(amount) FROM orders GROUP BY ALL", "GROUP BY ALL"),
    "legacy_window_start": ("SELECT TUMBLE_START(ts, INTERVAL '1' MINUTE), SUM(amount) FROM orders",
                            "group window function TUMBLE_START() outside GROUP BY"),
    "pivot": ("SELECT * FROM orders PIVOT (SUM(amount) FOR cur IN ('a', 'b'))", "PIVOT"),
    "distinct_on": ("SELECT DISTINCT ON (user_id) user_id, amount FROM orders", "DISTINCT ON"),
    "tablesample": ("SELECT id FROM orders TABLESAMPLE (50 PERCENT)", "TABLESAMPLE"),
    # set operations (EXCEPT is Flink's name)
    "minus": ("SELECT user_id FROM orders MINUS SELECT user_id FROM users", "MINUS"),
    # subqueries in expressions, SELECT without FROM
    "in_subquery_in_or": ("SELECT id FROM orders WHERE id = 1 OR user_id IN (SELECT user_id FROM users)",
                          "IN (subquery) inside an expression"),
    "scalar_subquery": ("SELECT id, (SELECT MAX(amount) FROM orders) AS m FROM orders",
                        "subquery in an expression"),
    "select_without_from": ("SELECT 1", "SELECT without FROM"),
    # joins
    "cross_join": ("SELECT * FROM orders CROSS JOIN users", "a join without ON"),
    "comma_join": ("SELECT * FROM orders, users WHERE orders.user_id = 1", "a join without ON"),
    "using": ("SELECT * FROM orders JOIN users USING (user_id)", "JOIN ... USING"),
    "natural_join": ("SELECT * FROM orders NATURAL JOIN users", "NATURAL JOIN"),
    "semi_join": ("SELECT id FROM orders LEFT SEMI JOIN users ON orders.user_id = users.user_id",
                  "LEFT SEMI JOIN"),
    "anti_join": ("SELECT id FROM orders LEFT ANTI JOIN users ON orders.user_id = users.user_id",
                  "LEFT ANTI JOIN"),
    # window TVFs with arguments fastops does not take
    "tvf_fifth_argument": ("SELECT window_start, SUM(amount) FROM "
                           + TUMBLE.format(extra=", INTERVAL '1' SECOND, INTERVAL '2' SECOND") + W,
                           "5th argument of TUMBLE"),
    "tvf_unknown_named": ("SELECT window_start, SUM(amount) FROM TABLE(TUMBLE(DATA => TABLE orders, "
                          "TIMECOL => DESCRIPTOR(ts), SIZE => INTERVAL '1' MINUTE, "
                          "FOO => INTERVAL '1' SECOND))" + W, "argument FOO of TUMBLE"),
    "session_offset": ("SELECT window_start, SUM(amount) FROM TABLE(SESSION(TABLE orders, DESCRIPTOR(ts), "
                       "INTERVAL '1' MINUTE, INTERVAL '5' SECOND))" + W, "4th argument of SESSION"),
    "descriptor_two_columns": ("SELECT window_start, SUM(amount) FROM TABLE(HOP(TABLE orders, "
                               "DESCRIPTOR(ts, ts), INTERVAL '1' MINUTE, INTERVAL '2' MINUTE))" + W,
                               "DESCRIPTOR of 2 columns"),
    "month_interval": (f"SELECT window_start, SUM(amount) FROM "
                       f"TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' MONTH)){W}",
                       "interval unit 'MONTH'"),
    "unknown_tvf": ("SELECT * FROM TABLE(FOO(TABLE orders, DESCRIPTOR(ts)))", "table function 'FOO("),
    "fetch_with_ties": ("SELECT id FROM orders ORDER BY id FETCH FIRST 2 ROWS WITH TIES", "WITH TIES"),
    # statements: CREATE TABLE, INSERT INTO, configuration, catalogs
    "connector_kafka": ("CREATE TABLE k (id BIGINT) WITH ('connector' = 'kafka', 'topic' = 'x', "
                        "'format' = 'json')", "connector 'kafka'"),
    "filesystem_json": ("CREATE TABLE j (id BIGINT) WITH ('connector' = 'filesystem', 'path' = '/tmp/x', "
                        "'format' = 'json')", "format 'json'"),
    "partitioned_by": ("CREATE TABLE p (id BIGINT, dt STRING) PARTITIONED BY (dt) WITH "
                       "('connector' = 'blackhole')", "PARTITIONED BY"),
    "metadata_column": ("CREATE TABLE m (id BIGINT, ts TIMESTAMP(3) METADATA FROM 'timestamp') WITH "
                        "('connector' = 'blackhole')", "METADATA column"),
    "create_like": ("CREATE TABLE l WITH ('connector' = 'blackhole') LIKE orders", "CREATE TABLE ... LIKE"),
    "insert_column_list": ("INSERT INTO sink (amount, id) SELECT amount, id FROM orders",
                           "INSERT INTO sink (amount, id)"),
    "insert_partition": ("INSERT INTO sink PARTITION (id = 1) SELECT id, amount FROM orders",
                         "INSERT ... PARTITION"),
    "statement_set": ("BEGIN STATEMENT SET", "STATEMENT SET"),
    "set": ("SET 'table.exec.state.ttl' = '1 h'", "SET"),
    "reset": ("RESET 'table.exec.state.ttl'", "RESET"),
    "create_catalog": ("CREATE CATALOG c WITH ('type' = 'hive')", "CREATE CATALOG"),
    "create_database": ("CREATE DATABASE db", "CREATE DATABASE"),
    "load_module": ("LOAD MODULE hive", "LOAD MODULE"),
    "alter_table": ("ALTER TABLE sink RENAME TO s2", "ALTER"),
    "delete": ("DELETE FROM sink WHERE id = 1", "DELETE"),
    "update": ("UPDATE sink SET amount = 0 WHERE id = 1", "UPDATE"),
    "explain_changelog": ("EXPLAIN CHANGELOG_MODE SELECT id FROM orders", "EXPLAIN with details"),
}


@pytest.mark.parametrize("name", list(UNSUPPORTED))
def test_unsupported_construct_is_named(name):
    sql, construct = UNSUPPORTED[name]
    t_env = _env()
    with pytest.raises(SqlError) as info:
        t_env.execute_sql(sql)
    msg = str(info.value)
    assert construct in msg and "is not supported" in msg, msg
    # named as unsupported, not as a parse error or a complaint about another part of the query
    assert not msg.startswith("SQL parse error"), msg


QUERIES = [n for n, (sql, _) in UNSUPPORTED.items()
           if re.match(r"\s*(SELECT|WITH)\b", sql) and n not in ("minus",)]


@pytest.mark.parametrize("name", QUERIES)
def test_sql_query_names_the_same_construct(name):
    """sql_query refuses a query the same way (INTERSECT was 'sql_query takes a SELECT query')."""
    sql, construct = UNSUPPORTED[name]
    with pytest.raises(SqlError, match=re.escape(construct) + ".* is not supported by fastops SQL"):
        _env().sql_query(sql)


def test_the_message_says_where_and_what_to_do_instead():
    with pytest.raises(SqlError) as info:
        _env().sql_query("SELECT id,\n  LAG(amount) OVER (PARTITION BY user_id ORDER BY ts) FROM orders")
    msg = str(info.value)
    assert "at line 2, column 3" in msg
    assert "SUM" in msg and "KeyedProcessFunction" in msg  # the ways to do it instead
    with pytest.raises(SqlError, match=r"connectors are 'filesystem' .*'print' .*'blackhole'"):
        _env().execute_sql("CREATE TABLE k (id BIGINT) WITH ('connector' = 'kafka')")


def test_insert_into_a_view_is_refused_by_name():
    with pytest.raises(fo.table.PlanError, match="INSERT INTO the view 'orders' is not supported"):
        _env().execute_sql("INSERT INTO orders SELECT * FROM orders")


# ---------------------------------------------------------------- what still runs

ROWS = [(1, 1, 10.0), (2, 1, 20.0), (3, 2, 5.0), (4, 2, 7.0), (5, 3, 1.0)]  # id, user_id, amount


def _rows(table) -> list[tuple]:
    return [tuple(r.values()) for r in table.to_pylist()]


@pytest.mark.parametrize("sql, expected", [
    # FETCH FIRST / NEXT is LIMIT (it crashed with AttributeError)
    ("SELECT id, amount FROM orders ORDER BY amount DESC FETCH FIRST 2 ROWS ONLY",
     [(r[0], r[2]) for r in sorted(ROWS, key=lambda r: -r[2])[:2]]),
    ("SELECT id FROM orders ORDER BY id OFFSET 1 ROWS FETCH NEXT 2 ROWS ONLY", [(2,), (3,)]),
    ("SELECT id FROM orders ORDER BY id FETCH FIRST ROW ONLY", [(1,)]),
    # WITH RECURSIVE whose CTEs do not read themselves runs as written
    ("WITH RECURSIVE big AS (SELECT id FROM orders WHERE amount > 6) SELECT id FROM big ORDER BY id",
     [(r[0],) for r in ROWS if r[2] > 6]),
    # UNNEST: CROSS JOIN, comma, LEFT JOIN ... ON TRUE (tags: [1, 2], [3], [], [4], [5, 6])
    ("SELECT id, t FROM orders CROSS JOIN UNNEST(tags) AS T(t) ORDER BY t", [(1, 1), (1, 2), (2, 3), (4, 4),
                                                                          (5, 5), (5, 6)]),
    ("SELECT id, t FROM orders, UNNEST(tags) AS T(t) WHERE t > 3 ORDER BY t", [(4, 4), (5, 5), (5, 6)]),
    ("SELECT id, t FROM orders LEFT JOIN UNNEST(tags) AS T(t) ON TRUE WHERE id = 3", [(3, None)]),
    # UNION stays supported; a window TVF with named arguments in any order
    ("SELECT user_id FROM orders UNION SELECT user_id FROM users ORDER BY user_id", [(1,), (2,), (3,)]),
    ("SELECT window_start, COUNT(*) AS n FROM TABLE(TUMBLE(SIZE => INTERVAL '1' MINUTE, "
     "TIMECOL => DESCRIPTOR(ts), DATA => TABLE orders)) GROUP BY window_start, window_end ORDER BY window_start",
     [(pa.scalar(0, pa.timestamp("ms")).as_py(), 2), (pa.scalar(60_000, pa.timestamp("ms")).as_py(), 2),
      (pa.scalar(120_000, pa.timestamp("ms")).as_py(), 1)]),
])
def test_supported_forms_still_run(sql, expected):
    assert _rows(_env().sql_query(sql).execute().to_arrow()) == expected


def test_words_of_unsupported_syntax_as_names_and_strings_are_not_refused():
    t_env = fo.TableEnvironment(mode="batch")
    t_env.create_temporary_view("t", t_env.from_elements(
        [(1, "a"), (2, "b")], ["metadata", "minus"]))
    got = t_env.sql_query("SELECT metadata, minus, 'MATCH_RECOGNIZE' AS s FROM t WHERE metadata > 1")
    assert _rows(got.execute().to_arrow()) == [(2, "b", "MATCH_RECOGNIZE")]
    # a parse error stays a parse error when the word is only inside a string
    with pytest.raises(SqlError, match="SQL parse error"):
        t_env.sql_query("SELECT 'MATCH_RECOGNIZE' FROM t WHERE")


def test_built_in_function_with_missing_arguments_says_so():
    """SPLIT(s) with no UDF named split registered: sqlglot's class name is not the message."""
    t_env = fo.TableEnvironment(mode="batch")
    t_env.create_temporary_view("t", t_env.from_elements([(1, "a b")], ["id", "s"]))
    with pytest.raises(SqlError) as info:
        t_env.sql_query("SELECT id, w FROM t, LATERAL TABLE(split(s)) AS T(w)")
    msg = str(info.value)
    assert "SPLIT misses its argument" in msg and "create_temporary_function" in msg
    assert "sqlglot" not in msg and "<class" not in msg


# ---------------------------------------------------------------- docs/pyflink.md's list

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs" / "pyflink.md"


def _documented_refusals() -> list[tuple[str, str, str]]:
    """(statement, error type, message start) of each row of the page's "What is refused" tables."""
    text = DOCS.read_text()
    section = text.split("\n## What is refused\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = re.findall(r"\| `([^`]+)` \| `([^`]+)` \|", line)
        if cells:
            sql, error = cells[0]
            kind, message = error.split(": ", 1)
            rows.append((sql, kind, message))
    return rows


def _docs_env() -> fo.TableEnvironment:
    """The tables the page's statements read: _env's, streaming, with a versioned and an updating view
    and a udaf."""
    t_env = fo.TableEnvironment(mode="streaming")
    src = _env()
    for name in ("orders", "users", "rates"):
        t_env.create_temporary_view(name, t_env.from_arrow(src.from_path(name).to_arrow(),
                                                           rowtime="ts" if name != "users" else None))
    t_env.execute_sql("CREATE VIEW versioned_rates AS SELECT cur, rate, ts FROM (SELECT *, ROW_NUMBER() "
                      "OVER (PARTITION BY cur ORDER BY ts DESC) AS rn FROM rates) WHERE rn = 1")
    t_env.execute_sql("CREATE VIEW upd AS SELECT user_id, MAX(ts) AS ts FROM orders GROUP BY user_id")

    def psum(s):
        return float(s.sum())

    t_env.create_temporary_function("psum", fo.table.udaf(psum, result_type="DOUBLE", func_type="pandas"))
    t_env.execute_sql("CREATE TABLE sink (id BIGINT, amount DOUBLE) WITH ('connector' = 'blackhole')")
    return t_env


def test_the_docs_list_every_refusal_with_its_error():
    documented = _documented_refusals()
    assert len(documented) > 60
    for sql, kind, message in documented:
        with pytest.raises(Exception) as info:
            _docs_env().execute_sql(sql).to_arrow()
        got = f"{type(info.value).__name__}: {info.value}"
        # '…' in the page stands for a name the message holds
        pattern = ".*?".join(re.escape(part) for part in f"{kind}: {message}".split("…"))
        assert re.match(pattern, got), f"{sql}\n  documented: {kind}: {message}\n  raised:     {got}"
    # every construct this file refuses is on the page
    missing = [n for n, (_, construct) in UNSUPPORTED.items()
               if not any(construct in message for _, _, message in documented)]
    assert not missing, missing
