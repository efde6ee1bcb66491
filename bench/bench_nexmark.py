"""Nexmark benchmark: events/s per query at parallelism 1, fastops beside DuckDB.

For each of nexmark's queries q0-q22 (``fastops.apps.nexmark``):

- fastops: ``run_query(q, events, rate)`` in streaming mode, parallelism 1:
  the ``nexmark`` source generates the events (unpaced, nexmark's
  ``max-emit-speed``), the views and the query run as nexmark's SQL files,
  until the final rows are collected. events/s = events / wall time, as
  nexmark reports throughput (the generator's work is in it, as in Flink's).
- DuckDB (1 thread): the query written out for DuckDB
  (``fastops.apps.nexmark.reference``) over the finished input, ``person``,
  ``auction`` and ``bid`` already in memory as Arrow tables (generation not
  timed), on the same events; it must give the same number of result rows.
- PyFlink: measured only where ``apache-flink`` and a JDK are installed;
  otherwise the column reads "not installed".

Event time advances at ``--rate`` events per second (nexmark's TPS: 10M in its
published runs). Queries fastops does not run yet are listed with the reason.
"source only" times the generator alone (its events/s bound every query).

    python bench/bench_nexmark.py [--quick] [--json results/nexmark.json] [--repeats N]
"""
from __future__ import annotations

import gc
import importlib.util
import os
import shutil
import statistics
import sys
import time

import duckdb

sys.path.insert(0, os.path.dirname(__file__))
from _common import measurement, parse_args, print_table, write_results
from fastops.apps.nexmark import QUERIES, run_query, runnable_queries
from fastops.apps.nexmark.reference import REFERENCE, tables
from fastops.connectors.base import END
from fastops.connectors.nexmark import NexmarkConfig, NexmarkSource, generate

RATE = 10_000_000  # nexmark's TPS (first-event.rate) in its published runs
BATCH = 65_536
QUICK_QUERIES = ("q0", "q2", "q5", "q8")
# q12's processing-time windows depend on the wall clock: DuckDB counts the bids per bidder (what the
# windows add up to) and the result rows are not compared
PEER = {**REFERENCE, "q12": "SELECT bidder, count(*) FROM bid GROUP BY bidder"}
UNCHECKED = {"q12"}


def pyflink_status() -> str:
    """'not installed' unless PyFlink and a Java runtime are both there."""
    if importlib.util.find_spec("pyflink") is None:
        return "not installed"
    if shutil.which("java") is None:
        return "not installed (no JDK)"
    return "installed (not measured by this script)"


def timed(fn, repeats: int) -> tuple[float, object]:
    """Median wall seconds of ``fn()`` (after a collected heap) and its last result."""
    samples = []
    out = None
    for _ in range(repeats):
        gc.collect()
        t0 = time.perf_counter()
        out = fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples), out


def source_only(events: int, rate: int) -> int:
    reader = NexmarkSource(NexmarkConfig(events=events, first_event_rate=rate, next_event_rate=rate,
                                         batch_size=BATCH)).open(0, 1)
    n = 0
    while (b := reader.read()) is not END:
        n += b.num_rows
    return n


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    events = 20_000 if args.quick else 1_000_000
    repeats = args.repeats or (1 if args.quick else 3)
    pyflink = pyflink_status()
    status = runnable_queries()
    queries = [q for q in QUERIES if status[q] is None and q in PEER]
    if args.quick:
        queries = [q for q in queries if q in QUICK_QUERIES]
    data = generate(NexmarkConfig(events=events, first_event_rate=RATE, next_event_rate=RATE, batch_size=BATCH))
    con = duckdb.connect(config={"threads": 1})
    for name, table in tables(data).items():
        con.register(name, table)
    results = []
    t, n = timed(lambda: source_only(events, RATE), repeats)
    results.append({"query": "source only", "fastops_events_per_s": events / t, "fastops_s": t,
                    "duckdb_events_per_s": float("nan"), "result_rows": n, "pyflink": pyflink})
    for q in queries:
        want = con.sql(PEER[q]).to_arrow_table().num_rows
        got = run_query(q, events=events, rate=RATE, batch_size=BATCH).num_rows  # warm-up and check
        if got != want and q not in UNCHECKED:
            raise AssertionError(f"{q}: fastops gave {got} result rows, DuckDB {want}")
        t_fo, _ = timed(lambda q=q: run_query(q, events=events, rate=RATE, batch_size=BATCH), repeats)
        t_dk, _ = timed(lambda q=q: con.sql(PEER[q]).to_arrow_table(), repeats)
        results.append({"query": q, "fastops_events_per_s": events / t_fo, "fastops_s": t_fo,
                        "duckdb_events_per_s": events / t_dk, "duckdb_s": t_dk,
                        "fastops_over_duckdb": t_dk / t_fo, "result_rows": got, "pyflink": pyflink})
    print_table(results, ["query", "fastops_events_per_s", "duckdb_events_per_s", "fastops_over_duckdb",
                          "result_rows", "pyflink"],
                title=f"Nexmark, {events:,} events (rate {RATE:,}/s of event time), parallelism 1, "
                      f"median of {repeats}")
    skipped = {q: why for q, why in status.items() if why is not None}
    if skipped:
        print("queries fastops does not run (q6: nor does Flink):")
        for q, why in skipped.items():
            print(f"  {q}: {why if len(why) < 160 else why[:157] + '...'}")
    write_results(args.json,
                  [measurement(f"nexmark {r['query']}", "fastops", r["fastops_events_per_s"])
                   for r in results] +
                  [measurement(f"nexmark {r['query']}", "DuckDB (1 thread, finished input)",
                               r["duckdb_events_per_s"], "peer") for r in results if r["query"] != "source only"],
                  {"events": events, "rate": RATE, "repeats": repeats, "results": results,
                   "not_running": skipped, "pyflink": pyflink})


if __name__ == "__main__":
    main()
