"""The Redis Streams source against a real server: decoding into the declared
schema, metadata columns, several streams over several readers, positions
and replay, acknowledgements only after a checkpoint completes, a dead
consumer's pending entries, undecodable entries on the side output, idle
streams, lost connections and the errors raised before a job starts."""
from __future__ import annotations

import datetime
import json
import threading
import time

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastops as fo
from fastops import agg
from fastops.connectors.base import END
from fastops.connectors.redis import RedisStreamSource
from fastops.operators.base import OperatorContext, Tagged
from fastops.windows import Tumbling

pytestmark = pytest.mark.xdist_group("servers")  # one test worker starts the servers

redis = pytest.importorskip("redis", reason="the connector tests need pip install 'fastops[connectors]'")

SCHEMA = {"user": pa.int64(), "v": pa.float64(), "name": pa.string()}


def client(url):
    return redis.Redis.from_url(url)


def add(url, stream, entries, ids=None):
    c = client(url)
    pipe = c.pipeline(transaction=False)
    for k, e in enumerate(entries):
        pipe.xadd(stream, e, id=ids[k] if ids else "*")
    out = [i.decode() for i in pipe.execute()]
    c.close()
    return out


def read_all(reader):
    batches = []
    while (b := reader.read()) is not END:
        if b is not None:
            batches.append(b)
    return pa.Table.from_batches(batches) if batches else None


def test_entries_become_rows_of_the_schema_with_their_metadata(redis_url):
    ids = add(redis_url, "ev", [{"user": 1, "v": 2.5, "name": "a,b", "ts": "2024-01-01T00:00:00"},
                                {"user": 2, "name": ""}, {"user": "3", "v": "-1e3", "name": "ü"}],
              ids=["1700000000000-0", "1700000000000-1", "1700000000123-0"])
    schema = dict(SCHEMA, ts=pa.timestamp("ms"))
    env = fo.StreamEnvironment()
    got = env.from_redis_stream(redis_url, "ev", schema, bounded=True).collect()
    assert got.schema.names == ["user", "v", "name", "ts", "_stream", "_id", "_ts"]
    assert got.column("user").to_pylist() == [1, 2, 3]
    assert got.column("v").to_pylist() == [2.5, None, -1000.0]  # a missing field is null
    assert got.column("name").to_pylist() == ["a,b", "", "ü"]
    assert got.column("ts").to_pylist() == [datetime.datetime(2024, 1, 1), None, None]
    assert got.column("_id").to_pylist() == ids
    assert got.column("_stream").to_pylist() == ["ev"] * 3
    assert got.column("_ts").cast(pa.int64()).to_pylist() == [1700000000000, 1700000000000, 1700000000123]


def test_json_entries_and_undecodable_ones_go_to_the_side_output(redis_url):
    docs = [{"user": 1, "v": 0.5, "name": "x"}, "not json", {"user": "seven"}, {"user": 4}, {"other": 1}]
    ids = add(redis_url, "js", [{"data": d if isinstance(d, str) else json.dumps(d)} for d in docs]
              + [{"nodata": "1"}])
    env = fo.StreamEnvironment()
    s = env.from_redis_stream(redis_url, "js", SCHEMA, decode="json", bounded=True, metadata=False)
    bad = s.side_output("undecodable").sink_to_table("bad")
    good = s.sink_to_table("good")
    env.execute()
    assert good.table().to_pylist() == [{"user": 1, "v": 0.5, "name": "x"}, {"user": 4, "v": None, "name": None},
                                        {"user": None, "v": None, "name": None}]
    rejected = bad.table().to_pylist()
    assert [r["_id"] for r in rejected] == [ids[1], ids[2], ids[5]]
    assert "is not JSON" in rejected[0]["reason"]
    assert rejected[1]["reason"].startswith("field 'user': 'seven' is not int64")
    assert rejected[2]["reason"] == "no field 'data'"
    assert json.loads(rejected[2]["fields"]) == {"nodata": "1"}


