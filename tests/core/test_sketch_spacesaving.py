"""Space-Saving: heavy hitters recovered, count bounds, merge, DataSketches."""
import pickle
from collections import Counter

import datasketches
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastops.core.sketches import SpaceSaving


def _zipf(seed, n, a=1.2, universe=100_000):
    return (np.random.default_rng(seed).zipf(a, n) % universe).astype(np.int64)


def _check_guarantees(s, values, weights=None):
    keys, inv = np.unique(values, return_inverse=True)
    f = np.bincount(inv, weights=weights).astype(np.int64)
    W = int(f.sum())
    assert s.total_weight == W
    top = s.top()
    got = dict(zip(top.column("value").to_pylist(),
                   zip(top.column("count").to_pylist(), top.column("lower_bound").to_pylist())))
    exact = dict(zip(keys.tolist(), f.tolist()))
    for v, (cnt, lo) in got.items():
        assert lo <= exact[v] <= cnt, (v, lo, exact[v], cnt)
    assert len(got) <= s.capacity
    for v, fv in exact.items():
        if fv > W / s.capacity:
            assert v in got, (v, fv)
        if v not in got:
            assert fv <= s.min_count
    assert s.min_count <= W / s.capacity
    return got, exact


@pytest.mark.parametrize("capacity", [10, 100, 1000])
def test_heavy_hitters_and_bounds(capacity):
    for seed in range(3):
        vals = _zipf(seed, 300_000)
        s = SpaceSaving(capacity, seed=seed)
        for part in np.array_split(vals, 4):
            s.update(part)
        _check_guarantees(s, vals)


def test_small_batches_and_weights():
    rng = np.random.default_rng(7)
    vals = _zipf(7, 20_000)
    w = rng.integers(0, 5, len(vals))
    s = SpaceSaving(50)
    for i in range(0, len(vals), 333):
        s.update(vals[i:i + 333], weights=w[i:i + 333])
    _check_guarantees(s, vals, w)
    with pytest.raises(ValueError, match="non-negative"):
        s.update(np.array([1]), weights=np.array([-1]))


def test_top_order_and_exact_when_not_full():
    s = SpaceSaving(100)
    data = ["a"] * 5 + ["b"] * 3 + [None] * 9 + ["c"]
    s.update(pa.array(data))
    t = s.top(2)
    assert t.column("value").to_pylist() == ["a", "b"]
    assert t.column("count").to_pylist() == [5, 3]
    assert t.column("lower_bound").to_pylist() == [5, 3]
    assert s.total_weight == 9
    with pytest.raises(TypeError, match="holds string"):
        s.update(np.array([1, 2]))


def test_strings_dictionary_chunked():
    words = [f"w{int(x)}" for x in _zipf(1, 30_000, universe=3000)]
    arr = pa.chunked_array([pa.array(words[:10_000]).dictionary_encode(),
                            pa.array(words[10_000:]).dictionary_encode()])
    s = SpaceSaving(64)
    s.update(arr)
    c = Counter(words)
    top_true = [w for w, n in c.most_common() if n > len(words) / 64]
    got = set(s.top().column("value").to_pylist())
    assert set(top_true) <= got


def test_merge_within_bounds():
    a_vals, b_vals = _zipf(1, 100_000), _zipf(2, 100_000, a=1.4)
    a, b = SpaceSaving(100), SpaceSaving(100)
    a.update(a_vals)
    b.update(b_vals)
    m = a.copy().merge(b)
    _check_guarantees(m, np.concatenate([a_vals, b_vals]))
    with pytest.raises(ValueError, match="parameters differ"):
        a.merge(SpaceSaving(101))


def test_bytes_and_pickle():
    s = SpaceSaving(30, seed=2)
    s.update(pa.array([f"x{i % 40}" for i in range(1000)]))
    d = SpaceSaving.from_bytes(s.to_bytes())
    assert d.top().equals(s.top())
    assert pickle.loads(pickle.dumps(s)).top().equals(s.top())
    assert SpaceSaving.from_bytes(SpaceSaving(3).to_bytes()).top().num_rows == 0
    data = bytearray(s.to_bytes())
    data[40] ^= 0xFF  # a hash no longer matches its value
    with pytest.raises(ValueError):
        SpaceSaving.from_bytes(bytes(data))
    assert "SpaceSaving(capacity=30" in repr(s)


