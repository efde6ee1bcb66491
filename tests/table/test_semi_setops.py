"""IN / EXISTS / NOT IN / NOT EXISTS subqueries (semi and anti joins),
INTERSECT / EXCEPT [ALL] and VALUES.

- Random tables cut into random batches, streaming and batch, parallelism 1
  and 2: the rows equal DuckDB's (NOT IN with nulls on either side included);
  the streaming changelog is valid (every ``-D`` retracts a row emitted
  before) and insert-only where Flink's is (semi joins, INTERSECT).
- Set operations over updating inputs (GROUP BY results) count retractions.
- Flink's set-operations page: its views (``CREATE VIEW t1(s) AS VALUES ...``)
  and documented results.
"""
from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastops as fo
from fastops.core.partitioning import KeyGroups
from fastops.table import col
from fastops.table.expressions import Call, Col
from fastops.table.setops import SemiJoinOperator, SetOpOperator
from fastops.table.sql import SqlError
from support.sql_diff import CUTS, ROWS, applied, assert_same_rows, changelog_of, chunked, duck, make_table

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _env(mode: str, tables: dict, parallelism: int = 1) -> fo.TableEnvironment:
    t_env = fo.TableEnvironment(mode=mode, parallelism=parallelism)
    for name, t in tables.items():
        t_env.create_temporary_view(name, t_env.from_arrow(t))
    return t_env


def _valid(result) -> Counter:
    return applied(changelog_of(result))


SUBQUERIES = [
    # (the WHERE condition, insert-only in streaming mode)
    ("k IN (SELECT k FROM u)", True),
    ("k IN (SELECT k FROM u WHERE u.x > 0)", True),
    ("y % 3 IN (SELECT y % 3 FROM u)", True),
    ("(k, s) IN (SELECT k, s FROM u)", True),
    ("k IN (SELECT u.k FROM u WHERE u.s = t.s)", True),
    ("EXISTS (SELECT * FROM u WHERE u.k = t.k)", True),
    ("EXISTS (SELECT 1 FROM u WHERE u.k = t.k AND u.y > t.y)", True),
    ("EXISTS (SELECT 1 FROM u WHERE u.y > t.y + 40)", True),
    ("EXISTS (SELECT 1 FROM u WHERE u.x > 50)", True),
    ("k NOT IN (SELECT k FROM u)", False),
    ("s NOT IN (SELECT s FROM u WHERE u.y > 0)", False),
    ("k NOT IN (SELECT u.k FROM u WHERE u.s = t.s)", False),
    ("y % 3 NOT IN (SELECT u.y FROM u WHERE u.x > t.x)", False),
    ("(k, s) NOT IN (SELECT k, s FROM u)", False),
    ("NOT EXISTS (SELECT * FROM u WHERE u.k = t.k)", False),
    ("NOT EXISTS (SELECT * FROM u WHERE u.k = t.k AND u.s <> t.s)", False),
    ("NOT EXISTS (SELECT 1 FROM u WHERE u.y < t.y - 45)", False),
    ("x > 0 AND k IN (SELECT k FROM u) AND NOT EXISTS (SELECT 1 FROM u WHERE u.s = t.s AND u.y = t.y)", False),
]


@SETTINGS
@given(left=ROWS, right=ROWS, cuts=CUTS, sub=st.sampled_from(SUBQUERIES), mode=st.sampled_from(["batch",
       "streaming"]), parallelism=st.sampled_from([1, 2]))
def test_subqueries_match_duckdb(left, right, cuts, sub, mode, parallelism):
    t, u = make_table(left), make_table(right)
    q = f"SELECT id, k, s FROM t WHERE {sub[0]}"
    res = _env(mode, {"t": chunked(t, cuts), "u": chunked(u, cuts[::-1])}, parallelism).execute_sql(q)
    if mode == "streaming":
        _valid(res)
        if sub[1]:
            assert {r.get_row_kind() for r in res.collect()} <= {"+I"}
    assert_same_rows(res.to_arrow(), duck(q, {"t": t, "u": u}), q)


SET_OPS = ["INTERSECT", "INTERSECT ALL", "EXCEPT", "EXCEPT ALL"]
COLUMNS = ["k", "s", "k, s", "y % 3 AS m, s"]


@SETTINGS
@given(left=ROWS, right=ROWS, cuts=CUTS, op=st.sampled_from(SET_OPS), cols=st.sampled_from(COLUMNS),
       mode=st.sampled_from(["batch", "streaming"]), parallelism=st.sampled_from([1, 2]))
