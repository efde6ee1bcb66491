"""DataStream jobs with windows, running aggregates, process functions and
joins, checked against the bare kernel and DuckDB."""
from __future__ import annotations

from collections import Counter

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastops as fo
from fastops.core import aggregates as agg
from fastops.core.window.aggregator import WindowAggregator
from fastops.core.window.assigners import Sliding, Tumbling
from fastops.operators.process import ProcessContext


def events(n: int = 20_000, keys: int = 300, seed: int = 0, disorder_ms: int = 2000) -> pa.Table:
    rng = np.random.default_rng(seed)
    base = np.arange(n, dtype=np.int64) * 5  # 200 events per second of event time
    ts = base + rng.integers(-disorder_ms, 1, n)
    ts = np.maximum(ts, 0)
    return pa.table({
        "user": rng.zipf(1.5, n) % keys,
        "ts": ts,
        "value": np.round(rng.normal(10, 3, n), 3),
    })


def rows(table: pa.Table, float_digits: int = 6) -> Counter:
    out = Counter()
    for r in table.to_pylist():
        out[tuple(round(v, float_digits) if isinstance(v, float) else v for v in r.values())] += 1
    return out


def kernel_run(table: pa.Table, window, batch_size: int = 1000) -> pa.Table:
    """The bare kernel with the same watermark schedule as the job's (per batch)."""
    w = WindowAggregator(window, ["user"], {"n": agg.count(), "total": agg.sum("value"),
                                            "top": agg.max("value")}, time="ts")
    parts = []
    seen_max = None
    for b in table.to_batches(max_chunksize=batch_size):
        w.process(b)
        seen_max = max(seen_max or -(2**62), int(pc.max(b["ts"]).as_py()))
        parts.append(w.advance_watermark(seen_max - 2000 - 1))
    parts.append(w.flush())
    return pa.Table.from_batches([p for p in parts if p.num_rows])


def duckdb_tumbling(table: pa.Table, size_ms: int) -> pa.Table:
    con = duckdb.connect()
    con.register("events", table)
    return con.sql(f"""
        SELECT to_timestamp((ts // {size_ms}) * {size_ms} / 1000.0)::TIMESTAMP AS window_start,
               to_timestamp(((ts // {size_ms}) + 1) * {size_ms} / 1000.0)::TIMESTAMP AS window_end,
               user, count(*) AS n, sum(value) AS total, max(value) AS top
        FROM events GROUP BY ALL""").to_arrow_table()


def job(table: pa.Table, parallelism: int, window) -> pa.Table:
    env = fo.StreamEnvironment(parallelism=parallelism)
    return (env.from_arrow(table, batch_size=1000)
            .with_watermark("ts", max_out_of_orderness="2s")
            .key_by("user")
            .window(window)
            .aggregate(n=agg.count(), total=agg.sum("value"), top=agg.max("value"))
            .collect())


def _normalise(t: pa.Table) -> pa.Table:
    return t.select(["window_start", "window_end", "user", "n", "total", "top"]).cast(
        pa.schema([("window_start", pa.timestamp("ms")), ("window_end", pa.timestamp("ms")),
                   ("user", pa.int64()), ("n", pa.int64()), ("total", pa.float64()),
                   ("top", pa.float64())]))


@pytest.mark.parametrize("parallelism", [1, 2, 4])
def test_tumbling_job_equals_kernel_and_duckdb(parallelism):
    table = events()
    out = _normalise(job(table, parallelism, Tumbling("1s")))
    assert rows(out) == rows(_normalise(kernel_run(table, Tumbling("1s"))))
    assert rows(out) == rows(_normalise(duckdb_tumbling(table, 1000)))


