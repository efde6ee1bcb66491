"""The window join and the keyed process operator in checkpointed jobs: a job
that fails at a chosen batch, then resumes from its latest checkpoint (at the
same or another parallelism), writes through an exactly-once file sink
exactly the rows of an uninterrupted run."""
from __future__ import annotations

import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import fastops as fo
from fastops.core.window.assigners import Tumbling
from fastops.runtime.checkpoint import CheckpointStorage
from support.events import output_rows


class FailAt:
    """A pacing map (a short sleep per batch, so checkpoints fall between
    batches) that raises at batch number ``at`` (never for ``at < 0``), or at
    the first batch after it once ``checkpoints`` holds a completed
    checkpoint, so that a slow machine still fails a job it can resume."""

    def __init__(self, at: int = -1, checkpoints: str | None = None):
        self.at = at
        self.seen = 0
        self.storage = CheckpointStorage(checkpoints) if checkpoints is not None else None

    def __call__(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        self.seen += 1
        time.sleep(0.003)
        if 0 <= self.at <= self.seen and (self.storage is None or self.storage.latest() is not None):
            self.at = -1
            raise RuntimeError("injected failure")
        return batch


def events(n: int, seed: int, value: str) -> pa.Table:
    """``n`` events (user, ts, ``value``) at 2 ms apart with up to 0.3 s of disorder."""
    rng = np.random.default_rng(seed)
    ts = np.maximum(np.arange(n, dtype=np.int64) * 2 - rng.integers(0, 300, n), 0)
    values = (pa.array([f"v{i}" for i in rng.integers(0, 7, n)]) if value == "kind"
              else pa.array(np.round(rng.normal(0, 1, n), 3)))
    return pa.table({"user": rng.integers(0, 400, n), "ts": ts, value: values})


def run_twice(job, tmp_path, fail_at: int, before: int = 2, after: int = 2) -> tuple:
    """The job's output uninterrupted; then run at parallelism ``before``,
    failing at batch ``fail_at``, and resumed from its checkpoints at
    parallelism ``after`` (fresh operators, state from disk only)."""
    ref = str(tmp_path / "ref")
    env = fo.StreamEnvironment(parallelism=2, threads=True, max_parallelism=16)
    job(env, ref, FailAt())
    env.execute()
    out, ck = str(tmp_path / "out"), str(tmp_path / "ck")
    env = fo.StreamEnvironment(parallelism=before, threads=True, max_parallelism=16, checkpoint_dir=ck,
                               checkpoint_interval="10ms")
    job(env, out, FailAt(fail_at, ck))
    with pytest.raises(fo.JobFailed, match="injected failure"):
        env.execute()
    env = fo.StreamEnvironment(parallelism=after, threads=True, max_parallelism=16, checkpoint_dir=ck,
                               checkpoint_interval="10ms")
    job(env, out, FailAt())
    result = env.execute()
    assert result.restored_from is not None  # it resumed, did not start over
    return output_rows(ref), output_rows(out)


RESCALES = [(1, 3), (3, 2), (2, 4), (4, 1)]


# ---------------------------------------------------------------- window join

LEFT, RIGHT = events(16_000, 1, "value"), events(16_000, 2, "kind")


def join_job(env: fo.StreamEnvironment, out: str, fail: FailAt) -> None:
    left = env.from_arrow(LEFT, batch_size=400).map(fail).with_watermark("ts", max_out_of_orderness="400ms")
    right = env.from_arrow(RIGHT, batch_size=400).map(FailAt()).with_watermark("ts", max_out_of_orderness="400ms")
    left.join(right).on("user").window(Tumbling("2s")).apply().sink_to_parquet(out)


@pytest.mark.parametrize("fail_at", [15, 30])
def test_window_join_resumed_from_a_checkpoint_writes_the_rows_of_an_uninterrupted_run(tmp_path, fail_at):
    reference, resumed = run_twice(join_job, tmp_path, fail_at)
    assert sum(reference.values()) > 1000
    assert resumed == reference


@pytest.mark.parametrize(("before", "after"), RESCALES)
def test_window_join_resumed_at_another_parallelism_writes_the_rows_of_an_uninterrupted_run(
        tmp_path, before, after):
    reference, resumed = run_twice(join_job, tmp_path, 25, before, after)
    assert resumed == reference


# ---------------------------------------------------------------- keyed process

class CountsAndTimers(fo.KeyedProcessFunction):
    """Per user: a running count (int state) and the last kind seen (string
    state) on every row; a timer at the end of each row's second emits the
    count and last kind then, and forgets the last kind."""

    def process_batch(self, batch, ctx):
        seen = ctx.state("seen", pa.int64())
        last = ctx.state("last", pa.string())
        counts = pc.add(pc.fill_null(seen.value(batch), 0), ctx.running_count(batch))
        seen.update(batch, counts)
        last.update(batch, batch.column("kind"))
        ctx.register_timer(batch, pc.multiply(pc.add(pc.divide(batch.column("ts"), 1000), 1), 1000))
        return pa.RecordBatch.from_arrays([batch.column("user"), batch.column("ts"), counts,
                                           pa.nulls(batch.num_rows, pa.string())],
                                          names=["user", "time", "count", "last"])

    def on_timer(self, timestamps, keys, ctx):
        last = ctx.state("last", pa.string())
        out = pa.RecordBatch.from_arrays([keys.column("user"), timestamps, ctx.state("seen", pa.int64()).value(keys),
                                          last.value(keys)], names=["user", "time", "count", "last"])
        last.clear(keys)
        return out


def process_job(env: fo.StreamEnvironment, out: str, fail: FailAt) -> None:
    (env.from_arrow(RIGHT, batch_size=400).map(fail).with_watermark("ts", max_out_of_orderness="400ms")
     .key_by("user").process(CountsAndTimers()).sink_to_parquet(out))


@pytest.mark.parametrize("fail_at", [15, 30])
def test_keyed_process_resumed_from_a_checkpoint_writes_the_rows_of_an_uninterrupted_run(tmp_path, fail_at):
    reference, resumed = run_twice(process_job, tmp_path, fail_at)
    assert sum(1 for r, n in reference.items() if r[3] is not None) > 1000  # timer rows
    assert resumed == reference


@pytest.mark.parametrize(("before", "after"), RESCALES)
def test_keyed_process_resumed_at_another_parallelism_writes_the_rows_of_an_uninterrupted_run(
        tmp_path, before, after):
    reference, resumed = run_twice(process_job, tmp_path, 25, before, after)
    assert resumed == reference
