"""Hash-partitioning throughput: fastops against NumPy, pyarrow, Polars and memcpy.

Data: N rows (10M; ``--quick``: 1M) of an int64 key with Zipf skew over 1M
distinct keys, a float64 and a utf8 column. For P = 2, 8, 64, 256 each contender
turns the batch into P batches of rows with equal ``key`` hash mod P, keeping
row order inside a partition:

- fastops: ``fastops.partition(batch, "key", P)`` (XXH64, counting sort; one thread);
- numpy: multiplicative hash in NumPy, ``np.argsort(ids, kind="stable")``, the
  columns gathered with that order (``take``), then slices;
- pyarrow: the same ids, ``pc.sort_indices`` and ``RecordBatch.take``, then slices;
- polars: ``df.with_columns(pid=pl.col("key").hash() % P).partition_by("pid")``
  (Polars uses every core);
- memcpy: a plain copy of every buffer of the batch, the same bytes moved once
  (the faster of NumPy copies and copies into buffers of pyarrow's memory pool).

Also: two threads partitioning two batches against one thread doing both (the
kernels release the GIL), next to the same ratio for a pure compute kernel
(the cores the machine has free) and for the memcpy baseline (the memory
bandwidth a second thread adds). Run ``python bench/bench_partition.py [--quick] [--json PATH]``.
"""
from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fastops
from _common import measurement, median_times, parse_args, print_table, write_results
from fastops._kernels import core as _core

try:
    import polars as pl
except ImportError:  # pragma: no cover - polars is in the bench extras
    pl = None

PARTITIONS = (2, 8, 64, 256)
DISTINCT_KEYS = 1_000_000
ZIPF_S = 1.1
GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def zipf_keys(n: int, distinct: int, s: float, rng: np.random.Generator) -> np.ndarray:
    """``n`` int64 keys drawn from ``distinct`` random ids with P(rank k) ~ 1/k**s."""
    weights = 1.0 / np.arange(1, distinct + 1, dtype=np.float64) ** s
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    ranks = np.searchsorted(cdf, rng.random(n), side="right")
    ranks = np.minimum(ranks, distinct - 1)
    ids = rng.choice(np.int64(2) ** 40, size=distinct, replace=False).astype(np.int64)
    return ids[ranks]


