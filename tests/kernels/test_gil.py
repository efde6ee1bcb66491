"""The kernels release the GIL: while a worker thread runs one long kernel
call after another, the main thread keeps running Python code. With the GIL
held, the main thread would stand still for a whole call at every call:
pauses of half a call or longer would fill nearly all of the time. Here they
must fill less than half of it. A busy machine (other test workers) can
deschedule the main thread now and then, which makes a few long pauses but
not a majority of the time; the best of three tries counts. Each case also
checks one result against a reference, so the call did its work."""
from __future__ import annotations

import sys
import threading
import time

import numpy as np
import pyarrow as pa
import pytest
import xxhash

from fastops._kernels import core as _core
from fastops._kernels import window as _window
from fastops.core.keys import KeyTable

N = 12_000_000


def _stalled_share_beside(call, calls: int, stall: float) -> float:
    """The share of the time a worker thread runs ``call`` ``calls`` times
    that the main thread spends in pauses of ``stall`` seconds or longer."""
    worker = threading.Thread(target=lambda: [call() for _ in range(calls)])
    old = sys.getswitchinterval()
    sys.setswitchinterval(0.001)
    try:
        worker.start()
        start = last = time.perf_counter()
        stalled = 0.0
        while worker.is_alive():
            now = time.perf_counter()
            if now - last >= stall:
                stalled += now - last
            last = now
    finally:
        worker.join()
        sys.setswitchinterval(old)
    return stalled / max(last - start, 1e-9)


def _hash_strings():
    offsets = np.arange(0, 4 * N + 1, 4, dtype=np.int64)  # 4-byte values over a zero buffer
    data = np.zeros(4 * N, dtype=np.uint8)
    out = np.empty(N, dtype=np.uint64)
    return (lambda: _core.hash_binary(offsets, data, 0, out),
            lambda: out[0] == xxhash.xxh64_intdigest(b"\0" * 4))


def _partition_ids():
    values = np.arange(N, dtype=np.uint64)
    out = np.empty(N, dtype=np.int32)
    counts = np.empty(8, dtype=np.int64)
    return (lambda: _core.partition_fixed(values, False, 0, 8, np.zeros(0, np.int32), out, counts),
            lambda: out[5] == xxhash.xxh64_intdigest((5).to_bytes(8, "little")) % 8)


def _scatter_pair():
    rng = np.random.default_rng(1)
    ids = rng.integers(0, 64, N).astype(np.int32)
    dest, starts = np.empty(N, dtype=np.int32), np.empty(65, dtype=np.int64)
    _core.partition_dest(ids, np.bincount(ids, minlength=64).astype(np.int64), dest, starts)
    a, b = np.arange(N, dtype=np.uint64), np.arange(N, 2 * N, dtype=np.uint64)
    oa, ob = np.empty_like(a), np.empty_like(b)
    return (lambda: _core.scatter_words2(a, b, ids, starts, dest, oa, ob),
            lambda: oa[dest[7]] == 7 and ob[dest[7]] == N + 7)


def _string_picks():
    slots = np.arange(N, dtype=np.int64) % 1000
    offsets = np.arange(0, 8 * N + 1, 8, dtype=np.int64)
    data = np.frombuffer(np.arange(N, dtype=">u8").tobytes(), dtype=np.uint8)  # big-endian: sorts as numbers
    best = np.full(1000, -1, np.int64)
    ref, length, held = np.full(1000, -1, np.int64), np.zeros(1000, np.int64), np.zeros(1000, np.int64)
    win_s, win_r = np.empty(N, np.int64), np.empty(N, np.int64)
    mode = _window.PICK_MODES["max"]
    return (lambda: _window.pick_candidates(mode, slots, offsets, data, np.zeros(0, np.int64), best, ref,
                                            length, held, np.zeros(0, np.uint8), win_s, win_r),
            lambda: win_r[list(win_s[:1000]).index(3)] == N - 1000 + 3)


def _string_keys():
    keys = pa.array([f"k{i % 50_000}" for i in range(2_000_000)])
    table = KeyTable(["k"])
    out = []
    return (lambda: out.append(table.lookup_or_insert([keys])),
            lambda: out[-1][50_003] == out[-1][3] and table.num_groups == 50_000)


@pytest.mark.parametrize("kernel", [_hash_strings, _partition_ids, _scatter_pair, _string_picks,
                                    _string_keys])
def test_kernel_releases_the_gil(kernel):
    call, check = kernel()
    t0 = time.perf_counter()
    call()
    single = time.perf_counter() - t0
    calls = max(2, int(0.6 / single))
    shares = []
    for _ in range(3):
        shares.append(_stalled_share_beside(call, calls, single / 2))
        if shares[-1] < 0.5:
            break
    assert check()
    assert min(shares) < 0.5, (shares, single)


def test_the_measure_sees_a_call_that_holds_the_gil():
    """The control: ``sorted`` of a list holds the GIL for the whole call."""
    data = list(np.random.default_rng(2).random(600_000))
    t0 = time.perf_counter()
    sorted(data)
    single = time.perf_counter() - t0
    assert _stalled_share_beside(lambda: sorted(data), max(2, int(0.6 / single)), single / 2) > 0.5
