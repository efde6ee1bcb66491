"""End-to-end pipeline benchmark: the W1 job through the runtime.

Parquet -> watermark (2 s bound) -> key_by(user_id) -> tumbling 1 s
count/sum/max -> collect, on 10M events (``--quick``: 1M), at parallelism 1
and 2; the same aggregation by the bare kernel (runtime overhead =
1 - pipeline / kernel, both including the Parquet read); DuckDB on the same
file in the same run; and the cost of one batch through one chained vs one
exchanged operator.

    python bench/bench_pipeline.py [--quick] [--json results/pipeline.json]
"""
from __future__ import annotations

import os
import sys
import tempfile

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(__file__))
from _common import median_time, parse_args, print_table, write_json  # noqa: E402

import fastops as fo  # noqa: E402
from fastops import agg  # noqa: E402
from fastops.operators import Operator  # noqa: E402
from fastops.window import WindowAggregator  # noqa: E402
from fastops.windows import Tumbling  # noqa: E402

BATCH = 65536


def make_events(n: int, seed: int = 42) -> pa.Table:
    """user_id Zipf over 100k keys; 100k events per simulated second with up to
    2 s of disorder; value float64."""
    rng = np.random.default_rng(seed)
    user = (rng.zipf(1.3, n) % 100_000).astype(np.int64)
    ts = np.arange(n, dtype=np.int64) // 100 + 1_700_000_000_000  # 100 events per ms
    ts = ts - rng.integers(0, 2000, n)
    value = rng.normal(100.0, 20.0, n)
    return pa.table({"user_id": user, "ts": ts, "value": value})


AGGS = lambda: {"n": agg.count(), "total": agg.sum("value"), "top": agg.max("value")}  # noqa: E731


def run_kernel(path: str) -> int:
    """Read the file and aggregate with the kernel alone, watermark per batch."""
    w = WindowAggregator(Tumbling("1s"), ["user_id"], AGGS(), time="ts")
    out = 0
    hi = None
    for b in pq.ParquetFile(path).iter_batches(batch_size=BATCH):
        w.process(b)
        m = pc.max(b["ts"]).as_py()
        hi = m if hi is None or m > hi else hi
        out += w.advance_watermark(hi - 2000 - 1).num_rows
    return out + w.flush().num_rows


def run_pipeline(path: str, parallelism: int, threads: bool) -> int:
    env = fo.StreamEnvironment(parallelism=parallelism, threads=threads)
    table = (env.from_parquet(path, batch_size=BATCH)
             .with_watermark("ts", max_out_of_orderness="2s")
             .key_by("user_id").window(Tumbling("1s")).aggregate(**AGGS())
             .collect())
    return table.num_rows


def run_duckdb(path: str, threads: int) -> int:
    import duckdb

    con = duckdb.connect(config={"threads": threads})
    return con.sql(f"""SELECT user_id, ts // 1000 AS w, count(*), sum(value), max(value)
                       FROM read_parquet('{path}') GROUP BY ALL""").to_arrow_table().num_rows


def per_hop_us(batches: int, exchange: bool) -> float:
    """Microseconds one 1024-row batch spends in one extra hop (chained or exchanged)."""
    b = pa.record_batch({"x": np.arange(1024)})

    def job(hops: int) -> None:
        env = fo.StreamEnvironment(parallelism=1, threads=exchange)
        s = env.from_arrow([b] * batches)
        for i in range(hops):
            s = s.rebalance() if exchange else s.transform(f"id{i}", Operator)
        s.sink_to(lambda x: None)
        env.execute()

    base = median_time(lambda: job(0), 3)
    four = median_time(lambda: job(4), 3)
    return max(four - base, 0.0) / (4 * batches) * 1e6


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    n = 1_000_000 if args.quick else 10_000_000
    repeats = args.repeats or (2 if args.quick else 3)
    tmp = tempfile.mkdtemp(prefix="fastops-bench-")
    path = os.path.join(tmp, "events.parquet")
    pq.write_table(make_events(n), path, row_group_size=4 * BATCH)

    expected = run_duckdb(path, 1)
    results = []

    def measure(name: str, fn, peer: bool = False) -> float:
        got = fn()
        if got != expected:
            raise AssertionError(f"{name}: {got} result rows, DuckDB gave {expected}")
        t = median_time(fn, repeats)
        results.append({"workload": "W1 pipeline", "engine": name, "rows_per_s": n / t,
                        "seconds": t, "peer": peer})
        return n / t

    kernel = measure("fastops kernel (read + aggregate)", lambda: run_kernel(path))
    p1 = measure("fastops pipeline p=1 (one thread)", lambda: run_pipeline(path, 1, False))
    p1t = measure("fastops pipeline p=1 (threads)", lambda: run_pipeline(path, 1, True))
    p2 = measure("fastops pipeline p=2", lambda: run_pipeline(path, 2, True))
    d1 = measure("duckdb threads=1", lambda: run_duckdb(path, 1), peer=True)
    d2 = measure("duckdb threads=2", lambda: run_duckdb(path, 2), peer=True)
    for r in results:
        r["vs_duckdb_1t"] = r["rows_per_s"] / d1
    print_table(results, ["engine", "rows_per_s", "seconds", "vs_duckdb_1t"])

    hop_batches = 500 if args.quick else 3000
    chained, exchanged = per_hop_us(hop_batches, False), per_hop_us(hop_batches, True)
    summary = {
        "events": n,
        "runtime_overhead_p1": 1 - p1 / kernel,
        "runtime_overhead_p1_threads": 1 - p1t / kernel,
        "speedup_p2_over_p1": p2 / max(p1, p1t),
        "p2_vs_duckdb_2_threads": p2 / d2,
        "per_hop_us_chained": chained,
        "per_hop_us_exchanged": exchanged,
    }
    print()
    print_table([{"metric": k, "value": v} for k, v in summary.items()], ["metric", "value"])
    if args.json:
        write_json(args.json, {"benchmark": "pipeline", "results": results, "summary": summary})


if __name__ == "__main__":
    main()
