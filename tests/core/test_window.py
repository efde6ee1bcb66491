"""WindowAggregator against the independent model in ``window_reference``."""
from __future__ import annotations

import dataclasses
import math
import random

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastops.core import aggregates as agg
from fastops.core.window.aggregator import State, WindowAggregator
from fastops.core.window.assigners import GlobalWindow, Session, Sliding, Tumbling
from support import window_reference as ref

KEY_TYPES = {
    "int": (pa.int64(), st.integers(-3, 3)),
    "i32": (pa.int32(), st.integers(-2, 2)),
    "float": (pa.float64(), st.sampled_from([0.0, -0.0, 1.5, -2.0, float("nan")])),
    "bool": (pa.bool_(), st.booleans()),
    "str": (pa.string(), st.sampled_from(["", "a", "b", "ab", "\u00e9"])),
    "ts": (pa.timestamp("us"), st.integers(0, 3).map(lambda v: v * 1_000_000)),
}

AGGS = {
    "n": ("count_rows", None, 1),
    "nv": ("count", "v", 1),
    "s": ("sum", "v", 1),
    "si": ("sum", "i", 1),
    "mn": ("min", "v", 1),
    "mx": ("max", "i", 1),
    "mean": ("mean", "v", 1),
    "var": ("var", "v", 1),
    "varp": ("var", "i", 0),
    "sd": ("stddev", "v", 1),
    "f": ("first", "v", 1),
    "l": ("last", "i", 1),
    "smn": ("min", "w", 1),  # strings: byte (= code point) order
    "smx": ("max", "w", 1),
    "sf": ("first", "w", 1),  # strings: StringFirstLast (event time, then arrival)
    "sl": ("last", "w", 1),
}


def make_aggs(specs: dict = AGGS) -> dict:
    out = {}
    for name, (kind, col, ddof) in specs.items():
        if kind == "count_rows":
            out[name] = agg.count()
        elif kind in ("var", "stddev"):
            out[name] = getattr(agg, kind)(col, ddof=ddof)
        else:
            out[name] = getattr(agg, kind)(col)
    return out


def to_window_tuple(w) -> tuple:
    if isinstance(w, Tumbling):
        return ("tumbling", w.size, w.offset)
    if isinstance(w, Sliding):
        return ("sliding", w.size, w.slide, w.offset)
    return ("session", w.gap)


