"""executor="ray": the same jobs give the same output on Ray actors as on
local threads; failures name the user's code; no actor outlives a job; a
killed actor (and a node's workers, on a two-node cluster) is recovered from
the last checkpoint with exactly-once output."""
from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest

import fastops as fo
from fastops import agg

ray = pytest.importorskip("ray")
from ray._private.state import actors as actor_table  # noqa: E402  (Ray's GCS actor table)

pytestmark = [pytest.mark.ray, pytest.mark.xdist_group("ray")]  # one test worker holds the Ray tests


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    ray.init(include_dashboard=False, num_cpus=2, object_store_memory=200 * 1024 * 1024,
             configure_logging=False, log_to_driver=False)
    yield
    ray.shutdown()


def alive() -> list[str]:
    return [k for k, v in actor_table().items() if v["State"] == "ALIVE"]


def no_actor_left(within_s: float = 10.0) -> bool:
    """Whether Ray's actor table shows no live actor (killing is asynchronous: give it a moment)."""
    deadline = time.time() + within_s
    while alive() and time.time() < deadline:
        time.sleep(0.1)
    return not alive()


def data(n: int = 20_000, seed: int = 1) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table({"t": np.sort(rng.integers(0, 5_000, n)), "k": rng.integers(0, 20, n),
                     "x": rng.uniform(0, 1, n)})


class Counts(fo.KeyedProcessFunction):
    """A running count per key (value state) and a timer at the end of each row's 100 ms."""

    def process_batch(self, batch, ctx):
        seen = ctx.state("seen", pa.int64())
        counts = pc.add(pc.fill_null(seen.value(batch), 0), ctx.running_count(batch))
        seen.update(batch, counts)
        ctx.register_timer(batch, pc.multiply(pc.add(pc.divide(batch.column("t"), 100), 1), 100))
        return pa.RecordBatch.from_arrays([batch.column("k"), batch.column("t"), counts], names=["k", "t", "n"])

    def on_timer(self, timestamps, keys, ctx):
        return pa.RecordBatch.from_arrays([keys.column("k"), timestamps, pa.array(np.full(len(timestamps), -1))],
                                          names=["k", "t", "n"])


def events(env: fo.StreamEnvironment, seed: int = 1) -> fo.DataStream:
    return env.from_arrow(data(seed=seed), batch_size=1000).with_watermark("t")


JOBS = {
    "tumbling": lambda env: events(env).key_by("k").window(fo.Tumbling(100))
    .aggregate(n=agg.count(), s=agg.sum("x")).collect(),
    "sliding": lambda env: events(env).key_by("k").window(fo.Sliding(300, 100))
    .aggregate(n=agg.count(), top=agg.max("x")).collect(),
    "session": lambda env: events(env).key_by("k").window(fo.Session(20))
    .aggregate(n=agg.count(), s=agg.sum("x")).collect(),
    "process with timers": lambda env: events(env).key_by("k").process(Counts()).collect()
    .select(["k", "n"]),  # which row gets which count depends on arrival order; the counts do not
    "window join": lambda env: events(env).join(events(env, seed=2)).on("k").window(fo.Tumbling(200)).apply()
    .select("k", "t", "t_right").collect(),
}


def sql(env: fo.StreamEnvironment) -> pa.Table:
    t_env = fo.TableEnvironment(parallelism=2)
    t_env.create_temporary_view("events", t_env.from_data_stream(events(env)))
    return t_env.execute_sql(
        "SELECT k, window_start, COUNT(*) AS n, SUM(x) AS s FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(t), "
        "INTERVAL '0.1' SECOND)) GROUP BY k, window_start, window_end").to_arrow()


JOBS["sql"] = sql


def canonical(table: pa.Table) -> pa.Table:
    return table.sort_by([(c, "ascending") for c in table.column_names])


@pytest.mark.parametrize("job, actors", [(job, "node") for job in JOBS]
                         + [("tumbling", "task"), ("window join", "task"), ("process with timers", "task")])
def test_a_job_gives_the_same_output_on_ray_as_on_threads(job, actors):
    # actors="node": this machine's tasks share one actor; "task": every exchange goes through Ray
    threads = JOBS[job](fo.StreamEnvironment(parallelism=2, executor="threads"))
    env = fo.StreamEnvironment(parallelism=2, executor="ray", ray_actors=actors)
    on_ray = JOBS[job](env)
    assert threads.num_rows > 0
    assert canonical(on_ray).equals(canonical(threads))
    assert {m.location for m in env.last_result.metrics.values()} != {""}  # the tasks ran on Ray nodes
    assert no_actor_left()


def test_a_checkpointed_job_on_ray_writes_exactly_once(tmp_path):
    def job(env, out):  # a paced source: the job runs long enough for checkpoints
        batches = data().to_batches(1000)
        (env.from_generator(lambda: iter(batches), rate=20_000, deterministic=True).with_watermark("t")
         .key_by("k").window(fo.Tumbling(100)).aggregate(n=agg.count(), s=agg.sum("x")).sink_to_parquet(str(out)))
        return env.execute()

    job(fo.StreamEnvironment(parallelism=2, executor="threads"), tmp_path / "threads")
    env = fo.StreamEnvironment(parallelism=2, executor="ray", checkpoint_dir=str(tmp_path / "cp"),
                               checkpoint_interval="200ms")
    result = job(env, tmp_path / "ray")
    assert len(result.checkpoints) >= 1
    got = ds.dataset(str(tmp_path / "ray")).to_table()
    assert canonical(got).equals(canonical(ds.dataset(str(tmp_path / "threads")).to_table()))


