"""Restoring operators at another parallelism (``Operator.restore_groups``).

P tasks of an operator get a random keyed stream, each row routed to the
owner of its key group as the hash exchange routes it; at a random cut every
task snapshots, P' new tasks restore the key groups they own from those
snapshots, and take the rest of the stream routed by the new owners. The
union of all outputs must equal what one task fed everything gives (the
reference), row for row.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastops as fo
from fastops.core.messages import MAX_WATERMARK, MIN_WATERMARK, Watermark
from fastops.core.partitioning import KeyGroups, assign_key_groups
from fastops.core.watermarks import BoundedOutOfOrderness
from fastops.core.window.assigners import Sliding, Tumbling
from fastops.operators.base import Operator, OperatorContext, Tagged
from fastops.operators.basic import WatermarkAssigner
from fastops.operators.join import WindowJoinOperator
from fastops.operators.process import KeyedProcessOperator
from fastops.table.operators import DistinctRows, StreamJoin

MAXP = 16
ALL_GROUPS = KeyGroups(np.ones(MAXP, dtype=bool))
PAIRS = [(1, 3), (3, 2), (2, 4), (4, 1)]
EXAMPLES = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# an event: ("rows", input index, batch) or ("wm", time)
Event = tuple


# ---------------------------------------------------------------- the tasks

class Tasks:
    """``n`` open tasks of one operator, fed as a keyed exchange feeds them."""

    def __init__(self, make: Callable[[], Operator], n: int, keys: list[list[str]]):
        self.owners = assign_key_groups(n, MAXP)
        self.keys = keys  # the key columns of each input
        self.ops = [make() for _ in range(n)]
        for i, op in enumerate(self.ops):
            op.open(OperatorContext("op", i, n, MAXP))
        self.out: list = []

    def feed(self, event: Event) -> None:
        if event[0] == "wm":  # watermarks reach every task
            for op in self.ops:
                self.out += op.on_watermark(event[1])
            return
        _, side, batch = event
        owner = self.owners[ALL_GROUPS.groups_of([batch.column(k) for k in self.keys[side]])]
        for i, op in enumerate(self.ops):
            part = batch.filter(pa.array(owner == i))
            if part.num_rows:
                self.out += op.process_input(side, part)

    def finish(self) -> Counter:
        for op in self.ops:
            self.out += op.on_watermark(MAX_WATERMARK)
            self.out += op.close()
        return rows(self.out)

    def rescaled(self, make: Callable[[], Operator], n: int, only_owners: bool, nones: int) -> Tasks:
        """``n`` new tasks restored from these tasks' snapshots (each gets the
        snapshots of the tasks that owned any of its key groups, or all of
        them; plus ``nones`` None states, as of tasks that held nothing)."""
        states = [op.snapshot() for op in self.ops]
        new = Tasks(make, n, self.keys)
        new.out = self.out
        for j, op in enumerate(new.ops):
            mine = KeyGroups.of_task(new.owners, j)
            given = [s for i, s in enumerate(states)
                     if not only_owners or (mine.owned & (self.owners == i)).any()]
            op.restore_groups(given + [None] * nones, mine)
        # each key's state moved to exactly one new task: none lost, none kept twice
        assert sum(held(op) for op in new.ops) == sum(held(op) for op in self.ops)
        return new


def held(op: Operator) -> int:
    """How much keyed state ``op`` holds (keys, held rows, timers)."""
    if isinstance(op, WindowJoinOperator):
        return sum(b.num_rows for sides in op.buffers.values() for side in sides for b in side)
    if isinstance(op, KeyedProcessOperator):
        return op.pctx.keys.num_groups + len(op.pctx._timer_ids)
    if isinstance(op, DistinctRows):
        return op.keys.num_groups
    assert isinstance(op, StreamJoin)
    return op.held()


def rows(outputs: list) -> Counter:
    """Every output row as (tag, its column values by name), with their counts."""
    found: Counter = Counter()
    for item in outputs:
        tag, batch = (item.tag, item.batch) if isinstance(item, Tagged) else ("", item)
        assert isinstance(batch, pa.RecordBatch), item
        for row in batch.to_pylist():
            found[(tag, tuple(sorted(row.items())))] += 1
    return found


def check(make: Callable[[], Operator], keys: list[list[str]], events: list[Event], before: int,
          after: int, cut: int, only_owners: bool = True, nones: int = 0) -> None:
    reference = Tasks(make, 1, keys)
    for e in events:
        reference.feed(e)
    tasks = Tasks(make, before, keys)
    for e in events[:cut]:
        tasks.feed(e)
    tasks = tasks.rescaled(make, after, only_owners, nones)
    for e in events[cut:]:
        tasks.feed(e)
    assert tasks.finish() == reference.finish()


# ---------------------------------------------------------------- random streams

@st.composite
def streams(draw, columns: list[Callable[[int, int, np.random.Generator], dict]]) -> list[Event]:
    """Batches of the inputs (``columns[i](n, t, rng)``: the columns of ``n`` rows
    of input ``i`` around time ``t``), some empty, with watermarks between
    them; rows may be behind the watermark (late)."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    events: list[Event] = []
    t = 0
    for _ in range(draw(st.integers(0, 12))):
        side = draw(st.integers(0, len(columns) - 1))
        n = draw(st.integers(0, 10))
        events.append(("rows", side, pa.record_batch(columns[side](n, t, rng))))
        if draw(st.booleans()):
            t += draw(st.integers(0, 25))
            events.append(("wm", t))
    return events


