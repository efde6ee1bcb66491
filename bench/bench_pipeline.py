"""End-to-end pipeline benchmark: the W1 job through the runtime.

Parquet -> watermark (2 s bound) -> key_by(user_id) -> tumbling 1 s
count/sum/max -> collect, on 10M events (``--quick``: 1M), at parallelism 1
and 2; the same aggregation by the bare kernel (runtime overhead =
1 - pipeline / kernel, both including the Parquet read); DuckDB on the same
file in the same run; and the cost of one batch through one chained vs one
exchanged operator. Contenders run in interleaved rounds.

Beside the rates it prints where the CPU goes, which is what bounds the
speed-up of parallelism 2 on a two-core machine: the CPU seconds of each run
(all threads) and the cores it kept busy (CPU / wall); the CPU time of every
task (at parallelism 1 the source and the window task already run on two
threads); the most parallelism 2 can gain on two cores, ``2 x CPU of p=1's
busiest task / CPU of the run``: p=2 takes at least half its CPU seconds,
p=1 at least its busiest thread's (about what it takes on an idle machine),
computed with p=1's CPU per row and with p=2's own; and how the key groups
spread the rows over the two window tasks.

    python bench/bench_pipeline.py [--quick] [--json results/pipeline.json]
"""
from __future__ import annotations

import os
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(__file__))
import fastops as fo
from _common import measurement, median_time, median_times_cpu, parse_args, print_table, write_results
from fastops.core import aggregates as agg
from fastops.core.window.aggregator import WindowAggregator
from fastops.core.window.assigners import Tumbling
from fastops.operators import Operator

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


AGGS = lambda: {"n": agg.count(), "total": agg.sum("value"), "top": agg.max("value")}


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


def run_pipeline(path: str, parallelism: int, threads: bool, jobs: list | None = None,
                 readers: int | None = None) -> int:
    """The W1 job; ``readers`` sets the source's parallelism (default: the
    job's, row groups split over the readers)."""
    env = fo.StreamEnvironment(parallelism=parallelism, threads=threads)
    source = env.from_parquet(path, batch_size=BATCH)
    if readers is not None:
        source = source.set_parallelism(readers)
    table = (source.with_watermark("ts", max_out_of_orderness="2s")
             .key_by("user_id").window(Tumbling("1s")).aggregate(**AGGS())
             .collect())
    if jobs is not None:
        jobs.append(env.last_result)
    return table.num_rows


def run_pipeline_served(path: str, parallelism: int) -> int:
    """The W1 job with its page and metrics served (``ui=0``) and ``/metrics``
    scraped every 100 ms while it runs (Prometheus scrapes every few seconds)."""
    env = fo.StreamEnvironment(parallelism=parallelism, threads=True)
    out = (env.from_parquet(path, batch_size=BATCH).with_watermark("ts", max_out_of_orderness="2s")
           .key_by("user_id").window(Tumbling("1s")).aggregate(**AGGS()).sink_to_table("out"))
    client = env.execute_async(ui=0)

    def scrape() -> None:
        while not client.done():
            try:
                urllib.request.urlopen(client.ui_url + "/metrics", timeout=5).read()
            except OSError:  # the job ended and its server with it
                return
            time.sleep(0.1)

    threading.Thread(target=scrape, daemon=True).start()  # the job's end is timed, not the scraper's
    client.wait()
    return out.table().num_rows


