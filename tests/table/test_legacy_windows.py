"""Flink's legacy group windows (GROUP BY TUMBLE / HOP / SESSION with their
``*_START`` / ``*_END`` / ``*_ROWTIME``) and the SESSION window TVF without
aggregation.

- Random tables cut into random batches, batch and streaming, parallelism 1
  and 2: a legacy group window query gives the rows of the window TVF query
  it stands for, and (TUMBLE) DuckDB's with the windows written out.
- SESSION TVF rows: each row with its session's start and end, equal to
  DuckDB's sessions computed with LAG over the partition.
- The SESSION TVF operator emits a session when the watermark passes its
  end, drops late rows, and its state survives a snapshot / restore, also
  split by key group.
"""
from __future__ import annotations

import datetime

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastops as fo
from fastops.core.partitioning import KeyGroups
from fastops.table.session_tvf import SessionAssign
from fastops.table.sql import SqlError
from support.sql_diff import CUTS, ROW, assert_same_rows, chunked, duck, make_table

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ROWS = st.lists(ROW, min_size=0, max_size=30)


def _env(mode: str, t: pa.Table, parallelism: int = 1) -> fo.TableEnvironment:
    t_env = fo.TableEnvironment(mode=mode, parallelism=parallelism)
    t_env.create_temporary_view("t", t_env.from_arrow(t))
    return t_env


PAIRS = [
    # (legacy group window query, the window TVF query it stands for)
    ("SELECT k, TUMBLE_START(ts, INTERVAL '20' SECOND) AS ws, TUMBLE_END(ts, INTERVAL '20' SECOND) AS we, "
     "COUNT(*) AS n, SUM(y) AS sy FROM t GROUP BY TUMBLE(ts, INTERVAL '20' SECOND), k",
     "SELECT k, window_start AS ws, window_end AS we, COUNT(*) AS n, SUM(y) AS sy FROM TABLE(TUMBLE(TABLE t, "
     "DESCRIPTOR(ts), INTERVAL '20' SECOND)) GROUP BY window_start, window_end, k"),
    ("SELECT TUMBLE_ROWTIME(ts, INTERVAL '15' SECOND) AS wr, MAX(x) AS m FROM t WHERE y > 0 "
     "GROUP BY TUMBLE(ts, INTERVAL '15' SECOND)",
     "SELECT window_time AS wr, MAX(x) AS m FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '15' SECOND)) "
     "WHERE y > 0 GROUP BY window_start, window_end, window_time"),
    ("SELECT s, HOP_START(ts, INTERVAL '10' SECOND, INTERVAL '30' SECOND) AS ws, "
     "HOP_END(ts, INTERVAL '10' SECOND, INTERVAL '30' SECOND) AS we, COUNT(*) AS n FROM t "
     "GROUP BY HOP(ts, INTERVAL '10' SECOND, INTERVAL '30' SECOND), s",
     "SELECT s, window_start AS ws, window_end AS we, COUNT(*) AS n FROM TABLE(HOP(TABLE t, DESCRIPTOR(ts), "
     "INTERVAL '10' SECOND, INTERVAL '30' SECOND)) GROUP BY window_start, window_end, s"),
    ("SELECT k, SESSION_START(ts, INTERVAL '5' SECOND) AS ws, SESSION_END(ts, INTERVAL '5' SECOND) AS we, "
     "COUNT(*) AS n, MIN(y) AS lo FROM t GROUP BY k, SESSION(ts, INTERVAL '5' SECOND)",
     "SELECT k, window_start AS ws, window_end AS we, COUNT(*) AS n, MIN(y) AS lo FROM TABLE(SESSION(TABLE t "
     "PARTITION BY k, DESCRIPTOR(ts), INTERVAL '5' SECOND)) GROUP BY window_start, window_end, k"),
]


@SETTINGS
@given(rows=ROWS, cuts=CUTS, pair=st.sampled_from(PAIRS), mode=st.sampled_from(["batch", "streaming"]),
       parallelism=st.sampled_from([1, 2]))
