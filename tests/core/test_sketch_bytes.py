"""from_bytes never crashes: random and mutated inputs give a sketch or ValueError."""
import struct

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastops.core import arrow as _arrow
from fastops.core import sketches as S


def _samples():
    rng = np.random.default_rng(0)
    vals = rng.zipf(1.3, 3000) % 500
    h = S.HyperLogLog(6)
    h.update(vals)
    c = S.CountMinSketch(20, 3, conservative=True)
    c.update(vals)
    k = S.KLL(16)
    k.update(vals.astype(float))
    s = S.SpaceSaving(8)
    s.update(pa.array([f"v{v}" for v in vals[:500]]))
    b = S.BloomFilter(50, 0.1)
    b.add(vals)
    r = S.Reservoir(4, seed=1)
    r.update(vals)
    r2 = S.Reservoir(3, seed=1)
    r2.update(pa.record_batch({"x": [1, 2, 3, 4]}))
    return [h, c, k, s, b, r, r2]


SAMPLES = _samples()


def _exercise(obj):
    """Use a decoded sketch: queries and a re-encode must work."""
    obj.to_bytes()
    repr(obj)
    if isinstance(obj, S.HyperLogLog):
        obj.estimate()
    elif isinstance(obj, S.CountMinSketch):
        obj.estimate(np.arange(5))
    elif isinstance(obj, S.KLL):
        obj.quantiles([0.1, 0.5]), obj.rank(3.0)
        obj.update(np.arange(100.0))
    elif isinstance(obj, S.SpaceSaving):
        obj.top(3)
    elif isinstance(obj, S.BloomFilter):
        obj.contains(np.arange(5))
    else:
        obj.sample()


def _decode(cls, data):
    try:
        obj = cls.from_bytes(data)
    except ValueError:
        return
    _exercise(obj)


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: type(s).__name__)
def test_roundtrip(sample):
    data = sample.to_bytes()
    assert type(sample).from_bytes(data).to_bytes() == data
    for cut in range(0, len(data), max(1, len(data) // 50)):
        with pytest.raises(ValueError):
            type(sample).from_bytes(data[:cut])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(idx=st.integers(0, len(SAMPLES) - 1), data=st.binary(max_size=300))
def test_random_bytes(idx, data):
    cls = type(SAMPLES[idx])
    _decode(cls, data)
    # random bytes behind a valid header
    _decode(cls, SAMPLES[idx].to_bytes()[:8] + data)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(idx=st.integers(0, len(SAMPLES) - 1),
       edits=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)),
                      min_size=1, max_size=6),
       cut=st.one_of(st.none(), st.integers(0, 10**6)),
       tail=st.binary(max_size=8))
def test_mutated_bytes(idx, edits, cut, tail):
    sample = SAMPLES[idx]
    data = bytearray(sample.to_bytes())
    for pos, val in edits:
        data[pos % len(data)] = val
    if cut is not None:
        data = data[: cut % (len(data) + 1)]
    _decode(type(sample), bytes(data) + tail)


def test_wrong_type_and_header():
    h = SAMPLES[0].to_bytes()
    with pytest.raises(ValueError, match="hold a HyperLogLog"):
        S.KLL.from_bytes(h)
    with pytest.raises(ValueError, match="magic"):
        S.HyperLogLog.from_bytes(b"XXXX" + h[4:])
    with pytest.raises(ValueError, match="version"):
        S.HyperLogLog.from_bytes(h[:4] + b"\x09\x00" + h[6:])
    with pytest.raises(TypeError):
        S.HyperLogLog.from_bytes("not bytes")


# ---------------------------------------------------------------- sizes and limits

def _patch(data: bytes, pos: int, fmt: str, value) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, pos, value)
    return bytes(out)


