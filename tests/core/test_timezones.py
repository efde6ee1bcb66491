"""Time zones: window bounds keep the zone of the event-time column.

A zone-aware column (Arrow ``timestamp[unit, tz]``, pandas
``datetime64[ns, tz]``, PyFlink's TIMESTAMP_LTZ) gives ``window_start`` /
``window_end`` / ``window_time`` of ``timestamp[ms, tz]``, the same instants as
the naive UTC bounds (windows are aligned in UTC). Zone-naive and integer
columns keep naive ``timestamp[ms]`` bounds. References: pandas and plain Python.
"""
from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastops as fo
from fastops.core import aggregates as agg
from fastops.core.window.aggregator import State, WindowAggregator
from fastops.core.window.assigners import Session, Sliding, Tumbling
from fastops.table import Tumble
from fastops.table.expressions import col as tcol

ZONES = ["Europe/Berlin", "America/New_York", "Asia/Kolkata", "UTC"]
BASE = 1_704_103_200_000  # 2024-01-01 10:00 UTC, in ms


def frame(tz: str, ms: list[int], keys: list[str] | None = None) -> pd.DataFrame:
    ts = pd.to_datetime(np.asarray(ms, dtype=np.int64), unit="ms", utc=True).tz_convert(tz)
    return pd.DataFrame({"ts": ts, "k": keys or ["a"] * len(ms), "v": np.arange(len(ms), dtype=np.float64)})


def stamp(ms: int, tz: str) -> pd.Timestamp:
    return pd.Timestamp(ms, unit="ms", tz="UTC").tz_convert(tz)


