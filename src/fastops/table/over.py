"""OVER aggregation: one aggregate value per row, over a frame of the rows of
its partition in a given order (Flink's ``OverAggregate``).

SQL::

    SELECT id, ts, SUM(amount) OVER (PARTITION BY product ORDER BY ts
                                     RANGE BETWEEN INTERVAL '1' HOUR PRECEDING AND CURRENT ROW) AS s
    FROM orders

Frames end at the current row: ``ROWS BETWEEN n PRECEDING``, ``RANGE
BETWEEN INTERVAL ... PRECEDING`` (or ``n PRECEDING`` over a number) and
``UNBOUNDED PRECEDING`` (the default with ``ORDER BY``). A ``RANGE`` frame
holds every row whose order value lies in ``[v - n, v]`` and the current
row's peers (equal order value); a ``ROWS`` frame the ``n`` rows before
the current one in order. Aggregates: ``COUNT``, ``SUM``, ``AVG``, ``MIN``,
``MAX``.

Streaming mode follows Flink: the order is the table's time attribute,
ascending; rows are held until the watermark passes their time, then emitted
in time order with their aggregate (so the output is insert-only). A row
that arrives late is dropped (to the ``late`` side output): for an unbounded
frame, a row whose time is at or before the watermark; for a bounded frame,
a row whose time is at or before the last one its partition emitted (Flink's
``RowTime*UnboundedPrecedingFunction`` and ``*BoundedPrecedingFunction``).
Batch mode computes every row at the end of input and takes any order.

How a frame is computed: the rows are sorted by (partition, order,
arrival); for every row the frame is an index range ``[lo, hi]`` of that
order (``searchsorted`` for RANGE offsets), sums and counts are differences
of prefix sums, and MIN / MAX a range minimum over dense ranks (a sparse
table, or a running minimum for unbounded frames). In streaming mode the
state per partition is what future frames can still reach: the last ``n``
rows (ROWS), the rows within ``n`` of the last time (RANGE), or one
accumulated row (UNBOUNDED).
"""
from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from fastops.core.aggregates import SumOverflowError
from fastops.core.arrow import as_batch, from_ipc, to_ipc
from fastops.core.keys import KeyTable
from fastops.core.messages import MAX_WATERMARK, MIN_WATERMARK
from fastops.core.partitioning import KeyGroups
from fastops.core.watermarks import to_ms
from fastops.operators.base import Operator, Tagged
from fastops.table.changelog import _pack_parts, _unpack_parts
from fastops.table.expressions import AggCall, Cast, Col, Expr, ExpressionError, Interval, OverRef
from fastops.table.plan import PlanError, PlanNode, Project, infer_type, insert_only_of
from fastops.table.topn import check_over_columns, plan_rank
from fastops.table.types import to_sql

__all__ = [
    "CURRENT_RANGE",
    "CURRENT_ROW",
    "OVER_FUNCTIONS",
    "UNBOUNDED_RANGE",
    "UNBOUNDED_ROW",
    "Frame",
    "Over",
    "OverAggregate",
    "OverCall",
    "OverOperator",
    "OverWindow",
    "OverWindowSpec",
    "plan_over",
    "resolve_over_refs",
    "row_interval",
]

OVER_FUNCTIONS = ("count", "sum", "avg", "min", "max", "row_number")
_I64_MIN = np.iinfo(np.int64).min
_EMPTY = np.zeros(0, np.int64)


@dataclass(frozen=True)
class Frame:
    """``kind`` ``rows`` or ``range``; ``preceding`` rows (ROWS), or a distance
    in the order column's units (RANGE: milliseconds for times); None is
    UNBOUNDED PRECEDING. Every frame ends at the current row."""

    kind: str
    preceding: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("rows", "range"):
            raise PlanError(f"frame kind must be ROWS or RANGE, got {self.kind!r}")
        if self.preceding is not None and self.preceding < 0:
            raise PlanError(f"a frame's PRECEDING must be >= 0, got {self.preceding}")

    def describe(self) -> str:
        start = "UNBOUNDED" if self.preceding is None else str(self.preceding)
        return f"{self.kind.upper()} BETWEEN {start} PRECEDING AND CURRENT ROW"


@dataclass
class OverWindow:
    """An OVER clause: PARTITION BY expressions, ORDER BY (expression,
    ascending, nulls first) and the frame."""

    partition: list
    order: list
    frame: Frame

    def __repr__(self) -> str:
        part = f"PARTITION BY {', '.join(repr(p) for p in self.partition)} " if self.partition else ""
        order = ", ".join(f"{e!r} {'ASC' if a else 'DESC'}" for e, a, _ in self.order)
        return f"({part}ORDER BY {order} {self.frame.describe()})"


class OverCall(Expr):
    """``fn(arg) OVER window``: a value per row, planned by :func:`plan_over`."""

    def __init__(self, fn: str, arg: Expr | None, window: OverWindow):
        if fn not in OVER_FUNCTIONS:
            raise PlanError(f"{fn.upper()} is not supported in an OVER window; the OVER functions are "
                            "COUNT, SUM, AVG, MIN, MAX and ROW_NUMBER (for Top-N)")
        self.fn = fn
        self.arg = arg
        self.window = window

    def eval(self, batch: Any) -> Any:
        raise ExpressionError(f"{self!r} used outside a SELECT list")

    def __repr__(self) -> str:
        arg = "" if self.fn == "row_number" else ("*" if self.arg is None else repr(self.arg))
        return f"{self.fn.upper()}({arg}) OVER {self.window!r}"


