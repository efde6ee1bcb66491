"""Window and running-aggregate operators: the runtime's face of
``fastops.WindowAggregator``."""
from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any, Callable

import numpy as np
import pyarrow as pa

from fastops.core.messages import MAX_WATERMARK
from fastops.core.partitioning import KeyGroups, scatter_by_ids
from fastops.core.window.aggregator import State, WindowAggregator
from fastops.core.window.assigners import GlobalWindow
from fastops.operators.base import Operator, Tagged
from fastops.operators.shedding import DERIVED, Estimates, SheddingControl, WindowShedder

SHARDS = b"FASTOPS-SHARDS-2"  # the snapshot of an operator that holds state of several earlier tasks


class Shards:
    """The aggregators of one keyed operator task.

    Normally one. After a restore at another parallelism, one per earlier
    task that owned any of this task's key groups, each restored whole from
    that task's snapshot: a row goes to the aggregator whose earlier task
    owned its key group (``route``; key groups none held go to the first),
    and an aggregator that also holds keys of key groups it no longer owns
    (``filtered``) emits only the rows of its own: those keys are another
    task's now, and their windows are purged with time.
    """

    def __init__(self, make: Callable[[], WindowAggregator], keys: list[str]):
        self.make = make
        self.keys = keys
        self.aggregators = [make()]
        self.owns: list[np.ndarray] = []  # per aggregator, the key groups routed to it (empty: one, all)
        self.filtered: list[bool] = [False]  # per aggregator: holds keys of key groups it does not own
        self.route: np.ndarray | None = None  # key group -> aggregator (None: the only one)
        self.extra = 0  # the operator's own counter (arrival order), kept with the state

    # -- running --------------------------------------------------------------------------
    def process(self, batch: pa.RecordBatch) -> None:
        if self.route is None:
            self.aggregators[0].process(batch)
            return
        ids = self.route[KeyGroups(self.owns[0]).groups_of([batch.column(k) for k in self.keys])]
        for agg, part in zip(self.aggregators, scatter_by_ids(batch, ids, len(self.aggregators))):
            if part.num_rows:
                agg.process(part)

    def _emitted(self, outs: list[pa.RecordBatch]) -> list[pa.RecordBatch]:
        kept = []
        for i, batch in enumerate(outs):
            if self.filtered[i] and batch.num_rows:
                batch = batch.filter(pa.array(KeyGroups(self.owns[i]).mask(batch, self.keys)))
            if batch.num_rows:
                kept.append(batch)
        return kept

    def advance_watermark(self, t_ms: int) -> list[pa.RecordBatch]:
        return self._emitted([a.advance_watermark(t_ms) for a in self.aggregators])

    def flush(self) -> list[pa.RecordBatch]:
        return self._emitted([a.flush() for a in self.aggregators])

    def take_updates(self) -> list[pa.RecordBatch]:
        return self._emitted([a.take_updates() for a in self.aggregators])

    def take_late(self) -> list[pa.RecordBatch]:
        late = [a.take_late() for a in self.aggregators]
        return [b for b in late if b is not None and b.num_rows]

    # -- state ----------------------------------------------------------------------------
    def snapshot(self) -> bytes:
        """One aggregator: its State bytes, as ever; several (or a counter):
        framed, each with the key groups it owns and whether it filters."""
        if self.route is None and not self.extra:
            return self.aggregators[0].snapshot().to_bytes()
        parts = [SHARDS, struct.pack("<qq", len(self.aggregators), self.extra)]
        for i, agg in enumerate(self.aggregators):
            state = agg.snapshot().to_bytes()
            owns = self.owns[i] if self.owns else np.zeros(0, bool)
            mask = np.packbits(owns).tobytes()
            parts += [struct.pack("<qqqq", len(owns), int(self.filtered[i]), len(mask), len(state)), mask, state]
        return b"".join(parts)

    @staticmethod
    def _pieces(state: bytes) -> tuple[list[tuple[np.ndarray | None, bool, bytes]], int]:
        """(key groups owned or None for all, filtered, State bytes) per
        aggregator of a snapshot, and the counter."""
        if not state.startswith(SHARDS):
            return [(None, False, state)], 0
        pos = len(SHARDS)
        count, extra = struct.unpack_from("<qq", state, pos)
        pos += 16
        out = []
        for _ in range(count):
            n, filtered, nmask, nstate = struct.unpack_from("<qqqq", state, pos)
            pos += 32
            owns = np.unpackbits(np.frombuffer(state, np.uint8, nmask, pos))[:n].astype(bool) if n else None
            pos += nmask
            out.append((owns, bool(filtered), state[pos:pos + nstate]))
            pos += nstate
        if pos != len(state):
            raise ValueError(f"operator state is damaged: {len(state) - pos} bytes left over")
        return out, extra

    def _set(self, pieces: list[tuple[np.ndarray | None, bool, State]], extra: int) -> None:
        self.aggregators, self.owns, self.filtered = [], [], []
        for owns, filtered, state in pieces:
            agg = self.make()
            agg.restore(state)
            self.aggregators.append(agg)
            self.filtered.append(filtered)
            if owns is not None:
                self.owns.append(owns)
        self.extra = extra
        self.route = None
        if self.owns:
            self.route = np.zeros(len(self.owns[0]), dtype=np.int64)  # key groups none owned: the first
            for i in reversed(range(len(self.owns))):
                self.route[self.owns[i]] = i

    def restore(self, state: bytes) -> None:
        pieces, extra = self._pieces(state)
        self._set([(owns, filtered, State.from_bytes(data)) for owns, filtered, data in pieces], extra)

    def restore_groups(self, states: Sequence[bytes | None], groups: KeyGroups, name: str) -> None:
        """Keep the state of the keys in ``groups`` from the earlier tasks' ``states``."""
        if not self.keys:
            given = [s for s in states if s is not None]
            if len(given) > 1:
                raise ValueError(f"operator {name!r} aggregates without a key, so the state of "
                                 f"{len(given)} tasks cannot be shared out again")
            if given:
                self.restore(given[0])
            return
        owned = groups.owned
        pieces: list[tuple[np.ndarray | None, bool, State]] = []
        extra = 0
        for data in states:
            if data is None:
                continue
            found, counter = self._pieces(data)
            extra = max(extra, counter)
            for owns, _, piece in found:
                state = State.from_bytes(piece)
                held = self._held_groups(state, len(owned))
                mine = (held if owns is None else owns & held) & owned
                if mine.any():
                    pieces.append((mine, bool((held & ~mine).any()), state))
        if not pieces:  # nothing of these key groups was held: start empty
            self.extra = extra
            return
        if len(pieces) == 1 and not pieces[0][1]:
            pieces = [(None, False, pieces[0][2])]  # one aggregator that holds only its own keys: as ever
        self._set(pieces, extra)

    def _held_groups(self, state: State, max_parallelism: int) -> np.ndarray:
        """The key groups a State holds keys of."""
        held = np.zeros(max_parallelism, dtype=bool)
        if state.keys.num_rows:
            held[KeyGroups(held).groups_of([state.keys.column(k) for k in self.keys])] = True
        return held


