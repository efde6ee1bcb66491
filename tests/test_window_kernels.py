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


@st.composite
def runs(draw):
    """Rows in 2 * groups slots: group g's record is slot 2g in run a (if
    there) and slot 2g + 1 in run b (if there)."""
    groups = draw(st.integers(1, 12))
    in_a = draw(st.lists(st.booleans(), min_size=groups, max_size=groups))
    in_b = draw(st.lists(st.booleans(), min_size=groups, max_size=groups))
    n = draw(st.integers(0, 80))
    slots = draw(st.lists(st.integers(0, 2 * groups - 1), min_size=n, max_size=n))
    f = draw(st.lists(st.none() | st.floats(-1e6, 1e6), min_size=n, max_size=n))
    i = draw(st.lists(st.none() | st.integers(-(2**62), 2**62), min_size=n, max_size=n))
    ts = draw(st.permutations(list(range(n))))
    return groups, in_a, in_b, slots, f, i, ts


@settings(max_examples=100, deadline=None)
@given(runs(), st.booleans())
def test_merge_runs_matches_reference(case, as_columns):
    """Two runs (groups ascending, their records) merge into the union of
    their groups, a group in both getting the aggregate of both slots' rows;
    written as rows or as one column per record word."""
    groups, in_a, in_b, slots, f, i, ts = case
    aggs = [make(*a) for a in AGGS]
    states = [a.new_state() for a in aggs]
    store = Columns.share(states)
    ops, offs = builtin_layout(aggs, states)
    cols = {"f": pa.array(f, pa.float64()), "i": pa.array(i, pa.int64())}
    update_builtins(aggs, store, ops, offs, np.array(slots, dtype=np.int64),
                    [None if c is None else cols[c] for _, c, _ in AGGS], np.array(ts, dtype=np.int64),
                    2 * groups)
    words = sum(len(s.names) for s in states)
    ga = np.flatnonzero(in_a).astype(np.int64)
    gb = np.flatnonzero(in_b).astype(np.int64)
    ra = np.ascontiguousarray(store.rec[2 * ga, :words])
    rb = np.ascontiguousarray(store.rec[2 * gb + 1, :words])
    need = len(ga) + len(gb)
    out_groups = np.full(need, -1, dtype=np.int64)
    if as_columns:
        out = np.zeros((words, need), dtype=np.int64)
        m = _window.merge_runs_columns(ga, ra, gb, rb, ops, offs, out_groups, out)
        merged = out[:, :m].T
    else:
        out = np.zeros((need, words), dtype=np.int64)
        m = _window.merge_runs(ga, ra, gb, rb, ops, offs, out_groups, out)
        merged = out[:m]
    union = sorted(set(ga.tolist()) | set(gb.tolist()))
    assert out_groups[:m].tolist() == union
    for (kind, col, ddof), a, s in zip(AGGS, aggs, states):
        got = a.result(Columns.wrap(s.spec, merged, s.off), None).to_pylist()
        for r, g in enumerate(union):
            chosen = [2 * g] * bool(in_a[g]) + [2 * g + 1] * bool(in_b[g])
            rows = [r2 for r2, s2 in enumerate(slots) if s2 in chosen]
            if kind == "count_rows":
                exp = len(rows)
            else:
                values = [(f if col == "f" else i)[r2] for r2 in rows]
                exp = ref.aggregate(kind, values, [ts[r2] for r2 in rows], rows, ddof)
            assert ref.close(got[r], exp), (kind, col, g, got[r], exp)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 2**20), unique=True, max_size=3000), st.integers(1, 8), st.booleans())
def test_sorted_records_sorts_a_pane_by_group(groups, words, bitmap):
    """A pane's (group, slot) pairs come out sorted by group (from a bitmap of
    the groups, or a radix sort over several digits), each with its slot's
    record, as an argsort says."""
    rng = np.random.default_rng(len(groups))
    g = np.array(groups, dtype=np.int64)
    slots = rng.permutation(len(g) + 5)[: len(g)].astype(np.int64)
    rec = rng.integers(-(2**40), 2**40, size=(len(g) + 5, 8)).astype(np.int64)
    out_groups = np.empty(len(g), dtype=np.int64)
    out_rec = np.empty((len(g), words), dtype=np.int64)
    max_group = int(g.max()) + 1 if len(g) and bitmap else 2**20 + 1
    scratch = np.full(max_group if bitmap else 0, -7, dtype=np.int32)
    n = _window.sorted_records(g, slots, rec, max_group, out_groups, out_rec, scratch)
    order = np.argsort(g, kind="stable")
    assert n == len(g)
    np.testing.assert_array_equal(out_groups, g[order])
    np.testing.assert_array_equal(out_rec, rec[slots[order], :words])


def test_run_kernels_reject_bad_arguments():
    g = np.array([1, 2], dtype=np.int64)
    r = np.zeros((2, 3), dtype=np.int64)
    code, word = np.array([0], dtype=np.int64), np.array([0], dtype=np.int64)
    with pytest.raises(ValueError, match="rows needed"):
        _window.merge_runs(g, r, g, r, code, word, np.empty(3, dtype=np.int64), np.empty((3, 3), dtype=np.int64))
    with pytest.raises(ValueError, match="width"):
        _window.merge_runs(g, r, g, r, code, word, np.empty(4, dtype=np.int64), np.empty((4, 2), dtype=np.int64))
    with pytest.raises(ValueError, match="unknown code"):
        _window.merge_runs(g, r, g, r, np.array([42], dtype=np.int64), word, np.empty(4, dtype=np.int64),
                           np.empty((4, 3), dtype=np.int64))
    with pytest.raises(ValueError, match="record word"):
        _window.merge_runs_columns(g, r, g, r, code, word, np.empty(4, dtype=np.int64),
                                   np.empty((2, 4), dtype=np.int64))
    none = np.empty(0, dtype=np.int32)
    with pytest.raises(ValueError, match="words per row"):
        _window.sorted_records(g, g.copy(), r, 3, np.empty(2, dtype=np.int64), np.empty((2, 4), dtype=np.int64), none)
    with pytest.raises(ValueError, match="group 2 outside"):
        _window.sorted_records(g, g.copy(), np.zeros((3, 3), dtype=np.int64), 2, np.empty(2, dtype=np.int64),
                               np.empty((2, 3), dtype=np.int64), np.empty(2, dtype=np.int32))


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.floats(allow_nan=True, allow_infinity=True, width=64),
                          st.floats(-1e-3, 1e-3)), max_size=40))
def test_sum_result_adds_the_error_term_of_finite_sums(pairs):
    total = np.array([t for t, _ in pairs], dtype=np.float64)
    comp = np.array([c for _, c in pairs], dtype=np.float64)
    out = np.empty_like(total)
    _window.sum_f64_result(total, comp, out)
    with np.errstate(invalid="ignore"):
        expected = np.where(np.isfinite(total), total + comp, total)
    np.testing.assert_array_equal(out, expected)  # NaN where NaN, inf kept
    with pytest.raises(ValueError, match="1 error terms"):
        _window.sum_f64_result(np.zeros(2), np.zeros(1), np.zeros(2))
