"""Comma (implicit) joins: ``FROM a, b WHERE a.k = b.k AND ...``, the WHERE's
conditions between the two sides being the join's, against DuckDB on random
tables and batch splits (streaming and batch)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastops.table import TableEnvironment
from fastops.table.plan import SqlError
from support.sql_diff import CUTS, ROWS, assert_same_rows, chunked, duck, make_table

QUERIES = [
    "SELECT a.id AS ai, b.id AS bi, a.s FROM a, b WHERE a.k = b.k",
    "SELECT a.id AS ai, b.id AS bi FROM a, b WHERE a.k = b.k AND a.y < b.y AND a.s IS NOT NULL",
    "SELECT a.id, b.y FROM a, b WHERE (a.k = b.k AND a.x > 0) AND b.tms BETWEEN a.tms AND a.tms + 5000",
    "SELECT a.k, COUNT(*) AS n, MAX(b.y) AS m FROM a, b WHERE a.k = b.k GROUP BY a.k",
    "SELECT a.id AS ai, b.id AS bi, c.id AS ci FROM a, b, a AS c WHERE a.k = b.k AND b.s = c.s AND c.y > 0",
]


@settings(max_examples=25, deadline=None)
@given(ra=ROWS, rb=ROWS, ca=CUTS, cb=CUTS, q=st.sampled_from(QUERIES), mode=st.sampled_from(["streaming", "batch"]))
def test_comma_join_matches_duckdb(ra, rb, ca, cb, q, mode):
    a, b = make_table(ra), make_table(rb)
    env = TableEnvironment(mode=mode, batch_size=7)
    env.create_temporary_view("a", env.from_arrow(chunked(a, ca)))
    env.create_temporary_view("b", env.from_arrow(chunked(b, cb)))
    got = env.sql_query(q).to_arrow()
    assert_same_rows(got, duck(q, {"a": a, "b": b}), q)


def test_comma_join_without_a_condition_between_the_sides_is_refused():
    env = TableEnvironment(mode="batch")
    t = make_table([(1, "a", 1.0, 1, 0)])
    env.create_temporary_view("a", env.from_arrow(t))
    env.create_temporary_view("b", env.from_arrow(t))
    with pytest.raises(SqlError, match="a join without ON"):
        env.sql_query("SELECT a.id FROM a, b WHERE a.k = 1")
