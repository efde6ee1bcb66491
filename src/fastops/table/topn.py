"""Top-N and deduplication: ``ROW_NUMBER() OVER (PARTITION BY ... ORDER BY ...)``
filtered on the row number (Flink's ``Rank``)::

    SELECT * FROM (
      SELECT *, ROW_NUMBER() OVER (PARTITION BY category ORDER BY sales DESC) AS row_num
      FROM ShopSales)
    WHERE row_num <= 5

Ties in the order are broken by arrival (the earlier row ranks first), except
for a deduplication that keeps the last row (``ORDER BY <time attribute>
DESC``, ``rownum = 1``, the row number not selected), where the later row
wins, as Flink's ``Deduplicate`` does.

Streaming mode, plain Top-N: a changelog, as Flink's rank operators emit it.
When the row number is selected, every rank whose row changed gives ``-U``
(the old row, its rank) and ``+U`` (the new row, the same rank), a rank newly
filled ``+I`` and a rank emptied ``-D``; without it (Flink's "no ranking
output" optimisation) a row leaving the top N gives ``-D`` and a row entering
``+I``; a deduplication updates with ``-U`` / ``+U``. Updates are per batch:
the top N of every partition a batch touched before and after it are
compared (with one row per batch this is Flink's row-at-a-time changelog;
the final rows are the same either way). The input may itself be updating
(a Top-N of a ``GROUP BY``): a retraction removes the earliest equal row,
as Flink's ``RetractableTopNFunction``. State: the rows of each partition
ranked up to N for an insert-only input (a later row can only push them
down), every row for an updating one.

Window Top-N (the partition holds ``window_start`` and ``window_end`` of a
window TVF or window aggregate): insert-only, each window's top N emitted
once the watermark passes the window's end, rows of a window already fired
dropped as late; window deduplication is its N = 1 case.

Batch mode ranks every row at the end of input.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from fastops.core.arrow import as_batch, from_ipc, to_ipc
from fastops.core.keys import KeyTable
from fastops.core.messages import MAX_WATERMARK, MIN_WATERMARK
from fastops.core.partitioning import KeyGroups
from fastops.core.watermarks import to_ms
from fastops.operators.base import Operator, Tagged
from fastops.table.changelog import OP_COLUMN, _pack_parts, _unpack_parts, materialize
from fastops.table.expressions import Call, Col, Expr, Lit
from fastops.table.join_index import JoinSide, _Column
from fastops.table.plan import (
    Aggregate,
    Filter,
    PlanError,
    PlanNode,
    Project,
    WindowTVF,
    _conjuncts,
    insert_only_of,
)
from fastops.table.types import to_sql

__all__ = ["Rank", "RankOperator", "WindowRankOperator", "drop_unused_rank", "rank_filter"]

_INF = np.iinfo(np.int64).max
_OP = pa.int8()


def _sort_order(table: pa.Table, order: Sequence[tuple[str, bool, bool]], ties_latest: bool) -> np.ndarray:
    """Row order by (``__pid``, the ORDER BY columns, ``__seq`` ascending or,
    with ``ties_latest``, descending)."""
    keys: list = [("__pid", "ascending")]
    for c, asc, nulls_first in order:
        keys.append((c, "ascending" if asc else "descending", "at_start" if nulls_first else "at_end"))
    keys.append(("__seq", "descending" if ties_latest else "ascending"))
    return pc.sort_indices(table, sort_keys=keys).to_numpy().astype(np.int64)


def _rank_in_partition(pid_sorted: np.ndarray, alive: np.ndarray) -> np.ndarray:
    """1-based rank of each alive row among the alive rows of its partition (rows sorted by partition)."""
    n = len(pid_sorted)
    c = np.cumsum(alive.astype(np.int64))
    new = np.ones(n, bool)
    new[1:] = pid_sorted[1:] != pid_sorted[:-1]
    starts = np.flatnonzero(new)
    before = np.zeros(n, np.int64)
    if n:
        base = np.concatenate([[0], c[starts[1:] - 1]]) if len(starts) > 1 else np.zeros(1, np.int64)
        before = np.repeat(base, np.diff(np.append(starts, n)))
    return c - before



def check_over_columns(names: Sequence[str], keys: Sequence[str], order: Sequence[tuple], what: str,
                       no_order: str) -> None:
    """The PARTITION BY and ORDER BY columns of an OVER clause exist and it
    has an ORDER BY (``what`` names the clause; ``no_order`` is the error without one)."""
    for k in keys:
        if k not in names:
            raise PlanError(f"PARTITION BY column {k!r} not found (columns: {list(names)})")
    for c, *_ in order:
        if c not in names:
            raise PlanError(f"ORDER BY column {c!r} of {what} not found (columns: {list(names)})")
    if not order:
        raise PlanError(no_order)

class _Ranker:
    """What both rank operators share: partition ids and the sort."""

    def __init__(self, keys: Sequence[str], order: Sequence[tuple[str, bool, bool]], rank_range: tuple[int, int],
                 rank_col: str | None, ties_latest: bool, in_schema: pa.Schema):
        self.keys = list(keys)
        self.order = list(order)
        self.start, self.end = rank_range
        self.rank_col = rank_col
        self.ties_latest = ties_latest
        self.in_schema = in_schema
        self.names = list(in_schema.names)

    def new_keys(self) -> KeyTable | None:
        return KeyTable(self.keys) if self.keys else None

    @staticmethod
    def pids(table: KeyTable | None, data: pa.RecordBatch | pa.Table) -> np.ndarray:
        if table is None:
            return np.zeros(data.num_rows, np.int64)
        return table.lookup_or_insert([data.column(k) for k in table.names])

    def data_of(self, batch: pa.RecordBatch) -> tuple[pa.RecordBatch, np.ndarray]:
        """The input's columns (in its schema) and the row kinds (0 where none)."""
        i = batch.schema.get_field_index(OP_COLUMN)
        ops = batch.column(i).to_numpy(zero_copy_only=False).astype(np.int8) if i >= 0 else \
            np.zeros(batch.num_rows, np.int8)
        data = batch.select(self.names)
        if data.schema != self.in_schema:
            data = data.cast(self.in_schema)
        return data, ops

    def sort(self, cand: pa.Table, pid: np.ndarray, seq: np.ndarray) -> np.ndarray:
        cols = {"__pid": pa.array(pid), **{c: cand.column(c) for c, _, _ in self.order}, "__seq": pa.array(seq)}
        return _sort_order(pa.table(cols), self.order, self.ties_latest)

    def output(self, rows: pa.Table, idx: np.ndarray, ranks: np.ndarray | None, ops: np.ndarray | None) -> list:
        if len(idx) == 0:
            return []
        out = rows.take(pa.array(idx))
        if self.rank_col is not None:
            assert ranks is not None
            out = out.append_column(self.rank_col, pa.array(ranks, pa.int64()))
        if ops is not None:
            out = out.append_column(OP_COLUMN, pa.array(ops, _OP))
        return [b for b in out.combine_chunks().to_batches() if b.num_rows]