def key_balance(events: pa.Table, parallelism: int, max_parallelism: int) -> dict:
    """How key groups spread the rows over the window tasks: each task's share
    (contiguous key-group ranges, as Flink), the hottest key's share, and the
    largest task share of the best split into contiguous ranges (what moving
    the range bounds alone could reach)."""
    n = events.num_rows
    groups = fo.partition_ids(events, "user_id", max_parallelism)  # hash % max_parallelism
    load = np.bincount(groups, minlength=max_parallelism) / n
    owners = fo.partition_ids(events, "user_id", parallelism, "key_group",
                              max_parallelism=max_parallelism)
    shares = (np.bincount(owners, minlength=parallelism) / n).tolist()
    _, counts = np.unique(events["user_id"].to_numpy(), return_counts=True)
    cum = np.cumsum(load)[:-1]
    best = float(np.min(np.maximum(cum, 1 - cum))) if parallelism == 2 else float("nan")
    return {"task_row_shares": shares, "hottest_key_share": float(counts.max() / n),
            "best_contiguous_split_max_share": best}


def run_duckdb(path: str, threads: int) -> int:
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


def task_rows(result: Any, label: str) -> list[dict]:
    """Per-task figures of one job run: rows, CPU, busy / idle / backpressured."""
    return [{"run": label, "task": m.task, "rows_in": m.rows_in, "cpu_s": m.cpu_s,
             "busy_ms_per_s": m.busy_ms_per_s, "idle_ms_per_s": m.idle_ms_per_s,
             "backpressured_ms_per_s": m.backpressured_ms_per_s}
            for m in result.metrics.values()]


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    n = 1_000_000 if args.quick else 10_000_000
    repeats = args.repeats or (3 if args.quick else 5)
    tmp = tempfile.mkdtemp(prefix="fastops-bench-")
    path = os.path.join(tmp, "events.parquet")
    events = make_events(n)
    pq.write_table(events, path, row_group_size=4 * BATCH)

    expected = run_duckdb(path, 1)
    jobs: dict[str, list] = {"p1t": [], "p2": [], "p2r1": []}
    contenders = {
        "fastops kernel (read + aggregate)": lambda: run_kernel(path),
        "fastops pipeline p=1 (one thread)": lambda: run_pipeline(path, 1, False),
        "fastops pipeline p=1 (threads)": lambda: run_pipeline(path, 1, True, jobs["p1t"]),
        "fastops pipeline p=2": lambda: run_pipeline(path, 2, True, jobs["p2"]),
        # the same job with one Parquet reader feeding both window tasks: two
        # readers read row groups far apart in event time, so each window task
        # holds more open windows at once; this shows what that costs
        "fastops pipeline p=2 (one reader)": lambda: run_pipeline(path, 2, True, jobs["p2r1"], 1),
        # the same job served over HTTP and scraped every 100 ms: what watching a job costs
        "fastops pipeline p=2 (served, scraped)": lambda: run_pipeline_served(path, 2),
        "duckdb threads=1": lambda: run_duckdb(path, 1),
        "duckdb threads=2": lambda: run_duckdb(path, 2),
    }
    for name, fn in contenders.items():
        got = fn()
        if got != expected:
            raise AssertionError(f"{name}: {got} result rows, DuckDB gave {expected}")
    times = median_times_cpu(contenders, repeats)
    for js in jobs.values():   # the job results of the timed rounds only
        del js[:len(js) - repeats]
    results = [{"workload": "W1 pipeline", "engine": name, "rows_per_s": n / wall, "seconds": wall,
                "cpu_s": cpu, "cores_busy": cpu / wall, "peer": name.startswith("duckdb")}
               for name, (wall, cpu) in times.items()]
    rate = {r["engine"]: r["rows_per_s"] for r in results}
    d1, d2 = rate["duckdb threads=1"], rate["duckdb threads=2"]
    for r in results:
        r["vs_duckdb_1t"] = r["rows_per_s"] / d1
    print_table(results, ["engine", "rows_per_s", "seconds", "cpu_s", "cores_busy", "vs_duckdb_1t"])

    # the median run of each parallel job: where its CPU went, task by task
    def median_run(js: list) -> Any:
        return sorted(js, key=lambda r: r.duration_s)[len(js) // 2]

    per_task = task_rows(median_run(jobs["p1t"]), "p=1") + task_rows(median_run(jobs["p2"]), "p=2")
    print()
    print_table(per_task, ["run", "task", "rows_in", "cpu_s", "busy_ms_per_s", "idle_ms_per_s",
                           "backpressured_ms_per_s"])

    kernel = rate["fastops kernel (read + aggregate)"]
    p1_one, p1t = "fastops pipeline p=1 (one thread)", "fastops pipeline p=1 (threads)"
    wall1 = min(times[p1_one][0], times[p1t][0])
    wall1t, cpu1 = times[p1t]
    wall2, cpu2 = times["fastops pipeline p=2"]
    # p=1 (threads) is no faster than its busiest task's thread; p=2 on two
    # cores is no faster than half its CPU seconds
    critical1 = statistics.median(max(m.cpu_s for m in r.metrics.values()) for r in jobs["p1t"])

    def window_cpu(key: str) -> float:
        return statistics.median(sum(m.cpu_s for name, m in r.metrics.items() if name.startswith("window"))
                                 for r in jobs[key])

    balance = key_balance(events, 2, fo.StreamEnvironment(parallelism=2).max_parallelism)
    hop_batches = 500 if args.quick else 3000
    chained, exchanged = per_hop_us(hop_batches, False), per_hop_us(hop_batches, True)
    summary = {
        "events": n,
        "runtime_overhead_p1": 1 - rate[p1_one] / kernel,
        "runtime_overhead_p1_threads": 1 - rate[p1t] / kernel,
        # the same in CPU seconds, which other load on the machine does not stretch
        "runtime_overhead_p1_cpu": 1 - times["fastops kernel (read + aggregate)"][1] / times[p1_one][1],
        "speedup_p2_over_p1": wall1 / wall2,
        "speedup_p2_one_reader_over_p1": wall1 / times["fastops pipeline p=2 (one reader)"][0],
        "p2_vs_duckdb_2_threads": rate["fastops pipeline p=2"] / d2,
        "cpu_ns_per_row_p1": cpu1 / n * 1e9,
        "cpu_ns_per_row_p2": cpu2 / n * 1e9,
        "cpu_p2_over_p1": cpu2 / cpu1,
        "cores_busy_p1": cpu1 / wall1t,
        "cores_busy_p2": cpu2 / wall2,
        "window_tasks_cpu_p2_over_p1": window_cpu("p2") / window_cpu("p1t"),
        "window_tasks_cpu_p2_one_reader_over_p1": window_cpu("p2r1") / window_cpu("p1t"),
        "p1_busiest_task_cpu_share": critical1 / cpu1,
        "max_speedup_2_cores_p1_cpu": 2 * critical1 / cpu1,
        "max_speedup_2_cores_p2_cpu": 2 * critical1 / cpu2,
        "max_speedup_2_cores_p2_one_reader_cpu": 2 * critical1 / times["fastops pipeline p=2 (one reader)"][1],
        "window_task_row_share_max": max(balance["task_row_shares"]),
        "hottest_key_row_share": balance["hottest_key_share"],
        "best_contiguous_split_row_share_max": balance["best_contiguous_split_max_share"],
        "per_hop_us_chained": chained,
        "per_hop_us_exchanged": exchanged,
        "served_scraped_p2_cost": 1 - rate["fastops pipeline p=2 (served, scraped)"] / rate["fastops pipeline p=2"],
    }
    print()
    print_table([{"metric": k, "value": v} for k, v in summary.items()], ["metric", "value"])
    # the fastest run of the whole pipeline is compared; the bare kernel and the other runs are variants
    compared = max((r for r in results if "pipeline" in r["engine"] and "served" not in r["engine"]),
                   key=lambda r: r["rows_per_s"])
    write_results(args.json, [measurement(r["workload"], r["engine"], r["rows_per_s"],
                                          "peer" if r["peer"] else "fastops" if r is compared else "variant")
                              for r in results],
                  {"results": results, "summary": summary, "tasks": per_task})


if __name__ == "__main__":
    main()