def over_calls(e: Expr) -> list[OverCall]:
    """The OVER calls in ``e``."""
    if isinstance(e, OverCall):
        return [e]
    return [c for k in e.children() for c in over_calls(k)]


# ---------------------------------------------------------------- frames and aggregates

def _runs(new: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first, last) index of the run each position is in; ``new`` marks run starts."""
    n = len(new)
    starts = np.flatnonzero(new)
    rid = np.cumsum(new) - 1
    ends = np.append(starts[1:] - 1, n - 1)
    return starts[rid], ends[rid]


def _count_below(seg: np.ndarray, vals: np.ndarray, q_seg: np.ndarray, q_vals: np.ndarray) -> np.ndarray:
    """For each query, how many of the (``seg``, ``vals``) entries (sorted
    lexicographically) are lexicographically below (``q_seg``, ``q_vals``)."""
    n = len(seg)
    all_seg = np.concatenate([seg, q_seg])
    all_val = np.concatenate([vals, q_vals])
    flag = np.concatenate([np.ones(n, np.int8), np.zeros(len(q_seg), np.int8)])  # queries first on ties
    order = np.lexsort((flag, all_val, all_seg))
    data_before = np.cumsum(flag[order]) - flag[order]
    out = np.empty(len(q_seg), np.int64)
    is_q = order >= n
    out[order[is_q] - n] = data_before[is_q]
    return out


def frame_bounds(seg: np.ndarray, peer_new: np.ndarray | None, rvals: np.ndarray | None,
                 rnull: np.ndarray | None, frame: Frame) -> tuple[np.ndarray, np.ndarray]:
    """``[lo, hi]`` (inclusive indices) of every row's frame, over rows sorted
    by (partition ``seg``, order, arrival). ``peer_new`` marks where a new
    peer group (order value) starts (RANGE frames); ``rvals`` are the order
    values of a RANGE frame with an offset, non-decreasing in each
    partition (a null, marked in ``rnull``, holds a sentinel that keeps
    them so; nulls are peers of each other only)."""
    n = len(seg)
    idx = np.arange(n, dtype=np.int64)
    seg_new = np.ones(n, bool)
    seg_new[1:] = seg[1:] != seg[:-1]
    seg_first, _ = _runs(seg_new)
    if frame.kind == "rows":
        lo = seg_first if frame.preceding is None else np.maximum(idx - frame.preceding, seg_first)
        return lo, idx
    assert peer_new is not None
    peer_first, peer_last = _runs(peer_new | seg_new)
    if frame.preceding is None:
        return seg_first, peer_last
    assert rvals is not None and rnull is not None
    if rvals.dtype.kind == "f":
        start = rvals - frame.preceding
    else:  # saturating at the int64 minimum
        start = np.maximum(rvals, _I64_MIN + frame.preceding) - frame.preceding
    lo = _count_below(seg, rvals, seg, start)
    lo = np.where(rnull, peer_first, np.maximum(lo, seg_first))
    return lo, peer_last


def _sums(x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    p = np.concatenate([np.zeros(1, x.dtype), np.cumsum(x)])
    return p[hi + 1] - p[lo]


def _level_of(length: np.ndarray) -> np.ndarray:
    """floor(log2(length)) for positive integers, exactly."""
    lvl = np.floor(np.log2(np.maximum(length, 1))).astype(np.int64)
    lvl[(np.int64(1) << (lvl + 1)) <= length] += 1
    lvl[(np.int64(1) << lvl) > length] -= 1
    return lvl


def range_reduce(key: np.ndarray, lo: np.ndarray, hi: np.ndarray, fn: Any) -> np.ndarray:
    """``fn.reduce(key[lo:hi+1])`` for every (lo, hi) (``fn`` np.minimum or
    np.maximum): a sparse table built one level at a time (level ``k`` holds
    the reduction over ``[i, i + 2**k)``), each query answered by two
    overlapping blocks of its level."""
    out = np.empty(len(lo), key.dtype)
    if len(lo) == 0:
        return out
    lvl = _level_of(hi - lo + 1)
    table = key
    k = 0
    top = int(lvl.max())
    while True:
        sel = np.flatnonzero(lvl == k)
        if len(sel):
            out[sel] = fn(table[lo[sel]], table[hi[sel] - (1 << k) + 1])
        if k == top:
            return out
        table = fn(table[:len(table) - (1 << k)], table[1 << k:])
        k += 1


def _segment_running(key: np.ndarray, seg_new: np.ndarray, maximum: bool) -> np.ndarray:
    """The running min (max) of ``key`` (dense ranks >= 0) restarting at every segment."""
    sid = np.cumsum(seg_new) - 1
    span = int(key.max()) + 2 if len(key) else 1
    nseg = int(sid[-1]) + 1 if len(sid) else 0
    if maximum:  # later segments get larger offsets, so a running max restarts at each
        run = np.maximum.accumulate(sid * span + key)
        return run - sid * span
    run = np.minimum.accumulate((nseg - sid) * span + key)
    return run - (nseg - sid) * span


@dataclass
class AggSpec:
    """One OVER aggregate: ``fn`` over input column ``column`` (None: COUNT(*))."""

    name: str
    fn: str
    column: str | None
    out_type: pa.DataType


def _contributions(spec: AggSpec, batch: pa.RecordBatch | pa.Table) -> tuple[np.ndarray, Any]:
    """Per row: how many values it counts (0 for a null) and the value it adds
    (numbers for SUM / AVG, the column for MIN / MAX, nothing for COUNT)."""
    n = batch.num_rows
    if spec.column is None:
        return np.ones(n, np.int64), None
    col = batch.column(spec.column)
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    cnt = col.is_valid().to_numpy(zero_copy_only=False).astype(np.int64)
    if spec.fn == "count":
        return cnt, None
    if spec.fn in ("sum", "avg"):
        t = pa.int64() if pa.types.is_integer(col.type) else pa.float64()
        return cnt, pc.fill_null(col.cast(t), 0).to_numpy(zero_copy_only=False)
    return cnt, col


def _empty_values(spec: AggSpec, in_type: pa.DataType | None) -> Any:
    if spec.fn == "count":
        return None
    if spec.fn in ("sum", "avg"):
        return np.zeros(0, np.int64 if in_type is not None and pa.types.is_integer(in_type) else np.float64)
    return pa.array([], in_type)


def frame_aggregate(spec: AggSpec, cnt: np.ndarray, vals: Any, lo: np.ndarray, hi: np.ndarray,
                    seg_new: np.ndarray, unbounded: bool, rows: np.ndarray) -> tuple[pa.Array, np.ndarray, Any]:
    """The aggregate over ``[lo, hi]`` for the frames ``rows`` (indices into
    the sorted elements), with the count and the value each frame
    accumulates (what an UNBOUNDED frame keeps as its state)."""
    lo_r, hi_r = lo[rows], hi[rows]
    counts = _sums(cnt, lo_r, hi_r)
    if spec.fn == "count":
        return pa.array(counts, pa.int64()), counts, None
    none = counts == 0
    if spec.fn in ("sum", "avg"):
        if vals.dtype.kind == "f":
            exact = _sums(vals.astype(np.longdouble), lo_r, hi_r).astype(np.float64)
        else:
            exact = _int_sums(vals, lo_r, hi_r, spec)
        if spec.fn == "sum":
            return pa.array(exact, spec.out_type, mask=none), counts, exact
        with np.errstate(invalid="ignore", divide="ignore"):
            avg = exact.astype(np.float64) / counts
        return pa.array(avg, pa.float64(), mask=none), counts, exact
    col = vals
    valid = col.is_valid().to_numpy(zero_copy_only=False)
    if len(col) == 0:
        return pa.array([], spec.out_type), counts, col
    ranks = pc.rank(col, sort_keys="ascending", tiebreaker="dense").to_numpy().astype(np.int64)  # 1-based
    maximum = spec.fn == "max"
    key = np.where(valid, ranks, 0 if maximum else int(ranks.max()) + 1)
    if unbounded:
        best = _segment_running(key, seg_new, maximum)[hi_r]
    else:
        best = range_reduce(key, lo_r, hi_r, np.maximum if maximum else np.minimum)
    at = np.zeros(int(ranks.max()) + 2, np.int64)
    at[ranks] = np.arange(len(ranks), dtype=np.int64)  # a row holding each rank
    picked = np.where(none, 0, at[np.clip(best, 0, len(at) - 1)])
    out = col.take(pa.array(picked, mask=none))
    return out, counts, out


def _int_sums(vals: np.ndarray, lo: np.ndarray, hi: np.ndarray, spec: AggSpec) -> np.ndarray:
    """Exact int64 frame sums (prefix sums wrap, their differences are right
    when the frame's sum fits); a sum outside int64 raises SumOverflowError."""
    approx = _sums(vals.astype(np.float64), lo, hi)
    if len(approx) and float(np.abs(approx).max()) > 2.0 ** 62:
        exact = _sums(vals.astype(object), lo, hi)
        bad = [v for v in exact if not -(2 ** 63) <= v < 2 ** 63]
        if bad:
            raise SumOverflowError(f"{spec.fn.upper()}({spec.column!r}) OVER (output column {spec.name!r}) "
                                   f"overflowed int64 (a frame sums to {bad[0]}). Cast {spec.column!r} to "
                                   "DOUBLE before aggregating")
        return exact.astype(np.int64)
    with np.errstate(over="ignore"):
        return _sums(vals, lo, hi)


# ---------------------------------------------------------------- the operator

_K, _T, _S = "__over_kid", "__over_ts", "__over_seq"


class OverOperator(Operator):
    """OVER aggregates of one window (see the module docs).

    Parameters
    ----------
    keys
        Partition columns (none: one partition, run at parallelism 1).
    order
        (column, ascending, nulls first) in ORDER BY order. Incremental
        (streaming) mode takes exactly one ascending time column.
    frame
        The frame, ending at the current row.
    aggs
        The aggregates; each adds its column ``name``.
    in_schema
        The input's schema.
    incremental
        Emit as the watermark passes rows (streaming); else once, at the end.
    """

    def __init__(self, keys: Sequence[str], order: Sequence[tuple[str, bool, bool]], frame: Frame,
                 aggs: Sequence[AggSpec], in_schema: pa.Schema, incremental: bool):
        self.keys = list(keys)
        self.order = list(order)
        self.frame = frame
        self.aggs = list(aggs)
        self.in_schema = in_schema
        self.incremental = incremental
        if incremental and (len(self.order) != 1 or not self.order[0][1]):
            raise ValueError("a streaming OVER window orders by one ascending time column")
        self.time_col = self.order[0][0]
        self.name = "over"
        self.in_types = [None if a.column is None else in_schema.field(a.column).type for a in self.aggs]
        self._reset()

    def _reset(self) -> None:
        self.key_table = KeyTable(self.keys) if self.keys else None
        self.watermark = MIN_WATERMARK
        self.seq = 0
        self.pending: list[pa.RecordBatch] = []  # rows with _K, _T, _S appended
        self.pending_min = np.iinfo(np.int64).max
        self.last = np.full(0, _I64_MIN, np.int64)  # per key id: the last time emitted (bounded frames)
        self.history: dict[str, Any] | None = None  # the elements earlier rows left for later frames

    @property
    def _unbounded(self) -> bool:
        return self.frame.preceding is None

    def _grow_last(self, kids: np.ndarray) -> None:
        """Make room in ``last`` for key ids up to ``kids.max()``."""
        need = int(kids.max()) + 1 if len(kids) else 0
        if len(self.last) < need:
            grown = np.full(max(need, 2 * len(self.last), 64), _I64_MIN, np.int64)
            grown[:len(self.last)] = self.last
            self.last = grown

    def _kids(self, batch: pa.RecordBatch | pa.Table) -> np.ndarray:
        if self.key_table is None:
            return np.zeros(batch.num_rows, np.int64)
        return self.key_table.lookup_or_insert([batch.column(k) for k in self.keys])

    # -- input -------------------------------------------------------------------------
    def process(self, batch: pa.RecordBatch) -> list:
        n = batch.num_rows
        if n == 0:
            return []
        if batch.schema != self.in_schema:  # e.g. other nullability flags: one schema for the rows held
            batch = batch.select(self.in_schema.names).cast(self.in_schema)
        kids = self._kids(batch)
        seq = np.arange(self.seq, self.seq + n, dtype=np.int64)
        self.seq += n
        out: list = []
        if self.incremental:
            ts = np.asarray(to_ms(batch.column(self.time_col), self.time_col), np.int64)
            if self.watermark == MAX_WATERMARK:  # what upstream operators flush at the end is not late
                late = np.zeros(len(ts), bool)
            elif self._unbounded:
                late = ts <= self.watermark
            else:
                self._grow_last(kids)
                late = ts <= self.last[kids]
            if late.any():
                out.append(Tagged("late", batch.filter(pa.array(late))))
                keep = ~late
                batch, kids, seq, ts = batch.filter(pa.array(keep)), kids[keep], seq[keep], ts[keep]
                if batch.num_rows == 0:
                    return out
            self.pending_min = min(self.pending_min, int(ts.min()))
        else:
            ts = np.zeros(batch.num_rows, np.int64)
        self.pending.append(batch.append_column(_K, pa.array(kids)).append_column(_T, pa.array(ts))
                            .append_column(_S, pa.array(seq)))
        return out

    def on_watermark(self, t_ms: int) -> list:
        if not self.incremental:  # batch mode: everything at close(), after what upstream flushes there
            return []
        self.watermark = max(self.watermark, t_ms)
        if not self.pending or t_ms < self.pending_min:
            return []
        rows = pa.Table.from_batches(self.pending)
        ts = rows.column(_T).to_numpy()
        ready = ts <= t_ms
        rest = rows.filter(pa.array(~ready))
        self.pending = rest.combine_chunks().to_batches() if rest.num_rows else []
        self.pending_min = int(rest.column(_T).to_numpy().min()) if rest.num_rows else np.iinfo(np.int64).max
        return self._fire(rows.filter(pa.array(ready)))

    def close(self) -> list:
        return self._flush()

    def _flush(self) -> list:
        if not self.pending:
            return []
        rows = pa.Table.from_batches(self.pending)
        self.pending = []
        return self._fire(rows)

    # -- computing ---------------------------------------------------------------------
    def _fire(self, rows: pa.Table) -> list:
        """Aggregates for ``rows`` (with the held history in streaming mode); the output rows."""
        if rows.num_rows == 0:
            return []
        rows = rows.combine_chunks()
        contrib = [_contributions(a, rows) for a in self.aggs]
        kid = rows.column(_K).to_numpy()
        ts = rows.column(_T).to_numpy()
        seq = rows.column(_S).to_numpy()
        hist = self._history_of(np.unique(kid)) if self.incremental else None
        if hist is not None and len(hist["kid"]):
            nh = len(hist["kid"])
            kid_all = np.concatenate([hist["kid"], kid])
            ts_all = np.concatenate([hist["ts"], ts])
            seq_all = np.concatenate([hist["seq"], seq])
            contrib = [(np.concatenate([hc, c]), _concat_values(hv, v))
                       for (hc, hv), (c, v) in zip(hist["aggs"], contrib)]
        else:
            nh = 0
            kid_all, ts_all, seq_all = kid, ts, seq
        order, peer_new, rvals, rnull = self._sort(rows, kid_all, ts_all, seq_all)
        seg = kid_all[order]
        seg_new = np.ones(len(seg), bool)
        seg_new[1:] = seg[1:] != seg[:-1]
        lo, hi = frame_bounds(seg, peer_new, rvals, rnull, self.frame)
        is_new = order >= nh
        new_pos = np.flatnonzero(is_new)  # positions (in sorted order) of this call's rows
        results = []
        sorted_contrib = []
        for spec, (c, v) in zip(self.aggs, contrib):
            cs = c[order]
            vs = None if v is None else (v.take(pa.array(order)) if isinstance(v, pa.Array) else v[order])
            sorted_contrib.append((cs, vs))
            res, _, _ = frame_aggregate(spec, cs, vs, lo, hi, seg_new, self._unbounded, new_pos)
            results.append(res)
        src = order[new_pos] - nh  # row of ``rows`` at each new position
        if self.incremental:
            self._keep_history(order, seg, seg_new, ts_all, seq_all, sorted_contrib)
            emit = np.lexsort((seq[src], ts[src]))  # time order, then arrival
        else:
            emit = np.arange(len(src))
        data = rows.drop_columns([_K, _T, _S]).take(pa.array(src[emit]))
        for spec, res in zip(self.aggs, results):
            data = data.append_column(spec.name, res.take(pa.array(emit)))
        return [b for b in data.combine_chunks().to_batches() if b.num_rows]

    def _sort(self, rows: pa.Table, kid: np.ndarray, ts: np.ndarray,
              seq: np.ndarray) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None, np.ndarray | None]:
        """The sort order of the elements, where peer groups start (RANGE), and
        the order values for a RANGE offset."""
        if self.incremental:
            order = np.lexsort((seq, ts, kid))
            t = ts[order]
            peer_new = np.ones(len(t), bool)
            peer_new[1:] = t[1:] != t[:-1]
            return order, peer_new, t, np.zeros(len(t), bool)
        names = [c for c, _, _ in self.order]
        table = pa.table({"__k": kid, **{f"__o{i}": rows.column(c) for i, c in enumerate(names)}, "__s": seq})
        keys: list = [("__k", "ascending")]
        for i, (_, asc, nulls_first) in enumerate(self.order):
            keys.append((f"__o{i}", "ascending" if asc else "descending", "at_start" if nulls_first else "at_end"))
        keys.append(("__s", "ascending"))
        order = pc.sort_indices(table, sort_keys=keys).to_numpy().astype(np.int64)
        if self.frame.kind == "rows":
            return order, None, None, None
        n = len(order)
        peer_new = np.zeros(n, bool)
        if n:
            peer_new[0] = True
        for i in range(len(names)):
            c = table.column(f"__o{i}").combine_chunks().take(pa.array(order))
            a, b = c.slice(1), c.slice(0, n - 1)
            same = pc.fill_null(pc.equal(a, b), False).to_numpy(zero_copy_only=False) | (
                pc.is_null(a).to_numpy(zero_copy_only=False) & pc.is_null(b).to_numpy(zero_copy_only=False))
            peer_new[1:] |= ~same
        if self.frame.preceding is None:
            return order, peer_new, None, None
        c = table.column("__o0").combine_chunks().take(pa.array(order))
        rnull = c.is_null().to_numpy(zero_copy_only=False)
        rvals = _numeric(c)
        nulls_first = self.order[0][2]
        if rvals.dtype.kind == "f":
            rvals = np.where(rnull, -np.inf if nulls_first else np.inf, rvals)
        else:
            rvals = np.where(rnull, _I64_MIN if nulls_first else np.iinfo(np.int64).max, rvals)
        return order, peer_new, rvals, rnull

    # -- streaming state -----------------------------------------------------------------
    def _history_of(self, kids: np.ndarray) -> dict | None:
        """Take out the history elements of partitions ``kids`` (they come back updated)."""
        h = self.history
        if h is None or len(h["kid"]) == 0:
            return None
        take = np.isin(h["kid"], kids)
        if not take.any():
            return None
        out = _select(h, np.flatnonzero(take))
        self.history = _select(h, np.flatnonzero(~take))
        return out

    def _keep_history(self, order: np.ndarray, seg: np.ndarray, seg_new: np.ndarray, ts_all: np.ndarray,
                      seq_all: np.ndarray, contrib: list) -> None:
        """Keep what later frames of these partitions can still reach (``contrib``:
        the elements' counts and values, in sorted order)."""
        seg_first, seg_last = _runs(seg_new)
        last_pos = np.flatnonzero(np.append(seg_new[1:], True))  # the last element of each partition
        kids = seg[last_pos]
        t_sorted = ts_all[order]
        if not self._unbounded:
            self._grow_last(kids)
            self.last[kids] = np.maximum(self.last[kids], t_sorted[last_pos])
        if self._unbounded:  # one element per partition: the whole partition accumulated
            aggs = []
            upto = np.arange(len(seg), dtype=np.int64)
            for spec, (c, v) in zip(self.aggs, contrib):
                _, cnt, acc = frame_aggregate(spec, c, v, seg_first, upto, seg_new, True, last_pos)
                aggs.append((cnt, acc))
            keep = {"kid": kids, "ts": np.full(len(kids), _I64_MIN, np.int64), "seq": np.full(len(kids), -1, np.int64),
                    "aggs": aggs}
        else:
            pos = np.arange(len(seg), dtype=np.int64)
            if self.frame.kind == "rows":
                sel = pos >= seg_last - self.frame.preceding + 1 if self.frame.preceding else np.zeros(len(seg), bool)
            else:
                sel = t_sorted >= t_sorted[seg_last] - self.frame.preceding
            idx = np.flatnonzero(sel)
            keep = {"kid": seg[idx], "ts": t_sorted[idx], "seq": seq_all[order][idx],
                    "aggs": [(c[idx], None if v is None else (v.take(pa.array(idx)) if isinstance(v, pa.Array)
                                                              else v[idx])) for c, v in contrib]}
        self.history = keep if self.history is None else _concat_history(self.history, keep)

    # -- state ---------------------------------------------------------------------------
    def _key_columns(self, kids: np.ndarray) -> dict:
        if self.key_table is None or len(kids) == 0:
            return {k: pa.array([], self.in_schema.field(k).type) for k in self.keys}
        return dict(zip(self.keys, self.key_table.keys(kids)))

    def snapshot(self) -> bytes | None:
        pending = pa.Table.from_batches(self.pending).drop_columns([_K]) if self.pending else None
        parts = [struct.pack("<qq", self.watermark, self.seq), to_ipc(pending) if pending is not None else b""]
        h = self.history
        if h is not None and len(h["kid"]):
            cols = self._key_columns(h["kid"])
            cols.update({_T: pa.array(h["ts"]), _S: pa.array(h["seq"])})
            for i, (c, v) in enumerate(h["aggs"]):
                cols[f"__c{i}"] = pa.array(c)
                if v is not None:
                    cols[f"__v{i}"] = v if isinstance(v, pa.Array) else pa.array(v)
            parts.append(to_ipc(pa.table(cols)))
        else:
            parts.append(b"")
        live = np.flatnonzero(self.last > _I64_MIN)
        if len(live):
            cols = self._key_columns(live)
            cols[_T] = pa.array(self.last[live])
            parts.append(to_ipc(pa.table(cols)))
        else:
            parts.append(b"")
        return _pack_parts(parts)

    def restore(self, state: bytes | None) -> None:
        if state is not None:
            self._load([state], None)

    def restore_groups(self, states: Sequence[bytes | None], groups: KeyGroups) -> None:
        if not self.keys:
            super().restore_groups(states, groups)
            return
        self._load(states, groups)

    def _load(self, states: Sequence[bytes | None], groups: KeyGroups | None) -> None:
        self._reset()
        loaded = [_unpack_parts(s) for s in states if s is not None]
        if not loaded:
            return
        self.watermark = min(struct.unpack("<qq", p[0])[0] for p in loaded)
        self.seq = max(struct.unpack("<qq", p[0])[1] for p in loaded)

        def tables(i: int) -> list[pa.Table]:
            out = []
            for p in loaded:
                if p[i]:
                    t = from_ipc(p[i])
                    if groups is not None:
                        t = t.filter(pa.array(groups.mask(t, self.keys)))
                    if t.num_rows:
                        out.append(t)
            return out

        for t in tables(2):
            kids = self._kids(t)
            aggs = []
            for i, (spec, in_type) in enumerate(zip(self.aggs, self.in_types)):
                c = t.column(f"__c{i}").to_numpy()
                if spec.fn == "count":
                    v: Any = None
                elif f"__v{i}" in t.schema.names:
                    col = t.column(f"__v{i}").combine_chunks()
                    v = col if spec.fn in ("min", "max") else col.to_numpy(zero_copy_only=False)
                else:
                    v = _empty_values(spec, in_type)
                aggs.append((c, v))
            part = {"kid": kids, "ts": t.column(_T).to_numpy(), "seq": t.column(_S).to_numpy(), "aggs": aggs}
            self.history = part if self.history is None else _concat_history(self.history, part)
        for t in tables(3):
            kids = self._kids(t)
            self._grow_last(kids)
            self.last[kids] = t.column(_T).to_numpy()
        for t in tables(1):
            t = t.combine_chunks()
            b = as_batch(t.select(self.in_schema.names))
            b = b.append_column(_K, pa.array(self._kids(t))).append_column(_T, t.column(_T).combine_chunks())
            self.pending.append(b.append_column(_S, t.column(_S).combine_chunks()))
            if self.incremental:
                self.pending_min = min(self.pending_min, int(t.column(_T).to_numpy().min()))