def test_space_saving_capacity_bounded():
    data = SAMPLES[3].to_bytes()          # capacity u32 at byte 8
    for cap in (2**28, 2**31 - 1, S.SpaceSaving.MAX_CAPACITY + 1):
        with pytest.raises(ValueError, match="bad capacity"):
            S.SpaceSaving.from_bytes(_patch(data, 8, "<I", cap))
    big = S.SpaceSaving.from_bytes(_patch(data, 8, "<I", S.SpaceSaving.MAX_CAPACITY))
    big.merge(S.SpaceSaving(S.SpaceSaving.MAX_CAPACITY))
    assert big.top().to_pydict() == SAMPLES[3].top().to_pydict()
    with pytest.raises(ValueError, match=r"capacity must be in \[1, 1048576\]"):
        S.SpaceSaving(2**31 - 1)


def test_reservoir_size_bounded():
    data = S.Reservoir(6).to_bytes()      # size u64 at byte 8, nothing seen
    for size in (2**31 - 1, S.Reservoir.MAX_SIZE + 1):
        with pytest.raises(ValueError, match="bad size"):
            S.Reservoir.from_bytes(_patch(data, 8, "<Q", size))
    with pytest.raises(ValueError, match=r"size must be in \[1, 4194304\]"):
        S.Reservoir(2**31 - 1)


def test_other_constructor_maxima():
    with pytest.raises(ValueError, match="width \\* depth"):
        S.CountMinSketch(2**31, 64)
    with pytest.raises(ValueError, match="MAX_BITS"):
        S.BloomFilter(2**40, 0.01)
    assert S.CountMinSketch(2**26, 4).table.shape == (4, 2**26)


def _reservoir_blob(size, seen, nxt, w, positions, values):
    r = S.Reservoir(size, seed=1)
    r.update(pa.array(values))
    data = bytearray(r.to_bytes())     # seen u64 @16, next i64 @24, W f64 @32
    struct.pack_into("<Qqd", data, 16, seen, nxt, w)
    data[56:56 + 8 * len(positions)] = np.array(positions, "<i8").tobytes()
    return bytes(data)


def test_reservoir_huge_seen_merges_uniformly():
    # a reservoir that has seen 3.6e16 rows: its merge used to fail in NumPy
    blob = _reservoir_blob(4, 36 * 10**15, 36 * 10**15 + 10**12, 1e-16,
                           [5, 10**15, 3 * 10**15, 36 * 10**15 - 1], [1, 2, 3, 4])
    a = S.Reservoir.from_bytes(blob)
    b = S.Reservoir(4, seed=3)
    b.update(np.arange(100, 110))
    a.merge(b)
    assert a.seen == 36 * 10**15 + 10 and len(a) == 4
    assert S.Reservoir.from_bytes(a.to_bytes()).to_bytes() == a.to_bytes()
    # the split between the sides follows the hypergeometric law: mean k n1 / (n1 + n2)
    n1, n2, k = 3 * 10**9, 10**9, 100
    left = []
    for t in range(300):
        x = S.Reservoir(k, seed=t)
        x.update(np.arange(k))
        x._istate[:] = [n1, n1 + 10**6]
        x._fstate[0] = k / n1
        y = S.Reservoir(k, seed=1000 + t)
        y.update(np.arange(k, 2 * k))
        y._istate[:] = [n2, n2 + 10**6]
        x.merge(y)
        left.append(int((x.sample().to_numpy() < k).sum()))
    sd = np.sqrt(k * 0.75 * 0.25 * (n1 + n2 - k) / (n1 + n2 - 1)) / np.sqrt(len(left))
    assert abs(np.mean(left) - k * 0.75) < 5 * sd


def test_reservoir_tiny_threshold_keeps_sampling_state():
    # W below 1.1e-16: log(1 - W) is 0 and the next row number used to go negative
    blob = _reservoir_blob(3, 50, 50, 1e-300, [4, 7, 30], [1, 2, 3])
    r = S.Reservoir.from_bytes(blob)
    r.update(np.arange(5))                 # row 50 is taken, then a huge skip
    assert 50 in r.positions().tolist()
    assert r._istate[1] > r.seen
    assert S.Reservoir.from_bytes(r.to_bytes()).to_bytes() == r.to_bytes()