windows = st.one_of(
    st.builds(Tumbling, st.integers(1, 50), st.integers(-20, 20)),
    st.tuples(st.integers(1, 10), st.integers(1, 6), st.integers(0, 30)).map(
        lambda a: Sliding(a[0] * a[1], a[1] * (1 + a[0] // 3) if a[1] * (1 + a[0] // 3) <= a[0] * a[1] else a[1],
                          a[2])),
    st.builds(Session, st.integers(1, 40)),
)


@st.composite
def streams(draw):
    """Rows with disorder within a bound, split into batches, with a watermark
    schedule that never makes a row late."""
    key_names = draw(st.lists(st.sampled_from(sorted(KEY_TYPES)), min_size=0, max_size=2, unique=True))
    n = draw(st.integers(0, 120))
    bound = draw(st.integers(0, 40))
    base = sorted(draw(st.lists(st.integers(-300, 300), min_size=n, max_size=n)))
    jitter = draw(st.lists(st.integers(0, bound), min_size=n, max_size=n))
    rows = []
    for i in range(n):
        r = {"ts": base[i] - jitter[i]}
        for k in key_names:
            r["k_" + k] = draw(st.none() | KEY_TYPES[k][1]) if draw(st.booleans()) else draw(KEY_TYPES[k][1])
        r["v"] = draw(st.none() | st.floats(-1e6, 1e6, allow_nan=False))
        r["i"] = draw(st.none() | st.integers(-(2**40), 2**40))
        r["w"] = draw(st.none() | st.sampled_from(["", "a", "ab", "b", "\u00e9", "\U0001f600", "z" * 13]))
        rows.append(r)
    cuts = sorted(draw(st.lists(st.integers(0, n), max_size=6)))
    batches = [rows[a:b] for a, b in zip([0] + cuts, cuts + [n])]
    advance = draw(st.lists(st.booleans(), min_size=len(batches), max_size=len(batches)))
    return key_names, rows, batches, advance, bound


def schema_for(key_names) -> pa.Schema:
    fields = [pa.field("ts", pa.int64())]
    fields += [pa.field("k_" + k, KEY_TYPES[k][0]) for k in key_names]
    fields += [pa.field("v", pa.float64()), pa.field("i", pa.int64()), pa.field("w", pa.string())]
    return pa.schema(fields)


def to_batch(rows, schema) -> pa.RecordBatch:
    cols = {f.name: [r[f.name] for r in rows] for f in schema}
    return pa.RecordBatch.from_pydict(cols, schema=schema)


def key_value(v):
    if isinstance(v, pa.TimestampScalar):
        return v.value
    return v


def output_dict(out: pa.Table, by, agg_names) -> dict:
    res = {}
    starts = out.column("window_start").cast(pa.int64()).to_pylist()
    ends = out.column("window_end").cast(pa.int64()).to_pylist()
    keys = [out.column(b).cast(pa.int64()).to_pylist() if pa.types.is_timestamp(out.schema.field(b).type)
            else out.column(b).to_pylist() for b in by]
    vals = {n: out.column(n).to_pylist() for n in agg_names}
    for i in range(out.num_rows):
        k = (starts[i], ends[i]) + tuple(ref.canon(kc[i]) for kc in keys)
        assert k not in res, f"window {k} emitted twice without late data"
        res[k] = {n: vals[n][i] for n in agg_names}
    return res


def ref_rows(rows, key_names):
    out = []
    for r in rows:
        r2 = dict(r)
        for k in key_names:
            if k == "ts" and r2["k_ts"] is not None:
                r2["k_ts"] = r2["k_ts"]  # microseconds, as stored
        out.append(r2)
    return out


def run(window, key_names, batches, advance, bound, lateness=0, cut=None, specs=AGGS, at_cut=None):
    schema = schema_for(key_names)
    by = ["k_" + k for k in key_names]

    def fresh():
        return WindowAggregator(window, by, make_aggs(specs), time="ts", allowed_lateness=lateness)

    wa = fresh()
    outs = []
    max_ts = None
    for bi, b in enumerate(batches):
        if cut is not None and bi == cut:
            state = wa.snapshot() if at_cut is None else at_cut(wa.snapshot())
            wa = fresh()
            wa.restore(State.from_bytes(state.to_bytes()))
        wa.process(to_batch(b, schema))
        if b:
            m = max(r["ts"] for r in b)
            max_ts = m if max_ts is None else max(max_ts, m)
        if advance[bi] and max_ts is not None:
            outs.append(wa.advance_watermark(max_ts - bound - 1))
    outs.append(wa.flush())
    return wa, pa.Table.from_batches([o for o in outs if o.num_rows] or [outs[-1]])


def check_against_reference(window, key_names, rows, out, specs=AGGS):
    by = ["k_" + k for k in key_names]
    expected = ref.window_aggregate(rows, to_window_tuple(window), by, specs)
    got = output_dict(out, by, list(specs))
    assert set(got) == set(expected)
    for k, exp in expected.items():
        for name, v in exp.items():
            assert ref.close(got[k][name], v), (k, name, got[k][name], v)
    ends = out.column("window_end").cast(pa.int64()).to_pylist()
    assert ends == sorted(ends), "rows must come in window-end order"


@pytest.mark.slow
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(windows, streams())
def test_matches_reference(window, stream):
    key_names, rows, batches, advance, bound = stream
    wa, out = run(window, key_names, batches, advance, bound)
    assert wa.take_late() is None
    check_against_reference(window, key_names, rows, out)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(windows, streams(), st.data())
def test_snapshot_restore_same_output(window, stream, data):
    key_names, _rows, batches, advance, bound = stream
    cut = data.draw(st.integers(0, len(batches)))
    _, plain = run(window, key_names, batches, advance, bound)
    _, restored = run(window, key_names, batches, advance, bound, cut=cut)
    assert plain.schema == restored.schema
    assert plain.to_pandas().equals(restored.to_pandas())


def _single_slot_layout(state):
    """``state`` as an older version laid out pane slots: one at a time from a
    free stack holding every slot below the high-water mark not in a pane's
    list, no size classes in the flags, four counters, no layout recorded."""
    arr = dict(state.arrays)
    if "hv" not in arr:
        return state
    hg, hv, s_next, c = arr["hg"], arr["hv"], arr["s_next"], arr["counters"]
    live = []
    for head in hv[(hg == -1) & (hv >= 0)]:
        s = int(head)
        while s >= 0:
            live.append(s)
            s = int(s_next[s])
    free = np.setdiff1d(np.arange(int(c[0])), live)
    arr.update(counters=np.array([c[0], len(free), c[2], c[3]], dtype=np.int64),
               free=np.concatenate([free, np.zeros(max(64, int(c[0])) - len(free), dtype=np.int64)]),
               s_flags=arr["s_flags"] & 3)
    meta = {k: v for k, v in state.meta.items() if k != "pane_layout"}
    return dataclasses.replace(state, arrays=arr, meta=meta)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(windows.filter(lambda w: not isinstance(w, Session)), streams(), st.data())
def test_restore_of_an_older_pane_layout(window, stream, data):
    """A snapshot whose pane slots were taken one at a time (as older versions
    did) restores into the chunked layout and gives the same output."""
    key_names, _rows, batches, advance, bound = stream
    cut = data.draw(st.integers(0, len(batches)))
    _, plain = run(window, key_names, batches, advance, bound, lateness=5)
    _, restored = run(window, key_names, batches, advance, bound, lateness=5, cut=cut,
                      at_cut=_single_slot_layout)
    assert plain.to_pandas().equals(restored.to_pandas())


def test_restore_refuses_another_pane_layout():
    """A pane snapshot records how its slots are laid out; a state of
    another layout is refused by name, and the aggregator is left as it was."""
    wa = WindowAggregator(Sliding(20, 5), ["k"], {"n": agg.count()})
    wa.process(pa.record_batch({"ts": [1, 7], "k": [1, 2]}))
    state = wa.snapshot()
    old = dataclasses.replace(state, meta={**state.meta, "pane_layout": "chunks-8"})
    other = WindowAggregator(Sliding(20, 5), ["k"], {"n": agg.count()})
    other.process(pa.record_batch({"ts": [3], "k": [3]}))
    with pytest.raises(ValueError, match="pane slots"):
        other.restore(old)
    assert other.flush().column("k").to_pylist() == [3, 3, 3, 3]
    other.restore(State.from_bytes(state.to_bytes()))
    assert sorted(other.flush().column("k").to_pylist()) == [1, 1, 1, 1, 2, 2, 2, 2]


@pytest.mark.parametrize("window", [Tumbling(10), Sliding(20, 5)])
def test_more_builtins_than_one_kernel_pass(window):
    """20 built-in aggregates (a kernel pass takes 16) match the reference."""
    kinds = [("count_rows", None, 1), ("count", "v", 1), ("sum", "v", 1), ("sum", "i", 1),
             ("min", "v", 1), ("max", "i", 1), ("mean", "v", 1)]
    specs = {f"a{j}": kinds[j % len(kinds)] for j in range(20)}
    rng = random.Random(5)
    rows = [{"ts": t, "k_int": rng.randint(-2, 2), "v": rng.choice([None, rng.uniform(-1e3, 1e3)]),
             "i": rng.choice([None, rng.randint(-10**6, 10**6)]), "w": rng.choice([None, "x", "y"])}
            for t in sorted(rng.randint(-50, 250) for _ in range(300))]
    batches = [rows[a : a + 64] for a in range(0, len(rows), 64)]
    wa, out = run(window, ["int"], batches, [True] * len(batches), 0, specs=specs)
    assert wa.take_late() is None and out.num_rows > 0
    check_against_reference(window, ["int"], rows, out, specs)


NUMERIC_AGGS = {name: spec for name, spec in AGGS.items() if spec[1] != "w"}  # built-ins only: pane stacks
sliding = st.tuples(st.integers(2, 8), st.integers(1, 6), st.integers(0, 30)).map(
    lambda a: Sliding(a[0] * a[1], a[1], a[2]))


@pytest.mark.slow
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sliding, streams(), st.data())
def test_sliding_stacks_match_reference(window, stream, data):
    """Sliding windows of built-ins (read off the pane stacks) match the
    reference. Rows outside ``[lo, hi)`` have no nulls, so the stacks start
    with one count for all aggregates; a null (in a pane already read or not)
    makes them rebuild with a count each, mid-stream, and later blocks try
    one count again."""
    key_names, rows, batches, advance, bound = stream
    lo = data.draw(st.integers(0, len(rows)))
    hi = data.draw(st.integers(lo, len(rows)))
    for r in rows[:lo] + rows[hi:]:
        r["v"] = 0.25 if r["v"] is None else r["v"]
        r["i"] = 7 if r["i"] is None else r["i"]
    wa, out = run(window, key_names, batches, advance, bound, specs=NUMERIC_AGGS)
    assert wa.take_late() is None
    check_against_reference(window, key_names, rows, out, NUMERIC_AGGS)