def _numeric(c: pa.Array) -> np.ndarray:
    """Order values of a RANGE offset as numbers: times in ms, others as they are."""
    t = c.type
    if pa.types.is_timestamp(t) or pa.types.is_date(t):
        return np.asarray(to_ms(pc.fill_null(c, pa.scalar(0, t)) if c.null_count else c, "order"), np.int64)
    if pa.types.is_integer(t):
        return pc.fill_null(c.cast(pa.int64()), 0).to_numpy()
    return pc.fill_null(c.cast(pa.float64()), 0.0).to_numpy()


def _concat_values(a: Any, b: Any) -> Any:
    if a is None:
        return None
    if isinstance(a, pa.Array):
        return pa.concat_arrays([a, b.cast(a.type) if b.type != a.type else b])
    return np.concatenate([a, b])


def _select(h: dict, idx: np.ndarray) -> dict:
    at = pa.array(idx)
    return {"kid": h["kid"][idx], "ts": h["ts"][idx], "seq": h["seq"][idx],
            "aggs": [(c[idx], None if v is None else (v.take(at) if isinstance(v, pa.Array) else v[idx]))
                     for c, v in h["aggs"]]}


def _concat_history(a: dict, b: dict) -> dict:
    return {"kid": np.concatenate([a["kid"], b["kid"]]), "ts": np.concatenate([a["ts"], b["ts"]]),
            "seq": np.concatenate([a["seq"], b["seq"]]),
            "aggs": [(np.concatenate([ca, cb]), _concat_values(va, vb))
                     for (ca, va), (cb, vb) in zip(a["aggs"], b["aggs"])]}


