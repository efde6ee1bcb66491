"""SQL: Flink's window TVF documentation examples (same queries, same rows),
DDL / DML over files, SHOW / DESCRIBE / EXPLAIN, event time and late rows,
UDFs in SQL, and error messages that name the culprit and its position."""
from __future__ import annotations

import datetime as dt
import decimal
import os

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import fastops as fo
import fastops.core.aggregates as agg
from fastops.table import SqlError, udaf, udf, udtf

D = decimal.Decimal
T = lambda m: dt.datetime(2020, 4, 15, 8, m)

# The Bid table of Flink's "Window Table-Valued Functions" page
BIDS = [(T(5), D("4.00"), "C"), (T(7), D("2.00"), "A"), (T(9), D("5.00"), "D"),
        (T(11), D("3.00"), "B"), (T(13), D("1.00"), "E"), (T(17), D("6.00"), "F")]


@pytest.fixture(params=["streaming", "batch"])
def bid_env(request):
    t_env = fo.TableEnvironment(mode=request.param, batch_size=2)
    t = t_env.from_elements(BIDS, [("bidtime", "TIMESTAMP(3)"), ("price", "DECIMAL(10, 2)"), ("item", "STRING")],
                            rowtime="bidtime", watermark="1s")
    t_env.create_temporary_view("Bid", t)
    return t_env


def _rows(result):
    return sorted(tuple(r) for r in result.collect())


def test_tumble_doc_example(bid_env):
    r = bid_env.execute_sql("""
        SELECT window_start, window_end, SUM(price) AS total_price
        FROM TABLE(TUMBLE(TABLE Bid, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES))
        GROUP BY window_start, window_end""")
    assert _rows(r) == [(T(0), T(10), D("11.00")), (T(10), T(20), D("10.00"))]


def test_tumble_named_arguments(bid_env):
    r = bid_env.execute_sql("""
        SELECT window_start, window_end, SUM(price) AS total_price
        FROM TABLE(TUMBLE(DATA => TABLE Bid, TIMECOL => DESCRIPTOR(bidtime), SIZE => INTERVAL '10' MINUTES))
        GROUP BY window_start, window_end""")
    assert _rows(r) == [(T(0), T(10), D("11.00")), (T(10), T(20), D("10.00"))]


def test_hop_doc_example(bid_env):
    r = bid_env.execute_sql("""
        SELECT window_start, window_end, SUM(price) AS total_price
        FROM TABLE(HOP(TABLE Bid, DESCRIPTOR(bidtime), INTERVAL '5' MINUTES, INTERVAL '10' MINUTES))
        GROUP BY window_start, window_end""")
    assert _rows(r) == [(T(0), T(10), D("11.00")), (T(5), T(15), D("15.00")),
                        (T(10), T(20), D("10.00")), (T(15), T(25), D("6.00"))]


def test_cumulate_doc_example(bid_env):
    r = bid_env.execute_sql("""
        SELECT window_start, window_end, SUM(price) AS total_price
        FROM TABLE(CUMULATE(TABLE Bid, DESCRIPTOR(bidtime), INTERVAL '2' MINUTES, INTERVAL '10' MINUTES))
        GROUP BY window_start, window_end""")
    assert _rows(r) == [(T(0), T(6), D("4.00")), (T(0), T(8), D("6.00")), (T(0), T(10), D("11.00")),
                        (T(10), T(12), D("3.00")), (T(10), T(14), D("4.00")), (T(10), T(16), D("4.00")),
                        (T(10), T(18), D("10.00")), (T(10), T(20), D("10.00"))]


def test_session_doc_example(bid_env):
    r = bid_env.execute_sql("""
        SELECT window_start, window_end, item, SUM(price) AS total_price
        FROM TABLE(SESSION(TABLE Bid PARTITION BY item, DESCRIPTOR(bidtime), INTERVAL '5' MINUTES))
        GROUP BY item, window_start, window_end""")
    want = sorted((t, t + dt.timedelta(minutes=5), item, price) for t, price, item in BIDS)
    assert _rows(r) == want


