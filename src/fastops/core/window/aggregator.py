"""``WindowAggregator``: incremental, keyed, event-time window aggregation.

Flink's semantics over Arrow batches::

    agg = WindowAggregator(Tumbling("1s"), by=["user"], aggs={"n": agg.count()})
    agg.process(batch)                  # accumulate (any number of times)
    out = agg.advance_watermark(t)      # windows with end <= t
    late = agg.take_late()              # rows that came after their window was purged
    out = agg.flush()                   # end of stream: everything still open

Windows are ``[start, end)`` with ``start = floor((t - offset) / slide) * slide
+ offset``. ``advance_watermark(t)`` emits every window with ``end <= t`` (it
fires when the watermark passes ``end - 1``) and purges it once
``end + allowed_lateness <= t``. A watermark behind the current one is
ignored.

Lateness
    A row whose window is fired but not purged updates it, and the next
    ``advance_watermark`` emits the window again (a second row with the
    updated result, as Flink's default trigger). A row whose window is purged
    goes to the side output (``late`` / ``take_late()``) with a ``reason``
    and the ``watermark`` it met; rows are never dropped silently:
    rows counted in windows + late rows = rows in. For sliding windows a row
    belongs to ``size / slide`` windows; it is late only if *all* of them are
    purged (its pane is gone). If only some are purged, the row still updates
    its pane and the live windows re-emit; purged windows are never emitted
    again. For session windows a row is late if it joins no live session and
    its own session ``[t, t + gap)`` would already be purged.

Output
    ``window_start``, ``window_end`` (``timestamp[ms]``), the key columns with
    their types, then the aggregates in the order given. Rows come in
    window-end order (within one ``advance_watermark`` call; re-emitted
    windows, whose ends are older, come first). Within one end the order is
    that of the slot table (tumbling/sliding: by pane, keys in the pane's
    slot list; sessions: by start), deterministic for the same input and
    state, so a restored run emits exactly what the original would have.
    Without a window (``GlobalWindow`` / ``None``) the output has no
    window columns: ``take_updates()`` gives the groups changed since the last
    call and ``flush()`` every group.

Implementation
    Key columns -> dense group ids (:class:`fastops.core.keys.KeyTable`); a slot
    table maps (group, pane) -> slot (tumbling: pane = window; sliding:
    panes of ``gcd(size, slide)``, a window combines its panes at emission,
    so per-row cost does not grow with ``size / slide``) or keeps per-group
    session lists (sessions a row bridges are merged); aggregate state is
    columnar per slot. Purged slots are reused.

Performance notes: per batch one pass for the key hash, one for the group
lookup, one for slot assignment and one for all built-in aggregates (their
records sit side by side in one array, so a row touches one cache line),
all in ``nogil`` kernels. A firing window costs one kernel call: it lists
the slots of its panes, numbers the output rows and merges the built-ins
into a reused scratch record per row. Nothing per row or per group happens
in Python.
"""
from __future__ import annotations

import bisect
import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.types as pat

from fastops._kernels import window as _window
from fastops.core import arrow as _arrow
from fastops.core.aggregates import (
    BuiltinAggregate,
    Columns,
    ResultColumns,
    ResultPlan,
    SlotAggregate,
    SumOverflowError,
    _Records,
    builtin_layout,
    for_input,
    record_width,
    sum_overflow,
    update_builtins,
)
from fastops.core.durations import parse_duration
from fastops.core.keys import KeyTable
from fastops.core.watermarks import MIN_WATERMARK, to_ms
from fastops.core.window.assigners import (
    TIME_LIMIT,
    GlobalWindow,
    Session,
    Sliding,
    Tumbling,
    as_window,
    bound_type,
    check_event_times,
    event_time_range,
)

__all__ = ["MissingColumnError", "State", "WindowAggregator"]

MAX_WATERMARK = 2**63 - 1
_I64_MIN = -(2**63)
_I64_MAX = 2**63 - 1
_FAR = TIME_LIMIT  # the kernels' range of window bounds
_TS = pa.timestamp("ms")
_RESERVED = ("window_start", "window_end")
HOLD_ROWS = 65536  # held rows (see WindowAggregator.process) are aggregated at this many


