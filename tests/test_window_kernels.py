"""Aggregate state kernels against the pure-Python reference.

``update_builtins`` (every built-in in one pass, records shared or not) and
``combine`` (a window's result from its panes' slots) are checked slot by
slot against ``window_reference.aggregate``.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import window_reference as ref  # noqa: E402
from fastops import _window, agg  # noqa: E402
from fastops.agg import Columns, builtin_layout, update_builtins  # noqa: E402

# (reference kind, column, ddof)
AGGS = [("count_rows", None, 1), ("count", "f", 1), ("sum", "f", 1), ("sum", "i", 1), ("min", "f", 1),
        ("max", "f", 1), ("min", "i", 1), ("max", "i", 1), ("mean", "f", 1), ("var", "i", 0),
        ("stddev", "f", 1), ("first", "f", 1), ("last", "i", 1)]
TYPES = {"f": pa.float64(), "i": pa.int64()}


def make(kind, col, ddof):
    if kind == "count_rows":
        a = agg.count()
    elif kind in ("var", "stddev"):
        a = getattr(agg, kind)(col, ddof=ddof)
    else:
        a = getattr(agg, kind)(col)
    a.bind(None if col is None else TYPES[col])
    return a


@st.composite
def inputs(draw):
    nslots = draw(st.integers(1, 10))
    n = draw(st.integers(0, 120))
    slots = draw(st.lists(st.integers(-1, nslots - 1), min_size=n, max_size=n))
    f = draw(st.lists(st.none() | st.floats(-1e6, 1e6) | st.just(float("nan")), min_size=n, max_size=n))
    i = draw(st.lists(st.none() | st.integers(-(2**62), 2**62), min_size=n, max_size=n))
    ts = draw(st.permutations(list(range(n))))  # distinct: first / last have no ties across slots
    shared = draw(st.booleans())
    # a window's rows: each output row merges some slots, in the order given
    nrows = draw(st.integers(1, 6))
    members = [draw(st.lists(st.integers(0, nslots - 1), unique=True, min_size=1, max_size=4))
               for _ in range(nrows)]
    return nslots, slots, f, i, ts, shared, members


@settings(max_examples=150, deadline=None)
@given(inputs())
def test_update_result_and_combine_match_reference(case):
    nslots, slots, f, i, ts, shared, members = case
    aggs = [make(*a) for a in AGGS]
    states = [a.new_state() for a in aggs]
    cols = {"f": pa.array(f, pa.float64()), "i": pa.array(i, pa.int64())}
    slot_arr = np.array(slots, dtype=np.int64)
    inputs = [None if c is None else cols[c] for _, c, _ in AGGS]
    times = np.array(ts, dtype=np.int64)
    if shared:  # one pass for all, as the window operator runs them
        store = Columns.share(states)
        update_builtins(aggs, store, *builtin_layout(aggs, states), slot_arr, inputs, times, nslots)
    else:
        for a, state, col in zip(aggs, states, inputs):
            update_builtins([a], state.store, *builtin_layout([a], [state]), slot_arr, [col], times, nslots)
    n = len(slots)

    def expected(kind, col, ddof, chosen):
        rows = [r for s in chosen for r in range(n) if slots[r] == s]
        values = [None] * len(rows) if col is None else [(f if col == "f" else i)[r] for r in rows]
        if kind == "count_rows":
            return len(rows)
        return ref.aggregate(kind, values, [ts[r] for r in rows], rows, ddof)

    every = np.arange(nslots, dtype=np.int64)
    for (kind, col, ddof), a, s in zip(AGGS, aggs, states):
        got = a.result(s, every).to_pylist()
        for slot in range(nslots):
            exp = expected(kind, col, ddof, [slot])
            assert ref.close(got[slot], exp), (kind, col, slot, got[slot], exp)

    rows = np.array([r for r, m in enumerate(members) for _ in m], dtype=np.int64)
    src = np.array([s for m in members for s in m], dtype=np.int64)
    for (kind, col, ddof), a, s in zip(AGGS, aggs, states):
        _, combined = a.combine(s, rows, src, len(members), nslots)
        for r, m in enumerate(members):
            exp = expected(kind, col, ddof, m)
            got = combined[r].as_py()
            assert ref.close(got, exp), (kind, col, m, got, exp)


def test_share_keeps_contents_and_aligns_rows():
    a, b = make("sum", "f", 1), make("max", "i", 1)
    sa, sb = a.new_state(), b.new_state()
    a.update(sa, np.array([0, 1, 1]), pa.array([1.5, 2.0, 3.0]))
    b.update(sb, np.array([2, 0]), pa.array([7, -3]))
    before = (a.result(sa, np.arange(3)).to_pylist(), b.result(sb, np.arange(3)).to_pylist())
    Columns.share([sa, sb])
    assert sa.rec is sb.rec and sa.rec.shape[1] == 8 and sa.rec.ctypes.data % 64 == 0
    assert (a.result(sa, np.arange(3)).to_pylist(), b.result(sb, np.arange(3)).to_pylist()) == before
    assert before == ([1.5, 5.0, None], [-3, None, 7])
    sa.ensure(1000)  # growing one grows the shared array for both
    assert sb.size >= 1000 and b.result(sb, np.arange(3)).to_pylist() == [-3, None, 7]


def test_kernels_reject_bad_arguments():
    rec = np.zeros((4, 2), dtype=np.int64)
    one = np.zeros(1, dtype=np.int64)
    with pytest.raises(ValueError, match="unknown"):
        _window.merge_records(42, one, one, rec, 0, rec, 0)
    with pytest.raises(ValueError, match="destinations"):
        _window.merge_records(0, one, np.zeros(2, dtype=np.int64), rec, 0, rec, 0)
    with pytest.raises(ValueError, match="offset"):
        _window.merge_records(0, one, one, rec, 2, rec, 0)
    with pytest.raises(ValueError, match="values for"):
        _window.agg_update(np.zeros(3, dtype=np.int64), np.zeros(3, dtype=np.int64),
                           np.array([1], dtype=np.int64), rec, np.zeros(1, dtype=np.int64),
                           [np.zeros(2, dtype=np.int64)], [np.zeros(0, dtype=np.uint8)],
                           np.zeros(1, dtype=np.int64))
    with pytest.raises(ValueError, match="event times"):
        _window.agg_update(np.zeros(3, dtype=np.int64), np.zeros(2, dtype=np.int64),
                           np.array([0], dtype=np.int64), rec, np.zeros(1, dtype=np.int64),
                           [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.uint8)],
                           np.zeros(1, dtype=np.int64))
    with pytest.raises(ValueError, match="bitmap"):
        _window.agg_update(np.zeros(9, dtype=np.int64), np.zeros(9, dtype=np.int64),
                           np.array([0], dtype=np.int64), rec, np.zeros(1, dtype=np.int64),
                           [np.zeros(0, dtype=np.int64)], [np.zeros(1, dtype=np.uint8)],
                           np.zeros(1, dtype=np.int64))