def test_tumble_tvf_as_table(bid_env):
    r = bid_env.execute_sql("SELECT * FROM TABLE(TUMBLE(TABLE Bid, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES))")
    assert r.schema.names == ["bidtime", "price", "item", "window_start", "window_end", "window_time"]
    for bidtime, _, _, ws, we, wt in r.collect():
        assert ws <= bidtime < we and we - ws == dt.timedelta(minutes=10)
        assert wt == we - dt.timedelta(milliseconds=1)


def test_window_print_layout():
    t_env = fo.TableEnvironment(mode="streaming")
    t_env.create_temporary_view("Bid", t_env.from_elements(
        BIDS, [("bidtime", "TIMESTAMP(3)"), ("price", "DECIMAL(10, 2)"), ("item", "STRING")]))
    text = t_env.execute_sql("""
        SELECT window_start, window_end, COUNT(*) AS n
        FROM TABLE(TUMBLE(TABLE Bid, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES))
        GROUP BY window_start, window_end""").to_string()
    assert text == (
        "+----+-------------------------+-------------------------+----------------------+\n"
        "| op |            window_start |              window_end |                    n |\n"
        "+----+-------------------------+-------------------------+----------------------+\n"
        "| +I | 2020-04-15 08:00:00.000 | 2020-04-15 08:10:00.000 |                    3 |\n"
        "| +I | 2020-04-15 08:10:00.000 | 2020-04-15 08:20:00.000 |                    3 |\n"
        "+----+-------------------------+-------------------------+----------------------+\n"
        "2 rows in set\n")


def test_watermark_drops_late_rows_in_streaming_only():
    rows = [(1, 1000), (1, 5000), (1, 1500), (1, 5200)]  # 1500 arrives after the watermark passed 2000
    for mode, want in (("streaming", [(0, 1), (4000, 2)]), ("batch", [(0, 2), (4000, 2)])):
        t_env = fo.TableEnvironment(mode=mode, batch_size=1)
        t_env.create_temporary_view("e", t_env.from_elements(rows, ["k", "ts"], rowtime="ts", watermark="1s"))
        r = t_env.execute_sql("SELECT window_start, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE e, DESCRIPTOR(ts), "
                              "INTERVAL '2' SECOND)) GROUP BY window_start, window_end")
        got = sorted((int(ws.timestamp() * 1000) - 0, n) for ws, n in r.collect())
        assert got == want, mode


def test_changelog_from_sql(capsys):
    t_env = fo.TableEnvironment(mode="streaming", batch_size=1)
    t_env.create_temporary_view("t", t_env.from_elements([("a", 1), ("b", 2), ("a", 3)], ["k", "v"]))
    r = t_env.execute_sql("SELECT k, SUM(v) AS s FROM t GROUP BY k")
    assert [(x.get_row_kind(), *x) for x in r.collect()] == [
        ("+I", "a", 1), ("+I", "b", 2), ("-U", "a", 1), ("+U", "a", 4)]
    assert sorted(r.to_pandas().values.tolist()) == [["a", 4], ["b", 2]]


# ---------------------------------------------------------------- DDL / DML