def test_legacy_group_windows_match_window_tvfs(rows, cuts, pair, mode, parallelism):
    t = make_table(rows)
    legacy, tvf = pair
    got = _env(mode, chunked(t, cuts), parallelism).execute_sql(legacy)
    assert {r.get_row_kind() for r in got.collect()} <= {"+I"}
    want = _env("batch", t).execute_sql(tvf).to_arrow()
    assert_same_rows(got.to_arrow().select(want.schema.names), want, legacy)
    if "TUMBLE(ts, INTERVAL '20' SECOND)" in legacy:
        written = ("(SELECT *, epoch_ms(tms // 20000 * 20000) AS window_start, "
                   "epoch_ms(tms // 20000 * 20000 + 20000) AS window_end FROM t)")
        ref = duck(tvf.replace("TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '20' SECOND))", written), {"t": t})
        assert_same_rows(got.to_arrow().select(want.schema.names), ref, legacy)


def test_legacy_names_and_errors():
    t_env = _env("batch", make_table([(1, "a", 1.0, 2, 0), (1, "a", 2.0, 3, 1000)]))
    res = t_env.execute_sql("SELECT TUMBLE_START(ts, INTERVAL '1' MINUTE), COUNT(*) FROM t "
                            "GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE)")
    assert res.to_arrow().schema.names == ["EXPR$0", "EXPR$1"]
    assert [r[1] for r in res.collect()] == [2]
    with pytest.raises(SqlError, match="HOP_START.*TUMBLE"):
        t_env.execute_sql("SELECT HOP_START(ts, INTERVAL '1' MINUTE, INTERVAL '2' MINUTE) FROM t "
                          "GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE)")
    with pytest.raises(SqlError, match="HOP_PROCTIME.*TUMBLE"):
        t_env.execute_sql("SELECT HOP_PROCTIME(ts, INTERVAL '1' MINUTE, INTERVAL '2' MINUTE) FROM t "
                          "GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE)")
    with pytest.raises(SqlError, match="outside GROUP BY TUMBLE"):
        t_env.execute_sql("SELECT TUMBLE_START(ts, INTERVAL '1' MINUTE) FROM t")


# ---------------------------------------------------------------- SESSION TVF as a table

def _duck_sessions(t: pa.Table, gap: int, partition: bool) -> pa.Table:
    part = "PARTITION BY k" if partition else ""
    pk = "k, " if partition else ""
    q = (f"WITH o AS (SELECT *, CASE WHEN tms - LAG(tms) OVER ({part} ORDER BY tms, id) < {gap} THEN 0 ELSE 1 END "
         f"AS new FROM t), s AS (SELECT *, SUM(new) OVER ({part} ORDER BY tms, id ROWS UNBOUNDED PRECEDING) AS sid "
         f"FROM o) SELECT id, k, epoch_ms(MIN(tms) OVER (PARTITION BY {pk}sid)) AS window_start, "
         f"epoch_ms(MAX(tms) OVER (PARTITION BY {pk}sid) + {gap}) AS window_end FROM s")
    return duck(q, {"t": t})


@SETTINGS
@given(rows=ROWS, cuts=CUTS, partition=st.booleans(), mode=st.sampled_from(["batch", "streaming"]),
       parallelism=st.sampled_from([1, 2]))
def test_session_tvf_rows_match_duckdb(rows, cuts, partition, mode, parallelism):
    t = make_table(rows)
    by = " PARTITION BY k" if partition else ""
    q = f"SELECT id, k, window_start, window_end FROM TABLE(SESSION(TABLE t{by}, DESCRIPTOR(ts), INTERVAL '5' SECOND))"
    res = _env(mode, chunked(t, cuts), parallelism).execute_sql(q)
    assert_same_rows(res.to_arrow().select(["id", "k", "window_start", "window_end"]),
                     _duck_sessions(t, 5000, partition), q)


SCHEMA = pa.schema([("k", pa.int64()), ("t", pa.int64())])