def keys(n: int, rng: np.random.Generator, nulls: bool) -> pa.Array:
    k = rng.integers(0, 10, n)
    return pa.array(k, pa.int64(), mask=rng.random(n) < 0.15 if nulls else None)


def times(n: int, t: int, rng: np.random.Generator) -> np.ndarray:
    return t + rng.integers(-10, 40, n)


def words(n: int, rng: np.random.Generator) -> pa.Array:
    return pa.array([f"w{i}" for i in rng.integers(0, 4, n)], pa.string())


plans = st.one_of(st.sampled_from(PAIRS), st.tuples(st.integers(1, 5), st.integers(1, 5)))


@st.composite
def runs(draw, columns) -> tuple:
    """(events, P, P', cut, only_owners, nones)."""
    events = draw(streams(columns))
    before, after = draw(plans)
    return (events, before, after, draw(st.integers(0, len(events))), draw(st.booleans()),
            draw(st.integers(0, 2)))


# ---------------------------------------------------------------- window join

def join_left(n, t, rng):
    return {"k": keys(n, rng, True), "ts": times(n, t, rng), "v": rng.integers(0, 1000, n)}


def join_right(n, t, rng):
    return {"k": keys(n, rng, True), "ts": times(n, t, rng), "w": words(n, rng)}


@pytest.mark.parametrize("window", [Tumbling(20), Sliding(30, 10)], ids=["tumbling", "sliding"])
@given(run=runs([join_left, join_right]))
@EXAMPLES
def test_window_join(window, run):
    make = lambda: WindowJoinOperator(window, ("k",), ("k",), "ts", "ts")
    check(make, [["k"], ["k"]], *run)


# ---------------------------------------------------------------- keyed process

class CountLastTimers(fo.KeyedProcessFunction):
    """A running count per key (a state declared in ``open``, its handle kept),
    the last word seen (a string state), and a timer 15 ms after each row that
    emits both and forgets the word."""

    def open(self, ctx):
        self.seen = ctx.state("seen", pa.int64())

    def process_batch(self, batch, ctx):
        counts = pc.add(pc.fill_null(self.seen.value(batch), 0), ctx.running_count(batch))
        self.seen.update(batch, counts)
        ctx.state("last", pa.string()).update(batch, batch.column("w"))
        ctx.register_timer(batch, pc.add(batch.column("ts"), 15))
        return batch.append_column("count", counts)

    def on_timer(self, timestamps, keys, ctx):
        last = ctx.state("last", pa.string())
        out = (keys.append_column("at", timestamps).append_column("count", self.seen.value(keys))
               .append_column("last", last.value(keys)))
        last.clear(keys)
        return out


def process_rows(n, t, rng):
    return {"k": keys(n, rng, True), "s": words(n, rng), "ts": times(n, t, rng), "w": words(n, rng)}


@given(run=runs([process_rows]))
@EXAMPLES
def test_keyed_process(run):
    make = lambda: KeyedProcessOperator(CountLastTimers(), ("k", "s"), "ts", "count_last")
    check(make, [["k", "s"]], *run)


# ---------------------------------------------------------------- distinct

def distinct_rows(n, t, rng):
    return {"k": keys(n, rng, True), "s": words(n, rng)}


@given(run=runs([distinct_rows]))
@EXAMPLES
def test_distinct_rows(run):
    check(lambda: DistinctRows(["k", "s"]), [["k", "s"]], *run)


# ---------------------------------------------------------------- stream join

LEFT = pa.schema([("k", pa.int64()), ("lt", pa.int64()), ("lv", pa.int64())])
RIGHT = pa.schema([("rk", pa.int64()), ("rt", pa.int64()), ("rw", pa.string())])


def stream_left(n, t, rng):
    return {"k": keys(n, rng, True), "lt": times(n, t, rng), "lv": rng.integers(0, 1000, n)}


def stream_right(n, t, rng):
    return {"rk": keys(n, rng, True), "rt": times(n, t, rng), "rw": words(n, rng)}


