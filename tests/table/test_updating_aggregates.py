"""GROUP BY over an updating (changelog) table in streaming mode: aggregates
that take retractions (COUNT, SUM, AVG, MIN / MAX with their multiset of
values, STDDEV / VAR), COUNT DISTINCT, DISTINCT and HAVING over updating
inputs, and aggregation of Top-N, EXCEPT and outer join results.

- Random tables cut into random batches, parallelism 1 and 2: the streaming
  changelog is valid (every ``-U`` / ``-D`` retracts a row emitted before and
  still held) and its final rows equal DuckDB's answer; batch mode gives the
  same rows.
- The shape of Nexmark q4 (an AVG of per-auction MAX, per category).
- The operator's state survives a snapshot and restore at any cut, also split
  over key groups.
"""
from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastops as fo
from fastops.table.changelog import OP_COLUMN
from fastops.table.plan import PlanError
from fastops.table.retract import RetractAggregate
from support.restore import assert_restores_at
from support.sql_diff import CUTS, ROW, applied, assert_same_rows, changelog_of, chunked, duck, make_table, rows_of

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ROWS = st.lists(ROW, min_size=1, max_size=40)


def _env(mode: str, tables: dict, parallelism: int = 1) -> fo.TableEnvironment:
    t_env = fo.TableEnvironment(mode=mode, parallelism=parallelism)
    for name, t in tables.items():
        t_env.create_temporary_view(name, t_env.from_arrow(t))
    return t_env


def _valid(result) -> list[tuple]:
    return list(applied(changelog_of(result)).elements())


INNER = "(SELECT k, s, MAX(y) AS m, COUNT(*) AS c, SUM(x) AS sx FROM t GROUP BY k, s)"
QUERIES = [
    # Nexmark q4's shape: per category, the average of the per-auction maximum
    f"SELECT k, AVG(m) AS a, MIN(m) AS lo, MAX(m) AS hi, COUNT(*) AS n, SUM(m) AS sm FROM {INNER} GROUP BY k",
    f"SELECT c, MIN(s) AS lo, MAX(s) AS hi, COUNT(s) AS ns, COUNT(*) AS n FROM {INNER} GROUP BY c",
    f"SELECT c, SUM(sx) AS s1, AVG(sx) AS a1, MAX(sx) AS hi, STDDEV_POP(m) AS sd, VAR_SAMP(m) AS v "
    f"FROM {INNER} GROUP BY c",
    f"SELECT k, c, COUNT(*) AS n FROM {INNER} GROUP BY k, c HAVING COUNT(*) > 1",
    f"SELECT c, COUNT(DISTINCT k) AS dk FROM {INNER} GROUP BY c",
    f"SELECT DISTINCT c FROM {INNER}",
    f"SELECT c % 2 AS p, MAX(m) - MIN(m) AS r FROM {INNER} GROUP BY c % 2",
    # a Top-N (ROW_NUMBER) and an EXCEPT are changelogs too
    "SELECT k, COUNT(*) AS n, MAX(y) AS hi, SUM(y) AS sy FROM (SELECT * FROM (SELECT k, y, ROW_NUMBER() "
    "OVER (PARTITION BY k ORDER BY y DESC) AS rn FROM t) WHERE rn <= 2) GROUP BY k",
    "SELECT k, COUNT(*) AS n, MIN(s) AS lo FROM (SELECT k, s FROM t EXCEPT SELECT k, s FROM u) GROUP BY k",
    # a streaming outer join's changelog (+I with NULLs, retracted by -D when a match arrives)
    "SELECT t.k, COUNT(*) AS n, COUNT(u.y) AS ny, MAX(u.y) AS hi, SUM(t.y) AS sy FROM t LEFT JOIN u "
    "ON t.k = u.k GROUP BY t.k",
    "SELECT u.s, COUNT(t.id) AS n, MIN(t.s) AS lo FROM t FULL JOIN u ON t.k = u.k AND t.s = u.s GROUP BY u.s",
]


@SETTINGS
@given(left=ROWS, right=ROWS, cuts=CUTS, q=st.sampled_from(QUERIES), parallelism=st.sampled_from([1, 2]))
def test_updating_aggregates_match_duckdb(left, right, cuts, q, parallelism):
    t, u = make_table(left), make_table(right)
    want = duck(q, {"t": t, "u": u})
    res = _env("streaming", {"t": chunked(t, cuts), "u": chunked(u, cuts[::-1])}, parallelism).execute_sql(q)
    final = _valid(res)
    assert_same_rows(pa.Table.from_pylist([dict(zip(want.schema.names, r)) for r in final], schema=want.schema)
                     if final else want.slice(0, 0), want, q)
    batch = _env("batch", {"t": t, "u": u}).execute_sql(q)
    assert_same_rows(batch.to_arrow(), want, q)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=ROWS, cuts=CUTS)
