"""OVER aggregation: ``agg(...) OVER (PARTITION BY ... ORDER BY ... ROWS | RANGE ...)``.

- Batch mode and streaming mode without late rows give DuckDB's rows on
  random tables cut into random batches (any frame, partition and
  aggregate; batch mode also with other orders, DESC and nulls).
- Streaming mode with a watermark that lets rows be late follows a
  row-at-a-time model of Flink's operators: rows wait until the watermark
  passes their time; a row is dropped when its time is at or before the
  watermark (unbounded frames) or at or before the last time its partition
  emitted (bounded frames).
- The operator's state survives a snapshot and restore at any cut, also
  split over key groups (a rescale).
"""
from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastops as fo
from fastops.core.aggregates import SumOverflowError
from fastops.core.messages import MAX_WATERMARK
from fastops.core.partitioning import KeyGroups
from fastops.operators.base import OperatorContext, Tagged
from fastops.table import CURRENT_RANGE, CURRENT_ROW, UNBOUNDED_RANGE, UNBOUNDED_ROW, Over, col, lit, row_interval
from fastops.table.over import AggSpec, Frame, OverOperator, range_reduce
from fastops.table.sql import SqlError
from support.sql_diff import BASE_MS, CUTS, ROWS, assert_same_rows, batches_of, chunked, duck, make_table

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# (fastops frame, DuckDB frame, frame for the model)
FRAMES = [
    ("ROWS BETWEEN 2 PRECEDING AND CURRENT ROW", "ROWS BETWEEN 2 PRECEDING AND CURRENT ROW", ("rows", 2)),
    ("ROWS BETWEEN CURRENT ROW AND CURRENT ROW", "ROWS BETWEEN CURRENT ROW AND CURRENT ROW", ("rows", 0)),
    ("ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW", "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW",
     ("rows", None)),
    ("RANGE BETWEEN INTERVAL '3' SECOND PRECEDING AND CURRENT ROW", "RANGE BETWEEN 3000 PRECEDING AND CURRENT ROW",
     ("range", 3000)),
    ("RANGE BETWEEN INTERVAL '0' SECOND PRECEDING AND CURRENT ROW", "RANGE BETWEEN 0 PRECEDING AND CURRENT ROW",
     ("range", 0)),
    ("", "RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW", ("range", None)),
]
AGGS = ["COUNT(*)", "COUNT(x)", "SUM(x)", "SUM(y)", "AVG(x)", "MIN(s)", "MAX(s)", "MIN(y)", "MAX(x)", "AVG(y)"]
PARTS = ["k", "s", "k, s", ""]


def _over(agg: str, part: str, order: str, frame: str) -> str:
    p = f"PARTITION BY {part} " if part else ""
    return f"{agg} OVER ({p}ORDER BY {order} {frame})"


def _env(mode: str, table: pa.Table, parallelism: int = 1, watermark: str | None = None,
         rowtime: bool = True) -> fo.TableEnvironment:
    t_env = fo.TableEnvironment(mode=mode, parallelism=parallelism)
    t_env.create_temporary_view("t", t_env.from_arrow(table, rowtime="ts" if rowtime else None,
                                                      watermark=watermark))
    return t_env


@SETTINGS
@given(rows=ROWS, cuts=CUTS, frame=st.sampled_from(FRAMES), aggs=st.lists(st.sampled_from(AGGS), min_size=1,
       max_size=3, unique=True), part=st.sampled_from(PARTS), mode=st.sampled_from(["batch", "streaming"]),
       parallelism=st.sampled_from([1, 1, 2]), watermark=st.sampled_from([None, "61 s"]))
def test_over_matches_duckdb(rows, cuts, frame, aggs, part, mode, parallelism, watermark):
    """Every row with its aggregates over the frame; in streaming mode with no
    late row (no watermark, or a delay longer than the disorder)."""
    table = make_table(rows)
    fo_items = ", ".join(f"{_over(a, part, 'ts', frame[0])} AS a{i}" for i, a in enumerate(aggs))
    order = "tms, id" if frame[2][0] == "rows" else "tms"
    duck_items = ", ".join(f"{_over(a, part, order, frame[1])} AS a{i}" for i, a in enumerate(aggs))
    q = f"SELECT id, {fo_items} FROM t"
    got = _env(mode, chunked(table, cuts), parallelism, watermark).sql_query(q).to_arrow()
    assert_same_rows(got, duck(f"SELECT id, {duck_items} FROM t", {"t": table}), q)


