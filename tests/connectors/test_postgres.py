"""The PostgreSQL sink against a real server: appends by COPY, upserts and
changelogs, two-phase commit across crashes (also between prepare and commit),
the errors raised before a job starts, and a Redis -> window -> PostgreSQL
job SIGKILLed at random moments that ends with the table of a run without
failures (tests marked slow)."""
from __future__ import annotations

import datetime
import os
import random
import re
import signal
import subprocess
import sys
import time

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastops as fo
from fastops.connectors.base import END, Reader, Source
from fastops.connectors.postgres import OP_COLUMN, PostgresSink, prepare_target
from fastops.operators.base import OperatorContext
from fastops.table.changelog import OP_COLUMN as TABLE_OP_COLUMN

pytestmark = pytest.mark.xdist_group("servers")  # one test worker starts the servers

psycopg = pytest.importorskip("psycopg", reason="the connector tests need pip install 'fastops[connectors]'")
redis = pytest.importorskip("redis", reason="the connector tests need pip install 'fastops[connectors]'")

JOB = os.path.join(os.path.dirname(os.path.dirname(__file__)), "support", "redis_pg_job.py")


def rows(dsn, query):
    with psycopg.connect(dsn) as conn:
        return conn.execute(query).fetchall()


def execute(dsn, *statements):
    with psycopg.connect(dsn, autocommit=True) as conn:
        for s in statements:
            conn.execute(s)


def test_op_column_is_the_table_apis():
    assert OP_COLUMN == TABLE_OP_COLUMN


def test_append_writes_every_value_as_postgres_reads_it(pg_dsn):
    ts = [datetime.datetime(2024, 1, 1, 12, 0, 0, 123000), None, datetime.datetime(1999, 12, 31, 23, 59, 59)]
    data = pa.table({
        "id": pa.array([1, 2, 3], pa.int64()),
        "name": pa.array(['a,"b"', None, ""], pa.string()),
        "kind": pa.array(["x", "y", "x"]).dictionary_encode(),
        "score": pa.array([1.5, None, -2.25], pa.float64()),
        "ok": pa.array([True, False, None]),
        "small": pa.array([1, None, 3], pa.int32()),
        "at": pa.array(ts, pa.timestamp("ms")),
    })
    env = fo.StreamEnvironment()
    env.from_arrow(data, batch_size=2).sink_to_postgres(pg_dsn, "t", create=True)
    env.execute()
    got = rows(pg_dsn, "SELECT id, name, kind, score, ok, small, at FROM t ORDER BY id")
    want = list(zip(*[c.to_pylist() for c in data.columns]))
    assert got == want
    assert rows(pg_dsn, "SELECT count(*) FROM pg_prepared_xacts") == [(0,)]


@settings(max_examples=8, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(-5, 5), st.sampled_from([0, 1, 2, 3])), max_size=60),
       st.integers(1, 7))
def test_upsert_applies_a_changelog_like_a_key_value_model(pg_dsn_once, changes, batch_size):
    dsn = pg_dsn_once
    execute(dsn, "DROP TABLE IF EXISTS kv", "CREATE TABLE kv (k bigint PRIMARY KEY, v bigint)",
            "DELETE FROM fastops_sink_epochs")
    model: dict[int, int] = {}
    for k, v, op in changes:  # the reference: rows of one key, last change wins; -U is followed by +U
        if op in (0, 2):
            model[k] = v
        elif op == 3:
            model.pop(k, None)
    data = pa.table({"k": pa.array([c[0] for c in changes], pa.int64()),
                     "v": pa.array([c[1] for c in changes], pa.int64()),
                     OP_COLUMN: pa.array([c[2] for c in changes], pa.int8())})
    env = fo.StreamEnvironment(checkpoint_dir=None)
    env.from_arrow(data, batch_size=batch_size).sink_to_postgres(dsn, "kv", mode="upsert", key="k")
    env.execute()
    assert dict(rows(dsn, "SELECT k, v FROM kv")) == model


@pytest.fixture(scope="module")
def pg_dsn_once(postgres_server):
    """The server, emptied once for a module's property test (its examples share it)."""
    execute(postgres_server.dsn, "DROP TABLE IF EXISTS kv", "CREATE TABLE IF NOT EXISTS fastops_sink_epochs "
            "(sink text, task int, epoch bigint, rows bigint, committed timestamptz DEFAULT now(), "
            "PRIMARY KEY (sink, task, epoch))")
    return postgres_server.dsn


