"""Sources say how far behind they are (``Reader.backlog``): the rows ready
and not read. The references are the inputs themselves (rows of the table or
files, minus those read) and the pacing schedule (rate x elapsed time)."""
from __future__ import annotations

import time

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

import fastops as fo
from fastops.connectors.base import END
from fastops.connectors.collections import TableSource
from fastops.connectors.files import FileSource
from fastops.connectors.generators import GeneratorSource


def table(n: int) -> pa.Table:
    return pa.table({"id": np.arange(n, dtype=np.int64)})


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 200), st.integers(1, 30), st.integers(1, 4), st.integers(0, 10))
def test_a_table_readers_backlog_is_its_unread_rows(n, batch_size, p, reads):
    source = TableSource(table(n), batch_size)
    for i in range(p):
        reader = source.open(i, p)
        mine = sum(b.num_rows for b in source.batches[i::p])
        read = 0
        for _ in range(reads):
            assert reader.backlog() == mine - read
            b = reader.read()
            if b is END:
                break
            read += b.num_rows
        # a dict position (after a rescale) counts alike
        again = source.open(0, 1, source.rescale_positions([reader.position()], 1)[0]) if p == 1 else None
        if again is not None:
            assert again.backlog() == mine - read


def test_a_parquet_readers_backlog_is_its_unread_rows_and_csv_cannot_say(tmp_path):
    pq.write_table(table(250), tmp_path / "a.parquet", row_group_size=100)
    pq.write_table(table(70), tmp_path / "b.parquet")
    source = FileSource(str(tmp_path), "parquet", batch_size=40)
    readers = [source.open(i, 2) for i in range(2)]
    left = [100 + 50, 100 + 70]  # fragments 0, 2 and 1, 3 (row groups of 100, 100, 50 and 70 rows)
    assert [r.backlog() for r in readers] == left
    b = readers[1].read()
    assert readers[1].backlog() == left[1] - b.num_rows
    while readers[0].read() is not END:
        pass
    assert readers[0].backlog() == 0
    pacsv.write_csv(table(5), tmp_path / "c.csv")
    assert FileSource(str(tmp_path / "c.csv"), "csv").open(0, 1).backlog() is None


def batches_of(rows: int, count: int):
    def gen():
        for k in range(count):
            yield pa.record_batch({"id": np.arange(k * rows, (k + 1) * rows)})
    return gen


def test_a_paced_generator_behind_its_schedule_reports_how_far_and_keeps_it_across_a_restore():
    source = GeneratorSource(batches_of(100, 1000), rate=10_000, deterministic=True)
    reader = source.open(0, 1)
    assert reader.backlog() == 0  # the schedule starts at the first read
    reader.read()
    time.sleep(0.2)  # nobody reads: 0.2 s x 10000 rows/s fall due
    assert 1500 <= reader.backlog() <= 2500
    position = reader.position()
    # a restore in this process reads on from the same schedule: still behind, and it reads at once
    again = source.open(0, 1, position)
    assert again.backlog() >= 1500
    t0 = time.perf_counter()
    for _ in range(10):
        assert again.read() is not None
    assert time.perf_counter() - t0 < 0.05  # behind: no pacing sleep
    # a fresh start begins a new schedule
    assert source.open(0, 1).backlog() == 0
    # an unpaced generator cannot say
    assert GeneratorSource(batches_of(1, 1)).open(0, 1).backlog() is None


def slow(batch):
    time.sleep(batch.num_rows * 0.0005)  # at most ~2000 rows/s, waiting (GIL released)
    return batch


def test_a_job_whose_source_falls_behind_shows_the_backlog_and_its_growth_in_the_metrics():
    env = fo.StreamEnvironment(parallelism=1, executor="threads")
    env.from_generator(batches_of(100, 100_000), rate=6000).map(slow, name="slow").sink_to(lambda b: None)
    client = env.execute_async()
    try:
        time.sleep(2.5)
        source = client.metrics("2s")["operators"][0]
    finally:
        client.cancel()
    assert source["is_source"]
    # offered 6000 rows/s, read about 2000: the backlog grows by about 4000 rows/s
    assert source["backlog"] > 4000
    offered = source["rows_in_per_s"] + source["backlog_growth_per_s"]
    assert 4500 < offered < 7500


def test_a_generator_paced_in_steps_reads_as_its_schedule_offers():
    source = GeneratorSource(batches_of(50, 10_000), rate=[(0, 1000), (0.3, 5000)])
    reader = source.open(0, 1)
    t0 = time.perf_counter()
    rows = 0
    while time.perf_counter() - t0 < 0.6:
        batch = reader.read()  # None: ahead of the schedule, it waited
        rows += 0 if batch is None else batch.num_rows
    # 0.3 s at 1000 rows/s then 0.3 s at 5000: 1800 rows (and one batch read ahead of the clock check)
    assert 1500 <= rows <= 2100
