"""Top-N and deduplication with ROW_NUMBER(), plain and per window.

- The final rows equal DuckDB's ``ROW_NUMBER() ... WHERE rn <= N`` on random
  tables cut into random batches (ties in arrival order), streaming and
  batch, with and without the row number selected, at parallelism 1 and 2;
  also over an updating input (a Top-N of a GROUP BY).
- The streaming changelog, one row per batch, is the one of a row-at-a-time
  model of Flink's operators (``AppendOnlyTopNFunction`` with and without
  the row number, ``RowTimeDeduplicateFunction`` keeping the first or the
  last row); with larger batches it stays a valid changelog (every
  retraction retracts a row emitted before).
- Window Top-N and window deduplication give the rows of Flink's
  documentation examples and DuckDB's on random tables, insert-only.
"""
from __future__ import annotations

import bisect
import datetime as dt
from collections import defaultdict

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastops as fo
from fastops.core.messages import MAX_WATERMARK
from fastops.core.partitioning import KeyGroups
from fastops.operators.base import OperatorContext
from fastops.table.changelog import OP_COLUMN, ROW_KINDS
from fastops.table.topn import RankOperator
from support.sql_diff import CUTS, ROWS, applied, assert_same_rows, chunked, duck, make_table

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# (fastops ORDER BY, DuckDB ORDER BY: Flink's null order made explicit, ties by arrival)
ORDERS = [
    ("x DESC", "x DESC NULLS LAST, id"),
    ("y", "y NULLS FIRST, id"),
    ("s, y DESC", "s NULLS FIRST, y DESC NULLS LAST, id"),
    ("x NULLS FIRST", "x NULLS FIRST, id"),
    ("ts DESC", "tms DESC, id"),
]
PARTS = ["k", "s", "k, s", ""]


def _env(mode: str, table: pa.Table, parallelism: int = 1, watermark: str | None = None,
         batch_size: int = 65536) -> fo.TableEnvironment:
    t_env = fo.TableEnvironment(mode=mode, parallelism=parallelism, batch_size=batch_size)
    t_env.create_temporary_view("t", t_env.from_arrow(table, rowtime="ts", watermark=watermark))
    return t_env


def _topn(part: str, order: str, cond: str, select: str = "*") -> str:
    p = f"PARTITION BY {part} " if part else ""
    return (f"SELECT {select} FROM (SELECT id, k, s, x, y, tms, ROW_NUMBER() OVER ({p}ORDER BY {order}) AS rn "
            f"FROM t) WHERE {cond}")


@SETTINGS
@given(rows=ROWS, cuts=CUTS, order=st.sampled_from(ORDERS), part=st.sampled_from(PARTS), n=st.integers(1, 4),
       cond=st.sampled_from(["rn <= {n}", "rn < {n} + 1", "{n} >= rn", "rn BETWEEN 2 AND {n}", "rn = {n}"]),
       with_rank=st.booleans(), mode=st.sampled_from(["batch", "streaming"]), parallelism=st.sampled_from([1, 2]))
def test_top_n_matches_duckdb(rows, cuts, order, part, n, cond, with_rank, mode, parallelism):
    table = make_table(rows)
    c = cond.replace("{n} + 1", str(n + 1)).replace("{n}", str(n))
    select = "*" if with_rank else "id, k, s, x, y"
    q = _topn(part, order[0], c, select)
    got = _env(mode, chunked(table, cuts), parallelism).sql_query(q).to_arrow()
    reference = _reference_order(order, with_rank, n if "BETWEEN" not in cond else 0)
    assert_same_rows(got, duck(_topn(part, reference, c, select), {"t": table}), q)


def _reference_order(order: tuple, with_rank: bool, n: int) -> str:
    """DuckDB's ORDER BY; a deduplication keeping the last row takes the later of equal times."""
    return "tms DESC, id DESC" if order[0] == "ts DESC" and not with_rank and n == 1 else order[1]


