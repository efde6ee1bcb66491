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

    The aggregator checks batches, holds small ones, looks up keys and runs
    the aggregates; a strategy per kind of window
    (:mod:`~fastops.core.window.strategy`: ``panes``, ``sessions``,
    ``global_window``) assigns slots and fires them, over the key table,
    slot table, aggregate records and late rows they share
    (:class:`~fastops.core.window.store.WindowStore`).

Performance notes: per batch one pass for the key hash, one for the group
lookup, one for slot assignment and one for all built-in aggregates (their
records sit side by side in one array, so a row touches one cache line),
all in ``nogil`` kernels. A firing window costs one kernel call: it lists
the slots of its panes, numbers the output rows and merges the built-ins
into a reused scratch record per row. Nothing per row or per group happens
in Python.
"""
from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.types as pat

from fastops.core import arrow as _arrow
from fastops.core.aggregates import BuiltinAggregate, SlotAggregate, SumOverflowError, for_input
from fastops.core.durations import parse_duration
from fastops.core.keys import KeyTable
from fastops.core.messages import MAX_WATERMARK
from fastops.core.watermarks import to_ms
from fastops.core.window.assigners import (
    GlobalWindow,
    Session,
    Sliding,
    Tumbling,
    as_window,
    bound_type,
    check_event_times,
    event_time_range,
)
from fastops.core.window.global_window import GlobalAggregate
from fastops.core.window.panes import PaneWindows
from fastops.core.window.sessions import SessionWindows
from fastops.core.window.store import I64_MAX, I64_MIN, RESERVED, WindowStore
from fastops.core.window.strategy import WindowStrategy

__all__ = ["MissingColumnError", "State", "WindowAggregator"]

HOLD_ROWS = 65536  # held rows (see WindowAggregator.process) are aggregated at this many


class MissingColumnError(KeyError, ValueError):
    """A column the aggregator needs is not in the batch (both KeyError and ValueError)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


def _plugin_type(t: pa.DataType | None) -> pa.DataType | None:
    """The type plug-in aggregates see for input type ``t``: string_view /
    binary_view as large_string / large_binary (Arrow's take and filter, which
    plug-ins use, have no kernels for views), else ``t``."""
    return None if t is None else (_arrow.view_storage(t) or t)


