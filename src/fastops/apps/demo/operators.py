"""The demo's own operators: the per-pane combiner of pops, the reward
filter, and the per-window ranking of the leaderboard (with its local top-N
before the exchange)."""
from __future__ import annotations

import time
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from fastops.apps.demo.generator import EVENT_TYPES, POP
from fastops.core import arrow as _arrow
from fastops.core.keys import KeyTable
from fastops.operators.base import Operator

__all__ = ["PANE_MS", "PerWindow", "RewardFilter", "leaderboard_fn", "local_top_n", "pops_per_pane"]


def _codes(batch: pa.RecordBatch) -> np.ndarray:
    col = batch.column("event_type")
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    if pa.types.is_dictionary(col.type):
        # map the batch's dictionary onto EVENT_TYPES, then gather
        lut = np.array([EVENT_TYPES.index(s) if s in EVENT_TYPES else -1
                        for s in col.dictionary.to_pylist()] + [-1], dtype=np.int8)
        idx = col.indices.to_numpy(zero_copy_only=False)
        return lut[np.where(col.indices.is_valid().to_numpy(zero_copy_only=False), idx, -1)] \
            if col.indices.null_count else lut[idx]
    out = np.full(len(col), -1, dtype=np.int8)
    for code, name in enumerate(EVENT_TYPES):
        out[pc.equal(col, name).fill_null(False).to_numpy(zero_copy_only=False)] = code
    return out


PANE_COUNTS = pa.schema([("player_id", pa.int64()), ("ts", pa.int64()), ("n", pa.int64())])  # pops_per_pane


PANE_MS = 10_000  # the slide of the reward windows, and their pane