def test_sliding_stacks_switch_to_a_count_each_on_nan_and_null():
    """count / sum / max of a float column: no nulls at first (one count in
    the stacks, half a cache line per record), then a NaN (counted by the sum,
    skipped by max) and a null in panes of windows still open (a count each),
    then blocks of panes without either (one count again): results as NumPy
    computes them window by window."""
    nan = float("nan")
    ts = list(range(0, 16000, 250))
    vals = [float(t % 7) for t in ts]
    vals[30], vals[33] = nan, None  # at 7.5 s and 8.25 s
    keys = [t // 250 % 3 for t in ts]
    wa = WindowAggregator(Sliding("2s", "500ms"), "k", {"n": agg.count(), "s": agg.sum("x"), "m": agg.max("x")})
    outs, widths = [], []
    for lo in range(0, len(ts), 8):
        b = pa.record_batch({"ts": ts[lo:lo + 8], "k": keys[lo:lo + 8], "x": pa.array(vals[lo:lo + 8], pa.float64())})
        wa.process(b)
        outs.append(wa.advance_watermark(ts[min(lo + 7, len(ts) - 1)] - 1000))
        widths.append(wa._strategy._stacks.width)  # 4: count, sum and its error term, max; 8: a count each
    outs.append(wa.flush())
    assert widths[2] == 4 and 8 in widths and widths[-1] == 4
    got = {(r["window_start"], r["k"]): r for o in outs for r in o.to_pylist()}
    want = {}
    for start in range(-1500, 16000, 500):
        for k in range(3):
            xs = [v for t, kk, v in zip(ts, keys, vals) if kk == k and start <= t < start + 2000]
            if not xs:
                continue
            present = np.array([v for v in xs if v is not None], dtype=float)
            finite = present[~np.isnan(present)]
            want[(start, k)] = (len(xs), float(np.sum(present)) if len(present) else None,
                                float(finite.max()) if len(finite) else None)
    assert len(got) == len(want)
    for (start, k), (n, total, top) in want.items():
        r = got[(pa.scalar(start, pa.timestamp("ms")).as_py(), k)]
        assert r["n"] == n and r["m"] == top, (start, k, r, n, top)
        assert (total is None and r["s"] is None) or (np.isnan(total) and np.isnan(r["s"])) or r["s"] == total


def test_output_schema_and_types():
    b = pa.record_batch({"ts": pa.array([1, 2, 1500], pa.timestamp("ms")),
                         "k": pa.array([1, 1, 2], pa.int32()), "x": pa.array([1, 5, 3], pa.int16()),
                         "f": pa.array([1.5, 2.5, None], pa.float32()),
                         "d": pa.array([1, 2, 3], pa.date32())})
    wa = WindowAggregator(Tumbling("1s"), "k", {"c": agg.count(), "s": agg.sum("x"), "m": agg.max("x"),
                                                "mf": agg.min("f"), "fd": agg.first("d"),
                                                "sf": agg.sum("f"), "mean": agg.mean("x")})
    wa.process(b)
    out = wa.flush()
    assert out.schema.names == ["window_start", "window_end", "k", "c", "s", "m", "mf", "fd", "sf", "mean"]
    assert out.schema.types == [pa.timestamp("ms"), pa.timestamp("ms"), pa.int32(), pa.int64(), pa.int64(),
                                pa.int16(), pa.float32(), pa.date32(), pa.float64(), pa.float64()]
    assert out.to_pydict()["m"] == [5, 3]
    assert out.to_pydict()["mf"] == [1.5, None]
    assert out.to_pydict()["sf"] == [4.0, None]


def test_int_sum_overflow_raises():  # (it wrapped once; more in test_sum_overflow.py)
    b = pa.record_batch({"ts": [0, 1], "x": pa.array([2**63 - 1, 1], pa.int64())})
    wa = WindowAggregator(Tumbling(10), [], {"s": agg.sum("x")})
    wa.process(b)
    with pytest.raises(agg.SumOverflowError, match=r"sum\('x'\) \(output column 's'\) overflowed int64"):
        wa.flush()


def test_nan_ignored_by_min_max_and_all_null_group():
    b = pa.record_batch({"ts": [0, 1, 2, 20], "k": [1, 1, 1, 2], "x": [float("nan"), 2.0, 1.0, None]})
    wa = WindowAggregator(Tumbling(10), ["k"], {"mn": agg.min("x"), "mx": agg.max("x"), "s": agg.sum("x"),
                                                "c": agg.count("x"), "m": agg.mean("x")})
    wa.process(b)
    d = wa.flush().to_pydict()
    assert d["mn"] == [1.0, None] and d["mx"] == [2.0, None]
    assert math.isnan(d["s"][0]) and d["s"][1] is None
    assert d["c"] == [3, 0] and d["m"][1] is None  # NaN is a value, not a null


@pytest.mark.parametrize("window", [Tumbling(10), Sliding(20, 10)])
def test_float_sum_with_infinities_as_numpy(window):
    """A sum reaching +-inf stays there (or NaN for inf - inf); in a sliding
    window the pane merges must agree too."""
    inf = math.inf
    groups = {1: [inf, 1.0], 2: [1.0, -inf, 2.0], 3: [inf, -inf], 4: [1e308, 1e308], 5: [2.5, -1.0]}
    rows = [(k, v) for k, vs in groups.items() for v in vs]
    b = pa.record_batch({"ts": [i % 7 for i in range(len(rows))], "k": [k for k, _ in rows],
                         "x": [v for _, v in rows]})
    wa = WindowAggregator(window, ["k"], {"s": agg.sum("x")})
    for i in range(len(rows)):  # one row per batch: every value after the first goes through the update
        wa.process(b.slice(i, 1))
    d = wa.flush().to_pydict()
    got = {}
    for k, s in zip(d["k"], d["s"]):
        got.setdefault(k, s)
    for k, vs in groups.items():
        with np.errstate(over="ignore", invalid="ignore"):
            want = float(np.sum(np.array(vs)))
        assert (math.isnan(want) and math.isnan(got[k])) or got[k] == want, (k, got[k], want)


def test_global_window_running_aggregate():
    wa = WindowAggregator(GlobalWindow(), ["k"], {"n": agg.count(), "l": agg.last("v")}, time=None)
    up1 = wa.process_and_emit(pa.record_batch({"k": ["a", "b", "a"], "v": [1, 2, 3]}))
    assert sorted(zip(*up1.to_pydict().values())) == [("a", 2, 3), ("b", 1, 2)]
    up2 = wa.process_and_emit(pa.record_batch({"k": ["b"], "v": [7]}))
    assert up2.to_pydict() == {"k": ["b"], "n": [2], "l": [7]}
    assert wa.advance_watermark(10**9).num_rows == 0
    assert sorted(wa.flush().to_pydict()["n"]) == [2, 2]


def test_state_bytes_roundtrip_is_pure_arrow():
    wa = WindowAggregator(Sliding("4s", "2s"), ["k"], {"n": agg.count(), "s": agg.sum("v")})
    wa.process(pa.record_batch({"ts": [0, 1000, 2500], "k": ["a", "b", "a"], "v": [1.0, 2.0, 3.0]}))
    data = wa.snapshot().to_bytes()
    assert b"pickle" not in data
    st2 = State.from_bytes(data)
    assert st2.to_bytes() == data
    assert len(st2.group_hashes) == 2
    with pytest.raises(ValueError, match="differently configured"):
        WindowAggregator(Sliding("4s", "1s"), ["k"], {"n": agg.count(), "s": agg.sum("v")}).restore(st2)
