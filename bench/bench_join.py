"""Streaming regular join benchmark: fastops' ``StreamJoin`` vs DuckDB's one-shot join.

Data: two inputs of N rows each, ``k`` / ``k2`` uniform over N/4 keys (so
about 4 rows per key and side, 4N result rows), an int64 payload column
each. The streaming join gets batches of 1000 rows, left and right in turn,
and emits as rows arrive (inner: ``+I`` pairs; left outer: a changelog with
``+I (row, NULLs)`` / ``-D`` / ``+I``), holding every row (a regular join
never drops state). Contenders, in the same run and on the same data:

- fastops streaming: ``StreamJoin(..., incremental=True)``, all batches fed
  through ``process_input``; every output batch is built;
- fastops at end: the same operator in batch mode (joins once at end of input);
- DuckDB (``threads=1``): ``SELECT * FROM l {JOIN|LEFT JOIN} r ON k = k2``
  over the Arrow tables, fetched as an Arrow table.

Every contender must give the same final number of rows (the changelog
applied). Reported: median wall time, the ratio streaming / DuckDB, and the
median time of one batch over the first and the last quarter of the stream,
with the operator's count of keys / index entries / rows touched per batch.
In the last quarter a batch has about the same number of matches whatever N
is, so these stay about flat as N grows when a batch does not rescan the
rows held (the sorted runs of the key index add a ``log N`` factor).

    python bench/bench_join.py [--quick] [--json results/join.json] [--repeats N]
"""
from __future__ import annotations

import gc
import os
import statistics
import sys
import time
from functools import partial

import duckdb
import numpy as np
import pyarrow as pa

sys.path.insert(0, os.path.dirname(__file__))
from _common import measurement, median_times, parse_args, print_table, write_results
from fastops.table.changelog import OP_COLUMN
from fastops.table.operators import StreamJoin

BATCH = 1000
LS = pa.schema([("k", pa.int64()), ("v", pa.int64())])
RS = pa.schema([("k2", pa.int64()), ("w", pa.int64())])
HOW = {"inner": ("inner", "JOIN"), "left": ("left outer", "LEFT JOIN")}


def make_data(n: int, seed: int = 0) -> tuple[pa.Table, pa.Table]:
    rng = np.random.default_rng(seed)
    keys = max(n // 4, 1)
    left = pa.table({"k": rng.integers(0, keys, n), "v": np.arange(n)}, schema=LS)
    right = pa.table({"k2": rng.integers(0, keys, n), "w": np.arange(n)}, schema=RS)
    return left, right


def arrivals(left: pa.Table, right: pa.Table) -> list:
    """(input, batch) in arrival order: left and right batches in turn."""
    lb, rb = left.to_batches(BATCH), right.to_batches(BATCH)
    out = []
    for i in range(max(len(lb), len(rb))):
        out += [(0, lb[i])] if i < len(lb) else []
        out += [(1, rb[i])] if i < len(rb) else []
    return out


def final_rows(batches: list) -> int:
    """Rows after applying the changelog (+I adds one, -D removes one)."""
    n = 0
    for b in batches:
        if OP_COLUMN in b.schema.names:
            ops = b.column(OP_COLUMN).to_numpy()
            n += int((ops == 0).sum()) - int((ops == 3).sum())
        else:
            n += b.num_rows
    return n


def run_streaming(how: str, feed: list, per_batch: list | None = None) -> int:
    op = StreamJoin(["k"], ["k2"], how, LS, RS, None, incremental=True)
    op.open(None)
    out: list = []
    for side, batch in feed:
        w0 = op.touched() if per_batch is not None else 0
        t0 = time.perf_counter()
        out += op.process_input(side, batch)
        if per_batch is not None:
            per_batch.append((time.perf_counter() - t0, op.touched() - w0))
    return final_rows(out)


def run_at_end(how: str, feed: list) -> int:
    op = StreamJoin(["k"], ["k2"], how, LS, RS, None, incremental=False)
    op.open(None)
    for side, batch in feed:
        op.process_input(side, batch)
    return final_rows(op.close())


def run_duckdb(con: duckdb.DuckDBPyConnection, query: str) -> pa.Table:
    return con.sql(query).to_arrow_table()


def main(argv=None) -> None:
    args = parse_args(__doc__.splitlines()[0], argv)
    sizes = [20_000, 50_000] if args.quick else [50_000, 100_000, 200_000]
    repeats = args.repeats or (1 if args.quick else 3)
    con = duckdb.connect()
    con.execute("SET threads TO 1")
    rows = []
    for n in sizes:
        left, right = make_data(n)
        feed = arrivals(left, right)
        con.register("l", left)
        con.register("r", right)
        for name, (how, sql) in HOW.items():
            q = f"SELECT * FROM l {sql} r ON k = k2"
            want = con.sql(q).to_arrow_table().num_rows
            got = {"streaming": run_streaming(how, feed), "at end": run_at_end(how, feed)}
            assert all(v == want for v in got.values()), (name, n, got, want)
            times = median_times({
                "streaming": partial(run_streaming, how, feed),
                "at end": partial(run_at_end, how, feed),
                "duckdb": partial(run_duckdb, con, q),
            }, repeats=repeats)
            per_batch: list = []
            gc.disable()  # as while timing above
            try:
                run_streaming(how, feed, per_batch)
            finally:
                gc.enable()
            quarter = max(len(per_batch) // 4, 1)
            first, last = per_batch[:quarter], per_batch[-quarter:]
            rows.append({
                "join": name, "N": n, "result_rows": want,
                "streaming_s": times["streaming"], "at_end_s": times["at end"], "duckdb_s": times["duckdb"],
                "streaming/duckdb": times["streaming"] / times["duckdb"],
                "batch_ms_first": 1e3 * statistics.median(t for t, _ in first),
                "batch_ms_last": 1e3 * statistics.median(t for t, _ in last),
                "touched_first": int(statistics.median(w for _, w in first)),
                "touched_last": int(statistics.median(w for _, w in last)),
            })
            print_table(rows[-1:], list(rows[-1]))
    cols = ["join", "N", "result_rows", "streaming_s", "at_end_s", "duckdb_s", "streaming/duckdb",
            "batch_ms_first", "batch_ms_last", "touched_first", "touched_last"]
    print()
    print_table(rows, cols, title=f"streaming regular join, 2xN rows, N/4 keys, batches of {BATCH} "
                                  f"(median of {repeats})")
    # input rows per second: each fastops mode against DuckDB
    measurements = []
    for r in rows:
        for mode, key in (("streaming", "streaming"), ("at end", "at_end")):
            workload = f"{r['join']} N={r['N']} {mode}"
            measurements += [measurement(workload, f"fastops {mode}", 2 * r["N"] / r[f"{key}_s"]),
                             measurement(workload, "duckdb", 2 * r["N"] / r["duckdb_s"], "peer")]
    write_results(args.json, measurements, {"batch": BATCH, "repeats": repeats, "results": rows})


if __name__ == "__main__":
    main()
