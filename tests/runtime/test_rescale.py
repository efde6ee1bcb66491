"""Rescaling: a job stopped with a savepoint at one parallelism and resumed
at another, or rescaled while it runs, writes through exactly-once Parquet
sinks the rows of an uninterrupted run, for every kind of keyed state; bad
requests are refused with a clear error and leave the job running."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastops as fo
from fastops.apps.cli import main as cli
from fastops.core import aggregates as agg
from fastops.operators.base import Operator
from fastops.operators.window import WindowOperator
from fastops.windows import Session, Sliding, Tumbling
from support.events import output_rows, write_events

MAXP = 16
N_BATCHES = 60
BATCH = 200


def events(n: int, seed: int) -> pa.Table:
    """Keyed events in event-time order (no two at one time: ``first`` has no
    ties), with a gap now and then (sessions end)."""
    rng = np.random.default_rng(seed)
    steps = rng.integers(1, 4, n)
    steps[rng.random(n) < 0.01] = 400  # a pause: sessions close, windows fire
    return pa.table({"k": rng.integers(0, 300, n), "v": rng.integers(-50, 1000, n),
                     "ts": np.cumsum(steps).astype(np.int64)})


EVENTS = events(N_BATCHES * BATCH, 3)
OTHER = events(N_BATCHES * BATCH, 4).rename_columns(["k", "w", "ts"])


class Gate:
    """A pass-through map that counts batches: ``reached`` is set at batch
    ``at``; after it, each batch waits ``pace`` s (the job is still running
    when the test acts)."""

    def __init__(self, at: int = -1, pace: float = 0.005):
        self.at = at
        self.pace = pace
        self.seen = 0
        self.lock = threading.Lock()
        self.reached = threading.Event()

    def __call__(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        with self.lock:
            self.seen += 1
            if self.seen >= self.at >= 0:
                self.reached.set()
        if self.at >= 0 and self.seen >= self.at:
            time.sleep(self.pace)
        return batch


def source(env: fo.StreamEnvironment, gate: Gate, table: pa.Table = EVENTS) -> fo.DataStream:
    return env.from_arrow(table, batch_size=BATCH).map(gate).with_watermark("ts", max_out_of_orderness=5)


class Counts(fo.KeyedProcessFunction):
    """A running count per key (value state) and a timer at the end of each
    row's 100 ms. (Which row gets which count depends on how the rows of a
    key from several source tasks interleave; the counts of a key do not.)"""

    def process_batch(self, batch, ctx):
        seen = ctx.state("seen", pa.int64())
        counts = pc.add(pc.fill_null(seen.value(batch), 0), ctx.running_count(batch))
        seen.update(batch, counts)
        ctx.register_timer(batch, pc.multiply(pc.add(pc.divide(batch.column("ts"), 100), 1), 100))
        return pa.RecordBatch.from_arrays([batch.column("k"), batch.column("ts"), counts], names=["k", "t", "n"])

    def on_timer(self, timestamps, keys, ctx):
        return pa.RecordBatch.from_arrays([keys.column("k"), timestamps, pa.array(np.full(len(timestamps), -1))],
                                          names=["k", "t", "n"])


def tumbling(env, gate, out):
    source(env, gate).key_by("k").window(Tumbling(100)).aggregate(n=agg.count(), s=agg.sum("v")).sink_to_parquet(out)


def sliding(env, gate, out):
    source(env, gate).key_by("k").window(Sliding(300, 100)).aggregate(n=agg.count(), top=agg.max("v")) \
        .sink_to_parquet(out)


def session(env, gate, out):
    source(env, gate).key_by("k").window(Session(50)).aggregate(n=agg.count(), lo=agg.min("v")).sink_to_parquet(out)


def sketch(env, gate, out):
    source(env, gate).key_by("k").window(Tumbling(200)).aggregate(
        d=agg.approx_distinct("v"), q=agg.approx_quantile("v", 0.5)).sink_to_parquet(out)


def running(env, gate, out):
    # an upsert stream: its rows depend on batch boundaries; its last value per key does not
    source(env, gate).key_by("k").aggregate(n=agg.count(), s=agg.sum("v"), f=agg.first("v")).sink_to_parquet(out)


def process(env, gate, out):
    source(env, gate).key_by("k").process(Counts()).sink_to_parquet(out)


def join(env, gate, out):
    # both inputs paced: a source that has finished ends the job's savepoints and rescales
    right = env.from_arrow(OTHER, batch_size=BATCH).map(Gate(gate.at, gate.pace)).with_watermark(
        "ts", max_out_of_orderness=5)
    source(env, gate).join(right).on("k").window(Tumbling(100)).apply().sink_to_parquet(out)


JOBS = {"tumbling": tumbling, "sliding": sliding, "session": session, "sketch": sketch, "running": running,
        "process": process, "join": join}


def rows(path: str, job: str) -> list:
    t = ds.dataset(path).to_table()
    if job == "running":  # the final value of every key
        t = t.group_by("k").aggregate([("n", "max"), ("s", "max"), ("f", "max"), ("s", "min")])
    if job == "process":  # counts per key, and timers fired
        return sorted((r["k"], r["n"]) if r["n"] >= 0 else (r["k"], r["t"], -1) for r in t.to_pylist())
    return sorted(tuple(r.values()) for r in t.to_pylist())


_reference: dict[str, list] = {}


def reference(job: str) -> list:
    if job not in _reference:
        with tempfile.TemporaryDirectory() as d:
            env = fo.StreamEnvironment(parallelism=2, max_parallelism=MAXP)
            JOBS[job](env, Gate(), os.path.join(d, "out"))
            env.execute()
            _reference[job] = rows(os.path.join(d, "out"), job)
    return _reference[job]


def stop_and_resume(job: str, before: int, after: int, at: int, how: str, executor: str = "threads") -> dict:
    """Run at ``before``, stop with a savepoint near batch ``at``, resume at ``after``."""
    with tempfile.TemporaryDirectory() as d:
        out, sp = os.path.join(d, "out"), os.path.join(d, "savepoint")
        env = fo.StreamEnvironment(parallelism=before, max_parallelism=MAXP, executor=executor,
                                   key_group_assignment=how)
        gate = Gate(at)
        JOBS[job](env, gate, out)
        client = env.execute_async()
        assert gate.reached.wait(60)
        assert client.stop_with_savepoint(sp) == sp
        first = client.wait()
        total = EVENTS.num_rows + (OTHER.num_rows if job == "join" else 0)
        assert first.savepoint == sp and first.rows_in < total
        env = fo.StreamEnvironment(parallelism=after, max_parallelism=MAXP, executor=executor,
                                   key_group_assignment=how)
        JOBS[job](env, Gate(), out)
        second = env.execute(restore=sp)
        with open(os.path.join(sp, "_manifest.json")) as f:
            assert second.restored_from == json.load(f)["checkpoint_id"]
        assert rows(out, job) == reference(job)
        assert first.rows_in + second.rows_in == total  # nothing read twice, nothing skipped
        return {"first": first, "second": second}


@pytest.mark.parametrize("job", list(JOBS))
@pytest.mark.parametrize("before,after", [(1, 3), (3, 2), (2, 4), (4, 1)])
def test_a_savepoint_resumed_at_another_parallelism_writes_the_rows_of_an_uninterrupted_run(job, before, after):
    runs = stop_and_resume(job, before, after, at=N_BATCHES // 3, how="contiguous")
    moved = runs["second"].rescales
    assert len(moved) == 1 and not moved[0].live
    if job not in ("join",):  # a keyed operator changed its tasks: key groups moved
        assert moved[0].key_groups_moved > 0


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(job=st.sampled_from(sorted(JOBS)), before=st.integers(1, 4), after=st.integers(1, 4),
       at=st.integers(1, N_BATCHES - 10), how=st.sampled_from(["contiguous", "fewest_moves"]),
       executor=st.sampled_from(["threads", "single"]))
def test_stop_point_parallelisms_and_assignment_drawn_at_random(job, before, after, at, how, executor):
    stop_and_resume(job, before, after, at, how, executor)


@pytest.mark.parametrize("job", ["tumbling", "session", "process", "join"])
@pytest.mark.parametrize("how", ["contiguous", "fewest_moves"])
def test_live_rescale_up_then_down_writes_the_rows_of_an_uninterrupted_run(job, how, tmp_path):
    out = str(tmp_path / "out")
    env = fo.StreamEnvironment(parallelism=2, max_parallelism=MAXP, key_group_assignment=how)
    gate = Gate(N_BATCHES // 4, pace=0.06)  # (after the first rescale, four tasks run the pacing map)
    JOBS[job](env, gate, out)
    client = env.execute_async()
    assert gate.reached.wait(60)
    up = client.rescale(4)
    down = client.rescale({op["name"]: 3 for op in client.metrics()["operators"] if not op["is_source"]})
    result = client.wait()
    assert rows(out, job) == reference(job)
    assert result.rows_in == EVENTS.num_rows + (OTHER.num_rows if job == "join" else 0)  # nothing read twice
    assert [r.checkpoint_id for r in result.rescales] == [up.checkpoint_id, down.checkpoint_id]
    assert up.live and down.live and up.pause_ms > 0 and down.pause_ms > 0
    assert max(up.parallelism_after.values()) == 4 and max(down.parallelism_after.values()) == 3
    assert up.key_groups_moved > 0 and up.bytes_handed > 0
    if how == "fewest_moves":  # 2 -> 4: half the key groups move, no more
        assert up.key_groups_moved == MAXP // 2
    assert client.metrics()["rescales"][-1]["checkpoint_id"] == down.checkpoint_id


def test_live_rescale_keeps_a_collected_result_exact():
    env = fo.StreamEnvironment(parallelism=2, max_parallelism=MAXP)
    gate = Gate(N_BATCHES // 3, pace=0.02)
    result = source(env, gate).key_by("k").window(Tumbling(100)).aggregate(n=agg.count()).sink_to_table()
    client = env.execute_async()
    assert gate.reached.wait(60)
    client.rescale(3)
    client.wait()
    expected = EVENTS.group_by("k").aggregate([("k", "count")])
    got = result.table().group_by("k").aggregate([("n", "sum")])
    assert sorted(got.to_pylist(), key=lambda r: r["k"]) == sorted(
        [{"k": r["k"], "n_sum": r["k_count"]} for r in expected.to_pylist()], key=lambda r: r["k"])


def test_bad_rescales_are_refused_and_the_job_goes_on(tmp_path):
    out = str(tmp_path / "out")
    env = fo.StreamEnvironment(parallelism=2, max_parallelism=MAXP)
    gate = Gate(5)
    tumbling(env, gate, out)
    client = env.execute_async()
    assert gate.reached.wait(60)
    with pytest.raises(ValueError, match=r"parallelism must be an int in \[1, max_parallelism=16\], got 0"):
        client.rescale(0)
    with pytest.raises(ValueError, match="got 17"):
        client.rescale(17)
    with pytest.raises(ValueError, match=r"no operator named 'nope'; the job has \[.*'window\(Tumbling\)'"):
        client.rescale({"nope": 2})
    with pytest.raises(ValueError, match="source 'from_arrow' cannot change|got True"):
        client.rescale(True)
    result = client.wait()
    assert result.rescales == [] and rows(out, "tumbling") == reference("tumbling")
    with pytest.raises(RuntimeError, match="is FINISHED"):
        client.rescale(3)


def test_savepoints_of_another_job_or_max_parallelism_or_truncated_are_refused(tmp_path):
    sp = str(tmp_path / "sp")
    env = fo.StreamEnvironment(parallelism=2, max_parallelism=MAXP)
    gate = Gate(10)
    tumbling(env, gate, str(tmp_path / "a"))
    client = env.execute_async()
    assert gate.reached.wait(60)
    client.stop_with_savepoint(sp)
    client.wait()
    with pytest.raises(ValueError, match="already exists"):
        env2 = fo.StreamEnvironment(parallelism=2, max_parallelism=MAXP)
        gate2 = Gate(10)
        tumbling(env2, gate2, str(tmp_path / "b"))
        c2 = env2.execute_async()
        try:
            c2.stop_with_savepoint(sp)
        finally:
            c2.wait()

    other = fo.StreamEnvironment(parallelism=2, max_parallelism=MAXP)
    sliding(other, Gate(), str(tmp_path / "c"))
    with pytest.raises(ValueError, match=r"different job graph: operator .*window\(Tumbling\).* removed"):
        other.execute(restore=sp)
    wider = fo.StreamEnvironment(parallelism=2, max_parallelism=32)
    tumbling(wider, Gate(), str(tmp_path / "d"))
    with pytest.raises(ValueError, match="max_parallelism=16, the job now has max_parallelism=32"):
        wider.execute(restore=sp)
    state = next(f for f in os.listdir(sp) if f.endswith(".state") and os.path.getsize(os.path.join(sp, f)) > 100)
    with open(os.path.join(sp, state), "r+b") as f:
        f.truncate(50)
    same = fo.StreamEnvironment(parallelism=3, max_parallelism=MAXP)
    tumbling(same, Gate(), str(tmp_path / "a"))
    with pytest.raises(ValueError, match=f"state file '{state}' is corrupt or truncated"):
        same.execute(restore=sp)
    assert cli(["savepoint", "inspect", sp]) == 1


def test_savepoint_inspect_names_operators_key_groups_and_keys(tmp_path, capsys):
    sp = str(tmp_path / "sp")
    env = fo.StreamEnvironment(parallelism=3, max_parallelism=MAXP, key_group_assignment="fewest_moves")
    gate = Gate(N_BATCHES // 2)
    tumbling(env, gate, str(tmp_path / "out"))
    client = env.execute_async()
    assert gate.reached.wait(60)
    client.stop_with_savepoint(sp)
    client.wait()
    assert cli(["savepoint", "inspect", sp, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    window = next(op for op in info["operators"] if op["name"] == "window(Tumbling)")
    assert info["savepoint"] and info["max_parallelism"] == MAXP and window["keyed"]
    assert [t["key_groups"] for t in window["tasks"]] == [6, 5, 5]  # Flink's ranges of 16 over 3
    assert window["state_bytes"] == sum(t["state_bytes"] for t in window["tasks"]) > 0
    assert 0 < window["keys"] <= 300
    assert cli(["savepoint", "inspect", sp]) == 0
    text = capsys.readouterr().out
    assert "window(Tumbling): parallelism 3, keyed" in text and "key groups 0-5 (6)" in text


RESCALE_JOB = os.path.join(os.path.dirname(__file__), "..", "support", "rescale_job.py")


@pytest.mark.slow
@pytest.mark.parametrize("delay", [0.0, 0.03, 0.2])
def test_a_job_killed_during_a_live_rescale_recovers_with_exactly_once_output(tmp_path, delay):
    """SIGKILL at a point of a rescale (before, while or after its stop
    checkpoint), then a run at parallelism 4 from the latest checkpoint."""
    src, ck, out = str(tmp_path / "events.parquet"), str(tmp_path / "ck"), str(tmp_path / "out")
    write_events(src)
    ref = str(tmp_path / "ref")
    done = subprocess.run([sys.executable, RESCALE_JOB, src, ref, str(tmp_path / "ref-ck")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    with subprocess.Popen([sys.executable, RESCALE_JOB, src, out, ck, "--to", "3", "--pace", "0.01"],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("rescaling"):
                break
        time.sleep(delay)
        proc.kill()
    done = subprocess.run([sys.executable, RESCALE_JOB, src, out, ck, "--parallelism", "4"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "restored_from=None" not in done.stdout  # it resumed from a checkpoint of the killed run
    assert output_rows(os.path.join(out, "tumbling")) == output_rows(os.path.join(ref, "tumbling"))


class RowCounter(Operator):
    """State that is not keyed: rows seen by this task."""

    name = "row_counter"

    def open(self, ctx):
        super().open(ctx)
        self.rows = 0

    def process(self, batch):
        self.rows += batch.num_rows
        return [batch]

    def snapshot(self):
        return self.rows.to_bytes(8, "little")

    def restore(self, state):
        if state is not None:
            self.rows = int.from_bytes(state, "little")


def test_an_operator_whose_state_is_not_keyed_keeps_its_parallelism(tmp_path):
    env = fo.StreamEnvironment(parallelism=2, max_parallelism=MAXP)
    gate = Gate(5, pace=0.01)
    source(env, gate).transform("row_counter", RowCounter).key_by("k").window(Tumbling(100)).aggregate(
        n=agg.count()).sink_to_parquet(str(tmp_path / "out"))
    client = env.execute_async()
    assert gate.reached.wait(60)
    with pytest.raises(ValueError, match="operator 'row_counter' cannot change its parallelism: its state is not"):
        client.rescale({"row_counter": 3})
    record = client.rescale(3)  # every operator that can
    result = client.wait()
    assert record.parallelism_after["window(Tumbling)"] == 3 == record.parallelism_after["watermark"]
    assert record.parallelism_after["row_counter"] == record.parallelism_before["row_counter"]
    assert result.rows_in == EVENTS.num_rows


def test_a_window_over_all_rows_stays_one_task_and_its_windows_stay_whole(tmp_path):
    # Flink's windowAll: one task sees every row; at two tasks each would count a part
    env = fo.StreamEnvironment(parallelism=1, max_parallelism=MAXP)
    gate = Gate(5, pace=0.01)
    every = source(env, gate).transform(
        "per_100ms", lambda: WindowOperator(Tumbling(100), (), {"n": agg.count(), "s": agg.sum("v")}, "ts"))
    result = every.sink_to_table()
    client = env.execute_async()
    assert gate.reached.wait(60)
    with pytest.raises(ValueError, match="cannot change its parallelism: it keeps state but its input is not keyed"):
        client.rescale({"per_100ms": 2})
    record = client.rescale(2)
    client.wait()
    assert record.parallelism_after["per_100ms"] == 1
    ts = np.asarray(EVENTS.column("ts"))
    expected = pa.table({"start": ts // 100 * 100, "v": EVENTS.column("v")}).group_by("start").aggregate(
        [("v", "count"), ("v", "sum")])
    got = result.table()
    assert got.num_rows == expected.num_rows
    assert sorted(zip(got.column("n").to_pylist(), got.column("s").to_pylist())) == sorted(
        zip(expected.column("v_count").to_pylist(), expected.column("v_sum").to_pylist()))
