"""Connector benchmark: the Redis Streams source and the PostgreSQL sink
against the plain clients, in the same run, on servers started for it (on
loopback, as the tests start them: tests/support/servers.py).

1. Redis source: N entries of three fields (an int, a float, a string) read
   by ``env.from_redis_stream(..., bounded=True)`` into a job that drops
   them, against a plain redis-py ``XREAD`` loop that turns each reply into
   an Arrow batch of the same schema; also the consumer-group variant
   (``XREADGROUP``, acknowledged after each checkpoint).
2. PostgreSQL sink: N Arrow rows (int64, float64, string, timestamp) by
   ``sink_to_postgres(..., mode="append")`` (COPY in the epoch's
   transaction, PREPARE / COMMIT PREPARED), with checkpoints every second
   and without, against plain psycopg ``COPY`` of the same batches: rows by
   ``copy.write_row`` (the documented way) and the batch written as CSV by
   Arrow (the fastest plain way).

    python bench/bench_connectors.py [--quick] [--json results/connectors.json]
"""
from __future__ import annotations

import io
import os
import shutil
import sys
import tempfile

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
import psycopg
import redis

import fastops as fo
from _common import measurement, median_times, parse_args, print_table, write_results
from support.servers import servers

SCHEMA = pa.schema([("user", pa.int64()), ("v", pa.float64()), ("name", pa.string())])
BATCH = 10_000


def fill_stream(url: str, n: int) -> None:
    client = redis.Redis.from_url(url)
    client.delete("bench")
    rng = np.random.default_rng(1)
    users = rng.integers(0, 100_000, n)
    values = np.round(rng.normal(size=n), 6)
    for lo in range(0, n, 5000):
        pipe = client.pipeline(transaction=False)
        for k in range(lo, min(n, lo + 5000)):
            pipe.xadd("bench", {"user": int(users[k]), "v": float(values[k]), "name": f"player-{users[k]}"})
        pipe.execute()
    client.close()


def plain_xread(url: str) -> int:
    """What a user of redis-py writes: XREAD batches from the last id, each reply into Arrow."""
    client = redis.Redis.from_url(url)
    last, rows = "0-0", 0
    while True:
        reply = client.xread({"bench": last}, count=BATCH)
        if not reply:
            break
        entries = reply[0][1]
        last = entries[-1][0]
        fields = [v for _, v in entries]
        ids = pa.array([i for i, _ in entries], pa.binary()).cast(pa.string())
        cols = [pc.cast(pa.array([f.get(name.encode()) for f in fields], pa.binary()).cast(pa.string()), t)
                for name, t in zip(SCHEMA.names, SCHEMA.types)]
        batch = pa.RecordBatch.from_arrays(cols + [ids], names=SCHEMA.names + ["_id"])
        rows += batch.num_rows
    client.close()
    return rows


def fastops_source(url: str, group: str | None, checkpoint_dir: str | None) -> int:
    if group is not None:
        client = redis.Redis.from_url(url)
        client.xgroup_destroy("bench", group)
        client.close()
    rows = [0]

    def count(batch: pa.RecordBatch) -> None:
        rows[0] += batch.num_rows

    if checkpoint_dir is not None:
        shutil.rmtree(checkpoint_dir, ignore_errors=True)
    env = fo.StreamEnvironment(checkpoint_dir=checkpoint_dir, checkpoint_interval="1s")
    env.from_redis_stream(url, "bench", SCHEMA, group=group, bounded=True, batch_size=BATCH,
                          metadata=False).sink_to(count)
    env.execute()
    return rows[0]


def make_rows(n: int) -> pa.Table:
    rng = np.random.default_rng(2)
    users = rng.integers(0, 100_000, n)
    return pa.table({
        "user": pa.array(users, pa.int64()),
        "v": pa.array(rng.normal(size=n)),
        "name": pa.array(np.char.add("player-", users.astype(str))),
        "at": pa.array(1_700_000_000_000 + np.arange(n, dtype=np.int64), pa.timestamp("ms")),
    })