class RankOperator(Operator):
    """Top-N per partition (see the module docs).

    Parameters
    ----------
    keys
        Partition columns (none: one partition, at parallelism 1).
    order
        (column, ascending, nulls first) of the ORDER BY.
    rank_range
        ``(start, end)``: the row numbers kept (``end`` may be huge: all).
    rank_col
        The column of the row number (None: not output).
    update_rows
        Emit changes per rank (``-U``/``+U``, as with the row number or a
        deduplication), else per row (``-D``/``+I``).
    ties_latest
        A later row ranks before an earlier one with the same order values.
    in_schema
        The input's columns (an updating input also carries its row kinds).
    incremental
        Emit a changelog as rows arrive (streaming); else the ranking once, at the end.
    """

    def __init__(self, keys: Sequence[str], order: Sequence[tuple[str, bool, bool]], rank_range: tuple[int, int],
                 rank_col: str | None, update_rows: bool, ties_latest: bool, in_schema: pa.Schema,
                 incremental: bool, updating_input: bool):
        self.r = _Ranker(keys, order, rank_range, rank_col, ties_latest, in_schema)
        self.update_rows = update_rows
        self.incremental = incremental
        self.updating_input = updating_input
        self.name = "rank"
        self._reset()

    def _reset(self) -> None:
        self.partitions = self.r.new_keys()
        self.values = KeyTable(self.r.names) if self.updating_input else None
        self.held = JoinSide()  # ids: partition, matched: arrival number
        self.vids = _Column(np.int64)  # per held row (as numbered in ``held``): its value's id
        self.seq = 0
        self.buffer: list[pa.RecordBatch] = []

    # -- input -----------------------------------------------------------------------------
    def process(self, batch: pa.RecordBatch) -> list:
        if batch.num_rows == 0:
            return []
        if not self.incremental:
            self.buffer.append(batch)
            return []
        data, ops = self.r.data_of(batch)
        return self._apply(data, ops, changelog=True)

    def close(self) -> list:
        return self._flush() if not self.incremental else []

    def _flush(self) -> list:
        if not self.buffer:
            return []
        t = pa.Table.from_batches([b if b.schema == self.buffer[0].schema else b.cast(self.buffer[0].schema)
                                   for b in self.buffer])
        self.buffer = []
        rows = materialize(t) if OP_COLUMN in t.schema.names else t
        data, ops = self.r.data_of(as_batch(rows.select(self.r.names)))
        return self._apply(data, ops, changelog=False)

    # -- ranking ---------------------------------------------------------------------------
    def _apply(self, data: pa.RecordBatch, ops: np.ndarray, changelog: bool) -> list:
        r = self.r
        n = data.num_rows
        pid_new = r.pids(self.partitions, data)
        seq_new = np.arange(self.seq, self.seq + n, dtype=np.int64)
        self.seq += n
        inserts = (ops == 0) | (ops == 2)
        touched = np.unique(pid_new)
        _, held_rows = self.held.find(touched)
        nh = len(held_rows)
        held_cols = self.held.rows.take(held_rows, r.names) if nh else None
        held_t = pa.Table.from_arrays(held_cols, schema=r.in_schema) if held_cols is not None else \
            r.in_schema.empty_table()
        cand = pa.concat_tables([held_t, pa.Table.from_batches([data])]).combine_chunks()
        pid = np.concatenate([self.held.ids.values[held_rows], pid_new])
        seq = np.concatenate([self.held.matched.values[held_rows], seq_new])
        alive_before = np.concatenate([np.ones(nh, bool), np.zeros(n, bool)])
        alive_after = np.concatenate([np.ones(nh, bool), inserts])
        vid = None
        if self.values is not None:
            vid = np.concatenate([self.vids.values[held_rows], self.values.lookup_or_insert(
                [data.column(c) for c in r.names])])
            if not inserts.all():
                alive_after = _retract(vid, seq, alive_after, np.concatenate([np.zeros(nh, bool), ~inserts]))
        order = r.sort(cand, pid, seq)
        ps = pid[order]
        ab, aa = alive_before[order], alive_after[order]
        old_rank = _rank_in_partition(ps, ab)
        new_rank = _rank_in_partition(ps, aa)
        in_old = ab & (old_rank >= r.start) & (old_rank <= r.end)
        in_new = aa & (new_rank >= r.start) & (new_rank <= r.end)
        out = self._changes(cand, order, ps, old_rank, new_rank, in_old, in_new, changelog)
        # keep what later rows can still need
        keep = aa if self.values is not None else aa & (new_rank <= r.end)
        kept = order[keep]
        gone = order[~keep & (order < nh)]
        if len(gone):
            self.held.alive.buf[held_rows[gone]] = False
            self.held.live -= len(gone)
        fresh = np.sort(kept[kept >= nh]) - nh
        if len(fresh):
            at = pa.array(fresh)
            self._hold(data.take(at), pid_new[fresh], seq_new[fresh], None if vid is None else vid[nh + fresh])
        if self.held.needs_compaction():
            if self.values is not None:
                self.vids.reset(self.vids.values[np.flatnonzero(self.held.alive.values)])
            self.held.compact()
        return out

    def _changes(self, cand: pa.Table, order: np.ndarray, ps: np.ndarray, old_rank: np.ndarray,
                 new_rank: np.ndarray, in_old: np.ndarray, in_new: np.ndarray, changelog: bool) -> list:
        """The rows to emit: per rank (update_rows) or per row, in partition order."""
        r = self.r
        if not changelog:  # the final ranking
            sel = np.flatnonzero(in_new)
            return r.output(cand, order[sel], new_rank[sel], None)
        if not self.update_rows:
            left = np.flatnonzero(in_old & ~in_new)
            entered = np.flatnonzero(in_new & ~in_old)
            idx = np.concatenate([order[left], order[entered]])
            ops = np.concatenate([np.full(len(left), 3, np.int8), np.zeros(len(entered), np.int8)])
            ranks = np.concatenate([old_rank[left], new_rank[entered]])
            return r.output(cand, idx, ranks, ops)
        # per (partition, rank): the row there before and after, found by sorting both lists of slots
        o, nw = np.flatnonzero(in_old), np.flatnonzero(in_new)
        part = np.concatenate([ps[o], ps[nw]])
        at_rank = np.concatenate([old_rank[o], new_rank[nw]])
        row = np.concatenate([order[o], order[nw]])
        is_new = np.concatenate([np.zeros(len(o), np.int8), np.ones(len(nw), np.int8)])
        srt = np.lexsort((is_new, at_rank, part))
        part, at_rank, row, is_new = part[srt], at_rank[srt], row[srt], is_new[srt]
        m = len(part)
        if m == 0:
            return []
        pair = np.zeros(m, bool)  # this slot's old row, the next entry its new row
        pair[:-1] = (part[1:] == part[:-1]) & (at_rank[1:] == at_rank[:-1])
        first = np.ones(m, bool)
        first[1:] = ~pair[:-1]
        slot = np.flatnonzero(first)
        paired = pair[slot]
        old_row = np.where(paired | (is_new[slot] == 0), row[slot], -1)
        new_row = np.where(paired, row[np.minimum(slot + 1, m - 1)], np.where(is_new[slot] == 1, row[slot], -1))
        changed = np.flatnonzero(old_row != new_row)
        if len(changed) == 0:
            return []
        a, b = old_row[changed], new_row[changed]
        rank = at_rank[slot][changed]
        both = (a >= 0) & (b >= 0)
        # per changed rank, in order: [-U old, +U new] | [+I new] | [-D old]
        w = np.where(both, 2, 1)
        at = np.cumsum(w) - w
        total = int(w.sum())
        idx = np.empty(total, np.int64)
        ops = np.empty(total, np.int8)
        ranks = np.empty(total, np.int64)
        idx[at] = np.where(a >= 0, a, b)
        ops[at] = np.where(both, 1, np.where(a >= 0, 3, 0))
        ranks[at] = rank
        second = at[both] + 1
        idx[second], ops[second], ranks[second] = b[both], 2, rank[both]
        return r.output(cand, idx, ranks, ops)

    # -- state -----------------------------------------------------------------------------
    def snapshot(self) -> bytes | None:
        parts = [self.seq.to_bytes(8, "little", signed=True)]
        t = self.held.rows.to_table()
        if t is not None and self.held.live:
            live = np.flatnonzero(self.held.alive.values)
            t = t.take(pa.array(live)).append_column("__seq", pa.array(self.held.matched.values[live]))
            parts.append(to_ipc(t))
        else:
            parts.append(b"")
        buffered = pa.Table.from_batches(self.buffer) if self.buffer else None
        parts.append(to_ipc(buffered) if buffered is not None else b"")
        return _pack_parts(parts)

    def restore(self, state: bytes | None) -> None:
        if state is not None:
            self._load([state], None)

    def restore_groups(self, states: Sequence[bytes | None], groups: KeyGroups) -> None:
        if not self.r.keys:
            super().restore_groups(states, groups)
            return
        self._load(states, groups)

    def _load(self, states: Sequence[bytes | None], groups: KeyGroups | None) -> None:
        self._reset()
        loaded = [_unpack_parts(s) for s in states if s is not None]
        self.seq = max((int.from_bytes(p[0], "little", signed=True) for p in loaded), default=0)
        held: list[pa.Table] = []
        for p in loaded:
            for i, target in ((1, held), (2, self.buffer)):
                if not p[i]:
                    continue
                t = from_ipc(p[i])
                if groups is not None:
                    t = t.filter(pa.array(groups.mask(t, self.r.keys)))
                if t.num_rows:
                    target.extend(t.combine_chunks().to_batches() if i == 2 else [t])
        if held:
            t = pa.concat_tables(held).combine_chunks()
            t = t.take(pc.sort_indices(t, sort_keys=[("__seq", "ascending")]))
            data = as_batch(t.select(self.r.names))
            vid = None if self.values is None else self.values.lookup_or_insert(
                [data.column(c) for c in self.r.names])
            self._hold(data, self.r.pids(self.partitions, data), t.column("__seq").to_numpy(), vid)

    def _hold(self, rows: pa.RecordBatch, pids: np.ndarray, seqs: np.ndarray, vids: np.ndarray | None) -> None:
        self.held.add(rows, pids, seqs)
        if vids is not None:
            self.vids.extend(vids)


