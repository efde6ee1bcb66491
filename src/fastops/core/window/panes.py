"""Tumbling and sliding windows: slots per (group, pane), windows merged
from their panes at emission, and the pane stacks of sliding windows.

A window ``[start, end)`` with ``start = offset + j * slide`` covers panes
``q`` of width ``pane = gcd(size, slide)`` (pane ``q`` is ``[offset + q *
pane, offset + (q + 1) * pane)``): ``k = size / pane`` of them from ``q = j
* ks`` on, with ``ks = slide / pane``. A row updates one pane's slot, so its
cost does not grow with ``size / slide``; a firing window merges its panes
(tumbling windows: one pane, nothing to merge).
"""
from __future__ import annotations

import bisect
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from fastops._kernels import window as _window
from fastops.core import arrow as _arrow
from fastops.core.aggregates import ResultColumns, ResultPlan, SumOverflowError, record_width
from fastops.core.window.assigners import Sliding, Tumbling
from fastops.core.window.store import I64_MAX, I64_MIN, WindowStore
from fastops.core.window.strategy import WindowStrategy

__all__ = ["PaneWindows"]


_WAYS = 4  # pane ways per group (see ``pane_assign``)
_SINGLE_SLOTS = "single"  # pane layout of snapshots from before chunks (they record none)


def _chunks_from_single_slots(a: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Pane table arrays of an older snapshot (slots taken one at a time from a
    free stack) in the chunked layout: each slot is a chunk of one slot (size
    class 0, as its flags already say), the free stack becomes that class's
    free list, and new chunks start at the next multiple of the largest chunk."""
    old = a["counters"]
    high, nfree = int(old[0]), int(old[1])
    big = _window.PANE_CHUNK_MAX
    counters = np.zeros(12, dtype=np.int64)
    counters[0] = -(-high // big) * big
    counters[2:4] = old[2:4]
    counters[4] = high - nfree
    free = a["free"][:nfree]
    s_next = _arrow.grown(a["s_next"], int(counters[0]), -1)
    if nfree:
        s_next[free[:-1]] = free[1:]
        s_next[free[-1]] = -1
        counters[5] = free[0] + 1
    a.update(counters=counters, s_next=s_next,
             s_group=_arrow.grown(a["s_group"], int(counters[0])),
             s_flags=_arrow.grown(a["s_flags"], int(counters[0])),
             free=_arrow.grown(a["free"], int(counters[0])))
    return a


def _stack_layout(ops: np.ndarray, offs: np.ndarray, nwords: list[int], width: int, shared: bool
                  ) -> tuple[np.ndarray, np.ndarray]:
    """The layout of the sliding-window stacks' records (see ``_window.pyx``,
    "stack layouts") for aggregates with merge codes ``ops`` at words
    ``offs`` of store records of ``width`` words, ``nwords`` words each, and
    where each store word goes.

    With ``shared``, and where it makes records narrower, one count word
    stands for every aggregate's count (the kernels check that they agree
    in each record read); else each aggregate keeps its own, as in the store.
    Returns ``(layout, to_stack)``: ``to_stack[w]``, the stack word of store
    word ``w`` (-1: none)."""
    vals = [k for k, op in enumerate(ops.tolist()) if op != 0]
    narrow = record_width(1 + sum(nwords[k] - 1 for k in vals))
    to_stack = np.full(width, -1, dtype=np.int64)
    if shared and narrow < width:
        src, val = [int(offs[0])], []
        for k in vals:
            val.append(len(src))
            src += range(offs[k] + 1, offs[k] + nwords[k])
        to_stack[src] = np.arange(len(src))
        to_stack[offs] = 0
        src += [0] * (narrow - len(src))  # padding: any word
        cnt, cw = [0] * len(vals), [0]
        eq = [w for k in range(1, len(ops)) for w in (offs[0], offs[k])]
    else:
        src, val, cnt, cw, eq = list(range(width)), [offs[k] + 1 for k in vals], [offs[k] for k in vals], list(offs), []
        to_stack[:] = np.arange(width)
    head = [len(src), len(vals), len(cw), len(eq) // 2]
    layout = np.array(head + src + [ops[k] for k in vals] + cnt + val + cw + eq, dtype=np.int64)
    return layout, to_stack


class _CountsDiffer(Exception):
    """A stack kernel read a record whose shared counts differ."""


def _added(n: int) -> int:
    """A stack kernel's groups added (see ``_window.dense_add``)."""
    if n < 0:
        raise _CountsDiffer
    return n