def test_upsert_overwrites_rows_of_earlier_runs(pg_dsn):
    execute(pg_dsn, "CREATE TABLE u (k text PRIMARY KEY, n bigint)", "INSERT INTO u VALUES ('a', 1), ('z', 9)")
    env = fo.StreamEnvironment()
    env.from_collection([("a", 5), ("b", 6), ("a", 7)], schema=[("k", pa.string()), ("n", pa.int64())],
                        batch_size=1).sink_to_postgres(pg_dsn, "u", mode="upsert", key="k")
    env.execute()
    assert dict(rows(pg_dsn, "SELECT k, n FROM u")) == {"a": 7, "b": 6, "z": 9}


# -- errors before the job starts ------------------------------------------------------------------
def test_a_wrong_dsn_is_named(postgres_server):
    env = fo.StreamEnvironment()
    s = env.from_collection([(1,)], schema=[("a", pa.int64())])
    with pytest.raises(ValueError, match="cannot connect to PostgreSQL at 'postgresql://fastops:\\*\\*\\*@127.0.0.1:1/x'"):
        s.sink_to_postgres("postgresql://fastops:secret@127.0.0.1:1/x", "t")


def test_a_missing_table_needs_create(pg_dsn):
    s = fo.StreamEnvironment().from_collection([(1,)], schema=[("a", pa.int64())])
    with pytest.raises(ValueError, match="table 'nope' does not exist.*create=True"):
        s.sink_to_postgres(pg_dsn, "nope")
    s.sink_to_postgres(pg_dsn, "nope", create=True)
    assert rows(pg_dsn, "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
                        "WHERE attrelid = 'nope'::regclass AND attname = 'a'") == [("bigint",)]


def test_a_column_of_another_type_names_the_column_and_both_types(pg_dsn):
    execute(pg_dsn, "CREATE TABLE typed (a integer, b text)")
    s = fo.StreamEnvironment().from_collection([(1, "x")], schema=[("a", pa.int64()), ("b", pa.string())])
    with pytest.raises(ValueError, match="column 'a' is int64 in the stream but integer in table 'typed'"):
        s.sink_to_postgres(pg_dsn, "typed")
    s2 = fo.StreamEnvironment().from_collection([(1, "x")], schema=[("a", pa.int32()), ("c", pa.string())])
    with pytest.raises(ValueError, match="column 'c' \\(string\\) of the stream is not a column of table 'typed'"):
        s2.sink_to_postgres(pg_dsn, "typed")


def test_upsert_needs_a_key_the_table_has_an_index_on(pg_dsn):
    execute(pg_dsn, "CREATE TABLE nokey (a bigint, b bigint)")
    s = fo.StreamEnvironment().from_collection([(1, 2)], schema=[("a", pa.int64()), ("b", pa.int64())])
    with pytest.raises(ValueError, match="needs key="):
        s.sink_to_postgres(pg_dsn, "nokey", mode="upsert")
    with pytest.raises(ValueError, match="no primary key or unique index on \\['a'\\]"):
        s.sink_to_postgres(pg_dsn, "nokey", mode="upsert", key="a")
    with pytest.raises(ValueError, match="mode must be one of"):
        s.sink_to_postgres(pg_dsn, "nokey", mode="merge")
    changelog = fo.StreamEnvironment().from_collection(
        [(1, 0)], schema=[("a", pa.int64()), (OP_COLUMN, pa.int8())])
    with pytest.raises(ValueError, match="is a changelog"):
        changelog.sink_to_postgres(pg_dsn, "nokey")


# -- two-phase commit across a crash ---------------------------------------------------------------
def _sink(dsn, table="tx", task=0, parallelism=1):
    target = prepare_target(dsn, table, pa.schema([("a", pa.int64())]), create=True)
    sink = PostgresSink(target)
    sink.open(OperatorContext("sink", task, parallelism, 128))
    return sink


