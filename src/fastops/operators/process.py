"""Keyed process functions: vectorised user logic with keyed state and
event-time timers.

The function sees the rows of one key group at a time (a RecordBatch), never
a single row. State is declared by name and Arrow type and read / written for
all rows of a batch at once; timers fire when the watermark passes them.

Checkpoints hold what ``ctx`` holds: the keys, every value state and the
timers, and the current watermark. The function object's own attributes are
not state: a restored task gets a fresh copy of the function (as it was
written, then ``open`` called on it), so anything that must survive a failure
or a rescale lives in ``ctx.state(...)``. The state is keyed: restored at
another parallelism, a task keeps the keys of its key groups with their
values and timers.

>>> import fastops as fo, pyarrow as pa, pyarrow.compute as pc
>>> class RunningCount(fo.KeyedProcessFunction):
...     def process_batch(self, batch, ctx):
...         seen = ctx.state("seen", pa.int64())
...         before = pc.fill_null(seen.value(batch), 0)
...         counts = pc.add(before, ctx.running_count(batch))
...         seen.update(batch, counts)
...         return batch.append_column("count", counts)
"""
from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from fastops.core.arrow import as_batch
from fastops.core.hashing import hash_columns
from fastops.core.keys import KeyTable
from fastops.core.messages import MIN_WATERMARK
from fastops.core.partitioning import KeyGroups, ids_from_hashes, scatter_by_ids
from fastops.core.watermarks import to_ms
from fastops.operators.base import Operator, OperatorContractError, check_batch
from fastops.operators.state import pack_state, required_part, unpack_state

_KIND = "keyed process"


class KeyedProcessFunction:
    """Subclass and override ``process_batch`` (and ``on_timer`` if you use timers)."""

    def open(self, ctx: ProcessContext) -> None:
        """Called once per task before any batch."""

    def process_batch(self, batch: pa.RecordBatch, ctx: ProcessContext) -> Any:
        """Rows of one key group; return a RecordBatch, an iterable of them, or None."""
        raise NotImplementedError

    def on_timer(self, timestamps: pa.Array, keys: pa.RecordBatch, ctx: ProcessContext) -> Any:
        """Timers whose time <= the watermark: one row per (key, time), in time order."""
        return None

    def close(self, ctx: ProcessContext) -> Any:
        """End of input."""
        return None