def make_batch(n: int, seed: int = 42) -> pa.RecordBatch:
    rng = np.random.default_rng(seed)
    keys = zipf_keys(n, DISTINCT_KEYS, ZIPF_S, rng)
    values = rng.standard_normal(n)
    pool_size = 50_000
    lengths = rng.integers(4, 21, size=pool_size)
    alphabet = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz0123456789", dtype=np.uint8)
    data = alphabet[rng.integers(0, len(alphabet), size=int(lengths.sum()))]
    offsets = np.zeros(pool_size + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    pool = pa.Array.from_buffers(pa.utf8(), pool_size,
                                 [None, pa.py_buffer(offsets), pa.py_buffer(data.tobytes())])
    names = pool.take(pa.array(rng.integers(0, pool_size, size=n)))
    return pa.record_batch({"key": keys, "value": values, "name": names})


def batch_buffers(batch: pa.RecordBatch) -> list[np.ndarray]:
    """Every buffer of the batch's columns, as bytes: what a plain copy moves."""
    return [np.frombuffer(buf, dtype=np.uint8) for col in batch.columns
            for buf in col.buffers() if buf is not None]


# ---------------------------------------------------------------- contenders

def run_fastops(batch, P):
    return fastops.partition(batch, "key", P)


def _numpy_ids(batch, P):
    keys = batch.column(0).to_numpy().view(np.uint64)
    return ((keys * GOLDEN) >> np.uint64(29)) % np.uint64(P)


def _split(sorted_batch, ids, P):
    counts = np.bincount(ids.astype(np.intp), minlength=P)
    starts = np.concatenate([[0], np.cumsum(counts)])
    return [sorted_batch.slice(int(starts[p]), int(counts[p])) for p in range(P)]


def run_numpy(batch, P):
    ids = _numpy_ids(batch, P)
    order = np.argsort(ids, kind="stable")
    cols = [pa.array(col.to_numpy()[order]) if pa.types.is_primitive(col.type)
            else col.take(pa.array(order)) for col in batch.columns]
    return _split(pa.RecordBatch.from_arrays(cols, schema=batch.schema), ids, P)


def run_pyarrow(batch, P):
    ids = _numpy_ids(batch, P)
    order = pc.sort_indices(pa.array(ids))
    return _split(batch.take(order), ids, P)


def run_polars(df, P):
    return df.with_columns(pid=pl.col("key").hash() % P).partition_by("pid", maintain_order=True)


def run_memcpy(buffers):
    """NumPy copies (fresh memory from the OS: page faults included)."""
    return [np.copy(b) for b in buffers]


def run_memcpy_pool(buffers):
    """Copies into buffers of pyarrow's memory pool (recycled memory), as fastops' outputs."""
    out = []
    for b in buffers:
        buf = pa.allocate_buffer(b.nbytes)
        np.copyto(np.frombuffer(buf, dtype=np.uint8), b)
        out.append(buf)
    return out


def check_fastops(batch, parts, P):
    assert len(parts) == P
    assert sum(p.num_rows for p in parts) == batch.num_rows
    ids = fastops.partition_ids(parts[P // 2], "key", P)
    assert (ids == P // 2).all()


def threads_ratio(batches, P, repeats):
    """Throughput of two threads (one batch each) over one thread doing both."""
    return _two_thread_ratio(lambda i: fastops.partition(batches[i], "key", P), repeats)


def _two_thread_ratio(work, repeats):
    """(one thread running ``work(0)`` then ``work(1)``, two threads running
    one each) median times. The two worker threads live for the whole
    measurement, as an engine's task threads do (fresh threads per call would
    also measure thread start-up and the allocator's per-thread heaps warming up)."""
    pool = ThreadPoolExecutor(max_workers=2)
    try:
        pool.submit(work, 0).result()
        times = median_times({
            "serial": lambda: [work(i) for i in (0, 1)],
            "parallel": lambda: [f.result() for f in [pool.submit(work, i) for i in (0, 1)]],
        }, repeats)
    finally:
        pool.shutdown()
    return times["serial"], times["parallel"]


def control_ratio(n, repeats):
    """The same two-thread ratio for a pure compute kernel (XXH64 of n int64):
    how much parallelism the machine has to give right now."""
    values = np.arange(n, dtype=np.uint64)
    outs = [np.empty_like(values), np.empty_like(values)]

    def one(i):
        for _ in range(4):
            _core.hash_u64(values, 0, outs[i])

    return _two_thread_ratio(one, repeats)


def memcpy_control_ratio(batches, repeats):
    """The same two-thread ratio for the memcpy baseline (each thread copies
    every buffer of its batch into pool buffers): how much memory bandwidth a
    second thread adds right now. Partitioning moves the same bytes, so it
    cannot scale much better than this."""
    buffers = [batch_buffers(b) for b in batches]
    return _two_thread_ratio(lambda i: run_memcpy_pool(buffers[i]), repeats)


def main(argv=None):
    args = parse_args(__doc__.splitlines()[0], argv)
    n = 1_000_000 if args.quick else 10_000_000
    repeats = args.repeats or (3 if args.quick else 5)
    batch = make_batch(n)
    buffers = batch_buffers(batch)
    nbytes = sum(b.nbytes for b in buffers)
    df = pl.from_arrow(batch) if pl is not None else None
    print(f"{n:,} rows, {nbytes / 1e6:.0f} MB ({nbytes / n:.1f} B/row), "
          f"{DISTINCT_KEYS:,} Zipf({ZIPF_S}) keys; median of {repeats} repeats; "
          f"{os.cpu_count()} cores")

    results = []
    for P in PARTITIONS:
        check_fastops(batch, run_fastops(batch, P), P)
        fns = {
            "fastops": lambda P=P: run_fastops(batch, P),
            "numpy": lambda P=P: run_numpy(batch, P),
            "pyarrow": lambda P=P: run_pyarrow(batch, P),
        }
        if df is not None:
            fns["polars"] = lambda P=P: run_polars(df, P)
        # the physical limit: the faster of two plain copies of every buffer
        fns["memcpy"] = lambda: run_memcpy(buffers)
        fns["memcpy_pool"] = lambda: run_memcpy_pool(buffers)
        times = median_times(fns, repeats)
        t_memcpy = min(times.pop("memcpy"), times.pop("memcpy_pool"))
        best_peer = min((k for k in times if k != "fastops"), key=times.get)
        row = {"P": P}
        for k, t in times.items():
            row[f"{k} Mrows/s"] = n / t / 1e6
        row["fastops GB/s"] = nbytes / times["fastops"] / 1e9
        row["memcpy GB/s"] = nbytes / t_memcpy / 1e9
        row["best peer"] = best_peer
        row["vs best peer"] = times[best_peer] / times["fastops"]
        row["fastops/memcpy time"] = times["fastops"] / t_memcpy
        row["times_s"] = times
        row["memcpy_s"] = t_memcpy
        results.append(row)
    cols = ["P"] + [f"{k} Mrows/s" for k in results[0]["times_s"]] + [
        "fastops GB/s", "memcpy GB/s", "best peer", "vs best peer", "fastops/memcpy time"]
    print_table(results, cols, title="\npartition throughput (higher is better; ratios: x faster)")

    pair = [batch, make_batch(n, seed=2)]
    threads = []
    for P in (8, 64):
        t1, t2 = threads_ratio(pair, P, repeats)
        threads.append({"P": P, "1 thread ms": t1 * 1e3, "2 threads ms": t2 * 1e3,
                        "speedup": t1 / t2})
    for label, (t1, t2) in (("control: hash kernel", control_ratio(8_000_000, repeats)),
                            ("control: memcpy", memcpy_control_ratio(pair, repeats))):
        threads.append({"P": label, "1 thread ms": t1 * 1e3, "2 threads ms": t2 * 1e3,
                        "speedup": t1 / t2})
    print_table(threads, ["P", "1 thread ms", "2 threads ms", "speedup"],
                title=f"\ntwo batches of {n:,} rows: two threads vs one thread doing both")

    measurements = [measurement(f"P={row['P']}", engine, n / t, "fastops" if engine == "fastops" else "peer")
                    for row in results for engine, t in row["times_s"].items()]
    write_results(args.json, measurements, {
        "rows": n, "bytes": nbytes, "repeats": repeats, "distinct_keys": DISTINCT_KEYS, "zipf_s": ZIPF_S,
        "results": results, "threads": threads,
    })
    return results, threads


if __name__ == "__main__":
    main()
