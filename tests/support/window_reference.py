"""An independent, pure-Python model of keyed event-time window aggregation.

Slow and obvious on purpose: window assignment written out from the
definitions (not from ``fastops.core.window.assigners``), groups in a dict, aggregates with
``math.fsum`` / ``statistics``. Used by the window tests as the oracle.
"""
from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from typing import Any


def canon(v: Any) -> Any:
    """A hashable, comparable form of a key value (-0.0 -> 0.0, NaN -> 'NaN')."""
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if v == 0.0:
            return 0.0
    return v


def tumbling_windows(t: int, size: int, offset: int = 0) -> list[tuple[int, int]]:
    start = (t - offset) // size * size + offset  # Python's // is floor division
    return [(start, start + size)]


def sliding_windows(t: int, size: int, slide: int, offset: int = 0) -> list[tuple[int, int]]:
    """Every [s, s + size) with s = offset + j * slide and s <= t < s + size."""
    out = []
    j = (t - offset) // slide
    while True:
        s = offset + j * slide
        if s + size <= t:
            break
        out.append((s, s + size))
        j -= 1
    return sorted(out)


def sessions(times: Sequence[int], gap: int) -> list[tuple[int, int, list[int]]]:
    """Sessions of one key: (start, end, row positions). Rows whose [t, t+gap]
    intervals touch or overlap are one session; end = last + gap."""
    order = sorted(range(len(times)), key=lambda i: times[i])
    out: list[tuple[int, int, list[int]]] = []
    for i in order:
        t = times[i]
        if out and t <= out[-1][1]:
            s, e, rows = out[-1]
            out[-1] = (s, max(e, t + gap), rows + [i])
        else:
            out.append((t, t + gap, [i]))
    return out


def aggregate(kind: str, values: list, ts: list, arrival: list, ddof: int = 1) -> Any:
    """One aggregate over a group's rows (``values`` may hold None = null)."""
    rows = [(v, t, a) for v, t, a in zip(values, ts, arrival) if v is not None]
    if kind == "count_rows":
        return len(values)
    if kind == "count":
        return len(rows)
    if not rows:
        return None
    vals = [r[0] for r in rows]
    if kind == "sum":
        if all(isinstance(v, int) for v in vals):
            return sum(vals)  # exact: fastops raises where an int64 sum overflows
        return math.fsum(vals)
    if kind in ("min", "max"):
        vals = [v for v in vals if not (isinstance(v, float) and math.isnan(v))]
        if not vals:
            return None
        return min(vals) if kind == "min" else max(vals)
    if kind == "mean":
        return math.fsum(vals) / len(vals)
    if kind in ("var", "stddev"):
        if len(vals) - ddof <= 0:
            return None
        fv = [float(v) for v in vals]
        var = statistics.pvariance(fv) if ddof == 0 else statistics.variance(fv)
        return math.sqrt(var) if kind == "stddev" else var
    if kind == "first":
        return min(rows, key=lambda r: (r[1], r[2]))[0]
    if kind == "last":
        return max(rows, key=lambda r: (r[1], r[2]))[0]
    raise ValueError(kind)


def window_aggregate(rows: list[dict], window: tuple, by: Sequence[str],
                     aggs: dict[str, tuple], time: str = "ts") -> dict[tuple, dict[str, Any]]:
    """``{(start, end, *canon(keys)): {name: value}}`` for all rows.

    ``window``: ``("tumbling", size, offset)``, ``("sliding", size, slide,
    offset)``, ``("session", gap)``. ``aggs``: name -> ``(kind, column,
    ddof)`` with kind in count_rows, count, sum, min, max, mean, var, stddev,
    first, last.
    """
    groups: dict[tuple, list[int]] = defaultdict(list)
    if window[0] == "session":
        per_key: dict[tuple, list[int]] = defaultdict(list)
        for i, r in enumerate(rows):
            per_key[tuple(canon(r[b]) for b in by)].append(i)
        for key, idx in per_key.items():
            for s, e, pos in sessions([rows[i][time] for i in idx], window[1]):
                groups[(s, e) + key] = [idx[p] for p in pos]
    else:
        for i, r in enumerate(rows):
            t = r[time]
            if window[0] == "tumbling":
                ws = tumbling_windows(t, window[1], window[2])
            else:
                ws = sliding_windows(t, window[1], window[2], window[3])
            key = tuple(canon(r[b]) for b in by)
            for s, e in ws:
                groups[(s, e) + key].append(i)
    out = {}
    for gkey, idx in groups.items():
        res = {}
        for name, (kind, col, ddof) in aggs.items():
            vals = [rows[i][col] if col else 1 for i in idx]
            res[name] = aggregate(kind, vals, [rows[i][time] for i in idx], idx, ddof)
        out[gkey] = res
    return out


def close(a: Any, b: Any, rel: float = 1e-9, abs_tol: float = 1e-9) -> bool:
    """Equality with a float tolerance; NaN equals NaN, None equals None."""
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, float) or isinstance(b, float):
        a, b = float(a), float(b)
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=rel, abs_tol=abs_tol)
    return a == b


def lateness_model(batches: list[list[dict]], watermarks: list[int | None], window: tuple,
                   allowed_lateness: int, time: str = "ts") -> tuple[list[dict], list[dict]]:
    """Split rows into (kept, late) under the tumbling/sliding lateness rule:
    a row is late if every window containing it has ``end + lateness <= wm``
    (the watermark when it arrives; ``watermarks[i]`` is advanced after batch i)."""
    wm = None
    kept, late = [], []
    for batch, w in zip(batches, watermarks):
        for r in batch:
            t = r[time]
            if window[0] == "tumbling":
                ends = [e for _, e in tumbling_windows(t, window[1], window[2])]
            else:
                ends = [e for _, e in sliding_windows(t, window[1], window[2], window[3])]
            if wm is not None and max(ends) + allowed_lateness <= wm:
                late.append(r)
            else:
                kept.append(r)
        if w is not None and (wm is None or w > wm):
            wm = w
    return kept, late