def _retract(vid: np.ndarray, seq: np.ndarray, alive: np.ndarray, retracting: np.ndarray) -> np.ndarray:
    """``alive`` after the retractions: per value, as many of its rows as
    retractions are removed, the earliest first (Flink removes the first
    equal row of its list)."""
    rows = np.flatnonzero(alive)
    need = np.bincount(vid[retracting], minlength=int(vid.max()) + 1)
    if len(rows) == 0:
        return alive
    order = rows[np.lexsort((seq[rows], vid[rows]))]  # by value, then arrival
    v = vid[order]
    first = np.ones(len(v), bool)
    first[1:] = v[1:] != v[:-1]
    starts = np.flatnonzero(first)
    pos = np.arange(len(v)) - np.repeat(starts, np.diff(np.append(starts, len(v))))
    out = alive.copy()
    out[order[pos < need[v]]] = False
    return out


class WindowRankOperator(Operator):
    """Window Top-N: rows held per window, ranked when the watermark passes the
    window's end (``window_end - 1``), insert-only; rows of a window already
    fired are late (see the module docs)."""

    def __init__(self, keys: Sequence[str], order: Sequence[tuple[str, bool, bool]], rank_range: tuple[int, int],
                 rank_col: str | None, ties_latest: bool, in_schema: pa.Schema, end_column: str = "window_end"):
        self.r = _Ranker(keys, order, rank_range, rank_col, ties_latest, in_schema)
        self.end_column = end_column
        self.name = "window_rank"
        self.watermark = MIN_WATERMARK
        self.seq = 0
        self.pending: list[pa.RecordBatch] = []
        self.pending_min = _INF

    def process(self, batch: pa.RecordBatch) -> list:
        if batch.num_rows == 0:
            return []
        data, _ = self.r.data_of(batch)
        ends = np.asarray(to_ms(data.column(self.end_column), self.end_column), np.int64)
        out: list = []
        late = ends - 1 <= self.watermark
        if self.watermark < MAX_WATERMARK and late.any():  # what upstream flushes at the end is not late
            out.append(Tagged("late", data.filter(pa.array(late))))
            data, ends = data.filter(pa.array(~late)), ends[~late]
            if data.num_rows == 0:
                return out
        n = data.num_rows
        self.pending.append(data.append_column("__end", pa.array(ends)).append_column(
            "__seq", pa.array(np.arange(self.seq, self.seq + n, dtype=np.int64))))
        self.seq += n
        self.pending_min = min(self.pending_min, int(ends.min()) - 1)
        return out

    def on_watermark(self, t_ms: int) -> list:
        self.watermark = max(self.watermark, t_ms)
        if not self.pending or t_ms < self.pending_min:
            return []
        rows = pa.Table.from_batches(self.pending).combine_chunks()
        fire = rows.column("__end").to_numpy() - 1 <= t_ms
        rest = rows.filter(pa.array(~fire))
        self.pending = rest.to_batches() if rest.num_rows else []
        self.pending_min = int(rest.column("__end").to_numpy().min()) - 1 if rest.num_rows else _INF
        ready = rows.filter(pa.array(fire))
        r = self.r
        pid = r.pids(r.new_keys(), ready)
        order = r.sort(ready, pid, ready.column("__seq").to_numpy())
        rank = _rank_in_partition(pid[order], np.ones(len(order), bool))
        sel = np.flatnonzero((rank >= r.start) & (rank <= r.end))
        return r.output(ready.select(r.names), order[sel], rank[sel], None)

    def close(self) -> list:
        return self.on_watermark(MAX_WATERMARK)

    def snapshot(self) -> bytes | None:
        parts = [int(self.watermark).to_bytes(8, "little", signed=True), self.seq.to_bytes(8, "little", signed=True),
                 to_ipc(pa.Table.from_batches(self.pending)) if self.pending else b""]
        return _pack_parts(parts)

    def restore(self, state: bytes | None) -> None:
        if state is not None:
            self.restore_groups([state], None)

    def restore_groups(self, states: Sequence[bytes | None], groups: KeyGroups | None) -> None:
        loaded = [_unpack_parts(s) for s in states if s is not None]
        self.pending, self.pending_min = [], _INF
        if not loaded:
            return
        self.watermark = min(int.from_bytes(p[0], "little", signed=True) for p in loaded)
        self.seq = max(int.from_bytes(p[1], "little", signed=True) for p in loaded)
        for p in loaded:
            if p[2]:
                t = from_ipc(p[2])
                if groups is not None:
                    t = t.filter(pa.array(groups.mask(t, self.r.keys)))
                if t.num_rows:
                    self.pending.extend(t.combine_chunks().to_batches())
                    self.pending_min = min(self.pending_min, int(t.column("__end").to_numpy().min()) - 1)


