"""The runtime and the DataStream API without windows: transformations,
chaining, exchanges, flow control, watermarks, failures."""
from __future__ import annotations

import threading
import time
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import fastops as fo
from fastops.core.messages import MAX_WATERMARK
from fastops.operators import Operator


def rows_of(table: pa.Table) -> Counter:
    return Counter(tuple(r.values()) for r in table.to_pylist())


def make_table(n: int = 1000, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table({
        "k": rng.integers(0, 50, n),
        "v": rng.normal(size=n),
        "s": pa.array([f"s{i % 13}" for i in range(n)]),
    })


@pytest.mark.parametrize("parallelism", [1, 2, 4])
def test_stateless_pipeline_matches_reference(parallelism):
    table = make_table()
    env = fo.StreamEnvironment(parallelism=parallelism)
    out = (env.from_arrow(table, batch_size=97)
           .rebalance()
           .filter(fo.col("v") > 0)
           .with_columns(w=pc.multiply(fo.col("v"), 2.0))
           .flat_map(lambda b: [b.slice(0, 5), b.slice(5)])
           .key_by("k")
           .map(lambda b: b)
           .collect())
    expected = [(r["k"], r["v"], r["s"], r["v"] * 2.0) for r in table.to_pylist() if r["v"] > 0]
    assert rows_of(out) == Counter(expected)


def test_select_and_filter_function():
    env = fo.StreamEnvironment()
    table = make_table(200)
    out = (env.from_arrow(table, batch_size=50)
           .filter(lambda b: pc.equal(b["s"], "s1"))
           .select("k", double=pc.multiply(fo.col("k"), 2))
           .collect())
    assert out.schema.names == ["k", "double"]
    expected = [(r["k"], r["k"] * 2) for r in table.to_pylist() if r["s"] == "s1"]
    assert rows_of(out) == Counter(expected)


def test_union_of_sources():
    env = fo.StreamEnvironment(parallelism=2)
    a, b = make_table(300, 1), make_table(200, 2)
    out = env.from_arrow(a, batch_size=64).union(env.from_arrow(b, batch_size=64)).collect()
    assert rows_of(out) == rows_of(a) + rows_of(b)


def test_explain_shows_chains_and_exchanges():
    env = fo.StreamEnvironment(parallelism=2)
    s = (env.from_arrow(make_table(10)).filter(fo.col("v") > 0).map(lambda b: b, name="double")
         .key_by("k").map(lambda b: b, name="after_key"))
    text = s.explain()
    assert "from_arrow -> filter -> double  [chained parallelism 1]" in text
    assert "hash(k) exchange" in text
    assert "after_key -> collect  [chained parallelism 2]" in text


class KeyRecorder(Operator):
    """Records which task saw which keys, and the watermarks it got."""

    seen: dict = {}
    lock = threading.Lock()

    def process(self, batch):
        with self.lock:
            self.seen.setdefault(self.ctx.task_index, set()).update(batch.column("k").to_pylist())
        return [batch]


def test_key_by_sends_each_key_to_one_task():
    KeyRecorder.seen = {}
    env = fo.StreamEnvironment(parallelism=4)
    table = make_table(5000)
    out = env.from_arrow(table, batch_size=100).key_by("k").transform("rec", KeyRecorder).collect()
    assert out.num_rows == table.num_rows
    tasks_of_key = Counter(k for keys in KeyRecorder.seen.values() for k in keys)
    assert set(tasks_of_key) == set(table.column("k").to_pylist())
    assert all(c == 1 for c in tasks_of_key.values())
    # and the owner is the key group owner
    for task, keys in KeyRecorder.seen.items():
        ids = fo.partition_ids(pa.table({"k": pa.array(sorted(keys), pa.int64())}), "k", 4,
                               scheme="key_group", max_parallelism=128)
        assert set(ids.tolist()) == {task}


def test_bounded_memory_with_slow_sink():
    batch = pa.record_batch({"x": np.arange(100_000, dtype=np.int64)})  # 800 kB
    n_batches = 100  # 10M rows
    peak = [0]

    def gen():
        for i in range(n_batches):
            yield pa.record_batch({"x": pc.add(batch["x"], i)})

    def slow(b):
        peak[0] = max(peak[0], pa.total_allocated_bytes())
        time.sleep(0.002)

    base = pa.total_allocated_bytes()
    env = fo.StreamEnvironment(parallelism=1, threads=True, channel_capacity=2)
    env.from_generator(gen).rebalance().sink_to(slow)
    result = env.execute("slow sink")
    assert result.rows_out == 10_000_000
    # at most a few batches alive at once, never the 80 MB stream
    assert peak[0] - base < 12 * batch.nbytes
    source = next(m for name, m in result.metrics.items() if name.startswith("from_generator"))
    assert source.backpressured_s > 0.05
    sink = next(m for name, m in result.metrics.items() if name.startswith("rebalance"))
    assert sink.busy_ms_per_s > 500


class WatermarkRecorder(Operator):
    marks: list = []
    reached = threading.Event()
    target = None

    def on_watermark(self, t):
        WatermarkRecorder.marks.append(t)
        if self.target is not None and t >= self.target and t != MAX_WATERMARK:
            WatermarkRecorder.reached.set()
        return []


def _ts_batch(ts):
    return pa.record_batch({"ts": pa.array(ts, pa.int64())})


def test_watermark_is_min_over_inputs_and_never_goes_back():
    WatermarkRecorder.marks = []
    WatermarkRecorder.target = None
    env = fo.StreamEnvironment(parallelism=1, threads=False)
    fast = env.from_arrow([_ts_batch([1000]), _ts_batch([5000]), _ts_batch([9000])]).with_watermark("ts")
    slow = env.from_arrow([_ts_batch([2000]), _ts_batch([3000]), _ts_batch([2500])]).with_watermark("ts")
    fast.union(slow).transform("rec", WatermarkRecorder).collect()
    marks = [m for m in WatermarkRecorder.marks if m != MAX_WATERMARK]
    assert marks == sorted(marks) and len(set(marks)) == len(marks)
    # min over inputs (fast 999, 4999, 8999; slow 1999, 2999, 2999); once the slow
    # input ends, it stops holding the watermark back
    assert marks == [999, 1999, 2999, 8999]
    assert WatermarkRecorder.marks[-1] == MAX_WATERMARK


@pytest.mark.parametrize("idle_timeout", [None, "50ms"])
def test_idle_input_stops_holding_watermark_back(idle_timeout):
    WatermarkRecorder.marks = []
    WatermarkRecorder.reached = threading.Event()
    WatermarkRecorder.target = 50_000
    wait = 3.0 if idle_timeout else 0.5

    def busy():
        for i in range(1, 101):
            yield _ts_batch([i * 1000])
            time.sleep(0.002)

    def stalled():
        yield _ts_batch([10])
        t0 = time.perf_counter()
        while not WatermarkRecorder.reached.is_set() and time.perf_counter() - t0 < wait:
            yield None  # no data right now
            time.sleep(0.005)

    env = fo.StreamEnvironment(parallelism=1, threads=True)
    a = env.from_generator(busy).with_watermark("ts", idle_timeout=idle_timeout)
    b = env.from_generator(stalled).with_watermark("ts", idle_timeout=idle_timeout)
    a.union(b).transform("rec", WatermarkRecorder).collect()
    assert WatermarkRecorder.reached.is_set() == (idle_timeout is not None)


def broken_map(batch):
    return batch.append_column("y", pa.array([1 / 0] * batch.num_rows))


def test_failure_in_map_names_operator_and_shows_user_frame_first():
    env = fo.StreamEnvironment(parallelism=2)
    s = env.from_arrow(make_table(100), batch_size=10).key_by("k").map(broken_map)
    with pytest.raises(fo.JobFailed) as info:
        s.collect()
    err = info.value
    assert "map(broken_map)" in str(err) and "ZeroDivisionError" in str(err)
    assert isinstance(err.__cause__, ZeroDivisionError)
    assert err.__cause__.__traceback__.tb_frame.f_code.co_name == "broken_map"
    assert isinstance(err.batch, pa.RecordBatch) and err.batch.num_rows > 0
    assert "[" in err.task and "/2]" in err.task


@pytest.mark.parametrize("threads", [False, True])
def test_failure_in_filter_and_sink(threads):
    env = fo.StreamEnvironment(threads=threads)

    def bad_filter(batch):
        raise ValueError("nope")

    with pytest.raises(fo.JobFailed) as info:
        env.from_arrow(make_table(10)).filter(bad_filter).collect()
    assert info.value.__cause__.__traceback__.tb_frame.f_code.co_name == "bad_filter"

    def bad_sink(batch):
        raise RuntimeError("disk full")

    env.from_arrow(make_table(10)).sink_to(bad_sink)
    with pytest.raises(fo.JobFailed, match="disk full") as info:
        env.execute()
    assert info.value.__cause__.__traceback__.tb_frame.f_code.co_name == "bad_sink"


def test_failure_on_a_batch_python_cannot_print():
    """The batch in the error is shown even when its values do not fit Python
    objects (a timestamp past year 9999): the user's error is not masked."""
    def bad_map(batch):
        raise ValueError("user says no")

    table = pa.table({"k": [1, 2], "ts": pa.array([5, 2**62], pa.timestamp("ms"))})
    with pytest.raises(fo.JobFailed, match="user says no") as info:
        fo.StreamEnvironment().from_arrow(table).map(bad_map).collect()
    assert "out of range" in str(info.value) and "1970-01-01" in str(info.value)
    assert info.value.__cause__.__traceback__.tb_frame.f_code.co_name == "bad_map"


def test_wrong_return_type_is_explained():
    env = fo.StreamEnvironment()
    with pytest.raises(fo.JobFailed, match="must return a pyarrow.RecordBatch, got list"):
        env.from_arrow(make_table(10)).map(lambda b: [1, 2]).collect()
    with pytest.raises(fo.JobFailed, match="mask has 3 values for a batch of 10 rows"):
        env.from_arrow(make_table(10)).filter(lambda b: np.ones(3, bool)).collect()

    def shape_shifter(batch):
        return batch if batch.column("k")[0].as_py() % 2 else batch.select(["k"])

    with pytest.raises(fo.JobFailed, match=r"schema \(k: int64\) but earlier batches had \(k: int64, v: double"):
        env.from_arrow(pa.table({"k": [1, 2], "v": [1.0, 2.0]}), batch_size=1).map(shape_shifter).collect()


def test_failure_stops_all_threads_without_hanging():
    stop = threading.Event()

    def endless():
        while not stop.is_set():
            yield pa.record_batch({"k": np.arange(1000), "v": np.ones(1000)})

    def explode(batch):
        raise KeyError("boom")

    env = fo.StreamEnvironment(parallelism=2)
    before = threading.active_count()
    t0 = time.perf_counter()
    with pytest.raises(fo.JobFailed):
        env.from_generator(endless).key_by("k").map(explode).collect()
    stop.set()
    assert time.perf_counter() - t0 < 10
    assert threading.active_count() == before


def test_metrics_are_reported():
    env = fo.StreamEnvironment(parallelism=2)
    env.from_arrow(make_table(1000), batch_size=100).key_by("k").map(lambda b: b).sink_to(lambda b: None)
    result = env.execute("metrics")
    assert result.rows_in == 1000 and result.rows_out == 1000
    downstream = [m for name, m in result.metrics.items() if not name.startswith("from_arrow")]
    assert sum(m.rows_in for m in downstream) == 1000
    for m in result.metrics.values():
        assert 0 <= m.busy_ms_per_s <= 1000.0 + 1e-6
        d = m.as_dict()
        assert {"busy_ms_per_s", "idle_ms_per_s", "backpressured_ms_per_s", "rows_in", "cpu_s"} <= set(d)


@pytest.mark.parametrize("threads", [True, False])
def test_cpu_time_is_counted_per_task(threads):
    """A task that burns a known amount of CPU shows at least that much, an
    idle one far less, and no task more than the process used."""
    burn_s = 0.15

    def burn(b):
        t0 = time.thread_time()
        while time.thread_time() - t0 < burn_s / 4:
            pass
        return b

    env = fo.StreamEnvironment(parallelism=1, threads=threads)
    env.from_arrow(make_table(400), batch_size=100).rebalance().map(burn, name="burn") \
        .rebalance().sink_to(lambda b: None)
    c0 = time.process_time()
    result = env.execute("cpu")
    process_cpu = time.process_time() - c0
    cpu = {name.split("[")[0]: m.cpu_s for name, m in result.metrics.items()}
    burner = next(v for k, v in cpu.items() if "burn" in k)
    others = [v for k, v in cpu.items() if "burn" not in k]
    assert burner >= burn_s
    assert all(v < burn_s / 2 for v in others)
    assert sum(cpu.values()) <= process_cpu + 0.01


def test_file_sources_and_sinks_round_trip(tmp_path):
    table = make_table(1000)
    env = fo.StreamEnvironment(parallelism=2)
    env.from_arrow(table, batch_size=128).key_by("k").map(lambda b: b).sink_to_parquet(str(tmp_path / "pq"))
    env.execute()
    back = env.from_parquet(str(tmp_path / "pq"), batch_size=100).collect()
    assert rows_of(back) == rows_of(table)
    env.from_parquet(str(tmp_path / "pq" / "*.parquet")).sink_to_ipc(str(tmp_path / "ipc"))
    env.execute()
    assert rows_of(env.from_ipc(str(tmp_path / "ipc")).collect()) == rows_of(table)
    import pyarrow.csv as csv
    csv.write_csv(table, str(tmp_path / "t.csv"))
    assert rows_of(env.from_csv(str(tmp_path / "t.csv")).collect()) == rows_of(table)


def test_sources_from_collection_and_pandas():
    env = fo.StreamEnvironment()
    out = env.from_collection([(1, "a"), (2, "b")], schema=[("id", pa.int64()), ("data", pa.string())]).collect()
    assert out.to_pylist() == [{"id": 1, "data": "a"}, {"id": 2, "data": "b"}]
    import pandas as pd
    df = pd.DataFrame({"x": [1, 2, 3]})
    assert env.from_pandas(df).to_pandas()["x"].tolist() == [1, 2, 3]
    with pytest.raises(FileNotFoundError):
        env.from_parquet("/nonexistent/dir")
    with pytest.raises(ValueError, match="needs a schema"):
        env.from_collection([(1, 2)])


def test_rate_limited_generator():
    def gen():
        for _ in range(5):
            yield pa.record_batch({"x": np.arange(1000)})

    env = fo.StreamEnvironment()
    t0 = time.perf_counter()
    out = env.from_generator(gen, rate=20_000).collect()
    assert out.num_rows == 5000
    assert time.perf_counter() - t0 >= 0.2  # 5000 rows at 20k rows/s


def test_live_metrics_and_print_sink(capsys):
    snapshots = []

    def gen():
        for i in range(20):
            time.sleep(0.02)
            yield pa.record_batch({"k": [i], "ts": [i * 1000]})

    env = fo.StreamEnvironment(parallelism=1, threads=True)
    env.from_generator(gen).with_watermark("ts").print()
    env.execute(progress=lambda ms: snapshots.append([(m.task, m.rows_in, m.watermark) for m in ms]))
    assert len(snapshots) >= 2
    rows_seen = [sum(r for _, r, _ in s) for s in snapshots]
    assert rows_seen == sorted(rows_seen) and rows_seen[-1] == 20
    assert snapshots[-1][0][2] == 18_999  # the source task's current watermark
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == ["+I[0, 0]", "+I[1, 1000]"] and len(out) == 20


def test_the_documented_example(tmp_path):
    """The DataStream example of the docs, on a small Parquet directory."""
    import pyarrow.parquet as pq

    rng = np.random.default_rng(5)
    n = 5000
    events_dir = tmp_path / "events"
    events_dir.mkdir()
    table = pa.table({"user_id": rng.integers(0, 40, n), "ts": np.arange(n, dtype=np.int64) * 30,
                      "value": rng.normal(1, 2, n)})
    for i, part in enumerate(table.to_batches(max_chunksize=1000)):
        pq.write_table(pa.Table.from_batches([part]), events_dir / f"part-{i}.parquet")
    env = fo.StreamEnvironment(parallelism=2)
    events = env.from_parquet(str(events_dir), batch_size=65536).with_watermark("ts", max_out_of_orderness="2s")
    per_user = (events.filter(fo.col("value") > 0)
                      .key_by("user_id")
                      .window(fo.Tumbling("1 min"))
                      .aggregate(pops=fo.agg.count(), total=fo.agg.sum("value")))
    per_user.sink_to_parquet(str(tmp_path / "out"))
    result = env.execute("rewards")
    assert result.rows_in == n and result.duration_s > 0
    written = pq.read_table(str(tmp_path / "out")).to_pandas()
    table_out = per_user.collect().to_pandas()
    df = table.to_pandas()
    df = df[df.value > 0]
    ref = df.groupby([df.ts // 60_000, "user_id"]).agg(pops=("value", "size"), total=("value", "sum"))
    for got in (written, table_out):
        assert len(got) == len(ref)
        got = got.assign(w=got.window_start.astype("datetime64[ms]").astype("int64") // 60_000)
        merged = got.set_index(["w", "user_id"]).sort_index()
        np.testing.assert_array_equal(merged["pops"].to_numpy(), ref["pops"].to_numpy())
        np.testing.assert_allclose(merged["total"].to_numpy(), ref["total"].to_numpy(), rtol=1e-9)


def test_several_table_sinks_in_one_job():
    env = fo.StreamEnvironment(parallelism=2)
    s = env.from_arrow(make_table(500), batch_size=50)
    pos = s.filter(fo.col("v") > 0).sink_to_table("pos")
    neg = s.filter(fo.col("v") <= 0).sink_to_table("neg")
    env.execute()
    assert pos.table().num_rows + neg.table().num_rows == 500
    assert pc.min(pos.table()["v"]).as_py() > 0 >= pc.max(neg.table()["v"]).as_py()


class Tagger(Operator):
    """Marks each row with the input it came from."""

    def process_input(self, input_index, batch):
        return [batch.append_column("side", pa.array([input_index] * batch.num_rows, pa.int64()))]


def test_connect_two_inputs_by_key_and_gather():
    env = fo.StreamEnvironment(parallelism=3)
    a, b = make_table(300, 1), make_table(200, 2)
    both = env.from_arrow(a, batch_size=50).connect(env.from_arrow(b, batch_size=50), "tag", Tagger, keys=["k"])
    gathered = both.transform("gather", Operator, parallelism=1, partitioning="rebalance")
    out = gathered.collect()
    assert out.num_rows == 500
    assert sorted(out.filter(pc.equal(out["side"], 0))["v"].to_pylist()) == sorted(a["v"].to_pylist())
    assert "gather -> collect  [chained parallelism 1]" in gathered.explain()


def test_when_every_live_input_is_idle_the_watermark_is_the_greatest_of_theirs():
    from fastops.runtime.tasks import WatermarkTracker

    w = WatermarkTracker(3)
    assert w.on_watermark(0, 100) is None and w.on_watermark(1, 50) is None
    assert w.on_watermark(2, 70) == 50
    assert w.on_idle(1) == 70  # the least of the inputs still active
    assert w.on_idle(0) is None  # still 70
    assert w.on_idle(2) == 100  # all idle: the most advanced (as Flink's valve), never backwards
    assert w.on_watermark(1, 60) is None  # active again, behind: the watermark stays
    assert w.on_end(1) is None and w.all_idle


def test_windows_close_when_every_source_goes_idle():
    # two sources stop sending (without ending): the windows up to the furthest watermark fire
    fired = threading.Event()
    reached: list[int] = []

    def source(last):
        def gen():
            yield _ts_batch([0, 500, last])
            while not fired.is_set():
                yield None
                time.sleep(0.005)
        return gen

    env = fo.StreamEnvironment(parallelism=1, threads=True)
    a = env.from_generator(source(2_500)).with_watermark("ts", idle_timeout="50ms")
    b = env.from_generator(source(1_200)).with_watermark("ts", idle_timeout="50ms")

    def seen(batch):
        reached.extend(batch.column("window_end").cast(pa.int64()).to_pylist())
        if max(reached) >= 2_000:
            fired.set()

    a.union(b).key_by("ts").window(fo.Tumbling(1000)).aggregate(n=fo.agg.count()).sink_to(seen)
    client = env.execute_async()
    assert fired.wait(10), f"windows closed only up to {max(reached, default=None)}"
    client.cancel()
