"""Watermark strategies and event-time conversion."""
from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastops.core.watermarks import MIN_WATERMARK, BoundedOutOfOrderness, MonotonousTimestamps, to_ms


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.integers(-10**6, 10**6), max_size=20), max_size=10), st.integers(0, 5000))
def test_bounded_out_of_orderness_model(batches, bound):
    wm = BoundedOutOfOrderness(bound)
    current = MIN_WATERMARK
    seen = []
    for b in batches:
        out = wm.on_batch(np.array(b, dtype=np.int64))
        seen += b
        expected = max(seen) - bound - 1 if seen else None
        if expected is not None and expected > current:
            assert out == expected
            current = expected
        else:
            assert out is None  # no advance: not an error, nothing emitted
        assert wm.current == current


def test_backwards_is_ignored_and_restore():
    wm = MonotonousTimestamps()
    assert wm.on_batch(np.array([100, 50])) == 99
    assert wm.on_batch(np.array([10])) is None
    assert wm.current == 99
    w2 = BoundedOutOfOrderness("1s")
    assert w2.max_out_of_orderness == 1000
    w2.restore(5000)
    assert w2.on_batch(np.array([5500])) is None and w2.on_batch(np.array([6002])) == 5001
    with pytest.raises(ValueError):
        BoundedOutOfOrderness(-1)


@pytest.mark.parametrize("unit,factor", [("s", 1000), ("ms", 1), ("us", 1e-3), ("ns", 1e-6)])
def test_to_ms_timestamps(unit, factor):
    raw = np.array([-1501, 0, 1, 1999, 10**6], dtype=np.int64)
    arr = pa.array(raw, type=pa.timestamp(unit, tz="UTC" if unit == "s" else None))
    assert to_ms(arr, "t").tolist() == [int(np.floor(v * factor)) for v in raw]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(st.integers(-(2**63), 2**63 - 1),
                          st.integers(-(2**63 - 1) // 1000 - 2, -(2**63 - 1) // 1000 + 2),
                          st.integers((2**63 - 1) // 1000 - 2, (2**63 - 1) // 1000 + 2)),
                min_size=1, max_size=5))
def test_to_ms_seconds_never_wrap(seconds):
    """timestamp[s] values are exact in ms (Python ints as reference) or, if
    any does not fit in int64 ms, refused naming the column: never wrapped."""
    arr = pa.array(seconds, pa.timestamp("s"))
    want = [v * 1000 for v in seconds]
    if all(-(2**63) <= w < 2**63 for w in want):
        assert to_ms(arr, "t").tolist() == want
    else:
        with pytest.raises(ValueError, match="'t'.*int64 milliseconds"):
            to_ms(arr, "t")


def test_to_ms_dates_ints_chunked():
    assert to_ms(pa.array([dt.date(1970, 1, 2)]), "d").tolist() == [86_400_000]
    assert to_ms(pa.array([5], pa.date64()), "d").tolist() == [5]
    assert to_ms(pa.array([3, 4], pa.int32()), "t").tolist() == [3, 4]
    assert to_ms(pa.chunked_array([[1], [2, 3]]), "t").tolist() == [1, 2, 3]
    assert to_ms(np.array([7], dtype=np.uint16), "t").tolist() == [7]


def test_to_ms_rejects_non_temporal_naming_the_column():
    with pytest.raises(TypeError, match="'when'.*string"):
        to_ms(pa.array(["x"]), "when")
    with pytest.raises(TypeError, match="'when'.*double"):
        to_ms(pa.array([1.5]), "when")
    with pytest.raises(ValueError, match="'when'.*null"):
        to_ms(pa.array([1, None]), "when")