# ---------------------------------------------------------------- the plan

def _windowed(node: PlanNode) -> bool:
    """Whether ``node``'s rows come from a window TVF or a window aggregate
    (through filters and projections)."""
    while isinstance(node, (Filter, Project)):
        node = node.inputs[0]
    return isinstance(node, WindowTVF) or (isinstance(node, Aggregate) and node.window is not None)


class Rank(PlanNode):
    """``child`` ranked by ``ROW_NUMBER() OVER (PARTITION BY keys ORDER BY order)``,
    keeping the row numbers in ``rank_range`` (None: all), the row number in
    column ``rank_col`` if ``output_rank``."""

    def __init__(self, child: PlanNode, keys: Sequence[str], order: Sequence[tuple[str, bool, bool]],
                 rank_col: str, rank_range: tuple[int, int] | None = None, output_rank: bool = True,
                 streaming: bool = False):
        super().__init__()
        check_over_columns(child.schema.names, keys, order, "ROW_NUMBER()",
                           "ROW_NUMBER() OVER (...) needs ORDER BY")
        self.window = streaming and "window_start" in keys and "window_end" in keys and _windowed(child)
        if self.window or not streaming:
            child = insert_only_of(child)
            if child.changelog and self.window:
                raise PlanError("a window Top-N of an updating table is not supported")
        self.inputs = [child]
        self.keys = list(keys)
        self.order = list(order)
        self.rank_col = rank_col
        self.shown_as = rank_col  # the name the query gives the row number (errors say it)
        self.rank_range = rank_range
        self.output_rank = output_rank
        self.streaming = streaming
        tc = child.time_col
        # Flink's Deduplicate: ROW_NUMBER over one time attribute, rownum = 1, not selected
        self.dedup = (not output_rank and rank_range == (1, 1) and len(order) == 1 and tc is not None
                      and order[0][0] == tc)
        self.schema = pa.schema(list(child.schema) + ([pa.field(rank_col, pa.int64(), False)] if output_rank else []))
        self.changelog = streaming and not self.window
        self.time_col = tc if self.window else None

    def with_(self, **changes: Any) -> Rank:
        args: dict[str, Any] = {"keys": self.keys, "order": self.order, "rank_col": self.rank_col,
                                "rank_range": self.rank_range, "output_rank": self.output_rank,
                                "streaming": self.streaming}
        args.update(changes)
        return Rank(self.inputs[0], **args)

    def label(self) -> str:
        order = ", ".join(f"{c} {'ASC' if a else 'DESC'}" for c, a, _ in self.order)
        rng = "all" if self.rank_range is None else f"{self.rank_range[0]}..{self.rank_range[1]}"
        kind = "Deduplicate" if self.dedup else ("WindowRank" if self.window else "Rank")
        return (f"{kind}(partitionBy=[{', '.join(self.keys)}], orderBy=[{order}], rankRange=[{rng}], "
                f"select=[{', '.join(self.schema.names)}])")

    def compile(self, compiler: Any) -> Any:
        child = self.inputs[0]
        if compiler.streaming and self.rank_range is None:
            raise PlanError(f"ROW_NUMBER() OVER (...) AS {self.shown_as} in streaming mode is supported as a Top-N "
                            f"(Flink's rule): filter it, SELECT * FROM (SELECT ..., ROW_NUMBER() OVER (...) AS "
                            f"rownum FROM t) WHERE rownum <= N")
        s = compiler.build(child)
        keys, order, in_schema = self.keys, self.order, child.schema
        rank_range = self.rank_range or (1, _INF)
        output_rank = self.output_rank
        rank_col = self.rank_col if output_rank else None
        ties_latest = self.dedup and not order[0][1]
        if self.window:
            factory: Any = lambda: WindowRankOperator(keys, order, rank_range, rank_col, ties_latest, in_schema)
        else:
            update_rows = output_rank or self.dedup
            incremental, updating = compiler.streaming, child.changelog
            factory = lambda: RankOperator(keys, order, rank_range, rank_col, update_rows, ties_latest,
                                           in_schema, incremental, updating)
        name = "window_rank" if self.window else ("deduplicate" if self.dedup else "rank")
        if keys:
            return s.key_by(*keys).transform(name, factory)
        return s._then(name, factory, 1, "forward" if s.node.parallelism == 1 else "rebalance")