def test_create_table_insert_select_parquet_and_csv(tmp_path):
    src = tmp_path / "events.parquet"
    ts = pa.array([1000, 1500, 2100, 500, 9000], pa.int64()).cast(pa.timestamp("ms"))
    pq.write_table(pa.table({"user_id": [1, 2, 1, 3, 1], "ts": ts, "value": [1.0, 2.0, 3.0, 4.0, 5.0]}), src)
    t_env = fo.TableEnvironment()
    assert t_env.execute_sql(f"""
        CREATE TABLE events (user_id BIGINT, ts TIMESTAMP(3), `value` DOUBLE,
            WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
        WITH ('connector' = 'filesystem', 'path' = '{src}', 'format' = 'parquet')""").to_pandas() \
        .values.tolist() == [["OK"]]
    for fmt in ("csv", "parquet"):
        out = tmp_path / f"out_{fmt}"
        t_env.execute_sql(f"CREATE TABLE sink_{fmt} (user_id BIGINT, n BIGINT, total DOUBLE) WITH "
                          f"('connector' = 'filesystem', 'path' = '{out}', 'format' = '{fmt}')")
        t_env.execute_sql(f"INSERT INTO sink_{fmt} SELECT user_id, COUNT(*), SUM(`value`) FROM events "
                          f"GROUP BY user_id")
        assert len(os.listdir(out)) == 1
        back = t_env.execute_sql(f"SELECT * FROM sink_{fmt}").to_pandas().sort_values("user_id")
        assert back.values.tolist() == [[1, 3, 9.0], [2, 1, 2.0], [3, 1, 4.0]]
    d = t_env.execute_sql("DESCRIBE events").to_pandas()
    assert d["type"].tolist() == ["BIGINT", "TIMESTAMP(3) *ROWTIME*", "DOUBLE"]
    assert d["watermark"].tolist()[1] == "`ts` - INTERVAL '2' SECOND"
    assert t_env.execute_sql("SHOW TABLES").to_pandas()["table name"].tolist() == \
        ["events", "sink_csv", "sink_parquet"]


def test_views_drop_show_explain():
    t_env = fo.TableEnvironment(mode="batch")
    t_env.create_temporary_view("t", t_env.from_elements([(1, "a"), (2, "b"), (3, "a")], ["id", "s"]))
    t_env.execute_sql("CREATE TEMPORARY VIEW big AS SELECT id, s FROM t WHERE id > 1")
    assert sorted(t_env.execute_sql("SELECT id FROM big").to_pandas()["id"]) == [2, 3]
    assert t_env.execute_sql("SHOW VIEWS").to_pandas()["view name"].tolist() == ["big", "t"]
    result = t_env.execute_sql("EXPLAIN SELECT s, COUNT(*) FROM big GROUP BY s")
    plan = next(result.collect())[0]
    assert "GroupAggregate(groupBy=[s]" in plan and "Calc(where=[(id > 1)])" in plan
    assert result.to_string() == plan + "\n"  # printed as it is, not in a grid
    t_env.execute_sql("DROP VIEW big")
    assert t_env.list_views() == ["t"]
    with pytest.raises(SqlError, match="table 'big' not found at line 1, column 15"):
        t_env.sql_query("SELECT * FROM big")


def test_cte_subquery_case_cast_order_limit():
    t_env = fo.TableEnvironment(mode="batch")
    t_env.create_temporary_view("t", t_env.from_elements([(i, i % 3, float(i)) for i in range(10)], ["id", "k", "x"]))
    r = t_env.execute_sql("""
        WITH g AS (SELECT k, SUM(x) AS sx, COUNT(*) AS n FROM t GROUP BY k)
        SELECT k, CASE WHEN sx > 12 THEN 'big' ELSE 'small' END AS size, CAST(n AS STRING) AS ns
        FROM (SELECT * FROM g WHERE n >= 3) AS q ORDER BY k DESC LIMIT 2""")
    assert [tuple(x) for x in r.collect()] == [(2, "big", "3"), (1, "small", "3")]


# ---------------------------------------------------------------- UDFs in SQL

