"""KLL: rank error at p50/p99/p99.9 against exact ranks, merge, types, DataSketches."""
import pickle

import datasketches
import numpy as np
import pyarrow as pa
import pytest

from fastops._kernels import sketch as _sketch
from fastops.core.sketches import KLL

QS = np.array([0.5, 0.99, 0.999])


def _true_ranks(sorted_data, x):
    return np.searchsorted(sorted_data, x, side="right") / len(sorted_data)


@pytest.mark.parametrize("dist", ["uniform", "lognormal", "zipf"])
def test_rank_error_bound(dist):
    n = 300_000
    eps = KLL(200).normalized_rank_error()
    worst = []
    for t in range(12):
        rng = np.random.default_rng(t)
        data = {"uniform": lambda r: r.random(n),
                "lognormal": lambda r: r.lognormal(0, 2, n),
                "zipf": lambda r: (r.zipf(1.2, n) % 10_000).astype(float)}[dist](rng)
        s = KLL(200, seed=t)
        for part in np.array_split(data, 5):
            s.update(part)
        srt = np.sort(data)
        qv = s.quantiles(QS)
        # the returned quantile's true rank brackets q within eps
        lo = np.searchsorted(srt, qv, side="left") / n
        hi = np.searchsorted(srt, qv, side="right") / n
        err_q = np.maximum(lo - QS, QS - hi).clip(min=0)
        # rank estimate at the exact quantile points
        xs = srt[(QS * n).astype(int) - 1]
        err_r = np.abs(s.ranks(xs) - _true_ranks(srt, xs))
        worst.append(max(err_q.max(), err_r.max()))
        assert s.n == n and s.min == srt[0] and s.max == srt[-1]
    worst = np.array(worst)
    assert np.mean(worst <= eps) >= 0.9
    assert worst.max() <= 2 * eps


def test_small_inputs_exact():
    s = KLL(200)
    vals = np.array([5.0, 1.0, 3.0, np.nan])
    s.update(vals)
    assert s.n == 3
    assert s.quantile(0) == 1.0 and s.quantile(1) == 5.0 and s.quantile(0.5) == 3.0
    assert s.rank(3.0) == pytest.approx(2 / 3)
    assert s.cdf([2.0, 4.0]).tolist() == pytest.approx([1 / 3, 2 / 3, 1.0])
    assert s.pmf([2.0]).tolist() == pytest.approx([1 / 3, 2 / 3])
    empty = KLL()
    assert np.isnan(empty.quantile(0.5)) and np.isnan(empty.rank(1.0))
    with pytest.raises(ValueError, match="ranks"):
        s.quantile(1.5)
    with pytest.raises(ValueError, match="increasing"):
        s.cdf([2.0, 1.0])


def test_types_nulls_timestamps():
    ts = pa.array(np.arange(1000, dtype=np.int64) * 1000, pa.timestamp("ms"))
    s = KLL()
    s.update(ts)
    assert s.quantile(0.5) == pytest.approx(499_000, abs=2000)
    s2 = KLL()
    s2.update(pa.array([1, None, 3], pa.int32()))
    s2.update(pa.array([2.0, None], pa.float32()).slice(0))
    s2.update(pa.chunked_array([pa.array([4, 5], pa.uint8())]))
    assert s2.n == 5 and s2.quantile(1) == 5 and s2.quantile(0) == 1
    with pytest.raises(TypeError, match="numeric"):
        KLL().update(pa.array(["a"]))
    with pytest.raises(ValueError, match="weights"):
        KLL().update(np.arange(3.0), weights=np.ones(3))
    with pytest.raises(ValueError, match="k must"):
        KLL(4)


def test_merge_within_bounds():
    rng = np.random.default_rng(3)
    parts = [rng.normal(i, 1, 50_000) for i in range(6)]
    sketches = []
    for i, p in enumerate(parts):
        s = KLL(200, seed=i)
        s.update(p)
        sketches.append(s)
    merged = sketches[0].copy()
    for s in sketches[1:]:
        merged.merge(s)
    data = np.sort(np.concatenate(parts))
    assert merged.n == len(data)
    assert merged.min == data[0] and merged.max == data[-1]
    xs = np.quantile(data, [0.01, 0.25, 0.5, 0.75, 0.99])
    err = np.abs(merged.ranks(xs) - _true_ranks(data, xs))
    assert err.max() <= merged.normalized_rank_error(all_ranks=True)
    assert merged.num_retained <= 3 * 200 + 8 * 30
    with pytest.raises(ValueError, match="k="):
        merged.merge(KLL(100))


def test_bytes_roundtrip():
    s = KLL(100, seed=4)
    s.update(np.random.default_rng(0).random(100_000))
    d = KLL.from_bytes(s.to_bytes())
    assert d.to_bytes() == s.to_bytes()
    assert np.array_equal(d.quantiles(QS), s.quantiles(QS))
    p = pickle.loads(pickle.dumps(s))
    assert p.to_bytes() == s.to_bytes()
    # the restored sketch continues exactly like the original
    more = np.random.default_rng(1).random(10_000)
    s.update(more)
    d.update(more)
    assert d.to_bytes() == s.to_bytes()
    assert "KLL(k=100" in repr(s)
    with pytest.raises(ValueError):
        KLL.from_bytes(s.to_bytes()[:-3])


def test_against_datasketches():
    """Same data: our worst rank error over a grid is in DataSketches' band."""
    ours_err, ds_err = [], []
    n = 200_000
    grid = np.linspace(0.01, 0.99, 99)
    for t in range(6):
        data = np.random.default_rng(100 + t).exponential(1.0, n)
        srt = np.sort(data)
        xs = srt[(grid * n).astype(int)]
        truth = _true_ranks(srt, xs)
        s = KLL(200, seed=t)
        s.update(data)
        d = datasketches.kll_doubles_sketch(200)
        d.update(data)
        ours_err.append(np.abs(s.ranks(xs) - truth).max())
        ds_err.append(np.abs(np.array([d.get_rank(x) for x in xs]) - truth).max())
    assert np.mean(ours_err) <= 1.5 * np.mean(ds_err) + 1e-3


@pytest.mark.parametrize("voff", [-8, 2**63 - 4])
def test_kll_kernel_checks_the_validity_bits(voff):
    with pytest.raises(ValueError, match=f"bitmap too short: 8 bits from bit {voff} on, 2 bytes"):
        _sketch.KLLCore(200, 8, 0).update(np.zeros(8), np.zeros(2, np.uint8), voff)
