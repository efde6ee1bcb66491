"""Nexmark benchmark: events/s per query at parallelism 1, fastops beside DuckDB and PyFlink.

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
- PyFlink (streaming mode, ``parallelism.default`` 1): ``_pyflink_nexmark.py``
  run by the Python of a separate environment holding ``apache-flink``
  (``--pyflink-python PATH``, by default ``/opt/pyflink/bin/python`` if it
  exists; a JDK must be on the PATH). nexmark's connector is a Java jar, so
  the same events are written once to a JSON-lines file (not timed) and read
  by a ``filesystem`` table declared as nexmark's ``ddl_gen.sql`` (its ROW
  columns, computed ``dateTime`` and watermark); nexmark's views and the same
  query files run over it into ``blackhole`` sinks. events/s = events / wall
  time of the query (TableEnvironment, DDL, the job until it finishes, file
  reading and JSON parsing included); the JVM start-up is measured once and
  left out. The result rows are counted once on ``--check-events`` events
  (the query's SELECT collected, its changelog applied) and compared with
  fastops' where DuckDB's are.

Event time advances at ``--rate`` events per second (nexmark's TPS: 10M in its
published runs). Queries fastops does not run yet are listed with the reason.
"source only" times the generator alone (its events/s bound every query).

    python bench/bench_nexmark.py [--quick] [--json results/nexmark.json] [--repeats N]
                                  [--events N] [--check-events N] [--pyflink-python PATH]
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

sys.path.insert(0, os.path.dirname(__file__))
from _common import measurement, parse_args, print_table, write_results
from fastops.apps.nexmark import QUERIES, QUERIES_DIR, SIDE_INPUT_ROWS, run_query, runnable_queries
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
CHECK_EVENTS = 20_000  # --quick's size: PyFlink's result rows are compared with fastops' at this size


PYFLINK_PYTHON = "/opt/pyflink/bin/python"
PYFLINK_SCRIPT = Path(__file__).parent / "_pyflink_nexmark.py"
PYFLINK_TIMEOUT_S = 3600


def pyflink_status(python: str | None) -> str | None:
    """None if ``python`` can run PyFlink, else why not ("not installed", ...)."""
    if not python or not os.path.exists(python):
        return "not installed"
    if shutil.which("java") is None:
        return "not installed (no JDK)"
    probe = subprocess.run([python, "-c", "import pyflink"], capture_output=True, text=True)
    return None if probe.returncode == 0 else "not installed (apache-flink missing in that environment)"


def write_events(data: pa.Table, directory: Path) -> Path:
    """The events as JSON lines, one object per event as nexmark's table holds it (``event_type``
    and the ``person`` / ``auction`` / ``bid`` ROWs; ``dateTime`` is computed by the DDL), and q13's
    side input file under ``directory/data``; returns the events file."""
    def stamp(row: dict[str, Any] | None) -> dict[str, Any] | None:
        if row is not None:
            for key in ("dateTime", "expires"):
                if key in row:
                    row[key] = row[key].isoformat(sep=" ", timespec="milliseconds")
        return row

    path = directory / "events.json"
    with open(path, "w", encoding="utf-8") as fh:
        for batch in data.select(["event_type", "person", "auction", "bid"]).to_batches(BATCH):
            for event in batch.to_pylist():
                for kind in ("person", "auction", "bid"):
                    stamp(event[kind])
                fh.write(json.dumps(event, separators=(",", ":")))
                fh.write("\n")
    (directory / "data").mkdir(exist_ok=True)
    (directory / "data" / "side_input.txt").write_text("".join(f"{i},{i}\n" for i in range(SIDE_INPUT_ROWS)))
    return path


def run_pyflink(python: str, events: Path, queries: list[str], mode: str, repeats: int) -> dict[str, Any]:
    """``_pyflink_nexmark.py`` in ``mode`` ("time" / "count") on the events file; its JSON result."""
    out = events.parent / f"pyflink_{mode}.json"
    log = events.parent / f"pyflink_{mode}.log"
    cmd = [python, str(PYFLINK_SCRIPT), "--events", str(events), "--queries-dir", str(QUERIES_DIR),
           "--flink-home", str(events.parent), "--queries", ",".join(queries), "--mode", mode,
           "--repeats", str(repeats), "--out", str(out)]
    with open(log, "w") as fh:
        try:
            done = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, timeout=PYFLINK_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            done = None
    result = json.loads(out.read_text()) if out.exists() else {"queries": {}}
    if done is None or done.returncode != 0:
        tail = log.read_text().strip().splitlines()[-5:]
        why = "timed out" if done is None else f"exit status {done.returncode}"
        print(f"PyFlink ({mode}) {why}; last lines of its log:", *tail, sep="\n  ", file=sys.stderr)
        for q in queries:
            result["queries"].setdefault(q, {"error": f"PyFlink {why}"})
    return result


def pyflink_note(entry: dict[str, Any] | None, check: dict[str, Any] | None, fastops_rows: int | None) -> str:
    """The PyFlink column's note: the row check, or why the query did not run."""
    if entry is None:
        return ""
    if "error" in entry:
        return "did not run (see below)"
    if check is None or fastops_rows is None:
        return "rows not compared"
    if "error" in check:
        return "count failed (see below)"
    return "rows match" if check["rows"] == fastops_rows else f"rows differ: {check['rows']} vs {fastops_rows}"


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