BATCH_ORDERS = [  # (fastops ORDER BY + frame, DuckDB's)
    ("y DESC, id ROWS BETWEEN 3 PRECEDING AND CURRENT ROW", "y DESC, id ROWS BETWEEN 3 PRECEDING AND CURRENT ROW"),
    ("s NULLS FIRST, y DESC ROWS BETWEEN 1 PRECEDING AND CURRENT ROW",
     "s NULLS FIRST, y DESC, id ROWS BETWEEN 1 PRECEDING AND CURRENT ROW"),
    ("y RANGE BETWEEN 5 PRECEDING AND CURRENT ROW", "y RANGE BETWEEN 5 PRECEDING AND CURRENT ROW"),
    ("x NULLS FIRST RANGE BETWEEN 20 PRECEDING AND CURRENT ROW",
     "x NULLS FIRST RANGE BETWEEN 20 PRECEDING AND CURRENT ROW"),
    ("x NULLS LAST RANGE BETWEEN 20 PRECEDING AND CURRENT ROW",
     "x NULLS LAST RANGE BETWEEN 20 PRECEDING AND CURRENT ROW"),
    ("s DESC NULLS LAST", "s DESC NULLS LAST"),
    ("k, s NULLS FIRST", "k NULLS FIRST, s NULLS FIRST"),
]


@SETTINGS
@given(rows=ROWS, cuts=CUTS, order=st.sampled_from(BATCH_ORDERS), agg=st.sampled_from(AGGS),
       part=st.sampled_from(["k", ""]))
def test_batch_mode_takes_any_order(rows, cuts, order, agg, part):
    table = make_table(rows)
    p = f"PARTITION BY {part} " if part else ""
    q = f"SELECT id, {agg} OVER ({p}ORDER BY {order[0]}) AS a FROM t"
    d = f"SELECT id, {agg} OVER ({p}ORDER BY {order[1]}) AS a FROM t"
    got = _env("batch", chunked(table, cuts), rowtime=False).sql_query(q).to_arrow()
    assert_same_rows(got, duck(d, {"t": table}), q)


# ---------------------------------------------------------------- streaming: late rows, as Flink

def _agg_value(fn: str, col: str | None, frame_rows: list) -> object:
    if fn == "count":
        return len(frame_rows) if col is None else sum(r[col] is not None for r in frame_rows)
    vals = [r[col] for r in frame_rows if r[col] is not None]
    if not vals:
        return None
    if fn == "sum":
        return sum(vals)
    if fn == "avg":
        return sum(vals) / len(vals)
    return min(vals) if fn == "min" else max(vals)


def flink_over_model(rows: list, batches: list, delay: int | None, part: list, frame: tuple,
                     fn: str, col: str | None) -> dict:
    """id -> aggregate of every row Flink's row-time OVER operators emit, with
    rows arriving in ``batches`` and a watermark ``max(ts) - delay - 1`` after each."""
    kind, preceding = frame
    unbounded = preceding is None
    wm, max_ts = -math.inf, -math.inf
    last: dict = {}
    pending: list = []
    emitted: dict = defaultdict(list)
    out: dict = {}
    key = lambda r: tuple(r[c] for c in part)

    def fire(upto: float) -> None:
        ready = sorted((r for r in pending if r["tms"] <= upto), key=lambda r: (r["tms"], r["id"]))
        pending[:] = [r for r in pending if r["tms"] > upto]
        for r in ready:
            emitted[key(r)].append(r)
        for r in ready:
            seen = emitted[key(r)]
            p = seen.index(r)
            if kind == "rows":
                frame_rows = seen[:p + 1] if unbounded else seen[max(0, p - preceding):p + 1]
            else:
                lo = -math.inf if unbounded else r["tms"] - preceding
                frame_rows = [q for q in seen if lo <= q["tms"] <= r["tms"]]
            out[r["id"]] = _agg_value(fn, col, frame_rows)
            last[key(r)] = max(last.get(key(r), -math.inf), r["tms"])

    for batch in batches:
        for i in batch:
            r = rows[i]
            late = r["tms"] <= wm if unbounded else r["tms"] <= last.get(key(r), -math.inf)
            if not late:
                pending.append(r)
            max_ts = max(max_ts, r["tms"])
        if delay is not None and max_ts - delay - 1 > wm:
            wm = max_ts - delay - 1
            fire(wm)
    fire(math.inf)
    return out