def test_recovery_commits_the_checkpoints_prepared_transactions_and_rolls_back_the_rest(pg_dsn):
    sink = _sink(pg_dsn)
    sink.write(pa.record_batch([pa.array([1, 2])], names=["a"]))
    handle1 = sink.snapshot_barrier(1)  # prepared: a crash now, before the commit
    sink.write(pa.record_batch([pa.array([3])], names=["a"]))
    sink.snapshot_barrier(2)  # prepared, but checkpoint 2 never completes
    sink.write(pa.record_batch([pa.array([4])], names=["a"]))  # open, never prepared
    assert rows(pg_dsn, "SELECT count(*) FROM tx") == [(0,)]
    assert len(rows(pg_dsn, "SELECT gid FROM pg_prepared_xacts")) == 2
    # the job dies here; the next attempt restores checkpoint 1 (its handle lists epoch 1)
    again = _sink(pg_dsn)
    again.recover([handle1], 1)
    assert rows(pg_dsn, "SELECT a FROM tx ORDER BY a") == [(1,), (2,)]
    assert rows(pg_dsn, "SELECT count(*) FROM pg_prepared_xacts") == [(0,)]
    stale = sink._conn.info.backend_pid  # the crashed attempt's session, with epoch 3 open: ended
    assert rows(pg_dsn, f"SELECT count(*) FROM pg_stat_activity WHERE pid = {stale}") == [(0,)]
    again.write(pa.record_batch([pa.array([3])], names=["a"]))  # the replay of epoch 2
    again.pre_commit(2)
    again.commit(2)
    assert rows(pg_dsn, "SELECT a FROM tx ORDER BY a") == [(1,), (2,), (3,)]
    again.commit(2)  # idempotent
    again.recover([handle1], 1)  # and so is recovering a checkpoint already committed
    assert rows(pg_dsn, "SELECT count(*) FROM tx") == [(3,)]
    for s in (sink, again):
        s.finished()


def test_a_restore_at_another_parallelism_settles_the_old_tasks_transactions(pg_dsn):
    old = [_sink(pg_dsn, task=i, parallelism=3) for i in range(3)]
    handles = []
    for i, s in enumerate(old):
        s.write(pa.record_batch([pa.array([10 + i])], names=["a"]))
        handles.append(s.snapshot_barrier(1))
        s.write(pa.record_batch([pa.array([20 + i])], names=["a"]))
        s.snapshot_barrier(2)  # never completes
    new = [_sink(pg_dsn, task=i, parallelism=2) for i in range(2)]
    new[1].recover([], 1)  # in any order: task 1 touches none of the old tasks' transactions
    new[0].recover(handles, 1)  # task 0 gets every handle of the checkpoint
    assert rows(pg_dsn, "SELECT a FROM tx ORDER BY a") == [(10,), (11,), (12,)]
    assert rows(pg_dsn, "SELECT count(*) FROM pg_prepared_xacts") == [(0,)]
    for s in old + new:
        s.finished()


def test_falling_back_past_committed_epochs_is_refused_for_append(pg_dsn):
    sink = _sink(pg_dsn)
    for epoch in (1, 2, 3):
        sink.write(pa.record_batch([pa.array([epoch])], names=["a"]))
        sink.snapshot_barrier(epoch)
        sink.commit(epoch)
    fresh = PostgresSink(sink.target)  # as recovery makes it: not opened
    assert fresh.committed_after(1) == ["tx: epoch 2 of task 0 (1 rows)", "tx: epoch 3 of task 0 (1 rows)"]
    with pytest.raises(ValueError, match="restores checkpoint 1, but table 'tx' already holds the rows of later"):
        fresh.roll_back(1)
    assert fresh.roll_back(0) == []  # a fresh start begins the sink's history anew
    assert fresh.committed_after(0) == []
    sink.finished()


# -- killed at random moments ------------------------------------------------------------------------
def _produce(url, streams, n, seed=3):
    """``n`` entries per stream (user, v, ts); the expected windows per (user, window_start)."""
    client = redis.Redis.from_url(url)
    rng = random.Random(seed)
    expected: dict[tuple[int, int], list[int]] = {}
    base = 1_700_000_000_000
    for s in streams:
        pipe = client.pipeline(transaction=False)
        for i in range(n):
            user, v, ts = rng.randrange(7), rng.randrange(1000), base + i * 4 + rng.randrange(300)
            pipe.xadd(s, {"user": user, "v": v, "ts": ts})
            w = ts - ts % 1000
            acc = expected.setdefault((user, w), [0, 0])
            acc[0] += 1
            acc[1] += v
        pipe.execute()
    client.close()
    return {(u, base_w): tuple(acc) for (u, base_w), acc in expected.items()}


