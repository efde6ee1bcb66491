"""Large buffers are recycled (``fastops.core.arrow.BlockCache``), never while readable."""
import gc

import numpy as np
import pyarrow as pa
import pytest

import fastops
from fastops.core import aggregates as agg
from fastops.core import arrow as _arrow

BIG = 100_000  # int64 items: 800 kB, recycled
SMALL = 1_000


@pytest.fixture
def cache(monkeypatch):
    blocks = _arrow.BlockCache()
    monkeypatch.setattr(_arrow, "_BLOCKS", blocks)
    return blocks


def cached(cache, addr):
    return any(b.ctypes.data == addr for blocks in cache.free.values() for b in blocks)


def test_a_released_block_is_reused(cache):
    a, buf = _arrow.empty(BIG, np.int64)
    assert a.flags.writeable and buf.is_mutable and a.ctypes.data % 64 == 0
    addr = a.ctypes.data
    del a, buf
    gc.collect()
    assert cache.held == 1 << 20  # its size class: the next power of two
    b, _ = _arrow.empty(BIG + 10_000, np.float64)  # same class
    assert b.ctypes.data == addr and cache.held == 0
    c, _ = _arrow.empty(4 * BIG, np.int64)  # another class: a new block
    assert c.ctypes.data != addr


def test_small_buffers_are_not_held(cache):
    a, buf = _arrow.empty(SMALL, np.int64)
    del a, buf
    gc.collect()
    assert cache.held == 0


def test_release_memory_gives_waiting_blocks_back(cache):
    """``fastops.release_memory()`` empties the cache (the pool's bytes drop
    by what it held) and leaves a block still in use intact; dropped later,
    that block waits in the cache again."""
    a = _arrow.empty(BIG, np.int64)[0]
    b = _arrow.empty(4 * BIG, np.int64)[0]
    a[:] = np.arange(BIG)
    del b
    gc.collect()
    held = cache.held
    assert held == 4 << 20
    before = pa.total_allocated_bytes()
    assert fastops.release_memory() == held
    assert cache.held == 0 and not cache.free
    assert before - pa.total_allocated_bytes() == held
    assert np.array_equal(a, np.arange(BIG))  # still in use: untouched
    del a
    gc.collect()
    assert cache.held == 1 << 20
    assert fastops.release_memory() == 1 << 20 and cache.held == 0


def test_no_reuse_while_any_view_is_alive(cache):
    a, buf = _arrow.empty(BIG, np.int64)
    a[:] = np.arange(BIG)
    addr = a.ctypes.data
    arr = pa.Array.from_buffers(pa.int64(), BIG, [None, buf])  # an Arrow array over it
    view = a[10:20]  # a NumPy view
    zero_copy = pa.array(a[:5000])  # pyarrow wrapping the NumPy memory
    del a, buf
    gc.collect()
    for _ in range(3):
        other, _ = _arrow.empty(BIG, np.int64)
        assert other.ctypes.data != addr
        other[:] = -1
    assert not cached(cache, addr)
    assert arr.to_numpy().tolist() == list(range(BIG))
    assert view.tolist() == list(range(10, 20))
    assert zero_copy.to_numpy().tolist() == list(range(5000))
    del arr, view
    gc.collect()
    assert not cached(cache, addr)  # the Arrow array over a slice still holds it
    del zero_copy
    gc.collect()
    assert cached(cache, addr)


def test_held_bytes_are_capped(cache, monkeypatch):
    monkeypatch.setattr(_arrow.BlockCache, "CAP_BYTES", 3 << 20)
    arrays = [_arrow.empty(BIG, np.int64)[0] for _ in range(5)]
    del arrays
    gc.collect()
    assert cache.held == 3 << 20
    assert sum(len(v) for v in cache.free.values()) == 3
    cache.clear()
    assert cache.held == 0 and not cache.free


def test_kept_results_stay_intact_while_later_ones_reuse_memory(cache):
    # every window's columns are recycled blocks: results kept by the caller
    # must not change while the aggregator emits more
    rng = np.random.default_rng(7)
    n_keys, rows = 60_000, 200_000
    keys = rng.permutation(np.tile(np.arange(n_keys), rows // n_keys + 1)[:rows])
    values = rng.normal(size=rows)
    kept, copies = [], []
    wa = fastops.WindowAggregator(fastops.Tumbling("1s"), "k", {"n": agg.count(), "s": agg.sum("v")}, time="ts")
    for second in range(8):
        ts = np.full(rows, second * 1000 + 500, dtype=np.int64)
        wa.process(pa.record_batch({"k": keys, "v": values, "ts": ts}))
        out = wa.advance_watermark((second + 1) * 1000)
        assert out.num_rows == n_keys
        if second % 2 == 0:  # kept; the others are dropped, for later windows to reuse
            kept.append(out)
            copies.append(out.to_pylist())
        del out
        gc.collect()
    assert cache.held > 0
    counts, sums = np.bincount(keys, minlength=n_keys), np.bincount(keys, weights=values, minlength=n_keys)
    for batch, expected in zip(kept, copies):
        assert batch.to_pylist() == expected
        order = np.argsort(batch.column("k").to_numpy())  # every key once: against NumPy's group-by
        assert batch.column("n").to_numpy()[order].tolist() == counts.tolist()
        np.testing.assert_allclose(batch.column("s").to_numpy()[order], sums, rtol=1e-9, atol=1e-9)