def test_set_operations_match_duckdb(left, right, cuts, op, cols, mode, parallelism):
    t, u = make_table(left), make_table(right)
    q = f"SELECT {cols} FROM t {op} SELECT {cols} FROM u"
    res = _env(mode, {"t": chunked(t, cuts), "u": u}, parallelism).execute_sql(q)
    if mode == "streaming":
        _valid(res)
        if op.startswith("INTERSECT"):
            assert {r.get_row_kind() for r in res.collect()} <= {"+I"}
    assert_same_rows(res.to_arrow(), duck(q, {"t": t, "u": u}), q)


@SETTINGS
@given(left=ROWS, right=ROWS, op=st.sampled_from(SET_OPS + ["IN", "NOT IN"]), mode=st.sampled_from(["batch",
       "streaming"]))
def test_updating_inputs(left, right, op, mode):
    """Over GROUP BY results: a streaming set operation counts retractions; a
    subquery join of updating inputs joins their final rows."""
    t, u = make_table(left), make_table(right)
    g = "SELECT k, COUNT(*) AS c FROM {} GROUP BY k"
    if op in ("IN", "NOT IN"):
        q = f"SELECT k, c FROM ({g.format('t')}) WHERE c {op} (SELECT c FROM ({g.format('u')}))"
    else:
        q = f"{g.format('t')} {op} {g.format('u')}"
    res = fo.TableEnvironment(mode=mode, batch_size=3)
    res.create_temporary_view("t", res.from_arrow(t))
    res.create_temporary_view("u", res.from_arrow(u))
    out = res.execute_sql(q)
    if mode == "streaming":
        _valid(out)
    assert_same_rows(out.to_arrow(), duck(q, {"t": t, "u": u}), q)


@pytest.mark.parametrize("mode", ["batch", "streaming"])
def test_flink_docs_set_operations(mode):
    t_env = fo.TableEnvironment(mode=mode)
    t_env.execute_sql("create view t1(s) as values ('c'), ('a'), ('b'), ('b'), ('c')")
    t_env.execute_sql("create view t2(s) as values ('d'), ('e'), ('a'), ('b'), ('b')")
    documented = {
        "(SELECT s FROM t1) UNION (SELECT s FROM t2)": ["c", "a", "b", "d", "e"],
        "(SELECT s FROM t1) UNION ALL (SELECT s FROM t2)": ["c", "a", "b", "b", "c", "d", "e", "a", "b", "b"],
        "(SELECT s FROM t1) INTERSECT (SELECT s FROM t2)": ["a", "b"],
        "(SELECT s FROM t1) INTERSECT ALL (SELECT s FROM t2)": ["a", "b", "b"],
        "(SELECT s FROM t1) EXCEPT (SELECT s FROM t2)": ["c"],
        "(SELECT s FROM t1) EXCEPT ALL (SELECT s FROM t2)": ["c", "c"],
    }
    for q, rows in documented.items():
        got = t_env.execute_sql(q).to_arrow()
        assert got.schema.names == ["s"]
        assert sorted(got.column("s").to_pylist()) == sorted(rows), q


def test_flink_docs_in_subquery():
    t_env = fo.TableEnvironment(mode="streaming")
    t_env.create_temporary_view("Orders", t_env.from_elements(
        [("ann", "tea", 3), ("bob", "cake", 5), ("cid", "tea", 1), ("dan", "pie", 2)], ["user", "product", "amount"]))
    t_env.create_temporary_view("NewProducts", t_env.from_elements([("tea",), ("pie",)], ["product"]))
    got = t_env.execute_sql("SELECT user, amount FROM Orders WHERE product IN (SELECT product FROM NewProducts)")
    assert sorted(tuple(r) for r in got.collect()) == [("ann", 3), ("cid", 1), ("dan", 2)]


def test_not_in_follows_three_valued_logic():
    t_env = fo.TableEnvironment(mode="streaming", batch_size=1)
    t_env.create_temporary_view("t", t_env.from_elements([(1,), (None,), (2,)], [("v", "BIGINT")]))
    t_env.create_temporary_view("empty", t_env.from_elements([], [("w", "BIGINT")]))
    t_env.create_temporary_view("some", t_env.from_elements([(2,)], [("w", "BIGINT")]))
    t_env.create_temporary_view("nulls", t_env.from_elements([(2,), (None,)], [("w", "BIGINT")]))
    rows = lambda sub: sorted(t_env.sql_query(f"SELECT v FROM t WHERE v NOT IN (SELECT w FROM {sub})").to_arrow()
                              .column("v").to_pylist(), key=str)
    assert rows("empty") == [1, 2, None]  # nothing to differ from: every row, NULL too
    assert rows("some") == [1]  # NULL NOT IN (2) is unknown
    assert rows("nulls") == []  # v NOT IN (2, NULL) is never true