def _run_killed(url, dsn, tmp_path, streams, group, parallelism, kills, seed):
    rng = random.Random(seed)
    cmd = [sys.executable, JOB, url, dsn, str(tmp_path / "ck"), "--streams", ",".join(streams),
           "--parallelism", str(parallelism), "--slow", "0.01"] + (["--group", group] if group else [])
    done_kills = 0
    for _ in range(kills * 4):
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines = []
        if done_kills < kills:
            # kill points early enough that the input (50 batches and more) outlasts every kill
            target = rng.randint(1, 12)
            seen = 0
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line)
                if line.startswith("batch"):
                    seen += 1
                    if seen >= target:
                        time.sleep(rng.random() * 0.01)  # somewhere within the batch
                        os.kill(proc.pid, signal.SIGKILL)
                        done_kills += 1
                        break
        out, err = proc.communicate(timeout=120)
        if proc.returncode == 0:
            assert "done" in "".join(lines) + out
            return done_kills
        assert proc.returncode == -signal.SIGKILL, err[-3000:]
    raise AssertionError("the job did not finish")


@pytest.mark.slow
@pytest.mark.parametrize(("streams", "group", "parallelism"), [(["s1", "s2"], None, 2), (["g1"], "grp", 2)],
                         ids=["xread-2-streams", "group-2-consumers"])
def test_killed_at_random_moments_the_tables_equal_a_run_without_failures(redis_url, pg_dsn, tmp_path, streams,
                                                                           group, parallelism):
    expected = _produce(redis_url, streams, 5000)
    execute(pg_dsn, "CREATE TABLE win_upsert (\"user\" bigint, window_start timestamp, window_end timestamp, "
                    "n bigint, total bigint, PRIMARY KEY (\"user\", window_start))",
            "CREATE TABLE win_append (\"user\" bigint, window_start timestamp, window_end timestamp, "
            "n bigint, total bigint)")
    kills = _run_killed(redis_url, pg_dsn, tmp_path, streams, group, parallelism, kills=6, seed=len(streams))
    assert kills >= 5

    def table(name):
        got = rows(pg_dsn, f'SELECT "user", window_start, n, total FROM {name}')
        return sorted(((u, int(w.replace(tzinfo=datetime.timezone.utc).timestamp() * 1000)), (n, t))
                      for u, w, n, t in got)

    want = sorted(expected.items())
    assert table("win_upsert") == want
    assert table("win_append") == want  # every window once: none lost, none doubled
    assert rows(pg_dsn, "SELECT count(*) FROM pg_prepared_xacts") == [(0,)]
    if group:
        client = redis.Redis.from_url(redis_url)
        assert client.xpending(streams[0], group)["pending"] == 0


# -- SQL: CREATE TABLE ... WITH ('connector' = 'redis-stream' / 'jdbc') ---------------------------
def test_sql_reads_a_redis_stream_and_writes_postgres_with_flinks_jdbc_options(redis_url, pg_dsn):
    client = redis.Redis.from_url(redis_url)
    base = 1_700_000_000_000
    for k in range(40):
        client.xadd("clicks", {"user": k % 4, "ms": base + 250 * k})
    client.close()
    execute(pg_dsn, "CREATE TABLE per_user (\"user\" bigint PRIMARY KEY, clicks bigint)")
    t_env = fo.TableEnvironment()
    t_env.execute_sql(f"""CREATE TABLE clicks (`user` BIGINT, ms BIGINT, _id STRING) WITH (
        'connector' = 'redis-stream', 'url' = '{redis_url}', 'stream' = 'clicks', 'format' = 'fields',
        'scan.bounded.mode' = 'latest-offset')""")
    host = pg_dsn.split("@", 1)[1]
    t_env.execute_sql(f"""CREATE TABLE per_user (`user` BIGINT, clicks BIGINT, PRIMARY KEY (`user`) NOT ENFORCED)
        WITH ('connector' = 'jdbc', 'url' = 'jdbc:postgresql://{host}', 'table-name' = 'per_user',
              'username' = 'fastops')""")
    t_env.execute_sql("INSERT INTO per_user SELECT `user`, COUNT(*) FROM clicks GROUP BY `user`")
    assert sorted(rows(pg_dsn, 'SELECT "user", clicks FROM per_user')) == [(u, 10) for u in range(4)]
    ids = [r[0] for r in t_env.execute_sql("SELECT _id FROM clicks").collect()]
    assert len(ids) == 40 and all("-" in i for i in ids)
    with pytest.raises(ValueError, match="unknown redis-stream option\\(s\\) \\['topic'\\]"):
        t_env.execute_sql(f"CREATE TABLE bad (a BIGINT) WITH ('connector' = 'redis-stream', 'url' = '{redis_url}', "
                          "'stream' = 's', 'topic' = 'x')")
        t_env.execute_sql("SELECT * FROM bad").collect()