def pops_per_pane(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Pops of one batch pre-aggregated per (player, 10 s pane): ``player_id``,
    ``ts`` (the pane start) and ``n`` (pops).

    A local combiner (Flink's mini-batch / local-global aggregation): every
    row of a pane belongs to the same sliding windows, and is late exactly
    when its pane is purged, so counting per pane first and summing in the
    window gives the same windows, the same counts and the same late panes as
    counting raw rows -- with one row per player and pane, not per pop,
    reaching the keyed exchange and the window. One hash lookup per row
    (``fastops.KeyTable``), nothing per row in Python.
    """
    mask = _codes(batch) == POP
    pid = batch.column("player_id").to_numpy()[mask]
    ts = batch.column("ts").to_numpy()[mask]
    if not len(pid):
        return pa.RecordBatch.from_arrays([pa.array(pid), pa.array(ts), pa.array(pid)], schema=PANE_COUNTS)
    pane = ts - ts % PANE_MS
    packed = (pane // PANE_MS << 32) | pid  # player ids < 2**31
    table = KeyTable(["k"])
    gid = table.lookup_or_insert([pa.array(packed)])
    counts = np.bincount(gid)
    rep = np.empty(len(counts), dtype=np.int64)
    rep[gid] = np.arange(len(gid), dtype=np.int64)  # one row of each group
    return pa.RecordBatch.from_arrays([pa.array(pid[rep]), pa.array(pane[rep]), pa.array(counts)],
                                      schema=PANE_COUNTS)


class RewardFilter(Operator):
    """Windows with ``pops >= threshold`` become rewards, once per
    (player, window): a pair already rewarded is dropped (possible only with
    allowed lateness > 0, when an updated window is emitted again).
    Remembered pairs are forgotten once the watermark passes
    ``window_end + forget_after_ms``."""

    name = "rewards"

    def __init__(self, threshold: int, forget_after_ms: int = 0):
        self.threshold = threshold
        self.forget_after_ms = forget_after_ms
        self.seen: dict[int, np.ndarray] = {}  # window_end ms -> rewarded player ids

    def process(self, batch: pa.RecordBatch) -> list:
        pops = batch.column("pops").to_numpy(zero_copy_only=False)
        keep = pops >= self.threshold
        if not keep.any():
            return []
        rows = batch.filter(pa.array(keep))
        ends = rows.column("window_end").cast(pa.int64()).to_numpy()
        pids = rows.column("player_id").to_numpy()
        fresh = np.ones(rows.num_rows, dtype=bool)
        for end in np.unique(ends):
            sel = ends == end
            old = self.seen.get(int(end))
            if old is not None:
                fresh[sel] &= ~np.isin(pids[sel], old)
            new = pids[sel & fresh]
            self.seen[int(end)] = new if old is None else np.concatenate([old, new])
        if not fresh.all():
            rows = rows.filter(pa.array(fresh))
        return [rows] if rows.num_rows else []

    def on_watermark(self, t_ms: int) -> list:
        for end in [e for e in self.seen if e + self.forget_after_ms <= t_ms]:
            del self.seen[end]
        return []

    def snapshot(self) -> bytes | None:
        ends = np.array(list(self.seen), dtype=np.int64)
        lens = np.array([len(v) for v in self.seen.values()], dtype=np.int64)
        pids = np.concatenate(list(self.seen.values())) if self.seen else np.zeros(0, np.int64)
        return len(ends).to_bytes(8, "little") + ends.tobytes() + lens.tobytes() + pids.astype(np.int64).tobytes()

    def restore(self, state: bytes | None) -> None:
        if state is None:
            return
        k = int.from_bytes(state[:8], "little")
        ends = np.frombuffer(state, np.int64, k, 8)
        lens = np.frombuffer(state, np.int64, k, 8 + 8 * k)
        pids = np.frombuffer(state, np.int64, offset=8 + 16 * k).copy()
        bounds = np.concatenate([[0], np.cumsum(lens)])
        self.seen = {int(e): pids[bounds[i]:bounds[i + 1]] for i, e in enumerate(ends)}


class PerWindow(Operator):
    """Collects the rows of each window (by ``window_end``) and, once the
    watermark has passed that end, calls ``fn(table)`` on them and emits the
    result. Run it keyed by ``window_start`` so every row of a window meets
    in one task. ``keep(batch) -> mask`` drops rows on arrival (optional)."""

    def __init__(self, name: str, fn: Callable[[pa.Table], pa.Table],
                 keep: Callable[[pa.RecordBatch], np.ndarray] | None = None):
        self.name = name
        self.fn = fn
        self.keep = keep
        self.pending: dict[int, list[pa.RecordBatch]] = {}

    def process(self, batch: pa.RecordBatch) -> list:
        if self.keep is not None:
            batch = batch.filter(pa.array(self.keep(batch)))
        if not batch.num_rows:
            return []
        ends = batch.column("window_end").cast(pa.int64()).to_numpy()
        lo, hi = ends.min(), ends.max()
        if lo == hi:
            self.pending.setdefault(int(lo), []).append(batch)
        else:
            for e in np.unique(ends):
                self.pending.setdefault(int(e), []).append(batch.filter(pa.array(ends == e)))
        return []

    def _fire(self, ends: list[int]) -> list:
        out: list[pa.RecordBatch] = []
        for e in sorted(ends):
            table = pa.Table.from_batches(self.pending.pop(e))
            result = self.fn(table)
            out.extend(b for b in result.to_batches() if b.num_rows)
        return out

    def on_watermark(self, t_ms: int) -> list:
        return self._fire([e for e in self.pending if e <= t_ms])

    def close(self) -> list:
        return self._fire(list(self.pending))

    def snapshot(self) -> bytes | None:
        if not self.pending:
            return None
        tables = [pa.Table.from_batches(bs) for bs in self.pending.values()]
        blobs = [_arrow.to_ipc(t) for t in tables]
        head = len(blobs).to_bytes(8, "little") + b"".join(len(b).to_bytes(8, "little") for b in blobs)
        return head + b"".join(blobs)

    def restore(self, state: bytes | None) -> None:
        self.pending = {}
        if state is None:
            return
        k = int.from_bytes(state[:8], "little")
        lens = [int.from_bytes(state[8 + 8 * i:16 + 8 * i], "little") for i in range(k)]
        pos = 8 + 8 * k
        for n in lens:
            t = _arrow.from_ipc(pa.py_buffer(state[pos:pos + n]))
            pos += n
            batches = t.combine_chunks().to_batches()
            end = int(pc.max(t.column("window_end").cast(pa.int64())).as_py())
            self.pending[end] = batches


def leaderboard_fn(top_n: int) -> Callable[[pa.Table], pa.Table]:
    """Top ``top_n`` players by pops of one minute (ties: lower player id first)."""

    def leaderboard(t: pa.Table) -> pa.Table:
        pops = t.column("pops").to_numpy()
        pid = t.column("player_id").to_numpy()
        order = np.lexsort((pid, -pops))[:top_n]
        n = len(order)
        return pa.table({
            "window_start": t.column("window_start").take(pa.array(order)),
            "rank": pa.array(np.arange(1, n + 1, dtype=np.int32)),
            "player_id": pa.array(pid[order]),
            "pops": pa.array(pops[order]),
        })

    return leaderboard


def local_top_n(n: int) -> Callable[[pa.RecordBatch], pa.RecordBatch]:
    """Per batch of window results: the minute-aligned windows' top ``n``
    players (by pops, then lower id) of each window in the batch.

    A local top-N before the exchange: the top ``n`` of a window are among
    the union of the top ``n`` of any split of its rows, so the final ranking
    (:func:`leaderboard_fn`) stays exact while only ``n`` rows per window and
    batch cross the exchange.
    """

    def top(batch: pa.RecordBatch) -> pa.RecordBatch:
        ws = batch.column("window_start").cast(pa.int64()).to_numpy()
        keep = np.flatnonzero(ws % 60_000 == 0)
        pid = batch.column("player_id").to_numpy()[keep]
        pops = batch.column("pops").to_numpy()[keep]
        ws = ws[keep]
        order = np.lexsort((pid, -pops, ws))
        w = ws[order]
        first = np.r_[0, np.flatnonzero(np.diff(w)) + 1] if len(w) else np.zeros(0, np.int64)
        rank = np.arange(len(order)) - np.repeat(first, np.diff(np.r_[first, len(order)]))
        idx = keep[order[rank < n]]
        return batch.select(["window_start", "window_end", "player_id", "pops"]).take(pa.array(idx))

    return top


VERIFY_S = 0.0001  # the payment service's answer time per purchase (--autoscale)


def verify_purchases(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Ask the payment service about each purchase: a wait per row (the GIL
    released), so the operator's capacity is known and DS2 sizes it."""
    time.sleep(batch.num_rows * VERIFY_S)
    return batch


SCREEN_S = 0.000002  # the anti-cheat service's answer time per event (--qos)


def screen_events(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Ask the anti-cheat service about each event: a wait per row (the GIL
    released), so the job's capacity is known (about 500k events/s) and a
    faster feed overloads it."""
    time.sleep(batch.num_rows * SCREEN_S)
    return batch
