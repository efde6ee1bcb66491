"""``TableResult.print()``: the ASCII grid of PyFlink / the Flink SQL client.

Layout (Flink's tableau style)::

    +----+----------------------+--------------------------------+
    | op |                   id |                           data |
    +----+----------------------+--------------------------------+
    | +I |                    1 |                             Hi |
    +----+----------------------+--------------------------------+
    1 row in set

- every cell is right-aligned with one space of padding either side;
- column widths from the types, in both modes (Flink's ``TableResult.print``
  uses ``TableauStyle.columnWidthsByType``): BIGINT 20, INT 11, SMALLINT 6,
  TINYINT 4, BOOLEAN 5, DATE 10, DECIMAL(p, s) p + 2, TIMESTAMP(p) 19 / 23 /
  26 / 29 for p = 0 / <=3 / <=6 / more, anything else 30; at least the
  name's length and 6 (``<NULL>``);
- streaming mode: a first ``op`` column with the row kind; batch mode: none;
- ``render`` without ``by_type`` (other callers, e.g. the demo) sizes the
  columns of a grid without ``op`` from the content (names and values),
  capped at 30, as Flink's ``tableauWithDataInferredColumnWidths``;
- a value wider than its column is cut and ends in ``...``;
- the footer is ``N rows in set`` (``1 row in set``); no rows print ``Empty set``.

Values print as Flink casts them to strings: ``<NULL>``, ``TRUE``/``FALSE``,
doubles as Java's ``Double.toString`` (``1.0``, ``1.0E10``), timestamps as
``2020-04-15 08:05:00.000`` (the fraction has the type's precision).
"""
from __future__ import annotations

import datetime as _dt
import math
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.types as pat

__all__ = ["MAX_COLUMN_WIDTH", "NULL_VALUE", "format_value", "render"]

MAX_COLUMN_WIDTH = 30
NULL_VALUE = "<NULL>"
_TRUNCATED = "..."


def _java_double(x: float, single: bool = False) -> str:
    """Java's ``Double.toString`` / ``Float.toString`` (shortest round-trip digits)."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    v = np.float32(x) if single else np.float64(x)
    if 1e-3 <= abs(x) < 1e7:
        return np.format_float_positional(v, unique=True, trim="0")
    mant, exp = np.format_float_scientific(v, unique=True, trim="0").split("e")
    return f"{mant}E{int(exp)}"


def _fraction(us_or_ns: int, digits: int) -> str:
    return str(us_or_ns).rjust(9, "0")[:digits]


def format_value(v: Any, t: pa.DataType) -> str:
    """One value as Flink prints it."""
    if v is None:
        return NULL_VALUE
    if pat.is_boolean(t):
        return "TRUE" if v else "FALSE"
    if pat.is_floating(t):
        return _java_double(float(v), single=t.bit_width == 32)
    if pat.is_timestamp(t):
        digits = {"s": 0, "ms": 3, "us": 6, "ns": 9}[t.unit]
        if isinstance(v, _dt.datetime):
            base = v.strftime("%Y-%m-%d %H:%M:%S")
            nanos = v.microsecond * 1000
        else:  # pandas Timestamp with nanoseconds, or an int
            base = str(v)[:19].replace("T", " ")
            nanos = getattr(v, "microsecond", 0) * 1000 + getattr(v, "nanosecond", 0)
        return base + ("." + _fraction(nanos, digits) if digits else "")
    if pat.is_date(t):
        return v.isoformat()
    if pat.is_time(t):
        return v.isoformat()
    if pat.is_decimal(t):
        return f"{v:.{t.scale}f}"
    if pat.is_binary(t) or pat.is_large_binary(t):
        return "x'" + bytes(v).hex() + "'"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(str(x) for x in v) + "]"
    return str(v)


def _width(s: str) -> int:
    return len(s) + sum(1 for ch in s if unicodedata.east_asian_width(ch) in ("F", "W"))


def _truncate(s: str, target: int) -> str:
    passed = 0
    end = len(s)
    for i, ch in enumerate(s):
        passed += 2 if unicodedata.east_asian_width(ch) in ("F", "W") else 1
        if passed > target:
            end = i
            break
    sub = s[:end]
    lack = target - _width(sub)
    return " " * lack + sub if lack > 0 else sub


def type_width(t: pa.DataType, max_width: int = MAX_COLUMN_WIDTH) -> int:
    if pat.is_int8(t):
        return 4
    if pat.is_int16(t):
        return 6
    if pat.is_int32(t):
        return 11
    if pat.is_int64(t):
        return 20
    if pat.is_decimal(t):
        return t.precision + 2
    if pat.is_boolean(t):
        return 5
    if pat.is_date(t):
        return 10
    if pat.is_time(t):
        p = {"s": 0, "ms": 3, "us": 6, "ns": 9}[t.unit]
        return 8 if p == 0 else p + 9
    if pat.is_timestamp(t):
        p = {"s": 0, "ms": 3, "us": 6, "ns": 9}[t.unit]
        return 19 if p == 0 else 23 if p <= 3 else 26 if p <= 6 else 29
    return max_width


def render(names: Sequence[str], types: Sequence[pa.DataType], rows: Iterable[Sequence[Any]],
           kinds: Sequence[str] | None = None, max_width: int = MAX_COLUMN_WIDTH,
           by_type: bool | None = None) -> str:
    """The grid as a string (ending in a newline). ``kinds`` given: a first
    ``op`` column with them (streaming mode). ``by_type``: column widths from
    the types (``type_width``) rather than from the content; by default, only
    when ``kinds`` are given."""
    cells = [[format_value(v, t) for v, t in zip(r, types)] for r in rows]
    if not cells:
        return "Empty set\n"
    header = list(names)
    if kinds is not None if by_type is None else by_type:
        widths = [max(len(n), type_width(t, max_width), len(NULL_VALUE)) for n, t in zip(names, types)]
    else:
        widths = [min(max([len(n)] + [_width(c[i]) for c in cells]), max_width) for i, n in enumerate(names)]
    if kinds is not None:
        header = ["op"] + header
        widths = [2] + widths
        cells = [[k] + c for k, c in zip(kinds, cells)]

    def line(vals: Sequence[str]) -> str:
        parts = ["|"]
        for s, w in zip(vals, widths):
            parts.append(" ")
            dw = _width(s)
            if dw <= w:
                parts.append(" " * (w - dw) + s)
            else:
                parts.append(_truncate(s, w - len(_TRUNCATED)) + _TRUNCATED)
            parts.append(" |")
        return "".join(parts)

    border = "+" + "".join("-" * (w + 2) + "+" for w in widths)
    out = [border, line(header), border]
    out.extend(line(c) for c in cells)
    out.append(border)
    n = len(cells)
    out.append(f"{n} {'rows' if n > 1 else 'row'} in set")
    return "\n".join(out) + "\n"