def test_the_connectors_page_runs_against_the_servers(redis_url, pg_dsn, tmp_path, monkeypatch):
    """Every python block of docs/connectors.md, also those the docs test skips for want of servers."""
    page = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "docs", "connectors.md")
    with open(page, encoding="utf-8") as fh:
        blocks = re.findall(r"^```python\n(.*?)^```", fh.read(), re.S | re.M)
    assert len(blocks) >= 3
    monkeypatch.setenv("FASTOPS_REDIS_URL", redis_url)
    monkeypatch.setenv("FASTOPS_POSTGRES_DSN", pg_dsn)
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__docs__"}
    for code in blocks:
        exec(compile(code, page, "exec"), namespace)
    namespace["r"].close()


# -- a jdbc table read: a bounded scan, and the lookup source of a processing-time temporal join ----
def _jdbc_dim(t_env, pg_dsn):
    host = pg_dsn.split("@", 1)[1]
    t_env.execute_sql(f"""CREATE TABLE dim (k BIGINT, v STRING, PRIMARY KEY (k) NOT ENFORCED)
        WITH ('connector' = 'jdbc', 'url' = 'jdbc:postgresql://{host}', 'table-name' = 'dim',
              'username' = 'fastops')""")


def test_a_jdbc_table_is_read_as_a_bounded_source(pg_dsn):
    execute(pg_dsn, "CREATE TABLE dim (k bigint PRIMARY KEY, v text)",
            "INSERT INTO dim SELECT g, 'v' || g FROM generate_series(1, 50) AS g")
    t_env = fo.TableEnvironment(batch_size=7)
    _jdbc_dim(t_env, pg_dsn)
    got = sorted(tuple(r) for r in t_env.execute_sql("SELECT k, v FROM dim WHERE k % 3 = 0").collect())
    assert got == sorted(rows(pg_dsn, "SELECT k, v FROM dim WHERE k % 3 = 0"))


def test_a_lookup_join_sees_the_table_as_it_is_when_each_batch_arrives(pg_dsn):
    """Each probe batch queries the rows of its keys then: an update made
    between two batches is seen by the second and not by the first."""
    execute(pg_dsn, "CREATE TABLE dim (k bigint PRIMARY KEY, v text)",
            "INSERT INTO dim VALUES (1, 'a'), (2, 'b'), (3, 'c')")

    class Probes(Reader):  # the second batch is read after the table changed
        def __init__(self):
            self.sent = 0

        def read(self):
            self.sent += 1
            if self.sent == 2:
                execute(pg_dsn, "UPDATE dim SET v = 'A' WHERE k = 1", "INSERT INTO dim VALUES (4, 'd')")
            return [None, pa.record_batch({"id": [1, 2, 4, 1]}), pa.record_batch({"id": [1, 4, 5]}),
                    END][self.sent]

        def position(self):
            return self.sent

    class ProbeSource(Source):
        name = "probes"

        def schema(self):
            return pa.schema([("id", pa.int64())])

        def open(self, index, parallelism, position=None):
            return Probes()

    t_env = fo.TableEnvironment(mode="streaming")
    _jdbc_dim(t_env, pg_dsn)
    t_env.create_temporary_view("s", t_env.from_data_stream(fo.StreamEnvironment().from_source(ProbeSource())))
    q = "SELECT id, v FROM (SELECT id, PROCTIME() AS pt FROM s) AS p LEFT JOIN dim FOR SYSTEM_TIME AS OF p.pt " \
        "ON p.id = dim.k"
    assert "LookupJoin(table=[dim]" in t_env.explain_sql(q) and "lookup=[per batch]" in t_env.explain_sql(q)
    got = [tuple(r) for r in t_env.execute_sql(q).collect()]
    assert got == [(1, "a"), (2, "b"), (4, None), (1, "a"), (1, "A"), (4, "d"), (5, None)]
