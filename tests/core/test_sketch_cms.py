"""Count-Min: one-sided error bound (with deletions), conservative update, merge."""
import math
import pickle

import datasketches
import numpy as np
import pyarrow as pa
import pytest

from fastops.core.sketches import CountMinSketch


def _zipf(seed, n, universe=5000):
    return np.random.default_rng(seed).zipf(1.3, n) % universe


def _exact(values, weights=None):
    keys, inv = np.unique(values, return_inverse=True)
    counts = np.bincount(inv, weights=weights).astype(np.int64)
    return keys, counts


@pytest.mark.parametrize("conservative", [False, True])
def test_one_sided_bound(conservative):
    eps, delta = 0.002, 0.01
    violations = 0
    checked = 0
    for seed in range(5):
        vals = _zipf(seed, 200_000)
        c = CountMinSketch.from_error(eps, delta, seed=seed, conservative=conservative)
        for part in np.array_split(vals, 7):
            c.update(part)
        keys, f = _exact(vals)
        est = c.estimate(keys)
        assert np.all(est >= f)                      # never underestimates
        violations += int(np.sum(est > f + eps * len(vals)))
        checked += len(keys)
        absent = np.arange(10**6, 10**6 + 2000)
        assert np.all(c.estimate(absent) >= 0)
    assert violations <= delta * checked


def test_conservative_is_tighter():
    vals = _zipf(3, 100_000)
    plain = CountMinSketch(500, 4)
    cons = CountMinSketch(500, 4, conservative=True)
    plain.update(vals)
    cons.update(vals)
    keys, f = _exact(vals)
    e_plain, e_cons = plain.estimate(keys), cons.estimate(keys)
    assert np.all(e_cons >= f) and np.all(e_cons <= e_plain)
    assert (e_cons - f).sum() < 0.8 * (e_plain - f).sum()


def test_turnstile_deletions():
    rng = np.random.default_rng(5)
    vals = _zipf(5, 100_000)
    c = CountMinSketch.from_error(0.001, 0.01)
    c.update(vals)
    # delete a random subset of the inserted occurrences (counts stay >= 0)
    dele = vals[rng.random(len(vals)) < 0.4]
    c.update(dele, weights=-np.ones(len(dele), dtype=np.int64))
    keys, f_ins = _exact(vals)
    k_del, f_del = _exact(dele)
    f = f_ins.copy()
    f[np.searchsorted(keys, k_del)] -= f_del
    est = c.estimate(keys)
    W = int(f.sum())
    assert c.total_weight == W
    assert np.all(est >= f)
    assert np.mean(est > f + c.epsilon * W) <= c.delta
    # fully deleted keys come back to (about) zero
    c2 = CountMinSketch(2000, 5)
    c2.update(vals)
    c2.update(vals, weights=-1)
    assert not c2.table.any()


def test_weights_and_nulls():
    c = CountMinSketch(1000, 4)
    c.update(pa.array([1, None, 2, 1], pa.int64()), weights=np.array([5, 100, 2, 3]))
    assert c.estimate(pa.array([1, 2, None])).tolist() == [8, 2, 0]
    assert c.total_weight == 10
    with pytest.raises(ValueError, match="4 values"):
        c.update(np.arange(4), weights=np.ones(3, dtype=np.int64))
    with pytest.raises(TypeError, match="integers"):
        c.update(np.arange(2), weights=np.array([0.5, 1.0]))
    cons = CountMinSketch(100, 3, conservative=True)
    with pytest.raises(ValueError, match="insert-only"):
        cons.update(np.arange(2), weights=np.array([1, -1]))
    assert not cons.table.any()


def test_strings_and_chunks():
    words = [f"w{i % 37}" for i in range(5000)]
    c = CountMinSketch(4000, 4)
    c.update(pa.chunked_array([pa.array(words[:1234]), pa.array(words[1234:])]))
    est = c.estimate(pa.array([f"w{i}" for i in range(37)]))
    exact = np.array([words.count(f"w{i}") for i in range(37)])
    assert np.all(est >= exact) and np.all(est - exact <= 0.05 * 5000)


def test_merge_exact():
    a_vals, b_vals = _zipf(1, 50_000), _zipf(2, 50_000)
    a, b, u = (CountMinSketch(777, 5, seed=3) for _ in range(3))
    a.update(a_vals)
    b.update(b_vals, weights=np.full(len(b_vals), 2))
    u.update(a_vals)
    u.update(b_vals, weights=2)
    assert a.copy().merge(b) == u
    with pytest.raises(ValueError, match="parameters differ"):
        a.merge(CountMinSketch(778, 5, seed=3))
    with pytest.raises(ValueError):
        a.merge(CountMinSketch(777, 5, seed=4))


def test_from_error_sizes():
    c = CountMinSketch.from_error(0.01, 0.001)
    assert c.width == math.ceil(math.e / 0.01) and c.depth == math.ceil(math.log(1000))
    for bad in (0, 1, -0.1):
        with pytest.raises(ValueError):
            CountMinSketch.from_error(bad, 0.1)
    with pytest.raises(ValueError, match="depth"):
        CountMinSketch(10, 65)


def test_bytes_and_pickle():
    c = CountMinSketch(300, 3, seed=9, conservative=True)
    c.update(_zipf(0, 1000))
    d = CountMinSketch.from_bytes(c.to_bytes())
    assert d == c and d.conservative
    assert pickle.loads(pickle.dumps(c)) == c
    with pytest.raises(ValueError, match="truncated"):
        CountMinSketch.from_bytes(c.to_bytes()[:-8])
    with pytest.raises(ValueError, match="trailing"):
        CountMinSketch.from_bytes(c.to_bytes() + b"\0")
    assert "CountMinSketch(width=300" in repr(c)


def test_against_datasketches():
    """Same data, same shape (depth 4, width 1000): our overestimates are in
    the same band as DataSketches' count_min_sketch."""
    vals = _zipf(11, 30_000)
    ours = CountMinSketch(1000, 4)
    ours.update(vals)
    ds = datasketches.count_min_sketch(4, 1000)
    for v in vals.tolist():
        ds.update(v)
    keys, f = _exact(vals)
    e_ours = ours.estimate(keys) - f
    e_ds = np.array([ds.get_estimate(int(k)) for k in keys]) - f
    assert np.all(e_ours >= 0) and np.all(e_ds >= 0)
    assert e_ours.mean() <= 1.5 * e_ds.mean() + 1
    assert np.quantile(e_ours, 0.99) <= 1.5 * np.quantile(e_ds, 0.99) + 2
