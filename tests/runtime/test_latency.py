"""End-to-end latency (latency markers: a source's read of a batch -> the task
that writes it to a sink) against a reference: each batch carries the wall
time it was produced at, and the sink measures every batch's latency itself."""
from __future__ import annotations

import statistics
import threading
import time

import numpy as np
import pyarrow as pa

import fastops as fo
from fastops.runtime.tasks import LATENCY_INTERVAL_S


def stamped(batches: int, rows: int = 100):
    def gen():
        for _ in range(batches):
            yield pa.record_batch({"k": np.arange(rows) % 11, "t": np.full(rows, time.time())})
    return gen


class LatencySink:
    """The reference: now - the batch's production time, for every batch."""

    def __init__(self) -> None:
        self.ms: list[float] = []
        self.lock = threading.Lock()

    def __call__(self, batch: pa.RecordBatch) -> None:
        with self.lock:
            self.ms.append(1000.0 * (time.time() - batch.column("t")[0].as_py()))


def slow(batch: pa.RecordBatch) -> pa.RecordBatch:
    time.sleep(0.02)
    return batch


def test_marker_latency_follows_the_batches_latency_through_a_queue():
    # the source outruns the slow operator: batches wait in the channel, the latency is the queue's
    env = fo.StreamEnvironment(parallelism=1, executor="threads")
    sink = LatencySink()
    env.from_generator(stamped(100)).key_by("k").map(slow, name="slow").sink_to(sink)
    result = env.execute()
    ref = sorted(sink.ms)
    lat = result.latency
    assert lat["markers"] >= 10
    ref_p50 = statistics.median(ref)
    assert ref_p50 > 60  # a queue formed: the latency is not the operator's 20 ms alone
    assert abs(lat["p50_ms"] - ref_p50) <= 0.3 * ref_p50 + 20
    assert lat["max_ms"] <= max(ref) + 40  # a marker trails its batch by at most one batch
    assert lat["p50_ms"] <= lat["p99_ms"] <= lat["max_ms"]


def test_markers_are_counted_once_per_path_and_live_in_the_metrics():
    env = fo.StreamEnvironment(parallelism=3, executor="threads")
    sink = LatencySink()
    env.from_generator(stamped(60), rate=2500).key_by("k").map(lambda b: b, name="pass").sink_to(sink)
    client = env.execute_async()
    time.sleep(1.5)
    live = client.metrics("1s")["job"]["latency"]
    result = client.wait()
    assert live["markers"] >= 3 and live["p50_ms"] is not None
    # one source task, one marker per interval at most, each to one of the three tasks
    assert 5 <= result.latency["markers"] <= result.duration_s / LATENCY_INTERVAL_S + 2
    # a marker trails its batch; on a busy machine by a few scheduling delays, never by seconds
    assert result.latency["p99_ms"] <= max(sink.ms) + 250


def test_a_job_in_one_task_records_its_latency_too():
    env = fo.StreamEnvironment(parallelism=1)
    env.from_generator(stamped(50), rate=2000).map(slow, name="slow").sink_to(lambda b: None)
    result = env.execute()
    assert result.latency["markers"] >= 5
    assert result.latency["p50_ms"] >= 19  # the chain's own 20 ms per batch