@settings(max_examples=6, deadline=None)
@given(st.integers(1, 4), st.integers(1, 3), st.integers(1, 50))
def test_several_streams_over_several_readers_read_each_entry_once(redis_server, streams, parallelism, batch):
    url = redis_server.url
    client(url).flushdb()
    names = [f"s{i}" for i in range(streams)]
    sent = {(s, i) for s in names for i in add(url, s, [{"user": k, "v": k, "name": s} for k in range(60)])}
    env = fo.StreamEnvironment(parallelism=parallelism)
    got = env.from_redis_stream(url, names, SCHEMA, bounded=True, batch_size=batch).collect()
    pairs = list(zip(got.column("_stream").to_pylist(), got.column("_id").to_pylist()))
    assert len(pairs) == len(sent) and set(pairs) == sent


@settings(max_examples=8, deadline=None)
@given(st.lists(st.integers(1, 40), min_size=1, max_size=6))
def test_a_reader_opened_at_a_position_reads_right_after_it(redis_server, stops):
    url = redis_server.url
    client(url).flushdb()
    ids = add(url, "p", [{"user": k} for k in range(100)])
    source = RedisStreamSource(url, "p", SCHEMA, batch_size=7, bounded=True)
    seen: list[str] = []
    position = None
    for stop in stops:  # read some batches, "crash", reopen at the last position
        reader = source.open(0, 1, json.loads(json.dumps(position)))
        for _ in range(stop):
            b = reader.read()
            if b is END:
                break
            if b is not None:
                seen += b.column("__redis_id").to_pylist()
        position = reader.position()
        reader.close()
    reader = source.open(0, 1, position)
    rest = read_all(reader)
    reader.close()
    seen += rest.column("__redis_id").to_pylist() if rest is not None else []
    assert seen == ids


def _ack_op(source, task=0, parallelism=1):
    op = source.acknowledger()
    op.open(OperatorContext("redis_ack", task, parallelism, 128))
    return op


def _pending(url, stream, group):
    return client(url).xpending(stream, group)["pending"]


def test_a_group_acknowledges_only_after_the_checkpoint_completes(redis_url):
    ids = add(redis_url, "g", [{"user": k} for k in range(30)])
    source = RedisStreamSource(redis_url, "g", SCHEMA, group="grp", batch_size=10, bounded=True)
    reader = source.open(0, 1, None)
    op = _ack_op(source)
    for _ in range(2):
        op.process(reader.read())
    op.snapshot_barrier(1)
    position = reader.position()  # checkpoint 1 covers 20 entries
    op.process(reader.read())
    assert _pending(redis_url, "g", "grp") == 30  # read, none acknowledged
    op.commit(1)
    assert _pending(redis_url, "g", "grp") == 10  # the completed checkpoint's entries
    # the job dies before checkpoint 2; the next attempt restores checkpoint 1
    reader.close()
    again = source.open(0, 1, json.loads(json.dumps(position)))
    rest = read_all(again)
    assert rest.column("_id").to_pylist() == ids[20:]  # the entries after the position, read again
    op2 = _ack_op(source)
    op2.recover([], 1)
    op2.process(rest.to_batches()[0])
    op2.pre_commit(2)
    op2.commit(2)
    assert _pending(redis_url, "g", "grp") == 0
    again.close()
    op.finished()
    op2.finished()


def test_a_restore_acknowledges_what_the_checkpoint_covers_if_the_commit_never_came(redis_url):
    add(redis_url, "h", [{"user": k} for k in range(12)])
    source = RedisStreamSource(redis_url, "h", SCHEMA, group="grp", batch_size=5, bounded=True)
    reader = source.open(0, 1, None)
    reader.read()
    position = reader.position()  # checkpoint complete, then the job died before XACK
    reader.read()
    reader.close()
    assert _pending(redis_url, "h", "grp") == 10
    again = source.open(0, 1, position)
    assert _pending(redis_url, "h", "grp") == 5  # the covered five, acknowledged at open
    assert again.read().num_rows == 5  # the other five, replayed
    again.close()


