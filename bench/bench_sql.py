"""SQL benchmark: the W1 and W2 windowed queries as SQL over a Parquet file.

- W1: ``TUMBLE(..., INTERVAL '1' SECOND)``, COUNT / SUM / MAX of value by user_id
- W2: ``HOP(..., INTERVAL '1' SECOND, INTERVAL '10' SECONDS)``, same aggregates

Engines, in the same run and on the same file (events as in
``bench_pipeline.py``: user_id Zipf over 100k keys, 100 events per ms with up
to 2 s of disorder, ``ts`` TIMESTAMP(3), value DOUBLE):

- fastops SQL: ``TableEnvironment(mode="streaming")``, ``CREATE TABLE ... WATERMARK
  FOR ts AS ts - INTERVAL '2' SECOND WITH ('connector' = 'filesystem', ...)``, then
  the query; the job runs until its results are collected;
- fastops DataStream: the same job written by hand (``from_parquet`` ->
  ``with_watermark`` -> ``key_by`` -> ``window`` -> ``aggregate`` -> ``collect``);
- DuckDB (``threads=1``): the same windows as plain SQL over integer milliseconds.

Every engine must give the same number of result rows. Reported: median wall
time of several repeats, events/s, and the ratios SQL / DataStream (the issue
asks for fastops SQL within 10% of the DataStream job) and fastops SQL / DuckDB.

    python bench/bench_sql.py [--quick] [--json results/sql.json] [--repeats N]
"""
from __future__ import annotations

import gc
import os
import statistics
import sys
import tempfile
from functools import partial

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(__file__))
import fastops as fo
from _common import measurement, median_time, parse_args, print_table, write_results
from fastops.core import aggregates as agg

BATCH = 65536

SQL = {
    "W1": """SELECT window_start, window_end, user_id, COUNT(*) AS n, SUM(`value`) AS total,
                    MAX(`value`) AS top
             FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '1' SECOND))
             GROUP BY window_start, window_end, user_id""",
    "W2": """SELECT window_start, window_end, user_id, COUNT(*) AS n, SUM(`value`) AS total,
                    MAX(`value`) AS top
             FROM TABLE(HOP(TABLE events, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '10' SECONDS))
             GROUP BY window_start, window_end, user_id""",
}

WINDOWS = {"W1": lambda: fo.Tumbling("1s"), "W2": lambda: fo.Sliding("10s", "1s")}

DUCK = {
    "W1": """SELECT ms // 1000 * 1000 AS ws, user_id, count(*), sum(value), max(value)
             FROM (SELECT epoch_ms(ts) AS ms, user_id, value FROM read_parquet('{path}'))
             GROUP BY ALL""",
    "W2": """SELECT st, user_id, count(*), sum(value), max(value)
             FROM (SELECT ms // 1000 * 1000 - j * 1000 AS st, user_id, value
                   FROM (SELECT epoch_ms(ts) AS ms, user_id, value FROM read_parquet('{path}')), range(0, 10) r(j))
             GROUP BY ALL""",
}


def make_events(n: int, seed: int = 42) -> pa.Table:
    rng = np.random.default_rng(seed)
    user = (rng.zipf(1.3, n) % 100_000).astype(np.int64)
    ts = np.arange(n, dtype=np.int64) // 100 + 1_700_000_000_000  # 100 events per ms
    ts = ts - rng.integers(0, 2000, n)
    value = rng.normal(100.0, 20.0, n)
    return pa.table({"user_id": user, "ts": pa.array(ts).cast(pa.timestamp("ms")), "value": value})


def run_sql(path: str, wl: str) -> int:
    t_env = fo.TableEnvironment(mode="streaming", batch_size=BATCH)
    t_env.execute_sql(f"""CREATE TABLE events (user_id BIGINT, ts TIMESTAMP(3), `value` DOUBLE,
                              WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
                          WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'parquet')""")
    return t_env.sql_query(SQL[wl]).to_arrow().num_rows