def _rows(batches) -> list:
    """(k, t, window_start, window_end, window_time) per row, times in ms."""
    return [tuple(r.values()) for b in batches
            for r in pa.Table.from_batches([b]).cast(pa.schema([(n, pa.int64()) for n in b.schema.names])).to_pylist()]


def _run(op, events) -> list:
    out = []
    for e in events:
        out += _rows(op.on_watermark(e) if isinstance(e, int) else op.process(e))
    return sorted(out)


@settings(max_examples=30, deadline=None)
@given(items=st.lists(st.one_of(st.tuples(st.integers(0, 3), st.integers(0, 100)), st.integers(0, 120)),
                      max_size=25), cut=st.integers(0, 25))
def test_session_operator_watermarks_and_state(items, cut):
    """Sessions close when the watermark reaches their end; late rows are dropped; the
    state survives a snapshot / restore at any cut, also split by key group."""
    events = [x if isinstance(x, int) else
              pa.record_batch([pa.array([x[0]], pa.int64()), pa.array([x[1]], pa.int64())], schema=SCHEMA)
              for x in items]
    make = lambda: SessionAssign("t", 10, ["k"], SCHEMA)
    op = make()
    whole = sorted(_run(op, events) + _rows(op.close()))
    # reference: sessions of the rows not late, each emitted once the watermark reaches its end
    wm, kept = -2**63, []
    for e in events:
        if isinstance(e, int):
            wm = max(wm, e)
        elif e.column(1)[0].as_py() + 10 > wm:
            kept.append((e.column(0)[0].as_py(), e.column(1)[0].as_py()))
    want = []
    for k in {k for k, _ in kept}:
        ts = sorted(t for kk, t in kept if kk == k)
        groups = [[ts[0]]] if ts else []
        for t in ts[1:]:
            (groups[-1].append(t) if t - groups[-1][-1] < 10 else groups.append([t]))
        want += [(k, t, g[0], g[-1] + 10, g[-1] + 9) for g in groups for t in g]
    assert whole == sorted(want)
    cut = min(cut, len(events))
    first = make()
    head = _run(first, events[:cut])
    state = first.snapshot()
    second = make()
    second.restore(state)
    rest = _run(second, events[cut:]) + _rows(second.close())
    assert sorted(head + rest) == whole
    split = []
    for p in range(2):
        groups = KeyGroups(np.arange(128) % 2 == p)
        op = make()
        op.restore_groups([state], groups)
        mine = [e if isinstance(e, int) else e.filter(pa.array(groups.mask(e, ["k"]))) for e in events[cut:]]
        split += _run(op, mine) + _rows(op.close())
    assert sorted(head + split) == whole


@pytest.mark.parametrize("mode", ["batch", "streaming"])
def test_proctime_of_a_window_is_the_wall_clock_when_it_is_emitted(mode):
    """TUMBLE_PROCTIME / SESSION_PROCTIME: a TIMESTAMP_LTZ(3) processing-time
    attribute of each window's row, taken when the row is made."""
    t_env = _env(mode, make_table([(1, "a", 1.0, 2, 0), (2, "a", 2.0, 3, 1000), (1, "b", 3.0, 4, 70_000)]))
    before = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    for kind, args in [("TUMBLE", "INTERVAL '1' MINUTE"), ("SESSION", "INTERVAL '5' SECOND")]:
        res = t_env.execute_sql(f"SELECT k, {kind}_START(ts, {args}) AS s, {kind}_PROCTIME(ts, {args}) AS pt, "
                                f"COUNT(*) AS n FROM t GROUP BY k, {kind}(ts, {args})").to_arrow()
        after = datetime.datetime.now(datetime.timezone.utc)
        assert res.schema.field("pt").type == pa.timestamp("ms", tz="UTC")
        assert all(before <= p <= after for p in res.column("pt").to_pylist())
        plain = t_env.execute_sql(f"SELECT k, {kind}_START(ts, {args}) AS s, COUNT(*) AS n FROM t "
                                  f"GROUP BY k, {kind}(ts, {args})").to_arrow()
        assert sorted(res.drop_columns(["pt"]).to_pylist(), key=str) == sorted(plain.to_pylist(), key=str)
