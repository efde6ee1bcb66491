"""``execute(progress=True)``: the live bar's text, its total from the
sources, and a resumed job whose bar still ends at the total."""
from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastops as fo
from fastops.connectors.base import END
from fastops.connectors.collections import TableSource
from fastops.connectors.files import FileSource
from fastops.runtime.progress import Progress, source_rows_at, source_total_rows


def _rows(n: int) -> list[tuple]:
    return [(i % 7, i * 10, float(i)) for i in range(n)]


def _windowed_sum(env: fo.StreamEnvironment, stream) -> object:
    return (stream.with_watermark("ts").key_by("k").window(fo.Tumbling("1s"))
            .aggregate(total=fo.agg.sum("v")).sink_to_table("sums"))


def test_execute_progress_true_draws_the_bar_on_stderr(capsys):
    env = fo.StreamEnvironment()
    out = _windowed_sum(env, env.from_collection(_rows(1000), schema=["k", "ts", "v"], batch_size=100))
    env.execute("my job", progress=True)
    err = capsys.readouterr().err
    assert "my job" in err
    assert "1,000/1,000 rows" in err  # ends at the total the collection knows
    assert "rows/s" in err and "watermark" in err
    assert out.table().num_rows == 7 * 10  # the job itself is unchanged


def test_plain_bar_ends_at_100_percent(capsys, without_rich_or_tqdm):
    env = fo.StreamEnvironment()
    env.from_collection(_rows(500), schema=["k", "ts", "v"], batch_size=7).sink_to_table()
    env.execute("plain", progress=True)
    err = capsys.readouterr().err
    last = err.rstrip("\n").split("\r")[-1]
    assert last.startswith("plain 100.0%")
    assert "500/500 rows" in last
    assert err.endswith("\n")


def test_no_progress_by_default(capsys):
    env = fo.StreamEnvironment()
    env.from_collection(_rows(10), schema=["k", "ts", "v"]).sink_to_table()
    env.execute()
    assert capsys.readouterr().err == ""


def test_open_ended_bar_without_a_known_total(capsys, without_rich_or_tqdm):

    def gen():
        for i in range(5):
            yield pa.record_batch({"x": list(range(i * 10, i * 10 + 10))})

    env = fo.StreamEnvironment()
    env.from_generator(gen).sink_to_table()
    env.execute("gen", progress=True)
    last = capsys.readouterr().err.rstrip("\n").split("\r")[-1]
    assert last.startswith("gen  50 rows")
    assert "%" not in last


def test_totals_of_the_sources(tmp_path):
    table = pa.table({"x": np.arange(1234)})
    assert source_total_rows(TableSource(table, 100)) == 1234
    pq.write_table(table, tmp_path / "a.parquet", row_group_size=100)
    pq.write_table(table.slice(0, 66), tmp_path / "b.parquet")
    assert source_total_rows(FileSource(str(tmp_path), "parquet", 50)) == 1300
    (tmp_path / "c.csv").write_text("x\n1\n2\n")
    assert source_total_rows(FileSource(str(tmp_path / "c.csv"), "csv")) is None


def _read(reader, k: int) -> int:
    rows = 0
    for _ in range(k):
        b = reader.read()
        if b is END:
            break
        rows += b.num_rows
    return rows


@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 400), batch=st.integers(1, 50), p=st.integers(1, 4), k=st.integers(0, 30),
       data=st.data())
def test_rows_at_a_position_equal_the_rows_read(tmp_path_factory, n, batch, p, k, data):
    """A position taken after reading ``k`` batches covers exactly the rows read."""
    table = pa.table({"x": np.arange(n)})
    sources = [TableSource(table, batch)]
    d = tmp_path_factory.mktemp("pq")
    if n:
        pq.write_table(table, d / "t.parquet", row_group_size=max(1, n // 3))
        sources.append(FileSource(str(d), "parquet", batch))
    for source in sources:
        split_count = min(p, source.splits())
        i = data.draw(st.integers(0, split_count - 1))
        reader = source.open(i, split_count)
        rows = _read(reader, k)
        assert source_rows_at(source, i, split_count, reader.position()) == rows
        # and a reader reopened there reads the rest: the two parts make the split
        rest = _read(source.open(i, split_count, reader.position()), 10**6)
        assert rows + rest == _read(source.open(i, split_count), 10**6)


class _FailOnce:
    """A map that raises once ``rows`` rows passed (until disarmed), slowly
    enough for checkpoints to complete before that."""

    def __init__(self, rows: int):
        self.rows = rows
        self.seen = 0

    def __call__(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        import time

        time.sleep(0.002)
        self.seen += batch.num_rows
        if self.rows is not None and self.seen > self.rows:
            raise RuntimeError("injected failure")
        return batch


@pytest.mark.parametrize("kind", ["collection", "parquet"])
def test_a_resumed_job_bar_ends_at_the_total(tmp_path, kind):
    n = 4000
    table = pa.table({"k": np.arange(n) % 5, "ts": np.arange(n) * 10, "v": np.ones(n)})
    fail = _FailOnce(2500)

    def build():
        env = fo.StreamEnvironment(checkpoint_dir=str(tmp_path / "ck"), checkpoint_interval="10ms",
                                   threads=False)
        if kind == "parquet":
            pq.write_table(table, tmp_path / "t.parquet", row_group_size=700)
            src = env.from_parquet(str(tmp_path / "t.parquet"), batch_size=100)
        else:
            src = env.from_arrow(table, batch_size=100)
        _windowed_sum(env, src.map(fail, name="fail_once"))
        return env

    env = build()
    with pytest.raises(fo.JobFailed):
        env.execute("first")
    fail.rows = None
    env = build()
    buf = io.StringIO()
    bar = Progress(stream=buf, label="resumed")
    try:
        result = env.execute("resumed", progress=bar)
    finally:
        bar.close()
    assert result.restored_from is not None
    assert 0 < result.rows_in < n  # it did resume part-way
    assert bar.total == n
    assert bar.rows == n  # rows the checkpoint covered + rows read since
    assert f"{n:,}/{n:,} rows" in buf.getvalue()
    assert "checkpoints" in buf.getvalue()
    # the restored checkpoint covers the rows this run did not read
    assert n - result.rows_in == bar._restored[1] > 0


def test_bar_without_a_plan_counts_the_named_source_tasks():
    buf = io.StringIO()
    bar = Progress(total=10, stream=buf, sources=("src",), enabled=True)

    class M:
        def __init__(self, task, rows_in, watermark=None):
            self.task, self.rows_in, self.watermark = task, rows_in, watermark

    bar([M("src -> map[1/2]", 4, 1000), M("src -> map[2/2]", 6, 2000), M("window[1/1]", 99)])
    bar.close()
    assert bar.rows == 10
    assert "10/10 rows" in buf.getvalue() and "watermark 00:00:01" in buf.getvalue()


def test_parquet_source_bar_total_from_metadata(tmp_path, capsys):
    pq.write_table(pa.table({"x": np.arange(321)}), tmp_path / "t.parquet", row_group_size=50)
    env = fo.StreamEnvironment(parallelism=2)
    env.from_parquet(str(tmp_path / "t.parquet"), batch_size=20).sink_to_table()
    env.execute("files", progress=True)
    assert "321/321 rows" in capsys.readouterr().err


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # jobs and checkpoints write nothing into the checkout