# ---------------------------------------------------------------- VALUES

def test_values_in_from_and_as_a_query():
    t_env = fo.TableEnvironment(mode="batch")
    got = t_env.sql_query("SELECT x + 1 AS x1, y FROM (VALUES (1, 'a'), (-2, 'bb'), (3, NULL)) AS v(x, y)")
    assert got.to_arrow().to_pylist() == [{"x1": 2, "y": "a"}, {"x1": -1, "y": "bb"}, {"x1": 4, "y": None}]
    got = t_env.sql_query("VALUES (1, 2.5), (2, 3)").to_arrow()
    assert got.schema.names == ["EXPR$0", "EXPR$1"] and got.column(1).to_pylist() == [2.5, 3.0]
    got = t_env.sql_query("SELECT * FROM (VALUES (CAST(NULL AS STRING)), ('z')) AS v(s)").to_arrow()
    assert got.column("s").to_pylist() == [None, "z"]


def test_insert_values(tmp_path):
    t_env = fo.TableEnvironment(mode="batch")
    t_env.execute_sql(f"CREATE TABLE sink (id BIGINT, amount DOUBLE) WITH ('connector' = 'filesystem', "
                      f"'path' = '{tmp_path}', 'format' = 'parquet')")
    t_env.execute_sql("INSERT INTO sink VALUES (1, 2.0), (2, 0.5)")
    got = t_env.sql_query("SELECT * FROM sink ORDER BY id").to_arrow()
    assert got.to_pylist() == [{"id": 1, "amount": 2.0}, {"id": 2, "amount": 0.5}]


@pytest.mark.parametrize("sql, words", [
    ("SELECT * FROM (VALUES (1, 2), (3)) AS v(a, b)", "VALUES rows have"),
    ("SELECT * FROM (VALUES (NULL), (NULL)) AS v(a)", "holds only NULL"),
    ("SELECT * FROM (VALUES (1, 'a')) AS v(a)", "its alias names 1"),
    ("SELECT * FROM (VALUES (1), ('a')) AS v(a)", "no common type"),
    ("SELECT id FROM t WHERE id IN (SELECT id, v FROM t)", "compares 1 value"),
    ("SELECT id FROM t WHERE id = 1 OR id IN (SELECT id FROM t)", "IN (subquery) inside an expression"),
    ("SELECT id, EXISTS (SELECT 1 FROM t) AS e FROM t", "EXISTS (subquery) inside an expression"),
    ("SELECT id FROM t WHERE id IN (SELECT MAX(u.id) FROM t AS u WHERE u.v = t.v)", "must be a plain SELECT"),
    ("SELECT id FROM t WHERE EXISTS (SELECT 1 FROM t AS u WHERE u.id IN (SELECT id FROM t))",
     "a subquery inside an IN / EXISTS subquery"),
    ("SELECT id FROM t INTERSECT SELECT id, v FROM t", "INTERSECT of 1 and 2 columns"),
    ("SELECT id FROM t EXCEPT SELECT v FROM t", "no common type"),
])
def test_refusals_say_why(sql, words):
    t_env = fo.TableEnvironment(mode="streaming")
    t_env.create_temporary_view("t", t_env.from_elements([(1, "a")], ["id", "v"]))
    with pytest.raises((SqlError, fo.table.PlanError), match=re.escape(words)):
        t_env.sql_query(sql).execute()


def test_explain_names_the_joins():
    t_env = fo.TableEnvironment(mode="streaming")
    t_env.create_temporary_view("t", t_env.from_elements([(1, "a")], ["id", "v"]))
    text = t_env.sql_query("SELECT id FROM t WHERE id IN (SELECT id FROM t) AND NOT EXISTS "
                           "(SELECT 1 FROM t AS u WHERE u.v = t.v AND u.id > t.id)").explain()
    assert "LeftSemiJoin" in text and "LeftAntiJoin" in text
    assert "NullAwareAntiJoin" in t_env.sql_query("SELECT id FROM t WHERE id NOT IN (SELECT id FROM t)").explain()
    assert "Intersect(all=[true])" in t_env.sql_query("SELECT id FROM t INTERSECT ALL SELECT id FROM t").explain()
    assert pa is not None