def test_a_dead_consumers_pending_entries_are_read_once(redis_url):
    add(redis_url, "d", [{"user": k, "v": k} for k in range(40)])
    c = client(redis_url)
    c.xgroup_create("d", "grp", id="0")
    c.xreadgroup("grp", "crashed-app", {"d": ">"}, count=15)  # delivered, never acknowledged
    c.xgroup_createconsumer("d", "grp", "idle-app")
    time.sleep(0.05)
    env = fo.StreamEnvironment(parallelism=2)
    s = env.from_redis_stream(redis_url, "d", SCHEMA, group="grp", bounded=True, claim_idle="10ms", batch_size=4)
    got = s.collect()
    assert sorted(got.column("user").to_pylist()) == list(range(40))
    assert c.xpending("d", "grp")["pending"] == 0


def test_consumers_left_by_a_smaller_parallelism_go_to_the_new_readers(redis_url):
    ids = add(redis_url, "r", [{"user": k} for k in range(30)])
    source = RedisStreamSource(redis_url, "r", SCHEMA, group="grp", batch_size=5, bounded=True)
    old = [source.open(i, 3, None) for i in range(3)]
    covered, seen = [], []
    for r in old:
        b = r.read()
        covered += b.column("__redis_id").to_pylist()
    positions = [r.position() for r in old]  # the checkpoint
    for r in old:
        b = r.read()  # after the checkpoint: read again after the restore
        seen += b.column("__redis_id").to_pylist()
        r.close()
    new_positions = source.rescale_positions(positions, 2)
    assert sorted(new_positions[0]["consumers"]) == ["fastops-0", "fastops-2"]
    assert sorted(new_positions[1]["consumers"]) == ["fastops-1"]
    replayed = []
    for i in range(2):
        r = source.open(i, 2, new_positions[i])
        t = read_all(r)
        replayed += t.column("__redis_id").to_pylist() if t is not None else []
        r.close()
    assert sorted(replayed) == sorted(seen)  # what no checkpoint covered, read again once
    assert sorted(covered + replayed) == sorted(ids)
    assert _pending(redis_url, "r", "grp") == len(replayed)  # acknowledged once their checkpoint completes


def test_an_idle_stream_marks_its_reader_idle(redis_url, tmp_path):
    base = 1_700_000_000_000
    client(redis_url).xadd("quiet", {"user": 0, "v": 0, "ts": base}, id=f"{base}-0")

    def job(idle, wait_s):
        client(redis_url).delete("busy")
        stop = threading.Event()

        def produce():  # a live stream, 100 ms of event time every 10 ms
            c, k = client(redis_url), 0
            while not stop.wait(0.01):
                c.xadd("busy", {"user": k % 3, "v": 1, "ts": base + 100 * k})
                k += 1

        producer = threading.Thread(target=produce, daemon=True)
        producer.start()
        env = fo.StreamEnvironment(parallelism=2, checkpoint_dir=str(tmp_path / f"ck{idle}"),
                                   checkpoint_interval="50ms")
        schema = dict(SCHEMA, ts=pa.int64())
        s = env.from_redis_stream(redis_url, ["busy", "quiet"], schema, idle_timeout=idle, block="20ms")
        out = s.with_watermark("ts").key_by("user").window(Tumbling("1s")).aggregate(n=agg.count()).sink_to_table()
        running = env.execute_async()
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and not out.table().num_rows:
            time.sleep(0.05)
        running.cancel()
        stop.set()
        producer.join()
        with pytest.raises(fo.JobCancelled):
            running.wait()
        return out.table().num_rows

    assert job("200ms", 20.0) > 0  # the quiet stream's reader went idle: the busy one's windows close
    assert job(None, 2.0) == 0  # without idleness the quiet reader holds the watermark back


def test_a_lost_connection_is_retried_and_nothing_is_lost_or_doubled(redis_url, tmp_path):
    add(redis_url, "lost", [{"user": k} for k in range(3000)])
    env = fo.StreamEnvironment(checkpoint_dir=str(tmp_path), checkpoint_interval="20ms")
    s = env.from_redis_stream(redis_url, "lost", SCHEMA, group="grp", bounded=True, batch_size=50)
    out = s.map(lambda b: (time.sleep(0.01), b)[1]).sink_to_table()
    killer_client = client(redis_url)
    stop = threading.Event()

    def kill_connections():
        while not stop.wait(0.03):
            killer_client.client_kill_filter(_type="normal", skipme=True)

    t = threading.Thread(target=kill_connections, daemon=True)
    t.start()
    try:
        env.execute()
    finally:
        stop.set()
        t.join()
    users = out.table().column("user").to_pylist()
    assert sorted(users) == list(range(3000))
    assert killer_client.xpending("lost", "grp")["pending"] == 0