# ---------------------------------------------------------------- the plan

_ORDERABLE = (pa.types.is_integer, pa.types.is_floating, pa.types.is_timestamp, pa.types.is_date,
              pa.types.is_string, pa.types.is_large_string, pa.types.is_binary, pa.types.is_large_binary,
              pa.types.is_boolean, pa.types.is_decimal, pa.types.is_time)


def _agg_type(fn: str, t: pa.DataType | None, what: str) -> pa.DataType:
    if fn == "count":
        return pa.int64()
    assert t is not None
    if fn in ("sum", "avg"):
        if not (pa.types.is_integer(t) or pa.types.is_floating(t)):
            raise PlanError(f"{what}: {fn.upper()} takes a number, not {to_sql(t)}")
        return pa.int64() if fn == "sum" and pa.types.is_integer(t) else pa.float64()
    if not any(f(t) for f in _ORDERABLE):
        raise PlanError(f"{what}: {fn.upper()} cannot compare values of type {to_sql(t)}")
    return t


class OverAggregate(PlanNode):
    """``child`` plus one column per aggregate of one OVER window."""

    def __init__(self, child: PlanNode, keys: Sequence[str], order: Sequence[tuple[str, bool, bool]],
                 frame: Frame, aggs: Sequence[tuple[str, str, str | None]], streaming: bool):
        super().__init__()
        child = insert_only_of(child)
        if child.changelog:
            raise PlanError("OVER aggregation of an updating (changelog) table is not supported")
        names = child.schema.names
        check_over_columns(names, keys, order, "the OVER window",
                           "an OVER window needs ORDER BY (Flink's OVER windows are ordered)")
        if streaming:
            tc = child.time_col
            if tc is None or len(order) != 1 or order[0][0] != tc or not order[0][1]:
                where = f"the table's time attribute is {tc!r}" if tc is not None else \
                    "the table has no time attribute (declare one: rowtime= / WATERMARK FOR)"
                raise PlanError("an OVER window's ORDER BY in streaming mode must be one ascending time "
                                f"attribute (Flink's rule); {where}, the window orders by "
                                f"{', '.join(c + (' ASC' if a else ' DESC') for c, a, _ in order)}")
        if frame.kind == "range" and frame.preceding is not None:
            if len(order) != 1:
                raise PlanError("a RANGE frame with an offset needs exactly one ORDER BY column")
            t = child.schema.field(order[0][0]).type
            if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_timestamp(t)
                    or pa.types.is_date(t)):
                raise PlanError(f"a RANGE frame with an offset orders by a number or a time, not "
                                f"{to_sql(t)} ({order[0][0]!r})")
            if not order[0][1]:
                raise PlanError("a RANGE frame with an offset needs an ascending ORDER BY")
        self.inputs = [child]
        self.keys = list(keys)
        self.order = list(order)
        self.frame = frame
        self.streaming = streaming
        self.specs = []
        fields = list(child.schema)
        for name, fn, column in aggs:
            t = None if column is None else child.schema.field(column).type
            out = _agg_type(fn, t, f"{fn.upper()}({column or '*'}) OVER")
            self.specs.append(AggSpec(name, fn, column, out))
            fields.append(pa.field(name, out))
        self.schema = pa.schema(fields)
        self.time_col = child.time_col
        self.changelog = False

    def label(self) -> str:
        order = ", ".join(f"{c} {'ASC' if a else 'DESC'}" for c, a, _ in self.order)
        sel = ", ".join(f"{s.fn.upper()}({s.column or '*'}) AS {s.name}" for s in self.specs)
        return (f"OverAggregate(partitionBy=[{', '.join(self.keys)}], orderBy=[{order}], "
                f"window=[{self.frame.describe()}], select=[{sel}])")

    def compile(self, compiler: Any) -> Any:
        s = compiler.build(self.inputs[0])
        keys, order, frame, specs = self.keys, self.order, self.frame, self.specs
        in_schema, incremental = self.inputs[0].schema, compiler.streaming
        factory = lambda: OverOperator(keys, order, frame, specs, in_schema, incremental)
        if keys:
            out = s.key_by(*keys).transform("over", factory)
        else:
            out = s._then("over", factory, 1, "forward" if s.node.parallelism == 1 else "rebalance")
        return out