def test_growth_limits_raise_overflow_and_keep_state():
    r = S.Reservoir.from_bytes(_reservoir_blob(2, 2**62 - 1, 2**62 + 5, 0.5, [0, 1], [1, 2]))
    before = r.to_bytes()
    with pytest.raises(OverflowError, match="MAX_SEEN"):
        r.update(np.arange(3))
    assert r.to_bytes() == before
    with pytest.raises(ValueError, match="bad sampler state"):
        S.Reservoir.from_bytes(_reservoir_blob(2, 2**62 + 1, 2**62 + 5, 0.5, [0, 1], [1, 2]))

    c = S.CountMinSketch(8, 2)
    c.update(np.arange(4))
    full = S.CountMinSketch.from_bytes(_patch(c.to_bytes(), 24, "<q", 2**63 - 2))
    with pytest.raises(OverflowError, match="int64"):
        full.update(np.arange(4))
    with pytest.raises(OverflowError, match="int64"):
        full.copy().merge(c)
    assert full.total_weight == 2**63 - 2 and np.array_equal(full.table, c.table)

    s = S.SpaceSaving.from_bytes(_patch(SAMPLES[3].to_bytes(), 24, "<q", 2**63 - 1))
    with pytest.raises(OverflowError, match="int64"):
        s.update(pa.array(["v1"]))
    with pytest.raises(ValueError, match="total weight"):
        S.SpaceSaving.from_bytes(_patch(SAMPLES[3].to_bytes(), 24, "<q", -1))


def _kll_blob(levels):
    """A KLL(8) serialisation with the given levels (level h weighs 2**h)."""
    n = sum(len(lv) << h for h, lv in enumerate(levels))
    items = [x for lv in levels for x in lv]
    head = struct.pack("<4sHBB", b"FOSK", 1, 3, 0)
    body = struct.pack("<HHB3xQddQ", 8, 8, len(levels), n, min(items), max(items), 1)
    sizes = np.array([len(lv) for lv in levels], "<u4").tobytes()
    return head + body + sizes + np.array(items, "<f8").tobytes()


def test_kll_count_bounded():
    at_max = [[]] * 47 + [[1.0, 2.0]]      # two items of weight 2**47: n = 2**48
    k = S.KLL.from_bytes(_kll_blob(at_max))
    assert k.n == S.KLL.MAX_N and k.quantile(0.5) == 1.0
    with pytest.raises(OverflowError, match="MAX_N"):
        k.update(np.array([3.0]))
    with pytest.raises(OverflowError, match="MAX_N"):
        k.merge(S.KLL.from_bytes(_kll_blob([[0.5]])))
    assert k.n == S.KLL.MAX_N
    with pytest.raises(ValueError, match="MAX_N"):
        S.KLL.from_bytes(_kll_blob([[0.5]] + [[]] * 46 + [[1.0, 2.0]]))
    with pytest.raises(ValueError, match="MAX_N"):   # n past int64 used to be an OverflowError
        S.KLL.from_bytes(_kll_blob([[]] * 47 + [[float(i) for i in range(2**16)]]))


def test_held_value_types_are_what_updates_leave():
    # updates decode dictionaries: a sketch holding dictionary values could
    # never be updated with values of its own type
    s = S.SpaceSaving(4)
    s.update(pa.array(["a", "b", "a"]))
    ipc = _arrow.to_ipc(pa.table({"value": s._values.dictionary_encode()}))
    blob = s.to_bytes()[:32 + 24 * len(s)] + struct.pack("<Q", len(ipc)) + ipc
    with pytest.raises(ValueError, match="unsupported value type dictionary"):
        S.SpaceSaving.from_bytes(blob)

    r = S.Reservoir(2, seed=1)
    r.update(pa.array(["x", "y"]))
    ipc = _arrow.to_ipc(pa.table({"value": r.sample().dictionary_encode()}))
    blob = r.to_bytes()[:56 + 16] + struct.pack("<Q", len(ipc)) + ipc
    with pytest.raises(ValueError, match="not a dictionary"):
        S.Reservoir.from_bytes(blob)