MODEL_AGGS = {"COUNT(*)": ("count", None), "COUNT(x)": ("count", "x"), "SUM(y)": ("sum", "y"),
              "AVG(x)": ("avg", "x"), "MIN(s)": ("min", "s"), "MAX(y)": ("max", "y")}


@SETTINGS
@given(rows=ROWS, cuts=CUTS, frame=st.sampled_from(FRAMES), agg=st.sampled_from(sorted(MODEL_AGGS)),
       part=st.sampled_from(["k", "k, s", ""]), delay_s=st.sampled_from([0, 1, 5, 20]),
       parallelism=st.sampled_from([1, 2]))
def test_streaming_drops_late_rows_as_flink(rows, cuts, frame, agg, part, delay_s, parallelism):
    table = chunked(make_table(rows), cuts)
    q = f"SELECT id, {_over(agg, part, 'ts', frame[0])} AS a FROM t"
    got = _env("streaming", table, parallelism, watermark=f"{delay_s} s").sql_query(q).to_arrow()
    fn, col = MODEL_AGGS[agg]
    want = flink_over_model(table.to_pylist(), batches_of(table), delay_s * 1000,
                            [c.strip() for c in part.split(",") if c.strip()], frame[2], fn, col)
    assert_same_rows(got, [(i, v) for i, v in want.items()], q)


def test_streaming_output_waits_for_the_watermark_and_is_in_time_order():
    t = pa.table({"k": [1, 1, 2, 1], "v": [10, 20, 30, 40],
                  "ts": pa.array([5_000, 1_000, 3_000, 9_000]).cast(pa.timestamp("ms"))})
    t_env = fo.TableEnvironment(mode="streaming", batch_size=1)
    t_env.create_temporary_view("t", t_env.from_arrow(t, rowtime="ts", watermark="4 s"))
    res = t_env.execute_sql("SELECT k, v, SUM(v) OVER (PARTITION BY k ORDER BY ts) AS s FROM t")
    rows = [tuple(r) for r in res.collect()]
    # the watermark is 0.999 s after the first row and 4.999 s after the last: the 1 s and 3 s rows
    # come out then, the 5 s and 9 s rows at the end of input
    assert rows == [(1, 20, 20), (2, 30, 30), (1, 10, 30), (1, 40, 70)]
    assert all(r.get_row_kind() == "+I" for r in res.collect())


# ---------------------------------------------------------------- documented examples

