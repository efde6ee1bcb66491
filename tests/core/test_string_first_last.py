"""``first`` / ``last`` of string and binary columns (``StringFirstLast``)
against a pure-Python model: updates in row order, then merges."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastops.core import aggregates as agg
from fastops.core.aggregates import StringFirstLast

WORDS = st.text(alphabet="abé\U0001F600", max_size=3)
ROW = st.tuples(st.integers(0, 5), st.integers(0, 3), WORDS)  # slot, event time (ties likely), value


@settings(max_examples=80, deadline=None)
@given(batches=st.lists(st.lists(ROW, max_size=12), max_size=4),
       merges=st.lists(st.tuples(st.booleans(), st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)),
                                                         max_size=10)), max_size=3),
       is_last=st.booleans(), binary=st.booleans())
def test_string_first_last_equals_a_python_model(batches, merges, is_last, binary):
    """The model keeps (value, time) per slot: ``first`` takes a row with a
    smaller time, ``last`` one with a time as large or larger (ties: the row
    seen first / last). A merge source counts as rows after its destination.
    A ``scratch`` merge call writes slots 8.. that are no source (as sliding
    windows do); the others may chain through slots merged before."""
    t = pa.binary() if binary else pa.string()
    enc = (lambda s: s.encode()) if binary else (lambda s: s)
    a = StringFirstLast("s", is_last)
    a.validate(t)
    wins = (lambda new, cur: new >= cur) if is_last else (lambda new, cur: new < cur)
    model: dict[int, tuple] = {}
    state = a.new_state()
    for rows in batches:
        state = a.update(state, np.array([k for k, _, _ in rows], np.int64),
                         pa.array([enc(v) for _, _, v in rows], t), np.array([ts for _, ts, _ in rows], np.int64))
        for k, ts, v in rows:
            if k not in model or wins(ts, model[k][1]):
                model[k] = (enc(v), ts)
    state = a.from_bytes(a.to_bytes(state))  # through a snapshot
    for scratch, pairs in merges:
        pairs = [(d + 8 if scratch else d, s) for d, s in pairs]
        state = a.merge(state, np.array([d for d, _ in pairs], np.int64), np.array([s for _, s in pairs], np.int64))
        for d, s in pairs:
            if s in model and (d not in model or wins(model[s][1], model[d][1])):
                model[d] = model[s]
    slots = np.arange(17)
    assert a.result(state, slots).to_pylist() == [model[i][0] if i in model else None for i in range(17)]
    state = a.reset(state, np.array([0, 1]))
    assert a.result(state, np.array([0, 1])).to_pylist() == [None, None]


def test_first_last_of_strings_are_chosen_for_string_input():
    assert isinstance(agg.for_input(agg.first("s"), pa.string()), StringFirstLast)
    assert isinstance(agg.for_input(agg.last("s"), pa.binary_view()), StringFirstLast)
    assert not isinstance(agg.for_input(agg.last("s"), pa.int64()), StringFirstLast)


def test_string_first_of_a_list_column_is_refused():
    with pytest.raises(TypeError, match="first\\(s\\)"):
        StringFirstLast("s", False).validate(pa.list_(pa.string()))
