"""Benchmark fastops.core.sketches against Apache DataSketches, pyprobables, Polars and NumPy.

Data: int64 keys drawn from a Zipf(1.1) law folded onto 1M distinct values,
and the same keys as strings (``"user-<key>"``). For every sketch the
contenders run in interleaved rounds in this one process (so machine noise
hits all of them alike); the table gives the median updates/s over the
rounds, the ratio fastops / peer, the bytes of state and the error.

Peers use their fastest API: a batch update where there is one (DataSketches
KLL, Polars, NumPy), else the per-item loop (DataSketches hll / count_min /
frequent_items, pyprobables), timed on a prefix of the data.

    python bench/bench_sketch.py [--quick] [--json PATH] [--rounds R]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import measurement, write_results
from fastops import hash64
from fastops.core import sketches as S

try:
    import datasketches as ds
except ImportError:  # reported as a missing peer, never silently replaced
    ds = None
try:
    import polars as pl
except ImportError:
    pl = None
try:
    import probables
except ImportError:
    probables = None


def make_data(n: int, seed: int = 42) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    keys = (rng.zipf(1.1, n) % 1_000_000).astype(np.int64)
    ints = pa.array(keys)
    strs = pc.binary_join_element_wise("user-", pc.cast(ints, pa.string()), "")
    return {"keys": keys, "int64": ints, "string": strs}


class Case:
    """One sketch on one input: contenders timed in interleaved rounds."""

    def __init__(self, sketch: str, data: str, n: int):
        self.sketch, self.data, self.n = sketch, data, n
        self.contenders: list[tuple[str, Callable[[], Any], int, Callable[[Any], dict]]] = []

    def add(self, name: str, fn: Callable[[], Any], rows: int,
            info: Callable[[Any], dict] = lambda r: {}) -> None:
        self.contenders.append((name, fn, rows, info))

    def run(self, rounds: int) -> list[dict]:
        times: dict[str, list[float]] = {c[0]: [] for c in self.contenders}
        last: dict[str, Any] = {}
        for _ in range(rounds):
            for name, fn, _rows, _info in self.contenders:
                t0 = time.perf_counter()
                last[name] = fn()
                times[name].append(time.perf_counter() - t0)
        out = []
        ours = None
        for name, _fn, rows, info in self.contenders:
            med = statistics.median(times[name])
            rate = rows / med
            if ours is None:
                ours = rate
            row = {"sketch": self.sketch, "data": self.data, "impl": name, "rows": rows,
                   "median_s": med, "updates_per_s": rate, "ratio": ours / rate,
                   "rounds": rounds}
            row.update(info(last[name]))
            out.append(row)
        return out


def _rel(est: float, exact: float) -> float:
    return abs(est - exact) / exact


def bench(n: int, peer_n: int, rounds: int, slow_n: int) -> list[dict]:
    d = make_data(n)
    keys = d["keys"]
    results: list[dict] = []
    exact_distinct = {"int64": len(np.unique(keys))}
    exact_distinct["string"] = exact_distinct["int64"]
    uniq, freq = np.unique(keys, return_counts=True)
    peer_keys = keys[:peer_n].tolist()
    peer_strs = d["string"].slice(0, peer_n).to_pylist()
    slow_keys = peer_keys[:slow_n]
    slow_strs = peer_strs[:slow_n]
    peer_exact = len(np.unique(keys[:peer_n]))

    # ---------------- HyperLogLog (p = 14)
    for kind in ("int64", "string"):
        arr = d[kind]
        items = peer_keys if kind == "int64" else peer_strs
        case = Case("hll p=14", kind, n)

        def ours(arr=arr):
            h = S.HyperLogLog(14)
            h.update(arr)
            return h

        case.add("fastops", ours, n, lambda h, kind=kind: {
            "state_bytes": len(h.to_bytes()),
            "rel_error": _rel(h.estimate(), exact_distinct[kind])})
        if ds is not None:
            def dsh(items=items):
                h = ds.hll_sketch(14, ds.HLL_8)
                for v in items:
                    h.update(v)
                return h
            case.add("datasketches hll_8 (per item)", dsh, len(items), lambda h: {
                "state_bytes": len(h.serialize_compact()),
                "rel_error": _rel(h.get_estimate(), peer_exact)})
        if pl is not None:
            series = pl.from_arrow(arr)
            case.add("polars approx_n_unique", lambda s=series: s.approx_n_unique(), n,
                     lambda est, kind=kind: {"rel_error": _rel(float(est), exact_distinct[kind])})

        def np_hll(arr=arr):
            h = hash64(arr).to_numpy()
            idx = (h >> np.uint64(50)).astype(np.int64)
            w = (h << np.uint64(14)) | np.uint64(1 << 13)
            # rho = leading zeros + 1, via float exponent of the top bits
            top = (w >> np.uint64(11)).astype(np.float64)
            rho = (53 - np.floor(np.log2(top)).astype(np.int64)).astype(np.uint8)
            regs = np.zeros(1 << 14, np.uint8)
            np.maximum.at(regs, idx, rho)
            return regs
        case.add("numpy (hash64 + maximum.at)", np_hll, n, lambda r: {"state_bytes": r.nbytes})
        results += case.run(rounds)

    # ---------------- Count-Min (depth 4, width 2719 = e / 0.001)
    width, depth = 2719, 4
    top_keys = uniq[np.argsort(-freq)[:1000]]
    top_f = np.sort(freq)[::-1][:1000]
    for kind in ("int64", "string"):
        arr = d[kind]
        items = peer_keys if kind == "int64" else peer_strs
        case = Case(f"count_min {depth}x{width}", kind, n)
        q = pa.array(top_keys) if kind == "int64" else pc.binary_join_element_wise(
            "user-", pc.cast(pa.array(top_keys), pa.string()), "")

        def ours(arr=arr):
            c = S.CountMinSketch(width, depth)
            c.update(arr)
            return c

        case.add("fastops", ours, n, lambda c, q=q: {
            "state_bytes": len(c.to_bytes()),
            "mean_overestimate_per_W": float(np.mean(c.estimate(q) - top_f)) / n})

        def ours_cons(arr=arr):
            c = S.CountMinSketch(width, depth, conservative=True)
            c.update(arr)
            return c
        case.add("fastops conservative", ours_cons, n, lambda c, q=q: {
            "state_bytes": len(c.to_bytes()),
            "mean_overestimate_per_W": float(np.mean(c.estimate(q) - top_f)) / n})
        if ds is not None:
            def dsc(items=items):
                c = ds.count_min_sketch(depth, width)
                for v in items:
                    c.update(v)
                return c
            case.add("datasketches count_min (per item)", dsc, len(items),
                     lambda c: {"state_bytes": len(c.serialize())})
        if probables is not None:
            def ppc(items=slow_keys if kind == "int64" else slow_strs):
                c = probables.CountMinSketch(width=width, depth=depth)
                for v in items:
                    c.add(str(v))
                return c
            case.add("pyprobables CountMinSketch (per item)", ppc, slow_n,
                     lambda c: {"state_bytes": width * depth * 4})

        def np_cms(arr=arr):
            h = hash64(arr).to_numpy()
            h2 = (h * np.uint64(0x9E3779B97F4A7C15)) | np.uint64(1)
            t = np.zeros((depth, width), np.int64)
            for i in range(depth):
                col = ((h + np.uint64(i) * h2) >> np.uint64(32)) % np.uint64(width)
                t[i] += np.bincount(col.astype(np.int64), minlength=width)
            return t
        case.add("numpy (hash64 + bincount)", np_cms, n, lambda t: {"state_bytes": t.nbytes})
        results += case.run(rounds)

    # ---------------- KLL (k = 200)
    x = keys.astype(np.float64)
    srt = np.sort(x)
    grid = np.linspace(0.01, 0.99, 99)
    pts = srt[(grid * n).astype(int)]
    truth = np.searchsorted(srt, pts, side="right") / n
    case = Case("kll k=200", "float64", n)

    def ours_kll():
        s = S.KLL(200)
        s.update(x)
        return s
    case.add("fastops", ours_kll, n, lambda s: {
        "state_bytes": len(s.to_bytes()),
        "max_rank_error": float(np.abs(s.ranks(pts) - truth).max())})
    if ds is not None:
        def dsk():
            s = ds.kll_doubles_sketch(200)
            s.update(x)
            return s
        case.add("datasketches kll_doubles (batch)", dsk, n, lambda s: {
            "state_bytes": len(s.serialize()),
            "max_rank_error": float(np.abs(np.array([s.get_rank(p, True) for p in pts])
                                           - truth).max())})
    case.add("numpy (np.sort, exact)", lambda: np.sort(x), n, lambda s: {"state_bytes": s.nbytes})
    results += case.run(rounds)

    # ---------------- Space-Saving (capacity 1024) vs frequent items
    cap = 1024
    heavy = set(uniq[freq > n / cap].tolist())
    for kind in ("int64", "string"):
        arr = d[kind]
        items = peer_keys if kind == "int64" else peer_strs
        case = Case(f"space_saving cap={cap}", kind, n)

        def ours(arr=arr):
            s = S.SpaceSaving(cap)
            s.update(arr)
            return s

        def ss_info(s, kind=kind):
            vals = s.top().column("value").to_pylist()
            if kind == "string":
                vals = [int(v[5:]) for v in vals]
            return {"state_bytes": len(s.to_bytes()),
                    "heavy_hitter_recall": len(heavy & set(vals)) / max(1, len(heavy))}
        case.add("fastops", ours, n, ss_info)
        if ds is not None:
            def dsf(items=items, kind=kind):
                # map of 2048 slots (up to 1536 items); ints go in as Python ints
                f = ds.frequent_items_sketch(11) if kind == "int64" else \
                    ds.frequent_strings_sketch(11)
                for v in items:
                    f.update(v)
                return f
            case.add("datasketches frequent_items lg=11 (per item)", dsf, len(items),
                     lambda f, kind=kind: {"state_bytes": len(
                         f.serialize(ds.PyLongsSerDe()) if kind == "int64" else f.serialize())})
        if probables is not None:
            def pph(items=slow_keys if kind == "int64" else slow_strs):
                h = probables.HeavyHitters(num_hitters=cap, width=2719, depth=4)
                for v in items:
                    h.add(str(v))
                return h
            case.add("pyprobables HeavyHitters (per item)", pph, slow_n)

        if kind == "int64":
            case.add("numpy (np.unique, exact)", lambda: np.unique(keys, return_counts=True)[1], n)
        results += case.run(rounds)

    # ---------------- Bloom filter (1M capacity, 1 %)
    absent = pa.array(np.arange(n, dtype=np.int64) + 10**12)
    for kind in ("int64",):
        case = Case("bloom 1M/1%", kind, n)

        def ours_bloom(kind=kind):
            b = S.BloomFilter(1_000_000, 0.01)
            b.add(d[kind])
            return b
        case.add("fastops", ours_bloom, n, lambda b: {
            "state_bytes": len(b.to_bytes()),
            "fp_rate": float(b.contains(absent.slice(0, 1_000_000)).mean())})
        if probables is not None:
            def ppb():
                b = probables.BloomFilter(est_elements=1_000_000, false_positive_rate=0.01)
                for v in slow_keys:
                    b.add(str(v))
                return b
            case.add("pyprobables BloomFilter (per item)", ppb, slow_n)
        results += case.run(rounds)

    # ---------------- reservoir (size 10 000)
    case = Case("reservoir 10k", "int64", n)

    def ours_res():
        r = S.Reservoir(10_000, seed=1)
        r.update(d["int64"])
        return r
    case.add("fastops", ours_res, n, lambda r: {"state_bytes": len(r.to_bytes())})
    rng = np.random.default_rng(0)
    case.add("numpy (rng.choice over the whole batch, not streaming)",
             lambda: d["int64"].take(pa.array(rng.choice(n, 10_000, replace=False))), n)
    results += case.run(rounds)
    return results


def print_table(rows: list[dict]) -> None:
    head = f"{'sketch':<22}{'data':<8}{'implementation':<46}{'M upd/s':>9}{'ratio':>8}" \
           f"{'state B':>10}  error"
    print(head)
    print("-" * len(head))
    for r in rows:
        err = ", ".join(f"{k}={r[k]:.4g}" for k in r
                        if k in ("rel_error", "mean_overestimate_per_W", "max_rank_error",
                                 "heavy_hitter_recall", "fp_rate"))
        sb = r.get("state_bytes", "")
        print(f"{r['sketch']:<22}{r['data']:<8}{r['impl']:<46}{r['updates_per_s'] / 1e6:>9.1f}"
              f"{r['ratio']:>8.2f}{sb:>10}  {err}")


def measurements(rows: list[dict]) -> list[dict]:
    """The result schema's rows: per sketch and input, the fastest fastops
    configuration is compared with the peers, any other one is a variant."""
    fastest: dict[tuple[str, str], dict] = {}
    for r in rows:
        case = (r["sketch"], r["data"])
        if r["impl"].startswith("fastops") and (case not in fastest
                                                or r["updates_per_s"] > fastest[case]["updates_per_s"]):
            fastest[case] = r
    out = []
    for r in rows:
        case = (r["sketch"], r["data"])
        role = "peer" if not r["impl"].startswith("fastops") else "fastops" if r is fastest[case] else "variant"
        out.append(measurement(f"{r['sketch']} / {r['data']}", r["impl"], r["updates_per_s"], role))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2M rows, 3 rounds (< 1 minute)")
    ap.add_argument("--json", metavar="PATH", help="write the results as JSON")
    ap.add_argument("--rounds", type=int, default=None)
    args = ap.parse_args(argv)
    n = 2_000_000 if args.quick else 10_000_000
    rounds = args.rounds or (3 if args.quick else 5)
    peer_n = 200_000 if args.quick else 1_000_000
    slow_n = 20_000 if args.quick else 100_000
    missing = [m for m, mod in (("datasketches", ds), ("polars", pl), ("pyprobables", probables))
               if mod is None]
    if missing:
        print(f"note: peers not installed: {', '.join(missing)}", file=sys.stderr)
    print(f"fastops sketches: {n:,} rows, median of {rounds} interleaved rounds; "
          f"per-item peers on the first {peer_n:,} rows (pyprobables: {slow_n:,}); "
          "ratio = fastops / peer")
    t0 = time.perf_counter()
    rows = bench(n, peer_n, rounds, slow_n)
    print_table(rows)
    print(f"total {time.perf_counter() - t0:.1f} s")
    write_results(args.json, measurements(rows), {"n": n, "rounds": rounds, "results": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