def test_flink_documentation_example_one_hour_sum():
    """Flink's over-agg page: the amount of the same product's orders within the hour before each order."""
    h = 3_600_000
    orders = pa.table({"order_id": [1, 2, 3, 4, 5], "product": ["a", "b", "a", "a", "b"],
                       "amount": [10, 5, 20, 30, 7],
                       "order_time": pa.array([0, 10 * 60_000, 30 * 60_000, h + 15 * 60_000, 2 * h])
                       .cast(pa.timestamp("ms"))})
    for mode in ("batch", "streaming"):
        t_env = fo.TableEnvironment(mode=mode, batch_size=2)
        t_env.create_temporary_view("Orders", t_env.from_arrow(orders, rowtime="order_time", watermark="1 s"))
        got = t_env.sql_query("""
            SELECT order_id, order_time, amount,
              SUM(amount) OVER (
                PARTITION BY product
                ORDER BY order_time
                RANGE BETWEEN INTERVAL '1' HOUR PRECEDING AND CURRENT ROW
              ) AS one_hour_prod_amount_sum
            FROM Orders""").to_arrow()
        sums = dict(zip(got.column("order_id").to_pylist(), got.column("one_hour_prod_amount_sum").to_pylist()))
        assert sums == {1: 10, 2: 5, 3: 30, 4: 50, 5: 7}, mode
        # the WINDOW clause of the same page: one definition, two aggregates
        got = t_env.sql_query("""
            SELECT order_id, order_time, amount,
              SUM(amount) OVER w AS sum_amount,
              AVG(amount) OVER w AS avg_amount
            FROM Orders
            WINDOW w AS (
              PARTITION BY product
              ORDER BY order_time
              RANGE BETWEEN INTERVAL '1' HOUR PRECEDING AND CURRENT ROW)""").to_arrow()
        avg = dict(zip(got.column("order_id").to_pylist(), got.column("avg_amount").to_pylist()))
        assert avg == {1: 10.0, 2: 5.0, 3: 15.0, 4: 25.0, 5: 7.0}, mode
        assert got.schema.names == ["order_id", "order_time", "amount", "sum_amount", "avg_amount"]


def test_rows_frame_counts_rows_and_shorthand():
    t = pa.table({"v": [1, 2, 3, 4, 5], "ts": pa.array([1, 2, 3, 4, 5]).cast(pa.timestamp("ms"))})
    t_env = fo.TableEnvironment(mode="batch")
    t_env.create_temporary_view("t", t_env.from_arrow(t, rowtime="ts"))
    # ROWS n PRECEDING (no BETWEEN) is BETWEEN n PRECEDING AND CURRENT ROW; 10 rows before + the row
    got = t_env.sql_query("SELECT v, SUM(v) OVER (ORDER BY ts ROWS 1 PRECEDING) AS s FROM t").to_arrow()
    assert got.column("s").to_pylist() == [1, 3, 5, 7, 9]


# ---------------------------------------------------------------- what stays refused

@pytest.mark.parametrize("sql, words", [
    ("SELECT SUM(v) OVER (PARTITION BY k ORDER BY v) FROM t", "must be one ascending time attribute"),
    ("SELECT SUM(v) OVER (ORDER BY ts DESC) FROM t", "must be one ascending time attribute"),
    ("SELECT SUM(v) OVER (ORDER BY ts ROWS 1 PRECEDING), SUM(v) OVER (ORDER BY ts) FROM t",
     "must be the same in streaming mode"),
    ("SELECT SUM(v) OVER (ORDER BY ts ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) FROM t", "FOLLOWING"),
    ("SELECT LAG(v) OVER (ORDER BY ts) FROM t", "LAG in an OVER window"),
    ("SELECT SUM(v) OVER (PARTITION BY k) FROM t", "needs ORDER BY"),
    ("SELECT v FROM t WHERE SUM(v) OVER (ORDER BY ts) > 1", "OVER window in WHERE"),
    ("SELECT k, SUM(SUM(v)) OVER (ORDER BY k) FROM t GROUP BY k", "GROUP BY"),
    ("SELECT SUM(v) OVER w FROM t", "window 'w' is not defined"),
    ("SELECT COUNT(DISTINCT v) OVER (ORDER BY ts) FROM t", "DISTINCT"),
    ("SELECT SUM(v) OVER (ORDER BY ts ROWS BETWEEN INTERVAL '1' SECOND PRECEDING AND CURRENT ROW) FROM t",
     "ROWS frame counts rows"),
    ("SELECT SUM(s) OVER (ORDER BY ts) FROM t", "SUM takes a number"),
])
def test_unsupported_over_is_named(sql, words):
    t_env = fo.TableEnvironment(mode="streaming")
    t_env.create_temporary_view("t", t_env.from_arrow(
        pa.table({"k": [1], "v": [1], "s": ["a"], "ts": pa.array([1]).cast(pa.timestamp("ms"))}), rowtime="ts"))
    with pytest.raises(SqlError, match=words):
        t_env.sql_query(sql).execute()


