"""``execute_async`` and ``JobClient``: status transitions, wait with a
timeout, failures surfaced by ``wait()``, cancel (prompt, nothing committed
past the last complete checkpoint, a restore then writes every row once),
and live metrics of a job with a known, throttled throughput."""
from __future__ import annotations

import glob
import json
import os
import threading
import time
import traceback

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import fastops as fo
from fastops.runtime import JobCancelled, JobClient, JobStatus

S = JobStatus


def wait_until(predicate, timeout: float = 10.0, what: str = "condition") -> None:
    t0 = time.perf_counter()
    while not predicate():
        if time.perf_counter() - t0 > timeout:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def history(client: JobClient) -> list[JobStatus]:
    return [JobStatus(s) for s, _ in client.metrics()["job"]["status_history"]]


def gated_job(gate: threading.Event, rows: int = 1000):
    """A job whose source waits for ``gate`` before its last batch."""

    def gen():
        yield pa.record_batch({"x": np.arange(rows // 2, dtype=np.int64)})
        while not gate.is_set():
            yield None  # no data right now
            time.sleep(0.005)
        yield pa.record_batch({"x": np.arange(rows // 2, rows, dtype=np.int64)})

    env = fo.StreamEnvironment(parallelism=2)
    out = env.from_generator(gen).rebalance().sink_to_table("out")
    return env, out


def test_status_runs_through_created_running_finished_and_wait_times_out():
    gate = threading.Event()
    env, out = gated_job(gate)
    client = env.execute_async("gated")
    assert isinstance(client, JobClient)
    assert len(client.get_job_id()) == 32 and int(client.get_job_id(), 16) >= 0
    wait_until(lambda: client.get_job_status() is S.RUNNING, what="RUNNING")
    t0 = time.perf_counter()
    with pytest.raises(TimeoutError, match="still RUNNING"):
        client.wait(timeout=0.2)
    assert 0.15 < time.perf_counter() - t0 < 2.0
    assert client.get_job_status() is S.RUNNING and not client.done()  # a timeout leaves it running
    gate.set()
    result = client.get_job_execution_result(timeout=10)
    assert client.get_job_status() is S.FINISHED and client.get_job_status().is_globally_terminal_state()
    assert result.job_id == client.get_job_id()
    assert result.rows_in == result.rows_out == 1000
    assert sorted(out.table().column("x").to_pylist()) == list(range(1000))
    assert history(client) == [S.CREATED, S.RUNNING, S.FINISHED]
    assert client.wait() is result and env.last_result is result
    client.cancel()  # a finished job stays finished
    assert client.get_job_status() is S.FINISHED


def failing(batch):
    raise ZeroDivisionError("boom in the user's map")


def test_failure_is_raised_by_wait_at_the_callers_line_with_the_users_frames():
    env = fo.StreamEnvironment(parallelism=2)
    env.from_collection([(i,) for i in range(100)], schema=[("x", pa.int64())]).rebalance().map(failing).print()
    client = env.execute_async("failing")
    with pytest.raises(fo.JobFailed) as info:
        client.wait(timeout=30)
    assert "map(failing)" in str(info.value) and "boom in the user's map" in str(info.value)
    cause = info.value.__cause__
    assert isinstance(cause, ZeroDivisionError)
    assert cause.__traceback__.tb_frame.f_code.co_name == "failing"  # the user's frame first
    frames = traceback.extract_tb(info.tb)
    assert frames[0].filename == __file__  # raised at the test's line, in its thread
    assert frames[0].name == "test_failure_is_raised_by_wait_at_the_callers_line_with_the_users_frames"
    assert not any(os.sep + "executors" + os.sep in f.filename for f in frames)  # not the job thread's
    assert client.get_job_status() is S.FAILED
    assert history(client) == [S.CREATED, S.RUNNING, S.FAILED]
    with pytest.raises(fo.JobFailed):  # every wait() raises it again
        client.wait()


def test_restart_goes_through_restarting_and_cancel_during_the_delay_is_prompt():
    calls = []

    def fail_first(batch):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("first attempt fails")
        return batch

    rows = [(i,) for i in range(50)]
    env = fo.StreamEnvironment(restart_attempts=2)
    out = env.from_collection(rows, schema=[("x", pa.int64())]).map(fail_first).sink_to_table("out")
    client = env.execute_async("restarts")
    result = client.wait(timeout=30)
    assert result.restarts == 1 and out.table().num_rows == 50
    assert history(client) == [S.CREATED, S.RUNNING, S.RESTARTING, S.RUNNING, S.FINISHED]

    env = fo.StreamEnvironment(restart_attempts=3, restart_delay="30s")
    env.from_collection(rows, schema=[("x", pa.int64())]).map(failing).print()
    client = env.execute_async("long delay")
    wait_until(lambda: client.get_job_status() is S.RESTARTING, what="RESTARTING")
    t0 = time.perf_counter()
    client.cancel()
    with pytest.raises(JobCancelled) as info:
        client.wait(timeout=10)
    assert time.perf_counter() - t0 < 2.0  # not the 30 s delay
    assert client.get_job_status() is S.CANCELED
    assert history(client)[-3:] == [S.RESTARTING, S.CANCELLING, S.CANCELED]
    assert info.value.result is not None and info.value.result.restarts == 1


N_BATCHES, BATCH_ROWS = 60, 200


def numbered():
    """Deterministic, paced by ``rate``: ids 0 .. N_BATCHES * BATCH_ROWS - 1."""
    for b in range(N_BATCHES):
        ids = np.arange(b * BATCH_ROWS, (b + 1) * BATCH_ROWS, dtype=np.int64)
        yield pa.record_batch({"id": ids, "k": ids % 7})


def numbered_job(env: fo.StreamEnvironment, out: str) -> None:
    (env.from_generator(numbered, rate=2000, deterministic=True)
     .key_by("k").map(lambda b: b, name="same").sink_to_parquet(out))


def committed_ids(out: str) -> list[int]:
    files = sorted(glob.glob(os.path.join(out, "part-*.parquet")))
    return sorted(i for f in files for i in pq.read_table(f).column("id").to_pylist())


def test_cancel_stops_promptly_commits_no_partial_epoch_and_a_restore_writes_every_row_once(tmp_path):
    out, ck = str(tmp_path / "out"), str(tmp_path / "ck")
    env = fo.StreamEnvironment(parallelism=2, checkpoint_dir=ck, checkpoint_interval="150ms")
    numbered_job(env, out)
    client = env.execute_async("cancelled")
    wait_until(lambda: client.metrics()["checkpoints"]["completed"] >= 2, what="two checkpoints")
    t0 = time.perf_counter()
    client.cancel()
    assert client.get_job_status() in (S.CANCELLING, S.CANCELED)
    with pytest.raises(JobCancelled):
        client.wait(timeout=10)
    assert time.perf_counter() - t0 < 1.5  # the source sleeps 0.1 s per batch: it stops within a few
    assert client.get_job_status() is S.CANCELED
    assert history(client)[-2:] == [S.CANCELLING, S.CANCELED]

    # committed output is exactly what the latest complete checkpoint covers: rows 0 .. k-1, once
    chk = sorted(glob.glob(os.path.join(ck, "chk-*", "_manifest.json")))[-1]
    with open(chk) as f:
        manifest = json.load(f)
    assert not manifest["finished"]
    positions = [t["position"] for t in manifest["tasks"].values() if t["position"] is not None]
    assert len(positions) == 1 and 0 < positions[0] < N_BATCHES
    covered = positions[0] * BATCH_ROWS
    assert committed_ids(out) == list(range(covered))
    epochs = {int(os.path.basename(f).split("-")[2].split(".")[0]) for f in glob.glob(os.path.join(out, "part-*"))}
    assert max(epochs) <= manifest["checkpoint_id"]

    env = fo.StreamEnvironment(parallelism=2, checkpoint_dir=ck, checkpoint_interval="150ms")
    numbered_job(env, out)
    result = env.execute("resumed")
    assert result.restored_from == manifest["checkpoint_id"]
    assert committed_ids(out) == list(range(N_BATCHES * BATCH_ROWS))


def test_cancel_before_it_runs_and_without_checkpoints_commits_nothing(tmp_path):
    out = str(tmp_path / "out")
    env = fo.StreamEnvironment(parallelism=2)
    numbered_job(env, out)
    client = env.execute_async("no checkpoints")
    client.cancel()  # maybe before the first attempt started
    with pytest.raises(JobCancelled):
        client.wait(timeout=10)
    assert client.get_job_status() is S.CANCELED
    assert committed_ids(out) == []  # file sinks commit only with a checkpoint or at the end


RATE, ROWS, MAP_SLEEP = 20_000, 500, 0.01  # rows/s offered, rows per batch, a map's cost per batch


def paced():
    """``ROWS``-row batches at ``RATE`` rows/s (the source's pacing), timestamped now."""
    for _ in range(int(RATE * 4 / ROWS)):
        now = int(time.time() * 1000)
        yield pa.record_batch({"ts": np.full(ROWS, now, dtype=np.int64), "v": np.ones(ROWS)})


def slow_map(batch):
    time.sleep(MAP_SLEEP)
    return batch


def between(value, low, high, what):
    assert value is not None and low <= value <= high, f"{what} = {value}, expected [{low}, {high}]"


@pytest.mark.parametrize("executor", ["threads", "single"])
def test_live_rates_match_a_throttled_job(executor):
    env = fo.StreamEnvironment(executor=executor)
    (env.from_generator(paced, rate=RATE).with_watermark("ts").rebalance()
     .map(slow_map).sink_to(lambda b: None))
    client = env.execute_async("paced")
    time.sleep(2.2)
    m = client.metrics(window="1500ms")
    assert m["job"]["status"] == "RUNNING" and m["job"]["executor"] == executor
    between(m["job"]["window_s"], 1.2, 1.8, "window")
    source = next(t for t in m["tasks"] if t["is_source"])
    mapper = next(t for t in m["tasks"] if "slow_map" in t["task"])
    between(source["rows_in_per_s"], 0.8 * RATE, 1.15 * RATE, "source rows in / s")
    between(mapper["rows_in_per_s"], 0.75 * RATE, 1.2 * RATE, "map rows in / s")
    between(m["job"]["rows_in_per_s"], 0.8 * RATE, 1.15 * RATE, "job rows in / s")
    between(m["job"]["rows_out_per_s"], 0.75 * RATE, 1.2 * RATE, "job rows out / s")
    # the map works MAP_SLEEP per batch, RATE / ROWS batches a second
    expected_busy = 1000 * MAP_SLEEP * RATE / ROWS  # 400 ms/s
    if executor == "threads":  # its own thread: the rest of each second it waits for input
        between(mapper["busy_ms_per_s"], 0.6 * expected_busy, 1.6 * expected_busy, "map busy ms/s")
        between(mapper["idle_ms_per_s"], 1000 - 1.6 * expected_busy, 1000 - 0.5 * expected_busy, "map idle ms/s")
        between(source["backpressured_ms_per_s"], 0, 100, "source backpressured ms/s")
        between(mapper["true_processing_rate"], 0.5 * ROWS / MAP_SLEEP, 1.3 * ROWS / MAP_SLEEP,
                "map rows per busy second")
    assert mapper["busy_ms_per_s"] + mapper["idle_ms_per_s"] + mapper["backpressured_ms_per_s"] <= 1000 + 1
    between(source["watermark_lag_ms"], 0, 1000, "watermark lag ms")  # timestamps are "now"
    op = next(o for o in m["operators"] if o["name"] == "map(slow_map)")
    between(op["rows_in_per_s"], 0.75 * RATE, 1.2 * RATE, "operator rows in / s")
    assert op["inputs"][0]["name"] == "rebalance" and op["vertex"] == mapper["vertex"]
    rows_then = m["job"]["rows_in"]
    time.sleep(0.6)
    assert client.metrics()["job"]["rows_in"] > rows_then  # live totals move
    client.cancel()
    with pytest.raises(JobCancelled):
        client.wait(timeout=10)


def test_backpressure_shows_on_the_sender_while_it_waits():
    def fast():
        for _ in range(400):
            yield pa.record_batch({"v": np.ones(ROWS)})

    def slow_sink(batch):
        time.sleep(0.02)

    env = fo.StreamEnvironment(executor="threads", channel_capacity=2)
    env.from_generator(fast).rebalance().sink_to(slow_sink)
    client = env.execute_async("slow sink")
    time.sleep(1.6)
    m = client.metrics(window="1s")
    client.cancel()
    with pytest.raises(JobCancelled):
        client.wait(timeout=10)
    source = next(t for t in m["tasks"] if t["is_source"])
    sink = next(t for t in m["tasks"] if not t["is_source"])
    between(source["backpressured_ms_per_s"], 700, 1000, "source backpressured ms/s")
    between(sink["busy_ms_per_s"], 800, 1000, "sink busy ms/s")
    between(sink["rows_in_per_s"], 0.5 * ROWS / 0.02, 1.1 * ROWS / 0.02, "sink rows in / s")


def test_metrics_snapshot_of_a_finished_job_with_checkpoints(tmp_path):
    env = fo.StreamEnvironment(parallelism=2, checkpoint_dir=str(tmp_path / "ck"), checkpoint_interval="100ms")
    numbered_job(env, str(tmp_path / "out"))
    client = env.execute_async("done")
    result = client.wait(timeout=60)
    m = client.metrics()
    assert m["job"]["status"] == "FINISHED" and m["job"]["rows_in"] == result.rows_in == N_BATCHES * BATCH_ROWS
    assert m["job"]["rows_out"] == result.rows_out
    assert m["checkpoints"]["completed"] == len(result.checkpoints) >= 3
    last = result.checkpoints[-1]
    assert m["checkpoints"]["last"]["id"] == last.checkpoint_id
    assert m["checkpoints"]["last"]["size_bytes"] == last.state_bytes
    sinks = [t for t in m["tasks"] if "sink_to_parquet" in t["operators"]]
    assert len(sinks) == 2 and all(t["checkpoints"] >= 3 and t["finished"] for t in sinks)
    assert sum(t["sink_rows"] for t in sinks) == N_BATCHES * BATCH_ROWS
    by_name = {o["name"]: o for o in m["operators"]}
    assert by_name["from_generator"]["rows_out"] == by_name["same"]["rows_in"] == N_BATCHES * BATCH_ROWS
    assert by_name["sink_to_parquet"]["rows_in"] == N_BATCHES * BATCH_ROWS
    assert by_name["sink_to_parquet"]["rows_out"] == 0
    assert by_name["same"]["inputs"] == [{"id": by_name["from_generator"]["id"], "name": "from_generator",
                                          "partitioning": "hash", "keys": ["k"], "tag": None}]
    json.dumps(m)  # plain data
    with pytest.raises(ValueError, match="window must be a duration > 0"):
        client.metrics(window=0)