class _PaneStacks:
    """Sliding windows (``k`` > 1 panes) of built-in aggregates, emitted from
    two stacks of aggregated panes, held by group id.

    Panes form blocks of ``k`` aligned panes. Window ``[s, s + k)`` is the
    suffix ``[s, b)`` of one block merged with the prefix ``[b, s + k)`` of
    the next (``b`` the first pane of that block).

    - The prefix is one dense accumulator (a record per group id, and a bit
      per group that holds one); each window adds its newest pane.
    - The suffixes of a block are built once, newest pane first: each record
      of a pane becomes that pane merged with the group's suffix over the
      newer panes, linked to it. A pointer per group marks its suffix record
      for the current window; dropping the oldest pane moves the pointers of
      its groups along their links.
    - A window's rows are read off both bitmaps: the groups in both, then
      those in the suffix only, then those in the prefix only.

    So each pane is merged about twice whatever ``k`` is, nothing is
    copied per window but its output rows, and memory is one record per
    group plus one per record of a block's panes.

    Panes are read from the record store by (group, slot) lists, chunk by
    chunk, never sorted or copied; the lists of the panes the prefix read are
    kept for their block's suffixes, which read them before the panes' last
    windows fire (and so before they can be purged).

    Derived state: the stacks hold merged copies, so purges do not touch
    them, but a row that lands in a pane already read (``hi`` or before)
    makes them stale, and they are dropped (``clear``).

    Records are the store's in a layout of the stacks' own
    (``_stack_layout``): one count for all aggregates while every record read
    has their counts equal (no nulls, no NaN skipped by min / max), which
    makes count, sum and max 4 words, half a cache line, instead of 6 padded
    to 8; the first record that breaks it rebuilds both stacks with a count
    per aggregate, until the next block. Widths are padded to a power of two
    in pool memory (64-byte aligned), so no record straddles two cache
    lines."""

    def __init__(self, k: int, ops: np.ndarray, offs: np.ndarray, nwords: list[int], width: int,
                 plan: ResultPlan):
        self.k = k
        self._store = ops, offs, nwords, width, plan
        self.pbits = np.zeros(0, dtype=np.uint64)        # groups in the prefix
        self.ptr = np.empty(0, dtype=np.int64)           # each group's current suffix record
        self.sbits = np.zeros(0, dtype=np.uint64)        # groups in the current suffix
        self._use_layout(shared=True)
        self.ss_bufs = [np.empty(0, dtype=np.int64)] * 3  # room for ss, ss_group and ss_next
        self.clear()

    def _use_layout(self, shared: bool) -> None:
        """Records in the layout ``_stack_layout`` gives (one count for all
        aggregates if ``shared``); the result plan in its words."""
        ops, offs, nwords, width, plan = self._store
        self.layout, to_stack = _stack_layout(ops, offs, nwords, width, shared)
        self.retry = False  # one count to be tried again at the next block
        self.width = int(self.layout[0])
        self.words, self.codes, self.cnt_words = to_stack[plan.words], plan.codes, to_stack[plan.cnt_words]
        self.acc = _arrow.grown(np.empty((0, self.width), dtype=np.int64), len(self.ptr))  # prefix record of each group

    def clear(self) -> None:
        self.hi: int | None = None  # the newest pane read
        self.prefix_block: int | None = None
        self.prefix_upto = 0
        self.prefix_groups = 0
        self.suffix_block: int | None = None
        self.suffix_from = 0
        self.suffix_groups = 0
        self.with_suffix = False  # whether the prepared window has a suffix
        self.suffix_panes: list[tuple[int, int, int]] = []  # (pane, first row, end row), oldest first
        self.ss = np.empty((0, self.width), dtype=np.int64)  # suffix records, pane by pane
        self.ss_group = np.empty(0, dtype=np.int64)           # their groups
        self.ss_next = np.empty(0, dtype=np.int64)            # their group's record in the next newer pane
        self.read: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # panes the prefix read, for their block's suffixes
        self.pbits[:] = 0
        self.sbits[:] = 0

    def _fit(self, num_groups: int) -> None:
        """Room for group ids below ``num_groups`` (bitmaps keep their bits)."""
        words = (num_groups + 63) // 64
        if words > len(self.pbits):
            self.pbits = _arrow.grown(self.pbits, words)  # new words 0: no group
            self.sbits = _arrow.grown(self.sbits, len(self.pbits))
            self.ptr = _arrow.grown(self.ptr, 64 * len(self.pbits))
            self.acc = _arrow.grown(self.acc, len(self.ptr))

    def prepare(self, windows: PaneWindows, s: int) -> int:
        """Bring both stacks to window ``[s, s + k)``; returns an upper bound of its rows.
        A record whose counts differ where the layout shares them (a null or
        NaN that one aggregate skipped and another counted) rebuilds both
        stacks with a count per aggregate, until the next block: both are
        rebuilt there anyway, so one count is tried again."""
        self._fit(windows.store.keys.num_groups)
        if self.retry and self._block(s) != self.prefix_block:
            self._use_layout(shared=True)
            self.prefix_block = self.suffix_block = None  # (the panes' lists stay: they hold no records)
        try:
            return self._prepare(windows, s)
        except _CountsDiffer:
            self._use_layout(shared=False)
            self.retry = True
            self.clear()
            return self._prepare(windows, s)

    def _block(self, s: int) -> int:
        """The first pane of the block that holds window ``[s, s + k)``'s newest pane."""
        return (s + self.k - 1) // self.k * self.k

    def _prepare(self, windows: PaneWindows, s: int) -> int:
        k = self.k
        e = s + k - 1
        b = self._block(s)
        self._prefix(windows, b, e)
        self.with_suffix = s < b
        if self.with_suffix:
            self._suffix(windows, b - k, s)
        self.hi = e if self.hi is None else max(self.hi, e)
        return self.prefix_groups + (self.suffix_groups if self.with_suffix else 0)

    def emit(self, windows: PaneWindows, out_groups: np.ndarray, out: ResultColumns, row0: int) -> int:
        """The prepared window's rows as result columns from ``row0`` on (see ``dense_window``)."""
        sbits = self.sbits if self.with_suffix else self.sbits[:0]
        nnull = np.empty(len(self.cnt_words), dtype=np.int64)
        n = _window.dense_window(sbits, self.ptr, self.ss, self.pbits, self.acc, self.layout, self.words,
                                 self.codes, self.cnt_words, out_groups, out.cols, out.nulls, nnull, row0)
        out.nnull += nnull
        return n

    def _prefix(self, windows: PaneWindows, b: int, e: int) -> None:
        if self.prefix_block != b or self.prefix_upto > e:
            self.prefix_block, self.prefix_upto, self.prefix_groups = b, b - 1, 0
            self.pbits[:] = 0
            for q in [q for q in self.read if q < b - self.k]:
                del self.read[q]
        for q in windows._panes_between(self.prefix_upto + 1, e + 1):
            groups, slots = self.read[q] = windows._pane_rows(q)
            self.prefix_groups += _added(_window.dense_add(groups, slots, windows.store.records.rec, self.layout,
                                                           self.acc, self.pbits))
        self.prefix_upto = e

    def _suffix(self, windows: PaneWindows, b0: int, s: int) -> None:
        if self.suffix_block != b0 or self.suffix_from > s:
            panes = windows._panes_between(s, b0 + self.k)
            runs = [self.read.pop(q) if q in self.read else windows._pane_rows(q) for q in panes]
            rows = sum(len(g) for g, _ in runs)
            # reused block after block (no new pages to fault in), grown as needed
            self.ss_bufs = words, group, nxt = [_arrow.grown(b, m) for b, m in
                                                zip(self.ss_bufs, (rows * self.width, rows, rows))]
            self.ss = words[:rows * self.width].reshape(rows, self.width)
            self.ss_group, self.ss_next = group[:rows], nxt[:rows]
            self.sbits[:] = 0
            self.suffix_groups, self.suffix_panes, end = 0, [], rows
            for q, (groups, slots) in zip(reversed(panes), reversed(runs)):
                start = end - len(groups)  # rows in pane order, filled newest first
                self.suffix_groups += _added(_window.suffix_add(groups, slots, windows.store.records.rec, self.layout,
                                                                self.ss, self.ss_group, self.ss_next, start,
                                                                self.ptr, self.sbits))
                self.suffix_panes.insert(0, (q, start, end))
                end = start
            self.suffix_block, self.suffix_from = b0, s
        while self.suffix_panes and self.suffix_panes[0][0] < s:  # windows fire in order: drop older panes
            _, lo, hi = self.suffix_panes.pop(0)
            self.suffix_groups -= _window.suffix_drop(self.ss_group, self.ss_next, lo, hi, self.ptr, self.sbits)
        self.suffix_from = s