def test_udf_udaf_udtf_in_sql():
    t_env = fo.TableEnvironment(mode="batch")
    t_env.create_temporary_view("t", t_env.from_elements([(1, "a b"), (2, "c"), (3, "d e f")], ["id", "s"]))
    t_env.create_temporary_function("plus", udf(lambda a, b: a + b, result_type="BIGINT", name="plus"))
    t_env.create_temporary_function("longest", udaf(lambda s: int(s.str.len().max()), result_type="INT",
                                                    func_type="pandas", name="longest"))
    t_env.create_temporary_function("split", udtf(lambda s: [(w,) for w in s.split()], result_types=["STRING"],
                                                  names=["word"]))
    r = t_env.execute_sql("SELECT plus(id, 10) AS p, UPPER(s) AS u FROM t WHERE plus(id, 0) > 1")
    assert [tuple(x) for x in r.collect()] == [(12, "C"), (13, "D E F")]
    assert t_env.execute_sql("SELECT longest(s) AS m FROM t").to_pandas()["m"].tolist() == [5]
    r = t_env.execute_sql("SELECT id, word FROM t, LATERAL TABLE(split(s)) AS T(word)")
    assert [tuple(x) for x in r.collect()] == [(1, "a"), (1, "b"), (2, "c"), (3, "d"), (3, "e"), (3, "f")]
    assert t_env.list_user_defined_functions() == ["longest", "plus", "split"]


# ---------------------------------------------------------------- errors

@pytest.mark.parametrize("query, message", [
    ("SELECT nope FROM t", r"column 'nope' not found at line 1, column 8; available: t\.id, t\.s"),
    ("SELECT id FROM missing", r"table 'missing' not found at line 1, column 16"),
    ("SELECT id,\n  foo(id) FROM t", r"unknown function 'foo' at line 2, column 3"),
    ("SELECT id FROM t WHERE", r"SQL parse error at line 1"),
    ("SELECT RANK() OVER (ORDER BY id) FROM t", r"RANK in an OVER window is not supported"),
    ("SELECT * FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(nope), INTERVAL '1' SECOND))",
     r"DESCRIPTOR column 'nope' not found"),
    ("SELECT * FROM TABLE(FOO(TABLE t, DESCRIPTOR(id)))", r"table function 'FOO\(.* is not supported"),
    ("SELECT id, COUNT(*) FROM t", r"column 'id' .* is neither grouped nor aggregated"),
    ("SELECT CAST(id AS WIBBLE) FROM t", r"unknown SQL type"),
])
def test_errors_name_the_culprit(query, message):
    t_env = fo.TableEnvironment(mode="batch")
    t_env.create_temporary_view("t", t_env.from_elements([(1, "a")], ["id", "s"]))
    with pytest.raises((SqlError, fo.table.PlanError, ValueError), match=message):
        t_env.sql_query(query)


@pytest.mark.parametrize("tvf", ["TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '5' SECOND)",
                                 "HOP(TABLE t, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '5' SECOND)",
                                 "CUMULATE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '5' SECOND)"])
@pytest.mark.parametrize("grouped", [False, True])
def test_window_of_an_event_time_beyond_int64_is_refused(tvf, grouped):
    """A time whose window bounds would overflow int64 ms fails the query with
    the time column and value named (not wrapped-around windows)."""
    t_env = fo.TableEnvironment(mode="batch")
    t_env.create_temporary_view("t", t_env.from_arrow(
        pa.table({"k": [1, 2], "ts": pa.array([5, 2**63 - 10], pa.timestamp("ms"))})))
    query = (f"SELECT window_start, k, COUNT(*) AS c FROM TABLE({tvf}) GROUP BY window_start, window_end, k"
             if grouped else f"SELECT * FROM TABLE({tvf})")
    with pytest.raises(fo.JobFailed) as info:
        t_env.sql_query(query).to_arrow()
    cause = info.value.__cause__
    assert isinstance(cause, ValueError) and "'ts'" in str(cause) and str(2**63 - 10) in str(cause)


