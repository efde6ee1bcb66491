"""Bloom filter false-positive rate and merge; reservoir uniformity (chi-square)."""
import math
import pickle

import numpy as np
import pyarrow as pa
import pytest
from scipy import stats

from fastops._kernels import sketch as _sketch
from fastops.core.sketches import BloomFilter, Reservoir


@pytest.mark.parametrize("capacity,fp", [(10_000, 0.01), (100_000, 0.001), (50_000, 0.05)])
def test_bloom_fp_rate(capacity, fp):
    b = BloomFilter(capacity, fp, seed=3)
    present = np.arange(capacity, dtype=np.int64) * 7919
    b.add(present)
    assert b.contains(present).all()               # no false negatives
    absent = np.arange(2_000_000, dtype=np.int64) * 7919 + 1
    rate = b.contains(absent).mean()
    assert rate <= 1.5 * fp
    theory = (1 - math.exp(-b.num_hashes * capacity / b.num_bits)) ** b.num_hashes
    assert rate == pytest.approx(theory, rel=0.3)
    assert b.current_fp_rate() == pytest.approx(theory, rel=0.1)


def test_bloom_sizes_and_types():
    b = BloomFilter(1000, 0.01)
    assert b.num_bits == math.ceil(-1000 * math.log(0.01) / math.log(2) ** 2)
    assert b.num_hashes == round(b.num_bits / 1000 * math.log(2))
    words = pa.array(["x", None, "yy", "zzz"])
    b.add(words)
    assert b.contains(pa.array(["x", "yy", "zzz", None])).tolist() == [True, True, True, False]
    with pytest.raises(ValueError):
        BloomFilter(10, 1.5)
    with pytest.raises(ValueError, match="weights"):
        b.update([1], weights=[1])


def test_bloom_merge_is_union_and_bytes():
    a, b, u = (BloomFilter(5000, 0.01, seed=1) for _ in range(3))
    a.add(np.arange(0, 3000))
    b.add(np.arange(2000, 6000))
    u.add(np.arange(0, 6000))
    assert a.copy().merge(b) == u
    with pytest.raises(ValueError, match="parameters differ"):
        a.merge(BloomFilter(5001, 0.01, seed=1))
    assert BloomFilter.from_bytes(u.to_bytes()) == u
    assert pickle.loads(pickle.dumps(u)) == u
    with pytest.raises(ValueError):
        BloomFilter.from_bytes(u.to_bytes()[:-1])


def test_reservoir_uniform_chi_square():
    n, k, trials = 60, 6, 3000
    counts = np.zeros(n)
    for t in range(trials):
        r = Reservoir(k, seed=t)
        for part in np.array_split(np.arange(n), 4):
            r.update(part)
        sample = r.sample().to_numpy()
        assert len(set(sample.tolist())) == k
        assert np.array_equal(np.sort(sample), np.sort(r.positions()))
        counts[sample] += 1
    expected = trials * k / n
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert stats.chi2.sf(chi2, n - 1) > 1e-3


def test_reservoir_large_stream_uniform():
    # long stream, Algorithm L's skips: positions spread uniformly over [0, n)
    n, k = 200_000, 2000
    r = Reservoir(k, seed=11)
    r.update(np.arange(n))
    pos = r.positions()
    assert len(np.unique(pos)) == k
    assert stats.kstest(pos / n, "uniform").pvalue > 1e-3


def test_reservoir_reproducible_and_batching_invariant():
    data = np.arange(10_000)
    a, b = Reservoir(50, seed=5), Reservoir(50, seed=5)
    a.update(data)
    for part in np.array_split(data, 17):
        b.update(pa.array(part))
    assert a.sample().equals(b.sample())
    c = Reservoir(50, seed=6)
    c.update(data)
    assert not a.sample().equals(c.sample())


def test_reservoir_nulls_tables_bytes():
    r = Reservoir(3, seed=1)
    r.update(pa.array([None, 1, None, 2]))
    assert r.seen == 2 and sorted(r.sample().to_pylist()) == [1, 2]
    t = Reservoir(4, seed=2)
    batch = pa.record_batch({"a": list(range(100)), "b": [str(i) for i in range(100)]})
    t.update(batch)
    s = t.sample()
    assert isinstance(s, pa.Table) and s.num_rows == 4
    assert [str(x) for x in s.column("a").to_pylist()] == s.column("b").to_pylist()
    for res in (r, t, Reservoir(5)):
        back = Reservoir.from_bytes(res.to_bytes())
        assert back.to_bytes() == res.to_bytes()
        assert pickle.loads(pickle.dumps(res)).to_bytes() == res.to_bytes()
    back = Reservoir.from_bytes(t.to_bytes())
    more = pa.record_batch({"a": list(range(100, 200)), "b": [str(i) for i in range(100, 200)]})
    back.update(more)
    t.update(more)
    assert back.sample().equals(t.sample())
    with pytest.raises(TypeError, match="table"):
        t.update(np.arange(3))


def test_reservoir_merge_uniform():
    n1, n2, k, trials = 30, 10, 5, 3000
    counts = np.zeros(n1 + n2)
    for t in range(trials):
        a, b = Reservoir(k, seed=2 * t), Reservoir(k, seed=2 * t + 1)
        a.update(np.arange(n1))
        b.update(np.arange(n1, n1 + n2))
        a.merge(b)
        assert a.seen == n1 + n2
        s = a.sample().to_numpy()
        assert np.array_equal(np.sort(s), np.sort(a.positions()))
        counts[s] += 1
    expected = trials * k / (n1 + n2)
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert stats.chi2.sf(chi2, n1 + n2 - 1) > 1e-3
    with pytest.raises(ValueError, match="size"):
        Reservoir(3).merge(Reservoir(4))


@pytest.mark.skipif(not hasattr(pa, "string_view"), reason="view types need pyarrow >= 16")
def test_reservoir_of_view_values_and_tables_samples_as_plain_strings():
    words = [f"w{i}" * (i % 9) for i in range(400)]
    for make in (lambda t: pa.array(words, t),
                 lambda t: pa.table({"s": pa.array(words, t), "i": np.arange(len(words))})):
        samples = []
        for t in (pa.string(), pa.string_view()):
            r = Reservoir(17, seed=4)
            r.update(make(t))
            samples.append(r.sample().to_pylist())
        assert samples[0] == samples[1] and len(samples[0]) == 17


@pytest.mark.parametrize("voff", [-8, 2**63 - 4])
def test_reservoir_kernel_checks_the_validity_bits(voff):
    slots = np.zeros(2, np.int64)
    with pytest.raises(ValueError, match=f"bitmap too short: 8 bits from bit {voff} on, 2 bytes"):
        _sketch.reservoir_update(2, np.zeros(1), np.zeros(2, np.int64), np.zeros(1, np.uint64),
                                 slots, slots.copy(), np.zeros(2, np.uint8), voff, 8)