def _changelog(result) -> list:
    return [(r.get_row_kind(), tuple(r)) for r in result.collect()]


@SETTINGS
@given(rows=ROWS, cuts=CUTS, order=st.sampled_from(ORDERS), n=st.integers(1, 3), with_rank=st.booleans())
def test_streaming_changelog_is_valid_with_any_batches(rows, cuts, order, n, with_rank):
    table = make_table(rows)
    select = "*" if with_rank else "id, k, x"
    q = _topn("k", order[0], f"rn <= {n}", select)
    res = _env("streaming", chunked(table, cuts)).execute_sql(q)
    final = applied(_changelog(res))
    assert sorted(final.elements()) == sorted(tuple(r.values()) for r in res.to_arrow().to_pylist())
    reference = _reference_order(order, with_rank, n)
    assert_same_rows(res.to_arrow(), duck(_topn("k", reference, f"rn <= {n}", select), {"t": table}), q)


# ---------------------------------------------------------------- Flink's changelog, row at a time

def _sort_key(row: dict, order: list) -> tuple:
    """A key ordering rows as Flink's comparator does (nulls first ascending, last descending)."""
    out = []
    for col, asc in order:
        v = row[col]
        if asc:
            out.append((0,) if v is None else (1, v))
        else:
            out.append((1,) if v is None else (0, _neg(v)))
    return tuple(out)


def _neg(v):
    if isinstance(v, str):
        return tuple(-ord(ch) for ch in v) + (1,)  # a descending string order
    if isinstance(v, dt.datetime):
        return -v.timestamp()
    return -v


def flink_append_top_n(rows: list, part: str, order: list, n: int, with_rank: bool, cols: list) -> list:
    """Flink's AppendOnlyTopNFunction, one row at a time: (kind, row) emitted."""
    buffers: dict = defaultdict(list)  # partition -> [(sort key, arrival, row)] sorted
    out = []
    proj = lambda r, rank=None: tuple(r[c] for c in cols) + ((rank,) if with_rank else ())
    for i, r in enumerate(rows):
        buf = buffers[r[part]]
        key = _sort_key(r, order)
        if buf and not (key < buf[-1][0] or len(buf) < n):
            continue  # checkSortKeyInBufferRange
        pos = bisect.bisect_right([e[0] for e in buf], key)
        buf.insert(pos, (key, i, r))
        if not with_rank:  # processElementWithoutRowNumber
            if len(buf) > n:
                last = buf.pop()
                if last[1] == i:
                    continue
                out.append(("-D", proj(last[2])))
            out.append(("+I", proj(r)))
            continue
        groups: list = []  # processElementWithRowNumber, over the sort keys in order
        for e in buf:
            if groups and groups[-1][0] == e[0]:
                groups[-1][1].append(e)
            else:
                groups.append((e[0], [e]))
        rank, found, current, g = 0, False, None, 0
        while g < len(groups) and rank <= n:
            k, recs = groups[g]
            g += 1
            if not found and k == key:
                rank += len(recs)
                current, found = r, True
            elif found:
                for e in recs:
                    if rank > n:
                        break
                    out.append(("-U", proj(e[2], rank)))
                    out.append(("+U", proj(current, rank)))
                    current = e[2]
                    rank += 1
            else:
                rank += len(recs)
        if rank <= n:
            out.append(("+I", proj(current, rank)))
        buffers[r[part]] = [e for grp in groups[:g] for e in grp[1]]
    return out


def flink_row_time_dedup(rows: list, part: str, keep_last: bool, cols: list) -> list:
    """Flink's RowTimeDeduplicateFunction (updates with -U / +U)."""
    state: dict = {}
    out = []
    for r in rows:
        prev = state.get(r[part])
        if prev is None or (r["tms"] >= prev["tms"] if keep_last else r["tms"] < prev["tms"]):
            if prev is None:
                out.append(("+I", tuple(r[c] for c in cols)))
            else:
                out.append(("-U", tuple(prev[c] for c in cols)))
                out.append(("+U", tuple(r[c] for c in cols)))
            state[r[part]] = r
    return out


