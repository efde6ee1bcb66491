"""Fuzz ``from_bytes`` of one sketch class under a memory cap.

Run by ``tests/kernels/test_sketch_fuzz.py`` in a subprocess (a crash or an
over-allocation must not take the test runner or the machine with it).
Every case is drawn from its own seeded generator, so one case replays
alone::

    python tests/support/sketch_fuzz_worker.py SpaceSaving --cases 10000 --seed 1
    python tests/support/sketch_fuzz_worker.py SpaceSaving --case 1234 --seed 1   # with traceback

A case is random bytes, random bytes behind a valid header, a truncation,
bit flips or byte edits of a valid serialisation, or one of its 4- / 8-byte
fields overwritten with an edge value (0, 2**31 - 1, 2**62, 2**64 - 1, ...).
``from_bytes`` may raise ``ValueError`` only; every sketch it accepts must
then survive ``exercise``: to_bytes round trip, update, merge both ways with
a fresh compatible sketch, every query, and to_bytes / from_bytes after all
that. An update or merge may raise ``OverflowError`` only when it would take
a counter past the sketch's documented maximum (``_limit``).

Prints one JSON line: the counts and the first failures with their bytes.
"""
from __future__ import annotations

import argparse
import ctypes
import faulthandler
import json
import os
import resource
import struct
import sys

import numpy as np
import pyarrow as pa

from fastops.core import sketches as S

NAMES = ["HyperLogLog", "CountMinSketch", "KLL", "SpaceSaving", "BloomFilter", "Reservoir"]
EDGES = [0, 1, 2, 3, 7, 8, 255, 2**16 - 1, 2**20, 2**20 + 1, 2**24, 2**24 + 1, 2**28,
         2**31 - 1, 2**31, 2**32 - 1, 2**48, 2**48 + 1, 2**53, 2**62 - 1, 2**62, 2**62 + 1,
         2**63 - 1, 2**63, 2**64 - 1]


class Failure(Exception):
    pass


# ------------------------------------------------------------ valid samples

def samples(name: str) -> list:
    rng = np.random.default_rng(7)
    vals = rng.zipf(1.3, 400) % 60
    out = []
    if name == "HyperLogLog":
        a, b, c = S.HyperLogLog(4), S.HyperLogLog(6, seed=3), S.HyperLogLog(5)
        b.update(vals)
        c.update(pa.array(["x", "y", None]))
        out = [a, b, c]
    elif name == "CountMinSketch":
        a = S.CountMinSketch(9, 3, conservative=True)
        a.update(vals)
        b = S.CountMinSketch(5, 2, seed=4)
        b.update(vals[:50], weights=np.where(vals[:50] % 2 == 0, 3, -2))
        out = [a, b, S.CountMinSketch(1, 1)]
    elif name == "KLL":
        a, b, c = S.KLL(8), S.KLL(8, seed=5), S.KLL(16)
        a.update(np.arange(300.0))
        b.update(np.array([1.5, -np.inf, 2.0, np.inf, 0.0]))
        out = [a, b, c]
    elif name == "SpaceSaving":
        a, b, c = S.SpaceSaving(6), S.SpaceSaving(4, seed=2), S.SpaceSaving(3)
        a.update(pa.array([f"v{v}" for v in vals[:80]]))
        b.update(vals[:60], weights=vals[:60] % 4)
        out = [a, b, c]
    elif name == "BloomFilter":
        a, b = S.BloomFilter(40, 0.1), S.BloomFilter(100, 0.01, seed=9)
        a.add(vals)
        out = [a, b, S.BloomFilter(1, 0.5)]
    elif name == "Reservoir":
        a, b, c, d = (S.Reservoir(4, seed=1), S.Reservoir(3, seed=2), S.Reservoir(6),
                      S.Reservoir(8, seed=3))
        a.update(vals)
        b.update(pa.record_batch({"x": [1, 2, 3, 4], "s": ["a", "b", None, "d"]}))
        d.update(pa.array(["p", None, "q"]))
        out = [a, b, c, d]
    return out


# ------------------------------------------------------------ mutations