def plan_over(child: PlanNode, items: Sequence[tuple[str, Expr]], streaming: bool) -> PlanNode:
    """``SELECT items FROM child`` where items hold OVER calls: a projection
    computing partition keys and arguments, one :class:`OverAggregate` per
    distinct window, then the select list over their columns."""
    calls: dict[str, OverCall] = {}
    for _, e in items:
        for c in over_calls(e):
            calls.setdefault(repr(c), c)
    numbers = [c for c in calls.values() if c.fn == "row_number"]
    if numbers:
        if len(calls) > 1:
            raise PlanError("ROW_NUMBER() OVER (...) cannot be combined with other OVER functions in one SELECT; "
                            "compute them in a subquery")
        return plan_rank(child, items, numbers[0], streaming)
    windows: dict[str, list[OverCall]] = {}
    for c in calls.values():
        windows.setdefault(repr(c.window), []).append(c)
    if streaming and len(windows) > 1:
        raise PlanError(f"the OVER windows of one SELECT must be the same in streaming mode (Flink's rule); "
                        f"this one has {len(windows)}: {'; '.join(windows)}")
    pre: dict[str, Expr] = {n: Col(n) for n in child.schema.names}
    renamed: dict[str, str] = {}  # repr(expr) -> column

    def column(e: Expr, prefix: str, cast: pa.DataType | None = None) -> str:
        if cast is not None:
            e = Cast(e, cast)
        if isinstance(e, Col) and cast is None:
            if e.col not in child.schema.names:
                raise PlanError(f"column {e.col!r} not found (columns: {child.schema.names})")
            return e.col
        r = repr(e)
        if r not in renamed:
            renamed[r] = f"{prefix}{len(renamed)}"
            pre[renamed[r]] = e
        return renamed[r]

    plans = []
    out_cols: dict[str, Expr] = {}
    for w, group in enumerate(windows.values()):
        win = group[0].window
        keys = [column(p, "__op") for p in win.partition]
        order = [(column(e, "__oo"), asc, nf) for e, asc, nf in win.order]
        aggs = []
        for j, c in enumerate(group):
            arg = None
            back = None
            if c.arg is not None and c.fn != "count":
                t = infer_type(c.arg, child.schema)
                if pa.types.is_decimal(t) and c.fn in ("sum", "avg"):  # as DOUBLE, returned as DECIMAL(38, s)
                    arg = column(c.arg, "__oa", pa.float64())
                    back = pa.decimal128(38, t.scale if c.fn == "sum" else max(t.scale, 6))
                else:
                    arg = column(c.arg, "__oa")
            elif c.arg is not None:
                arg = column(c.arg, "__oa")
            name = f"__w{w}o{j}"
            aggs.append((name, c.fn, arg))
            ref: Expr = Col(name)
            out_cols[repr(c)] = Cast(ref, back) if back is not None else ref
        plans.append((keys, order, win.frame, aggs))
    node = child if len(pre) == len(child.schema.names) else Project(child, list(pre.items()))
    for keys, order, frame, aggs in plans:
        node = OverAggregate(node, keys, order, frame, aggs, streaming)

    def replace(e: Expr) -> Expr:
        return e.transform(lambda x: out_cols.get(repr(x)) if isinstance(x, OverCall) else None)

    return Project(node, [(n, replace(e)) for n, e in items])