@SETTINGS
@given(rows=ROWS, order=st.sampled_from([[("x", False)], [("y", True)], [("s", True), ("y", False)],
                                         [("y", False), ("x", True)]]),
       n=st.integers(1, 4), with_rank=st.booleans())
def test_changelog_row_at_a_time_is_flinks(rows, order, n, with_rank):
    table = make_table(rows)
    sql_order = ", ".join(f"{c} {'ASC' if a else 'DESC'}" for c, a in order)
    cols = ["id", "k", "x", "y", "s"]
    q = _topn("k", sql_order, f"rn <= {n}", ", ".join(cols + (["rn"] if with_rank else [])))
    got = _changelog(_env("streaming", table, batch_size=1).execute_sql(q))
    assert got == flink_append_top_n(table.to_pylist(), "k", order, n, with_rank, cols)


@SETTINGS
@given(rows=ROWS, keep_last=st.booleans(), batch=st.sampled_from([1, 1, 3, 7]))
def test_deduplication_is_flinks(rows, keep_last, batch):
    table = make_table([(k, s, x, y, t // 5000 * 5000) for k, s, x, y, t in rows])  # ties in time
    q = (f"SELECT id, k, tms FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts "
         f"{'DESC' if keep_last else 'ASC'}) AS rownum FROM t) WHERE rownum = 1")
    t_env = _env("streaming", table, batch_size=batch)
    assert "Deduplicate(" in t_env.sql_query(q).explain()
    res = t_env.execute_sql(q)
    want = flink_row_time_dedup(table.to_pylist(), "k", keep_last, ["id", "k", "tms"])
    if batch == 1:
        assert _changelog(res) == want
    assert sorted(applied(_changelog(res)).elements(), key=str) == \
        sorted(applied(want).elements(), key=str)
    batch_env = _env("batch", table)
    d = (f"SELECT id, k, tms FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY tms "
         f"{'DESC, id DESC' if keep_last else 'ASC, id ASC'}) AS rn FROM t) WHERE rn = 1")
    assert_same_rows(batch_env.sql_query(q).to_arrow(), duck(d, {"t": table}), q)


@SETTINGS
@given(rows=ROWS, cuts=CUTS, n=st.integers(1, 3), mode=st.sampled_from(["batch", "streaming"]),
       with_rank=st.booleans())
def test_top_n_of_an_updating_table(rows, cuts, n, mode, with_rank):
    """Top-N over a GROUP BY's changelog: retractions move rows out of the top N."""
    table = make_table(rows)
    inner = "SELECT k, s, COUNT(*) AS cnt, SUM(y) AS sy FROM t GROUP BY k, s"
    select = "*" if with_rank else "k, s, cnt"
    q = (f"SELECT {select} FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY cnt DESC, s) AS rn "
         f"FROM ({inner})) WHERE rn <= {n}")
    d = (f"SELECT {select} FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY cnt DESC, s NULLS FIRST) "
         f"AS rn FROM ({inner})) WHERE rn <= {n}")
    res = _env(mode, chunked(table, cuts), batch_size=3).execute_sql(q)
    if mode == "streaming":
        applied(_changelog(res))
    assert_same_rows(res.to_arrow(), duck(d, {"t": table}), q)


# ---------------------------------------------------------------- window Top-N and deduplication

def _bid_env(mode: str) -> fo.TableEnvironment:
    """The Bid table of Flink's window Top-N and window deduplication pages."""
    times = ["08:05", "08:06", "08:07", "08:08", "08:09", "08:11", "08:13", "08:15", "08:17"]
    bid = pa.table({
        "bidtime": pa.array([dt.datetime.fromisoformat(f"2020-04-15 {t}") for t in times], pa.timestamp("ms")),
        "price": pa.array([4.0, 4.0, 2.0, 2.0, 5.0, 2.0, 1.0, 3.0, 6.0]).cast(pa.decimal128(10, 2)),
        "item": list("ACGBDBEHF"),
        "supplier_id": [f"supplier{i}" for i in (1, 2, 1, 3, 4, 3, 1, 2, 5)],
    })
    t_env = fo.TableEnvironment(mode=mode, batch_size=2)
    t_env.create_temporary_view("Bid", t_env.from_arrow(bid, rowtime="bidtime", watermark="1 s"))
    return t_env


def _at(hm: str) -> dt.datetime:
    return dt.datetime.fromisoformat(f"2020-04-15 {hm}")


@pytest.mark.parametrize("mode", ["batch", "streaming"])
def test_flink_docs_window_top_n_after_window_aggregation(mode):
    res = _bid_env(mode).execute_sql("""
      SELECT *
      FROM (
        SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY price DESC) as rownum
        FROM (
          SELECT window_start, window_end, supplier_id, SUM(price) as price, COUNT(*) as cnt
          FROM TABLE(
            TUMBLE(TABLE Bid, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES))
          GROUP BY window_start, window_end, supplier_id
        )
      ) WHERE rownum <= 3""")
    rows = sorted((tuple(r) for r in res.collect()), key=lambda r: (r[0], r[5]))
    assert [(r[0], r[1], r[2], float(r[3]), r[4], r[5]) for r in rows] == [
        (_at("08:00"), _at("08:10"), "supplier1", 6.00, 2, 1),
        (_at("08:00"), _at("08:10"), "supplier4", 5.00, 1, 2),
        (_at("08:00"), _at("08:10"), "supplier2", 4.00, 1, 3),
        (_at("08:10"), _at("08:20"), "supplier5", 6.00, 1, 1),
        (_at("08:10"), _at("08:20"), "supplier2", 3.00, 1, 2),
        (_at("08:10"), _at("08:20"), "supplier3", 2.00, 1, 3),
    ]
    assert {r.get_row_kind() for r in res.collect()} == {"+I"}  # insert-only


@pytest.mark.parametrize("mode", ["batch", "streaming"])
def test_flink_docs_window_top_n_after_window_tvf(mode):
    t_env = _bid_env(mode)
    q = """
      SELECT *
      FROM (
        SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY price DESC) as rownum
        FROM TABLE(
                   TUMBLE(TABLE Bid, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES))
      ) WHERE rownum <= 3"""
    res = t_env.execute_sql(q)
    rows = sorted((tuple(r) for r in res.collect()), key=lambda r: r[0])
    assert [(r[0], float(r[1]), r[2], r[3], r[4], r[5], r[7]) for r in rows] == [
        (_at("08:05"), 4.00, "A", "supplier1", _at("08:00"), _at("08:10"), 2),
        (_at("08:06"), 4.00, "C", "supplier2", _at("08:00"), _at("08:10"), 3),
        (_at("08:09"), 5.00, "D", "supplier4", _at("08:00"), _at("08:10"), 1),
        (_at("08:11"), 2.00, "B", "supplier3", _at("08:10"), _at("08:20"), 3),
        (_at("08:15"), 3.00, "H", "supplier2", _at("08:10"), _at("08:20"), 2),
        (_at("08:17"), 6.00, "F", "supplier5", _at("08:10"), _at("08:20"), 1),
    ]
    if mode == "streaming":
        assert "WindowRank(" in t_env.sql_query(q).explain()


@pytest.mark.parametrize("mode", ["batch", "streaming"])
def test_flink_docs_window_deduplication(mode):
    res = _bid_env(mode).execute_sql("""
      SELECT *
      FROM (
        SELECT bidtime, price, item, supplier_id, window_start, window_end,
          ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY bidtime DESC) as rownum
        FROM TABLE(
                   TUMBLE(TABLE Bid, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES))
      ) WHERE rownum <= 1""")
    rows = sorted((tuple(r) for r in res.collect()), key=lambda r: r[0])
    assert [(r[0], float(r[1]), r[2], r[3], r[4], r[5], r[6]) for r in rows] == [
        (_at("08:09"), 5.00, "D", "supplier4", _at("08:00"), _at("08:10"), 1),
        (_at("08:17"), 6.00, "F", "supplier5", _at("08:10"), _at("08:20"), 1),
    ]


WINDOWS = [  # (fastops TVF, DuckDB rows with window_start / window_end as epoch ms)
    ("TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '10' SECOND)",
     "SELECT *, tms // 10000 * 10000 AS ws, tms // 10000 * 10000 + 10000 AS we FROM t"),
    ("HOP(TABLE t, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '10' SECOND)",
     "SELECT * FROM (SELECT *, tms // 5000 * 5000 - j * 5000 AS ws, tms // 5000 * 5000 - j * 5000 + 10000 AS we "
     "FROM t, range(0, 2) r(j)) WHERE ws > tms - 10000"),
    ("CUMULATE(TABLE t, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '15' SECOND)",
     "SELECT * FROM (SELECT *, tms // 15000 * 15000 AS ws, tms // 15000 * 15000 + j * 5000 AS we "
     "FROM t, range(1, 4) r(j)) WHERE we > tms"),
]


@SETTINGS
@given(rows=ROWS, cuts=CUTS, window=st.sampled_from(WINDOWS), order=st.sampled_from(ORDERS[:4]),
       keyed=st.booleans(), n=st.integers(1, 3), mode=st.sampled_from(["batch", "streaming"]),
       with_rank=st.booleans(), parallelism=st.sampled_from([1, 2]))
def test_window_top_n_matches_duckdb(rows, cuts, window, order, keyed, n, mode, with_rank, parallelism):
    table = make_table(rows)
    key = ", k" if keyed else ""
    rank = ", rn" if with_rank else ""
    q = (f"SELECT id, k, window_start{rank} FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, "
         f"window_end{key} ORDER BY {order[0]}) AS rn FROM TABLE({window[0]})) WHERE rn <= {n}")
    d = (f"SELECT id, k, epoch_ms(ws){rank} FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY ws, we{key} "
         f"ORDER BY {order[1]}) AS rn FROM ({window[1]})) WHERE rn <= {n}")
    t_env = _env(mode, chunked(table, cuts), parallelism, watermark="61 s")
    res = t_env.execute_sql(q)
    assert {r.get_row_kind() for r in res.collect()} <= {"+I"}
    assert_same_rows(res.to_arrow(), duck(d, {"t": table}), q)


def test_window_top_n_emits_at_the_window_end_and_drops_late_rows():
    ts = [1_000, 2_000, 12_000, 3_000, 25_000]  # the 3 s row comes after the watermark passed 10 s
    t = pa.table({"v": [1, 2, 3, 4, 5], "ts": pa.array(ts).cast(pa.timestamp("ms"))})
    t_env = fo.TableEnvironment(mode="streaming", batch_size=1)
    t_env.create_temporary_view("t", t_env.from_arrow(t, rowtime="ts", watermark="0 s"))
    res = t_env.execute_sql("SELECT v, rn FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end "
                            "ORDER BY v DESC) AS rn FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), "
                            "INTERVAL '10' SECOND))) WHERE rn <= 1")
    assert [tuple(r) for r in res.collect()] == [(2, 1), (3, 1), (5, 1)]


# ---------------------------------------------------------------- errors and pieces

@pytest.mark.parametrize("sql, words", [
    ("SELECT v, ROW_NUMBER() OVER (ORDER BY ts) AS rn FROM t", "is supported as a Top-N"),
    ("SELECT * FROM (SELECT v, ROW_NUMBER() OVER (ORDER BY ts) AS rn FROM t) WHERE rn > 2",
     "is supported as a Top-N"),
    ("SELECT v, ROW_NUMBER() OVER (ORDER BY ts) AS rn, SUM(v) OVER (ORDER BY ts) FROM t",
     "cannot be combined with other OVER functions"),
    ("SELECT * FROM (SELECT v, RANK() OVER (ORDER BY v) AS rn FROM t) WHERE rn <= 2", "RANK in an OVER window"),
    ("SELECT v, ROW_NUMBER() OVER (PARTITION BY v) AS rn FROM t", "needs ORDER BY"),
])
def test_refused_rank_queries_say_why(sql, words):
    t_env = fo.TableEnvironment(mode="streaming")
    t_env.create_temporary_view("t", t_env.from_arrow(pa.table({"v": [1], "ts": pa.array([1], pa.timestamp("ms"))}),
                                                      rowtime="ts"))
    with pytest.raises(fo.table.PlanError, match=words):
        t_env.sql_query(sql).execute()


def test_plain_row_number_in_batch_mode():
    t_env = fo.TableEnvironment(mode="batch")
    t_env.create_temporary_view("t", t_env.from_elements([(1, "a"), (3, "a"), (2, "b")], ["v", "k"]))
    got = t_env.sql_query("SELECT v, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v DESC) AS rn FROM t").to_arrow()
    assert sorted(zip(got.column("v").to_pylist(), got.column("rn").to_pylist())) == [(1, 2), (2, 1), (3, 1)]
    # a filter that is no Top-N bound runs as a filter over the numbers
    got = t_env.sql_query("SELECT v FROM (SELECT v, ROW_NUMBER() OVER (ORDER BY v) AS rn FROM t) WHERE rn > 1")
    assert sorted(got.to_arrow().column("v").to_pylist()) == [2, 3]


_SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.int64())])


