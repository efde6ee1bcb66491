"""int64 ``sum`` raises SumOverflowError instead of wrapping.

The rule (docs/windows.md, ``agg.sum``): every partial sum the engine forms
(rows of a batch into a pane or session, panes merged into a window,
sessions merged) is checked. Against Python's exact sums of each window and
key this means: a total outside int64 always raises; a group whose positive
values and negative values each sum within int64 never does (every partial
sum lies between those two) and gives the exact total; in between (a total
that fits, reached through a partial sum that does not) either is allowed.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastops import JobFailed, Session, Sliding, TableEnvironment, Tumbling, WindowAggregator
from fastops._kernels import window as _window
from fastops.core import aggregates as agg
from fastops.core.aggregates import SumOverflowError

MIN, MAX = -(2**63), 2**63 - 1
NEAR = st.sampled_from([2**62, -(2**62), MAX, MIN, MAX - 1, MIN + 1, 2**61 + 3, -(2**61) - 5])
VALUES = st.one_of(NEAR, st.integers(MIN, MAX), st.integers(-5, 5))


def fits(v: int) -> bool:
    return MIN <= v <= MAX


def verdict(values: list[int]) -> str:
    """'raise', 'exact' or 'either' for one group's values (see module doc)."""
    if not fits(sum(values)):
        return "raise"
    pos, neg = sum(v for v in values if v > 0), sum(v for v in values if v < 0)
    return "exact" if fits(pos) and fits(neg) else "either"