JOINS = {
    "inner": {"how": "inner", "incremental": True},
    "left outer (changelog)": {"how": "left outer", "incremental": True},
    "full outer (changelog)": {"how": "full outer", "incremental": True},
    "interval full outer": {"how": "full outer", "incremental": True, "bounds": (-10, 15), "times": ("lt", "rt")},
    "interval inner": {"how": "inner", "incremental": True, "bounds": (0, 20), "times": ("lt", "rt")},
    "right outer at end": {"how": "right outer", "incremental": False},
}


@pytest.mark.parametrize("mode", list(JOINS))
@given(run=runs([stream_left, stream_right]))
@EXAMPLES
def test_stream_join(mode, run):
    make = lambda: StreamJoin(["k"], ["rk"], left_schema=LEFT, right_schema=RIGHT, **JOINS[mode])
    check(make, [["k"], ["rk"]], *run)


# ---------------------------------------------------------------- not keyed

def test_state_not_partitioned_by_key_is_refused():
    cross = StreamJoin([], [], "inner", LEFT, RIGHT)  # a cross join, at end of input
    cross.open(OperatorContext("join", 0, 1, MAXP))
    cross.process_input(0, pa.record_batch(stream_left(3, 0, np.random.default_rng(1))))
    state = cross.snapshot()
    for op in (StreamJoin([], [], "inner", LEFT, RIGHT), DistinctRows([])):
        op.open(OperatorContext("op", 0, 2, MAXP))
        with pytest.raises(ValueError, match="not partitioned by key"):
            op.restore_groups([state], KeyGroups.of_task(assign_key_groups(2, MAXP), 0))
        op.restore_groups([None, None], KeyGroups.of_task(assign_key_groups(2, MAXP), 0))  # nothing held


def test_a_key_in_two_snapshots_is_refused():
    tasks = [KeyedProcessOperator(CountLastTimers(), ("k", "s"), "ts", "p") for _ in range(2)]
    batch = pa.record_batch(process_rows(5, 0, np.random.default_rng(2)))
    for op in tasks:
        op.open(OperatorContext("p", 0, 1, MAXP))
        op.process(batch)
    fresh = KeyedProcessOperator(CountLastTimers(), ("k", "s"), "ts", "p")
    fresh.open(OperatorContext("p", 0, 1, MAXP))
    with pytest.raises(ValueError, match="two of the snapshots"):
        fresh.restore_groups([op.snapshot() for op in tasks], ALL_GROUPS)


def assigner() -> WatermarkAssigner:
    op = WatermarkAssigner("ts", lambda: BoundedOutOfOrderness(5))
    op.open(OperatorContext("watermark", 0, 1, MAXP))
    return op


@given(batches=st.lists(st.lists(st.integers(0, 1000), max_size=5), max_size=8),
       before=st.integers(1, 4), after=st.integers(1, 4), nones=st.integers(0, 2))
@EXAMPLES
def test_watermark_assigner_resumes_from_the_least_watermark(batches, before, after, nones):
    tasks = [assigner() for _ in range(before)]
    for i, ts in enumerate(batches):  # not keyed: any task may read any batch
        tasks[i % before].process(pa.record_batch({"ts": pa.array(ts, pa.int64())}))
    currents = [op.strategy.current for op in tasks]
    states = [op.snapshot() for op in tasks] + [None] * nones
    owners = assign_key_groups(after, MAXP)
    for j in range(after):
        op = assigner()
        op.restore_groups(states, KeyGroups.of_task(owners, j))
        assert op.strategy.current == min(currents)
        # a batch behind the others' watermarks moves it no further than a task resumed alone would
        alone = assigner()
        alone.restore(tasks[int(np.argmin(currents))].snapshot())
        probe = pa.record_batch({"ts": pa.array([min(currents) + 7], pa.int64())})
        assert [m for m in op.process(probe) if isinstance(m, Watermark)] == \
            [m for m in alone.process(probe) if isinstance(m, Watermark)]
    nothing = assigner()
    nothing.restore_groups([None] * (nones + 1), KeyGroups.of_task(owners, 0))
    assert nothing.strategy.current == MIN_WATERMARK


# ---------------------------------------------------------------- each cut of one stream

@pytest.mark.parametrize(("before", "after"), PAIRS)
def test_process_at_every_cut(before, after):
    rng = np.random.default_rng(before * 10 + after)
    events: list[Event] = []
    for t in range(0, 75, 15):
        events.append(("rows", 0, pa.record_batch(process_rows(12, t, rng))))
        events.append(("wm", t))
    make = lambda: KeyedProcessOperator(CountLastTimers(), ("k", "s"), "ts", "count_last")
    for cut in range(len(events) + 1):
        check(make, [["k", "s"]], events, before, after, cut)
