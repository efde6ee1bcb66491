"""HyperLogLog: accuracy against exact distinct counts, merge, formats, types."""
import math
import pickle

import datasketches
import numpy as np
import pyarrow as pa
import pytest

from fastops.core import hashing
from fastops.core.sketches import HyperLogLog


def _distinct_block(trial: int, n: int) -> np.ndarray:
    """``n`` distinct int64 values, disjoint between trials (the hash mixes them)."""
    return np.arange(n, dtype=np.int64) + np.int64(trial) * (1 << 40) + 12345


@pytest.mark.parametrize("precision", [10, 12, 14])
@pytest.mark.parametrize("n,trials", [(10, 100), (100, 100), (1000, 100), (10_000, 100),
                                      (100_000, 100), (1_000_000, 20)])
def test_error_within_bound(precision, n, trials):
    sigma = 1.04 / math.sqrt(1 << precision)
    errs = []
    for t in range(trials):
        h = HyperLogLog(precision, seed=t)
        h.update(_distinct_block(t, n))
        errs.append(h.estimate() / n - 1.0)
    errs = np.array(errs)
    rmse = float(np.sqrt(np.mean(errs ** 2)))
    # RMSE of T trials: its own sampling error is about sigma / sqrt(2T)
    assert rmse <= sigma * (1.0 + 3.0 / math.sqrt(2 * trials)), (rmse, sigma)
    assert abs(errs.mean()) <= 3.0 * sigma / math.sqrt(trials) + 1e-3
    # small n: the error is a whole number of register collisions
    assert np.abs(errs * n).max() <= max(5.0 * sigma * n, 2.0)


def test_ten_million():
    # 10M distinct values: a few trials (pre-generated distinct int64 blocks)
    n = 10_000_000
    for precision in (10, 12, 14):
        sigma = 1.04 / math.sqrt(1 << precision)
        for t in range(2):
            h = HyperLogLog(precision, seed=100 + t)
            h.update(_distinct_block(t, n))
            assert abs(h.estimate() / n - 1.0) <= 3.0 * sigma


def test_small_cardinalities_near_exact():
    for n in range(0, 60):
        h = HyperLogLog(14)
        h.update(_distinct_block(n, n))
        assert abs(h.estimate() - n) <= 1.5, n


def test_duplicates_and_nulls_do_not_count():
    values = pa.array([1, 2, None, 2, 1, None, 3], pa.int64())
    h = HyperLogLog(12)
    h.update(values)
    h.update(values)
    assert round(h.estimate()) == 3
    empty = HyperLogLog(12)
    empty.update(pa.array([None, None], pa.int64()))
    assert empty.estimate() == 0.0 and empty.is_empty()


@pytest.mark.parametrize("make", [
    lambda v: pa.array(v, pa.int64()),
    lambda v: pa.array(v.astype(np.int32), pa.int32()),
    lambda v: pa.array(v.astype(np.float64)),
    lambda v: pa.array([str(x) for x in v]),
    lambda v: pa.array([str(x) for x in v], pa.large_string()),
    lambda v: pa.array(v.astype(np.int16) if v.max() < 30000 else v, pa.int16()),
    lambda v: pa.array([str(x) for x in v]).dictionary_encode(),
    lambda v: pa.chunked_array([pa.array(v[:50]), pa.array(v[50:])]),
])
def test_value_types_follow_hash64(make):
    """Every fused hashing path matches ``fastops.core.hashing`` (the mode-0 path)."""
    v = np.arange(0, 3000, 3, dtype=np.int64)
    arr = make(v)
    a = HyperLogLog(10, seed=7)
    a.update(arr)
    col = arr if isinstance(arr, pa.Array) else arr.combine_chunks()
    # reference registers, built in NumPy from fastops.core.hashing's hashes
    h = hashing.hash_columns([col], 7)
    idx = (h >> np.uint64(54)).astype(np.int64)
    w = (h << np.uint64(10)) | np.uint64(1 << 9)
    rho = np.array([65 - int(x).bit_length() for x in w], dtype=np.uint8)
    regs = np.zeros(1 << 10, np.uint8)
    np.maximum.at(regs, idx, rho)
    assert np.array_equal(a.registers, regs)