def test_global_aggregate_of_updating_table(rows, cuts):
    """No GROUP BY keys: one row, updated as the input changes."""
    t = make_table(rows)
    q = f"SELECT COUNT(*) AS n, SUM(c) AS sc, MAX(m) AS hi, MIN(s) AS lo FROM {INNER}"
    res = _env("streaming", {"t": chunked(t, cuts)}).execute_sql(q)
    final = _valid(res)
    assert rows_of(pa.Table.from_pylist([dict(zip(["n", "sc", "hi", "lo"], r)) for r in final])) == \
        rows_of(duck(q, {"t": t}))


def test_nexmark_q4_shape():
    """Nexmark q4: AVG over the final price (MAX of bids) of each auction, per category."""
    bid = pa.table({"auction": [1, 1, 2, 3, 2, 3, 4, 1], "price": [10, 30, 5, 7, 9, 2, 100, 20]})
    auction = pa.table({"id": [1, 2, 3, 4], "category": [10, 10, 11, 11]})
    q = ("SELECT Q.category, AVG(Q.final) AS a FROM (SELECT MAX(B.price) AS final, A.category FROM auction A, "
         "bid B WHERE A.id = B.auction GROUP BY A.id, A.category) Q GROUP BY Q.category")
    q = q.replace("FROM auction A, bid B WHERE A.id = B.auction", "FROM auction A JOIN bid B ON A.id = B.auction")
    t_env = fo.TableEnvironment(mode="streaming", batch_size=2)
    t_env.create_temporary_view("bid", t_env.from_arrow(bid))
    t_env.create_temporary_view("auction", t_env.from_arrow(auction))
    res = t_env.execute_sql(q)
    kinds = {r.get_row_kind() for r in res.collect()}
    assert kinds <= {"+I", "-U", "+U"} and "-U" in kinds
    assert sorted(_valid(res)) == [(10, 19.5), (11, 53.5)]


def test_unsupported_aggregate_over_updating_table():
    t_env = _env("streaming", {"t": make_table([(1, "a", 1.0, 1, 0)])})
    with pytest.raises(PlanError, match="APPROX_COUNT_DISTINCT.*updating"):
        t_env.execute_sql(f"SELECT k, APPROX_COUNT_DISTINCT(m) FROM {INNER} GROUP BY k")


# ---------------------------------------------------------------- operator state

SCHEMA = pa.schema([("k", pa.int64()), ("s", pa.string()), ("y", pa.int64())])
SPECS = [("n", "count", None, None), ("ny", "count", "y", pa.int64()), ("sy", "sum", "y", pa.int64()),
         ("ay", "avg", "y", pa.int64()), ("lo", "min", "s", pa.string()), ("hi", "max", "y", pa.int64())]
OUT = pa.schema([("k", pa.int64()), ("n", pa.int64()), ("ny", pa.int64()), ("sy", pa.int64()),
                 ("ay", pa.float64()), ("lo", pa.string()), ("hi", pa.int64())])


def _changelog(draw_rows: list, sizes: list) -> list[pa.RecordBatch]:
    """Batches of a valid changelog: inserts, and deletes of rows inserted before."""
    held: list = []
    rows, ops = [], []
    for i, (k, s, y, delete) in enumerate(draw_rows):
        if delete and held:
            rows.append(held.pop(i % len(held)))
            ops.append(3)
        else:
            held.append((k, s, y))
            rows.append((k, s, y))
            ops.append(0)
    out, at = [], 0
    for n in sizes + [len(rows)]:
        part = list(zip(rows[at:at + n], ops[at:at + n]))
        at += n
        if part:
            cols = list(zip(*[r for r, _ in part]))
            out.append(pa.RecordBatch.from_arrays(
                [pa.array(cols[0], pa.int64()), pa.array(cols[1], pa.string()), pa.array(cols[2], pa.int64()),
                 pa.array([o for _, o in part], pa.int8())], names=SCHEMA.names + [OP_COLUMN]))
    return out


@settings(max_examples=30, deadline=None)
@given(rows=st.lists(st.tuples(st.one_of(st.none(), st.integers(0, 3)), st.sampled_from([None, "a", "b", "c"]),
                               st.one_of(st.none(), st.integers(-5, 5)), st.booleans()), max_size=40),
       sizes=st.lists(st.integers(1, 6), max_size=10), cut=st.integers(0, 12))
def test_state_survives_restore(rows, sizes, cut):
    batches = _changelog(rows, sizes)
    cut = min(cut, len(batches))
    make = lambda: RetractAggregate(["k"], SPECS, OUT)
    assert_restores_at(make, batches, cut, ["k"])