def planning_time(path: str, wl: str, repeats: int = 5) -> float:
    """Median seconds of CREATE TABLE + parsing and planning the query (no job)."""
    def plan() -> None:
        t_env = fo.TableEnvironment(mode="streaming", batch_size=BATCH)
        t_env.execute_sql(f"""CREATE TABLE events (user_id BIGINT, ts TIMESTAMP(3), `value` DOUBLE,
                                  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
                              WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'parquet')""")
        t_env.sql_query(SQL[wl])
    return median_time(plan, repeats)


def run_datastream(path: str, wl: str) -> int:
    env = fo.StreamEnvironment(parallelism=1)
    out = (env.from_parquet(path, batch_size=BATCH)
           .with_watermark("ts", max_out_of_orderness="2s")
           .key_by("user_id").window(WINDOWS[wl]())
           .aggregate(n=agg.count(), total=agg.sum("value"), top=agg.max("value"))
           .collect())
    return out.num_rows


def run_duckdb(path: str, wl: str) -> int:
    con = duckdb.connect(config={"threads": 1})
    return con.sql(DUCK[wl].format(path=path)).to_arrow_table().num_rows


def _collect() -> None:
    gc.collect()


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    n = 1_000_000 if args.quick else 5_000_000
    repeats = args.repeats or (5 if args.quick else 7)
    tmp = tempfile.mkdtemp(prefix="fastops-bench-sql-")
    path = os.path.join(tmp, "events.parquet")
    pq.write_table(make_events(n), path, row_group_size=4 * BATCH)
    results = []
    summary = {}
    for wl in ("W1", "W2"):
        expected = run_duckdb(path, wl)
        engines = (("fastops SQL", run_sql), ("fastops DataStream", run_datastream),
                   ("DuckDB (1 thread)", run_duckdb))
        for name, fn in engines:  # check (and warm up) every engine first
            got = fn(path, wl)
            if got != expected:
                raise AssertionError(f"{wl} {name}: {got} result rows, DuckDB gave {expected}")
        # repeats interleave the engines (rotating their order), so that load from other users
        # of the machine hits them alike; each run starts from a collected heap (the previous
        # job's graph and output sit in a reference cycle until the cyclic GC runs)
        samples: dict[str, list[float]] = {name: [] for name, _ in engines}
        for r in range(repeats):
            for name, fn in engines[r % 3:] + engines[:r % 3]:
                samples[name].append(median_time(partial(fn, path, wl), 1, setup=_collect, warmup=0))
        times = {name: statistics.median(v) for name, v in samples.items()}
        for name, _ in engines:
            t = times[name]
            results.append({"workload": wl, "engine": name, "seconds": t, "events_per_s": n / t,
                            "result_rows": expected, "samples_s": samples[name]})
        sql_vs_ds = times["fastops DataStream"] / times["fastops SQL"]
        sql_vs_duck = times["DuckDB (1 thread)"] / times["fastops SQL"]
        best = min(samples["fastops DataStream"]) / min(samples["fastops SQL"])
        summary[wl] = {"sql_over_datastream_throughput": sql_vs_ds, "sql_over_duckdb_throughput": sql_vs_duck,
                       "sql_over_datastream_best_of": best, "sql_planning_s": planning_time(path, wl)}
        for r in results:
            if r["workload"] == wl:
                r["vs_datastream"] = times["fastops DataStream"] / r["seconds"]
    print_table(results, ["workload", "engine", "seconds", "events_per_s", "result_rows", "vs_datastream"],
                title=f"SQL window queries over Parquet, {n:,} events, median of {repeats}")
    for wl, s in summary.items():
        print(f"{wl}: fastops SQL throughput = {s['sql_over_datastream_throughput']:.3f} x DataStream "
              f"(best runs: {s['sql_over_datastream_best_of']:.3f}), "
              f"{s['sql_over_duckdb_throughput']:.2f} x DuckDB (1 thread); "
              f"SQL parse + plan {s['sql_planning_s'] * 1000:.1f} ms")
    roles = {"fastops SQL": "fastops", "fastops DataStream": "variant", "DuckDB (1 thread)": "peer"}
    write_results(args.json, [measurement(r["workload"], r["engine"], r["events_per_s"], roles[r["engine"]])
                              for r in results],
                  {"events": n, "repeats": repeats, "results": results, "summary": summary})


if __name__ == "__main__":
    main()
