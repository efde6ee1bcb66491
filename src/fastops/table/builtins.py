"""Flink's built-in scalar functions (temporal, string, JSON, hashing, arithmetic,
conditional), column-at-a-time over Arrow arrays.

Each function takes ``pa.Array`` / ``pa.Scalar`` arguments and follows the
semantics of Flink's "System (Built-in) Functions" page: a null argument gives
a null result unless the page says otherwise, string positions count from 1
(``SPLIT_INDEX`` from 0, as in Flink), date patterns are Java's
(``'yyyy-MM-dd HH:mm:ss'``), the session time zone is UTC.

Most functions are ``pyarrow.compute`` kernels or NumPy over Arrow buffers.
Those with no kernel (hashes, JSON paths, ``ASCII``) run Python once per
*distinct* value of the batch (dictionary encoding), not once per row.

Regular expressions run on RE2 (Arrow's engine), not Java's: look-around,
back-references and possessive quantifiers are refused by RE2 with an error;
a group that takes no part in a match gives ``''`` where Java gives NULL.
``REGEXP_REPLACE``'s replacement takes Java's ``$1`` group references.

Registered in :data:`FUNCTIONS` (name -> callable), which
:mod:`fastops.table.expressions` adds to its function table.
"""
from __future__ import annotations

import base64
import hashlib
import json
import math
import re
import time
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pat

__all__ = ["FUNCTIONS", "NEEDS_ROWS", "FunctionError", "java_pattern"]


class FunctionError(ValueError):
    """A built-in function cannot be applied to its arguments."""


# ---------------------------------------------------------------- argument helpers

_MS_PER_DAY = 86_400_000
_UNIT_PER_S = {"s": 1, "ms": 1000, "us": 1_000_000, "ns": 1_000_000_000}


def _is_array(v: Any) -> bool:
    return isinstance(v, (pa.Array, pa.ChunkedArray))


def _arr(v: Any, n: int) -> pa.Array:
    """``v`` as an array of ``n`` values."""
    if isinstance(v, pa.ChunkedArray):
        return v.combine_chunks()
    if isinstance(v, pa.Scalar):
        return pa.nulls(n, v.type) if not v.is_valid else pa.repeat(v, n)
    return v


def _const(v: Any, fn: str, what: str) -> Any:
    """The one value of a literal argument (a scalar, or an array holding one value)."""
    if isinstance(v, pa.Scalar):
        return v.as_py()
    a = _arr(v, 0)
    if len(a) == 0:
        return None
    if len(a) == 1 or len(pc.unique(a)) == 1:
        return a[0].as_py()
    raise FunctionError(f"{fn.upper()} needs a literal {what}")