def _last_per_id(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct ids and the position of each one's last row."""
    rev = ids[::-1]
    uniq, first_in_rev = np.unique(rev, return_index=True)
    return uniq, len(ids) - 1 - first_in_rev


class ValueState:
    """One value of a fixed Arrow type per key (null when unset).

    Values sit in a NumPy array indexed by key id (object dtype for strings and
    other variable-width types) with a "set" flag per key, so reading and
    writing cost O(rows of the batch), not O(keys held).
    """

    def __init__(self, name: str, type: pa.DataType, ctx: ProcessContext):
        self.name = name
        self.type = type
        self._ctx = ctx
        self._values: np.ndarray | None = None  # dtype fixed by the first update
        self._set = np.zeros(0, dtype=bool)

    def _grow(self, dtype: np.dtype | None = None) -> None:
        n = self._ctx.keys.num_groups
        if self._values is None and dtype is not None:
            self._values = np.empty(len(self._set), dtype=dtype)
        if len(self._set) < n:
            cap = max(n, 2 * len(self._set), 64)
            self._set = np.concatenate([self._set, np.zeros(cap - len(self._set), dtype=bool)])
            if self._values is not None:
                grown = np.empty(cap, dtype=self._values.dtype)
                grown[: len(self._values)] = self._values
                self._values = grown

    def value(self, batch: pa.RecordBatch) -> pa.Array:
        """The state of each row's key (rows of one key see the same value)."""
        ids = self._ctx.key_ids(batch)
        self._grow()
        if self._values is None:
            return pa.nulls(len(ids), self.type)
        return pa.array(self._values[ids], type=self.type, mask=~self._set[ids])

    def update(self, batch: pa.RecordBatch, values: Any) -> None:
        """Set each row's key to ``values`` (for a key with several rows, the last wins)."""
        ids = self._ctx.key_ids(batch)
        values = values if isinstance(values, (pa.Array, pa.ChunkedArray)) else pa.array(values)
        if len(values) != len(ids):
            raise ValueError(f"state {self.name!r}: {len(values)} values for {len(ids)} rows")
        try:
            values = values.cast(self.type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise TypeError(f"state {self.name!r} holds {self.type}, got {values.type}: {exc}") from None
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        uniq, last = _last_per_id(ids)
        picked = values.take(pa.array(last))
        valid = picked.is_valid().to_numpy(zero_copy_only=False)
        present = picked.filter(pa.array(valid)).to_numpy(zero_copy_only=False)
        self._grow(present.dtype if present.dtype.kind in "biufmM" else np.dtype(object))
        stored = self._values
        assert stored is not None  # _grow made it, with the first values' dtype
        stored[uniq[valid]] = present
        self._set[uniq] = valid

    def clear(self, batch: pa.RecordBatch) -> None:
        ids = self._ctx.key_ids(batch)
        self._grow()
        self._set[ids] = False

    def to_arrow(self) -> pa.Array:
        """The value of every key id (null where unset), in id order."""
        self._grow()
        n = self._ctx.keys.num_groups
        if self._values is None:
            return pa.nulls(n, self.type)
        return pa.array(self._values[:n], type=self.type, mask=~self._set[:n])

    def load(self, values: pa.Array) -> None:
        """Take ``values`` (one per key id, null: unset) as the state, as ``update`` stores them."""
        valid = values.is_valid().to_numpy(zero_copy_only=False)
        self._set = valid.copy()
        self._values = None
        if valid.any():
            present = values.filter(pa.array(valid)).to_numpy(zero_copy_only=False)
            stored = np.empty(len(values), dtype=present.dtype if present.dtype.kind in "biufmM" else object)
            stored[valid] = present
            self._values = stored


class ProcessContext:
    """What a KeyedProcessFunction can reach: keyed state, timers, the watermark."""

    def __init__(self, key_columns: tuple[str, ...], task_index: int, parallelism: int):
        self.key_columns = key_columns
        self.keys = KeyTable(key_columns)
        self.task_index = task_index
        self.parallelism = parallelism
        self.current_watermark = MIN_WATERMARK
        self.key_group: int | None = None
        self._states: dict[str, ValueState] = {}
        self._cache: tuple[Any, np.ndarray] = (None, np.zeros(0, np.int64))
        self._timer_ids = np.zeros(0, np.int64)
        self._timer_ts = np.zeros(0, np.int64)

    def key_ids(self, batch: pa.RecordBatch) -> np.ndarray:
        """Dense id of each row's key (cached for the batch being processed)."""
        if self._cache[0] is batch:
            return self._cache[1]
        cols = []
        for k in self.key_columns:
            idx = batch.schema.get_field_index(k)
            if idx < 0:
                raise KeyError(f"key column {k!r} not in batch (columns: {batch.schema.names})")
            cols.append(batch.column(idx))
        ids = self.keys.lookup_or_insert(cols)
        self._cache = (batch, ids)
        return ids

    def state(self, name: str, type: pa.DataType) -> ValueState:
        """The value state ``name`` (created on first use with ``type``)."""
        st = self._states.get(name)
        if st is None:
            st = self._states[name] = ValueState(name, type, self)
        elif st.type != type:
            raise TypeError(f"state {name!r} was declared as {st.type}, now asked as {type}")
        return st

    def running_count(self, batch: pa.RecordBatch) -> pa.Array:
        """1, 2, 3, ... per key within ``batch`` (row order)."""
        ids = self.key_ids(batch)
        order = np.argsort(ids, kind="stable")
        sorted_ids = ids[order]
        starts = np.r_[0, np.flatnonzero(np.diff(sorted_ids)) + 1]
        rank = np.arange(len(ids)) - np.repeat(starts, np.diff(np.r_[starts, len(ids)]))
        out = np.empty(len(ids), dtype=np.int64)
        out[order] = rank + 1
        return pa.array(out)

    def register_timer(self, batch: pa.RecordBatch, timestamps: Any) -> None:
        """An event-time timer per row: ``on_timer`` runs once the watermark reaches it."""
        ts = to_ms(timestamps if not isinstance(timestamps, list) else pa.array(timestamps, pa.int64()),
                   "timer")
        ids = self.key_ids(batch)
        if len(ts) != len(ids):
            raise ValueError(f"register_timer: {len(ts)} timestamps for {len(ids)} rows")
        self._timer_ids = np.concatenate([self._timer_ids, ids])
        self._timer_ts = np.concatenate([self._timer_ts, ts.astype(np.int64)])

    def _due(self, t_ms: int) -> tuple[np.ndarray, np.ndarray] | None:
        due = self._timer_ts <= t_ms
        if not due.any():
            return None
        pairs = np.unique(np.stack([self._timer_ts[due], self._timer_ids[due]], axis=1), axis=0)
        self._timer_ids = self._timer_ids[~due]
        self._timer_ts = self._timer_ts[~due]
        return pairs[:, 1], pairs[:, 0]  # ids, timestamps (sorted by time)

    # -- state (the operator's checkpoints) ------------------------------------------------
    def _snapshot(self) -> bytes:
        """Keys (in id order), each value state (a column per state, a row per key id),
        the timers (key id, time) and the current watermark."""
        values = pa.table({name: st.to_arrow() for name, st in self._states.items()})
        timers = pa.table({"key_id": pa.array(self._timer_ids, pa.int64()),
                           "time": pa.array(self._timer_ts, pa.int64())})
        return pack_state(_KIND, {"keys": self.keys.snapshot(), "values": values, "timers": timers},
                          {"watermark": str(self.current_watermark)})

    def _restore(self, states: Sequence[bytes | None], groups: KeyGroups | None) -> None:
        """Hold the keys of ``states`` (those in ``groups``, if given) with their
        values and timers, under new key ids; the watermark is the least of theirs."""
        loaded = [unpack_state(_KIND, s) for s in states if s is not None]
        self.current_watermark = min((int(meta["watermark"]) for _, meta in loaded), default=MIN_WATERMARK)
        self.keys = KeyTable(self.key_columns)
        self._cache = (None, np.zeros(0, np.int64))
        types: dict[str, pa.DataType] = {}
        kept: list[tuple[int, dict[str, pa.Array]]] = []  # per earlier task: keys kept, their values
        timer_ids, timer_ts = [self._timer_ids[:0]], [self._timer_ts[:0]]
        for parts, _ in loaded:
            old = KeyTable.restore(as_batch(required_part(parts, "keys")))
            keep = np.arange(old.num_groups)
            if groups is not None and len(keep):
                keep = np.flatnonzero(groups.mask(old.keys_batch(), self.key_columns))
            new = self._insert(old, keep)
            values, timers = required_part(parts, "values"), required_part(parts, "timers")
            for f in values.schema:
                if types.setdefault(f.name, f.type) != f.type:
                    raise ValueError(f"state {f.name!r} is {f.type} in one snapshot, {types[f.name]} in another")
            kept.append((len(keep), {f.name: values.column(f.name).combine_chunks().take(pa.array(keep))
                                     for f in values.schema}))
            lut = np.full(old.num_groups, -1, np.int64)
            lut[keep] = new
            mapped = lut[timers.column("key_id").to_numpy()]
            owned = mapped >= 0
            timer_ids.append(mapped[owned])
            timer_ts.append(timers.column("time").to_numpy()[owned])
        self._timer_ids = np.concatenate(timer_ids).astype(np.int64)
        self._timer_ts = np.concatenate(timer_ts).astype(np.int64)
        # states declared already (in ``open``) stay the same objects, so handles kept to them see the values
        for name, type in types.items():
            self.state(name, type).load(pa.concat_arrays([v.get(name, pa.nulls(n, type)) for n, v in kept]))
        for name, st in self._states.items():
            if name not in types:
                st.load(pa.nulls(self.keys.num_groups, st.type))

    def _insert(self, old: KeyTable, ids: np.ndarray) -> np.ndarray:
        """Give the keys ``ids`` of ``old`` the next new ids (which they return)."""
        if len(ids) == 0:
            return np.zeros(0, np.int64)
        if self.keys.types is None:
            self.keys = KeyTable(self.key_columns, types=old.types)
        before = self.keys.num_groups
        new = self.keys.lookup_or_insert(old.keys(ids))
        if not np.array_equal(new, np.arange(before, before + len(ids))):
            raise ValueError("a key is held in two of the snapshots restored together")
        return new


def _outputs(value: Any, name: str) -> list:
    if value is None:
        return []
    if isinstance(value, (pa.RecordBatch, pa.Table)):
        return [check_batch(value, f"process {name!r}")]
    if isinstance(value, Iterable):
        return [check_batch(v, f"process {name!r}", "yield") for v in value]
    raise OperatorContractError(f"process {name!r}: the function must return a pyarrow.RecordBatch, "
                                f"an iterable of them or None, got {type(value).__name__}")


class KeyedProcessOperator(Operator):
    def __init__(self, function: KeyedProcessFunction, keys: tuple[str, ...],
                 time_column: str | None, name: str):
        self.function = copy.deepcopy(function)  # one instance per task
        self.key_columns = keys
        self.time_column = time_column
        self.name = name

    def open(self, ctx) -> None:
        super().open(ctx)
        self.pctx = ProcessContext(self.key_columns, ctx.task_index, ctx.parallelism)
        self.max_parallelism = ctx.max_parallelism
        self.function.open(self.pctx)

    def process(self, batch: pa.RecordBatch) -> list:
        if batch.num_rows == 0:
            return []
        cols = []
        for k in self.key_columns:
            if batch.schema.get_field_index(k) < 0:
                raise KeyError(f"key column {k!r} not in batch (columns: {batch.schema.names})")
            cols.append(batch.column(k))
        groups = ids_from_hashes(hash_columns(cols), self.max_parallelism, "hash")
        present = np.unique(groups)
        if len(present) == 1:
            parts = [(int(present[0]), batch)]
        else:
            parts = [(g, p) for g, p in enumerate(scatter_by_ids(batch, groups, self.max_parallelism))
                     if p.num_rows]
        out: list = []
        for g, part in parts:
            self.pctx.key_group = g
            out.extend(_outputs(self.function.process_batch(part, self.pctx), self.name))
        return out

    def on_watermark(self, t_ms: int) -> list:
        self.pctx.current_watermark = t_ms
        due = self.pctx._due(t_ms)
        if due is None:
            return []
        ids, ts = due
        keys = self.pctx.keys.keys_batch(ids)
        self.pctx._cache = (keys, ids)
        return _outputs(self.function.on_timer(pa.array(ts, pa.int64()), keys, self.pctx), self.name)

    def close(self) -> list:
        return _outputs(self.function.close(self.pctx), self.name)

    def snapshot(self) -> bytes | None:
        return self.pctx._snapshot()

    def restore(self, state: bytes | None) -> None:
        if state is not None:
            self.pctx._restore([state], None)

    def restore_groups(self, states: Sequence[bytes | None], groups: KeyGroups) -> None:
        self.pctx._restore(states, groups)