class MissingColumnError(KeyError, ValueError):
    """A column the aggregator needs is not in the batch (both KeyError and ValueError)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


def _clamp(v: int) -> int:
    return max(-_FAR, min(_FAR, v))


def _timestamps(ms: np.ndarray, type: pa.DataType = _TS) -> pa.Array:
    """int64 ms as a timestamp[ms] array (of ``type``: its time zone), sharing the memory."""
    ms = np.ascontiguousarray(ms, dtype=np.int64)
    return pa.Array.from_buffers(type, len(ms), [None, pa.py_buffer(ms)])


def _plugin_type(t: pa.DataType | None) -> pa.DataType | None:
    """The type plug-in aggregates see for input type ``t``: string_view /
    binary_view as large_string / large_binary (Arrow's take and filter, which
    plug-ins use, have no kernels for views), else ``t``."""
    return None if t is None else (_arrow.view_storage(t) or t)


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


# ---------------------------------------------------------------- state

@dataclass(frozen=True)
class State:
    """A snapshot of a :class:`WindowAggregator` (immutable; Arrow inside).

    ``meta``: scalars (watermark, counters, ...); ``arrays``: slot-table
    arrays; ``keys``: the key table (one row per group, in id order);
    ``group_hashes``: each group's 64-bit key hash (for splitting keyed state
    by key group); ``aggs``: each aggregate's serialised state; ``late``:
    late rows not yet taken. ``to_bytes`` / ``from_bytes`` round-trip through
    one Arrow IPC stream; no pickled code.
    """

    config: str
    meta: Mapping[str, Any]
    arrays: Mapping[str, np.ndarray]
    keys: pa.RecordBatch
    group_hashes: np.ndarray
    aggs: tuple
    input_schema: pa.Schema
    late: pa.RecordBatch | None = None

    def to_bytes(self) -> bytes:
        names, kinds, payloads = [], [], []
        ipc = _arrow.to_ipc
        for k, a in self.arrays.items():
            names.append(k)
            kinds.append("array:" + a.dtype.str)
            payloads.append(np.ascontiguousarray(a).tobytes())
        names.append("group_hashes")
        kinds.append("array:" + self.group_hashes.dtype.str)
        payloads.append(np.ascontiguousarray(self.group_hashes).tobytes())
        names.append("keys")
        kinds.append("ipc")
        payloads.append(ipc(self.keys))
        names.append("input_schema")
        kinds.append("ipc")
        payloads.append(ipc(pa.RecordBatch.from_pylist([], schema=self.input_schema)))
        for i, b in enumerate(self.aggs):
            names.append(f"agg{i}")
            kinds.append("bytes")
            payloads.append(bytes(b))
        if self.late is not None:
            names.append("late")
            kinds.append("ipc")
            payloads.append(ipc(self.late))
        meta = {b"fastops.core.window.aggregator.config": self.config.encode(),
                b"fastops.core.window.aggregator.meta": json.dumps(dict(self.meta)).encode()}
        schema = pa.schema([("name", pa.string()), ("kind", pa.string()),
                            ("payload", pa.large_binary())], metadata=meta)
        batch = pa.RecordBatch.from_arrays(
            [pa.array(names), pa.array(kinds), pa.array(payloads, pa.large_binary())], schema=schema)
        return ipc(batch)

    @classmethod
    def from_bytes(cls, data: bytes) -> State:
        try:
            table = _arrow.from_ipc(data)
        except (pa.ArrowInvalid, OSError) as exc:
            raise ValueError(f"not a window aggregator state: {exc}") from None
        meta_raw = table.schema.metadata or {}
        if b"fastops.core.window.aggregator.config" not in meta_raw:
            raise ValueError("not a window aggregator state: metadata missing")
        config = meta_raw[b"fastops.core.window.aggregator.config"].decode()
        meta = json.loads(meta_raw[b"fastops.core.window.aggregator.meta"].decode())
        arrays: dict[str, np.ndarray] = {}
        aggs: list[bytes] = []
        keys = late = schema = None
        hashes = np.zeros(0, dtype=np.uint64)
        for name, kind, payload in zip(table.column("name").to_pylist(),
                                       table.column("kind").to_pylist(),
                                       table.column("payload").to_pylist()):
            if kind.startswith("array:"):
                a = np.frombuffer(payload, dtype=np.dtype(kind[6:])).copy()
                if name == "group_hashes":
                    hashes = a
                else:
                    arrays[name] = a
            elif kind == "ipc":
                b = _arrow.from_ipc(payload)
                rb = _arrow.as_batch(b)
                if name == "keys":
                    keys = rb
                elif name == "late":
                    late = rb
                elif name == "input_schema":
                    schema = b.schema
            elif kind == "bytes":
                aggs.append(payload)
        return cls(config, meta, arrays, keys, hashes, tuple(aggs), schema, late)


# ---------------------------------------------------------------- aggregator



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

    def prepare(self, wa: WindowAggregator, s: int) -> int:
        """Bring both stacks to window ``[s, s + k)``; returns an upper bound of its rows.
        A record whose counts differ where the layout shares them (a null or
        NaN that one aggregate skipped and another counted) rebuilds both
        stacks with a count per aggregate, until the next block: both are
        rebuilt there anyway, so one count is tried again."""
        self._fit(wa._keys.num_groups)
        if self.retry and self._block(s) != self.prefix_block:
            self._use_layout(shared=True)
            self.prefix_block = self.suffix_block = None  # (the panes' lists stay: they hold no records)
        try:
            return self._prepare(wa, s)
        except _CountsDiffer:
            self._use_layout(shared=False)
            self.retry = True
            self.clear()
            return self._prepare(wa, s)

    def _block(self, s: int) -> int:
        """The first pane of the block that holds window ``[s, s + k)``'s newest pane."""
        return (s + self.k - 1) // self.k * self.k

    def _prepare(self, wa: WindowAggregator, s: int) -> int:
        k = self.k
        e = s + k - 1
        b = self._block(s)
        self._prefix(wa, b, e)
        self.with_suffix = s < b
        if self.with_suffix:
            self._suffix(wa, b - k, s)
        self.hi = e if self.hi is None else max(self.hi, e)
        return self.prefix_groups + (self.suffix_groups if self.with_suffix else 0)

    def emit(self, wa: WindowAggregator, out_groups: np.ndarray, out: ResultColumns, row0: int) -> int:
        """The prepared window's rows as result columns from ``row0`` on (see ``dense_window``)."""
        sbits = self.sbits if self.with_suffix else self.sbits[:0]
        nnull = np.empty(len(self.cnt_words), dtype=np.int64)
        n = _window.dense_window(sbits, self.ptr, self.ss, self.pbits, self.acc, self.layout, self.words,
                                 self.codes, self.cnt_words, out_groups, out.cols, out.nulls, nnull, row0)
        out.nnull += nnull
        return n

    def _prefix(self, wa: WindowAggregator, b: int, e: int) -> None:
        if self.prefix_block != b or self.prefix_upto > e:
            self.prefix_block, self.prefix_upto, self.prefix_groups = b, b - 1, 0
            self.pbits[:] = 0
            for q in [q for q in self.read if q < b - self.k]:
                del self.read[q]
        for q in wa._panes_between(self.prefix_upto + 1, e + 1):
            groups, slots = self.read[q] = wa._pane_rows(q)
            self.prefix_groups += _added(_window.dense_add(groups, slots, wa._records.rec, self.layout,
                                                           self.acc, self.pbits))
        self.prefix_upto = e

    def _suffix(self, wa: WindowAggregator, b0: int, s: int) -> None:
        if self.suffix_block != b0 or self.suffix_from > s:
            panes = wa._panes_between(s, b0 + self.k)
            runs = [self.read.pop(q, None) or wa._pane_rows(q) for q in panes]
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
                self.suffix_groups += _added(_window.suffix_add(groups, slots, wa._records.rec, self.layout,
                                                                self.ss, self.ss_group, self.ss_next, start,
                                                                self.ptr, self.sbits))
                self.suffix_panes.insert(0, (q, start, end))
                end = start
            self.suffix_block, self.suffix_from = b0, s
        while self.suffix_panes and self.suffix_panes[0][0] < s:  # windows fire in order: drop older panes
            _, lo, hi = self.suffix_panes.pop(0)
            self.suffix_groups -= _window.suffix_drop(self.ss_group, self.ss_next, lo, hi, self.ptr, self.sbits)
        self.suffix_from = s