def nexmark_config(events: int) -> NexmarkConfig:
    """The generator's settings of every run: ``events`` at nexmark's published rate."""
    return NexmarkConfig(events=events, first_event_rate=RATE, next_event_rate=RATE, batch_size=BATCH)


def source_only(events: int, rate: int) -> int:
    reader = NexmarkSource(NexmarkConfig(events=events, first_event_rate=rate, next_event_rate=rate,
                                         batch_size=BATCH)).open(0, 1)
    n = 0
    while (b := reader.read()) is not END:
        n += b.num_rows
    return n


def main() -> None:
    own = argparse.ArgumentParser(add_help=False)
    own.add_argument("--events", type=int, default=None, help="events per query (default 1M; --quick 20k)")
    own.add_argument("--check-events", type=int, default=CHECK_EVENTS,
                     help="events of the run that compares PyFlink's result rows with fastops'")
    own.add_argument("--pyflink-python", default=PYFLINK_PYTHON if os.path.exists(PYFLINK_PYTHON) else None,
                     help="the Python of an environment holding apache-flink")
    extra, rest = own.parse_known_args()
    args = parse_args(__doc__.splitlines()[0], rest)
    events = extra.events or (CHECK_EVENTS if args.quick else 1_000_000)
    repeats = args.repeats or (1 if args.quick else 3)
    status = runnable_queries()
    queries = [q for q in QUERIES if status[q] is None and q in PEER]
    if args.quick:
        queries = [q for q in queries if q in QUICK_QUERIES]
    data = generate(nexmark_config(events))
    con = duckdb.connect(config={"threads": 1})
    for name, table in tables(data).items():
        con.register(name, table)

    pyflink = pyflink_status(extra.pyflink_python)
    pf_time: dict[str, Any] = {"queries": {}}
    pf_count: dict[str, Any] = {"queries": {}}
    check_rows: dict[str, int] = {}
    checked = [q for q in queries if q not in UNCHECKED]
    if pyflink is None:
        with tempfile.TemporaryDirectory(prefix="nexmark-pyflink-") as tmp:
            small = Path(tmp) / "check"
            small.mkdir()
            check_data = data if extra.check_events == events else generate(nexmark_config(extra.check_events))
            pf_count = run_pyflink(extra.pyflink_python, write_events(check_data, small), checked, "count", 1)
            full = Path(tmp) / "full"
            full.mkdir()
            pf_time = run_pyflink(extra.pyflink_python, write_events(data, full), ["source_only", *queries],
                                  "time", repeats)
        check_rows = {q: run_query(q, events=extra.check_events, rate=RATE, batch_size=BATCH).num_rows
                      for q in checked}
        flink = f"PyFlink {pf_time.get('flink_version', '')}".strip()
    else:
        flink = "PyFlink"

    def pyflink_columns(name: str, t_fastops: float) -> dict[str, Any]:
        entry = pf_time["queries"].get(name)
        if pyflink is not None:
            return {"pyflink": pyflink}
        note = pyflink_note(entry, pf_count["queries"].get(name), check_rows.get(name))
        if entry is None or "error" in entry:
            return {"pyflink_events_per_s": float("nan"), "pyflink": note}
        t = statistics.median(entry["seconds"])
        return {"pyflink_events_per_s": events / t, "pyflink_s": t, "fastops_over_pyflink": t / t_fastops,
                "pyflink": note}

    results = []
    t, n = timed(lambda: source_only(events, RATE), repeats)
    results.append({"query": "source only", "fastops_events_per_s": events / t, "fastops_s": t,
                    "duckdb_events_per_s": float("nan"), "result_rows": n, **pyflink_columns("source_only", t)})
    if pyflink is None:
        results[-1]["pyflink"] = "reads the JSON file"
    for q in queries:
        want = con.sql(PEER[q]).to_arrow_table().num_rows
        got = run_query(q, events=events, rate=RATE, batch_size=BATCH).num_rows  # warm-up and check
        if got != want and q not in UNCHECKED:
            raise AssertionError(f"{q}: fastops gave {got} result rows, DuckDB {want}")
        t_fo, _ = timed(lambda q=q: run_query(q, events=events, rate=RATE, batch_size=BATCH), repeats)
        t_dk, _ = timed(lambda q=q: con.sql(PEER[q]).to_arrow_table(), repeats)
        results.append({"query": q, "fastops_events_per_s": events / t_fo, "fastops_s": t_fo,
                        "duckdb_events_per_s": events / t_dk, "duckdb_s": t_dk,
                        "fastops_over_duckdb": t_dk / t_fo, "result_rows": got, **pyflink_columns(q, t_fo)})
    print_table(results, ["query", "fastops_events_per_s", "duckdb_events_per_s", "pyflink_events_per_s",
                          "fastops_over_duckdb", "fastops_over_pyflink", "result_rows", "pyflink"],
                title=f"Nexmark, {events:,} events (rate {RATE:,}/s of event time), parallelism 1, "
                      f"median of {repeats}")
    if pyflink is None:
        print(f"{flink}: JVM start-up {pf_time.get('jvm_start_s', float('nan')):.1f} s, measured once and not in "
              f"its events/s;\n  the events are read from a JSON-lines file (the nexmark connector is a Java jar), "
              f"parsing included;\n  result rows compared with fastops' on {extra.check_events:,} events "
              f"(q12: processing-time windows, not compared)")
        failed = {q: e["error"] for q, e in pf_time["queries"].items() if "error" in e}
        failed.update({q: f"count: {e['error']}" for q, e in pf_count["queries"].items() if "error" in e})
        for q, why in failed.items():
            print(f"  {flink} {q}: {why}")
    print("ratios: the other engine's time / fastops' time (above 1: fastops is faster)")
    skipped = {q: why for q, why in status.items() if why is not None}
    if skipped:
        print("queries fastops does not run (q6: nor does Flink):")
        for q, why in skipped.items():
            print(f"  {q}: {why if len(why) < 160 else why[:157] + '...'}")
    peers = [measurement(f"nexmark {r['query']}", "DuckDB (1 thread, finished input)",
                         r["duckdb_events_per_s"], "peer") for r in results if r["query"] != "source only"]
    peers += [measurement(f"nexmark {r['query']}", f"{flink} (parallelism 1, JSON file)",
                          r["pyflink_events_per_s"], "peer")
              for r in results if r.get("pyflink_s") is not None]
    write_results(args.json,
                  [measurement(f"nexmark {r['query']}", "fastops", r["fastops_events_per_s"])
                   for r in results] + peers,
                  {"events": events, "rate": RATE, "repeats": repeats, "results": results,
                   "not_running": skipped, "pyflink": pyflink or flink,
                   "pyflink_jvm_start_s": pf_time.get("jvm_start_s"), "pyflink_check_events": extra.check_events,
                   "pyflink_check_rows": {q: e.get("rows") for q, e in pf_count["queries"].items()},
                   "pyflink_errors": {q: e["error"] for q, e in pf_time["queries"].items() if "error" in e}})


if __name__ == "__main__":
    main()