class WindowOperator(Operator):
    """Keyed event-time windows; late rows go to the side output ``"late"``.

    Under load shedding (``shedding``: the job's ``SheddingControl``), random
    shedding makes its aggregates estimates with error columns (``Estimates``)
    and window shedding drops whole (key, window) groups at its input
    (``WindowShedder``, tumbling windows)."""

    def __init__(self, window: Any, keys: tuple[str, ...], aggs: dict[str, Any],
                 time_column: str, allowed_lateness: Any = 0, shedding: SheddingControl | None = None):
        self.args = (window, list(keys), dict(aggs), time_column, allowed_lateness)
        mode = shedding.mode if shedding is not None else None
        self.estimates = Estimates(aggs) if mode == "random" else None
        inner = self.estimates.internal if self.estimates is not None else dict(aggs)
        self.leading = 2 + len(keys)  # window_start, window_end, keys: then the aggregates
        self.dropper = (WindowShedder(shedding, list(keys), time_column, window)
                        if shedding is not None and mode == "window" else None)
        self.time_column = time_column
        self.shards = Shards(lambda: WindowAggregator(window, list(keys), dict(inner), time=time_column,
                                                      allowed_lateness=allowed_lateness), list(keys))
        self.name = f"window({type(window).__name__})"

    def _emit(self, outs: list[pa.RecordBatch]) -> list:
        if self.estimates is None:
            return outs
        return [self.estimates.finish(b, self.leading) for b in outs]

    @property
    def aggregator(self) -> WindowAggregator:
        """The (first) aggregator."""
        return self.shards.aggregators[0]

    def _late(self) -> list:
        late = self.shards.take_late()
        if self.estimates is not None:  # without the columns the estimates added
            late = [b.select([n for n in b.schema.names if not n.startswith(DERIVED)]) for b in late]
        return [Tagged("late", b) for b in late]

    def process(self, batch: pa.RecordBatch) -> list:
        if self.estimates is not None:
            batch = self.estimates.prepare(batch, self.name)
        elif self.dropper is not None:
            keep = self.dropper.keep(batch)
            if keep is not None:
                n = batch.num_rows
                batch = batch.filter(pa.array(keep))
                if self.ctx.metrics is not None:
                    self.ctx.metrics.shed_rows += n - batch.num_rows
        self.shards.process(batch)
        return self._late()

    def on_watermark(self, t_ms: int) -> list:
        if t_ms == MAX_WATERMARK:
            return []  # close() flushes everything at the end of input
        return self._emit(self.shards.advance_watermark(t_ms))

    def close(self) -> list:
        return self._emit(self.shards.flush()) + self._late()

    def snapshot(self) -> bytes | None:
        return self.shards.snapshot()

    def restore(self, state: bytes | None) -> None:
        if state is not None:
            self.shards.restore(state)

    def restore_groups(self, states: Sequence[bytes | None], groups: KeyGroups) -> None:
        self.shards.restore_groups(states, groups, self.name)


ARRIVAL = "__fastops_arrival"


class RunningAggregateOperator(Operator):
    """A running aggregate per key (no window): after each batch, the current
    value of every key that batch touched (an upsert stream). ``first`` /
    ``last`` follow event time if the stream has it, else arrival order."""

    def __init__(self, keys: tuple[str, ...], aggs: dict[str, Any], time_column: str | None = None):
        self.time_column = time_column
        self.shards = Shards(lambda: WindowAggregator(GlobalWindow(), list(keys), dict(aggs),
                                                      time=time_column or ARRIVAL), list(keys))
        self.name = "aggregate"

    def process(self, batch: pa.RecordBatch) -> list:
        if self.time_column is None:  # arrival order, counted on across restores
            arrived = self.shards.extra
            order = pa.array(np.arange(arrived, arrived + batch.num_rows, dtype=np.int64))
            self.shards.extra += batch.num_rows
            batch = batch.append_column(ARRIVAL, order)
        self.shards.process(batch)
        return self.shards.take_updates()

    def snapshot(self) -> bytes | None:
        return self.shards.snapshot()

    def restore(self, state: bytes | None) -> None:
        if state is not None:
            self.shards.restore(state)

    def restore_groups(self, states: Sequence[bytes | None], groups: KeyGroups) -> None:
        self.shards.restore_groups(states, groups, self.name)