class PaneWindows(WindowStrategy):
    """Tumbling and sliding windows (see module docs).

    Slots are found through a hash map (group, pane) -> a pane's chunk of
    slots (``hg`` / ``hq`` / ``hv``), and per group through ``ways`` pairs
    (pane, slot), the newest pane of each residue (``gcache``): rows up to
    three panes out of order per key find their slot there; the panes of
    older rows are put in the map (``indexed``). A slot is purged with the
    last window of its pane."""

    holds_rows = True
    late_reason = "window purged"

    def __init__(self, window: Tumbling | Sliding, allowed_lateness: int, store: WindowStore):
        super().__init__(store)
        self._slots = store.slots
        self._lateness = allowed_lateness
        self._size, self._slide, self._offset = window.size, window.slide, window.offset
        self._p = window.pane
        self._ks = self._slide // self._p
        self._k = self._size // self._p
        # a pane's slots are purged when its last window is: at least a pane width after
        # their last update, with sliding windows or lateness, so their records are cold
        self._cold_purge = self._k > 1 or allowed_lateness >= self._p
        self._hg = np.zeros(256, dtype=np.int64)
        self._hq = np.zeros(256, dtype=np.int64)
        self._hv = np.full(256, -1, dtype=np.int64)
        self._panes: list[int] = []
        self._ndirty = 0  # slots updated since their window fired
        self._stacks: _PaneStacks | None = None  # built with the records (bind)
        self._emit_groups = np.empty(0, dtype=np.int64)  # emission scratch (see _ensure_emit)
        self._emit_row = np.empty(0, dtype=np.int64)
        self._emit_src = np.empty(0, dtype=np.int64)
        self._mark = np.full(64, -1, dtype=np.int64)
        # per group ``ways`` (pane, slot) pairs, the newest pane of each residue: rows up to
        # three panes out of order per key find their slot there (others: ``pane_assign``)
        self._ways = _WAYS
        self._gcache = np.full(2 * self._ways * 64, -1, dtype=np.int64)
        self._indexed: list[int] = []  # panes whose slots are all in the hash map

    def bind(self) -> None:
        st = self.store
        if self._k > 1 and len(st.builtin) == len(st.aggs):
            # built-ins only: plug-ins merge (row, slot) pairs
            self._stacks = _PaneStacks(self._k, st.ops, st.offs, [len(st.states[i].names) for i in st.builtin],
                                       st.records.rec.shape[1], st.final)

    def slot_capacity(self) -> int:
        return int(self._slots.counters[0])

    def num_slots(self) -> int:
        return int(self._slots.counters[4])

    def moves(self, old: int, t: int) -> bool:
        return (self._j_fired(old) != self._j_fired(t) or self._j_purged(old) != self._j_purged(t)
                or self._ndirty > 0)

    def advance(self, old: int, t: int) -> pa.RecordBatch:
        return self._advance_panes((self._j_fired(old), self._j_fired(t)), (self._j_purged(old), self._j_purged(t)))

    # ------------------------------------------------------------ snapshot
    def arrays(self) -> dict[str, np.ndarray]:
        return {"hg": self._hg, "hq": self._hq, "hv": self._hv,
                "panes": np.array(self._panes, dtype=np.int64), "gcache": self._gcache}

    def meta(self) -> dict[str, Any]:
        return {"ndirty": self._ndirty, "pane_layout": _window.PANE_LAYOUT,
                "ways": self._ways, "indexed": list(self._indexed)}

    def readable(self, arrays: dict[str, np.ndarray], meta: Mapping[str, Any]) -> dict[str, np.ndarray]:
        layout = meta.get("pane_layout", _SINGLE_SLOTS)
        if layout not in (_window.PANE_LAYOUT, _SINGLE_SLOTS):
            raise ValueError(f"state lays out pane slots as {layout!r}, this version "
                             f"as {_window.PANE_LAYOUT!r}: take the snapshot with this version")
        return _chunks_from_single_slots(arrays) if layout == _SINGLE_SLOTS else arrays

    def restore(self, arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any]) -> None:
        self._hg, self._hq, self._hv = arrays["hg"], arrays["hq"], arrays["hv"]
        self._panes = arrays["panes"].tolist()
        self._gcache, self._indexed = arrays["gcache"], list(meta.get("indexed", []))
        self._ndirty = int(meta["ndirty"])
        if meta.get("ways") != self._ways:  # ways of another size, or not newest-first:
            self._gcache = np.full(2 * self._ways * 64, -1, dtype=np.int64)  # every slot into the map
            self._indexed = []
            for q in self._panes:
                self._index_pane(q)

    # ------------------------------------------------------------ assignment and emission
    def _ensure_emit(self, rows: int, pairs: int, merged: bool = True) -> None:
        """Room for ``rows`` output rows (groups, and merged records unless
        ``merged`` is False; those of windows emitted earlier in this call
        kept) and ``pairs`` (row, slot) pairs: the emission scratch, kept
        across calls."""
        if merged:
            self.store.merged.ensure(rows)
        self._emit_groups = _arrow.grown(self._emit_groups, rows)
        self._emit_row = _arrow.grown(self._emit_row, pairs)
        self._emit_src = _arrow.grown(self._emit_src, pairs)

    def _ensure_hash(self, force: bool = False) -> None:
        """Keep the pane map at most half full (``force``: grow or clean now)."""
        counters = self._slots.counters
        live, tomb = int(counters[2]), int(counters[3])
        cap = len(self._hv)
        if not force and 4 * (live + tomb) <= cap:
            return
        new = 256
        while new < 4 * (live + 1):
            new *= 2
        hg = np.zeros(new, dtype=np.int64)
        hq = np.zeros(new, dtype=np.int64)
        hv = np.full(new, -1, dtype=np.int64)
        _window.pane_rehash(self._hg, self._hq, self._hv, hg, hq, hv)
        self._hg, self._hq, self._hv = hg, hq, hv
        counters[3] = 0

    def _j_fired(self, t: int) -> int:
        """Last window index with ``end <= t`` (a Python int: exact at any ``t``)."""
        return (t - self._offset - self._size) // self._slide

    def _j_purged(self, t: int) -> int:
        """Last window index with ``end + allowed_lateness <= t``."""
        return (t - self._lateness - self._offset - self._size) // self._slide

    def assign(self, gids: np.ndarray, ts: np.ndarray, tmin: int | None) -> tuple[np.ndarray, int]:
        assert tmin is not None  # (rows in windows have event times)
        n = len(gids)
        stacks = self._stacks
        if stacks is not None and stacks.hi is not None and tmin < self._offset + (stacks.hi + 1) * self._p:
            stacks.clear()  # a row in a pane the stacks have read
        sl = self._slots
        sl.ensure(n)
        out = np.empty(n, dtype=np.int64)
        new_panes = np.empty(n + 1, dtype=np.int64)
        wm = self.store.wm
        jp, jf = self._j_purged(wm), self._j_fired(wm)
        q_dead = (jp + 1) * self._ks  # panes below it: every window purged
        q_dirty = jf * self._ks + self._k - 1 if jp < jf else q_dead - 1  # up to it: a window fired, not purged
        q_dead, q_dirty = (max(I64_MIN, min(I64_MAX, q)) for q in (q_dead, q_dirty))  # every pane is in int64
        self._gcache = _arrow.grown(self._gcache, 2 * self._ways * self.store.keys.num_groups, -1)
        done, nlate_all, new_all = 0, 0, []
        while True:
            self._ensure_hash()
            done, nnew, nlate, ndirty, unindexed = _window.pane_assign(
                self._hg, self._hq, self._hv, sl.s_group, sl.s_next, sl.s_flags,
                sl.counters, gids, ts, self._offset, self._p, q_dead, q_dirty, self._gcache, self._ways,
                done, len(self._hv) // 2, np.array(self._indexed, dtype=np.int64), out, new_panes)
            nlate_all += nlate
            self._ndirty += ndirty
            new_all += new_panes[:nnew].tolist()
            if done == n:
                break
            if unindexed is not None:  # a row ``ways`` or more panes behind its key's newest
                self._index_pane(unindexed)
            elif int(sl.counters[0]) + _window.PANE_CHUNK_MAX > len(sl.s_group):
                sl.ensure(n - done + _window.PANE_CHUNK_MAX)  # out of room for a new chunk
            else:
                self._ensure_hash(force=True)
        for q in new_all:
            bisect.insort(self._panes, q)
        return out, nlate_all

    def _index_pane(self, q: int) -> None:
        """Put pane ``q``'s slots in the hash map (see ``pane_assign``)."""
        sl = self._slots
        while True:
            self._ensure_hash()
            if _window.pane_index(self._hg, self._hq, self._hv, sl.s_group, sl.s_next, sl.s_flags,
                                  sl.counters, q, len(self._hv) // 2):
                break
            self._ensure_hash(force=True)
        bisect.insort(self._indexed, q)

    def _pane_windows(self, lo: int, hi: int) -> list[int]:
        """Window indices j in (lo, hi] that contain an active pane."""
        ks, k = self._ks, self._k
        js: set[int] = set()
        panes = self._panes
        # panes of windows in (lo, hi]: q in [(lo+1)*ks, hi*ks + k)
        a = bisect.bisect_left(panes, (lo + 1) * ks)
        b = bisect.bisect_left(panes, hi * ks + k)
        for q in panes[a:b]:
            jf = -((k - 1 - q) // ks)  # ceil((q - k + 1) / ks)
            jl = q // ks
            for j in range(max(jf, lo + 1), min(jl, hi) + 1):
                js.add(j)
        return sorted(js)

    def _panes_between(self, lo: int, hi: int) -> list[int]:
        """The active panes q with ``lo <= q < hi``, ascending."""
        return self._panes[bisect.bisect_left(self._panes, lo):bisect.bisect_left(self._panes, hi)]

    def _pane_rows(self, q: int) -> tuple[np.ndarray, np.ndarray]:
        """Pane ``q``'s groups and their slots, chunk by chunk (so its records
        are read in runs; each group once)."""
        sl = self._slots
        live = int(sl.counters[4])  # no pane has more slots
        self._emit_src = _arrow.grown(self._emit_src, live)
        self._emit_row = _arrow.grown(self._emit_row, live)
        n = _window.pane_slots(self._hg, self._hq, self._hv, sl.s_group, sl.s_next, sl.s_flags, q,
                               self._emit_src, self._emit_row)
        if n < 0:
            raise RuntimeError(f"pane {q} holds more slots than the {live} live ones")
        return _arrow.concat([self._emit_row[:n]], np.int64), _arrow.concat([self._emit_src[:n]], np.int64)

    def _window_panes(self, j: int) -> np.ndarray:
        """Window ``j``'s active panes, newest first."""
        lo = j * self._ks
        return np.array(self._panes_between(lo, lo + self._k)[::-1], dtype=np.int64)

    def _advance_panes(self, fired: tuple[int, int], purged: tuple[int, int]) -> pa.RecordBatch:
        """``fired`` / ``purged``: the last window fired / purged before and
        after the watermark moved."""
        (jf_old, jf_new), (jp_old, jp_new) = fired, purged
        work: list[tuple[int, bool]] = []
        if self._ndirty and jf_old > jp_old:
            work += [(j, True) for j in self._pane_windows(jp_old, jf_old)]
        if jf_new > jf_old:
            work += [(j, False) for j in self._pane_windows(jf_old, jf_new)]
        out = self._emit_pane_windows(work) if work else self.store.empty()
        self._ndirty = 0  # every dirty pane lies in a re-fired window: all cleared there
        # purge panes whose last window is purged: q // ks <= jp_new
        limit = (jp_new + 1) * self._ks  # panes q < limit
        b = bisect.bisect_left(self._panes, limit)
        if b:
            dead = np.array(self._panes[:b], dtype=np.int64)
            del self._panes[:b]
            del self._indexed[:bisect.bisect_left(self._indexed, limit)]
            sl = self._slots
            freed = np.empty(int(sl.counters[0]), dtype=np.int64)
            nf = _window.pane_purge(self._hg, self._hq, self._hv, sl.s_group, sl.s_next,
                                    sl.s_flags, sl.counters, dead, freed)
            self.store.reset_slots(freed[:nf], self._cold_purge)
        return out

    def _emit_pane_windows(self, work: list[tuple[int, bool]]) -> pa.RecordBatch:
        """The output rows of windows ``work`` ((index, refire) in order): each
        window's groups merged over its panes; a refire only the groups with
        a pane updated since the window fired."""
        # built-in aggregates merge inside the emission kernel, into one record per
        # output row (laid out as their shared state); others get (row, slot) pairs
        st, sl = self.store, self._slots
        st.records.ensure(self.slot_capacity())
        rec = st.records.rec
        want_pairs = len(st.builtin) < len(st.aggs)
        direct = self._k == 1  # a window is one pane: read each row's slot, merge nothing
        pieces_s, pieces_row, starts, counts = [], [], [], []
        nlive = int(sl.counters[0])
        self._mark = _arrow.grown(self._mark, st.keys.num_groups, -1)
        refire_panes: set[int] = set()
        total_rows = 0
        stacks = self._stacks
        fast: list[int] = []  # with stacks: the windows emitted from them, after every refire
        for j, refire in work:
            if stacks is not None and not refire:
                fast.append(j)
                continue
            panes = self._window_panes(j)
            if len(panes) == 0:
                continue
            if refire:
                refire_panes.update(panes.tolist())
            self._ensure_emit(total_rows + max(nlive, 1), nlive, merged=not direct)
            try:
                nrows, npairs = _window.pane_emit(self._hg, self._hq, self._hv, sl.s_group, sl.s_next,
                                                  sl.s_flags, panes, refire, self._mark, st.ops,
                                                  st.offs, rec, st.merged.rec, total_rows,
                                                  self._emit_groups, self._emit_row, self._emit_src,
                                                  not direct, want_pairs)
            except SumOverflowError as exc:
                raise st.overflow(exc, self._window_text(j)) from None
            if nrows == 0:
                continue
            if want_pairs:
                pieces_row.append(_arrow.concat([self._emit_row[:npairs]], np.int64))  # the scratch is reused
            if want_pairs or direct:
                pieces_s.append(_arrow.concat([self._emit_src[:npairs]], np.int64))  # the scratch is reused
            starts.append(self._offset + j * self._slide)
            counts.append(nrows)
            total_rows += nrows
        columns = None
        if stacks is not None and (fast or total_rows):
            total_rows, columns = self._emit_stacks(stacks, fast, total_rows, starts, counts)
        if refire_panes:
            _window.pane_clear_dirty(self._hg, self._hq, self._hv, sl.s_next, sl.s_flags,
                                     np.array(sorted(refire_panes), dtype=np.int64))
        out = st.empty()
        if total_rows:
            results: list = [None] * len(st.aggs)
            if want_pairs or direct:
                src = pieces_s[0] if len(pieces_s) == 1 else _arrow.concat(pieces_s, np.int64)
            if columns is None and st.builtin:  # all built-ins' result columns in one pass
                merged, read = (rec, src) if direct else (st.merged.rec[:total_rows], None)
                columns = st.final.columns(merged, read)
            if columns is not None:
                for i, result in zip(st.builtin, st.final.results(columns, total_rows)):
                    results[i] = result
            if want_pairs:  # plug-ins may use scratch slots from the high-water mark up
                rows = pieces_row[0] if len(pieces_row) == 1 else _arrow.concat(pieces_row, np.int64)
                for i, (a, state) in enumerate(zip(st.aggs, st.states)):
                    if results[i] is None:
                        st.states[i], results[i] = a.combine(state, rows, src, total_rows, nlive)
            ws, we = _arrow.empty(total_rows, np.int64)[0], _arrow.empty(total_rows, np.int64)[0]
            at = 0
            for start, count in zip(starts, counts):  # each window's rows (two fills: no pass reads ws back)
                ws[at:at + count] = start
                we[at:at + count] = start + self._size
                at += count
            out = st.build(ws, we, self._emit_groups[:total_rows], results)
        return out

    def _emit_stacks(self, stacks: _PaneStacks, fast: list[int], nrows: int, starts: list[int],
                     counts: list[int]) -> tuple[int, ResultColumns]:
        """Windows ``fast`` read off the pane stacks, after the ``nrows`` rows
        of merged records already emitted, straight into result columns (see
        ``ResultPlan``). Returns the rows and those columns."""
        plan = self.store.final
        out = plan.columns(self.store.merged.rec[:nrows])  # the rows emitted so far (refires)
        for i, j in enumerate(fast):
            try:
                need = stacks.prepare(self, j * self._ks)
                if i == 0 or nrows + need > out.capacity:
                    # room for this window and, at its size, the rest (one allocation in the usual case)
                    cap = nrows + need * (len(fast) - i)
                    out = out.grown(nrows, cap)
                    self._emit_groups = _arrow.grown(self._emit_groups, cap)
                n = stacks.emit(self, self._emit_groups[nrows:], out, nrows)
            except SumOverflowError as exc:  # (merges of panes: the stacks number aggregates with values)
                raise self.store.overflow(exc, self._window_text(j), value_index=True) from None
            if n:
                starts.append(self._offset + j * self._slide)
                counts.append(n)
                nrows += n
        return nrows, out

    def _window_text(self, j: int) -> str:
        start = self._offset + j * self._slide
        return f"in window [{np.datetime64(start, 'ms')}, {np.datetime64(start + self._size, 'ms')})"