# ---------------------------------------------------------------- the Table API (PyFlink's Over)

@dataclass(frozen=True)
class Bound:
    """A frame bound of the Table API: ``kind`` rows / range, ``preceding``
    rows or ms (None: unbounded)."""

    kind: str
    preceding: int | None


UNBOUNDED_ROW = Bound("rows", None)
UNBOUNDED_RANGE = Bound("range", None)
CURRENT_ROW = Bound("rows", 0)
CURRENT_RANGE = Bound("range", 0)


def row_interval(rows: int) -> Bound:
    """``preceding(row_interval(2))``: a ROWS frame of the 2 rows before the current one."""
    if not isinstance(rows, int) or rows < 0:
        raise PlanError(f"row_interval takes a number of rows >= 0, got {rows!r}")
    return Bound("rows", rows)


def _bound(value: Any) -> Bound:
    if isinstance(value, Bound):
        return value
    if isinstance(value, Interval):
        return Bound("range", value.ms)
    raise PlanError(f"preceding() takes UNBOUNDED_ROW, UNBOUNDED_RANGE, CURRENT_ROW, CURRENT_RANGE, "
                    f"row_interval(n) or a time interval (lit(1).hours), got {value!r}")


class OverWindowSpec:
    """A Table API OVER window (PyFlink's ``Over``): build it with
    ``Over.partition_by(col("k")).order_by(col("ts")).preceding(...).alias("w")``."""

    def __init__(self, partition: Sequence[Any] = (), order: Any = None, preceding: Bound | None = None,
                 following: Bound | None = None, alias_name: str | None = None):
        self.partition = list(partition)
        self.order_expr = order
        self.preceding_bound = preceding
        self.following_bound = following
        self.alias_name = alias_name

    def _with(self, **changes: Any) -> OverWindowSpec:
        args = {"partition": self.partition, "order": self.order_expr, "preceding": self.preceding_bound,
                "following": self.following_bound, "alias_name": self.alias_name}
        args.update(changes)
        return OverWindowSpec(**args)

    def partition_by(self, *fields: Any) -> OverWindowSpec:
        return self._with(partition=[_column(f) for f in fields])

    def order_by(self, field: Any) -> OverWindowSpec:
        return self._with(order=field)

    def preceding(self, value: Any) -> OverWindowSpec:
        return self._with(preceding=_bound(value))

    def following(self, value: Any) -> OverWindowSpec:
        b = _bound(value)
        if b.preceding != 0:
            raise PlanError("following() takes CURRENT_ROW or CURRENT_RANGE (OVER windows end at the current row)")
        return self._with(following=b)

    def alias(self, name: str) -> OverWindowSpec:
        return self._with(alias_name=name)

    def window(self) -> OverWindow:
        """The window this spec defines (``preceding`` defaults to UNBOUNDED_RANGE)."""
        if self.order_expr is None:
            raise PlanError("an OVER window needs order_by(time attribute)")
        b = self.preceding_bound or UNBOUNDED_RANGE
        if self.following_bound is not None and self.following_bound.kind != b.kind:
            raise PlanError(f"following({'CURRENT_ROW' if self.following_bound.kind == 'rows' else 'CURRENT_RANGE'})"
                            f" does not match a {b.kind.upper()} preceding()")
        o = self.order_expr
        asc = True
        if hasattr(o, "expr") and hasattr(o, "ascending"):  # col("ts").asc / .desc
            o, asc = o.expr, o.ascending
        return OverWindow(list(self.partition), [(_column(o), asc, asc)], Frame(b.kind, b.preceding))


