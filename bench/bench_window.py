"""Event-time window aggregation: fastops against DuckDB, Polars and pyarrow.

Workload (as in the window issue): N events (10M; 1M with ``--quick``),
``user_id`` int64 Zipf(1.1) over 100k keys, ``ts`` in ms at 100k events per
simulated second with up to 2 s of disorder, ``value`` float64, batches of
64k rows.

- W1: tumbling 1 s, count / sum / max of value by user_id
- W2: sliding 10 s every 1 s, same aggregates
- W3: session gap 30 s, count by user_id
- W4: tumbling 1 s, count / min / max of a string column ``page`` (8-24
  characters, 10k distinct) by user_id: string state
- W5: W1 with the key as a string (``"user-<id>"``): a string key table
- W1s: W1 in batches of 1,024 rows: what each batch costs beyond its rows

fastops runs incrementally: one batch at a time, a bounded-out-of-orderness
watermark (2 s) after every batch, ``flush`` at the end. The peers run one
batch query over the whole data with the same window assignment, on one
thread: DuckDB (``threads=1``, SQL), Polars (``group_by_dynamic``,
``POLARS_MAX_THREADS=1``; no session windows) and pyarrow
(``Table.group_by``, ``use_threads=False``; sliding windows by replicating
rows, no session windows). Each measurement is the median of several
repeats; the table shows events/s and the ratio fastops / fastest peer.

Usage: ``python bench/bench_window.py [--quick] [--json PATH] [--repeats R]``
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import tracemalloc

os.environ.setdefault("POLARS_MAX_THREADS", "1")

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import measurement, write_results
from fastops import BoundedOutOfOrderness, Session, Sliding, Tumbling, WindowAggregator
from fastops.core import aggregates as agg
from fastops.core import arrow as _arrow

KEYS = 100_000
RATE = 100_000  # events per simulated second
DISORDER = 2000
BATCH = 65_536


def make_data(n: int, seed: int = 42) -> pa.Table:
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, KEYS + 1) ** 1.1
    p /= p.sum()
    user = rng.choice(KEYS, size=n, p=p).astype(np.int64)
    base = (np.arange(n, dtype=np.int64) * 1000) // RATE
    ts = base - rng.integers(0, DISORDER + 1, size=n)
    value = rng.standard_normal(n) * 100.0
    return pa.table({"user_id": user, "ts": ts, "value": value})


def with_string_keys(table: pa.Table) -> pa.Table:
    """``table`` with ``user_id`` as the string ``"user-<id>"`` (W5)."""
    names = pc.binary_join_element_wise("user-", pc.cast(table["user_id"], pa.string()), "")
    return table.set_column(0, "user_id", names)


def with_pages(table: pa.Table, seed: int = 7) -> pa.Table:
    """``table`` with a string column ``page``: one of 10k random strings of
    8-24 characters per row (W4)."""
    rng = np.random.default_rng(seed)
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz/", dtype=np.uint8)
    pool = np.array([letters[rng.integers(0, len(letters), rng.integers(8, 25))].tobytes().decode()
                     for _ in range(10_000)], dtype=object)
    return table.append_column("page", pa.array(pool[rng.integers(0, len(pool), table.num_rows)],
                                                pa.string()))


WORKLOADS = {
    "W1": {"window": lambda: Tumbling("1s"), "aggs": lambda: {"n": agg.count(), "s": agg.sum("value"),
                                                            "mx": agg.max("value")}},
    "W2": {"window": lambda: Sliding("10s", "1s"), "aggs": lambda: {"n": agg.count(), "s": agg.sum("value"),
                                                                  "mx": agg.max("value")}},
    "W3": {"window": lambda: Session("30s"), "aggs": lambda: {"n": agg.count()}},
    "W4": {"window": lambda: Tumbling("1s"), "aggs": lambda: {"n": agg.count(), "lo": agg.min("page"),
                                                            "hi": agg.max("page")}},
}
# W1's job on other input: string keys (W5), small batches (W1s)
SAME_JOB = {"W5": "W1", "W1s": "W1"}
WORKLOADS.update({wl: WORKLOADS[job] for wl, job in SAME_JOB.items()})
SMALL_BATCH = 1024


# ---------------------------------------------------------------- runners

def run_fastops(batches: list[pa.RecordBatch], wl: str, after_batch=None) -> int:
    """Rows out of the incremental run; ``after_batch(aggregator)`` (if given)
    is called after each batch."""
    spec = WORKLOADS[wl]
    wa = WindowAggregator(spec["window"](), ["user_id"], spec["aggs"](), time="ts")
    wm = BoundedOutOfOrderness(DISORDER)
    rows = 0
    for b in batches:
        wa.process(b)
        t = wm.on_batch(b.column(1))
        if t is not None:
            rows += wa.advance_watermark(t).num_rows
        if after_batch is not None:
            after_batch(wa)
    rows += wa.flush().num_rows
    assert wa.rows_late == 0
    return rows


def run_duckdb(table: pa.Table, wl: str) -> int:
    con = duckdb.connect()
    con.execute("SET threads = 1")
    con.register("events", table)
    wl = SAME_JOB.get(wl, wl)
    if wl == "W1":
        # floor to the window start (DuckDB's // truncates towards zero for negatives)
        q = """SELECT user_id, ts - ((ts % 1000) + 1000) % 1000 AS ws, count(*) AS n, sum(value) AS s,
                      max(value) AS mx
               FROM events GROUP BY ALL"""
    elif wl == "W4":
        q = """SELECT user_id, ts - ((ts % 1000) + 1000) % 1000 AS ws, count(*) AS n, min(page) AS lo,
                      max(page) AS hi
               FROM events GROUP BY ALL"""
    elif wl == "W2":
        q = """SELECT user_id, ws, count(*) AS n, sum(value) AS s, max(value) AS mx FROM (
                 SELECT user_id, value, unnest(range(f - 9000, f + 1, 1000)) AS ws
                 FROM (SELECT user_id, value, ts - ((ts % 1000) + 1000) % 1000 AS f FROM events))
               GROUP BY ALL"""
    else:
        q = """WITH o AS (SELECT user_id, ts, CASE WHEN ts - lag(ts) OVER w > 30000 OR lag(ts) OVER w IS NULL
                                          THEN 1 ELSE 0 END AS brk
                          FROM events WINDOW w AS (PARTITION BY user_id ORDER BY ts)),
                    s AS (SELECT user_id, ts, sum(brk) OVER (PARTITION BY user_id ORDER BY ts
                                                             ROWS UNBOUNDED PRECEDING) AS sid FROM o)
               SELECT user_id, sid, min(ts) AS ws, max(ts) + 30000 AS we, count(*) AS n FROM s GROUP BY ALL"""
    n = con.sql(q).to_arrow_table().num_rows  # materialise every result row, as fastops does
    con.close()
    return n


def run_polars(table: pa.Table, wl: str):
    wl = SAME_JOB.get(wl, wl)
    if wl == "W3":
        return None
    df = pl.from_arrow(table).sort("ts")
    kw = {"every": "1000i", "group_by": "user_id", "closed": "left", "label": "left"}
    if wl in ("W1", "W4"):
        kw["period"] = "1000i"
    else:
        kw["period"] = "10000i"
        kw["offset"] = "-9000i"
    if wl == "W4":
        aggs = [pl.len().alias("n"), pl.col("page").min().alias("lo"), pl.col("page").max().alias("hi")]
    else:
        aggs = [pl.len().alias("n"), pl.col("value").sum().alias("s"), pl.col("value").max().alias("mx")]
    return df.group_by_dynamic("ts", **kw).agg(aggs).height


def run_pyarrow(table: pa.Table, wl: str):
    wl = SAME_JOB.get(wl, wl)
    if wl == "W3":
        return None
    ws0 = pc.multiply(pc.floor(pc.divide(pc.cast(table["ts"], pa.float64()), 1000.0)).cast(pa.int64()), 1000)
    if wl == "W4":
        t = pa.table({"user_id": table["user_id"], "ws": ws0, "page": table["page"]})
        return t.group_by(["user_id", "ws"], use_threads=False).aggregate(
            [("page", "count"), ("page", "min"), ("page", "max")]).num_rows
    if wl == "W1":
        t = pa.table({"user_id": table["user_id"], "ws": ws0, "value": table["value"]})
    else:
        parts = [pa.table({"user_id": table["user_id"], "ws": pc.subtract(ws0, 1000 * k), "value": table["value"]})
                 for k in range(10)]
        t = pa.concat_tables(parts)
    out = t.group_by(["user_id", "ws"], use_threads=False).aggregate(
        [("value", "count"), ("value", "sum"), ("value", "max")])
    return out.num_rows


def in_turn(batches: list[pa.RecordBatch], repeats: int) -> tuple[dict, list[float]]:
    """Median seconds of fastops W1 and W2, run alone, one after the other,
    and W2 / W1 of each adjacent pair of runs, sorted.

    In the table each fastops run follows the peers' runs of the same
    workload, and W2's follow pyarrow's group-by of the replicated rows,
    whose freed memory its pool still holds, which slows the ``process``
    calls of the fastops W2 run after it. Here both workloads follow the
    same work, so the ratio of the two is fastops' own. The order alternates
    (W1 W2, W2 W1, ...), and each pair's ratio is taken before the median:
    on a shared machine the speed drifts by more than the difference sought,
    and a pair shares its moment. Single pairs still spread widely, so the
    caller asks for many and prints their quartiles."""
    times: dict = {"W1": [], "W2": []}
    for r in range(repeats):
        for wl in ("W1", "W2") if r % 2 == 0 else ("W2", "W1"):
            t0 = time.perf_counter()
            run_fastops(batches, wl)
            times[wl].append(time.perf_counter() - t0)
    return ({wl: statistics.median(t) for wl, t in times.items()},
            sorted(b / a for a, b in zip(times["W1"], times["W2"])))


def fastops_memory(batches, wl: str) -> int:
    """Peak bytes allocated while running (NumPy via tracemalloc + Arrow pool growth)."""
    pool0 = _arrow.pool_bytes_in_use()  # blocks waiting for reuse not counted
    peak_pool = 0
    key_bytes = 0

    def measure(wa: WindowAggregator) -> None:
        nonlocal peak_pool, key_bytes
        peak_pool = max(peak_pool, _arrow.pool_bytes_in_use() - pool0)
        key_bytes = wa.key_table.nbytes()

    tracemalloc.start()
    run_fastops(batches, wl, measure)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak + peak_pool + key_bytes


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="1M events, fewer repeats (well under a minute)")
    ap.add_argument("--events", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--json", default=None, help="write results here")
    ap.add_argument("--workloads", default="W1,W2,W3,W4,W5,W1s")
    args = ap.parse_args(argv)
    n = args.events or (1_000_000 if args.quick else 10_000_000)
    repeats = args.repeats or (3 if args.quick else 5)
    table = make_data(n)
    batches = table.to_batches(max_chunksize=BATCH)
    input_bytes = table.nbytes
    results: dict = {"events": n, "repeats": repeats, "batch_rows": BATCH, "workloads": {}}
    print(f"{n:,} events, {len(batches)} batches of {BATCH:,}; median of {repeats} repeats; events/s (M)")
    header = f"{'':4} {'fastops':>9} {'duckdb':>9} {'polars':>9} {'pyarrow':>9} {'fastops/best':>13}"
    print(header)
    paged = None
    for wl in args.workloads.split(","):
        if wl == "W4":  # its own input: the W1 memory figure stays about the plain table
            paged = paged or with_pages(table)
            data, data_batches = paged, paged.to_batches(max_chunksize=BATCH)
        elif wl == "W5":
            data = with_string_keys(table)
            data_batches = data.to_batches(max_chunksize=BATCH)
        elif wl == "W1s":
            data, data_batches = table, table.to_batches(max_chunksize=SMALL_BATCH)
        else:
            data, data_batches = table, batches
        runners = [("fastops", run_fastops, data_batches), ("duckdb", run_duckdb, data),
                   ("polars", run_polars, data), ("pyarrow", run_pyarrow, data)]
        times: dict = {name: [] for name, _, _ in runners}
        out_rows: dict = {}
        for name, fn, data in runners:  # warm-up (first calls, first-touch) and output sizes
            out_rows[name] = fn(data, wl)
        for _ in range(repeats):  # interleaved, so load changes hit every engine alike
            for name, fn, data in runners:
                if out_rows[name] is None:
                    continue
                t0 = time.perf_counter()
                fn(data, wl)
                times[name].append(time.perf_counter() - t0)
        row = {}
        for name, _, _ in runners:
            if out_rows[name] is None:
                row[name] = None
                continue
            t = statistics.median(times[name])
            row[name] = {"seconds": t, "events_per_s": n / t, "output_rows": out_rows[name],
                         "repeats_s": times[name]}
        best = max(v["events_per_s"] for k, v in row.items() if k != "fastops" and v)
        row["ratio_vs_best_peer"] = row["fastops"]["events_per_s"] / best
        if wl == "W1":
            row["fastops_peak_bytes"] = fastops_memory(batches, wl)
            row["input_bytes"] = input_bytes
        results["workloads"][wl] = row

        def fmt(v):
            return f"{v['events_per_s'] / 1e6:9.2f}" if v else f"{'n/a':>9}"

        print(f"{wl:4} {fmt(row['fastops'])} {fmt(row['duckdb'])} {fmt(row['polars'])} {fmt(row['pyarrow'])} "
              f"{row['ratio_vs_best_peer']:12.2f}x   output rows: "
              + ", ".join(f"{k}={v['output_rows']:,}" for k, v in row.items() if isinstance(v, dict)
                          and "output_rows" in v))
    w = results["workloads"]
    if "W1" in w and "W2" in w:
        results["w2_cost_over_w1_in_table"] = w["W2"]["fastops"]["seconds"] / w["W1"]["fastops"]["seconds"]
        results["in_turn_s"], ratios = in_turn(batches, 4 * repeats + 1)
        q1, median, q3 = statistics.quantiles(ratios, n=4)
        results["w2_cost_over_w1"], results["w2_cost_over_w1_pairs"] = median, ratios
        print(f"W2 cost / W1 cost (fastops): {median:.2f} with W1 and W2 in turn (median of "
              f"{len(ratios)} adjacent pairs; quartiles {q1:.2f}, {q3:.2f}), "
              f"{results['w2_cost_over_w1_in_table']:.2f} from the table's runs")
    if "W1" in w:
        print(f"W1 fastops peak extra memory: {w['W1']['fastops_peak_bytes'] / 1e6:.1f} MB "
              f"(input {w['W1']['input_bytes'] / 1e6:.1f} MB)")
    measurements = [measurement(wl, engine, m["events_per_s"], "fastops" if engine == "fastops" else "peer")
                    for wl, row in w.items() for engine, m in row.items() if isinstance(m, dict)]
    write_results(args.json, measurements, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