# ---------------------------------------------------------------- the Table API

@SETTINGS
@given(left=ROWS, right=ROWS, mode=st.sampled_from(["batch", "streaming"]))
def test_table_api_set_operations_and_in(left, right, mode):
    t_env = _env(mode, {"t": make_table(left), "u": make_table(right)})
    t, u = t_env.from_path("t"), t_env.from_path("u")
    a, b = t.select(col("k"), col("s")), u.select(col("k"), col("s"))
    for method, op in (("intersect", "INTERSECT"), ("intersect_all", "INTERSECT ALL"), ("minus", "EXCEPT"),
                       ("minus_all", "EXCEPT ALL")):
        q = f"SELECT k, s FROM t {op} SELECT k, s FROM u"
        assert_same_rows(getattr(a, method)(b).to_arrow(), t_env.sql_query(q).to_arrow(), method)
    got = t.where(col("k").in_(u.select(col("k"))) & (col("y") > 0)).select(col("id")).to_arrow()
    want = t_env.sql_query("SELECT id FROM t WHERE k IN (SELECT k FROM u) AND y > 0").to_arrow()
    assert_same_rows(got, want, "in_")
    got = t.where(~(col("y") % 3).in_(u.select(col("y") % 3))).select(col("id")).to_arrow()
    want = t_env.sql_query("SELECT id FROM t WHERE y % 3 NOT IN (SELECT y % 3 FROM u)").to_arrow()
    assert_same_rows(got, want, "not in_")


# ---------------------------------------------------------------- operator state

def _feed(op, events):
    out = []
    for side, batch in events:
        for b in op.process_input(side, batch):
            out += [(r.pop("__op", 0), tuple(r.values())) for r in b.to_pylist()]
    return out


def _restored(make, events, cut, split_keys):
    """The output of ``events`` with a snapshot / restore after ``cut`` of them (and
    at parallelism 2, each task restoring its key groups), as the uninterrupted run's."""
    whole = _feed(make(), events)
    first = make()
    head = _feed(first, events[:cut])
    state = first.snapshot()
    second = make()
    second.restore(state)
    assert head + _feed(second, events[cut:]) == whole
    split = []
    for part in range(2):
        groups = KeyGroups(np.arange(128) % 2 == part)
        op = make()
        op.restore_groups([state], groups)
        mine = [(s, b.filter(pa.array(groups.mask(b, split_keys[s])))) for s, b in events[cut:]]
        split += _feed(op, mine)
    assert sorted(head + split, key=str) == sorted(whole, key=str)


@settings(max_examples=30, deadline=None)
@given(sides=st.lists(st.tuples(st.integers(0, 1), st.integers(0, 3)), max_size=20), cut=st.integers(0, 20),
       kind=st.sampled_from(["intersect", "except"]), keep_all=st.booleans())
def test_set_operation_state_survives_restore(sides, cut, kind, keep_all):
    schema = pa.schema([("k", pa.int64())])
    events = [(s, pa.record_batch([pa.array([k], pa.int64())], schema=schema)) for s, k in sides]
    _restored(lambda: SetOpOperator(kind, keep_all, schema, True, True), events, min(cut, len(events)),
              (["k"], ["k"]))


@settings(max_examples=30, deadline=None)
@given(sides=st.lists(st.tuples(st.integers(0, 1), st.integers(0, 3), st.integers(0, 9)), max_size=20),
       cut=st.integers(0, 20), anti=st.booleans(), with_condition=st.booleans())
def test_semi_join_state_survives_restore(sides, cut, anti, with_condition):
    ls = pa.schema([("k", pa.int64()), ("v", pa.int64())])
    rs = pa.schema([("k2", pa.int64()), ("w", pa.int64())])
    cond = Call("greater", [Col("w"), Col("v")]) if with_condition else None
    events = [(s, pa.record_batch([pa.array([k], pa.int64()), pa.array([v], pa.int64())], schema=(ls, rs)[s]))
              for s, k, v in sides]
    _restored(lambda: SemiJoinOperator(["k"], ["k2"], anti, False, ls, rs, cond, True, True), events,
              min(cut, len(events)), (["k"], ["k2"]))
