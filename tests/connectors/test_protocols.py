"""The connector protocols: the built-in sources and sinks satisfy them, a
source or sink that only has the right methods (no fastops base class) runs
in a job with checkpoints and restarts, and the sources' own row counts
(``total_rows``, ``rows_at``) agree with what their readers read."""
from __future__ import annotations

import pickle
import time

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

import fastops as fo
from fastops.connectors import base, sinks, sources
from fastops.connectors.base import END, Reader, Sink, Source, TransactionalSink, is_transactional


def table(n: int = 1000) -> pa.Table:
    return pa.table({"i": np.arange(n, dtype=np.int64), "v": np.arange(n) * 0.5})


@pytest.fixture
def files(tmp_path):
    t = table(2500)
    pq.write_table(t, tmp_path / "t.parquet", row_group_size=600)
    pacsv.write_csv(t, tmp_path / "t.csv")
    with pa.ipc.new_file(str(tmp_path / "t.arrow"), t.schema) as w:
        w.write_table(t, max_chunksize=700)
    return tmp_path


def test_builtin_sources_and_sinks_satisfy_the_protocols(files):
    srcs = [sources.TableSource(table(), 128), sources.IteratorSource(iter([])),
            sources.GeneratorSource(lambda: iter([])), sources.FileSource(str(files / "t.parquet"), "parquet")]
    for s in srcs:
        assert isinstance(s, Source), s
        assert isinstance(s.open(0, 1), Reader)
    assert [s.replayable for s in srcs] == [True, False, False, True]
    for transactional in (sinks.FileSink(str(files / "out"), "parquet"), sinks.CollectSink(sinks.CollectResult())):
        assert isinstance(transactional, TransactionalSink) and is_transactional(transactional)
    for plain in (sinks.PrintSink(), sinks.FunctionSink(print)):
        assert isinstance(plain, Sink) and not is_transactional(plain)
    # the old names stay where they were
    assert sources.END is END and sources.Source is Source and sources.Reader is Reader
    assert sources.check_batch_size is base.check_batch_size


def test_end_is_one_object_also_after_pickling():
    assert pickle.loads(pickle.dumps(END)) is END
    assert repr(END) == "END"


class DuckReader:
    """No fastops base class: just the methods."""

    def __init__(self, start: int, stop: int):
        self.pos, self.stop = start, stop

    def read(self):
        if self.pos >= self.stop:
            return END
        rows = np.arange(self.pos, min(self.pos + 100, self.stop), dtype=np.int64)
        self.pos += len(rows)
        return pa.record_batch({"i": rows})

    def position(self):
        return self.pos

    def close(self):
        pass


class DuckSource:
    name = "duck"
    replayable = True

    def __init__(self, n: int):
        self.n = n

    def splits(self) -> int:
        return 2

    def schema(self):
        return pa.schema([("i", pa.int64())])

    def open(self, index, parallelism, position=None):
        half = self.n // 2
        lo, hi = (0, half) if index == 0 else (half, self.n)
        return DuckReader(position if position is not None else lo, hi)


class DuckSink:
    """A two-phase commit sink by its methods only (no fastops base class):
    rows of an epoch become visible in ``committed`` when it commits."""

    name = "duck_sink"
    transactional = True
    generates_watermarks = False
    committed: dict = {}  # (task, epoch) -> rows, shared by the parallel instances

    def open(self, ctx):
        self.ctx, self.epoch, self.sealed = ctx, 1, {}
        self.begin(1)

    def begin(self, epoch):
        self.open_rows = []

    def write(self, batch):
        self.open_rows += batch.column("i").to_pylist()

    def process_input(self, input_index, batch):
        self.write(batch)
        return []

    def process(self, batch):
        return self.process_input(0, batch)

    def on_watermark(self, t_ms):
        return []

    def close(self):
        return []

    def pre_commit(self, checkpoint_id):
        self.sealed[checkpoint_id] = self.open_rows
        return checkpoint_id

    def snapshot_barrier(self, checkpoint_id):
        handle = self.pre_commit(checkpoint_id)
        self.epoch = checkpoint_id + 1
        self.begin(self.epoch)
        return handle

    def commit(self, checkpoint_id):
        for e in [e for e in self.sealed if e <= checkpoint_id]:
            DuckSink.committed[(self.ctx.task_index, e)] = self.sealed.pop(e)

    def abort(self):
        self.sealed = {}

    def recover(self, handles, checkpoint_id):
        self.commit(checkpoint_id)
        self.abort()
        self.epoch = checkpoint_id + 1
        self.begin(self.epoch)

    def finished(self):
        pass

    def committed_after(self, checkpoint_id):
        return [f"epoch {e}" for _, e in DuckSink.committed if e > checkpoint_id]

    def roll_back(self, checkpoint_id):
        later = [k for k in DuckSink.committed if k[1] > checkpoint_id]
        for k in later:
            del DuckSink.committed[k]
        return [f"epoch {e} (dropped)" for _, e in later]