def rank_filter(node: PlanNode, predicate: Expr) -> PlanNode:
    """``WHERE predicate`` over ``node``: when ``node`` is (through projections
    passing columns) a :class:`Rank` without a range and ``predicate`` bounds
    its row number from above (``rownum <= N``, ``< N``, ``= N``,
    ``BETWEEN a AND b``), that bound becomes the Rank's range and the rest of
    ``predicate`` a filter over it."""
    chain: list[Project] = []
    cur = node
    while isinstance(cur, Project):
        chain.append(cur)
        cur = cur.inputs[0]
    if not isinstance(cur, Rank) or cur.rank_range is not None:
        return Filter(node, predicate)
    names = {cur.rank_col}  # names of the row number, going up
    for p in reversed(chain):
        names = {n for n, e in p.items if isinstance(e, Col) and e.col in names}
    lo, hi = 1, None
    rest = []
    flip = {"less": "greater", "less_equal": "greater_equal", "greater": "less", "greater_equal": "less_equal",
            "equal": "equal"}
    for c in _conjuncts(predicate):
        bound = None
        if isinstance(c, Call) and c.fn in flip and len(c.args) == 2:
            a, b = c.args
            if isinstance(a, Col) and a.col in names and isinstance(b, Lit) and _is_int(b.value):
                bound = (c.fn, int(b.value))
            elif isinstance(b, Col) and b.col in names and isinstance(a, Lit) and _is_int(a.value):
                bound = (flip[c.fn], int(a.value))
        if bound is None:
            rest.append(c)
            continue
        op, v = bound
        if op in ("less_equal", "equal"):
            hi = v if hi is None else min(hi, v)
        if op == "less":
            hi = v - 1 if hi is None else min(hi, v - 1)
        if op in ("greater_equal", "equal"):
            lo = max(lo, v)
        if op == "greater":
            lo = max(lo, v + 1)
    if hi is None:
        return Filter(node, predicate)
    out: PlanNode = cur.with_(rank_range=(lo, hi))
    for p in reversed(chain):
        out = Project(out, p.items)
    for c in rest:
        out = Filter(out, c)
    return out


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def drop_unused_rank(node: PlanNode, used: set[str]) -> PlanNode:
    """``node`` without the row number of a Top-N when nothing above uses it
    (``used``: the columns the consumer reads): Flink's "no ranking output"
    form, whose changelog has no updates for rows that only moved rank."""
    if isinstance(node, Filter):
        child = drop_unused_rank(node.inputs[0], used | node.predicate.columns())
        return node if child is node.inputs[0] else Filter(child, node.predicate)
    if isinstance(node, Project):
        below: set[str] = set()
        for n, e in node.items:
            if n in used:
                below |= e.columns()
        child = drop_unused_rank(node.inputs[0], below)
        if child is node.inputs[0]:
            return node
        items = [(n, e) for n, e in node.items if e.columns() <= set(child.schema.names)]
        return Project(child, items)
    if isinstance(node, Rank) and node.output_rank and node.rank_range is not None and node.rank_col not in used:
        return node.with_(output_rank=False)
    return node