def truncate(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("TRUNCATE bench_out")
        conn.execute("DELETE FROM fastops_sink_epochs")


def plain_copy_rows(dsn: str, table: pa.Table) -> None:
    """psycopg's documented COPY: ``write_row`` per row."""
    with psycopg.connect(dsn) as conn, conn.cursor() as cur:
        with cur.copy("COPY bench_out (\"user\", v, name, at) FROM STDIN") as copy:
            for batch in table.to_batches(BATCH):
                for row in zip(*[c.to_pylist() for c in batch.columns]):
                    copy.write_row(row)
        conn.commit()


def plain_copy_csv(dsn: str, table: pa.Table) -> None:
    """The fastest plain way: each batch written as CSV by Arrow, then COPY."""
    with psycopg.connect(dsn) as conn, conn.cursor() as cur:
        with cur.copy("COPY bench_out (\"user\", v, name, at) FROM STDIN (FORMAT csv)") as copy:
            for batch in table.to_batches(BATCH):
                buf = io.BytesIO()
                pacsv.write_csv(batch, buf, write_options=pacsv.WriteOptions(include_header=False))
                copy.write(buf.getvalue())
        conn.commit()


def fastops_sink(dsn: str, table: pa.Table, checkpoint_dir: str | None) -> None:
    if checkpoint_dir is not None:
        shutil.rmtree(checkpoint_dir, ignore_errors=True)
    env = fo.StreamEnvironment(checkpoint_dir=checkpoint_dir, checkpoint_interval="1s")
    env.from_arrow(table, batch_size=BATCH).sink_to_postgres(dsn, "bench_out")
    env.execute()


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    n_redis = 100_000 if args.quick else 1_000_000
    n_pg = 200_000 if args.quick else 2_000_000
    repeats = args.repeats or (2 if args.quick else 3)
    tmp = tempfile.mkdtemp(prefix="fastops-bench-connectors-")
    ck = os.path.join(tmp, "ck")
    results = []
    with servers() as (url, dsn):
        fill_stream(url, n_redis)
        assert plain_xread(url) == fastops_source(url, None, None) == n_redis
        t = median_times({"plain": lambda: plain_xread(url), "fastops": lambda: fastops_source(url, None, None),
                          "group": lambda: fastops_source(url, "g", ck)}, repeats)
        results += [
            {"workload": "redis source", "engine": "fastops", "role": "fastops", "rows_per_s": n_redis / t["fastops"]},
            {"workload": "redis source", "engine": "fastops group+checkpoints", "role": "variant",
             "rows_per_s": n_redis / t["group"]},
            {"workload": "redis source", "engine": "redis-py XREAD -> Arrow", "role": "peer",
             "rows_per_s": n_redis / t["plain"]}]
        table = make_rows(n_pg)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE bench_out (\"user\" bigint, v double precision, name text, at timestamp)")
        fastops_sink(dsn, table, None)  # creates the progress table, warms up
        truncate(dsn)
        contenders = {"fastops": lambda: fastops_sink(dsn, table, None),
                      "checkpoints": lambda: fastops_sink(dsn, table, ck),
                      "csv": lambda: plain_copy_csv(dsn, table),
                      "rows": lambda: plain_copy_rows(dsn, table)}
        t = median_times({k: (lambda f=f: (f(), truncate(dsn))) for k, f in contenders.items()}, repeats)
        results += [
            {"workload": "postgres sink", "engine": "fastops", "role": "fastops", "rows_per_s": n_pg / t["fastops"]},
            {"workload": "postgres sink", "engine": "fastops checkpoints 1s", "role": "variant",
             "rows_per_s": n_pg / t["checkpoints"]},
            {"workload": "postgres sink", "engine": "psycopg COPY of Arrow CSV", "role": "peer",
             "rows_per_s": n_pg / t["csv"]},
            {"workload": "postgres sink", "engine": "psycopg COPY write_row", "role": "peer",
             "rows_per_s": n_pg / t["rows"]}]
    shutil.rmtree(tmp, ignore_errors=True)
    best = {w: max(r["rows_per_s"] for r in results if r["workload"] == w and r["role"] == "peer")
            for w in ("redis source", "postgres sink")}
    for r in results:
        r["vs_best_plain"] = r["rows_per_s"] / best[r["workload"]]
    print_table(results, ["workload", "engine", "role", "rows_per_s", "vs_best_plain"])
    write_results(args.json, [measurement(r["workload"], r["engine"], r["rows_per_s"], r["role"]) for r in results],
                  {"results": results, "redis_entries": n_redis, "postgres_rows": n_pg})


if __name__ == "__main__":
    main()