@pytest.mark.parametrize("parallelism", [1, 2])
def test_sliding_job_equals_kernel(parallelism):
    table = events(5000)
    window = Sliding("4s", "1s")
    out = _normalise(job(table, parallelism, window))
    assert rows(out) == rows(_normalise(kernel_run(table, window)))
    # and an independent reference: every row in each of its 4 windows, grouped by pandas
    df = table.to_pandas()
    parts = []
    for k in range(4):
        part = df.assign(start=(df.ts // 1000 - k) * 1000)
        parts.append(part)
    ref = pd.concat(parts).groupby(["start", "user"]).agg(n=("value", "size"), total=("value", "sum"),
                                                         top=("value", "max")).reset_index()
    got = out.to_pandas()
    got["start"] = got.window_start.astype("datetime64[ms]").astype("int64")
    got = got.sort_values(["start", "user"]).reset_index(drop=True)
    assert len(got) == len(ref)
    np.testing.assert_array_equal(got[["start", "user", "n"]].to_numpy(), ref[["start", "user", "n"]].to_numpy())
    np.testing.assert_allclose(got["total"], ref["total"], rtol=1e-9)
    np.testing.assert_array_equal(got["top"], ref["top"])


def test_late_rows_go_to_side_output_and_nothing_is_lost():
    table = events(3000)
    late_rows = pa.table({"user": [1, 2], "ts": [0, 5], "value": [1.0, 2.0]})  # far behind
    env = fo.StreamEnvironment(parallelism=2)
    src = env.from_arrow(pa.concat_tables([table, late_rows]), batch_size=500)
    windowed = (src.with_watermark("ts", max_out_of_orderness="2s").key_by("user")
                .window(Tumbling("1s")).aggregate(n=agg.count()))
    windowed.side_output("late").sink_to(lambda b: late_seen.append(b))
    late_seen: list = []
    result_sink = []
    windowed.sink_to(lambda b: result_sink.append(b))
    env.execute()
    late = pa.Table.from_batches(late_seen)
    counted = sum(pc.sum(b["n"]).as_py() for b in result_sink)
    assert counted + late.num_rows == table.num_rows + 2
    assert sorted(late.column("ts").to_pylist()) == [0, 5]
    assert "reason" in late.schema.names


def test_running_aggregate_per_key():
    table = events(4000, keys=20)
    env = fo.StreamEnvironment(parallelism=2)
    out = env.from_arrow(table, batch_size=300).key_by("user").aggregate(
        n=agg.count(), total=agg.sum("value"), last=agg.last("value")).collect()
    # the last update per key is the final aggregate
    df = out.to_pandas().groupby("user").agg(n=("n", "max"))
    ref = table.to_pandas().groupby("user").agg(n=("value", "size"), total=("value", "sum"),
                                                last=("value", "last"))
    assert df["n"].to_dict() == ref["n"].to_dict()
    final = out.to_pandas().sort_values("n").groupby("user").tail(1).set_index("user").sort_index()
    np.testing.assert_allclose(final["total"], ref.loc[final.index, "total"], rtol=1e-9)
    np.testing.assert_allclose(final["last"], ref.loc[final.index, "last"])


class CountAndAlert(fo.KeyedProcessFunction):
    """Per key: a running count in state; a timer 1 s after each key's first row."""

    def process_batch(self, batch, ctx):
        seen = ctx.state("seen", pa.int64())
        before = pc.fill_null(seen.value(batch), 0)
        counts = pc.add(before, ctx.running_count(batch))
        first = pc.equal(before, 0)
        new_keys = batch.filter(pc.and_(first, pc.equal(ctx.running_count(batch), 1)))
        if new_keys.num_rows:
            ctx.register_timer(new_keys, pc.add(new_keys["ts"], 1000))
        seen.update(batch, counts)
        return pa.record_batch({"user": batch["user"], "count": counts})

    def on_timer(self, timestamps, keys, ctx):
        seen = ctx.state("seen", pa.int64())
        return pa.record_batch({"user": keys["user"], "fired_at": timestamps,
                                "count_then": seen.value(keys)})


@pytest.mark.parametrize("parallelism", [1, 3])
def test_keyed_process_function_state_and_timers(parallelism):
    table = events(3000, keys=25, disorder_ms=0)
    env = fo.StreamEnvironment(parallelism=parallelism)
    out = (env.from_arrow(table, batch_size=200).with_watermark("ts").key_by("user")
           .process(CountAndAlert()).collect())
    df = table.to_pandas()
    df["expected"] = df.groupby("user").cumcount() + 1
    got = out.filter(pc.is_valid(out["count"])).to_pandas()
    assert sorted(got["count"].astype(int)) == sorted(df["expected"])
    # one timer per key, at its first row + 1 s; the count it saw = rows with ts <= watermark
    timers = out.filter(pc.is_valid(out["fired_at"])).to_pandas()
    first = df.groupby("user")["ts"].min() + 1000
    assert sorted(timers["user"]) == sorted(first.index)
    assert dict(zip(timers["user"], timers["fired_at"])) == first.to_dict()
    for user, fired, count in zip(timers["user"], timers["fired_at"], timers["count_then"]):
        assert count >= (df[df.user == user].ts <= fired - 1).sum()


def test_windowed_join_matches_duckdb():
    rng = np.random.default_rng(3)
    n = 2000
    left = pa.table({"k": rng.integers(0, 30, n), "ts": np.sort(rng.integers(0, 20_000, n)),
                     "a": rng.integers(0, 1000, n)})
    right = pa.table({"k": rng.integers(0, 30, n), "ts": np.sort(rng.integers(0, 20_000, n)),
                      "b": rng.integers(0, 1000, n)})
    env = fo.StreamEnvironment(parallelism=2)
    l_stream = env.from_arrow(left, batch_size=128).with_watermark("ts")
    r_stream = env.from_arrow(right, batch_size=128).with_watermark("ts")
    out = l_stream.join(r_stream).on("k").window(Tumbling("2s")).apply().collect()
    con = duckdb.connect()
    con.register("l", left)
    con.register("r", right)
    ref = con.sql("""SELECT l.k, l.a, r.b, (l.ts // 2000) * 2000 AS ws
                         FROM l JOIN r ON l.k = r.k AND l.ts // 2000 = r.ts // 2000""").to_arrow_table()
    got = Counter(zip(out["k"].to_pylist(), out["a"].to_pylist(), out["b"].to_pylist(),
                      pc.cast(out["window_start"], pa.int64()).to_pylist()))
    want = Counter(zip(ref["k"].to_pylist(), ref["a"].to_pylist(), ref["b"].to_pylist(), ref["ws"].to_pylist()))
    assert got == want and len(got) > 0


def failing_process_batch(batch):
    raise ArithmeticError("bad row")


class Failing(fo.KeyedProcessFunction):
    def process_batch(self, batch, ctx):
        failing_process_batch(batch)


def test_process_failure_reports_user_frame():
    env = fo.StreamEnvironment(parallelism=2)
    with pytest.raises(fo.JobFailed, match="process\\(Failing\\)") as info:
        env.from_arrow(events(100)).key_by("user").process(Failing()).collect()
    assert info.value.__cause__.__traceback__.tb_frame.f_code.co_name == "process_batch"


def test_window_needs_event_time():
    env = fo.StreamEnvironment()
    with pytest.raises(ValueError, match="with_watermark"):
        env.from_arrow(events(10)).key_by("user").window(Tumbling("1s")).aggregate(n=agg.count())
    with pytest.raises(KeyError, match="time column 'nope' not in stream"):  # at the call, not in the job
        env.from_arrow(events(10)).with_watermark("nope")


@pytest.mark.parametrize("window", [Tumbling("5s"), Sliding("10s", "5s")])
def test_sketch_aggregates_through_the_job(window):
    table = events(20_000, keys=30)
    table = table.append_column("item", pa.array(np.floor(table["value"].to_numpy()).astype(np.int64) * 7))
    env = fo.StreamEnvironment(parallelism=2)
    out = (env.from_arrow(table, batch_size=1000).with_watermark("ts", max_out_of_orderness="2s")
           .key_by("user").window(window)
           .aggregate(n=agg.count(), distinct=agg.approx_distinct("item", precision=12),
                      median=agg.approx_quantile("value", 0.5), top=agg.top_k("item", 3))
           .collect()).to_pandas()
    df = table.to_pandas()
    assigned = []
    for t in df.ts:
        assigned.append([s for s, _ in window.assign(int(t))])
    df["start"] = assigned
    df = df.explode("start")
    out["start"] = out.window_start.astype("datetime64[ms]").astype("int64")
    ref = df.groupby(["start", "user"]).agg(n=("item", "size"), distinct=("item", "nunique"),
                                           median=("value", "median"))
    got = out.set_index(["start", "user"]).sort_index()
    assert len(got) == len(ref)
    np.testing.assert_array_equal(got["n"].to_numpy(), ref["n"].to_numpy())
    # HLL at precision 12 on small sets is near exact; KLL's rank error is about 1.65% at k=200
    assert (abs(got["distinct"] - ref["distinct"]) <= np.maximum(1, 0.05 * ref["distinct"])).all()
    groups = df.groupby(["start", "user"])["value"]
    for key, values in list(groups)[:200]:
        est = got.loc[key, "median"]
        rank = (values.to_numpy() <= est).mean()
        assert abs(rank - 0.5) <= 0.5 / len(values) ** 0.5 + 0.05
    # top-3 counts are exact for these small windows (capacity >> distinct items)
    for key, items in list(df.groupby(["start", "user"])["item"])[:200]:
        counts = items.value_counts()
        top = got.loc[key, "top"]
        assert [e["count"] for e in top] == sorted(counts.to_numpy().tolist(), reverse=True)[:3]


def test_windowed_join_with_sliding_windows_that_do_not_divide():
    """Sliding 3 s every 2 s: a row belongs to one or two windows, never to one that
    does not contain it (reference: pandas over explicit window starts)."""
    rng = np.random.default_rng(9)
    n = 600
    left = pa.table({"k": rng.integers(0, 10, n), "ts": np.sort(rng.integers(0, 20_000, n)),
                     "a": np.arange(n)})
    right = pa.table({"k": rng.integers(0, 10, n), "ts": np.sort(rng.integers(0, 20_000, n)),
                      "b": np.arange(n)})
    env = fo.StreamEnvironment(parallelism=2)
    out = (env.from_arrow(left, batch_size=64).with_watermark("ts")
           .join(env.from_arrow(right, batch_size=64).with_watermark("ts"))
           .on("k").window(Sliding("3s", "2s")).apply().collect())

    def windows_of(df):
        parts = [df.assign(ws=(df.ts // 2000 - j) * 2000) for j in range(2)]
        both = pd.concat(parts)
        return both[(both.ws <= both.ts) & (both.ts < both.ws + 3000)]

    ref = windows_of(left.to_pandas()).merge(windows_of(right.to_pandas()), on=["k", "ws"])
    got = Counter(zip(out["a"].to_pylist(), out["b"].to_pylist(),
                      pc.cast(out["window_start"], pa.int64()).to_pylist()))
    assert got == Counter(zip(ref.a, ref.b, ref.ws)) and len(got) > 0


@pytest.mark.parametrize("type_, make", [
    (pa.int64(), lambda r: r.integers(0, 100, 1).item()),
    (pa.string(), lambda r: f"s{r.integers(0, 100)}"),
    (pa.timestamp("ms"), lambda r: int(r.integers(0, 10**12))),
])
def test_value_state_against_a_dict_model(type_, make):
    rng = np.random.default_rng(4)
    ctx = ProcessContext(("k",), 0, 1)
    state = ctx.state("s", type_)
    model: dict = {}
    for step in range(30):
        keys = rng.integers(0, 40, 25).tolist()
        batch = pa.record_batch({"k": pa.array(keys, pa.int64())})
        got = state.value(batch).cast(type_).to_pylist()
        want = pa.array([model.get(k) for k in keys], type_).to_pylist()
        assert got == want
        if step % 5 == 4:
            state.clear(batch)
            for k in keys:
                model.pop(k, None)
            continue
        vals = [None if rng.random() < 0.2 else make(rng) for _ in keys]
        state.update(batch, pa.array(vals, type_))
        for k, v in zip(keys, vals):
            model[k] = v  # the last row of a key wins, a null unsets it
        model = {k: v for k, v in model.items() if v is not None}


def test_windowed_join_refuses_an_event_time_beyond_int64_windows():
    env = fo.StreamEnvironment()
    left = pa.table({"k": [1, 1], "t": [5, -2**63]})
    right = pa.table({"k": [1], "t": [5]})
    with pytest.raises(fo.JobFailed) as info:
        (env.from_arrow(left).with_watermark("t").join(env.from_arrow(right).with_watermark("t"))
         .on("k").window(Tumbling("2s")).apply().collect())
    cause = info.value.__cause__
    assert isinstance(cause, ValueError) and "'t'" in str(cause) and str(-2**63) in str(cause)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 3), st.lists(st.integers(1, 400), min_size=1, max_size=8), st.integers(0, 2**31))
def test_window_all_counts_every_row_once_in_one_task(parallelism, sizes, seed):
    # in-order event time, any batch split and parallelism: one window per 1 s over all rows, as pandas gives
    rng = np.random.default_rng(seed)
    n = sum(sizes)
    ts = np.sort(rng.integers(0, 10_000, n)).astype(np.int64)
    v = rng.integers(-100, 100, n)
    batches, at = [], 0
    for size in sizes:
        batches.append(pa.record_batch({"ts": ts[at:at + size], "v": v[at:at + size]}))
        at += size
    env = fo.StreamEnvironment(parallelism=parallelism)
    got = (env.from_arrow(batches).with_watermark("ts").window_all(Tumbling(1000))
           .aggregate(n=agg.count(), s=agg.sum("v")).collect())
    ref = pd.DataFrame({"w": ts // 1000 * 1000, "v": v}).groupby("w")["v"].agg(["count", "sum"]).reset_index()
    got = got.to_pandas().sort_values("window_start")
    assert got["window_start"].astype("int64").tolist() == ref["w"].tolist()
    assert got["n"].tolist() == ref["count"].tolist() and got["s"].tolist() == ref["sum"].tolist()
    assert len([t for t in env.last_result.metrics if "window_all(Tumbling)" in t]) == 1  # one task


def test_window_all_needs_event_time():
    env = fo.StreamEnvironment()
    with pytest.raises(ValueError, match="with_watermark.*window_all"):
        env.from_arrow(pa.table({"ts": [1], "v": [1]})).window_all(Tumbling(1000)).aggregate(n=agg.count())