class WindowAggregator:
    """Keyed event-time window aggregation (see module docs).

    Parameters
    ----------
    window
        ``Tumbling``, ``Sliding``, ``Session``, ``GlobalWindow`` or None.
    by
        Key column name(s); empty for one global group.
    aggs
        Output name -> aggregate (``fastops.core.aggregates.count()``, ...), in output order.
    time
        Event-time column: integer ms, timestamp (any unit) or date. May be
        None only without a window (``first``/``last`` then follow arrival order).
    allowed_lateness
        Duration a fired window is kept to absorb late rows.
    schema
        Optional input schema: fixes types up front (so even an empty output
        has the final schema) and validates the columns at construction.
    """

    def __init__(self, window: Any, by: Sequence[str] | str = (), aggs: Mapping[str, Any] | None = None,
                 time: str = "ts", allowed_lateness: Any = 0, schema: pa.Schema | None = None):
        self.window = as_window(window)
        if isinstance(by, str):
            by = [by]
        self.by = [str(b) for b in by]
        if len(set(self.by)) != len(self.by):
            raise ValueError(f"duplicate key columns in by={self.by}")
        if not aggs:
            raise ValueError("aggs must name at least one aggregate")
        if not isinstance(aggs, Mapping):
            raise TypeError(f"aggs must be a dict name -> aggregate, got {type(aggs).__name__}")
        self.aggs: dict[str, SlotAggregate] = {}
        for name, a in aggs.items():
            if not isinstance(name, str):
                raise TypeError(f"aggregate names must be str, got {name!r}")
            if not isinstance(a, SlotAggregate):
                raise TypeError(f"aggregate {name!r} must be a fastops.core.aggregates aggregate, got {type(a).__name__}")
            self.aggs[name] = copy.copy(a)  # bound to this aggregator's input types
        self._windowed = not isinstance(self.window, GlobalWindow)
        out_names = (list(_RESERVED) if self._windowed else []) + self.by + list(self.aggs)
        dup = {n for n in out_names if out_names.count(n) > 1}
        if dup:
            raise ValueError(f"output column name(s) {sorted(dup)} used twice "
                             f"(window columns, keys and aggregate names must differ)")
        if time is None and self._windowed:
            raise ValueError(f"{type(self.window).__name__} windows need an event-time column (time=None)")
        if time is not None and not isinstance(time, str):
            raise TypeError(f"time must be a column name, got {type(time).__name__}")
        self.time = time
        self.allowed_lateness = parse_duration(allowed_lateness)
        if self.allowed_lateness < 0:
            raise ValueError(f"allowed_lateness must be >= 0, got {allowed_lateness!r}")
        self._keys = KeyTable(self.by)
        self._agg_list = list(self.aggs.values())
        self._states: list = []
        self._input_types: dict[str, pa.DataType] | None = None
        self._schema: pa.Schema | None = None
        self._hold_columns: list[str] = []  # see _bind
        self._held: list[pa.RecordBatch] = []
        self._held_rows = 0
        self._held_tmin = 0  # the earliest event time held (while any is)
        self._out_schema: pa.Schema | None = None
        self._bounds = _TS  # window bounds and late rows' watermark: the time column's zone (see _bind)
        self._empty_out: tuple[pa.Schema, pa.RecordBatch] | None = None
        self._wm = MIN_WATERMARK
        self._late: list[pa.RecordBatch] = []
        self.rows_in = 0
        self.rows_late = 0
        self._overflowed: SumOverflowError | None = None  # an int sum overflowed: the state is unusable
        self._init_tables()
        if schema is not None:
            self._bind(schema)

    # ------------------------------------------------------------ setup
    def _init_tables(self) -> None:
        self._counters = np.zeros(12, dtype=np.int64)
        self._free = np.zeros(64, dtype=np.int64)
        self._s_group = np.zeros(64, dtype=np.int64)
        self._s_next = np.full(64, -1, dtype=np.int64)
        self._s_flags = np.zeros(64, dtype=np.uint8)
        self._ndirty = 0
        w = self.window
        if isinstance(w, (Tumbling, Sliding)):
            self._mode = "pane"
            self._size, self._slide, self._offset = w.size, w.slide, w.offset
            self._p = w.pane
            self._ks = self._slide // self._p
            self._k = self._size // self._p
            # a pane's slots are purged when its last window is: at least a pane width after
            # their last update, with sliding windows or lateness, so their records are cold
            self._cold_purge = self._k > 1 or self.allowed_lateness >= self._p
            self._hg = np.zeros(256, dtype=np.int64)
            self._hq = np.zeros(256, dtype=np.int64)
            self._hv = np.full(256, -1, dtype=np.int64)
            self._panes: list[int] = []
            self._stacks: _PaneStacks | None = None  # built with the records (_share_states)
            self._emit_groups = np.empty(0, dtype=np.int64)  # emission scratch (see _ensure_emit)
            self._emit_row = np.empty(0, dtype=np.int64)
            self._emit_src = np.empty(0, dtype=np.int64)
            self._mark = np.full(64, -1, dtype=np.int64)
            # per group ``ways`` (pane, slot) pairs, the newest pane of each residue: rows up to
            # three panes out of order per key find their slot there (others: ``pane_assign``)
            self._ways = _WAYS
            self._gcache = np.full(2 * self._ways * 64, -1, dtype=np.int64)
            self._indexed: list[int] = []  # panes whose slots are all in the hash map
        elif isinstance(w, Session):
            self._mode = "session"
            self._gap = w.gap
            self._g_head = np.full(64, -1, dtype=np.int64)
            self._s_start = np.zeros(64, dtype=np.int64)
            self._s_end = np.zeros(64, dtype=np.int64)
            self._s_parent = np.full(64, -1, dtype=np.int64)
        else:
            self._mode = "global"
            self._touched = np.zeros(64, dtype=np.uint8)

    def _config(self) -> str:
        w = self.window
        desc = {"window": type(w).__name__, "params": {k: getattr(w, k) for k in getattr(w, "__dataclass_fields__", {})},
                "by": self.by, "aggs": [[n, a.describe()] for n, a in self.aggs.items()],
                "time": self.time, "allowed_lateness": self.allowed_lateness}
        return json.dumps(desc, sort_keys=True)

    def _bind(self, schema: pa.Schema) -> None:
        """Fix the input types from the first batch's schema (validating them)."""
        names = schema.names
        self._check_columns(names)
        types = {}
        if self.time is not None:
            to_ms(pa.array([], type=schema.field(self.time).type), self.time)  # type check only
            types[self.time] = schema.field(self.time).type
            self._bounds = bound_type(types[self.time])
        for b in self.by:
            types[b] = schema.field(b).type
        # the aggregates that run (``self.aggs`` stays as given: it is the config), and the
        # input type each sees
        self._agg_list, seen = [], []
        for name, a in self.aggs.items():
            t = None if a.column is None else schema.field(a.column).type
            if a.column is not None:
                types[a.column] = t
            a = for_input(a, t)
            if isinstance(a, BuiltinAggregate):
                a.bind(t)
            else:
                t = _plugin_type(t)
                a.validate(t)
            self._agg_list.append(a)
            seen.append(t)
        if self.by:
            self._keys._prepare([pa.array([], type=types[b]) for b in self.by])
        self._input_types = types
        self._schema = schema  # batches of this schema need no column checks
        # Small batches cost mostly their fixed steps, so tumbling and sliding
        # windows of built-in aggregates hold batches whose rows are all ahead
        # of the watermark and aggregate them together, before any window
        # fires or is purged (their rows meet the same fired and purged windows
        # either way). Dictionary and view columns are not held (concatenating
        # them would re-encode).
        holdable = self._mode == "pane" and self.time is not None and all(
            isinstance(a, BuiltinAggregate) for a in self._agg_list) and not any(
            pat.is_dictionary(t) or _arrow.view_storage(t) is not None for t in types.values())
        self._hold_columns = list(types) if holdable else []
        self._states = [a.new_state() for a in self._agg_list]
        self._share_states()
        fields = []
        if self._windowed:
            fields += [pa.field("window_start", self._bounds), pa.field("window_end", self._bounds)]
        fields += [pa.field(b, self._keys.types[i]) for i, b in enumerate(self.by)]
        for name, a, t in zip(self.aggs, self._agg_list, seen):
            fields.append(pa.field(name, a.output_type(t)))
        self._out_schema = pa.schema(fields)

    def _share_states(self) -> None:
        """Built-in aggregates keep their records side by side in one array (one
        cache line per slot). Their positions, merge codes and word offsets are
        fixed from here on, so every update and emission reuses them; a pane
        window's output rows merge them into records of the same layout."""
        self._builtin = [i for i, (a, _) in enumerate(zip(self._agg_list, self._states))
                         if isinstance(a, BuiltinAggregate)]
        states = [self._states[i] for i in self._builtin]
        self._records = Columns.share(states)
        self._ops, self._offs = builtin_layout([self._agg_list[i] for i in self._builtin], states)
        self._merged = _Records(self._records.rec.shape[1])
        self._final = ResultPlan([self._agg_list[i] for i in self._builtin], states)
        if self._mode == "pane" and self._k > 1 and len(self._builtin) == len(self._agg_list):
            # built-ins only: plug-ins merge (row, slot) pairs
            self._stacks = _PaneStacks(self._k, self._ops, self._offs, [len(st.names) for st in states],
                                       self._records.rec.shape[1], self._final)

    def _check_columns(self, names: Sequence[str]) -> None:
        if self.time is not None and self.time not in names:
            raise MissingColumnError(f"time column {self.time!r} not in batch (columns: {list(names)})")
        for b in self.by:
            if b not in names:
                raise MissingColumnError(f"key column {b!r} not in batch (columns: {list(names)})")
        for name, a in self.aggs.items():
            if a.column is not None and a.column not in names:
                raise MissingColumnError(f"aggregate {name!r}: column {a.column!r} not in batch "
                                         f"(columns: {list(names)})")

    @property
    def output_schema(self) -> pa.Schema | None:
        """Schema of emitted batches (known after the first batch or with ``schema=``)."""
        return self._out_schema

    @property
    def watermark(self) -> int:
        return self._wm

    @property
    def key_table(self) -> KeyTable:
        self._release()
        return self._keys

    @property
    def num_slots(self) -> int:
        """Slots in use (open windows / panes / sessions times keys)."""
        self._release()
        if self._mode == "global":
            return self._keys.num_groups
        if self._mode == "pane":
            return int(self._counters[4])
        return int(self._counters[0] - self._counters[1])

    # ------------------------------------------------------------ process
    def process(self, batch: pa.RecordBatch | pa.Table) -> None:
        """Accumulate the rows of ``batch``.

        The batch is checked at once (a bad one raises and changes nothing).
        A batch whose rows are all ahead of the watermark may be held and
        aggregated together with later ones (at ``HOLD_ROWS`` rows, when a
        window is about to fire or be purged, or when the state is read):
        small batches then share the fixed cost of a kernel pass, and every
        result is the same."""
        if isinstance(batch, pa.Table):
            for b in batch.combine_chunks().to_batches():
                self.process(b)
            return
        if not isinstance(batch, pa.RecordBatch):
            raise TypeError(f"process expects a pyarrow RecordBatch or Table, got {type(batch).__name__}")
        self._check_usable()
        schema = batch.schema
        if self._input_types is None:
            self._bind(schema)
        elif schema is not self._schema and not schema.equals(self._schema):
            self._check_columns(schema.names)
            for col, t in self._input_types.items():
                bt = schema.field(col).type
                if bt != t:
                    raise TypeError(f"column {col!r} has type {bt}, but earlier batches had {t}")
            self._schema = schema  # accepted: later batches of this schema skip the checks
        n = batch.num_rows
        if n == 0:
            return
        if self.time is None:  # running aggregate without event time: arrival order
            ts, tmin = np.arange(self.rows_in, self.rows_in + n, dtype=np.int64), None
        else:
            ts = np.ascontiguousarray(to_ms(batch.column(self.time), self.time))
            tmin = check_event_times(self.window, ts, self.time)  # an int for tumbling and sliding windows
        if self._hold_columns and tmin > self._wm:
            # no row is late or in a fired window: aggregated with later rows
            self._held_tmin = min(self._held_tmin, tmin) if self._held else tmin
            self._held.append(batch.select(self._hold_columns))
            self._held_rows += n
            self.rows_in += n
            if self._held_rows >= HOLD_ROWS:
                self._release()
            return
        self._release()
        self._aggregate(batch, ts, tmin)
        self.rows_in += n

    def _release(self) -> None:
        """Aggregate the held batches (see ``process``) as one, in arrival order."""
        if not self._held:
            return
        held, self._held, self._held_rows = self._held, [], 0
        batch = held[0]
        if len(held) > 1:
            batch = pa.RecordBatch.from_arrays(
                [pa.concat_arrays([b.column(i) for b in held]) for i in range(batch.num_columns)],
                names=batch.schema.names)
        self._aggregate(batch, np.ascontiguousarray(to_ms(batch.column(self.time), self.time)), self._held_tmin)

    def _check_usable(self) -> None:
        if self._overflowed is not None:
            raise SumOverflowError(f"the aggregator cannot go on after an earlier error: {self._overflowed}")

    def _overflow(self, exc: SumOverflowError, where: str, value_index: bool = False) -> SumOverflowError:
        """``exc`` again, naming the aggregate (``exc.aggregate``, or index
        ``exc.aggregates[0]`` among the built-ins, or with ``value_index``
        among the built-ins with values: a stack layout's), its column, its
        output name and ``where``; the aggregator refuses further work."""
        a = getattr(exc, "aggregate", None)
        if a is None and exc.aggregates:
            k = exc.aggregates[0]
            if value_index:
                k = [i for i, op in enumerate(self._ops.tolist()) if op != 0][k]
            a = self._agg_list[self._builtin[k]]
        if a is not None:
            name = next((n for n, b in zip(self.aggs, self._agg_list) if b is a), None)
            name = None if name is None or name.startswith("__") else name  # (a plan's internal name)
            exc = sum_overflow(a, name, where, getattr(exc, "detail", ""))
        self._overflowed = exc
        return exc

    def _window_text(self, j: int) -> str:
        start = self._offset + j * self._slide
        return f"in window [{np.datetime64(start, 'ms')}, {np.datetime64(start + self._size, 'ms')})"

    def _aggregate(self, batch: pa.RecordBatch, ts: np.ndarray, tmin: int | None = None) -> None:
        """Add the rows of a checked batch (event times ``ts``, their minimum
        ``tmin``: None only for windows without panes) to the state."""
        try:
            self._add_rows(batch, ts, tmin)
        except SumOverflowError as exc:
            raise self._overflow(exc, "while adding a batch") from None

    def _add_rows(self, batch: pa.RecordBatch, ts: np.ndarray, tmin: int | None) -> None:
        n = batch.num_rows
        if self.by:
            gids = self._keys.lookup_or_insert([batch.column(b) for b in self.by])
        else:
            gids = self._keys.lookup_n(n)
        if self._mode == "pane":
            slots, nlate = self._assign_panes(gids, ts, tmin)
        elif self._mode == "session":
            slots, nlate = self._assign_sessions(gids, ts)
        else:
            slots, nlate = gids, 0
            self._touched = _arrow.grown(self._touched, self._keys.num_groups)
            self._touched[gids] = 1
        builtin: list[tuple] = []
        inputs: dict[str, Any] = {}  # each column fetched once
        for a, (i, st) in zip(self._agg_list, enumerate(self._states)):
            values = None
            if a.column is not None:
                values = inputs.get(a.column)
                if values is None:
                    values = inputs[a.column] = batch.column(a.column)
            if isinstance(a, BuiltinAggregate):
                builtin.append((a, values))
            else:
                values = _arrow.without_views(values)  # as _plugin_type says
                keep = slots >= 0
                if values is not None and values.null_count:
                    keep &= values.is_valid().to_numpy(zero_copy_only=False)
                if values is None:
                    values = pa.nulls(n)
                if not keep.all():
                    idx = np.flatnonzero(keep)
                    s, v, t = slots[idx], values.take(pa.array(idx)), ts[idx]
                else:
                    s, v, t = slots, values, ts
                self._states[i] = a.update(st, s, v, t) if a.needs_time else a.update(st, s, v)
        if builtin:
            aggs, columns = zip(*builtin)
            update_builtins(list(aggs), self._records, self._ops, self._offs, slots, list(columns), ts,
                            self._slot_capacity())
        if self._mode == "session" and self._pending_release is not None:
            rel = self._pending_release
            self._pending_release = None
            self._reset_slots(rel)
            _window.session_release(self._s_parent, rel, self._free, self._counters)
        if nlate:
            self.rows_late += nlate
            self._add_late(batch, slots < 0, "window purged" if self._mode == "pane" else "session purged")

    def event_time_range(self) -> tuple[int, int]:
        """The event times (ms, inclusive) ``process`` accepts (see
        :func:`fastops.core.window.assigners.event_time_range`)."""
        return event_time_range(self.window)

    def _slot_capacity(self) -> int:
        if self._mode == "global":
            return self._keys.num_groups
        return int(self._counters[0])

    def _ensure_slots(self, extra: int) -> None:
        need = int(self._counters[0]) + extra
        self._s_group = _arrow.grown(self._s_group, need)
        self._s_next = _arrow.grown(self._s_next, need, -1)
        self._s_flags = _arrow.grown(self._s_flags, need)
        self._free = _arrow.grown(self._free, need)
        if self._mode == "session":
            self._s_start = _arrow.grown(self._s_start, need)
            self._s_end = _arrow.grown(self._s_end, need)
            self._s_parent = _arrow.grown(self._s_parent, need, -1)

    def _ensure_emit(self, rows: int, pairs: int, merged: bool = True) -> None:
        """Room for ``rows`` output rows (groups, and merged records unless
        ``merged`` is False; those of windows emitted earlier in this call
        kept) and ``pairs`` (row, slot) pairs: the emission scratch, kept
        across calls."""
        if merged:
            self._merged.ensure(rows)
        self._emit_groups = _arrow.grown(self._emit_groups, rows)
        self._emit_row = _arrow.grown(self._emit_row, pairs)
        self._emit_src = _arrow.grown(self._emit_src, pairs)

    def _ensure_hash(self, force: bool = False) -> None:
        """Keep the pane map at most half full (``force``: grow or clean now)."""
        live, tomb = int(self._counters[2]), int(self._counters[3])
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
        self._counters[3] = 0

    def _j_fired(self, t: int) -> int:
        """Last window index with ``end <= t`` (a Python int: exact at any ``t``)."""
        return (t - self._offset - self._size) // self._slide

    def _j_purged(self, t: int) -> int:
        """Last window index with ``end + allowed_lateness <= t``."""
        return (t - self.allowed_lateness - self._offset - self._size) // self._slide

    def _assign_panes(self, gids: np.ndarray, ts: np.ndarray, tmin: int) -> tuple[np.ndarray, int]:
        n = len(gids)
        stacks = self._stacks
        if stacks is not None and stacks.hi is not None and tmin < self._offset + (stacks.hi + 1) * self._p:
            stacks.clear()  # a row in a pane the stacks have read
        self._ensure_slots(n)
        out = np.empty(n, dtype=np.int64)
        new_panes = np.empty(n + 1, dtype=np.int64)
        wm = self._wm
        jp, jf = self._j_purged(wm), self._j_fired(wm)
        q_dead = (jp + 1) * self._ks  # panes below it: every window purged
        q_dirty = jf * self._ks + self._k - 1 if jp < jf else q_dead - 1  # up to it: a window fired, not purged
        q_dead, q_dirty = (max(_I64_MIN, min(_I64_MAX, q)) for q in (q_dead, q_dirty))  # every pane is in int64
        self._gcache = _arrow.grown(self._gcache, 2 * self._ways * self._keys.num_groups, -1)
        done, nlate_all, new_all = 0, 0, []
        while True:
            self._ensure_hash()
            done, nnew, nlate, ndirty, unindexed = _window.pane_assign(
                self._hg, self._hq, self._hv, self._s_group, self._s_next, self._s_flags,
                self._counters, gids, ts, self._offset, self._p, q_dead, q_dirty, self._gcache, self._ways,
                done, len(self._hv) // 2, np.array(self._indexed, dtype=np.int64), out, new_panes)
            nlate_all += nlate
            self._ndirty += ndirty
            new_all += new_panes[:nnew].tolist()
            if done == n:
                break
            if unindexed is not None:  # a row ``ways`` or more panes behind its key's newest
                self._index_pane(unindexed)
            elif int(self._counters[0]) + _window.PANE_CHUNK_MAX > len(self._s_group):
                self._ensure_slots(n - done + _window.PANE_CHUNK_MAX)  # out of room for a new chunk
            else:
                self._ensure_hash(force=True)
        for q in new_all:
            bisect.insort(self._panes, q)
        return out, nlate_all

    def _index_pane(self, q: int) -> None:
        """Put pane ``q``'s slots in the hash map (see ``pane_assign``)."""
        while True:
            self._ensure_hash()
            if _window.pane_index(self._hg, self._hq, self._hv, self._s_group, self._s_next, self._s_flags,
                                  self._counters, q, len(self._hv) // 2):
                break
            self._ensure_hash(force=True)
        bisect.insort(self._indexed, q)

    def _assign_sessions(self, gids: np.ndarray, ts: np.ndarray) -> tuple[np.ndarray, int]:
        n = len(gids)
        self._ensure_slots(n)
        self._g_head = _arrow.grown(self._g_head, self._keys.num_groups, -1)
        out = np.empty(n, dtype=np.int64)
        mdst = np.empty(n, dtype=np.int64)
        msrc = np.empty(n, dtype=np.int64)
        limit = (self._wm - self.allowed_lateness) if self._wm != MIN_WATERMARK else -_FAR
        nm, nlate = _window.session_assign(
            self._g_head, self._s_group, self._s_start, self._s_end, self._s_next, self._s_flags,
            self._s_parent, self._free, self._counters, gids, ts, self._gap, _clamp(limit),
            out, mdst, msrc)
        self._pending_release = None
        if nm:
            dst, src = mdst[:nm].copy(), msrc[:nm].copy()
            cap = self._slot_capacity()
            for i, (a, st) in enumerate(zip(self._agg_list, self._states)):
                if isinstance(a, BuiltinAggregate):
                    st.ensure(cap)
                self._states[i] = a.merge(st, dst, src)
            self._pending_release = src
        return out, nlate

    def _reset_slots(self, slots: np.ndarray) -> None:
        if len(slots) == 0:
            return
        if self._builtin:  # their shared records in one pass (as BuiltinAggregate.reset, for all)
            _window.clear_records(self._records.rec, slots,  # sized to every slot by the updates
                                  self._mode == "pane" and self._cold_purge)
        for i, (a, st) in enumerate(zip(self._agg_list, self._states)):
            if not isinstance(a, BuiltinAggregate):
                self._states[i] = a.reset(st, slots)

    def _add_late(self, batch: pa.RecordBatch, mask: np.ndarray, reason: str) -> None:
        rows = batch.filter(pa.array(mask))
        m = rows.num_rows
        reason_col = pa.DictionaryArray.from_arrays(pa.array(np.zeros(m, dtype=np.int32)), pa.array([reason]))
        wm_col = pa.array(np.full(m, self._wm, dtype=np.int64), type=self._bounds)
        names = [n for n in rows.schema.names if n not in ("reason", "watermark")]
        cols = [rows.column(n) for n in names]
        self._late.append(pa.RecordBatch.from_arrays(cols + [reason_col.cast(pa.string()), wm_col],
                                                     names=names + ["reason", "watermark"]))

    # ------------------------------------------------------------ emission
    def _empty(self) -> pa.RecordBatch:
        if self._out_schema is None:
            fields = ([pa.field("window_start", _TS), pa.field("window_end", _TS)] if self._windowed else [])
            fields += [pa.field(b, pa.null()) for b in self.by]
            fields += [pa.field(n, pa.null()) for n in self.aggs]
            schema = pa.schema(fields)
        else:
            schema = self._out_schema
            if self._empty_out is not None and self._empty_out[0] is schema:
                return self._empty_out[1]  # batches are immutable: one serves every call
        self._empty_out = (schema, pa.RecordBatch.from_pylist([], schema=schema))
        return self._empty_out[1]

    def _build(self, starts: np.ndarray | None, ends: np.ndarray | None, groups: np.ndarray,
               slots: np.ndarray | list[pa.Array]) -> pa.RecordBatch:
        """Output rows of ``groups``; ``slots``: the slot of each row, or the
        aggregate results already computed."""
        cols = []
        if self._windowed:
            cols += [_timestamps(starts, self._bounds), _timestamps(ends, self._bounds)]
        cols += self._keys.keys(groups) if self.by else []
        if isinstance(slots, list):
            cols += slots
        else:
            cols += [a.result(st, slots) for a, st in zip(self._agg_list, self._states)]
        return pa.RecordBatch.from_arrays(cols, schema=self._out_schema)

    def advance_watermark(self, t: int) -> pa.RecordBatch:
        """Emit every window with ``end <= t`` (and re-emit updated ones); purge
        windows with ``end + allowed_lateness <= t``. Backwards ``t`` is ignored."""
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)):
            raise TypeError(f"watermark must be an int of ms, got {type(t).__name__}")
        t = int(t)
        if not _I64_MIN <= t <= _I64_MAX:
            raise ValueError(f"watermark {t} does not fit in int64")
        if t < self._wm:
            return self._empty()
        self._check_usable()
        old = self._wm
        if self._mode == "pane":
            fired, purged = (self._j_fired(old), self._j_fired(t)), (self._j_purged(old), self._j_purged(t))
            if fired[0] == fired[1] and purged[0] == purged[1] and not self._ndirty:
                self._wm = t  # no window fires, re-fires or is purged (held rows stay held)
                return self._empty()
            self._release()
        self._wm = t
        if self._out_schema is None or self._mode == "global":
            return self._empty()
        if self._mode == "pane":
            return self._advance_panes(fired, purged)
        return self._advance_sessions(t)

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
        live = int(self._counters[4])  # no pane has more slots
        self._emit_src = _arrow.grown(self._emit_src, live)
        self._emit_row = _arrow.grown(self._emit_row, live)
        n = _window.pane_slots(self._hg, self._hq, self._hv, self._s_group, self._s_next, self._s_flags, q,
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
        out = self._emit_pane_windows(work) if work else self._empty()
        self._ndirty = 0  # every dirty pane lies in a re-fired window: all cleared there
        # purge panes whose last window is purged: q // ks <= jp_new
        limit = (jp_new + 1) * self._ks  # panes q < limit
        b = bisect.bisect_left(self._panes, limit)
        if b:
            dead = np.array(self._panes[:b], dtype=np.int64)
            del self._panes[:b]
            del self._indexed[:bisect.bisect_left(self._indexed, limit)]
            freed = np.empty(int(self._counters[0]), dtype=np.int64)
            nf = _window.pane_purge(self._hg, self._hq, self._hv, self._s_group, self._s_next,
                                    self._s_flags, self._counters, dead, freed)
            self._reset_slots(freed[:nf])
        return out

    def _emit_pane_windows(self, work: list[tuple[int, bool]]) -> pa.RecordBatch:
        """The output rows of windows ``work`` ((index, refire) in order): each
        window's groups merged over its panes; a refire only the groups with
        a pane updated since the window fired."""
        # built-in aggregates merge inside the emission kernel, into one record per
        # output row (laid out as their shared state); others get (row, slot) pairs
        self._records.ensure(self._slot_capacity())
        rec = self._records.rec
        want_pairs = len(self._builtin) < len(self._agg_list)
        direct = self._k == 1  # a window is one pane: read each row's slot, merge nothing
        pieces_s, pieces_row, starts, counts = [], [], [], []
        nlive = int(self._counters[0])
        self._mark = _arrow.grown(self._mark, self._keys.num_groups, -1)
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
                nrows, npairs = _window.pane_emit(self._hg, self._hq, self._hv, self._s_group, self._s_next,
                                                  self._s_flags, panes, refire, self._mark, self._ops,
                                                  self._offs, rec, self._merged.rec, total_rows,
                                                  self._emit_groups, self._emit_row, self._emit_src,
                                                  not direct, want_pairs)
            except SumOverflowError as exc:
                raise self._overflow(exc, self._window_text(j)) from None
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
            _window.pane_clear_dirty(self._hg, self._hq, self._hv, self._s_next, self._s_flags,
                                     np.array(sorted(refire_panes), dtype=np.int64))
        out = self._empty()
        if total_rows:
            results: list = [None] * len(self._agg_list)
            if want_pairs or direct:
                src = pieces_s[0] if len(pieces_s) == 1 else _arrow.concat(pieces_s, np.int64)
            if columns is None and self._builtin:  # all built-ins' result columns in one pass
                merged, read = (rec, src) if direct else (self._merged.rec[:total_rows], None)
                columns = self._final.columns(merged, read)
            if columns is not None:
                for i, result in zip(self._builtin, self._final.results(columns, total_rows)):
                    results[i] = result
            if want_pairs:  # plug-ins may use scratch slots from the high-water mark up
                rows = pieces_row[0] if len(pieces_row) == 1 else _arrow.concat(pieces_row, np.int64)
                for i, (a, st) in enumerate(zip(self._agg_list, self._states)):
                    if results[i] is None:
                        self._states[i], results[i] = a.combine(st, rows, src, total_rows, nlive)
            ws, we = _arrow.empty(total_rows, np.int64)[0], _arrow.empty(total_rows, np.int64)[0]
            at = 0
            for start, count in zip(starts, counts):  # each window's rows (two fills: no pass reads ws back)
                ws[at:at + count] = start
                we[at:at + count] = start + self._size
                at += count
            out = self._build(ws, we, self._emit_groups[:total_rows], results)
        return out

    def _emit_stacks(self, stacks: _PaneStacks, fast: list[int], nrows: int, starts: list[int],
                     counts: list[int]) -> tuple[int, ResultColumns]:
        """Windows ``fast`` read off the pane stacks, after the ``nrows`` rows
        of merged records already emitted, straight into result columns (see
        ``ResultPlan``). Returns the rows and those columns."""
        plan = self._final
        out = plan.columns(self._merged.rec[:nrows])  # the rows emitted so far (refires)
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
                raise self._overflow(exc, self._window_text(j), value_index=True) from None
            if n:
                starts.append(self._offset + j * self._slide)
                counts.append(n)
                nrows += n
        return nrows, out

    def _advance_sessions(self, t: int) -> pa.RecordBatch:
        nslots = int(self._counters[0])
        fired = np.empty(max(nslots, 1), dtype=np.int64)
        nf = _window.session_fire(self._s_flags, self._s_end, nslots, t, fired)
        out = self._empty()
        if nf:
            fired = fired[:nf]
            order = np.lexsort((self._s_start[fired], self._s_end[fired]))
            fired = fired[order]
            out = self._build(self._s_start[fired], self._s_end[fired], self._s_group[fired], fired)
        limit = t - self.allowed_lateness
        if limit >= -_FAR:
            purged = np.empty(max(nslots, 1), dtype=np.int64)
            npg = _window.session_purge(self._g_head, self._s_group, self._s_end, self._s_next,
                                        self._s_flags, self._free, self._counters, _clamp(limit), purged)
            self._reset_slots(purged[:npg])
        return out

    def flush(self) -> pa.RecordBatch:
        """End of stream: emit every open window (watermark = max int64); for a
        global aggregate, every group."""
        self._check_usable()
        if self._mode == "global":
            if self._out_schema is None or self._keys.num_groups == 0:
                return self._empty()
            groups = np.arange(self._keys.num_groups, dtype=np.int64)
            self._touched[:] = 0
            return self._build(None, None, groups, groups)
        return self.advance_watermark(MAX_WATERMARK)

    def process_and_emit(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """Global aggregate: ``process(batch)`` then ``take_updates()``."""
        self.process(batch)
        return self.take_updates()

    def take_updates(self) -> pa.RecordBatch:
        """Global aggregate: current values of the groups changed since the last call."""
        if self._mode != "global":
            raise TypeError("take_updates is for a running aggregate (no window); use advance_watermark")
        self._check_usable()
        if self._out_schema is None:
            return self._empty()
        groups = np.flatnonzero(self._touched[: self._keys.num_groups]).astype(np.int64)
        self._touched[:] = 0
        if len(groups) == 0:
            return self._empty()
        return self._build(None, None, groups, groups)

    # ------------------------------------------------------------ late rows
    @property
    def late(self) -> pa.RecordBatch | None:
        """Late rows so far (input columns + ``reason`` + ``watermark``), or None."""
        if not self._late:
            return None
        if len(self._late) > 1:
            self._late = [_arrow.as_batch(pa.Table.from_batches(self._late))]
        return self._late[0]

    def take_late(self) -> pa.RecordBatch | None:
        """The late rows, cleared afterwards (None if there are none)."""
        out = self.late
        self._late = []
        return out

    # ------------------------------------------------------------ snapshot
    def snapshot(self) -> State:
        """An immutable copy of the whole state (see :class:`State`)."""
        self._release()
        arrays = {"counters": self._counters, "free": self._free, "s_group": self._s_group,
                  "s_next": self._s_next, "s_flags": self._s_flags}
        if self._mode == "pane":
            arrays.update(hg=self._hg, hq=self._hq, hv=self._hv,
                          panes=np.array(self._panes, dtype=np.int64), gcache=self._gcache)
        elif self._mode == "session":
            arrays.update(g_head=self._g_head, s_start=self._s_start, s_end=self._s_end,
                          s_parent=self._s_parent)
        else:
            arrays.update(touched=self._touched)
        arrays = {k: np.array(v, copy=True) for k, v in arrays.items()}
        meta = {"watermark": self._wm, "ndirty": self._ndirty, "rows_in": self.rows_in,
                "rows_late": self.rows_late, "bound": self._input_types is not None}
        if self._mode == "pane":
            meta["pane_layout"] = _window.PANE_LAYOUT
            meta["ways"], meta["indexed"] = self._ways, list(self._indexed)
        schema = pa.schema([]) if self._input_types is None else pa.schema(
            [pa.field(k, v) for k, v in self._input_types.items()])
        return State(self._config(), meta, arrays, self._keys.snapshot(), self._keys.group_hashes(),
                     tuple(a.to_bytes(st) for a, st in zip(self._agg_list, self._states)),
                     schema, self.late)

    def restore(self, state: State) -> None:
        """Continue from ``state`` (from ``snapshot`` of an aggregator with the same config)."""
        if isinstance(state, (bytes, bytearray, memoryview)):
            state = State.from_bytes(bytes(state))
        if not isinstance(state, State):
            raise TypeError(f"restore expects a State (or its bytes), got {type(state).__name__}")
        if state.config != self._config():
            raise ValueError(f"state was taken from a differently configured aggregator: "
                             f"{state.config} != {self._config()}")
        layout = state.meta.get("pane_layout", _SINGLE_SLOTS)
        if self._mode == "pane" and layout not in (_window.PANE_LAYOUT, _SINGLE_SLOTS):
            raise ValueError(f"state lays out pane slots as {layout!r}, this version "
                             f"as {_window.PANE_LAYOUT!r}: take the snapshot with this version")
        self._init_tables()
        self._held, self._held_rows = [], 0
        self._overflowed = None
        self._keys = KeyTable.restore(state.keys)
        if state.meta.get("bound"):
            self._input_types = None
            self._bind(state.input_schema)
        a = {k: np.array(v, copy=True) for k, v in state.arrays.items()}
        if self._mode == "pane" and layout == _SINGLE_SLOTS:
            a = _chunks_from_single_slots(a)
        self._counters, self._free, self._s_group = a["counters"], a["free"], a["s_group"]
        self._s_next, self._s_flags = a["s_next"], a["s_flags"]
        if self._mode == "pane":
            self._hg, self._hq, self._hv = a["hg"], a["hq"], a["hv"]
            self._panes = a["panes"].tolist()
            self._gcache, self._indexed = a["gcache"], list(state.meta.get("indexed", []))
            if state.meta.get("ways") != self._ways:  # ways of another size, or not newest-first:
                self._gcache = np.full(2 * self._ways * 64, -1, dtype=np.int64)  # every slot into the map
                self._indexed = []
                for q in self._panes:
                    self._index_pane(q)
        elif self._mode == "session":
            self._g_head, self._s_start, self._s_end = a["g_head"], a["s_start"], a["s_end"]
            self._s_parent = a["s_parent"]
        else:
            self._touched = a["touched"]
        self._states = [ag.from_bytes(b) for ag, b in zip(self._agg_list, state.aggs)]
        self._share_states()
        self._wm = int(state.meta["watermark"])
        self._ndirty = int(state.meta["ndirty"])
        self.rows_in = int(state.meta["rows_in"])
        self.rows_late = int(state.meta["rows_late"])
        self._late = [state.late] if state.late is not None else []