def test_a_user_error_on_ray_names_the_operator_and_shows_the_users_frames():
    def price_check(batch):
        if batch.num_rows:
            raise ValueError("negative price in the feed")
        return batch

    env = fo.StreamEnvironment(parallelism=2, executor="ray")
    env.from_arrow(data()).key_by("k").map(price_check).sink_to(lambda b: None)
    with pytest.raises(fo.JobFailed, match="price_check") as info:
        env.execute()
    text = str(info.value.__cause__)
    assert text.startswith("ValueError: negative price in the feed")
    assert "in price_check" in text and "fastops/runtime" not in text.split("in price_check")[0]
    assert no_actor_left()


def test_a_cancelled_job_leaves_no_actor():
    def endless():
        while True:
            yield pa.record_batch({"k": np.arange(100) % 7})
            time.sleep(0.005)

    env = fo.StreamEnvironment(parallelism=2, executor="ray")
    env.from_generator(endless).key_by("k").map(lambda b: b).sink_to(lambda b: None)
    client = env.execute_async()
    deadline = time.time() + 60
    while client.metrics()["job"]["rows_in"] == 0 and time.time() < deadline:
        time.sleep(0.1)
    assert len(alive()) == 1  # one node: one actor runs its three tasks
    client.cancel()
    with pytest.raises(fo.JobCancelled):
        client.wait()
    assert no_actor_left()


def _killing(client: fo.JobClient, when: float, pick) -> threading.Thread:
    """SIGKILL the processes ``pick()`` names once the job has run ``when`` seconds."""
    def kill():
        while client.metrics()["job"]["rows_in"] == 0:
            time.sleep(0.05)
        time.sleep(when)
        for pid in pick():
            os.kill(pid, signal.SIGKILL)
    thread = threading.Thread(target=kill, daemon=True)
    thread.start()
    return thread


def slow_job(env: fo.StreamEnvironment, out: str) -> None:
    batches = data(60_000).to_batches(1000)  # paced: about 4 s
    (env.from_generator(lambda: iter(batches), rate=15_000, deterministic=True).with_watermark("t").key_by("k")
     .window(fo.Tumbling(100)).aggregate(n=agg.count(), s=agg.sum("x")).sink_to_parquet(out))


@pytest.mark.slow
def test_a_killed_actor_is_recovered_from_the_last_checkpoint(tmp_path):
    env0 = fo.StreamEnvironment(parallelism=2, executor="threads")
    slow_job(env0, str(tmp_path / "expected"))
    env0.execute()
    env = fo.StreamEnvironment(parallelism=2, executor="ray", ray_actors="task",  # one task's actor dies
                               checkpoint_dir=str(tmp_path / "cp"), checkpoint_interval="200ms", restart_attempts=2)
    slow_job(env, str(tmp_path / "ray"))
    client = env.execute_async()
    _killing(client, 1.5, lambda: [v["Pid"] for v in actor_table().values() if v["State"] == "ALIVE"][:1])
    result = client.wait()
    assert result.restarts == 1
    got, expected = ds.dataset(str(tmp_path / "ray")).to_table(), ds.dataset(str(tmp_path / "expected")).to_table()
    assert canonical(got).equals(canonical(expected))
    assert no_actor_left()


def test_fastops_run_executor_ray_runs_a_job_file_on_ray(tmp_path, capsys):
    from fastops.apps import cli

    job = tmp_path / "job.py"
    job.write_text("import fastops as fo\n"
                   "env = fo.StreamEnvironment(parallelism=2)\n"
                   "out = env.from_collection([(1, 10), (2, 20), (1, 30)], schema=['k', 'v']).key_by('k')"
                   ".map(lambda b: b).collect()\n"
                   "print('executor', env.executor, out.num_rows, {m.location != '' for m in "
                   "env.last_result.metrics.values()})\n")
    assert cli.main(["run", "--executor", "ray", str(job)]) == 0
    assert "executor ray 3 {True}" in capsys.readouterr().out
    assert cli.main(["run", str(job), "--executor", "ray"]) == 0  # after job.py, as the example
    assert "executor ray 3 {True}" in capsys.readouterr().out
    assert cli.main(["run", str(job), "--executor", "dask"]) == 2


def test_a_live_rescale_on_ray_keeps_the_output_exact(tmp_path):
    expected = fo.StreamEnvironment(parallelism=2, executor="threads")
    slow_job(expected, str(tmp_path / "expected"))
    expected.execute()
    env = fo.StreamEnvironment(parallelism=2, executor="ray")
    slow_job(env, str(tmp_path / "ray"))
    client = env.execute_async()
    while client.metrics()["job"]["rows_in"] == 0:
        time.sleep(0.05)
    time.sleep(1.0)
    record = client.rescale(3, timeout=60)
    result = client.wait()
    assert record.parallelism_after != record.parallelism_before
    assert len({m.task for m in result.metrics.values() if "[3/3]" in m.task}) >= 1
    got, want = ds.dataset(str(tmp_path / "ray")).to_table(), ds.dataset(str(tmp_path / "expected")).to_table()
    assert canonical(got).equals(canonical(want))
    assert no_actor_left()