def test_streaming_needs_a_time_attribute():
    t_env = fo.TableEnvironment(mode="streaming")
    t_env.create_temporary_view("t", t_env.from_elements([(1, 2)], ["k", "v"]))
    with pytest.raises(SqlError, match="the table has no time attribute"):
        t_env.sql_query("SELECT SUM(v) OVER (ORDER BY v) FROM t")


def test_int_sum_overflow_is_an_error():
    t = pa.table({"v": [2 ** 62, 2 ** 62, -5], "ts": pa.array([1, 2, 3]).cast(pa.timestamp("ms"))})
    t_env = fo.TableEnvironment(mode="batch")
    t_env.create_temporary_view("t", t_env.from_arrow(t, rowtime="ts"))
    with pytest.raises(Exception) as info:
        t_env.sql_query("SELECT SUM(v) OVER (ORDER BY ts) AS s FROM t").to_arrow()
    assert isinstance(info.value.__cause__, SumOverflowError) or isinstance(info.value, SumOverflowError)
    # a frame that fits is exact even where a prefix sum wraps
    got = t_env.sql_query("SELECT SUM(v) OVER (ORDER BY ts ROWS 0 PRECEDING) AS s FROM t").to_arrow()
    assert got.column("s").to_pylist() == [2 ** 62, 2 ** 62, -5]


# ---------------------------------------------------------------- pieces

@settings(max_examples=50, deadline=None)
@given(vals=st.lists(st.integers(-5, 5), min_size=1, max_size=60), data=st.data())
def test_range_reduce_is_a_range_min_and_max(vals, data):
    key = np.array(vals, np.int64)
    n = len(key)
    lo = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=20)), np.int64)
    hi = np.array([data.draw(st.integers(int(a), n - 1)) for a in lo], np.int64)
    assert list(range_reduce(key, lo, hi, np.minimum)) == [min(vals[a:b + 1]) for a, b in zip(lo, hi)]
    assert list(range_reduce(key, lo, hi, np.maximum)) == [max(vals[a:b + 1]) for a, b in zip(lo, hi)]


_SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.int64()), ("s", pa.string()), ("ts", pa.timestamp("ms"))])
_SPECS = [AggSpec("n", "count", None, pa.int64()), AggSpec("sv", "sum", "v", pa.int64()),
          AggSpec("ms", "max", "s", pa.string())]


def _operator(frame: Frame) -> OverOperator:
    op = OverOperator(["k"], [("ts", True, True)], frame, _SPECS, _SCHEMA, incremental=True)
    op.open(OperatorContext("over", 0, 1, 128))
    return op


def _feed(op, batches, wms):
    out = []
    for b, w in zip(batches, wms):
        out += [o for o in op.process(b) if not isinstance(o, Tagged)]
        out += op.on_watermark(w)
    return out


def _rows(outs):
    return sorted(tuple(r.values()) for b in outs for r in b.to_pylist())


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 30), seed=st.integers(0, 10_000), cut=st.integers(0, 30),
       frame=st.sampled_from([Frame("rows", 2), Frame("rows", None), Frame("range", 3), Frame("range", None)]))
def test_snapshot_and_restore_at_any_cut(n, seed, cut, frame):
    rng = np.random.default_rng(seed)
    ts = rng.integers(0, 20, n)
    b = pa.record_batch([pa.array(rng.integers(0, 3, n)), pa.array(rng.integers(-9, 9, n)),
                         pa.array(rng.choice(["a", "b", "c"], n)), pa.array(ts).cast(pa.timestamp("ms"))],
                        schema=_SCHEMA)
    batches = [b.slice(i, 1) for i in range(n)]
    wms = [int(ts[:i + 1].max()) - 3 for i in range(n)]
    whole = _operator(frame)
    want = _rows(_feed(whole, batches, wms) + whole.on_watermark(MAX_WATERMARK))
    cut = min(cut, n)
    first = _operator(frame)
    got = _feed(first, batches[:cut], wms[:cut])
    state = first.snapshot()
    # restored in one task, and split over two (each keeps its key groups)
    second = _operator(frame)
    second.restore(state)
    restored = _rows(got + _feed(second, batches[cut:], wms[cut:]) + second.on_watermark(MAX_WATERMARK))
    assert restored == want
    halves = []
    for part in range(2):
        op = _operator(frame)
        groups = KeyGroups(np.arange(128) % 2 == part)
        op.restore_groups([state], groups)
        mine = [bb.filter(pa.array(groups.mask(bb, ["k"]))) for bb in batches[cut:]]
        halves += _feed(op, mine, wms[cut:]) + op.on_watermark(MAX_WATERMARK)
    assert _rows(got + halves) == want