def _operator(updating: bool) -> RankOperator:
    op = RankOperator(["k"], [("v", False, False)], (1, 2), "rn", True, False, _SCHEMA, True, updating)
    op.open(OperatorContext("rank", 0, 1, 128))
    return op


def _apply(log: list, outs: list) -> None:
    for b in outs:
        for r in b.to_pylist():
            log.append((ROW_KINDS[r.pop(OP_COLUMN)], tuple(r.values())))


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 25), seed=st.integers(0, 9999), cut=st.integers(0, 25), updating=st.booleans())
def test_snapshot_and_restore_at_any_cut(n, seed, cut, updating):
    rng = np.random.default_rng(seed)
    ks, vs = rng.integers(0, 3, n), rng.integers(0, 6, n)
    ops = np.zeros(n, np.int8)
    batches = []
    for i in range(n):
        b = pa.record_batch([pa.array([ks[i]]), pa.array([vs[i]])], schema=_SCHEMA)
        if updating:
            b = b.append_column(OP_COLUMN, pa.array(ops[i:i + 1]))
        batches.append(b)
    whole: list = []
    op = _operator(updating)
    for b in batches:
        _apply(whole, op.process(b))
    cut = min(cut, n)
    first = _operator(updating)
    log: list = []
    for b in batches[:cut]:
        _apply(log, first.process(b))
    state = first.snapshot()
    before = len(log)
    second = _operator(updating)
    second.restore(state)
    for b in batches[cut:]:
        _apply(log, second.process(b))
    assert log == whole
    after = whole[before:]
    for part in range(2):  # at parallelism 2: each task keeps its key groups
        groups = KeyGroups(np.arange(128) % 2 == part)
        op = _operator(updating)
        op.restore_groups([state], groups)
        mine: list = []
        for b in batches[cut:]:
            _apply(mine, op.process(b.filter(pa.array(groups.mask(b, ["k"])))))
        keys = pa.record_batch([pa.array([e[1][0] for e in after], pa.int64())], names=["k"])
        owned = groups.mask(keys, ["k"]) if after else []
        assert mine == [e for e, mine_too in zip(after, owned) if mine_too]
        assert op.on_watermark(MAX_WATERMARK) == []