def _strategy(window: Any, allowed_lateness: int, store: WindowStore) -> WindowStrategy:
    """The strategy for ``window``'s kind."""
    if isinstance(window, (Tumbling, Sliding)):
        return PaneWindows(window, allowed_lateness, store)
    if isinstance(window, Session):
        return SessionWindows(window, allowed_lateness, store)
    return GlobalAggregate(store)


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
                 time: str | None = "ts", allowed_lateness: Any = 0, schema: pa.Schema | None = None):
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
                raise TypeError(f"aggregate {name!r} must be a fastops.core.aggregates aggregate, "
                                f"got {type(a).__name__}")
            self.aggs[name] = copy.copy(a)  # bound to this aggregator's input types
        self._windowed = not isinstance(self.window, GlobalWindow)
        out_names = (list(RESERVED) if self._windowed else []) + self.by + list(self.aggs)
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
        self._store = WindowStore(self.by, list(self.aggs), list(self.aggs.values()), self._windowed)
        self._strategy = _strategy(self.window, self.allowed_lateness, self._store)
        self._input_types: dict[str, pa.DataType] | None = None
        self._schema: pa.Schema | None = None
        self._hold_columns: list[str] = []  # see _bind
        self._held: list[pa.RecordBatch] = []
        self._held_rows = 0
        self._held_tmin = 0  # the earliest event time held (while any is)
        self.rows_in = 0
        if schema is not None:
            self._bind(schema)

    # ------------------------------------------------------------ setup
    def _config(self) -> str:
        w = self.window
        params = {k: getattr(w, k) for k in getattr(w, "__dataclass_fields__", {})}
        desc = {"window": type(w).__name__, "params": params,
                "by": self.by, "aggs": [[n, a.describe()] for n, a in self.aggs.items()],
                "time": self.time, "allowed_lateness": self.allowed_lateness}
        return json.dumps(desc, sort_keys=True)

    def _bind(self, schema: pa.Schema) -> None:
        """Fix the input types from the first batch's schema (validating them)."""
        names = schema.names
        self._check_columns(names)
        st = self._store
        types = {}
        if self.time is not None:
            to_ms(pa.array([], type=schema.field(self.time).type), self.time)  # type check only
            types[self.time] = schema.field(self.time).type
            st.bounds = bound_type(types[self.time])
        for b in self.by:
            types[b] = schema.field(b).type
        # the aggregates that run (``self.aggs`` stays as given: it is the config), and the
        # input type each sees
        st.aggs, seen = [], []
        for a in self.aggs.values():
            t = None if a.column is None else schema.field(a.column).type
            if a.column is not None:
                types[a.column] = t
            a = for_input(a, t)
            if isinstance(a, BuiltinAggregate):
                a.bind(t)
            else:
                t = _plugin_type(t)
                a.validate(t)
            st.aggs.append(a)
            seen.append(t)
        if self.by:
            st.keys._prepare([pa.array([], type=types[b]) for b in self.by])
        self._input_types = types
        self._schema = schema  # batches of this schema need no column checks
        # Small batches cost mostly their fixed steps, so windows whose strategy
        # allows it (tumbling and sliding) of built-in aggregates hold batches
        # whose rows are all ahead of the watermark and aggregate them together,
        # before any window fires or is purged (their rows meet the same fired
        # and purged windows either way). Dictionary and view columns are not
        # held (concatenating them would re-encode).
        holdable = self._strategy.holds_rows and self.time is not None and all(
            isinstance(a, BuiltinAggregate) for a in st.aggs) and not any(
            pat.is_dictionary(t) or _arrow.view_storage(t) is not None for t in types.values())
        self._hold_columns = list(types) if holdable else []
        st.states = [a.new_state() for a in st.aggs]
        self._share_states()
        fields = []
        if self._windowed:
            fields += [pa.field("window_start", st.bounds), pa.field("window_end", st.bounds)]
        fields += [pa.field(b, t) for b, t in zip(self.by, st.keys.types or [])]
        for name, a, t in zip(self.aggs, st.aggs, seen):
            fields.append(pa.field(name, a.output_type(t)))
        st.out_schema = pa.schema(fields)

    def _share_states(self) -> None:
        """Lay out the aggregates' records (see ``WindowStore.share_states``)
        and build what the strategy derives from them."""
        self._store.share_states()
        self._strategy.bind()

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
        return self._store.out_schema

    @property
    def watermark(self) -> int:
        return self._store.wm

    @property
    def rows_late(self) -> int:
        """Rows sent to the side output so far."""
        return self._store.rows_late

    @property
    def key_table(self) -> KeyTable:
        self._release()
        return self._store.keys

    @property
    def num_slots(self) -> int:
        """Slots in use (open windows / panes / sessions times keys)."""
        self._release()
        return self._strategy.num_slots()

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
        self._store.check_usable()
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
        if self._hold_columns and tmin is not None and tmin > self._store.wm:
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
        assert self.time is not None  # (only rows with event times are held)
        self._aggregate(batch, np.ascontiguousarray(to_ms(batch.column(self.time), self.time)), self._held_tmin)

    def _aggregate(self, batch: pa.RecordBatch, ts: np.ndarray, tmin: int | None = None) -> None:
        """Add the rows of a checked batch (event times ``ts``, their minimum
        ``tmin``: None only for windows without panes) to the state."""
        try:
            self._add_rows(batch, ts, tmin)
        except SumOverflowError as exc:
            raise self._store.overflow(exc, "while adding a batch") from None

    def _add_rows(self, batch: pa.RecordBatch, ts: np.ndarray, tmin: int | None) -> None:
        st, strategy = self._store, self._strategy
        if self.by:
            gids = st.keys.lookup_or_insert([batch.column(b) for b in self.by])
        else:
            gids = st.keys.lookup_n(batch.num_rows)
        slots, nlate = strategy.assign(gids, ts, tmin)
        st.update(batch, slots, ts, strategy.slot_capacity())
        strategy.updated()
        if nlate:
            st.add_late(batch, slots < 0, nlate, strategy.late_reason)

    def event_time_range(self) -> tuple[int, int]:
        """The event times (ms, inclusive) ``process`` accepts (see
        :func:`fastops.core.window.assigners.event_time_range`)."""
        return event_time_range(self.window)

    # ------------------------------------------------------------ emission
    def advance_watermark(self, t: int) -> pa.RecordBatch:
        """Emit every window with ``end <= t`` (and re-emit updated ones); purge
        windows with ``end + allowed_lateness <= t``. Backwards ``t`` is ignored."""
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)):
            raise TypeError(f"watermark must be an int of ms, got {type(t).__name__}")
        t = int(t)
        if not I64_MIN <= t <= I64_MAX:
            raise ValueError(f"watermark {t} does not fit in int64")
        st = self._store
        if t < st.wm:
            return st.empty()
        st.check_usable()
        old = st.wm
        if not self._strategy.moves(old, t):
            st.wm = t  # no window fires, re-fires or is purged (held rows stay held)
            return st.empty()
        self._release()
        st.wm = t
        if st.out_schema is None:
            return st.empty()
        return self._strategy.advance(old, t)

    def flush(self) -> pa.RecordBatch:
        """End of stream: emit every open window (watermark = max int64); for a
        global aggregate, every group."""
        self._store.check_usable()
        out = self._strategy.flush()
        return self.advance_watermark(MAX_WATERMARK) if out is None else out

    def process_and_emit(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """Global aggregate: ``process(batch)`` then ``take_updates()``."""
        self.process(batch)
        return self.take_updates()

    def take_updates(self) -> pa.RecordBatch:
        """Global aggregate: current values of the groups changed since the last call."""
        return self._strategy.take_updates()

    # ------------------------------------------------------------ late rows
    @property
    def late(self) -> pa.RecordBatch | None:
        """Late rows so far (input columns + ``reason`` + ``watermark``), or None."""
        st = self._store
        if not st.late:
            return None
        if len(st.late) > 1:
            st.late = [_arrow.as_batch(pa.Table.from_batches(st.late))]
        return st.late[0]

    def take_late(self) -> pa.RecordBatch | None:
        """The late rows, cleared afterwards (None if there are none)."""
        out = self.late
        self._store.late = []
        return out

    # ------------------------------------------------------------ snapshot
    def snapshot(self) -> State:
        """An immutable copy of the whole state (see :class:`State`)."""
        self._release()
        st = self._store
        arrays = {**st.slots.arrays(), **self._strategy.arrays()}
        arrays = {k: np.array(v, copy=True) for k, v in arrays.items()}
        meta: dict[str, Any] = {"watermark": st.wm, "ndirty": 0, "rows_in": self.rows_in,
                                "rows_late": st.rows_late, "bound": self._input_types is not None}
        meta.update(self._strategy.meta())
        schema = pa.schema([]) if self._input_types is None else pa.schema(
            [pa.field(k, v) for k, v in self._input_types.items()])
        return State(self._config(), meta, arrays, st.keys.snapshot(), st.keys.group_hashes(),
                     tuple(a.to_bytes(s) for a, s in zip(st.aggs, st.states)),
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
        arrays = self._strategy.readable({k: np.array(v, copy=True) for k, v in state.arrays.items()}, state.meta)
        old = self._store
        st = self._store = WindowStore(self.by, list(self.aggs), old.aggs, self._windowed)
        st.bounds = old.bounds
        st.out_schema = old.out_schema
        self._strategy = _strategy(self.window, self.allowed_lateness, st)
        self._held, self._held_rows = [], 0
        st.keys = KeyTable.restore(state.keys)
        if state.meta.get("bound"):
            self._input_types = None
            self._bind(state.input_schema)
        st.slots.restore(arrays)
        self._strategy.restore(arrays, state.meta)
        st.states = [ag.from_bytes(b) for ag, b in zip(st.aggs, state.aggs)]
        self._share_states()
        st.wm = int(state.meta["watermark"])
        self.rows_in = int(state.meta["rows_in"])
        st.rows_late = int(state.meta["rows_late"])
        st.late = [state.late] if state.late is not None else []