def _rows(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Run ``fn`` on arrays: scalar-only calls (constants) give a scalar."""
    def run(*args: Any) -> Any:
        if any(_is_array(a) for a in args):
            return fn(*[a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a for a in args])
        out = fn(*[_arr(a, 1) if isinstance(a, pa.Scalar) else a for a in args])
        return out[0] if _is_array(out) else out
    run.__name__ = fn.__name__
    run.__doc__ = fn.__doc__
    return run


def _len(*args: Any) -> int:
    for a in args:
        if _is_array(a):
            return len(a)
    return 1


def _null_any(out: pa.Array, *args: Any) -> pa.Array:
    """``out`` with nulls where any argument is null."""
    mask = None
    for a in args:
        if isinstance(a, pa.Scalar):
            if not a.is_valid:
                return pa.nulls(len(out), out.type)
            continue
        m = pc.is_null(a)
        mask = m if mask is None else pc.or_(mask, m)
    if mask is None:
        return out
    return pc.if_else(mask, pa.scalar(None, out.type), out)


def _map_distinct(a: pa.Array, fn: Callable[[Any], Any], out_type: pa.DataType) -> pa.Array:
    """``fn`` of each distinct non-null value of ``a`` (None stays None)."""
    if pat.is_dictionary(a.type):
        a = a.cast(a.type.value_type)
    d = pc.dictionary_encode(a)
    values = [None if v is None else fn(v) for v in d.dictionary.to_pylist()]
    return pc.take(pa.array(values, out_type), d.indices)


def _strings(a: pa.Array) -> pa.Array:
    if pat.is_large_string(a.type) or pat.is_dictionary(a.type):
        return a.cast(pa.string())
    return a


# ---------------------------------------------------------------- civil dates (NumPy)

def _civil(days: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Year, month, day of days since 1970-01-01 (proleptic Gregorian)."""
    z = days + 719468
    era = np.floor_divide(z, 146097)
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    y = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = np.where(mp < 10, mp + 3, mp - 9)
    return np.where(m <= 2, y + 1, y), m, d


def _days(y: np.ndarray, m: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Days since 1970-01-01 of a civil date."""
    y = np.where(m <= 2, y - 1, y)
    era = np.floor_divide(y, 400)
    yoe = y - era * 400
    mp = np.where(m > 2, m - 3, m + 9)
    doy = (153 * mp + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def _month_days(y: np.ndarray, m: np.ndarray) -> np.ndarray:
    leap = ((y % 4 == 0) & (y % 100 != 0)) | (y % 400 == 0)
    base = np.array([0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])[m]
    return np.where((m == 2) & leap, 29, base)


def _add_months_days(days: np.ndarray, months: np.ndarray) -> np.ndarray:
    """``days`` plus ``months`` calendar months, the day clamped to the month's last (Java's plusMonths)."""
    y, m, d = _civil(days)
    total = y * 12 + (m - 1) + months
    y2 = np.floor_divide(total, 12)
    m2 = total - y2 * 12 + 1
    return _days(y2, m2, np.minimum(d, _month_days(y2, m2)))


# ---------------------------------------------------------------- timestamps

def _as_timestamp(v: pa.Array, fn: str) -> pa.Array:
    """A timestamp array (UTC wall clock, no zone) from a timestamp, date or string."""
    t = v.type
    if pat.is_timestamp(t):
        return v.cast(pa.timestamp(t.unit)) if t.tz else v
    if pat.is_date(t):
        return v.cast(pa.timestamp("ms"))
    if pat.is_string(t) or pat.is_large_string(t):
        return _parse_default(_strings(v))
    if pat.is_null(t):
        return v.cast(pa.timestamp("ms"))
    raise FunctionError(f"{fn.upper()} takes a TIMESTAMP, DATE or STRING, got {t}")


def _ticks(ts: pa.Array) -> tuple[np.ndarray, int]:
    """The int64 values of a timestamp array (nulls as 0) and its ticks per second."""
    per_s = _UNIT_PER_S[ts.type.unit]
    return pc.fill_null(ts.cast(pa.int64()), 0).to_numpy(zero_copy_only=False), per_s


def _from_ticks(values: np.ndarray, like: pa.Array, valid: pa.Array | None = None) -> pa.Array:
    mask = pc.is_null(like) if valid is None else pc.invert(valid)
    out = pa.array(values, pa.int64(), mask=mask.to_numpy(zero_copy_only=False))
    return out.cast(like.type)


_DEFAULT_TS = re.compile(r"^\s*(\d{4})-(\d{1,2})-(\d{1,2})"
                         r"(?:[ T](\d{1,2}):(\d{1,2})(?::(\d{1,2})(?:\.(\d{1,9}))?)?)?\s*$")


def _parse_default(s: pa.Array) -> pa.Array:
    """'yyyy-MM-dd[ HH:mm[:ss[.fff]]]' strings as TIMESTAMP(3); unreadable ones NULL."""
    names = ["y", "M", "d", "H", "m", "s", "S"]
    pattern = _DEFAULT_TS.pattern.replace("(\\d", "(?P<{}>\\d")
    for nm in names:
        pattern = pattern.replace("(?P<{}>", f"(?P<{nm}>", 1)
    return _assemble(pc.extract_regex(s, pattern), names, "ms")


def _assemble(parts: pa.Array, names: list[str], unit: str) -> pa.Array:
    """Timestamps from a struct of matched strings (fields y, M, d, H, m, s, S); a
    field absent or empty takes 1970-01-01 00:00:00's; an invalid date gives NULL."""
    n = len(parts)
    if n == 0:
        return pa.array([], pa.timestamp(unit))
    valid = pc.is_valid(parts).to_numpy(zero_copy_only=False)
    flat = parts.flatten()

    def field(name: str, default: int) -> np.ndarray:
        if name not in names:
            return np.full(n, default, np.int64)
        a = flat[names.index(name)]
        a = pc.if_else(pc.equal(a, ""), pa.scalar(None, a.type), a)
        return pc.fill_null(a.cast(pa.int64()), default).to_numpy(zero_copy_only=False)

    y, mo, d = field("y", 1970), field("M", 1), field("d", 1)
    h, mi, s = field("H", 0), field("m", 0), field("s", 0)
    if "yy" in names:  # DateTimeFormatter's 'yy': 2000 to 2099
        y = 2000 + field("yy", 0)
    per_s = _UNIT_PER_S[unit]
    frac = np.zeros(n, np.int64)
    if "S" in names:
        fa = flat[names.index("S")]
        digits = pc.utf8_length(pc.fill_null(fa, "")).to_numpy(zero_copy_only=False)
        raw = pc.fill_null(pc.if_else(pc.equal(fa, ""), pa.scalar(None, fa.type), fa).cast(pa.int64()), 0)
        raw = raw.to_numpy(zero_copy_only=False)
        scale = 10 ** np.clip(9 - digits, 0, 9)
        frac = (raw * scale) // (1_000_000_000 // per_s)
    mc = np.clip(mo, 1, 12)
    ok = valid & (mo >= 1) & (mo <= 12) & (d >= 1) & (d <= _month_days(y, mc)) & (h < 24) & (mi < 60) & (s < 60)
    days = _days(y, mc, d)
    ticks = ((days * 86400 + h * 3600 + mi * 60 + s) * per_s + frac).astype(np.int64)
    return pa.array(ticks, pa.int64(), mask=~ok).cast(pa.timestamp(unit))


# Java date patterns: runs of one letter, 'quoted text' ('' is a quote), other characters as they are.
_TOKEN = re.compile(r"'((?:[^']|'')*)'|([A-Za-z])\2*|(.)", re.DOTALL)


def java_pattern(fmt: str) -> list[tuple[str, str]]:
    """Tokens of a Java date pattern: ``("field", "yyyy")`` or ``("text", "-")``."""
    out: list[tuple[str, str]] = []
    for m in _TOKEN.finditer(fmt):
        if m.group(1) is not None:
            out.append(("text", m.group(1).replace("''", "'") if m.group(1) else "'"))
        elif m.group(2) is not None:
            out.append(("field", m.group(0)))
        else:
            out.append(("text", m.group(3)))
    return out


_FORMAT_LETTERS = "yMdHhmsSEaDu"


def _pad(values: pa.Array, width: int) -> pa.Array:
    s = values.cast(pa.string())
    return pc.utf8_lpad(s, width=width, padding="0") if width > 1 else s


def _format(ts: pa.Array, fmt: str, fn: str) -> pa.Array:
    """``ts`` (a timestamp array) as strings of the Java pattern ``fmt``."""
    n = len(ts)
    pieces: list[Any] = []
    secs = pc.floor_temporal(ts, unit="second").cast(pa.timestamp("s")) if ts.type.unit != "s" else ts
    for kind, tok in java_pattern(fmt):
        if kind == "text":
            pieces.append(tok)
            continue
        c, k = tok[0], len(tok)
        if c == "y" or c == "u":
            y = pc.year(ts)
            pieces.append(_pad(pc.subtract(y, pc.multiply(pc.divide(y, 100), 100)), 2) if k == 2 else _pad(y, k))
        elif c == "M":
            pieces.append(pc.strftime(secs, "%B" if k >= 4 else "%b") if k >= 3 else _pad(pc.month(ts), k))
        elif c == "d":
            pieces.append(_pad(pc.day(ts), k))
        elif c == "D":
            pieces.append(_pad(pc.day_of_year(ts), k))
        elif c == "H":
            pieces.append(_pad(pc.hour(ts), k))
        elif c == "h":
            h = pc.hour(ts)
            h12 = pc.subtract(h, pc.multiply(pc.divide(h, 12), 12))
            pieces.append(_pad(pc.if_else(pc.equal(h12, 0), 12, h12), k))
        elif c == "m":
            pieces.append(_pad(pc.minute(ts), k))
        elif c == "s":
            pieces.append(_pad(pc.second(ts), k))
        elif c == "S":  # fraction of the second, truncated to k digits
            ns = pc.add(pc.add(pc.multiply(pc.millisecond(ts), 1_000_000), pc.multiply(pc.microsecond(ts), 1000)),
                        pc.nanosecond(ts))
            pieces.append(_pad(pc.divide(ns, 10 ** max(9 - k, 0)), min(k, 9)))
        elif c == "E":
            pieces.append(pc.strftime(secs, "%A" if k >= 4 else "%a"))
        elif c == "a":
            pieces.append(pc.if_else(pc.less(pc.hour(ts), 12), "AM", "PM"))
        else:
            raise FunctionError(f"{fn.upper()}: the pattern letter {c!r} of {fmt!r} is not supported "
                                f"(supported: {', '.join(_FORMAT_LETTERS)})")
    if not pieces:
        return pc.if_else(pc.is_valid(ts), "", pa.scalar(None, pa.string()))
    arrays = [p if _is_array(p) else pa.repeat(pa.scalar(p), n) for p in pieces]
    return pc.binary_join_element_wise(*arrays, "")


def _parse(s: pa.Array, fmt: str, fn: str, unit: str = "ms") -> pa.Array:
    """Strings of the Java pattern ``fmt`` as timestamps; those that do not match NULL."""
    regex = ["^"]
    names: list[str] = []
    for kind, tok in java_pattern(fmt):
        if kind == "text":
            regex.append(re.escape(tok))
            continue
        c, k = tok[0], len(tok)
        if c in ("y", "u") and k == 2:
            regex.append(r"(?P<yy>\d{2})")
            names.append("yy")
        elif c in ("y", "u"):  # 'yyyy': at least 4 digits, 'y': at least 1
            regex.append(f"(?P<y>\\d{{{k},9}})")
            names.append("y")
        elif c in "MdHms":  # 'MM': 2 digits, 'M': 1 or 2
            regex.append(f"(?P<{c}>\\d{{{k}}})" if k > 1 else f"(?P<{c}>\\d{{1,2}})")
            names.append(c)
        elif c == "S":
            regex.append(f"(?P<S>\\d{{{k}}})")
            names.append("S")
        else:
            raise FunctionError(f"{fn.upper()}: the pattern letter {c!r} of {fmt!r} is not supported for parsing "
                                "(supported: y, M, d, H, m, s, S)")
        if names.count(names[-1]) > 1:
            raise FunctionError(f"{fn.upper()}: the pattern {fmt!r} names a field twice")
    regex.append("$")
    if not names:
        raise FunctionError(f"{fn.upper()}: the pattern {fmt!r} has no date or time field")
    return _assemble(pc.extract_regex(s, "".join(regex)), names, unit)


def _unit(v: Any, fn: str) -> str:
    u = _const(v, fn, "time unit")
    return str(u).upper() if u is not None else ""


@_rows
def date_format(ts: Any, fmt: Any) -> Any:
    """DATE_FORMAT(timestamp | date | string, 'yyyy-MM-dd HH:mm:ss')."""
    f = _const(fmt, "date_format", "format")
    t = _as_timestamp(_arr(ts, _len(ts, fmt)), "date_format")
    if f is None:
        return pa.nulls(len(t), pa.string())
    return _format(t, f, "date_format")


def _field(kernel: Callable[[Any], Any], name: str) -> Callable[..., Any]:
    @_rows
    def run(ts: Any) -> Any:
        return kernel(_as_timestamp(ts, name)).cast(pa.int64())
    run.__name__ = name
    return run


def _day_of_week(ts: Any) -> Any:
    return pc.day_of_week(ts, count_from_zero=False, week_start=7)  # Sunday is 1, as Calcite's DOW


def _iso_day_of_week(ts: Any) -> Any:
    return pc.day_of_week(ts, count_from_zero=False, week_start=1)


_EXTRACT: dict[str, Callable[[Any], Any]] = {
    "YEAR": pc.year, "QUARTER": pc.quarter, "MONTH": pc.month, "WEEK": pc.iso_week, "DAY": pc.day,
    "DOY": pc.day_of_year, "DOW": _day_of_week, "ISODOW": _iso_day_of_week, "HOUR": pc.hour,
    "MINUTE": pc.minute, "SECOND": pc.second, "ISOYEAR": pc.iso_year,
}


@_rows
def extract(unit: Any, ts: Any) -> Any:
    """EXTRACT(unit FROM timestamp | date): BIGINT."""
    u = _unit(unit, "extract")
    if u not in _EXTRACT:
        raise FunctionError(f"EXTRACT({u} FROM ...) is not supported; the units are {', '.join(_EXTRACT)}")
    t = ts if pat.is_date(ts.type) else _as_timestamp(ts, "extract")
    if u in ("HOUR", "MINUTE", "SECOND") and pat.is_date(t.type):
        t = t.cast(pa.timestamp("ms"))
    return _EXTRACT[u](t).cast(pa.int64())


_FLOOR_UNITS = {"YEAR": "year", "QUARTER": "quarter", "MONTH": "month", "DAY": "day", "HOUR": "hour",
                "MINUTE": "minute", "SECOND": "second", "MILLISECOND": "millisecond"}


def _round_time(kind: str) -> Callable[..., Any]:
    @_rows
    def run(ts: Any, unit: Any) -> Any:
        u = _unit(unit, kind)
        if u not in _FLOOR_UNITS:
            raise FunctionError(f"{kind.upper()}(... TO {u}) is not supported; the units are {', '.join(_FLOOR_UNITS)}")
        f = pc.floor_temporal if kind == "floor" else pc.ceil_temporal
        return f(ts, unit=_FLOOR_UNITS[u])
    run.__name__ = f"{kind}_time"
    return run


@_rows
def to_timestamp(s: Any, fmt: Any = None) -> Any:
    """TO_TIMESTAMP(string[, format]): TIMESTAMP(3); NULL where the string does not parse."""
    s = _strings(_arr(s, _len(s, fmt)))
    if fmt is None:
        return _parse_default(s)
    f = _const(fmt, "to_timestamp", "format")
    return pa.nulls(len(s), pa.timestamp("ms")) if f is None else _parse(s, f, "to_timestamp")


@_rows
def to_date(s: Any, fmt: Any = None) -> Any:
    """TO_DATE(string[, format = 'yyyy-MM-dd']): DATE; NULL where the string does not parse."""
    s = _strings(_arr(s, _len(s, fmt)))
    f = "yyyy-MM-dd" if fmt is None else _const(fmt, "to_date", "format")
    if f is None:
        return pa.nulls(len(s), pa.date32())
    return _parse(s, f, "to_date").cast(pa.date32())


_LONG_MIN = -(2 ** 63)


def unix_timestamp(s: Any = None, fmt: Any = None) -> Any:
    """UNIX_TIMESTAMP(): now in seconds; UNIX_TIMESTAMP(string[, format]): the string's
    seconds since the epoch (UTC); Long.MIN_VALUE where it does not parse, as Flink."""
    if s is None:
        return pa.scalar(int(time.time()), pa.int64())
    return _unix_timestamp(s, fmt) if fmt is not None else _unix_timestamp(s)


@_rows
def _unix_timestamp(s: Any, fmt: Any = None) -> Any:
    s = _strings(s)
    f = "yyyy-MM-dd HH:mm:ss" if fmt is None else _const(fmt, "unix_timestamp", "format")
    if f is None:
        return pa.nulls(len(s), pa.int64())
    ts = _parse(s, f, "unix_timestamp")
    t, per_s = _ticks(ts)
    secs = np.floor_divide(t, per_s)
    out = pa.array(np.where(pc.is_valid(ts).to_numpy(zero_copy_only=False), secs, _LONG_MIN), pa.int64())
    return _null_any(out, s)


@_rows
def from_unixtime(n: Any, fmt: Any = None) -> Any:
    """FROM_UNIXTIME(seconds[, format = 'yyyy-MM-dd HH:mm:ss']): STRING (UTC)."""
    f = "yyyy-MM-dd HH:mm:ss" if fmt is None else _const(fmt, "from_unixtime", "format")
    n = _arr(n, _len(n, fmt))
    if f is None:
        return pa.nulls(len(n), pa.string())
    secs = pc.floor(n.cast(pa.float64())) if pat.is_floating(n.type) or pat.is_decimal(n.type) else n
    return _format(secs.cast(pa.int64()).cast(pa.timestamp("s")), f, "from_unixtime")


@_rows
def to_timestamp_ltz(n: Any, precision: Any = None) -> Any:
    """TO_TIMESTAMP_LTZ(epoch, 0 | 3): TIMESTAMP_LTZ(3) from seconds (0) or milliseconds (3)."""
    p = 3 if precision is None else _const(precision, "to_timestamp_ltz", "precision")
    if p not in (0, 3):
        raise FunctionError(f"TO_TIMESTAMP_LTZ's precision is 0 (seconds) or 3 (milliseconds), got {p}")
    ms = pc.multiply(n.cast(pa.int64()), 1000) if p == 0 else n.cast(pa.int64())
    return ms.cast(pa.timestamp("ms", tz="UTC"))


_ADD_MS = {"MILLISECOND": 1, "SECOND": 1000, "MINUTE": 60_000, "HOUR": 3_600_000, "DAY": _MS_PER_DAY,
           "WEEK": 7 * _MS_PER_DAY}
_ADD_MONTHS = {"MONTH": 1, "QUARTER": 3, "YEAR": 12}


@_rows
def timestampadd(unit: Any, amount: Any, ts: Any) -> Any:
    """TIMESTAMPADD(unit, n, timestamp | date): the time ``n`` units later (months clamp the day)."""
    u = _unit(unit, "timestampadd")
    n = _len(amount, ts)
    t = _arr(ts, n)
    is_date = pat.is_date(t.type)
    if is_date:
        t = t.cast(pa.timestamp("ms"))
    if not pat.is_timestamp(t.type):
        raise FunctionError(f"TIMESTAMPADD takes a TIMESTAMP or DATE, got {t.type}")
    k = pc.fill_null(_arr(amount, n).cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
    ticks, per_s = _ticks(t)
    if u in _ADD_MS:
        out = ticks + k * (_ADD_MS[u] * per_s // 1000)
    elif u in _ADD_MONTHS:
        per_day = 86400 * per_s
        days = np.floor_divide(ticks, per_day)
        out = _add_months_days(days, k * _ADD_MONTHS[u]) * per_day + (ticks - days * per_day)
    else:
        raise FunctionError(f"TIMESTAMPADD({u}, ...) is not supported; the units are "
                            f"{', '.join(list(_ADD_MS) + list(_ADD_MONTHS))}")
    res = _null_any(_from_ticks(out, t), amount)
    return res.cast(pa.date32()) if is_date else res


def _subtract_months(t0: np.ndarray, t1: np.ndarray) -> np.ndarray:
    """Whole months from ``t1`` to ``t0`` (ms), Flink's DateTimeUtils.subtractMonths."""
    ms0, ms1 = np.mod(t0, _MS_PER_DAY), np.mod(t1, _MS_PER_DAY)
    d0, d1 = (t0 - ms0) // _MS_PER_DAY, (t1 - ms1) // _MS_PER_DAY
    hi, lo = np.maximum(d0, d1), np.minimum(d0, d1)
    y0, m0, _ = _civil(hi)
    y1, m1, _ = _civil(lo)
    m = (y0 * 12 + m0) - (y1 * 12 + m1)
    m = np.where(_add_months_days(lo, m) > hi, m - 1, m)
    x = np.where(d0 < d1, -m, m)
    back = _add_months_days(d1, x)
    return np.where((back == d0) & (ms0 < ms1), x - 1, x)


@_rows
def timestampdiff(unit: Any, t1: Any, t2: Any) -> Any:
    """TIMESTAMPDIFF(unit, t1, t2): whole units from ``t1`` to ``t2`` (INT, truncated)."""
    u = _unit(unit, "timestampdiff")
    n = _len(t1, t2)
    a = _as_timestamp(_arr(t1, n), "timestampdiff").cast(pa.timestamp("ms"))
    b = _as_timestamp(_arr(t2, n), "timestampdiff").cast(pa.timestamp("ms"))
    x, _ = _ticks(a)
    y, _ = _ticks(b)
    if u in _ADD_MS:
        out = np.where(y >= x, (y - x) // _ADD_MS[u], -((x - y) // _ADD_MS[u]))
    elif u in _ADD_MONTHS:
        months = _subtract_months(y, x)
        q = _ADD_MONTHS[u]
        out = np.where(months >= 0, months // q, -((-months) // q))
    else:
        raise FunctionError(f"TIMESTAMPDIFF({u}, ...) is not supported; the units are "
                            f"{', '.join(list(_ADD_MS) + list(_ADD_MONTHS))}")
    mask = pc.or_(pc.is_null(a), pc.is_null(b)).to_numpy(zero_copy_only=False)
    return pa.array(out.astype(np.int32), pa.int32(), mask=mask)


def current_timestamp() -> Any:
    """CURRENT_TIMESTAMP / NOW() / PROCTIME(): the wall clock, TIMESTAMP_LTZ(3)."""
    return pa.scalar(int(time.time() * 1000), pa.timestamp("ms", tz="UTC"))


def localtimestamp() -> Any:
    """LOCALTIMESTAMP: the wall clock in the session zone (UTC), TIMESTAMP(3)."""
    return pa.scalar(int(time.time() * 1000), pa.timestamp("ms"))


def current_date() -> Any:
    return pa.scalar(int(time.time() // 86400), pa.int32()).cast(pa.date32())


# ---------------------------------------------------------------- strings

@_rows
def regexp(s: Any, pattern: Any) -> Any:
    """REGEXP(string, regex): TRUE if a substring matches."""
    p = _const(pattern, "regexp", "pattern")
    s = _strings(_arr(s, _len(s, pattern)))
    if p is None:
        return pa.nulls(len(s), pa.bool_())
    return pc.match_substring_regex(s, p)


def _named_groups(pattern: str) -> tuple[str, int]:
    """``pattern`` with its capturing groups named g1, g2, ... and all of it g0."""
    out = []
    i, k, in_class = 0, 0, False
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            out.append(pattern[i:i + 2])
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
        elif ch == "(" and not pattern.startswith("(?", i):
            k += 1
            out.append(f"(?P<g{k}>")
            i += 1
            continue
        out.append(ch)
        i += 1
    return f"(?P<g0>{''.join(out)})", k


@_rows
def regexp_extract(s: Any, pattern: Any, index: Any = None) -> Any:
    """REGEXP_EXTRACT(string, regex[, group = 0]): the group of the first match; NULL
    without a match or for a group the regex does not have."""
    n = _len(s, pattern, index)
    s = _strings(_arr(s, n))
    p = _const(pattern, "regexp_extract", "pattern")
    g = 0 if index is None else _const(index, "regexp_extract", "group index")
    if p is None or g is None:
        return pa.nulls(n, pa.string())
    named, groups = _named_groups(p)
    if not 0 <= g <= groups:
        return pa.nulls(n, pa.string())
    try:
        parts = pc.extract_regex(s, named)
    except pa.ArrowInvalid as exc:
        raise FunctionError(f"REGEXP_EXTRACT: {p!r} is not a regular expression RE2 reads ({exc})") from None
    return pc.struct_field(parts, [g]) if n else pa.array([], pa.string())


def _java_replacement(rep: str) -> str:
    """Java's replacement string (``$1``, ``\\$``) in RE2's form (``\\1``)."""
    out = []
    i = 0
    while i < len(rep):
        ch = rep[i]
        if ch == "\\" and i + 1 < len(rep):
            nxt = rep[i + 1]
            out.append("\\\\" if nxt == "\\" else nxt)
            i += 2
        elif ch == "$" and i + 1 < len(rep) and rep[i + 1].isdigit():
            out.append("\\" + rep[i + 1])
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


@_rows
def regexp_replace(s: Any, pattern: Any, replacement: Any) -> Any:
    """REGEXP_REPLACE(string, regex, replacement): every match replaced."""
    n = _len(s, pattern, replacement)
    s = _strings(_arr(s, n))
    p = _const(pattern, "regexp_replace", "pattern")
    r = _const(replacement, "regexp_replace", "replacement")
    if p is None or r is None:
        return pa.nulls(n, pa.string())
    try:
        return pc.replace_substring_regex(s, pattern=p, replacement=_java_replacement(r))
    except pa.ArrowInvalid as exc:
        raise FunctionError(f"REGEXP_REPLACE: {p!r} is not a regular expression RE2 reads ({exc})") from None


def _list_item(lists: pa.Array, index: np.ndarray) -> pa.Array:
    """Element ``index[i]`` of each list (NULL where out of range)."""
    lens = pc.fill_null(pc.list_value_length(lists), 0).to_numpy(zero_copy_only=False)
    offsets = lists.offsets.to_numpy()[:len(lists)] - lists.offsets[0].as_py()
    ok = (index >= 0) & (index < lens) & pc.is_valid(lists).to_numpy(zero_copy_only=False)
    flat = lists.flatten()
    pos = np.where(ok, offsets + index, 0)
    if len(flat) == 0:
        return pa.nulls(len(lists), flat.type)
    picked = pc.take(flat, pa.array(pos))
    return pc.if_else(pa.array(ok), picked, pa.scalar(None, flat.type))


@_rows
def split_index(s: Any, delim: Any, index: Any) -> Any:
    """SPLIT_INDEX(string, delimiter, i): the i-th (from 0) piece; NULL if i < 0 or past the end."""
    n = _len(s, delim, index)
    s = _strings(_arr(s, n))
    d = _const(delim, "split_index", "delimiter")
    idx = _arr(index, n)
    if d is None or n == 0:
        return pa.nulls(n, pa.string())
    if d == "":  # Commons' splitByWholeSeparatorPreserveAllTokens splits on whitespace then
        lists = pc.split_pattern_regex(s, r"\s")
    else:
        lists = pc.split_pattern(s, d)
    i = pc.fill_null(idx.cast(pa.int64()), -1).to_numpy(zero_copy_only=False)
    out = _list_item(lists, i)
    return pc.if_else(pc.equal(s, ""), pa.scalar(None, pa.string()), _null_any(out, idx))


def _position(s: pa.Array, sub: str) -> pa.Array:
    """1-based character position of ``sub`` in each string, 0 if absent."""
    if sub == "":
        return pc.if_else(pc.is_valid(s), 1, pa.scalar(None, pa.int32())).cast(pa.int32())
    head = pc.list_element(pc.split_pattern(s, sub, max_splits=1), 0)
    found = pc.match_substring(s, sub)
    return pc.if_else(found, pc.add(pc.utf8_length(head), 1), 0).cast(pa.int32())


@_rows
def instr(s: Any, sub: Any) -> Any:
    """INSTR(string, sub): the position (from 1) of ``sub``'s first occurrence, 0 if none."""
    n = _len(s, sub)
    s = _strings(_arr(s, n))
    t = _const(sub, "instr", "substring")
    return pa.nulls(n, pa.int32()) if t is None else _position(s, t)


@_rows
def locate(sub: Any, s: Any, start: Any = None) -> Any:
    """LOCATE(sub, string[, from]) / POSITION(sub IN string): position from 1, 0 if none."""
    n = _len(sub, s, start)
    s = _strings(_arr(s, n))
    t = _const(sub, "locate", "substring")
    st = 1 if start is None else _const(start, "locate", "start position")
    if t is None or st is None:
        return pa.nulls(n, pa.int32())
    if st <= 1:
        return _position(s, t)
    rest = pc.utf8_slice_codeunits(s, st - 1)
    p = _position(rest, t)
    return pc.if_else(pc.greater(p, 0), pc.add(p, st - 1), 0).cast(pa.int32())


def _padder(side: str) -> Callable[..., Any]:
    @_rows
    def run(s: Any, length: Any, padding: Any) -> Any:
        n = _len(s, length, padding)
        s = _strings(_arr(s, n))
        ln = _const(length, f"{side}pad", "length")
        p = _const(padding, f"{side}pad", "padding")
        if ln is None or p is None or ln < 0 or p == "":
            return pa.nulls(n, pa.string())
        fill = (p * (ln // len(p) + 1))[:ln]
        prefixes = pa.array([fill[:k] for k in range(ln + 1)])  # the padding a row needs, by its length
        body = pc.utf8_slice_codeunits(s, 0, ln)
        need = pc.max_element_wise(pc.subtract(ln, pc.utf8_length(s).cast(pa.int64())), 0)
        pad = pc.take(prefixes, pc.fill_null(need, 0))
        out = pc.binary_join_element_wise(pad, body, "") if side == "l" else \
            pc.binary_join_element_wise(body, pad, "")
        return _null_any(out, s)
    run.__name__ = f"{side}pad"
    return run


@_rows
def repeat(s: Any, times: Any) -> Any:
    """REPEAT(string, n): ``n`` copies; '' for n <= 0."""
    n = _len(s, times)
    s = _strings(_arr(s, n))
    k = pc.max_element_wise(_arr(times, n).cast(pa.int64()), 0)
    return pc.binary_repeat(s, k)


def _ascii_bytes(s: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    s = _strings(s)
    bufs = s.buffers()
    offsets = np.frombuffer(bufs[1], np.int32)[s.offset:s.offset + len(s) + 1]
    data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    return offsets, data


@_rows
def initcap(s: Any) -> Any:
    """INITCAP(string): each word's first letter upper case, the others lower; a word is a
    run of ASCII letters and digits (Calcite's rule)."""
    s = _strings(s)
    if len(s) == 0:
        return s
    offsets, data = _ascii_bytes(s)
    lo, hi = int(offsets[0]), int(offsets[-1])
    b = data[lo:hi].copy()
    upper = (b >= 65) & (b <= 90)
    lower = (b >= 97) & (b <= 122)
    alnum = upper | lower | ((b >= 48) & (b <= 57))
    start = np.ones(len(b), bool)
    start[1:] = ~alnum[:-1]
    start[offsets[:-1][offsets[:-1] < hi] - lo] = True  # each string starts a word
    b = np.where(lower & start, b - 32, np.where(upper & ~start, b + 32, b)).astype(np.uint8)
    new_offsets = (offsets - lo).astype(np.int32)
    out = pa.StringArray.from_buffers(len(s), pa.py_buffer(new_offsets.tobytes()), pa.py_buffer(b.tobytes()))
    return pc.if_else(pc.is_valid(s), out, pa.scalar(None, pa.string())) if s.null_count else out


@_rows
def left(s: Any, k: Any) -> Any:
    """LEFT(string, n): the first ``n`` characters ('' for n < 0)."""
    n = _len(s, k)
    s = _strings(_arr(s, n))
    c = _const(k, "left", "length")
    if c is None:
        return pa.nulls(n, pa.string())
    return pc.utf8_slice_codeunits(s, 0, max(c, 0))


@_rows
def right(s: Any, k: Any) -> Any:
    """RIGHT(string, n): the last ``n`` characters ('' for n <= 0)."""
    n = _len(s, k)
    s = _strings(_arr(s, n))
    c = _const(k, "right", "length")
    if c is None:
        return pa.nulls(n, pa.string())
    if c <= 0:
        return pc.utf8_slice_codeunits(s, 0, 0)
    return pc.utf8_slice_codeunits(s, -c)


def _trim(side: str) -> Callable[..., Any]:
    kernel = {"both": pc.utf8_trim, "leading": pc.utf8_ltrim, "trailing": pc.utf8_rtrim}[side]

    @_rows
    def run(s: Any, chars: Any = None) -> Any:
        n = _len(s, chars)
        s = _strings(_arr(s, n))
        c = " " if chars is None else _const(chars, "trim", "characters")
        if c is None:
            return pa.nulls(n, pa.string())
        return kernel(s, characters=c) if c else s
    run.__name__ = f"trim_{side}"
    return run


@_rows
def replace(s: Any, search: Any, replacement: Any) -> Any:
    """REPLACE(string, search, replacement): every (non-overlapping) occurrence replaced."""
    n = _len(s, search, replacement)
    s = _strings(_arr(s, n))
    a = _const(search, "replace", "search string")
    b = _const(replacement, "replace", "replacement")
    if a is None or b is None:
        return pa.nulls(n, pa.string())
    if a == "":  # Java's String.replace("", x) puts x around every character
        return pc.binary_join_element_wise(b, pc.replace_substring_regex(s, "(.)", _java_replacement(f"$1{b}")), "")
    return pc.replace_substring(s, pattern=a, replacement=b)


@_rows
def concat_ws(sep: Any, *args: Any) -> Any:
    """CONCAT_WS(sep, s1, s2, ...): the non-null strings joined by ``sep``; NULL if sep is NULL."""
    n = _len(sep, *args)
    sep = _strings(_arr(sep, n)).cast(pa.string())
    if not args:
        return pc.if_else(pc.is_valid(sep), "", pa.scalar(None, pa.string()))
    cols = [_strings(_arr(a, n)).cast(pa.string()) for a in args]
    # each row's non-null values as a list, joined (Arrow's null_handling="skip" loses rows)
    k = len(cols)
    flat = pc.take(pa.concat_arrays(cols), pa.array((np.arange(k)[None, :] * n + np.arange(n)[:, None]).ravel()))
    valid = pc.is_valid(flat).to_numpy(zero_copy_only=False)
    offsets = np.concatenate([[0], np.cumsum(valid.reshape(n, k).sum(axis=1))]).astype(np.int32)
    lists = pa.ListArray.from_arrays(pa.array(offsets), flat.filter(pa.array(valid)))
    return pc.binary_join(lists, sep)


@_rows
def substring(s: Any, start: Any, length: Any = None) -> Any:
    """SUBSTRING(string FROM pos [FOR len]) / SUBSTR: Flink's rule: pos counts from 1, a
    negative pos from the end, 0 as 1; NULL for a negative length."""
    n = _len(s, start, length)
    s = _strings(_arr(s, n))
    st = _const(start, "substring", "start")
    ln = None if length is None else _const(length, "substring", "length")
    if st is None or (length is not None and ln is None) or (ln is not None and ln < 0):
        return pa.nulls(n, pa.string())
    begin = st - 1 if st > 0 else st
    if ln is None:
        return pc.utf8_slice_codeunits(s, begin) if begin < 0 or st > 0 else pc.utf8_slice_codeunits(s, 0)
    if st > 0 or st == 0:
        return pc.utf8_slice_codeunits(s, begin if st > 0 else 0, (begin if st > 0 else 0) + ln)
    stop = st + ln
    return pc.utf8_slice_codeunits(s, st, stop) if stop < 0 else pc.utf8_slice_codeunits(s, st)


@_rows
def ascii_code(s: Any) -> Any:
    """ASCII(string): the code of the first character (0 for '')."""
    first = pc.utf8_slice_codeunits(_strings(s), 0, 1)
    return _map_distinct(first, lambda c: ord(c) if c else 0, pa.int32())


_CHR_TABLE = pa.array([chr(i) for i in range(256)])


@_rows
def chr_code(k: Any) -> Any:
    """CHR(n): the character of code ``n`` mod 256 ('' for n < 0)."""
    v = k.cast(pa.int64())
    idx = pc.bit_wise_and(pc.max_element_wise(v, 0), 255)
    out = pc.take(_CHR_TABLE, idx)
    return pc.if_else(pc.less(v, 0), "", out)


@_rows
def is_digit(s: Any) -> Any:
    return pc.fill_null(pc.utf8_is_digit(_strings(s)), False)


@_rows
def is_alpha(s: Any) -> Any:
    return pc.fill_null(pc.utf8_is_alpha(_strings(s)), False)


@_rows
def to_base64(s: Any) -> Any:
    return _map_distinct(_strings(s), lambda v: base64.b64encode(v.encode()).decode(), pa.string())


@_rows
def from_base64(s: Any) -> Any:
    return _map_distinct(_strings(s), lambda v: base64.b64decode(v).decode("utf-8", "replace"), pa.string())


# ---------------------------------------------------------------- hashing

def _hasher(algo: str) -> Callable[..., Any]:
    @_rows
    def run(s: Any) -> Any:
        if pat.is_binary(s.type):
            return _map_distinct(s, lambda v: hashlib.new(algo, v).hexdigest(), pa.string())
        return _map_distinct(_strings(s).cast(pa.string()), lambda v: hashlib.new(algo, v.encode()).hexdigest(),
                             pa.string())
    run.__name__ = algo
    return run


_SHA2 = {224: "sha224", 256: "sha256", 384: "sha384", 512: "sha512"}


@_rows
def sha2(s: Any, bits: Any) -> Any:
    """SHA2(string, 224 | 256 | 384 | 512)."""
    b = _const(bits, "sha2", "hash length")
    if b is None:
        return pa.nulls(len(s), pa.string())
    if b not in _SHA2:
        raise FunctionError(f"SHA2's hash length is 224, 256, 384 or 512, got {b}")
    return _hasher(_SHA2[b])(s)


# ---------------------------------------------------------------- arithmetic

def _float(v: Any) -> Any:
    return v.cast(pa.float64()) if not pat.is_floating(v.type) else v


@_rows
def log(a: Any, b: Any = None) -> Any:
    """LOG(x): ln(x); LOG(base, x): the logarithm of x to ``base``."""
    if b is None:
        return pc.ln(_float(a))
    return pc.divide(pc.ln(_float(b)), pc.ln(_float(a)))


@_rows
def power(a: Any, b: Any) -> Any:
    """POWER(x, y): DOUBLE."""
    return pc.power(_float(a), _float(b))


@_rows
def truncate(x: Any, digits: Any = None) -> Any:
    """TRUNCATE(x[, d]): ``x`` cut (toward zero) to ``d`` decimal places (d < 0: digits left of the point)."""
    d = 0 if digits is None else _const(digits, "truncate", "digits")
    if d is None:
        return pa.nulls(len(x), x.type)
    if pat.is_integer(x.type):
        if d >= 0:
            return x
        f = 10 ** (-d)
        return pc.multiply(pc.divide(x, f), f).cast(x.type)  # integer division truncates toward zero
    scale = 10.0 ** d
    return pc.divide(pc.trunc(pc.multiply(_float(x), scale)), scale).cast(x.type)


@_rows
def sign(x: Any) -> Any:
    """SIGN(x): -1, 0 or 1 of ``x``'s type."""
    return pc.sign(x).cast(x.type)


@_rows
def sql_round(x: Any, digits: Any = None) -> Any:
    """ROUND(x[, d]): half away from zero (Java's HALF_UP)."""
    d = 0 if digits is None else _const(digits, "round", "digits")
    if d is None:
        return pa.nulls(len(x), x.type)
    if pat.is_integer(x.type) and d >= 0:
        return x
    return pc.round(x, int(d), round_mode="half_towards_infinity")


def pi() -> Any:
    return pa.scalar(math.pi)


def e() -> Any:
    return pa.scalar(math.e)


def _radix(bits_per_digit: int) -> Callable[..., Any]:
    digits = pa.array(list("0123456789ABCDEF"[:2 ** bits_per_digit]))
    width = 64 // bits_per_digit

    def ints(v: pa.Array) -> pa.Array:
        """Java's Long.toBinaryString / toHexString (upper case): two's complement, no leading zeros."""
        u = pc.fill_null(v.cast(pa.int64()), 0).to_numpy(zero_copy_only=False).view(np.uint64)
        shifts = np.arange(width - 1, -1, -1, dtype=np.uint64) * np.uint64(bits_per_digit)
        d = ((u[:, None] >> shifts[None, :]) & np.uint64(2 ** bits_per_digit - 1)).astype(np.int64)
        chars = pc.take(digits, pa.array(d.ravel()))
        data = np.frombuffer(chars.buffers()[2], np.uint8)[:len(u) * width]  # one byte per digit
        offsets = np.arange(len(u) + 1, dtype=np.int32) * width
        fixed = pa.StringArray.from_buffers(len(u), pa.py_buffer(offsets.tobytes()), pa.py_buffer(data.tobytes()))
        out = pc.utf8_ltrim(fixed, characters="0")
        out = pc.if_else(pc.equal(out, ""), "0", out)
        return pc.if_else(pc.is_valid(v), out, pa.scalar(None, pa.string()))
    return ints


_bin = _radix(1)
_hex_ints = _radix(4)


@_rows
def bin_string(v: Any) -> Any:
    """BIN(n): ``n`` in binary (two's complement for negatives)."""
    return _bin(v)


@_rows
def hex_string(v: Any) -> Any:
    """HEX(n | string): a number in hex (two's complement), a string's UTF-8 bytes in hex."""
    if pat.is_integer(v.type) or pat.is_floating(v.type):
        return _hex_ints(v)
    if pat.is_string(v.type) or pat.is_large_string(v.type):
        return _map_distinct(_strings(v), lambda s: s.encode().hex().upper(), pa.string())
    if pat.is_binary(v.type):
        return _map_distinct(v, lambda s: s.hex().upper(), pa.string())
    raise FunctionError(f"HEX takes a number or a string, got {v.type}")


def _trig(kernel: Callable[[Any], Any], name: str) -> Callable[..., Any]:
    @_rows
    def run(x: Any) -> Any:
        return kernel(_float(x))
    run.__name__ = name
    return run


def _cot(x: Any) -> Any:
    return pc.divide(1.0, pc.tan(x))


def _degrees(x: Any) -> Any:
    return pc.multiply(x, 180.0 / math.pi)


def _radians(x: Any) -> Any:
    return pc.multiply(x, math.pi / 180.0)


def _np_unary(fn: Callable[[np.ndarray], np.ndarray]) -> Callable[[Any], Any]:
    def run(x: Any) -> Any:
        vals = pc.fill_null(x, 0.0).to_numpy(zero_copy_only=False)
        return pa.array(fn(vals), pa.float64(), mask=pc.is_null(x).to_numpy(zero_copy_only=False))
    return run


@_rows
def atan2(y: Any, x: Any) -> Any:
    return pc.atan2(_float(y), _float(x))


def rand(n: int, seed: Any = None) -> Any:
    """RAND(): uniform doubles in [0, 1), one per row (not Java's sequence for a seed)."""
    rng = np.random.default_rng(None if seed is None else _const(seed, "rand", "seed"))
    return pa.array(rng.random(n))


def rand_integer(n: int, a: Any, b: Any = None) -> Any:
    """RAND_INTEGER(bound) / RAND_INTEGER(seed, bound): integers in [0, bound), one per row."""
    seed, bound = (None, a) if b is None else (a, b)
    hi = _const(bound, "rand_integer", "bound")
    rng = np.random.default_rng(None if seed is None else _const(seed, "rand_integer", "seed"))
    return pa.array(rng.integers(0, hi, n), pa.int32())


def uuid4(n: int) -> Any:
    """UUID(): a random (version 4) UUID string per row."""
    return pa.array([str(uuid.uuid4()) for _ in range(n)], pa.string())


# ---------------------------------------------------------------- conditional

def _common(vals: list[pa.Array]) -> list[pa.Array]:
    types = {v.type for v in vals if not pat.is_null(v.type)}
    if len(types) <= 1:
        t = types.pop() if types else pa.null()
        return [v.cast(t) for v in vals]
    if all(pat.is_integer(t) for t in types):
        return [v.cast(pa.int64()) for v in vals]
    if all(pat.is_integer(t) or pat.is_floating(t) or pat.is_decimal(t) for t in types):
        return [v.cast(pa.float64()) for v in vals]
    if all(pat.is_string(t) or pat.is_large_string(t) for t in types):
        return [v.cast(pa.string()) for v in vals]
    if all(pat.is_timestamp(t) for t in types):
        return [v.cast(pa.timestamp("us")) if v.type.tz is None else v for v in vals]
    raise FunctionError(f"no common type for {sorted(str(t) for t in types)}")


def _extreme(kernel: Callable[..., Any], name: str) -> Callable[..., Any]:
    @_rows
    def run(*args: Any) -> Any:
        n = _len(*args)
        vals = _common([_arr(a, n) for a in args])
        out = kernel(*vals, skip_nulls=False)  # NULL if any argument is NULL (Flink)
        return out
    run.__name__ = name
    return run


@_rows
def nullif(a: Any, b: Any) -> Any:
    """NULLIF(a, b): NULL if a = b, else a."""
    n = _len(a, b)
    x, y = _common([_arr(a, n), _arr(b, n)])
    same = pc.fill_null(pc.equal(x, y), False)
    return pc.if_else(same, pa.scalar(None, x.type), x)


@_rows
def is_distinct_from(a: Any, b: Any) -> Any:
    """a IS DISTINCT FROM b: nulls compare equal to each other, unequal to values."""
    n = _len(a, b)
    x, y = _common([_arr(a, n), _arr(b, n)])
    xn, yn = pc.is_null(x), pc.is_null(y)
    if pat.is_null(x.type):
        return pc.invert(yn) if not pat.is_null(y.type) else pa.repeat(pa.scalar(False), n)
    return pc.if_else(pc.or_(xn, yn), pc.xor(xn, yn), pc.fill_null(pc.not_equal(x, y), True))


@_rows
def is_not_distinct_from(a: Any, b: Any) -> Any:
    return pc.invert(is_distinct_from(a, b))


# ---------------------------------------------------------------- JSON

_PATH_STEP = re.compile(r"""\.(?P<key>[A-Za-z_$][\w$]*)|\[\s*(?P<idx>\d+|\*)\s*\]"""
                        r"""|\.?\[\s*(?P<q>'(?:[^']|'')*'|"[^"]*")\s*\]|\.\*""")


def _json_path(path: str, fn: str) -> tuple[str, list[Any]]:
    """``'[lax | strict] $.a[0]["b c"]'`` as its mode and steps (a key, an index or '*')."""
    p = path.strip()
    mode = "lax"
    for word in ("lax", "strict"):
        if p.lower().startswith(word + " "):
            mode, p = word, p[len(word):].strip()
    if not p.startswith("$"):
        raise FunctionError(f"{fn.upper()}: the JSON path {path!r} must start with $")
    steps: list[Any] = []
    i = 1
    while i < len(p):
        m = _PATH_STEP.match(p, i)
        if m is None:
            raise FunctionError(f"{fn.upper()}: cannot read the JSON path {path!r} at {p[i:]!r} "
                                "(paths are $, .key, ['key'], [n], [*])")
        if m.group("key") is not None:
            steps.append(m.group("key"))
        elif m.group("idx") is not None:
            steps.append("*" if m.group("idx") == "*" else int(m.group("idx")))
        elif m.group("q") is not None:
            q = m.group("q")
            steps.append(q[1:-1].replace("''", "'"))
        else:
            steps.append("*")
        i = m.end()
    return mode, steps


class _Missing(Exception):
    pass


def _walk(doc: Any, steps: list[Any], mode: str) -> list[Any]:
    """The values the path's steps reach (lax: a missing member is no value; strict: an error)."""
    cur = [doc]
    for s in steps:
        nxt = []
        for v in cur:
            if s == "*":
                if isinstance(v, list):
                    nxt.extend(v)
                elif isinstance(v, dict):
                    nxt.extend(v.values())
                elif mode == "strict":
                    raise _Missing
            elif isinstance(s, int):
                if isinstance(v, list) and s < len(v):
                    nxt.append(v[s])
                elif mode == "strict":
                    raise _Missing
            elif isinstance(v, dict) and s in v:
                nxt.append(v[s])
            elif isinstance(v, list) and mode == "lax":
                nxt.extend(x[s] for x in v if isinstance(x, dict) and s in x)
            elif mode == "strict":
                raise _Missing
        cur = nxt
    return cur


def _scalar_text(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, bool):
        return "true" if v else "false"
    return v if isinstance(v, str) else json.dumps(v)


def _json_fn(kind: str) -> Callable[..., Any]:
    @_rows
    def run(doc: Any, path: Any) -> Any:
        n = _len(doc, path)
        d = _strings(_arr(doc, n))
        p = _const(path, f"json_{kind}", "path")
        out_type = pa.bool_() if kind == "exists" else pa.string()
        if p is None:
            return pa.nulls(n, out_type)
        mode, steps = _json_path(p, f"json_{kind}")

        def one(text: str) -> Any:
            try:
                found = _walk(json.loads(text), steps, mode)
            except (ValueError, _Missing):
                return False if kind == "exists" else None
            if kind == "exists":
                return bool(found)
            if kind == "value":  # one scalar, else NULL (NULL ON EMPTY / NULL ON ERROR)
                if len(found) != 1 or isinstance(found[0], (dict, list)):
                    return None
                return _scalar_text(found[0])
            if len(found) > 1 or "*" in steps:  # several values: a wrapped array (as Flink's example)
                return json.dumps(found, separators=(",", ":")) if found else None
            if not found or not isinstance(found[0], (dict, list)):
                return None
            return json.dumps(found[0], separators=(",", ":"))
        out = _map_distinct(d, one, out_type)
        return out if kind != "exists" else _null_any(out, d)
    run.__name__ = f"json_{kind}"
    return run


# ---------------------------------------------------------------- the table

_SECOND_TS: dict[str, Callable[[Any], Any]] = {
    "year": pc.year, "quarter": pc.quarter, "month": pc.month, "week": pc.iso_week,
    "dayofyear": pc.day_of_year, "dayofmonth": pc.day, "dayofweek": _day_of_week,
    "hour": pc.hour, "minute": pc.minute, "second": pc.second,
}

FUNCTIONS: dict[str, Callable[..., Any]] = {
    # temporal
    "date_format": date_format, "extract": extract, "floor_time": _round_time("floor"),
    "ceil_time": _round_time("ceil"), "to_timestamp": to_timestamp, "to_date": to_date,
    "unix_timestamp": unix_timestamp, "from_unixtime": from_unixtime, "to_timestamp_ltz": to_timestamp_ltz,
    "timestampadd": timestampadd, "timestampdiff": timestampdiff, "current_timestamp": current_timestamp,
    "localtimestamp": localtimestamp, "current_date": current_date, "proctime": current_timestamp,
    **{name: _field(kernel, name) for name, kernel in _SECOND_TS.items()},
    # string
    "regexp": regexp, "regexp_extract": regexp_extract, "regexp_replace": regexp_replace,
    "split_index": split_index, "instr": instr, "locate": locate, "lpad": _padder("l"), "rpad": _padder("r"),
    "repeat": repeat, "reverse": _rows(lambda s: pc.utf8_reverse(_strings(s))), "initcap": initcap,
    "left": left, "right": right, "trim_both": _trim("both"), "trim_leading": _trim("leading"),
    "trim_trailing": _trim("trailing"), "replace": replace, "concat_ws": concat_ws, "substring": substring,
    "ascii": ascii_code, "chr": chr_code, "is_digit": is_digit, "is_alpha": is_alpha,
    "to_base64": to_base64, "from_base64": from_base64,
    # hashing
    "md5": _hasher("md5"), "sha1": _hasher("sha1"), "sha224": _hasher("sha224"), "sha256": _hasher("sha256"),
    "sha384": _hasher("sha384"), "sha512": _hasher("sha512"), "sha2": sha2,
    # arithmetic
    "log": log, "log2": _trig(pc.log2, "log2"), "log10": _trig(pc.log10, "log10"), "power": power,
    "truncate": truncate, "sign": sign, "round": sql_round, "pi": pi, "e": e, "bin": bin_string,
    "hex": hex_string, "sin": _trig(pc.sin, "sin"), "cos": _trig(pc.cos, "cos"), "tan": _trig(pc.tan, "tan"),
    "cot": _trig(_cot, "cot"), "asin": _trig(pc.asin, "asin"), "acos": _trig(pc.acos, "acos"),
    "atan": _trig(pc.atan, "atan"), "atan2": atan2, "sinh": _trig(_np_unary(np.sinh), "sinh"),
    "cosh": _trig(_np_unary(np.cosh), "cosh"), "tanh": _trig(_np_unary(np.tanh), "tanh"),
    "degrees": _trig(_degrees, "degrees"), "radians": _trig(_radians, "radians"),
    "rand": rand, "rand_integer": rand_integer, "uuid": uuid4,
    # conditional
    "greatest": _extreme(pc.max_element_wise, "greatest"), "least": _extreme(pc.min_element_wise, "least"),
    "nullif": nullif, "is_distinct_from": is_distinct_from, "is_not_distinct_from": is_not_distinct_from,
    # JSON
    "json_value": _json_fn("value"), "json_exists": _json_fn("exists"), "json_query": _json_fn("query"),
}

# Functions called with the batch's row count first (a value per row, none of them from a column).
NEEDS_ROWS = frozenset({"rand", "rand_integer", "uuid"})
