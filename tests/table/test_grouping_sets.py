"""GROUPING SETS, ROLLUP, CUBE and GROUPING() / GROUPING_ID().

Random tables cut into random batches, batch and streaming mode,
parallelism 1 and 2: the rows (streaming: the final rows of a valid
changelog) equal DuckDB's, plain and over TUMBLE windows
(``GROUP BY window_start, window_end, GROUPING SETS (...)``).
"""
from __future__ import annotations

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastops as fo
from support.sql_diff import CUTS, ROW, applied, assert_same_rows, changelog_of, chunked, duck, make_table

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ROWS = st.lists(ROW, min_size=1, max_size=30)


def _final(result) -> list[tuple]:
    return list(applied(changelog_of(result)).elements())


QUERIES = [
    "SELECT k, s, SUM(y) AS sy, COUNT(*) AS n FROM t GROUP BY GROUPING SETS ((k, s), (k), ())",
    "SELECT k, s, MAX(x) AS m, GROUPING(k) AS gk, GROUPING(k, s) AS g FROM t GROUP BY ROLLUP(k, s)",
    "SELECT k % 2 AS p, s, MIN(y) AS lo, GROUPING_ID(k % 2, s) AS g FROM t GROUP BY CUBE(k % 2, s)",
    "SELECT k, s, COUNT(*) AS n FROM t GROUP BY k, ROLLUP(s) HAVING COUNT(*) > 1",
    "SELECT s, k, AVG(x) AS a FROM t GROUP BY GROUPING SETS (s, ROLLUP(k))",
    "SELECT k, COUNT(y) AS n, GROUPING(k) AS g FROM t GROUP BY k",
]
WINDOWED = [
    "SELECT window_start, window_end, k, COUNT(*) AS n, SUM(y) AS sy FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), "
    "INTERVAL '20' SECOND)) GROUP BY window_start, window_end, GROUPING SETS ((k), ())",
    "SELECT window_start, k, s, MAX(y) AS m, GROUPING(s) AS g FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), "
    "INTERVAL '20' SECOND)) GROUP BY window_start, window_end, ROLLUP(k, s)",
]
# the TUMBLE windows written out for DuckDB
_DUCK_TUMBLE = ("(SELECT *, epoch_ms(tms // 20000 * 20000) AS window_start, "
                "epoch_ms(tms // 20000 * 20000 + 20000) AS window_end FROM t)")


@SETTINGS
@given(rows=ROWS, cuts=CUTS, q=st.sampled_from(QUERIES + WINDOWED), mode=st.sampled_from(["batch", "streaming"]),
       parallelism=st.sampled_from([1, 2]))
def test_grouping_sets_match_duckdb(rows, cuts, q, mode, parallelism):
    t = make_table(rows)
    want = duck(q.replace("TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '20' SECOND))", _DUCK_TUMBLE),
                {"t": t})
    t_env = fo.TableEnvironment(mode=mode, parallelism=parallelism)
    t_env.create_temporary_view("t", t_env.from_arrow(chunked(t, cuts)))
    res = t_env.execute_sql(q)
    got = pa.Table.from_pylist([dict(zip(want.schema.names, r)) for r in _final(res)], schema=want.schema) \
        if mode == "streaming" else res.to_arrow()
    assert_same_rows(got, want, q)
    if mode == "streaming" and q in WINDOWED:
        assert {r.get_row_kind() for r in res.collect()} <= {"+I"}


def test_grouping_sets_in_explain_and_names():
    t_env = fo.TableEnvironment(mode="batch")
    t_env.create_temporary_view("t", t_env.from_arrow(make_table([(1, "a", 1.0, 2, 0), (2, "a", 2.0, 3, 0)])))
    res = t_env.execute_sql("SELECT s, k, SUM(y) FROM t GROUP BY ROLLUP(s, k) ORDER BY s, k")
    assert res.to_arrow().schema.names == ["s", "k", "EXPR$2"]
    assert [tuple(r) for r in res.collect()] == [(None, None, 5), ("a", None, 5), ("a", 1, 2), ("a", 2, 3)]
