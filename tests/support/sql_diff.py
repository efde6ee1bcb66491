"""Random tables and a DuckDB reference for differential tests of fastops SQL.

``make_table`` builds the columns of the differential suites (``id`` is the
row's position, so ``ORDER BY ts, id`` is arrival order); ``chunked`` cuts a
table into record batches where hypothesis says, so a source reads it in
random splits; ``duck`` runs the reference query; ``assert_same_rows``
compares two results as bags of rows (floats within a tolerance).
"""
from __future__ import annotations

import datetime as dt
import decimal
import math
from collections import Counter
from collections.abc import Sequence

import duckdb
import pyarrow as pa
from hypothesis import strategies as st

BASE_MS = 1_700_000_000_000
KEYS = st.one_of(st.none(), st.integers(0, 4))
STRS = st.one_of(st.none(), st.sampled_from(["a", "ab", "b", "ba", "c"]))
FLOATS = st.one_of(st.none(), st.floats(-100, 100, allow_nan=False).map(lambda v: round(v, 3)))
INTS = st.integers(-50, 50)
TIMES = st.integers(0, 60_000)  # ms after BASE_MS

ROW = st.tuples(KEYS, STRS, FLOATS, INTS, TIMES)
ROWS = st.lists(ROW, min_size=0, max_size=40)
CUTS = st.lists(st.integers(1, 40), max_size=8)  # where to cut a table into batches


def make_table(rows: list) -> pa.Table:
    """Columns id, k, s, x, y, tms (int ms) and ts (the same time as TIMESTAMP(3))."""
    cols = list(zip(*rows)) if rows else [[], [], [], [], []]
    tms = [BASE_MS + t for t in cols[4]]
    return pa.table({
        "id": pa.array(range(len(rows)), pa.int64()),
        "k": pa.array(cols[0], pa.int64()),
        "s": pa.array(cols[1], pa.string()),
        "x": pa.array(cols[2], pa.float64()),
        "y": pa.array(cols[3], pa.int64()),
        "tms": pa.array(tms, pa.int64()),
        "ts": pa.array(tms, pa.int64()).cast(pa.timestamp("ms")),
    })


def chunked(table: pa.Table, cuts: Sequence[int]) -> pa.Table:
    """``table`` as record batches cut at the positions ``cuts`` (a source reads one batch at a time)."""
    at = sorted({c for c in cuts if 0 < c < table.num_rows})
    bounds = [0, *at, table.num_rows]
    parts = [table.slice(a, b - a) for a, b in zip(bounds, bounds[1:]) if b > a]
    if not parts:
        return table
    return pa.Table.from_batches([b for p in parts for b in p.combine_chunks().to_batches()], schema=table.schema)


def batches_of(table: pa.Table) -> list[list[int]]:
    """The row positions of each record batch of ``table``, in order."""
    out, start = [], 0
    for b in table.to_batches():
        if b.num_rows:
            out.append(list(range(start, start + b.num_rows)))
            start += b.num_rows
    return out


_CON = duckdb.connect()


def duck(query: str, tables: dict) -> pa.Table:
    for name, t in tables.items():
        _CON.register(name, t)
    return _CON.sql(query).to_arrow_table()


def _norm(v):
    if isinstance(v, decimal.Decimal):
        return float(v)
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.replace(tzinfo=None)
    return v


def _key(row):
    return tuple((0, "") if v is None else (1, round(v, 6) if isinstance(v, float) else v) for v in row)


def rows_of(table: pa.Table) -> list[tuple]:
    cols = [c.to_pylist() for c in table.columns]
    return sorted((tuple(_norm(v) for v in r) for r in zip(*cols)), key=_key) if cols else []


def assert_same_rows(got: pa.Table, want: pa.Table | list, query: str) -> None:
    g = rows_of(got)
    w = rows_of(want) if isinstance(want, pa.Table) else sorted(want, key=_key)
    assert len(g) == len(w), f"{query}\nfastops {len(g)} rows, reference {len(w)} rows\n{g}\n{w}"
    for a, b in zip(g, w):
        assert len(a) == len(b), f"{query}\n{a}\n{b}"
        for u, v in zip(a, b):
            if isinstance(u, float) or isinstance(v, float):
                assert u is not None and v is not None, f"{query}\n{a}\n{b}"
                assert math.isclose(u, v, rel_tol=1e-9, abs_tol=1e-9), f"{query}\n{a}\n{b}"
            else:
                assert u == v, f"{query}\n{a}\n{b}"


def changelog_of(result) -> list[tuple[str, tuple]]:
    """A TableResult's rows as (row kind, values) pairs, in order."""
    return [(r.get_row_kind(), tuple(r)) for r in result.collect()]


def applied(log: list[tuple[str, tuple]]) -> Counter:
    """Apply a changelog row by row, every -U / -D retracting a row held
    before (asserted); the rows left, with their counts."""
    held: Counter = Counter()
    for kind, row in log:
        if kind in ("+I", "+U"):
            held[row] += 1
        else:
            assert held[row] > 0, f"{kind} {row} retracts a row not emitted: {log}"
            held[row] -= 1
    return +held
