"""``parse_duration``: the one place fastops turns a duration into milliseconds.

Accepted: an ``int`` of milliseconds, a ``datetime.timedelta`` (or NumPy
``timedelta64``), or a string ``"<number> <unit>"`` (the space is optional,
case is ignored), e.g. ``"500ms"``, ``"1s"``, ``"5 min"``, ``"2 h"``,
``"1 day"``, ``"1.5s"``. Units: ``ms``, ``s``, ``min`` / ``m``, ``h``, ``d``
and ``w`` with their long forms (``millisecond(s)``, ``second(s)``,
``minute(s)``, ``hour(s)``, ``day(s)``, ``week(s)``; also ``sec``, ``msec``,
``hr``). The result must be a whole number of milliseconds.
"""
from __future__ import annotations

import datetime as _dt
import re
from fractions import Fraction
from typing import Any

import numpy as np

_UNITS = {
    "ms": 1, "msec": 1, "msecs": 1, "millisecond": 1, "milliseconds": 1,
    "s": 1000, "sec": 1000, "secs": 1000, "second": 1000, "seconds": 1000,
    "m": 60_000, "min": 60_000, "mins": 60_000, "minute": 60_000, "minutes": 60_000,
    "h": 3_600_000, "hr": 3_600_000, "hrs": 3_600_000, "hour": 3_600_000, "hours": 3_600_000,
    "d": 86_400_000, "day": 86_400_000, "days": 86_400_000,
    "w": 604_800_000, "week": 604_800_000, "weeks": 604_800_000,
}
_PATTERN = re.compile(r"^\s*([+-]?(?:\d+(?:\.\d*)?|\.\d+))\s*([a-zA-Z]+)\s*$")
_INT64_MAX = 2**63 - 1


def parse_duration(value: Any) -> int:
    """A duration in whole milliseconds.

    >>> parse_duration("5 min"), parse_duration("500ms"), parse_duration(250)
    (300000, 500, 250)

    Raises ``TypeError`` for other types and ``ValueError`` (naming the value)
    for an unknown unit, a malformed string or a fraction of a millisecond.
    The sign is kept: callers that need a positive duration check it.
    """
    if isinstance(value, bool):
        raise TypeError(f"duration must be an int of ms, a string or a timedelta, got bool {value!r}")
    if isinstance(value, np.timedelta64):  # before ints: timedelta64 is an np.integer
        if np.isnat(value):
            raise ValueError(f"duration {value!r} is not a time (NaT)")
        ns = int(np.array(value).astype("timedelta64[ns]").astype(np.int64))
        if ns % 1_000_000:
            raise ValueError(f"duration {value!r} is not a whole number of milliseconds")
        ms = ns // 1_000_000
    elif isinstance(value, (int, np.integer)):
        ms = int(value)
    elif isinstance(value, _dt.timedelta):
        us = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
        if us % 1000:
            raise ValueError(f"duration {value!r} is not a whole number of milliseconds")
        ms = us // 1000
    elif isinstance(value, str):
        m = _PATTERN.match(value)
        if m is None:
            raise ValueError(f"cannot parse duration {value!r}: expected '<number> <unit>', "
                             "e.g. '500ms', '1s', '5 min', '2 h', '1 day'")
        number, unit = m.group(1), m.group(2).lower()
        if unit not in _UNITS:
            raise ValueError(f"unknown unit {m.group(2)!r} in duration {value!r} "
                             f"(known: ms, s, min, h, d, w)")
        scale = _UNITS[unit]
        if "." in number:
            exact = Fraction(number) * scale
            if exact.denominator != 1:
                raise ValueError(f"duration {value!r} is not a whole number of milliseconds")
            ms = int(exact)
        else:
            ms = int(number) * scale
    else:
        raise TypeError(f"duration must be an int of ms, a string or a timedelta, "
                        f"got {type(value).__name__} {value!r}")
    if abs(ms) > _INT64_MAX:
        raise ValueError(f"duration {value!r} does not fit in int64 milliseconds")
    return ms


def parse_positive_duration(value: Any, what: str) -> int:
    """``parse_duration`` that also requires ``> 0``; the error names ``what``."""
    ms = parse_duration(value)
    if ms <= 0:
        raise ValueError(f"{what} must be a positive duration, got {value!r}")
    return ms