def windows_of(kind: str, rows: list[tuple[int, int, int]]) -> dict[tuple, list[int]]:
    """(window_start, window_end, key) -> values, in pure Python: tumbling 10 ms,
    sliding 30 ms every 10 ms, sessions with a 10 ms gap, or one group per key."""
    out: dict[tuple, list[int]] = {}
    if kind == "session":
        for k in {r[0] for r in rows}:
            mine = sorted((t, v) for key, t, v in rows if key == k)
            start, last, vals = mine[0][0], mine[0][0], []
            for t, v in mine:
                if t - last > 10:  # the gap passed: the session [start, last + gap) closed
                    out[(start, last + 10, k)] = vals
                    start, vals = t, []
                last = t
                vals.append(v)
            out[(start, last + 10, k)] = vals
        return out
    for k, t, v in rows:
        if kind == "global":
            starts = [None]
        elif kind == "tumbling":
            starts = [t // 10 * 10]
        else:
            starts = [t // 10 * 10 - d for d in (0, 10, 20)]
        for s in starts:
            end = None if s is None else s + (10 if kind == "tumbling" else 30)
            out.setdefault((s, end, k), []).append(v)
    return out


def window(kind: str):
    return {"tumbling": Tumbling(10), "sliding": Sliding(30, 10), "session": Session(10), "global": None}[kind]


@st.composite
def streams(draw):
    n = draw(st.integers(1, 40))
    rows = [(draw(st.integers(0, 2)), draw(st.integers(0, 60)), draw(VALUES)) for _ in range(n)]
    cuts = sorted(draw(st.lists(st.integers(1, max(n - 1, 1)), max_size=4, unique=True)))
    return rows, [c for c in cuts if c < n]


def run(kind: str, rows: list[tuple[int, int, int]], cuts: list[int]) -> dict[tuple, int]:
    """The aggregator's sums per (window_start, window_end, key): batches split
    at ``cuts``, the watermark after each batch just below the later rows'
    times (so no row is late and no window fires twice), then flush."""
    timed = kind != "global"
    wa = WindowAggregator(window(kind), by="k", aggs={"n": agg.count(), "total": agg.sum("v")},
                          time="ts" if timed else None)
    bounds = [0, *cuts, len(rows)]
    out: list[pa.RecordBatch] = []
    for lo, hi in zip(bounds, bounds[1:]):
        part = rows[lo:hi]
        wa.process(pa.record_batch({"k": pa.array([r[0] for r in part], pa.int64()),
                                    "ts": pa.array([r[1] for r in part], pa.int64()),
                                    "v": pa.array([r[2] for r in part], pa.int64())}))
        later = [r[1] for r in rows[hi:]]
        if timed and later:
            out.append(wa.advance_watermark(min(later) - 1))
    out.append(wa.flush())
    got: dict[tuple, int] = {}
    for batch in out:
        for r in batch.to_pylist():
            s, e = (None, None) if not timed else (r["window_start"], r["window_end"])
            ms = (None, None) if s is None else (int(s.timestamp() * 1000), int(e.timestamp() * 1000))
            key = (*ms, r["k"])
            assert key not in got, f"window {key} emitted twice"
            got[key] = r["total"]
    return got


def check(kind: str, rows: list[tuple[int, int, int]], cuts: list[int]) -> None:
    expected = windows_of(kind, rows)
    verdicts = {w: verdict(vals) for w, vals in expected.items()}
    try:
        got = run(kind, rows, cuts)
    except SumOverflowError as exc:
        msg = str(exc)
        assert "sum('v') (output column 'total') overflowed int64" in msg and "float64" in msg, msg
        assert exc.column == "v" and exc.output == "total"
        assert any(v != "exact" for v in verdicts.values()), (msg, expected)
        return
    assert "raise" not in verdicts.values(), ("a sum outside int64 did not raise", expected, got)
    assert got == {w: sum(vals) for w, vals in expected.items()}


@pytest.mark.parametrize("kind", ["tumbling", "sliding", "session", "global"])
@settings(max_examples=120, deadline=None)
@given(case=streams())
def test_window_sums_match_exact_python_or_raise(kind, case):
    check(kind, *case)


@pytest.mark.parametrize("kind", ["tumbling", "sliding", "session", "global"])
def test_limits_exactly(kind):
    """Sums that reach the limits exactly fit; one more raises."""
    assert set(run(kind, [(0, 1, MAX - 1), (0, 2, 1), (1, 3, MIN + 1), (1, 4, -1)], [1]).values()) == {MAX, MIN}
    for rows in ([(0, 1, MAX), (0, 2, 1)], [(0, 1, MIN), (0, 2, -1)], [(0, 1, -1), (0, 2, MIN)]):
        with pytest.raises(SumOverflowError, match=r"sum\('v'\) \(output column 'total'\) overflowed int64"):
            run(kind, rows, [1])


def test_overflow_in_a_sliding_window_merge_names_the_window():
    """Each pane holds 2**62 (no pane overflows); the window over both panes
    overflows when they are merged, and the error names that window."""
    rows = [(0, 5, 2**62), (0, 15, 2**62)]
    with pytest.raises(SumOverflowError) as info:
        run("sliding", rows, [1])
    # the first window of both panes to fire: [-10 ms, 20 ms)
    assert "in window [1969-12-31T23:59:59.990, 1970-01-01T00:00:00.020)" in str(info.value)
    # the windows holding one pane only are fine
    assert run("tumbling", rows, [1]) == {(0, 10, 0): 2**62, (10, 20, 0): 2**62}


def test_session_merge_overflows():
    """Two sessions of 2**62 each; a row between them merges all three (a
    merge of records, not an addition of rows)."""
    rows = [(0, 0, 2**62), (0, 20, 2**62), (0, 10, 0)]
    with pytest.raises(SumOverflowError, match="while adding a batch"):
        run("session", rows, [1, 2])


def test_aggregator_refuses_work_after_an_overflow():
    wa = WindowAggregator(Tumbling(10), by="k", aggs={"total": agg.sum("v")}, time="ts")
    batch = pa.record_batch({"k": [1, 1], "ts": [0, 1], "v": [MAX, 1]})
    with pytest.raises(SumOverflowError):
        wa.process(batch)  # (held until a window is due: batches ahead of the watermark are added together)
        wa.advance_watermark(100)
    for call in (lambda: wa.process(batch.slice(0, 1)), lambda: wa.advance_watermark(200), wa.flush):
        with pytest.raises(SumOverflowError, match="cannot go on after an earlier error: sum\\('v'\\)"):
            call()


def test_uint64_values_beyond_int64_raise():
    wa = WindowAggregator(None, by="k", aggs={"total": agg.sum("v")}, time=None)
    wa.process(pa.record_batch({"k": [1, 2], "v": pa.array([2**63 - 1, 5], pa.uint64())}))
    assert sorted(wa.flush().to_pylist(), key=lambda r: r["k"]) == [{"k": 1, "total": MAX}, {"k": 2, "total": 5}]
    wa = WindowAggregator(None, by="k", aggs={"total": agg.sum("v")}, time=None)
    with pytest.raises(SumOverflowError, match=rf"'v' is {2**63}, beyond int64"):
        wa.process(pa.record_batch({"k": [1], "v": pa.array([2**63], pa.uint64())}))


def test_aggregate_alone_names_its_column():
    """``agg.sum`` used without an aggregator: update and merge raise naming it."""
    a = agg.sum("amount")
    a.bind(pa.int64())
    state = a.new_state()
    a.update(state, np.array([0, 1]), pa.array([2**62, 2**62]))  # a slot each: fits
    assert a.result(state, np.array([0, 1])).to_pylist() == [2**62, 2**62]
    with pytest.raises(SumOverflowError, match=r"^sum\('amount'\) overflowed int64: a partial sum of column"):
        a.merge(state, np.array([0]), np.array([1]))
    state = a.new_state()
    with pytest.raises(SumOverflowError, match=r"^sum\('amount'\) overflowed int64"):
        a.update(state, np.array([0, 0]), pa.array([-(2**62), -(2**62) - 1]))


def test_kernels_report_which_aggregate():
    """The kernels' own error: the index of the aggregate whose sum overflowed."""
    ops = np.array([_window.OPS["count"], _window.OPS["sum_i64"], _window.OPS["sum_i64"]], dtype=np.int64)
    rec = np.zeros((1, 8), dtype=np.int64)
    offs = np.array([0, 1, 3], dtype=np.int64)
    small, big = np.array([1, 2], dtype=np.int64), np.array([MAX, 1], dtype=np.int64)
    none = np.zeros(0, dtype=np.uint8)
    with pytest.raises(_window.SumOverflowError) as info:
        _window.agg_update(np.zeros(2, dtype=np.int64), np.zeros(2, dtype=np.int64), ops, rec, offs,
                           [np.zeros(0, dtype=np.int64), small, big], [none] * 3, np.zeros(3, dtype=np.int64))
    assert info.value.aggregates == (2,)
    assert rec[0, :5].tolist() == [2, 2, 3, 2, MIN]  # every row added (the overflowed word wrapped)
    rec = np.array([[1, MIN], [1, -1]], dtype=np.int64)
    with pytest.raises(_window.SumOverflowError):
        _window.merge_records(_window.OPS["sum_i64"], np.array([0]), np.array([1]), rec, 0, rec, 0)


def sql_sums(rows: list[tuple[int, int, int]], query: str, streaming: bool = False) -> list[dict]:
    env = TableEnvironment(mode="streaming" if streaming else "batch")
    frame = pd.DataFrame({"k": [r[0] for r in rows], "ts": [r[1] for r in rows], "v": [r[2] for r in rows]},
                         dtype="int64")
    env.create_temporary_view("t", env.from_pandas(frame))
    return env.sql_query(query).to_pandas().to_dict("records")


def sql_check(rows: list[tuple[int, int, int]], expected: dict, query: str) -> None:
    """SQL's SUM(v) AS total per k (batch mode): Python's exact sums, or the
    job fails naming the aggregate."""
    verdicts = {g: verdict(vals) for g, vals in expected.items()}
    try:
        got = sql_sums(rows, query)
    except JobFailed as exc:
        # (windowed SQL aggregates under an internal name, which the error leaves out)
        assert re.search(r"sum\('v'\) (\(output column 'total'\) )?overflowed int64", str(exc)), str(exc)
        assert any(v != "exact" for v in verdicts.values())
        return
    assert "raise" not in verdicts.values(), ("a sum outside int64 did not raise", expected, got)
    assert sorted((r["k"], r["total"]) for r in got) == sorted((g[-1], sum(v)) for g, v in expected.items())


@settings(max_examples=25, deadline=None)
@given(case=streams())
def test_sql_group_by_sum_matches_exact_python_or_fails(case):
    rows, _ = case
    sql_check(rows, windows_of("global", rows), "SELECT k, SUM(v) AS total FROM t GROUP BY k")


def test_sql_sums_raise_in_a_window_and_in_streaming_mode():
    rows = [(0, 1, 2**62), (0, 2, 2**62), (1, 3, 7)]
    tumble = ("SELECT k, SUM(v) AS total FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '0.01' SECOND)) "
              "GROUP BY window_start, window_end, k")
    sql_check(rows, windows_of("global", rows), tumble)  # (one window holds every row)
    for query, streaming in ((tumble, False), ("SELECT k, SUM(v) AS total FROM t GROUP BY k", True)):
        with pytest.raises(Exception, match=r"SumOverflowError: sum\('v'\) (\(output column 'total'\) )?overflowed"):
            sql_sums(rows, query, streaming)
    assert sql_sums(rows[1:], "SELECT k, SUM(v) AS total FROM t GROUP BY k") == [{"k": 0, "total": 2**62},
                                                                                   {"k": 1, "total": 7}]


def test_refired_window_and_pairs_merge_overflow():
    """Panes merged by pane_emit rather than the stacks: a window fired again
    for a late row (allowed lateness), and sliding windows beside an
    aggregate that is not built in (the kernel lists (row, slot) pairs)."""
    wa = WindowAggregator(Sliding(20, 10), by="k", aggs={"total": agg.sum("v")}, time="ts", allowed_lateness=100)
    wa.process(pa.record_batch({"k": [0], "ts": [5], "v": [2**62]}))
    assert [r["total"] for r in wa.advance_watermark(25).to_pylist()] == [2**62, 2**62]
    wa.process(pa.record_batch({"k": [0], "ts": [15], "v": [2**62]}))  # late for [0, 20), kept
    with pytest.raises(SumOverflowError, match=r"output column 'total'\) overflowed int64 in window "
                                               r"\[1970-01-01T00:00:00.000, 1970-01-01T00:00:00.020\)"):
        wa.advance_watermark(26)
    aggs = {"d": agg.approx_distinct("v"), "total": agg.sum("v")}
    wa = WindowAggregator(Sliding(20, 10), by="k", aggs=aggs, time="ts")
    wa.process(pa.record_batch({"k": [0, 0], "ts": [5, 15], "v": [2**62, 2**62]}))
    with pytest.raises(SumOverflowError, match=r"output column 'total'\) overflowed int64 in window"):
        wa.flush()