def test_sliced_arrays_with_nulls():
    base = pa.array([None if i % 7 == 0 else f"k{i % 500}" for i in range(3000)])
    part = base.slice(13, 2000)
    h = HyperLogLog(14)
    h.update(part)
    exact = len({x for x in part.to_pylist() if x is not None})
    assert abs(h.estimate() - exact) <= 0.02 * exact


def test_merge_is_exact_union():
    rng = np.random.default_rng(1)
    a_vals = rng.integers(0, 50_000, 40_000)
    b_vals = rng.integers(25_000, 90_000, 40_000)
    a, b, u = HyperLogLog(12), HyperLogLog(12), HyperLogLog(12)
    a.update(a_vals)
    b.update(b_vals)
    u.update(np.concatenate([a_vals, b_vals]))
    assert a.copy().merge(b) == u
    assert b.copy().merge(a) == u
    with pytest.raises(ValueError, match="precision"):
        a.merge(HyperLogLog(13))
    with pytest.raises(ValueError, match="seed"):
        a.merge(HyperLogLog(12, seed=1))
    with pytest.raises(TypeError):
        a.merge(object())


def test_bytes_roundtrip_and_pickle():
    h = HyperLogLog(11, seed=5)
    h.update(np.arange(10_000))
    data = h.to_bytes()
    assert len(data) == 8 + 16 + (1 << 11)
    g = HyperLogLog.from_bytes(data)
    assert g == h and g.estimate() == h.estimate()
    assert pickle.loads(pickle.dumps(h)) == h
    assert "HyperLogLog(precision=11" in repr(h)
    with pytest.raises(ValueError):
        HyperLogLog.from_bytes(data[:-1])
    bad = bytearray(data)
    bad[-1] = 200
    with pytest.raises(ValueError, match="register"):
        HyperLogLog.from_bytes(bytes(bad))


def test_bad_arguments():
    with pytest.raises(ValueError, match="precision"):
        HyperLogLog(3)
    with pytest.raises(ValueError, match="precision"):
        HyperLogLog(19)
    with pytest.raises(TypeError, match="precision"):
        HyperLogLog(12.0)
    with pytest.raises(ValueError, match="weights"):
        HyperLogLog().update(np.arange(3), weights=np.ones(3))
    with pytest.raises(TypeError, match="RecordBatch"):
        HyperLogLog().update(pa.record_batch({"a": [1]}))
    with pytest.raises(TypeError, match="list"):
        HyperLogLog().update(pa.array([[1]]))


def test_against_datasketches():
    """Same data: our error is within the band of DataSketches' HLL_8 at the
    same lg_k (their per-item API, so moderate n)."""
    ours, theirs = [], []
    n = 20_000
    for t in range(20):
        vals = _distinct_block(t, n)
        h = HyperLogLog(10, seed=t)
        h.update(vals)
        d = datasketches.hll_sketch(10, datasketches.HLL_8)
        for v in vals.tolist():
            d.update(v)
        ours.append(h.estimate() / n - 1)
        theirs.append(d.get_estimate() / n - 1)
    rmse_ours = float(np.sqrt(np.mean(np.square(ours))))
    rmse_theirs = float(np.sqrt(np.mean(np.square(theirs))))
    sigma = 1.04 / 32
    assert rmse_ours <= max(1.5 * rmse_theirs, sigma * 1.5)


def test_block_path_for_int64_matches_reference_registers():
    """Large int64 input (hashed block by block) gives the reference registers."""
    v = np.random.default_rng(3).integers(-(2**63), 2**63 - 1, 200_003, dtype=np.int64)
    for values in (v, pa.array(v), pa.array(v).slice(5)):
        a = HyperLogLog(12, seed=11)
        a.update(values)
        col = values if isinstance(values, pa.Array) else pa.array(values)
        h = hashing.hash_columns([col], 11)
        idx = (h >> np.uint64(52)).astype(np.int64)
        w = (h << np.uint64(12)) | np.uint64(1 << 11)
        rho = np.array([65 - int(x).bit_length() for x in w.tolist()], dtype=np.uint8)
        regs = np.zeros(1 << 12, np.uint8)
        np.maximum.at(regs, idx, rho)
        assert np.array_equal(a.registers, regs)