def test_against_datasketches():
    """Both find every item above W / capacity; our bounds are no looser."""
    vals = _zipf(5, 100_000)
    s = SpaceSaving(256)
    s.update(vals)
    d = datasketches.frequent_items_sketch(9)  # map of 512 slots, ~384 items kept
    for v in vals.tolist():
        d.update(str(v))
    keys, f = np.unique(vals, return_counts=True)
    heavy = set(keys[f > len(vals) / 256].tolist())
    ours = set(s.top().column("value").to_pylist())
    theirs = {int(r[0]) for r in d.get_frequent_items(datasketches.NO_FALSE_NEGATIVES)}
    assert heavy <= ours
    assert heavy <= theirs
    t = s.top()
    ours_width = np.mean((t.column("count").to_numpy() - t.column("lower_bound").to_numpy())[:20])
    theirs_width = np.mean([r[3] - r[2] for r in d.get_frequent_items(
        datasketches.NO_FALSE_NEGATIVES)[:20]])
    assert ours_width <= 1.5 * theirs_width + 1


# Batch path: every chunk is counted exactly and combined into the summary;
# the guarantees hold whatever the chunk size, ties and weights.
@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.integers(1, 64), st.integers(1, 400), st.integers(0, 2**32),
       st.booleans(), st.sampled_from([3, 30, 3000]))
def test_guarantees_any_chunking(capacity, chunk, batch, seed, weighted, universe):
    rng = np.random.default_rng(seed)
    vals = (rng.zipf(1.3, 2000) % universe).astype(np.int64)
    w = rng.integers(0, 4, len(vals)) if weighted else None
    s = SpaceSaving(capacity, seed=seed % 7)
    s._CHUNK = chunk
    for i in range(0, len(vals), batch):
        s.update(vals[i:i + batch], weights=None if w is None else w[i:i + batch])
    _check_guarantees(s, vals, w)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 30), st.integers(1, 50), st.integers(0, 2**32))
def test_merge_of_chunked_sketches(capacity, chunk, seed):
    rng = np.random.default_rng(seed)
    a, b = (rng.zipf(1.2, 1500) % 200).astype(np.int64), (rng.zipf(1.4, 900) % 50).astype(np.int64)
    sa, sb = SpaceSaving(capacity), SpaceSaving(capacity)
    sa._CHUNK = sb._CHUNK = chunk
    sa.update(a)
    sb.update(b)
    sa.merge(sb)
    _check_guarantees(sa, np.concatenate([a, b]))


def test_many_distinct_strings_large_chunks():
    # a heavy tail of strings: most rows are new to the summary in each chunk
    rng = np.random.default_rng(5)
    keys = rng.zipf(1.1, 200_000) % 100_000
    vals = np.array([f"user-{k}" for k in keys], dtype=object)
    s = SpaceSaving(256)
    s.update(vals[:120_000])
    s.update(vals[120_000:])
    got = _check_guarantees(s, vals)[0]
    assert len(got) == 256


@pytest.mark.skipif(not hasattr(pa, "string_view"), reason="view types need pyarrow >= 16")
def test_view_input_counts_as_the_plain_strings():
    rng = np.random.default_rng(3)
    words = [None, "a", "bb", "c" * 20, "\u00e9" * 7]
    vals = [words[i] for i in rng.integers(0, len(words), 500)]
    tops = []
    for t in (pa.string(), pa.string_view()):
        ss = SpaceSaving(8)  # more counters than values: the counts are exact
        ss.update(pa.array(vals, t))
        tops.append(ss.top().to_pylist())
    want = Counter(v for v in vals if v is not None)
    assert tops[0] == tops[1]
    assert {r["value"]: r["count"] for r in tops[1]} == dict(want)