def plan_rank(child: PlanNode, items: Sequence[tuple[str, Expr]], call: Any, streaming: bool) -> PlanNode:
    """``SELECT items`` where one item holds ``ROW_NUMBER() OVER (...)``
    (``call``): computed partition / order columns, the Rank, the select list."""
    pre: dict[str, Expr] = {n: Col(n) for n in child.schema.names}

    def column(e: Expr, prefix: str) -> str:
        if isinstance(e, Col):
            if e.col not in child.schema.names:
                raise PlanError(f"column {e.col!r} not found (columns: {child.schema.names})")
            return e.col
        name = f"{prefix}{len(pre)}"
        pre[name] = e
        return name

    win = call.window
    keys = [column(p, "__rp") for p in win.partition]
    order = [(column(e, "__ro"), asc, nf) for e, asc, nf in win.order]
    node = child if len(pre) == len(child.schema.names) else Project(child, list(pre.items()))
    for c, _, _ in order:
        t = node.schema.field(c).type
        if pa.types.is_nested(t):
            raise PlanError(f"ROW_NUMBER() cannot order by {c!r} of type {to_sql(t)}")
    rank_col = "__rownum"
    rank = Rank(node, keys, order, rank_col, None, True, streaming)
    ref, key = Col(rank_col), repr(call)
    out = [(n, e.transform(lambda x: ref if type(x) is type(call) and repr(x) == key else None)) for n, e in items]
    rank.shown_as = next((n for n, e in out if rank_col in e.columns()), rank_col)  # the user's name, in errors
    return Project(rank, out)