def test_time_attribute_is_kept():
    t = pa.table({"v": [1, 2], "ts": pa.array([1, 2]).cast(pa.timestamp("ms"))})
    t_env = fo.TableEnvironment(mode="streaming")
    t_env.create_temporary_view("t", t_env.from_arrow(t, rowtime="ts", watermark="1 s"))
    over = t_env.sql_query("SELECT ts, v, SUM(v) OVER (ORDER BY ts) AS s FROM t")
    t_env.create_temporary_view("o", over)
    got = t_env.sql_query("SELECT window_start, SUM(s) AS total FROM TABLE(TUMBLE(TABLE o, DESCRIPTOR(ts), "
                          "INTERVAL '1' SECOND)) GROUP BY window_start, window_end").to_arrow()
    assert got.column("total").to_pylist() == [4]
    assert BASE_MS > 0


# ---------------------------------------------------------------- the Table API

TABLE_FRAMES = {  # PyFlink preceding(...) -> the SQL frame
    "UNBOUNDED_RANGE": "RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW",
    "UNBOUNDED_ROW": "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW",
    "row_interval(2)": "ROWS BETWEEN 2 PRECEDING AND CURRENT ROW",
    "lit(3).seconds": "RANGE BETWEEN INTERVAL '3' SECOND PRECEDING AND CURRENT ROW",
}


@SETTINGS
@given(rows=ROWS, cuts=CUTS, preceding=st.sampled_from(sorted(TABLE_FRAMES)), mode=st.sampled_from(["batch",
       "streaming"]), partitioned=st.booleans())
def test_table_api_over_window_is_the_sql_one(rows, cuts, preceding, mode, partitioned):
    bound = {"UNBOUNDED_RANGE": UNBOUNDED_RANGE, "UNBOUNDED_ROW": UNBOUNDED_ROW,
             "row_interval(2)": row_interval(2), "lit(3).seconds": lit(3).seconds}[preceding]
    t_env = _env(mode, chunked(make_table(rows), cuts), watermark="61 s")
    orders = t_env.from_path("t")
    w = Over.partition_by(col("k")) if partitioned else Over
    w = w.order_by(col("ts")).preceding(bound)
    w = w.following(CURRENT_ROW if "ROWS" in TABLE_FRAMES[preceding] else CURRENT_RANGE).alias("w")
    got = orders.over_window(w).select(col("id"), col("x").avg.over(col("w")).alias("a"),
                                       col("y").max.over(col("w")).alias("m"),
                                       col("s").min.over(col("w")).alias("n")).to_arrow()
    p = "PARTITION BY k " if partitioned else ""
    win = f"({p}ORDER BY ts {TABLE_FRAMES[preceding]})"
    want = t_env.sql_query(f"SELECT id, AVG(x) OVER {win} AS a, MAX(y) OVER {win} AS m, MIN(s) OVER {win} AS n "
                           "FROM t").to_arrow()
    assert_same_rows(got, want, preceding)


def test_table_api_over_window_errors():
    t_env = _env("streaming", make_table([(1, "a", 1.0, 1, 1)]))
    t = t_env.from_path("t")
    with pytest.raises(fo.table.PlanError, match="needs .alias"):
        t.over_window(Over.order_by(col("ts")))
    with pytest.raises(fo.table.PlanError, match="no OVER window named w2"):
        t.over_window(Over.order_by(col("ts")).alias("w")).select(col("y").sum.over(col("w2")))
    with pytest.raises(fo.table.PlanError, match="outside|over_window"):
        t.select(col("y").sum.over(col("w"))).to_arrow()
