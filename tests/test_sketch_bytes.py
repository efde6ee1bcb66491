"""from_bytes never crashes: random and mutated inputs give a sketch or ValueError."""
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastops import sketches as S


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
