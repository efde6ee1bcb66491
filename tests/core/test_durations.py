"""parse_duration: the one duration parser."""
from __future__ import annotations

import datetime as dt

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastops.core.durations import parse_duration

SCALE = {"ms": 1, "s": 1000, "sec": 1000, "min": 60_000, "minutes": 60_000, "h": 3_600_000,
         "hours": 3_600_000, "day": 86_400_000, "days": 86_400_000, "w": 604_800_000}


@pytest.mark.parametrize("text,ms", [("500ms", 500), ("1s", 1000), ("5 min", 300_000), ("2 h", 7_200_000),
                                     ("1 day", 86_400_000), ("1.5s", 1500), (" 3 MS ", 3), ("0.25 min", 15_000)])
def test_examples(text, ms):
    assert parse_duration(text) == ms


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 10**6), st.sampled_from(sorted(SCALE)), st.booleans())
def test_strings_match_timedelta(n, unit, space):
    text = f"{n}{' ' if space else ''}{unit}"
    assert parse_duration(text) == n * SCALE[unit]
    assert parse_duration(dt.timedelta(milliseconds=n * SCALE[unit])) == n * SCALE[unit]


def test_ints_and_numpy():
    assert parse_duration(250) == 250
    assert parse_duration(np.int32(7)) == 7
    assert parse_duration(np.timedelta64(3, "s")) == 3000
    assert parse_duration(dt.timedelta(seconds=1, milliseconds=2)) == 1002


@pytest.mark.parametrize("bad", ["", "5", "ms", "5 parsecs", "1.0005s", "abc ms", "1e3ms"])
def test_bad_strings_name_the_value(bad):
    with pytest.raises(ValueError) as exc:
        parse_duration(bad)
    assert repr(bad) in str(exc.value)


def test_bad_types():
    for bad in [1.5, None, True, [1]]:
        with pytest.raises(TypeError):
            parse_duration(bad)
    with pytest.raises(ValueError, match="whole number"):
        parse_duration(dt.timedelta(microseconds=1500))
