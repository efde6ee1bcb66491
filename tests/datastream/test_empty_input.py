"""Empty input keeps its schema in the DataStream API.

A job over no rows returns a table with the columns and types that the same
job over some rows returns (the reference), wherever that schema is known
when the graph is built: sources with a schema (pandas, Arrow, collections,
Parquet), then filter, select, with_columns, key_by, windows of every kind,
running aggregates, unions, window joins and late side outputs.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastops as fo
from fastops.core import aggregates as agg
from fastops.core.window.assigners import GlobalWindow, Session, Sliding, Tumbling

WINDOWS = [Tumbling("5s"), Sliding("10s", "5s"), Session("2s"), GlobalWindow()]


def frame(n: int, tz: str | None = None) -> pd.DataFrame:
    """The first ``n`` of 6 rows (a slice, so an empty frame keeps the column dtypes)."""
    ts = pd.to_datetime(np.arange(6, dtype=np.int64) * 1000 + 1_704_103_200_000, unit="ms")
    if tz is not None:
        ts = ts.tz_localize("UTC").tz_convert(tz)
    df = pd.DataFrame({"ts": ts, "user": [f"u{i % 3}" for i in range(6)],
                       "amount": np.arange(6, dtype=np.int64), "price": np.linspace(1, 2, 6)})
    return df.iloc[:n]


def aggregated(env: fo.StreamEnvironment, source: fo.DataStream, window) -> fo.DataStream:
    return (source.with_watermark("ts").key_by("user").window(window)
            .aggregate(n=agg.count(), total=agg.sum("amount"), avg=agg.mean("price"),
                       hi=agg.max("price"), last=agg.last("user")))


def collected(make, n: int, tz: str | None = None) -> pa.Table:
    env = fo.StreamEnvironment()
    return make(env, env.from_pandas(frame(n, tz))).collect()


def assert_same_schema(empty: pa.Table, full: pa.Table) -> None:
    assert full.num_rows > 0 and empty.num_rows == 0
    assert empty.schema.equals(full.schema), f"empty run:\n{empty.schema}\nnon-empty run:\n{full.schema}"
    assert empty.num_columns > 0


@pytest.mark.parametrize("window", WINDOWS, ids=lambda w: type(w).__name__)
def test_windowed_aggregate_of_empty_pandas_frame(window):
    make = lambda env, s: aggregated(env, s, window)
    assert_same_schema(collected(make, 0), collected(make, 6))


@pytest.mark.parametrize("window", WINDOWS, ids=lambda w: type(w).__name__)
def test_windowed_aggregate_of_empty_parquet_file(tmp_path, window):
    pq.write_table(pa.Table.from_pandas(frame(0), preserve_index=False), tmp_path / "empty.parquet")
    pq.write_table(pa.Table.from_pandas(frame(6), preserve_index=False), tmp_path / "full.parquet")
    out = {}
    for name in ("empty", "full"):
        env = fo.StreamEnvironment()
        out[name] = aggregated(env, env.from_parquet(str(tmp_path / f"{name}.parquet")), window).collect()
    assert_same_schema(out["empty"], out["full"])


def test_empty_result_matches_sql():
    """SQL keeps the typed columns of an empty result; the DataStream job now does too."""
    t_env = fo.TableEnvironment(mode="streaming")
    t_env.create_temporary_view("t", t_env.from_pandas(frame(0), rowtime="ts", watermark="0s"))
    sql = t_env.sql_query("SELECT window_start, window_end, user, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE t, "
                          "DESCRIPTOR(ts), INTERVAL '5' SECOND)) GROUP BY window_start, window_end, user").to_arrow()
    env = fo.StreamEnvironment()
    ds = (env.from_pandas(frame(0)).with_watermark("ts").key_by("user").window(Tumbling("5s"))
          .aggregate(n=agg.count()).collect())
    assert ds.column_names == sql.column_names
    for name in ("window_start", "window_end", "n"):
        assert ds.schema.field(name).type == sql.schema.field(name).type


PIPELINES = {
    "filter": lambda env, s: s.filter(fo.col("amount") > 1),
    "select": lambda env, s: s.select("user", doubled=fo.col("amount") * 2),
    "with_columns": lambda env, s: s.with_columns(cost=fo.col("price") * fo.col("amount")),
    "watermark_rebalance": lambda env, s: s.with_watermark("ts").rebalance().filter(fo.col("price") > 0),
    "running_aggregate": lambda env, s: s.key_by("user").aggregate(n=agg.count(), total=agg.sum("amount")),
    "running_aggregate_event_time": lambda env, s: s.with_watermark("ts").key_by("user")
    .aggregate(first=agg.first("amount")),
    "union": lambda env, s: s.union(s.filter(fo.col("amount") > 2)),
    "window_then_filter": lambda env, s: aggregated(env, s, Tumbling("5s")).filter(fo.col("n") > 0),
    "window_then_select": lambda env, s: aggregated(env, s, Tumbling("5s")).select("window_end", "total"),
}


@pytest.mark.parametrize("name", list(PIPELINES))
def test_stateless_and_keyed_steps_keep_the_schema(name):
    make = PIPELINES[name]
    assert_same_schema(collected(make, 0), collected(make, 6))


def test_window_join_of_empty_inputs():
    def make(env, s):
        left = s.with_watermark("ts")
        right = env.from_pandas(frame(6).rename(columns={"price": "rate"})).with_watermark("ts")
        return left.join(right).on("user").window(Tumbling("5s")).apply()

    assert_same_schema(collected(make, 0), collected(make, 6))


def test_late_side_output_of_empty_input():
    def late(n: int) -> pa.Table:
        df = frame(n)
        if n:  # the last row is 5 s behind the watermark: late
            df = pd.concat([df, df.iloc[[0]]], ignore_index=True)
        env = fo.StreamEnvironment()
        w = (env.from_pandas(df, batch_size=1).with_watermark("ts").key_by("user").window(Tumbling("1s"))
             .aggregate(n=agg.count()))
        result = w.side_output("late").sink_to_table("late")
        w.sink_to_table("main")
        env.execute()
        return result.table()

    assert_same_schema(late(0), late(6))


def test_sink_to_table_and_time_zones_of_empty_input():
    out = {}
    for n in (0, 6):
        env = fo.StreamEnvironment()
        res = aggregated(env, env.from_pandas(frame(n, "Asia/Tokyo")), Tumbling("5s")).sink_to_table()
        env.execute()
        out[n] = res.table()
    assert_same_schema(out[0], out[6])
    assert out[0].schema.field("window_start").type == pa.timestamp("ms", tz="Asia/Tokyo")


def test_empty_collection_with_typed_schema():
    schema = [("ts", pa.int64()), ("user", pa.string()), ("amount", pa.int64())]
    out = {}
    for rows in ([], [(1000, "a", 3)]):
        env = fo.StreamEnvironment()
        out[len(rows)] = (env.from_collection(rows, schema=schema).with_watermark("ts").key_by("user")
                          .window(Tumbling("1s")).aggregate(s=agg.sum("amount")).collect())
    assert_same_schema(out[0], out[1])


@settings(max_examples=20, deadline=None)
@given(n=st.integers(0, 4), window=st.sampled_from(WINDOWS), pipeline=st.sampled_from(sorted(PIPELINES)))
def test_schema_does_not_depend_on_the_number_of_rows(n, window, pipeline):
    """Any number of rows (none included) gives the schema of a 6-row run."""
    make = PIPELINES[pipeline]
    got, ref = collected(make, n), collected(make, 6)
    assert got.schema.equals(ref.schema)
    make_w = lambda env, s: aggregated(env, s, window)
    assert collected(make_w, n).schema.equals(collected(make_w, 6).schema)


@pytest.mark.parametrize("n", [0, 6])
def test_table_from_windowed_data_stream(n):
    """from_data_stream reads the schema the DataStream knows (a window's output
    is not found by running its operators over no rows), empty input included."""
    env = fo.StreamEnvironment()
    s = aggregated(env, env.from_pandas(frame(n)), Tumbling("5s"))
    t_env = fo.TableEnvironment(mode="streaming")
    got = t_env.from_data_stream(s).to_arrow()
    assert got.schema.equals(collected(lambda env, s: aggregated(env, s, Tumbling("5s")), 6).schema)
    ref = frame(n).assign(ws=lambda d: d.ts.dt.floor("5s")).groupby(["ws", "user"]).size()
    assert sorted(got["n"].to_pylist()) == sorted(ref.tolist())


def test_a_declared_map_schema_keeps_the_columns_of_an_empty_result_and_is_enforced():
    out_schema = pa.schema([("k", pa.int64()), ("double", pa.float64())])

    def doubled(batch):
        return pa.RecordBatch.from_arrays([batch.column("k"), pa.compute.multiply(batch.column("v"), 2.0)],
                                          schema=out_schema)

    env = fo.StreamEnvironment()
    empty = env.from_collection([], schema=[("k", pa.int64()), ("v", pa.float64())]).map(doubled, schema=out_schema)
    assert empty.schema == out_schema
    assert empty.collect().schema == out_schema
    with pytest.raises(ValueError, match="missing"):  # the columns after it are checked where the job is built
        empty.select("missing")
    env = fo.StreamEnvironment()
    wrong = env.from_collection([(1, 2.0)], schema=[("k", pa.int64()), ("v", pa.float64())])
    with pytest.raises(fo.JobFailed, match="schema"):
        wrong.map(lambda b: b, schema=out_schema).collect()
    with pytest.raises(TypeError, match="pyarrow.Schema"):
        wrong.map(lambda b: b, schema=["k"])
