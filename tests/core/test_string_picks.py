"""The compiled state of string min / max / first / last (``agg._Picks``):
byte order with prefixes and zero bytes, large types, nulls given to
``update``, shared values after merges, and arena compaction, each against a
pure-Python model."""
from __future__ import annotations

from unittest import mock

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

import fastops as fo
from fastops.core import aggregates as agg
from fastops.core.aggregates import StringFirstLast, StringMinMax

# few byte values: zero and high bytes, shared prefixes shorter and longer than 8 bytes
BYTES = st.lists(st.sampled_from([0, 1, 0x61, 0xFF]), max_size=12).map(bytes)
ROW = st.tuples(st.integers(0, 9), st.integers(0, 4), st.one_of(st.none(), BYTES))


def _make(mode: str):
    if mode in ("min", "max"):
        return StringMinMax("s", mode == "max")
    return StringFirstLast("s", mode == "last")


def _model_wins(mode: str):
    """Whether (value, time) ``new``, from a later row, replaces ``cur``."""
    return {"min": lambda new, cur: new[0] < cur[0], "max": lambda new, cur: new[0] > cur[0],
            "first": lambda new, cur: new[1] < cur[1], "last": lambda new, cur: new[1] >= cur[1]}[mode]


@settings(max_examples=120, deadline=None)
@given(batches=st.lists(st.lists(ROW, max_size=30), max_size=6),
       pairs=st.lists(st.tuples(st.integers(0, 11), st.integers(0, 11)), max_size=12),
       resets=st.lists(st.integers(0, 11), max_size=3),
       mode=st.sampled_from(["min", "max", "first", "last"]),
       t=st.sampled_from([pa.binary(), pa.large_binary()]), compact_at=st.sampled_from([0, 1 << 20]))
def test_picks_equal_a_python_model(batches, pairs, resets, mode, t, compact_at):
    """Nulls reach ``update`` here (it drops them); merges may chain and share
    a value between slots; a reset empties only its own slot. With
    ``compact_at`` 0 the arena is compacted after every change."""
    with mock.patch.object(agg._Picks, "_MIN_COMPACT", compact_at):
        a = _make(mode)
        a.validate(t)
        wins = _model_wins(mode)
        model: dict[int, tuple] = {}
        state = a.new_state()
        for rows in batches:
            args = (np.array([k for k, _, _ in rows], np.int64), pa.array([v for _, _, v in rows], t))
            if a.needs_time:
                args += (np.array([ts for _, ts, _ in rows], np.int64),)
            state = a.update(state, *args)
            for k, ts, v in rows:
                if v is not None and (k not in model or wins((v, ts), model[k])):
                    model[k] = (v, ts)
        state = a.merge(state, np.array([d for d, _ in pairs], np.int64), np.array([s for _, s in pairs], np.int64))
        for d, s in pairs:
            if s in model and (d not in model or wins(model[s], model[d])):
                model[d] = model[s]
        state = a.reset(state, np.array(resets, np.int64))
        for r in resets:
            model.pop(r, None)
        state = a.from_bytes(a.to_bytes(state))  # through a snapshot
        got = a.result(state, np.arange(14))
        assert got.type == t
        assert got.to_pylist() == [model[i][0] if i in model else None for i in range(14)]


def test_compaction_keeps_the_arena_near_the_live_bytes():
    """A stream where every row wins (max of a rising value) leaves garbage
    behind each time; the arena stays bounded by the live values."""
    a = StringMinMax("s", True)
    a.validate(pa.string())
    state = a.new_state()
    slots = np.arange(1000, dtype=np.int64)
    for step in range(300):
        state = a.update(state, slots, pa.array([f"{step:06d}-{'x' * 50}"] * 1000))
    assert a.result(state, slots[:3]).to_pylist() == [f"000299-{'x' * 50}"] * 3
    assert state.used <= 2 * 57_000 + agg._Picks._MIN_COMPACT
    assert len(state.arena) <= 4 * (2 * 57_000 + agg._Picks._MIN_COMPACT)


def test_string_first_last_and_min_max_over_large_strings_in_a_window():
    """large_string columns give large_string back, and so do string_view
    columns (plug-in aggregates see views as their large types)."""
    for t in (pa.large_string(), pa.string_view()):
        b = pa.record_batch({"k": [1, 1, 2], "ts": pa.array([5, 1, 3], pa.timestamp("ms")),
                             "s": pa.array(["b", "a", "c"], t)})
        wa = fo.WindowAggregator(fo.Tumbling("1s"), ["k"], {"lo": agg.min("s"), "f": agg.first("s")})
        wa.process(b)
        out = wa.flush()
        assert out.schema.field("lo").type == out.schema.field("f").type == pa.large_string()
        rows = {r["k"]: (r["lo"], r["f"]) for r in out.to_pylist()}
        assert rows == {1: ("a", "a"), 2: ("c", "c")}
