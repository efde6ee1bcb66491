"""Sketch window aggregates: per-slot results against exact answers and the
standalone sketches; merge, reset, snapshots, registration."""
import struct

import numpy as np
import pyarrow as pa
import pytest

from fastops.core import aggregates as agg
from fastops.core import sketches as S
from fastops.core.window.aggregator import WindowAggregator
from fastops.core.window.assigners import Sliding


def _data(seed=0, n=60_000, nslots=40):
    rng = np.random.default_rng(seed)
    slots = rng.integers(0, nslots, n).astype(np.int64)
    vals = (rng.zipf(1.3, n) % 3000).astype(np.int64)
    return slots, vals


def test_registered():
    names = agg.registered()
    for n in ("approx_distinct", "approx_quantile", "top_k"):
        assert n in names and callable(getattr(agg, n))
    with pytest.raises(ValueError, match="already registered"):
        agg.register("top_k", agg.top_k)


def test_approx_distinct_matches_standalone_hll():
    slots, vals = _data()
    a = agg.approx_distinct("x", precision=10)
    st = a.new_state()
    for part in np.array_split(np.arange(len(vals)), 3):
        st = a.update(st, slots[part], pa.array(vals[part]))
    got = a.result(st, np.arange(40)).to_numpy()
    for s in range(40):
        h = S.HyperLogLog(10)
        h.update(vals[slots == s])
        assert got[s] == round(h.estimate())
        exact = len(np.unique(vals[slots == s]))
        assert abs(got[s] - exact) <= 4 * 1.04 / 32 * exact + 1
    # merge = union; the source slot is unchanged; reset empties
    st = a.merge(st, np.array([50, 50]), np.array([3, 4]))
    union = len(np.unique(vals[(slots == 3) | (slots == 4)]))
    assert abs(a.result(st, np.array([50]))[0].as_py() - union) <= 0.15 * union
    assert a.result(st, np.array([3]))[0].as_py() == got[3]
    st = a.reset(st, np.array([3]))
    assert a.result(st, np.array([3, 99]))[0].as_py() == 0
    back = a.from_bytes(a.to_bytes(st))
    assert a.result(back, np.arange(51)).equals(a.result(st, np.arange(51)))
    with pytest.raises(ValueError):
        a.from_bytes(a.to_bytes(st)[:-1])


def test_approx_quantile_within_rank_error():
    rng = np.random.default_rng(1)
    slots = rng.integers(0, 20, 200_000).astype(np.int64)
    vals = rng.normal(slots, 1.0)
    q = agg.approx_quantile("x", 0.9, k=200)
    st = q.new_state()
    st = q.update(st, slots, pa.array(vals))
    got = q.result(st, np.arange(21)).to_pylist()
    assert got[20] is None
    eps = S.KLL(200).normalized_rank_error()
    for s in range(20):
        v = np.sort(vals[slots == s])
        r = np.searchsorted(v, got[s], side="right") / len(v)
        assert abs(r - 0.9) <= eps
    st = q.merge(st, np.array([0]), np.array([1]))
    both = np.sort(np.concatenate([vals[slots == 0], vals[slots == 1]]))
    r = np.searchsorted(both, q.result(st, np.array([0]))[0].as_py(), side="right") / len(both)
    assert abs(r - 0.9) <= eps
    back = q.from_bytes(q.to_bytes(st))
    assert q.result(back, np.arange(20)).equals(q.result(st, np.arange(20)))
    st = q.reset(st, np.array([0]))
    assert q.result(st, np.array([0]))[0].as_py() is None
    with pytest.raises(TypeError, match="numeric"):
        q.validate(pa.string())
    with pytest.raises(ValueError, match="q must"):
        agg.approx_quantile("x", 1.5)


