"""``fastops.hash64`` throughput against Polars' ``Series.hash`` (same run, same data).

Data: N values (10M; ``--quick``: 1M) of int64 (uniform), float64, and utf8
strings of 4..20 bytes. fastops computes XXH64 of every value (the published
algorithm, bit-exact with the ``xxhash`` package); Polars its own (faster,
non-portable) hash. Run ``python bench/bench_hash.py [--quick] [--json PATH]``.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pyarrow as pa

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fastops
from _common import measurement, median_time, parse_args, print_table, write_results

try:
    import polars as pl
except ImportError:  # pragma: no cover - polars is in the bench extras
    pl = None


def make_strings(n: int, rng: np.random.Generator) -> pa.Array:
    lengths = rng.integers(4, 21, size=n)
    alphabet = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz0123456789", dtype=np.uint8)
    data = alphabet[rng.integers(0, len(alphabet), size=int(lengths.sum()))]
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.Array.from_buffers(pa.utf8(), n, [None, pa.py_buffer(offsets),
                                                pa.py_buffer(data.tobytes())])


def main(argv=None):
    args = parse_args(__doc__.splitlines()[0], argv)
    n = 1_000_000 if args.quick else 10_000_000
    repeats = args.repeats or (5 if args.quick else 7)
    rng = np.random.default_rng(7)
    columns = {
        "int64": pa.array(rng.integers(-(2**62), 2**62, n)),
        "float64": pa.array(rng.standard_normal(n)),
        "utf8": make_strings(n, rng),
    }
    print(f"{n:,} values per column; median of {repeats} repeats; {os.cpu_count()} cores")
    rows = []
    for name, arr in columns.items():
        assert len(fastops.hash64(arr)) == n
        t_fo = median_time(lambda arr=arr: fastops.hash64(arr), repeats)
        row = {"column": name, "fastops Mvalues/s": n / t_fo / 1e6, "fastops_s": t_fo}
        if pl is not None:
            series = pl.from_arrow(arr)
            t_pl = median_time(series.hash, repeats)
            row.update({"polars Mvalues/s": n / t_pl / 1e6, "polars_s": t_pl,
                        "fastops vs polars": t_pl / t_fo})
        rows.append(row)
    print_table(rows, ["column", "fastops Mvalues/s", "polars Mvalues/s", "fastops vs polars"],
                title="\nhash64 throughput (ratio > 1: fastops faster)")
    measurements = []
    for row in rows:
        measurements.append(measurement(f"column={row['column']}", "fastops", n / row["fastops_s"]))
        if "polars_s" in row:
            measurements.append(measurement(f"column={row['column']}", "polars", n / row["polars_s"], "peer"))
    write_results(args.json, measurements, {"values": n, "repeats": repeats, "results": rows})
    return rows


if __name__ == "__main__":
    main()