def tumbling_reference(ms: list[int], keys: list[str], size: int, tz: str) -> list[tuple]:
    """(window_start, window_end, key, count) in pure Python, bounds in ``tz``."""
    counts: dict[tuple[int, str], int] = {}
    for t, k in zip(ms, keys):
        counts[(t // size * size, k)] = counts.get((t // size * size, k), 0) + 1
    return sorted((stamp(s, tz), stamp(s + size, tz), k, n) for (s, k), n in counts.items())


def as_rows(df: pd.DataFrame, cols: list[str]) -> list[tuple]:
    return sorted(tuple(r) for r in df[cols].itertuples(index=False))


@pytest.mark.parametrize("tz", ZONES)
def test_datastream_tumbling_keeps_zone(tz):
    ms = [BASE + d for d in (1_000, 3_500, 7_000, 4_999, 12_000, 12_001)]
    keys = ["a", "b", "a", "a", "b", "a"]
    env = fo.StreamEnvironment()
    out = (env.from_pandas(frame(tz, ms, keys), batch_size=2).with_watermark("ts", max_out_of_orderness="3s")
           .key_by("k").window(Tumbling("5s")).aggregate(n=agg.count()).collect())
    want = pa.timestamp("ms", tz=tz)
    assert out.schema.field("window_start").type == want
    assert out.schema.field("window_end").type == want
    got = out.to_pandas()
    assert str(got.window_start.dtype) == f"datetime64[ms, {tz}]"
    assert as_rows(got, ["window_start", "window_end", "k", "n"]) == tumbling_reference(ms, keys, 5000, tz)


@pytest.mark.parametrize("window", [Sliding("10s", "5s"), Session("2s")])
def test_sliding_and_session_bounds_keep_zone(window):
    tz = "Asia/Kolkata"
    ms = [BASE + d for d in (0, 1_000, 2_500, 9_000, 16_000)]
    env = fo.StreamEnvironment()
    out = (env.from_pandas(frame(tz, ms)).with_watermark("ts").key_by("k").window(window)
           .aggregate(n=agg.count()).collect())
    assert out.schema.field("window_start").type == pa.timestamp("ms", tz=tz)
    # the same instants as the bare kernel over int ms (naive bounds, UTC)
    ref = WindowAggregator(window, ["k"], {"n": agg.count()}, time="t")
    ref.process(pa.table({"t": ms, "k": ["a"] * len(ms)}))
    ref = ref.flush()
    assert ref.schema.field("window_start").type == pa.timestamp("ms")
    got = sorted(zip(out["window_start"].cast(pa.int64()).to_pylist(), out["n"].to_pylist()))
    assert got == sorted(zip(ref["window_start"].cast(pa.int64()).to_pylist(), ref["n"].to_pylist()))


@pytest.mark.parametrize("time_type", [pa.int64(), pa.timestamp("us"), pa.timestamp("s")])
def test_naive_and_integer_time_keep_naive_bounds(time_type):
    ms = [1_000, 2_000, 7_000]
    per_ms = 1000 if time_type.id == pa.timestamp("us").id else 1
    raw = pa.array([m // 1000 if time_type == pa.timestamp("s") else m * per_ms
                    for m in ms], pa.int64()).cast(time_type)
    env = fo.StreamEnvironment()
    out = (env.from_arrow(pa.table({"ts": raw, "k": [1, 1, 1]})).with_watermark("ts").key_by("k")
           .window(Tumbling("5s")).aggregate(n=agg.count()).collect())
    assert out.schema.field("window_start").type == pa.timestamp("ms")
    assert out["window_start"].cast(pa.int64()).to_pylist() == [0, 5000]


def test_late_rows_watermark_keeps_zone():
    tz = "America/New_York"
    ms = [BASE + 10_000, BASE + 20_000, BASE + 1_000]  # the last one is late
    env = fo.StreamEnvironment()
    s = env.from_pandas(frame(tz, ms), batch_size=1).with_watermark("ts")
    w = s.key_by("k").window(Tumbling("5s")).aggregate(n=agg.count())
    late = w.side_output("late").sink_to_table("late")
    w.sink_to_table("main")
    env.execute()
    t = late.table()
    assert t.num_rows == 1
    assert t.schema.field("watermark").type == pa.timestamp("ms", tz=tz)
    assert t.schema.field("ts").type == pa.Schema.from_pandas(frame(tz, ms)).field("ts").type  # unchanged
    assert t.to_pandas().watermark[0] == stamp(BASE + 20_000 - 1, tz)


def test_window_join_bounds_keep_zone():
    tz = "Europe/Berlin"
    env = fo.StreamEnvironment()
    left = env.from_pandas(frame(tz, [BASE + 1_000, BASE + 6_000], ["a", "b"])).with_watermark("ts")
    right = env.from_pandas(frame(tz, [BASE + 2_000, BASE + 7_000], ["a", "b"])).with_watermark("ts")
    out = left.join(right).on("k").window(Tumbling("5s")).apply().collect()
    assert out.schema.field("window_start").type == pa.timestamp("ms", tz=tz)
    got = sorted(zip(out.to_pandas().window_start, out["k"].to_pylist()))
    assert got == [(stamp(BASE, tz), "a"), (stamp(BASE + 5_000, tz), "b")]


def test_snapshot_restore_keeps_zone():
    tz = "Asia/Kolkata"
    table = pa.Table.from_pandas(frame(tz, [BASE + 1, BASE + 6_000]), preserve_index=False)
    w = WindowAggregator(Tumbling("5s"), ["k"], {"n": agg.count()}, time="ts")
    w.process(table.slice(0, 1))
    w2 = WindowAggregator(Tumbling("5s"), ["k"], {"n": agg.count()}, time="ts")
    w2.restore(State.from_bytes(w.snapshot().to_bytes()))
    w2.process(table.slice(1))
    out = w2.flush()
    assert out.schema.field("window_end").type == pa.timestamp("ms", tz=tz)
    assert out.to_pandas().window_end.tolist() == [stamp(BASE + 5_000, tz), stamp(BASE + 10_000, tz)]


@pytest.mark.parametrize("mode", ["batch", "streaming"])
@pytest.mark.parametrize("kind", ["TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '5' SECOND)",
                                  "HOP(TABLE t, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '10' SECOND)",
                                  "CUMULATE(TABLE t, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '10' SECOND)"])
def test_sql_window_columns_keep_zone(mode, kind):
    tz = "Europe/Berlin"
    ms = [BASE + d for d in (1_000, 6_000, 7_000, 13_000)]
    t_env = fo.TableEnvironment(mode=mode)
    t_env.create_temporary_view("t", t_env.from_pandas(frame(tz, ms), rowtime="ts", watermark="1s"))
    want = pa.timestamp("ms", tz=tz)
    grouped = t_env.sql_query(f"SELECT window_start, window_end, window_time, k, COUNT(*) AS n "
                              f"FROM TABLE({kind}) GROUP BY window_start, window_end, window_time, k").to_arrow()
    tvf = t_env.sql_query(f"SELECT * FROM TABLE({kind})").to_arrow()
    for out in (grouped, tvf):
        for c in ("window_start", "window_end", "window_time"):
            assert out.schema.field(c).type == want, (c, out.schema)
    assert tvf.schema.field("ts").type == pa.Schema.from_pandas(frame(tz, ms)).field("ts").type
    # the same windows as the TVF rows, counted by pandas
    ref = tvf.to_pandas().groupby(["window_start", "window_end"]).size().reset_index(name="n")
    got = grouped.to_pandas()
    assert as_rows(got, ["window_start", "window_end", "n"]) == as_rows(ref, ["window_start", "window_end", "n"])
    assert (got.window_time == got.window_end - pd.Timedelta("1ms")).all()
    if kind.startswith("TUMBLE"):
        assert as_rows(got, ["window_start", "n"]) == [(stamp(BASE, tz), 1), (stamp(BASE + 5000, tz), 2),
                                                        (stamp(BASE + 10_000, tz), 1)]


def test_table_api_group_window_keeps_zone():
    tz = "America/New_York"
    ms = [BASE + d for d in (1_000, 6_000, 7_000)]
    t_env = fo.TableEnvironment(mode="streaming")
    t = t_env.from_pandas(frame(tz, ms), rowtime="ts", watermark="0s")
    got = (t.window(Tumble.over("5 s").on(tcol("ts")).alias("w")).group_by(tcol("w"), tcol("k"))
           .select(tcol("w").start.alias("ws"), tcol("w").end.alias("we"), tcol("k").count.alias("n"))
           .to_arrow())
    assert got.schema.field("ws").type == pa.timestamp("ms", tz=tz)
    assert sorted(zip(got.to_pandas().ws, got["n"].to_pylist())) == [(stamp(BASE, tz), 1), (stamp(BASE + 5000, tz), 2)]


def test_timestamp_ltz_ddl_keeps_utc_zone(tmp_path):
    """PyFlink's TIMESTAMP_LTZ (timestamp with tz UTC) gives LTZ window bounds."""
    t_env = fo.TableEnvironment(mode="batch")
    rows = [(dt.datetime(2024, 1, 1, 10, 0, 1, tzinfo=dt.timezone.utc), 1),
            (dt.datetime(2024, 1, 1, 10, 0, 6, tzinfo=dt.timezone.utc), 2)]
    t = t_env.from_arrow(pa.table({"ts": pa.array([r[0] for r in rows], pa.timestamp("ms", tz="UTC")),
                                   "v": [r[1] for r in rows]}))
    t_env.create_temporary_view("t", t)
    out = t_env.sql_query("SELECT window_start, SUM(v) AS s FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), "
                          "INTERVAL '5' SECOND)) GROUP BY window_start, window_end").to_arrow()
    assert out.schema.field("window_start").type == pa.timestamp("ms", tz="UTC")
    assert sorted(out.to_pylist(), key=lambda r: r["window_start"]) == [
        {"window_start": dt.datetime(2024, 1, 1, 10, 0, 0, tzinfo=dt.timezone.utc), "s": 1},
        {"window_start": dt.datetime(2024, 1, 1, 10, 0, 5, tzinfo=dt.timezone.utc), "s": 2}]


@settings(max_examples=25, deadline=None)
@given(tz=st.sampled_from(ZONES), offsets=st.lists(st.integers(0, 3_600_000), min_size=1, max_size=40),
       size_s=st.sampled_from([1, 7, 60, 900]))
def test_tumbling_bounds_match_reference_in_any_zone(tz, offsets, size_s):
    ms = sorted(BASE + o for o in offsets)
    keys = ["a" if o % 2 else "b" for o in range(len(ms))]
    env = fo.StreamEnvironment()
    out = (env.from_pandas(frame(tz, ms, keys)).with_watermark("ts").key_by("k")
           .window(Tumbling(f"{size_s}s")).aggregate(n=agg.count()).collect().to_pandas())
    assert as_rows(out, ["window_start", "window_end", "k", "n"]) == tumbling_reference(ms, keys, size_s * 1000, tz)