def _column(v: Any) -> Expr:
    return Col(v) if isinstance(v, str) else v


class Over:
    """PyFlink's ``Over``: ``Over.partition_by(col("k")).order_by(col("ts"))
    .preceding(UNBOUNDED_RANGE).alias("w")``; ``Over.order_by(...)`` for one partition."""

    @staticmethod
    def partition_by(*fields: Any) -> OverWindowSpec:
        return OverWindowSpec().partition_by(*fields)

    @staticmethod
    def order_by(field: Any) -> OverWindowSpec:
        return OverWindowSpec().order_by(field)


def resolve_over_refs(e: Expr, windows: dict) -> Expr:
    """``agg.over(col("w"))`` in ``e`` as an :class:`OverCall` over the window aliased ``w``."""
    def fn(x: Expr) -> Expr | None:
        if not isinstance(x, OverRef):
            return None
        ref = x.window
        name = ref.col if isinstance(ref, Col) else None
        if name not in windows:
            raise PlanError(f"no OVER window named {ref!r} (windows: {sorted(windows)}); define it with "
                            "over_window(Over...alias(name))")
        agg = x.agg
        if not isinstance(agg, AggCall) or agg.fn not in OVER_FUNCTIONS or agg.distinct:
            raise PlanError(f"{agg!r}.over(...): the OVER aggregates are count, sum, avg, min and max")
        return OverCall(agg.fn, agg.arg, windows[name].window())
    return e.transform(fn)
