"""Rate schedules against the overlap of each step with the time asked."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastops.connectors.pacing import RateSchedule


def brute_rows_by(steps, t):
    """Each step's rate times its overlap with [0, t]."""
    ends = [s for s, _ in steps[1:]] + [float("inf")]
    return sum(r * max(0.0, min(t, end) - start) for (start, r), end in zip(steps, ends))


@st.composite
def schedules(draw):
    gaps = draw(st.lists(st.integers(1, 5), max_size=3))
    starts = [0]
    for g in gaps:
        starts.append(starts[-1] + g)
    return [(float(s), float(draw(st.integers(1, 50)) * 10)) for s in starts]


@settings(max_examples=50, deadline=None)
@given(schedules(), st.floats(0, 20))
def test_rows_by_integrates_the_steps_and_time_of_inverts_it(steps, t):
    s = RateSchedule(steps)
    assert s.rows_by(t) == pytest.approx(brute_rows_by(steps, t), rel=1e-6, abs=1e-6)
    assert s.time_of(s.rows_by(t)) == pytest.approx(t, abs=1e-9)
    assert s.rate_at(t) == [r for x, r in steps if x <= t][-1]
    assert s.scaled(0.5).rows_by(t) == pytest.approx(s.rows_by(t) / 2)


@pytest.mark.parametrize("rate, match", [
    (0, "rate must be a finite number > 0"), (float("inf"), "finite number"), (True, "finite number"),
    ([(1, 10)], "start at second 0"), ([(0, 10), (0, 20)], "go up in time"), ([(0, 10), (1, -1)], "> 0"),
    ([], "finite number"), ("fast", "finite number"),
])
def test_bad_rates_are_refused(rate, match):
    with pytest.raises(ValueError, match=match):
        RateSchedule(rate)
