"""Aggregate ``FILTER (WHERE cond)``: group-by and window aggregation, batch and
streaming, against DuckDB (which runs FILTER itself) on random tables."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastops as fo
from support.sql_diff import ROWS, assert_same_rows, duck, make_table

pytest.importorskip("sqlglot")

SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])

AGGS = st.sampled_from([
    "COUNT(*) FILTER (WHERE x > 0) AS a, COUNT(*) AS n, SUM(y) FILTER (WHERE s IS NOT NULL) AS b",
    "MAX(x) FILTER (WHERE y < 10) AS a, MIN(s) FILTER (WHERE k = 2) AS b, AVG(y) FILTER (WHERE x < 0) AS c",
    "COUNT(x) FILTER (WHERE y BETWEEN -10 AND 10) AS a, SUM(x) AS b",
    "COUNT(DISTINCT s) FILTER (WHERE y > 0) AS a",
])


def run(rows, fastops_sql, duck_sql, mode, batch_size=7):
    t = make_table(rows)
    t_env = fo.TableEnvironment(mode=mode, batch_size=batch_size)
    t_env.create_temporary_view("t", t_env.from_arrow(t))
    assert_same_rows(t_env.sql_query(fastops_sql).to_arrow(), duck(duck_sql, {"t": t}), fastops_sql)


@SETTINGS
@given(rows=ROWS, aggs=AGGS, mode=st.sampled_from(["batch", "streaming"]), keyed=st.booleans())
def test_group_by_filter(rows, aggs, mode, keyed):
    q = f"SELECT {'k, ' if keyed else ''}{aggs} FROM t" + (" GROUP BY k" if keyed else "")
    if not keyed and not rows:
        return  # an empty table: fastops' global aggregate emits no row
    run(rows, q, q, mode)


@SETTINGS
@given(rows=ROWS, aggs=AGGS, mode=st.sampled_from(["batch", "streaming"]))
def test_window_filter(rows, aggs, mode):
    q = (f"SELECT window_start, k, {aggs} FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '10' SECOND)) "
         "GROUP BY window_start, window_end, k")
    d = f"SELECT epoch_ms(tms // 10000 * 10000) AS window_start, k, {aggs} FROM t GROUP BY 1, k"
    run(rows, q, d, mode)


def test_filter_without_group_by():
    t_env = fo.TableEnvironment(mode="batch")
    t_env.create_temporary_view("t", t_env.from_elements([(1, 2)], ["a", "b"]))
    assert t_env.execute_sql("SELECT COUNT(*) FILTER (WHERE a > 1) AS c, COUNT(*) FILTER (WHERE a = 1) AS d "
                             "FROM t").to_arrow().to_pylist() == [{"c": 0, "d": 1}]


MIXED = st.sampled_from([
    "COUNT(*) AS n, COUNT(*) FILTER (WHERE x < 0) AS r1, COUNT(DISTINCT s) AS ds, "
    "COUNT(DISTINCT s) FILTER (WHERE x < 0) AS ds1, COUNT(DISTINCT y) AS dy",
    "SUM(y) AS sy, AVG(x) AS ax, MIN(s) AS ms, COUNT(DISTINCT k) AS dk, SUM(DISTINCT y) AS sdy",
    "MAX(x) FILTER (WHERE y > 0) AS mx, COUNT(DISTINCT s) AS ds, AVG(DISTINCT y) AS ady, COUNT(x) AS cx",
])


@SETTINGS
@given(rows=ROWS, aggs=MIXED, mode=st.sampled_from(["batch", "streaming"]),
       key=st.sampled_from(["k", "y % 3", "UPPER(s)"]))
def test_several_distinct_arguments(rows, aggs, mode, key):
    """Nexmark q15 / q16's shape: DISTINCT aggregates over different arguments and
    filters beside plain ones, grouped by a column or an expression."""
    q = f"SELECT {key} AS g, {aggs} FROM t GROUP BY {key}"
    run(rows, q, q, mode)


@SETTINGS
@given(rows=ROWS, mode=st.sampled_from(["batch", "streaming"]), batch_size=st.integers(1, 9))
def test_several_distinct_arguments_over_an_updating_table(rows, mode, batch_size):
    """The same over a GROUP BY's changelog (streaming: its updates retract)."""
    q = ("SELECT k % 2 AS g, COUNT(DISTINCT n) AS dn, COUNT(DISTINCT s) AS ds, SUM(n) AS sn, MAX(s) AS ms "
         "FROM (SELECT k, s, COUNT(*) AS n FROM t GROUP BY k, s) GROUP BY k % 2")
    run(rows, q, q, mode, batch_size)