def test_top_k_heavy_hitters_and_bounds():
    slots, vals = _data(2)
    words = pa.array([f"w{v}" for v in vals])
    t = agg.top_k("w", 5, capacity=64)
    st = t.new_state()
    for part in np.array_split(np.arange(len(vals)), 4):
        st = t.update(st, slots[part], words.take(pa.array(part)))
    res = t.result(st, np.arange(40)).to_pylist()
    for s in range(40):
        sub = vals[slots == s]
        keys, f = np.unique(sub, return_counts=True)
        exact = {f"w{k}": c for k, c in zip(keys, f)}
        n = len(sub)
        got = res[s]
        assert len(got) == 5
        counts = [e["count"] for e in got]
        assert counts == sorted(counts, reverse=True)
        for e in got:
            assert exact.get(e["value"], 0) <= e["count"] <= exact.get(e["value"], 0) + n / 64
        for k, c in exact.items():
            if c > n / 64 + n / 64 and c >= counts[-1] + n / 64:
                assert k in {e["value"] for e in got}


def test_top_k_merge_matches_combined_stream():
    slots, vals = _data(3, n=20_000, nslots=4)
    t = agg.top_k("x", 3)
    st = t.update(t.new_state(), slots, pa.array(vals))
    st = t.merge(st, np.array([10, 10]), np.array([0, 1]))
    ref = t.update(t.new_state(), np.zeros(int(np.sum(slots <= 1)), np.int64),
                   pa.array(vals[slots <= 1]))
    got = t.result(st, np.array([10]))[0].as_py()
    want = t.result(ref, np.array([0]))[0].as_py()
    assert [e["value"] for e in got] == [e["value"] for e in want]
    # sources untouched, reset, snapshot
    assert t.result(st, np.array([0])).equals(
        t.result(t.update(t.new_state(), slots, pa.array(vals)), np.array([0])))
    back = t.from_bytes(t.to_bytes(st))
    assert t.result(back, np.arange(11)).equals(t.result(st, np.arange(11)))
    st = t.reset(st, np.array([10]))
    assert t.result(st, np.array([10]))[0].as_py() == []
    assert t.output_type(pa.int64()) == pa.list_(pa.struct([("value", pa.int64()),
                                                            ("count", pa.int64())]))
    with pytest.raises(TypeError, match="changed type"):
        t.update(st, np.array([0]), pa.array(["a"]))


@pytest.mark.skipif(not hasattr(pa, "string_view"), reason="view types need pyarrow >= 16")
@pytest.mark.parametrize("make", [lambda: agg.approx_distinct("s"), lambda: agg.top_k("s", 3),
                                  lambda: agg.max("s")])  # a string max runs as a plug-in
def test_plugins_over_view_columns_match_the_plain_column(make):
    """A string_view input (with nulls, inline and out-of-line values) gives the
    plug-in the same values as the plain string column would."""
    rng = np.random.default_rng(5)
    words = ["a", "bb", "a" * 20, None, "ccc" * 7]
    s = [words[i] for i in rng.integers(0, len(words), 300)]
    base = {"k": rng.integers(0, 3, 300), "ts": np.sort(rng.integers(0, 5000, 300)),
            "x": rng.standard_normal(300)}
    outs = []
    for t in (pa.string(), pa.string_view()):
        wa = WindowAggregator(Sliding("2s", "1s"), ["k"], {"r": make()}, time="ts")
        wa.process(pa.record_batch({**base, "s": pa.array(s, t)}))
        outs.append(wa.flush().column("r").to_pylist())
    assert outs[0] == outs[1] and len(outs[0]) > 0


def test_top_k_state_with_a_damaged_slot_count_is_refused():
    slots, vals = _data(3, n=2_000, nslots=4)
    t = agg.top_k("x", 3)
    data = bytearray(t.to_bytes(t.update(t.new_state(), slots, pa.array(vals))))
    kind, cap, nslots, n = struct.unpack_from("<BIQQ", data, 4)
    assert nslots == 4
    struct.pack_into("<BIQQ", data, 4, kind, cap, 2**40, n)  # would allocate TiBs on result()
    with pytest.raises(ValueError, match="window slots"):
        t.from_bytes(bytes(data))
