"""Aggregate state kernels against the pure-Python reference.

``update_builtins`` (every built-in in one pass, records shared or not) and
``combine`` (a window's result from its panes' slots) are checked slot by
slot against ``window_reference.aggregate``.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastops._kernels import window as _window
from fastops.core import aggregates as agg
from fastops.core.aggregates import Columns, ResultColumns, ResultPlan, builtin_layout, update_builtins
from fastops.core.window.panes import _stack_layout
from support import window_reference as ref

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
    # (at most 2**55 each: no partial sum of 120 leaves int64; overflow: test_sum_overflow.py)
    i = draw(st.lists(st.none() | st.integers(-(2**55), 2**55), min_size=n, max_size=n))
    ts = draw(st.permutations(list(range(n))))  # distinct: first / last have no ties across slots
    shared = draw(st.booleans())
    # a window's rows: each output row merges some slots, in the order given
    nrows = draw(st.integers(1, 6))
    members = [draw(st.lists(st.integers(0, nslots - 1), unique=True, min_size=1, max_size=4))
               for _ in range(nrows)]
    return nslots, slots, f, i, ts, shared, members


@pytest.mark.slow
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
    with pytest.raises(ValueError, match="outside records of 2 / 2 words"):
        _window.merge_records(0, one, one, rec, 2, rec, 0)
    with pytest.raises(ValueError, match="outside records"):  # a compensated sum takes 3 words
        _window.merge_records(_window.OPS["sum_f64"], one, one, rec, 0, rec, 0)
    rec[:, 0] = 1
    with pytest.raises(ValueError, match=r"pair \(4, 0\) outside \[0, 4\)"):
        _window.merge_records(0, np.array([1, 4], dtype=np.int64), np.array([2, 0], dtype=np.int64),
                              rec, 0, rec, 0)
    assert rec[:, 0].tolist() == [1, 2, 1, 1]  # pairs before the bad one merged
    with pytest.raises(ValueError, match=r"slot 4 outside \[0, 4\)"):  # (negative slots: rows skipped)
        _window.agg_update(np.array([0, -1, 3, 4, 1], dtype=np.int64), np.zeros(5, dtype=np.int64),
                           np.array([0], dtype=np.int64), rec, np.zeros(1, dtype=np.int64),
                           [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.uint8)],
                           np.zeros(1, dtype=np.int64))
    assert rec[:, 0].tolist() == [2, 2, 1, 2]  # rows before the bad one counted
    rec[:] = 0
    with pytest.raises(ValueError, match="values for"):
        _window.agg_update(np.zeros(3, dtype=np.int64), np.zeros(3, dtype=np.int64),
                           np.array([_window.OPS["sum_i64"]], dtype=np.int64), rec, np.zeros(1, dtype=np.int64),
                           [np.zeros(2, dtype=np.int64)], [np.zeros(0, dtype=np.uint8)],
                           np.zeros(1, dtype=np.int64))
    with pytest.raises(ValueError, match=r"words from 0 on \(code 1\) outside records of 2 words"):
        _window.agg_update(np.zeros(3, dtype=np.int64), np.zeros(3, dtype=np.int64),
                           np.array([_window.OPS["sum_f64"]], dtype=np.int64), rec, np.zeros(1, dtype=np.int64),
                           [np.zeros(3, dtype=np.int64)], [np.zeros(0, dtype=np.uint8)],
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
def blocks(draw):
    """Panes (oldest first) of up to 10 groups, or of 60 to 200 (runs of rows
    longer than a block of the emission, and several bitmap words): pane p
    holds group g (if it does) in slot p * groups + g. The older panes ``[0,
    split)`` form a suffix stack of which the oldest ``drop`` are then
    dropped; the newer ones a prefix."""
    groups = draw(st.one_of(st.integers(1, 10), st.integers(60, 200)))
    npanes = draw(st.integers(1, 5))
    member = [draw(st.lists(st.booleans(), min_size=groups, max_size=groups)) for _ in range(npanes)]
    split = draw(st.integers(0, npanes))
    drop = draw(st.integers(0, split))
    n = draw(st.integers(0, 80))
    slots = draw(st.lists(st.integers(0, npanes * groups - 1), min_size=n, max_size=n))
    f = draw(st.lists(st.none() | st.floats(-1e6, 1e6), min_size=n, max_size=n))
    i = draw(st.lists(st.none() | st.integers(-(2**55), 2**55), min_size=n, max_size=n))  # (sums fit)
    ts = draw(st.permutations(list(range(n))))
    return groups, member, split, drop, slots, f, i, ts


# (aggregates, width of their stack records with one count: 1 + their value words, rounded
# up; None where one count would not make them narrower): all 13 (wide records), six sets of
# 4 words (the kernels' narrow loops: one or two aggregates with values), and others
STACK_AGGS = [(AGGS, 18), ([AGGS[0], AGGS[2], AGGS[5]], 4), ([AGGS[0], AGGS[1], AGGS[2]], 4),
              ([AGGS[0], AGGS[11], AGGS[6]], 4), ([AGGS[2], AGGS[5]], 4), ([AGGS[0], AGGS[9], AGGS[6]], 4),
              ([AGGS[8], AGGS[7]], 4), ([AGGS[0], AGGS[6]], 2), ([AGGS[6], AGGS[7]], None), ([AGGS[9]], None)]


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(blocks(), st.booleans(), st.sampled_from(STACK_AGGS))
def test_pane_stacks_match_reference(case, shared, aggs_width):
    """A window read off a suffix stack (built newest pane first, its oldest
    panes dropped; each pane's groups in any order, read by slot) and a dense
    prefix: one row per group in either, the aggregate of the rows of all its
    slots in the window's panes; rows come as groups in both, in the suffix
    only, in the prefix only, each run in group order.

    With ``shared``, the stacks keep one count for every aggregate where
    that makes records narrower: a kernel that reads a slot holding a row
    counted by some aggregates and not others so that their counts in the slot
    differ (a null in one's column, or ``count()`` beside a column's null)
    must report it (-1), and only then."""
    groups, member, split, drop, slots, f, i, ts = case
    aggs_in, width = aggs_width
    npanes = len(member)
    aggs = [make(*a) for a in aggs_in]
    states = [a.new_state() for a in aggs]
    store = Columns.share(states)
    ops, offs = builtin_layout(aggs, states)
    cols = {"f": pa.array(f, pa.float64()), "i": pa.array(i, pa.int64())}
    update_builtins(aggs, store, ops, offs, np.array(slots, dtype=np.int64),
                    [None if c is None else cols[c] for _, c, _ in aggs_in], np.array(ts, dtype=np.int64),
                    npanes * groups)
    layout, to_stack = _stack_layout(ops, offs, [len(st.names) for st in states], store.rec.shape[1], shared)
    words = int(layout[0])
    narrower = shared and width is not None  # (None: one count would not make records narrower)
    assert words == (width if narrower else store.rec.shape[1])

    def pane(p):  # its groups in any order (a pane's chunk order), their slots, the store
        g = np.random.default_rng(p).permutation(np.flatnonzero(member[p])).astype(np.int64)
        return g, p * groups + g, store.rec

    nbits = (groups + 63) // 64
    ptr, sbits = np.full(64 * nbits, -9, dtype=np.int64), np.zeros(nbits, dtype=np.uint64)
    rows = sum(len(pane(p)[0]) for p in range(split))
    ss = np.zeros((rows, words), dtype=np.int64)
    ss_group, ss_next = np.zeros(rows, dtype=np.int64), np.zeros(rows, dtype=np.int64)
    ranges, end, added = {}, rows, []
    for p in reversed(range(split)):
        g, at, rec = pane(p)
        added.append(_window.suffix_add(g, at, rec, layout, ss, ss_group, ss_next, end - len(g), ptr, sbits))
        ranges[p], end = (end - len(g), end), end - len(g)
    for p in range(drop):
        _window.suffix_drop(ss_group, ss_next, *ranges[p], ptr, sbits)
    acc, pbits = np.zeros((64 * nbits, words), dtype=np.int64), np.zeros(nbits, dtype=np.uint64)
    for p in range(split, npanes):
        added.append(_window.dense_add(*pane(p), layout, acc, pbits))
    read = {p * groups + g for p in range(npanes) for g in range(groups) if member[p][g]}
    # a slot whose aggregates counted different numbers of its rows (nulls in the column of one,
    # not another): one shared count cannot stand for them. Two rows with a null each in a
    # different column give equal counts, and a shared count stays exact.
    counted = {s2: [0] * len(aggs_in) for s2 in read}
    for r2, s2 in enumerate(slots):
        if s2 in read:
            for a, (_, c, _) in enumerate(aggs_in):
                counted[s2][a] += c is None or (f if c == "f" else i)[r2] is not None
    counts_differ = any(len(set(n)) > 1 for n in counted.values())
    assert (-1 in added) == (narrower and counts_differ)
    if -1 in added:
        return  # the stacks are then rebuilt with a count per aggregate (the other case)
    need = groups
    out_groups = np.full(need, -1, dtype=np.int64)
    plan = ResultPlan(aggs, states)
    out = ResultColumns(plan, need + 2)
    m = _window.dense_window(sbits, ptr, ss, pbits, acc, layout, to_stack[plan.words], plan.codes,
                             to_stack[plan.cnt_words], out_groups, out.cols, out.nulls, out.nnull, 2)
    out.cols, out.nulls = out.cols[:, 2:], out.nulls[:, 2:]
    results = plan.results(out, m)

    in_s = {g for p in range(drop, split) for g in range(groups) if member[p][g]}
    in_p = {g for p in range(split, npanes) for g in range(groups) if member[p][g]}
    order = sorted(in_s & in_p) + sorted(in_s - in_p) + sorted(in_p - in_s)
    assert out_groups[:m].tolist() == order
    for (kind, col, ddof), result in zip(aggs_in, results):
        got = result.to_pylist()
        for r, g in enumerate(order):
            chosen = {p * groups + g for p in range(drop, npanes) if member[p][g]}
            rows_in = [r2 for r2, s2 in enumerate(slots) if s2 in chosen]
            if kind == "count_rows":
                exp = len(rows_in)
            else:
                values = [(f if col == "f" else i)[r2] for r2 in rows_in]
                exp = ref.aggregate(kind, values, [ts[r2] for r2 in rows_in], rows_in, ddof)
            assert ref.close(got[r], exp), (kind, col, g, got[r], exp)


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 300), st.sampled_from([1, 3, 8, 16]), st.booleans(), st.data())
def test_clear_records_zeroes_exactly_the_slots_given(n, width, stream, data):
    """Purged slots' records become zero, whatever their width; every other
    record keeps its words (with ``stream`` the stores bypass the cache: they
    must still land where they should)."""
    slots = data.draw(st.lists(st.integers(0, n - 1), unique=True, max_size=n))
    rec = np.random.default_rng(n * width).integers(1, 2**62, size=(n, width)).astype(np.int64)
    expected = rec.copy()
    expected[slots] = 0
    _window.clear_records(rec, np.array(slots, dtype=np.int64), stream)
    np.testing.assert_array_equal(rec, expected)


@pytest.mark.parametrize("stream", [False, True])
def test_clear_records_rejects_a_slot_outside_the_records(stream):
    rec = np.ones((4, 8), dtype=np.int64)
    with pytest.raises(ValueError, match="slot 4 outside 4 records"):
        _window.clear_records(rec, np.array([1, 4, 2], dtype=np.int64), stream)
    assert rec[1].tolist() == [0] * 8 and rec[2].tolist() == [1] * 8  # zeroed up to the bad slot, no further


def test_run_kernels_reject_bad_arguments():
    g = np.array([1, 2], dtype=np.int64)
    at = np.array([0, 1], dtype=np.int64)  # their slots
    r = np.ones((2, 3), dtype=np.int64)  # non-zero: a record added shows in acc
    code, word = np.array([0], dtype=np.int64), np.array([0], dtype=np.int64)
    lay, _ = _stack_layout(code, word, [1], 3, False)  # a count at word 0 of 3
    bits, acc, ptr = np.zeros(1, dtype=np.uint64), np.zeros((64, 3), dtype=np.int64), np.zeros(64, dtype=np.int64)

    def layout(op=(), cnt=(), val=(), cw=(0,), src=(0, 1, 2), eq=()):
        head = [len(src), len(op), len(cw), len(eq) // 2]
        return np.array(head + list(src) + list(op) + list(cnt) + list(val) + list(cw) + list(eq), dtype=np.int64)
    assert layout().tolist() == lay.tolist()
    with pytest.raises(ValueError, match="unknown code 42"):
        _window.dense_add(g, at, r, layout(op=[42], cnt=[0], val=[1]), acc, bits)
    with pytest.raises(ValueError, match="values from word 2 on outside stack records of 3"):
        _window.dense_add(g, at, r, layout(op=[1], cnt=[0], val=[2]), acc, bits)  # a sum's 2 words
    with pytest.raises(ValueError, match="count word 3 outside"):
        _window.dense_add(g, at, r, layout(cw=[3]), acc, bits)
    with pytest.raises(ValueError, match="reads store word 3 of records of 3"):
        _window.dense_add(g, at, r, layout(src=[0, 1, 3]), acc, bits)
    with pytest.raises(ValueError, match="reads store word -1"):
        _window.suffix_add(g, at, r, layout(eq=[0, -1]), r.copy(), g.copy(), g.copy(), 0, ptr, bits)
    with pytest.raises(ValueError, match="does not add up"):
        _window.dense_add(g, at, r, lay[:-1], acc, bits)
    with pytest.raises(ValueError, match="a stack layout of 3 words for stack records of 2"):
        _window.dense_add(g, at, r, lay, np.zeros((64, 2), dtype=np.int64), bits)
    with pytest.raises(ValueError, match="group 70 outside"):
        _window.dense_add(np.array([70], dtype=np.int64), at[:1], r, lay, acc, bits)
    with pytest.raises(ValueError, match="1 slots for 2 groups"):
        _window.dense_add(g, at[:1], r, lay, acc, bits)
    for bad in (2, -1):
        with pytest.raises(ValueError, match=rf"dense_add: slot {bad} outside \[0, 2\)"):
            _window.dense_add(g, np.array([0, bad], dtype=np.int64), r, lay, acc, bits)
        with pytest.raises(ValueError, match=rf"suffix_add: slot {bad} outside \[0, 2\)"):
            _window.suffix_add(g, np.array([bad, 1], dtype=np.int64), r, lay, r.copy(), g.copy(),
                               g.copy(), 0, ptr, bits)
    assert not bits.any() and not acc.any()  # nothing added before a bad slot was found
    with pytest.raises(ValueError, match="outside the stack"):
        _window.suffix_add(g, at, r, lay, r.copy(), g.copy(), g.copy(), 1, ptr, bits)
    with pytest.raises(ValueError, match="outside the stack"):
        _window.suffix_drop(g, g, 1, 3, ptr, bits)
    _window.dense_add(g, at, r, lay, acc, bits)  # groups 1 and 2 in the prefix

    def window(sb, out_rows, plan=(word, code, word), cols=1, nulls=1, rec=r, accumulator=acc):
        words, codes, cnt_words = plan
        return _window.dense_window(sb, ptr, rec, bits, accumulator, lay, words, codes, cnt_words,
                                    np.empty(out_rows, dtype=np.int64), np.empty((cols, out_rows), dtype=np.int64),
                                    np.empty((nulls, out_rows), dtype=np.uint8), np.empty(1, dtype=np.int64))
    with pytest.raises(ValueError, match="outputs hold 1 rows, 2 are set"):
        window(bits[:0], 1)
    with pytest.raises(ValueError, match="2 columns"):
        window(bits[:0], 4, cols=2)
    with pytest.raises(ValueError, match=r"word 2 \(code 1\) outside records of 3"):
        window(bits[:0], 4, plan=(np.array([2], dtype=np.int64), np.array([1], dtype=np.int64), word))
    with pytest.raises(ValueError, match="count word 3 outside"):
        window(bits[:0], 4, plan=(word, code, np.array([3], dtype=np.int64)))
    with pytest.raises(ValueError, match="one width"):
        window(bits, 4, accumulator=np.zeros((64, 4), dtype=np.int64))
    ptr[1] = 5  # a suffix record that is not there
    with pytest.raises(ValueError, match="group 1 points to row 5"):
        window(bits, 4)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 40), st.data())
def test_pane_kernels_check_every_slot(top, data):
    """A pane's slots are checked in one pass before anything is added: any
    slot outside ``[0, top)``, down to the extremes of int64, is a
    ValueError naming the first bad one, and a pane of good slots goes in."""
    big = st.integers(-(2**63), 2**63 - 1)
    slots = data.draw(st.lists(st.one_of(st.integers(0, max(top - 1, 0)), big), max_size=70))
    n = len(slots)
    groups = np.arange(n, dtype=np.int64)
    rec = np.ones((top, 1), dtype=np.int64)
    acc, bits = np.zeros((64 * (n // 64 + 1), 1), dtype=np.int64), np.zeros(n // 64 + 1, dtype=np.uint64)
    code = np.zeros(1, dtype=np.int64)
    layout, _ = _stack_layout(code, code, [1], 1, True)  # (one aggregate: nothing to share)
    bad = [s for s in slots if not 0 <= s < top]
    if bad:
        with pytest.raises(ValueError, match=rf"dense_add: slot {bad[0]} outside \[0, {top}\)"):
            _window.dense_add(groups, np.array(slots, dtype=np.int64), rec, layout, acc, bits)
        assert not bits.any() and not acc.any()
    else:
        assert _window.dense_add(groups, np.array(slots, dtype=np.int64), rec, layout, acc, bits) == n
        assert acc[:n, 0].tolist() == [1] * n


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.floats(allow_nan=True, allow_infinity=True, width=64),
                          st.floats(-1e-3, 1e-3), st.integers(-(2**62), 2**62)), max_size=150),
       st.booleans())
def test_gather_fields_finishes_result_words(recs, by_slot):
    """Result columns from records (count, compensated sum, error term, a
    value): a word as it is, a sum with its error term added where it is
    finite, nulls where the count is 0, for given slots or every row (in
    blocks of rows: up to 150 rows cross their bounds)."""
    rec = np.zeros((len(recs), 4), dtype=np.int64)
    rec[:, 0] = [c for c, _, _, _ in recs]
    rec[:, 1] = np.array([t for _, t, _, _ in recs], dtype=np.float64).view(np.int64)
    rec[:, 2] = np.array([e for _, _, e, _ in recs], dtype=np.float64).view(np.int64)
    rec[:, 3] = [v for _, _, _, v in recs]
    slots = np.arange(len(recs), dtype=np.int64)[::-1].copy() if by_slot else None
    pick = slice(None, None, -1) if by_slot else slice(None)
    words, codes = np.array([1, 3, 0], dtype=np.int64), np.array([1, 0, 0], dtype=np.int64)
    out = np.empty((3, len(recs)), dtype=np.int64)
    null = np.zeros((1, len(recs)), dtype=np.uint8)  # kernels write only the nulls
    nnull = np.full(1, 99, dtype=np.int64)
    _window.gather_fields(rec, words, codes, np.array([0], dtype=np.int64), slots, out, null, nnull)
    total, comp = rec[pick, 1].view(np.float64), rec[pick, 2].view(np.float64)
    with np.errstate(invalid="ignore"):
        expected = np.where(np.isfinite(total), total + comp, total)
    np.testing.assert_array_equal(out[0].view(np.float64), expected)  # NaN where NaN, inf kept
    np.testing.assert_array_equal(out[1], rec[pick, 3])
    np.testing.assert_array_equal(out[2], rec[pick, 0])
    assert null[0].tolist() == (rec[pick, 0] == 0).tolist() and nnull[0] == (rec[:, 0] == 0).sum()
    with pytest.raises(ValueError, match="2 columns"):
        _window.gather_fields(rec, words, codes, words[:1], None, out[:2], null, nnull)
    if by_slot and recs:  # a slot outside the records: an error, not a read out of bounds
        for wrong in (len(recs), -1):
            bad = slots.copy()
            bad[len(bad) // 2] = wrong
            with pytest.raises(ValueError, match=rf"slot {wrong} outside \[0, {len(recs)}\)"):
                _window.gather_fields(rec, words, codes, np.array([0], dtype=np.int64), bad, out, null, nnull)