@pytest.mark.skipif(not hasattr(pa, "string_view"), reason="view types need pyarrow >= 16")
@pytest.mark.parametrize("mode", ["batch", "streaming"])
def test_view_columns_are_strings_and_bytes(mode):
    """string_view / binary_view columns (as Polars and newer Arrow produce) are
    STRING / BYTES: filters, functions, ordering and MIN/MAX give the answers
    of the same table with plain string / binary columns."""
    words = ["a", "bb", None, "a" * 20, "ccc", "a"]
    blobs = [b"x", None, b"y" * 15, b"", b"x", b"z"]
    plain = pa.table({"k": [1, 2, 1, 2, 1, 3], "s": pa.array(words), "b": pa.array(blobs)})
    views = plain.set_column(1, "s", pa.array(words, pa.string_view())) \
                 .set_column(2, "b", pa.array(blobs, pa.binary_view()))
    queries = ["SELECT s, COUNT(*) AS c FROM t GROUP BY s", "SELECT k, b FROM t WHERE s = 'a'",
               "SELECT k, MAX(s) AS m, MIN(s) AS n FROM t GROUP BY k", "SELECT UPPER(s) AS u, k FROM t",
               "SELECT s, b, k FROM t WHERE s IS NOT NULL ORDER BY s, k"]
    for q in queries:
        got = []
        for table in (plain, views):
            t_env = fo.TableEnvironment(mode=mode)
            t_env.create_temporary_view("t", t_env.from_arrow(table))
            rows = t_env.sql_query(q).to_arrow().to_pylist()
            got.append(rows if "ORDER BY" in q else sorted(rows, key=repr))
        assert got[0] == got[1] and got[0], q


def test_sketch_aggregates_or_clear_error():
    t_env = fo.TableEnvironment(mode="batch")
    t_env.create_temporary_view("t", t_env.from_elements([(i % 7, float(i)) for i in range(100)], ["k", "x"]))
    q = "SELECT APPROX_COUNT_DISTINCT(k) AS d, PERCENTILE_APPROX(x, 0.5) AS m FROM t"
    if hasattr(agg, "approx_distinct") and hasattr(agg, "approx_quantile"):
        d, m = next(t_env.execute_sql(q).collect())
        assert d == 7 and abs(m - 49.5) <= 3
    else:
        with pytest.raises(fo.table.PlanError, match="sketch aggregate"):
            t_env.sql_query(q)


def test_interval_join_streaming_matches_duckdb():
    a = pa.table({"k": [1, 2, 1, 3], "t": pa.array([1000, 5000, 9000, 2000], pa.int64()).cast(pa.timestamp("ms"))})
    b = pa.table({"k2": [1, 1, 2, 3], "t2": pa.array([1500, 8000, 5100, 4000], pa.int64()).cast(pa.timestamp("ms")),
                  "v": ["x", "y", "z", "w"]})
    t_env = fo.TableEnvironment(mode="streaming", batch_size=1)
    t_env.create_temporary_view("a", t_env.from_arrow(a, rowtime="t", watermark="1s"))
    t_env.create_temporary_view("b", t_env.from_arrow(b, rowtime="t2", watermark="1s"))
    q = ("SELECT a.k, a.t, b.v FROM a JOIN b ON a.k = b.k2 "
         "AND b.t2 BETWEEN a.t - INTERVAL '1' SECOND AND a.t + INTERVAL '1' SECOND")
    got = sorted(tuple(r) for r in t_env.execute_sql(q).collect())
    con = duckdb.connect()
    con.register("a", a)
    con.register("b", b)
    want = sorted((k, t.replace(tzinfo=None), v) for k, t, v in con.sql(q).fetchall())
    assert got == want and len(got) == 3


def test_window_tvf_through_subquery_is_still_a_window_aggregate(bid_env):
    direct = bid_env.execute_sql("""
        SELECT window_start, window_end, item, SUM(price) AS s
        FROM TABLE(TUMBLE(TABLE Bid, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES)) WHERE price > 1
        GROUP BY window_start, window_end, item""")
    nested = bid_env.sql_query("""
        SELECT window_start, window_end, item, SUM(price) AS s
        FROM (SELECT window_start, window_end, item, price
              FROM TABLE(TUMBLE(TABLE Bid, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES)) WHERE price > 1) AS w
        GROUP BY window_start, window_end, item""")
    assert "WindowAggregate" in nested.explain()
    res = nested.execute()
    assert {r.get_row_kind() for r in res.collect()} == {"+I"}
    assert _rows(res) == _rows(direct) and len(_rows(res)) == 5