def mutate(rng: np.random.Generator, blobs: list[bytes]) -> tuple[str, bytes]:
    base = blobs[int(rng.integers(len(blobs)))]
    kind = int(rng.integers(7))
    if kind == 0:
        return "random", rng.bytes(int(rng.integers(0, 120)))
    if kind == 1:
        return "header+random", base[:8] + rng.bytes(int(rng.integers(0, 200)))
    if kind == 2:
        return "truncated", base[:int(rng.integers(0, len(base)))]
    data = bytearray(base)
    if kind == 3:
        for _ in range(int(rng.integers(1, 4))):
            bit = int(rng.integers(len(data) * 8))
            data[bit // 8] ^= 1 << (bit % 8)
        return "bit flips", bytes(data)
    if kind == 4:
        # bit flips in the fixed-size part (sizes and parameters live there)
        for _ in range(int(rng.integers(1, 3))):
            bit = int(rng.integers(min(len(data), 64) * 8))
            data[bit // 8] ^= 1 << (bit % 8)
        return "head bit flips", bytes(data)
    if kind == 5:
        for _ in range(int(rng.integers(1, 4))):
            data[int(rng.integers(len(data)))] = int(rng.integers(256))
        return "byte edits", bytes(data)
    width = 8 if rng.integers(2) else 4
    pos = 8 + int(rng.integers(max(1, min(len(data), 72) - 8 - width + 1)))
    pos -= pos % width
    value = EDGES[int(rng.integers(len(EDGES)))] % (1 << (8 * width))
    if rng.integers(4) == 0:
        value = (value + int(rng.integers(-3, 4))) % (1 << (8 * width))
    data[pos:pos + width] = value.to_bytes(width, "little")
    return f"field u{8 * width}@{pos}={value}", bytes(data)


# ------------------------------------------------------------ use a sketch

def _values_like(t: pa.DataType | None, n: int = 6) -> pa.Array:
    """``n`` non-null values of type ``t`` (int64 when ``t`` is None)."""
    if t is None:
        return pa.array(np.arange(n) % 3, pa.int64())
    ints = np.arange(n) % 3
    for src in (pa.array(ints), pa.array(ints, pa.int32()), pa.array(ints % 2 == 0),
                pa.array([str(i) for i in ints])):
        try:
            return src.cast(t)
        except (pa.ArrowException, NotImplementedError):
            continue
    try:
        width = t.byte_width
    except ValueError:
        width = 0
    if width:   # any other fixed-width type: some bytes
        return pa.Array.from_buffers(t, n, [None, pa.py_buffer(bytes(range(n * width)))])
    raise Failure(f"no test values for type {t}")


def _limit(who: str, exceeds: bool, fn, *args, **kwargs) -> None:
    """Run ``fn(*args, **kwargs)``: it must succeed, unless ``exceeds`` (a
    counter would pass the documented maximum), when it must raise OverflowError."""
    try:
        fn(*args, **kwargs)
    except OverflowError:
        if not exceeds:
            raise
        return
    if exceeds:
        raise Failure(f"{who}: went past the documented maximum without OverflowError")


def _roundtrip(obj) -> None:
    data = obj.to_bytes()
    again = type(obj).from_bytes(data)
    if again.to_bytes() != data:
        raise Failure("to_bytes(from_bytes(to_bytes(x))) differs")


def _hll(s: S.HyperLogLog) -> None:
    fresh = S.HyperLogLog(s.precision, s.seed)
    fresh.update(np.arange(10))
    for a, b in ((s.copy(), fresh.copy()), (fresh.copy(), s)):
        a.update(np.arange(20))
        a.update(pa.array(["a", None, "b"]))
        a.merge(b)
        _roundtrip(a)
    if not np.isfinite(a.estimate()):     # (repr(s) estimated s itself)
        raise Failure("estimate not finite")


def _cms(s: S.CountMinSketch) -> None:
    fresh = S.CountMinSketch(s.width, s.depth, s.seed, s.conservative)
    fresh.update(np.arange(5))
    mx = 2**63 - 1
    w = np.array([1, 2, 3]) if s.conservative else np.array([1, -2, 3])
    for a, b in ((s.copy(), fresh.copy()), (fresh.copy(), s)):
        _limit("update", not -2**63 <= a.total_weight + int(w.sum()) <= mx,
               a.update, pa.array(["a", None, "b", "c"]), weights=np.insert(w, 1, 5))
        _limit("merge", not -2**63 <= a.total_weight + b.total_weight <= mx,
               a.merge, b)
        a.estimate(np.arange(5))
        a.estimate(pa.array(["a", None]))
        _roundtrip(a)


def _kll(s: S.KLL) -> None:
    fresh = S.KLL(s.k, seed=1)
    fresh.update(np.arange(50.0))
    x = np.linspace(-5.0, 5.0, 40)
    for a, b in ((s.copy(), fresh.copy()), (fresh.copy(), s)):
        _limit("update", a.n + len(x) > S.KLL.MAX_N, a.update, x)
        _limit("merge", a.n + b.n > S.KLL.MAX_N, a.merge, b)
        if a.n:
            q = a.quantiles([0.0, 0.3, 1.0])
            if np.isnan(q).any() or not (q[0] <= q[1] <= q[2]):
                raise Failure(f"bad quantiles {q}")
        a.ranks([0.0, 1.0]), a.cdf([0.0, 1.0]), a.pmf([0.0]), a.min, a.max
        _roundtrip(a)


def _ss(s: S.SpaceSaving) -> None:
    if len(s):
        vals = s.top().column("value").combine_chunks()
        vals = pa.concat_arrays([vals, vals.slice(0, 1)])
    else:
        vals = _values_like(s.value_type)
    fresh = S.SpaceSaving(s.capacity, s.seed)
    fresh.update(vals)
    mx = 2**63 - 1
    for a, b in ((s.copy(), fresh.copy()), (fresh.copy(), s)):
        _limit("update", a.total_weight + 2 * len(vals) > mx,
               a.update, vals, weights=np.full(len(vals), 2))
        _limit("merge", a.total_weight + b.total_weight > mx, a.merge, b)
        top = a.top()
        if top.num_rows != len(a) or len(a) > a.capacity:
            raise Failure("top() does not match the summary")
        a.top(2), a.heavy_hitters(0.1), a.min_count
        _roundtrip(a)


def _bloom(s: S.BloomFilter) -> None:
    fresh = S.BloomFilter(s.capacity, s.fp_rate, s.seed)
    fresh.add(np.arange(3))
    for a, b in ((s.copy(), fresh.copy()), (fresh.copy(), s)):
        a.add(np.arange(10))
        a.update(pa.array(["a", "b"]))
        a.merge(b)
        if not a.contains(np.arange(10)).all():
            raise Failure("false negative")
        a.fill_ratio, a.current_fp_rate()
        _roundtrip(a)


def _reservoir(s: S.Reservoir) -> None:
    data = s.sample()
    if isinstance(data, pa.Table):
        rows = pa.concat_tables([data, data]) if data.num_rows else data
    else:
        t = None if s._data is None else data.type
        rows = pa.concat_arrays([data, data]) if len(data) else _values_like(t)
    n = len(rows)
    fresh = S.Reservoir(s.size, seed=5)
    fresh.update(rows)
    mx = S.Reservoir.MAX_SEEN
    for a, b in ((s.copy(), fresh.copy()), (fresh.copy(), s)):
        _limit("update", a.seen + n > mx, a.update, rows)
        _limit("merge", a.seen + b.seen > mx, a.merge, b)
        if len(a.sample()) != len(a) or len(a.positions()) != len(a):
            raise Failure("sample size does not match")
        _roundtrip(a)


EXERCISE = {S.HyperLogLog: _hll, S.CountMinSketch: _cms, S.KLL: _kll,
            S.SpaceSaving: _ss, S.BloomFilter: _bloom, S.Reservoir: _reservoir}


def exercise(obj) -> None:
    _roundtrip(obj)
    repr(obj)
    EXERCISE[type(obj)](obj)


# ------------------------------------------------------------ driver

def run_case(name: str, blobs: list[bytes], seed: int, i: int) -> tuple[str, bytes, bool]:
    """Returns (kind, data, accepted); raises on a failure."""
    kind, data = mutate(np.random.default_rng([seed, NAMES.index(name), i]), blobs)
    try:
        obj = getattr(S, name).from_bytes(data)
    except ValueError:
        return kind, data, False
    exercise(obj)
    return kind, data, True


def fuzz(name: str, cases: int, seed: int, prog: int | None, crash_at: int = -1,
         hog_at: int = -1) -> dict:
    blobs = [s.to_bytes() for s in samples(name)]
    accepted, failures = 0, []
    for i in range(cases):
        if prog is not None:    # what a crash interrupted: read by the test
            os.pwrite(prog, struct.pack("<qq", NAMES.index(name), i), 0)
        if i == crash_at:       # the harness's own tests: a segfault
            ctypes.string_at(0)
        try:
            if i == hog_at:     # ... and an allocation past the cap (4 GiB)
                np.ones(2**29, dtype=np.int64)
            _, _, ok = run_case(name, blobs, seed, i)
        except Exception as exc:
            kind, data = mutate(np.random.default_rng([seed, NAMES.index(name), i]), blobs)
            failures.append({"case": i, "kind": kind, "error": f"{type(exc).__name__}: {exc}",
                             "hex": data.hex()})
            if len(failures) >= 5:
                break
            continue
        accepted += ok
    return {"sketch": name, "seed": seed, "cases": i + 1, "accepted": accepted,
            "failures": failures}


def vm_size() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("sketches", nargs="+", choices=NAMES)
    p.add_argument("--cases", type=int, default=10_000)
    p.add_argument("--case", type=int, default=None, help="replay one case, with traceback")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--budget-mib", type=int, default=1024,
                   help="address space allowed above the warmed-up process")
    p.add_argument("--progress", default=None, help="file: the case being run")
    p.add_argument("--crash-at", type=int, default=-1, help=argparse.SUPPRESS)
    p.add_argument("--hog-at", type=int, default=-1, help=argparse.SUPPRESS)
    args = p.parse_args()
    faulthandler.enable()
    for name in args.sketches:      # warm up (imports, thread pools) before the cap
        for s in samples(name):
            exercise(s)
    limit = vm_size() + args.budget_mib * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    if args.case is not None:
        for name in args.sketches:
            blobs = [s.to_bytes() for s in samples(name)]
            kind, data, ok = run_case(name, blobs, args.seed, args.case)
            print(json.dumps({"sketch": name, "kind": kind, "accepted": ok,
                              "hex": data.hex()}))
        return 0
    prog = os.open(args.progress, os.O_WRONLY | os.O_CREAT) if args.progress else None
    for name in args.sketches:
        out = fuzz(name, args.cases, args.seed, prog, args.crash_at, args.hog_at)
        print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