def test_a_read_whose_connection_is_killed_is_retried_and_counted(redis_url, caplog):
    c = client(redis_url)
    c.xgroup_create("k", "grp", id="0", mkstream=True)
    source = RedisStreamSource(redis_url, "k", SCHEMA, group="grp", block="3s")
    reader = source.open(0, 1, None)
    reader.client.client_setname("blocked-reader")
    got = []
    t = threading.Thread(target=lambda: got.append(reader.read()))
    t.start()
    time.sleep(0.3)  # the reader waits in XREADGROUP BLOCK
    c.client_kill_filter(_type="normal", skipme=True)
    t.join()
    assert got == [None] and source.stats["reconnects"] == 1
    assert "lost its Redis connection" in caplog.text
    c.xadd("k", {"user": 5})
    batch = reader.read()
    assert batch.column("user").to_pylist() == [5]
    assert "reconnected to Redis after 1 failed attempts" in caplog.text
    reader.close()
    c.close()


def test_errors_are_raised_where_the_source_is_made(redis_url):
    env = fo.StreamEnvironment()
    with pytest.raises(ValueError, match="cannot connect to Redis at 'redis://127.0.0.1:1/0'"):
        env.from_redis_stream("redis://127.0.0.1:1/0", "x", SCHEMA)
    with pytest.raises(ValueError, match="Redis URL must look like"):
        env.from_redis_stream("http://x", "x", SCHEMA)
    with pytest.raises(TypeError, match="column 'l': entries cannot be decoded to list<item: int64>"):
        env.from_redis_stream(redis_url, "x", {"l": pa.list_(pa.int64())})
    with pytest.raises(ValueError, match="give group= too"):
        env.from_redis_stream(redis_url, "x", SCHEMA, consumer="c")
    with pytest.raises(ValueError, match="decode must be one of"):
        env.from_redis_stream(redis_url, "x", SCHEMA, decode="xml")
    with pytest.raises(ValueError, match="start must be a stream id"):
        env.from_redis_stream(redis_url, "x", SCHEMA, start="yesterday")


def test_the_acknowledger_passes_batches_and_tags_bad_rows(redis_url):
    add(redis_url, "t", [{"user": 1}, {"user": "x"}])
    source = RedisStreamSource(redis_url, "t", SCHEMA, bounded=True)
    reader = source.open(0, 1, None)
    out = _ack_op(source).process(reader.read())
    assert isinstance(out[0], Tagged) and out[0].tag == "undecodable"
    assert out[1].column("user").to_pylist() == [1]
    assert out[1].schema.names == ["user", "v", "name", "_stream", "_id", "_ts"]
    reader.close()


def test_the_demo_round_trip_gives_the_tables_of_the_generated_run(redis_url, capsys):
    from fastops.apps.cli import main
    from fastops.apps.demo import DemoConfig, run_demo

    url = redis_url + "?stream=game"
    assert main(["demo", "--events", "30k", "--batch-size", "8192", "--produce", url]) == 0
    assert "wrote 30,000 events to the Redis stream 'game'" in capsys.readouterr().out
    cfg = DemoConfig(events=30_000, batch_size=8192)
    generated = run_demo(cfg, progress=False)
    streamed = run_demo(DemoConfig(events=30_000, batch_size=8192, source=url), progress=False)
    for name in ("rewards", "leaderboard", "per_minute"):
        assert getattr(streamed, name).equals(getattr(generated, name)), name
    assert streamed.job.rows_in == 30_000
    assert main(["demo", "--source", "redis://127.0.0.1:1/0"]) == 2
    assert "cannot connect to Redis at 'redis://127.0.0.1:1/0'" in capsys.readouterr().err
