"""Redis stream -> watermark -> keyed tumbling window -> PostgreSQL (upsert and
append), run as a subprocess by the kill tests of tests/connectors.

    python redis_pg_job.py REDIS_URL DSN CHECKPOINT_DIR --streams a[,b] [--group G]
                           [--parallelism P] [--slow SECONDS]

Rows: ``user`` int64, ``v`` int64, ``ts`` int64 (ms). Per (user, 1 s window):
``n`` (count) and ``total`` (sum of v), upserted into ``win_upsert`` (key
user, window_start) and appended to ``win_append``. Prints ``batch N`` after
every batch it reads (the test kills it after a chosen batch) and ``done``
at the end.
"""
from __future__ import annotations

import argparse
import sys
import threading
import time

import pyarrow as pa

import fastops as fo
from fastops.core import aggregates as agg
from fastops.core.window.assigners import Tumbling

SCHEMA = {"user": pa.int64(), "v": pa.int64(), "ts": pa.int64()}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("redis_url")
    p.add_argument("dsn")
    p.add_argument("checkpoints")
    p.add_argument("--streams", required=True)
    p.add_argument("--group", default=None)
    p.add_argument("--parallelism", type=int, default=1)
    p.add_argument("--slow", type=float, default=0.0)
    a = p.parse_args()
    seen = [0]
    lock = threading.Lock()

    def pace(batch: pa.RecordBatch) -> pa.RecordBatch:
        with lock:
            seen[0] += 1
            sys.stdout.write(f"batch {seen[0]}\n")
            sys.stdout.flush()
        if a.slow:
            time.sleep(a.slow)
        return batch

    env = fo.StreamEnvironment(parallelism=a.parallelism, threads=True, checkpoint_dir=a.checkpoints,
                               checkpoint_interval="60ms")
    events = (env.from_redis_stream(a.redis_url, a.streams.split(","), SCHEMA, group=a.group, bounded=True,
                                    batch_size=100, metadata=False)
              .map(pace).with_watermark("ts", max_out_of_orderness="1s"))
    windows = events.key_by("user").window(Tumbling("1s")).aggregate(n=agg.count(), total=agg.sum("v"))
    windows.sink_to_postgres(a.dsn, "win_upsert", mode="upsert", key=["user", "window_start"])
    windows.sink_to_postgres(a.dsn, "win_append", mode="append")
    env.execute("redis to postgres")
    print("done", flush=True)


if __name__ == "__main__":
    main()