def test_duck_typed_sources_and_sinks_run_with_checkpoints_and_a_restart(tmp_path):
    assert isinstance(DuckSource(10), Source) and isinstance(DuckReader(0, 1), Reader)
    failed = []

    def fail_once(batch):
        if not failed and 2000 <= batch.column("i")[0].as_py() < 2500:  # split 0, 20 batches in
            failed.append(1)
            raise RuntimeError("once")
        time.sleep(0.002)  # a few checkpoints (every 5 ms) before the failure
        return batch

    env = fo.StreamEnvironment(parallelism=2, checkpoint_dir=str(tmp_path / "ck"), checkpoint_interval="5ms",
                               restart_attempts=1)
    out = env.from_source(DuckSource(5000)).map(fail_once).sink_to_table("out")
    result = env.execute("duck")
    assert result.restarts == 1 and result.restored_from is not None
    assert sorted(out.table().column("i").to_pylist()) == list(range(5000))  # exactly once

    # and a two-phase commit sink that only has the protocol's methods commits every row once
    assert isinstance(DuckSink(), TransactionalSink) is False  # not opened: no epoch yet
    DuckSink.committed = {}
    failed.clear()
    env = fo.StreamEnvironment(parallelism=2, checkpoint_dir=str(tmp_path / "ck2"), checkpoint_interval="5ms",
                               restart_attempts=1)
    env.from_source(DuckSource(5000)).map(fail_once)._sink("duck_sink", DuckSink)  # no public entry yet
    result = env.execute("duck sink")
    assert result.restarts == 1 and result.restored_from is not None and len(DuckSink.committed) > 2
    assert sorted(i for rows in DuckSink.committed.values() for i in rows) == list(range(5000))


def read_rows(reader, batches: int | None = None) -> int:
    rows = 0
    while batches is None or batches > 0:
        b = reader.read()
        if b is END:
            break
        rows += b.num_rows
        if batches is not None:
            batches -= 1
    return rows


@pytest.mark.parametrize("fmt, name", [("parquet", "t.parquet"), ("ipc", "t.arrow"), ("csv", "t.csv")])
def test_file_sources_count_their_rows_like_their_readers(files, fmt, name):
    src = sources.FileSource(str(files / name), fmt, batch_size=256)
    assert src.total_rows() == (None if fmt == "csv" else 2500)
    for p in (1, 2, 3):
        assert sum(read_rows(src.open(i, p)) for i in range(p)) == 2500
        for i in range(p):
            for k in (0, 1, 3, 6):
                reader = src.open(i, p)
                rows = read_rows(reader, k)
                assert src.rows_at(i, p, reader.position()) == rows
                resumed = src.open(i, p, reader.position())  # and a replay goes on right after
                assert rows + read_rows(resumed) == read_rows(src.open(i, p))
    assert src.rows_at(0, 1, None) == 0


def test_table_source_counts_its_rows_like_its_readers():
    src = sources.TableSource(table(1000), batch_size=97)
    assert src.total_rows() == 1000
    for p in (1, 3):
        for i in range(p):
            reader = src.open(i, p)
            rows = read_rows(reader, 2)
            assert src.rows_at(i, p, reader.position()) == rows


def test_a_reader_that_fails_to_close_after_a_failure_is_logged_and_the_failure_stands(caplog):
    """Closing a reader after a failure must not hide that failure: its own error is logged."""
    import logging

    import fastops as fo

    class Reader:
        def read(self):
            raise ValueError("bad record at offset 7")

        def position(self):
            return None

        def close(self):
            raise OSError("connection already gone")

    class Broken:
        name = "broken"
        replayable = False

        def splits(self):
            return 1

        def schema(self):
            return None

        def open(self, index, parallelism, position=None):
            return Reader()

    env = fo.StreamEnvironment()
    with caplog.at_level(logging.WARNING, logger="fastops"), pytest.raises(fo.JobFailed) as info:
        env.from_source(Broken()).collect()
    assert "bad record at offset 7" in str(info.value)
    warned = [r for r in caplog.records if "closing its source reader failed" in r.getMessage()]
    assert len(warned) == 1 and "connection already gone" in str(warned[0].exc_info[1])


def test_files_whose_column_is_all_null_in_one_read_as_the_typed_column(tmp_path):
    # pandas writes an empty or all-None string column as type null
    pq.write_table(pa.table({"id": pa.array([], pa.int64()), "s": pa.array([], pa.null())}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"id": [1, 2], "s": ["x", None]}), tmp_path / "b.parquet")
    pq.write_table(pa.table({"id": [3], "s": pa.array([None], pa.null())}), tmp_path / "c.parquet")
    env = fo.StreamEnvironment()
    out = env.from_parquet(str(tmp_path)).collect()
    expected = pa.concat_tables([pq.read_table(tmp_path / f, schema=pa.schema([("id", pa.int64()), ("s", pa.string())]))
                                 for f in ("a.parquet", "b.parquet", "c.parquet")])
    assert out.sort_by("id").equals(expected.sort_by("id"))


def test_files_of_clashing_types_are_refused_naming_the_file(tmp_path):
    pq.write_table(pa.table({"id": [1, 2]}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"id": ["x"]}), tmp_path / "b.parquet")
    env = fo.StreamEnvironment()
    with pytest.raises(ValueError, match=r"b\.parquet.*id"):
        env.from_parquet(str(tmp_path))


def test_a_csv_file_that_does_not_fit_the_first_is_an_error_naming_it(tmp_path):
    pacsv.write_csv(pa.table({"id": [1, 2]}), tmp_path / "a.csv")
    pacsv.write_csv(pa.table({"id": ["x"]}), tmp_path / "b.csv")
    env = fo.StreamEnvironment()
    with pytest.raises(fo.JobFailed, match=r"b\.csv' cannot be read as the source's schema \(id: int64\)"):
        env.from_csv(str(tmp_path)).collect()
