"""Names of unnamed Table API columns, as PyFlink gives them.

Flink's rules (flink-table-api-java):
- ``OperationExpressionsUtils.extractAggregationsAndProperties``: every
  aggregate call and window property of a select list is named ``EXPR$<k>``,
  ``k`` counting them (aliased or inside other expressions too, the same call
  twice once) from 0 in the order they appear; an aggregate that is a select
  item of its own keeps that name, and its second use is ``EXPR$<k>_<n>``.
  Flink's plan text shows it: ``select('c.upper.count, 'a.sum)`` in a window
  is ``COUNT($f5) AS EXPR$0, SUM(a) AS EXPR$1``.
- ``ProjectionOperationFactory``: any other unnamed expression is ``_c<i>``,
  ``i`` its position (from 0) in the projection, ``*`` expanded (so
  ``add_columns`` counts the table's columns first); a ``CAST`` of a named
  expression is ``<name>-<TYPE>``.
SQL names unnamed select items by position (Calcite's ``EXPR$<i>``), which
stays as it is. Values are checked against pandas."""
from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest

import fastops as fo
from fastops.table import DataTypes, Tumble, col, lit

ROWS = [("a", 1, 10.0), ("b", 2, 20.0), ("a", 3, 30.0), ("c", 4, 5.0)]
DF = pd.DataFrame(ROWS, columns=["k", "n", "v"])


@pytest.fixture(params=["batch", "streaming"])
def t(request):
    t_env = fo.TableEnvironment(mode=request.param)
    return t_env.from_elements(ROWS, ["k", "n", "v"])


def _frame(table: fo.Table) -> pd.DataFrame:
    return table.execute().to_pandas()


def test_unnamed_projections_are_c_and_their_position(t):
    got = _frame(t.select(col("n") + 1, col("k"), col("v") * 2, lit(7)))
    assert list(got.columns) == ["_c0", "k", "_c2", "_c3"]
    assert got["_c0"].tolist() == (DF.n + 1).tolist()
    assert got["_c2"].tolist() == (DF.v * 2).tolist()
    assert got["_c3"].tolist() == [7] * len(DF)


def test_star_counts_towards_the_position(t):
    assert t.select("*", col("n") * 10).get_schema().names == ["k", "n", "v", "_c3"]
    got = _frame(t.add_columns(col("n") * 10))
    assert list(got.columns) == ["k", "n", "v", "_c3"]
    assert got["_c3"].tolist() == (DF.n * 10).tolist()


def test_cast_of_a_column_is_named_after_it(t):
    got = _frame(t.select(col("n").cast(DataTypes.DOUBLE()), (col("n") + 1).cast(DataTypes.STRING())))
    assert list(got.columns) == ["n-DOUBLE", "_c1"]
    assert got["n-DOUBLE"].tolist() == DF.n.astype(float).tolist()


def _by_key(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values("k").reset_index(drop=True)


def test_aggregates_are_expr_numbered_among_the_aggregates(t):
    got = _by_key(_frame(t.group_by(col("k")).select(col("k"), col("v").sum, col("n").max)))
    assert list(got.columns) == ["k", "EXPR$0", "EXPR$1"]
    ref = DF.groupby("k").agg(s=("v", "sum"), m=("n", "max")).reset_index()
    assert got["EXPR$0"].tolist() == ref.s.tolist() and got["EXPR$1"].tolist() == ref.m.tolist()


def test_an_aliased_aggregate_takes_its_number_too(t):
    got = _frame(t.group_by(col("k")).select(col("k"), col("v").sum.alias("total"), col("n").count))
    assert list(got.columns) == ["k", "total", "EXPR$1"]


def test_an_expression_over_an_aggregate_is_a_projection(t):
    got = _by_key(_frame(t.group_by(col("k")).select(col("k"), col("v").sum + 1, col("n").count)))
    assert list(got.columns) == ["k", "_c1", "EXPR$1"]
    ref = DF.groupby("k").agg(s=("v", "sum"), c=("n", "count")).reset_index()
    assert got["_c1"].tolist() == (ref.s + 1).tolist() and got["EXPR$1"].tolist() == ref.c.tolist()


def test_the_same_aggregate_twice(t):
    got = _frame(t.select(col("v").sum, col("v").sum, col("n").min))
    assert list(got.columns) == ["EXPR$0", "EXPR$0_0", "EXPR$1"]
    assert got.iloc[0].tolist() == [DF.v.sum(), DF.v.sum(), DF.n.min()]


def test_window_properties_are_numbered_with_the_aggregates():
    t_env = fo.TableEnvironment(mode="streaming")
    base = dt.datetime(2024, 1, 1)
    rows = [(k, n, base + dt.timedelta(seconds=s)) for k, n, s in [("a", 1, 0), ("a", 2, 3), ("b", 5, 12)]]
    t = t_env.from_elements(rows, ["k", "n", "ts"], rowtime="ts", watermark="0s")
    w = t.window(Tumble.over("10 s").on(col("ts")).alias("w")).group_by(col("w"), col("k"))
    got = _frame(w.select(col("k"), col("w").start, col("n").sum)).sort_values("k")
    assert list(got.columns) == ["k", "EXPR$0", "EXPR$1"]
    assert got["EXPR$1"].tolist() == [3, 5]
    assert [ts.to_pydatetime() for ts in got["EXPR$0"]] == [base, base + dt.timedelta(seconds=10)]


def test_sql_keeps_calcites_positional_names():
    t_env = fo.TableEnvironment(mode="batch")
    t_env.create_temporary_view("t", t_env.from_elements(ROWS, ["k", "n", "v"]))
    got = t_env.sql_query("SELECT k, SUM(v), n + 1 FROM t GROUP BY k, n")
    assert got.get_schema().names == ["k", "EXPR$1", "EXPR$2"]
