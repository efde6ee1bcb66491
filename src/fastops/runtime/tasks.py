"""Tasks: a chain of operators fused into one thread, its input gate and its
output writers (exchanges)."""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any, Callable

import numpy as np
import pyarrow as pa

from fastops.connectors.base import END, Reader, TransactionalSink, is_transactional
from fastops.core.messages import (
    END_OF_STREAM,
    IDLE,
    MAX_WATERMARK,
    MIN_WATERMARK,
    CheckpointBarrier,
    EndOfStream,
    Idle,
    LatencyMarker,
    Watermark,
)
from fastops.core.partitioning import partition
from fastops.operators.base import Operator, OperatorContext, Tagged
from fastops.runtime.channels import Cancelled, Channel, InputGate
from fastops.runtime.checkpoint import TaskSnapshot
from fastops.runtime.metrics import TaskMetrics

log = logging.getLogger("fastops")

PAUSED_WAIT_S = 0.001  # a source paused by a stop checkpoint waits this long per step


LATENCY_INTERVAL_S = 0.1  # a source task sends a latency marker after a batch at most this often

class OperatorError(Exception):
    """An operator raised; carries what the job failure report needs."""

    def __init__(self, operator: str, batch: pa.RecordBatch | None, cause: BaseException):
        super().__init__(f"{operator}: {cause!r}")
        self.operator = operator
        self.batch = batch
        self.cause = cause


class OutputWriter:
    """Sends one task's output for one edge to the downstream tasks' channels.

    ``forward``: one channel; ``rebalance``: round robin; ``broadcast``: all;
    ``hash``: by key group (``hash64(keys) % max_parallelism``), each key group
    owned by one downstream task: ``owners[key group]`` (None: contiguous
    ranges, as Flink).
    """

    def __init__(self, channels: Sequence[Channel], partitioning: str, keys: tuple[str, ...],
                 max_parallelism: int, metrics: TaskMetrics, owners: np.ndarray | None = None):
        self.channels = channels
        self.owners = owners
        self.partitioning = partitioning
        self.keys = list(keys)
        self.max_parallelism = max_parallelism
        self.metrics = metrics
        self._next = 0
        self._next_marker = 0

    def _send(self, ch: Channel, item: Any) -> None:
        if ch.try_send(item):
            return
        m = self.metrics  # no credit: the wait is backpressure, visible while it lasts
        m.backpressured_since = time.perf_counter()
        try:
            m.backpressured_s += ch.send(item)
        finally:
            m.backpressured_since = 0.0

    def close(self) -> None:
        for ch in self.channels:
            ch.close()

    def flush(self) -> None:
        """Send what channels that gather items into blocks hold (the task has no input now)."""
        for ch in self.channels:
            flush = getattr(ch, "flush", None)
            if flush is not None:
                self.metrics.backpressured_s += flush()

    def emit(self, item: Any) -> None:
        if not isinstance(item, pa.RecordBatch):
            if isinstance(item, LatencyMarker):  # to one channel, in turn: one measurement per path
                self._send(self.channels[self._next_marker % len(self.channels)], item)
                self._next_marker += 1
                return
            for ch in self.channels:
                self._send(ch, item)
            return
        if item.num_rows == 0:
            return
        self.metrics.rows_out += item.num_rows
        self.metrics.batches_out += 1
        n = len(self.channels)
        if self.partitioning == "broadcast":
            for ch in self.channels:
                self._send(ch, item)
        elif self.partitioning == "hash" and n > 1:
            # one kernel pass for ids and their counts, one scatter of every
            # column; the parts are zero-copy slices of one batch
            parts = partition(item, self.keys, n, scheme="key_group",
                              max_parallelism=self.max_parallelism, owners=self.owners)
            for p, part in enumerate(parts):
                if part.num_rows:
                    self._send(self.channels[p], part)
        elif self.partitioning == "rebalance" and n > 1:
            self._send(self.channels[self._next], item)
            self._next = (self._next + 1) % n
        else:
            self._send(self.channels[0], item)


class Chain:
    """Operators fused into one task: the output of one is the input of the next."""

    def __init__(self, operators: list[Operator], outputs: list[OutputWriter],
                 side_outputs: list[dict[str, list[OutputWriter]]]):
        self.operators = operators
        self.outputs = outputs
        self.side_outputs = side_outputs
        self.metrics: TaskMetrics | None = None
        self.rows = [0] * (len(operators) + 1)  # rows delivered to each operator, last: to the outputs
        self.has_sink = False  # a sink among its operators: latency markers end here
        # some output channel gathers items into blocks (Ray): flush them when out of input
        self.gathers = any(hasattr(ch, "flush") for w in self.outputs + list(self._side_writers())
                           for ch in w.channels)
        self.clocked = [i for i, op in enumerate(operators) if hasattr(op, "on_processing_time")]

    def process(self, input_index: int, batch: pa.RecordBatch) -> None:
        self._deliver(0, batch, input_index)

    def watermark(self, t_ms: int) -> None:
        self._deliver(0, Watermark(t_ms))

    def tick(self) -> None:
        """The task has no input right now: operators that follow the wall
        clock (``on_processing_time``) may emit, e.g. a processing-time watermark."""
        for i in self.clocked:
            self._route(i, self._call(self.operators[i], "on_processing_time", None))

    def _side_writers(self) -> Iterator[OutputWriter]:
        for routes in self.side_outputs:
            for writers in routes.values():
                yield from writers

    def control(self, item: Any) -> None:
        """Idle / barrier / end of stream / latency markers go straight to
        every output; a chain that writes to a sink records a marker's latency."""
        if isinstance(item, LatencyMarker):
            if self.has_sink and self.metrics is not None:
                self.metrics.record_latency(item.t)
            if not self.outputs:
                return
        for w in self.outputs:
            w.emit(item)
        for w in self._side_writers():
            w.emit(item)

    def flush(self) -> None:
        """The task ran out of input: channels that gather blocks send them."""
        if self.gathers:
            for w in self.outputs:
                w.flush()
            for w in self._side_writers():
                w.flush()

    def close_outputs(self) -> None:
        """After end of stream: nothing more is sent."""
        for w in self.outputs:
            w.close()
        for w in self._side_writers():
            w.close()

    def close(self) -> None:
        for i, op in enumerate(self.operators):
            self._route(i, self._call(op, "close", None) or [])

    def _call(self, op: Operator | TransactionalSink, method: str, batch: pa.RecordBatch | None, *args: Any) -> Any:
        """Call an operator method; its exception becomes an OperatorError."""
        try:
            return getattr(op, method)(*args)
        except Exception as exc:
            raise OperatorError(op.name, batch, exc) from exc

    def _route(self, i: int, outs: list | None) -> None:
        for out in outs or ():
            if isinstance(out, Tagged):
                if out.tag == "late" and self.metrics is not None:  # counted whether or not read
                    self.metrics.late_rows += out.batch.num_rows
                for w in self.side_outputs[i].get(out.tag, ()):
                    w.emit(out.batch)
            else:
                self._deliver(i + 1, out)

    def _deliver(self, i: int, item: Any, input_index: int = 0) -> None:
        if i == len(self.operators):
            if isinstance(item, pa.RecordBatch):
                self.rows[i] += item.num_rows
            for w in self.outputs:
                w.emit(item)
            if isinstance(item, Watermark):  # side outputs follow event time too
                if self.metrics is not None and item.t_ms != MAX_WATERMARK:
                    self.metrics.watermark = item.t_ms
                for w in self._side_writers():
                    w.emit(item)
            return
        op = self.operators[i]
        if isinstance(item, pa.RecordBatch):
            self.rows[i] += item.num_rows
            outs = (self._call(op, "process_input", item, input_index, item) if i == 0
                    else self._call(op, "process", item, item))
            self._route(i, outs)
        elif isinstance(item, Watermark):
            outs = self._call(op, "on_watermark", None, item.t_ms)
            self._route(i, outs)
            if not op.generates_watermarks:
                self._deliver(i + 1, item)


class WatermarkTracker:
    """A task's watermark: the minimum over its inputs that are neither idle
    nor finished; once every input that has not finished is idle, the
    greatest of theirs (as Flink's watermark valve: an idle job still closes
    the windows its inputs got to). It never goes backwards."""

    def __init__(self, n: int):
        self.wm = [MIN_WATERMARK] * n
        self.idle = [False] * n
        self.done = [False] * n
        self.current = MIN_WATERMARK

    def _combine(self) -> int | None:
        active = [w for w, i, d in zip(self.wm, self.idle, self.done) if not i and not d]
        if active:
            cand = min(active)
        elif all(self.done):
            cand = MAX_WATERMARK
        else:
            cand = max(w for w, d in zip(self.wm, self.done) if not d)
        if cand > self.current:
            self.current = cand
            return cand
        return None

    def on_batch(self, i: int) -> None:
        self.idle[i] = False

    def on_watermark(self, i: int, t: int) -> int | None:
        self.idle[i] = False
        if t > self.wm[i]:
            self.wm[i] = t
        return self._combine()

    def on_idle(self, i: int) -> int | None:
        self.idle[i] = True
        return self._combine()

    def on_end(self, i: int) -> int | None:
        self.done[i] = True
        self.wm[i] = MAX_WATERMARK
        return self._combine()

    @property
    def all_idle(self) -> bool:
        return all(i or d for i, d in zip(self.idle, self.done)) and not all(self.done)


class Task:
    """One parallel instance of a chain."""

    key = ""  # "chain/task": identifies the task across restarts
    coordinator: Any = None
    exactly_once = True

    def __init__(self, name: str, chain: Chain, contexts: list[OperatorContext],
                 metrics: TaskMetrics, stop: threading.Event | None = None):
        self.name = name
        self.chain = chain
        self.contexts = contexts
        self.metrics = metrics
        self.stop = stop if stop is not None else threading.Event()  # set: the attempt ends (cancel, failure)
        self.finished = False

    def step(self) -> bool:
        """Do the work available now without waiting (every task in one thread);
        False when there is nothing (left) to do."""
        raise NotImplementedError

    def run(self) -> None:
        """Run to the end in the calling thread; ``Cancelled`` once ``stop`` is set."""
        raise NotImplementedError

    def open(self) -> None:
        for op, ctx in zip(self.chain.operators, self.contexts):
            op.open(ctx)

    def _sinks(self) -> list[tuple[int, TransactionalSink]]:
        return [(i, op) for i, op in enumerate(self.chain.operators) if is_transactional(op)]

    def start_fresh(self) -> None:
        """No checkpoint to resume from: drop what earlier runs left uncommitted."""
        for _, sink in self._sinks():
            sink.abort()
            sink.begin(sink.epoch)

    def restore(self, entry: dict, manifest: Any) -> None:
        """Load operator states and recover sinks from a checkpoint entry."""
        sinks = dict(self._sinks())
        for i, op in enumerate(self.chain.operators):
            if i in sinks:
                handle = entry.get("sinks", {}).get(str(i))
                sinks[i].recover([handle] if handle is not None else [], manifest.checkpoint_id)
            elif not manifest.finished:
                try:
                    op.restore(manifest.operator_state(self.key, i))
                except Exception as exc:
                    raise OperatorError(op.name, None, exc) from exc

    def snapshot(self, checkpoint_id: int) -> TaskSnapshot:
        """Snapshot every operator of the chain (the barrier is at the chain's input)."""
        t0 = time.perf_counter()
        snap = TaskSnapshot()
        for i, op in enumerate(self.chain.operators):
            if is_transactional(op):
                snap.sinks[i] = self.chain._call(op, "snapshot_barrier", None, checkpoint_id)
                snap.operators.append(None)
            else:
                snap.operators.append(self.chain._call(op, "snapshot", None))
        m = self.metrics
        m.checkpoints += 1
        m.last_checkpoint_id = checkpoint_id
        m.last_checkpoint_s = time.perf_counter() - t0
        m.last_checkpoint_bytes = snap.state_bytes()
        return snap

    def finish(self) -> None:
        self.chain.close()
        handles = {i: self.chain._call(op, "pre_commit", None, op.epoch) for i, op in self._sinks()}
        if self.coordinator is not None:
            self.coordinator.task_finished(self.key, handles)
        self.chain.control(END_OF_STREAM)
        self.chain.close_outputs()
        self.finished = True
        self.metrics.finished = time.perf_counter()


class SourceTask(Task):
    """Reads a source split and pushes its batches through the chain."""

    def __init__(self, name: str, reader: Reader, chain: Chain, contexts: list[OperatorContext],
                 metrics: TaskMetrics, idle_timeout_ms: int | None = None, stop: threading.Event | None = None):
        super().__init__(name, chain, contexts, metrics, stop)
        self.reader = reader
        backlog = getattr(reader, "backlog", None)
        metrics.backlog = backlog if callable(backlog) else None
        arrival = getattr(reader, "arrival_time", None)
        # when the rows of the batch just read arrived (wall clock; None: as it was read)
        self.arrival_time: Callable[[], float | None] | None = arrival if callable(arrival) else None
        # a job that sheds load measures the latency of every batch
        self.latency_interval_s = 0.0 if any(getattr(op, "marks_every_batch", False) for op in chain.operators) \
            else LATENCY_INTERVAL_S
        self.idle_timeout_ms = idle_timeout_ms
        self._last_data = time.perf_counter()
        self._last_marker = 0.0  # perf_counter of the last latency marker sent
        self._idle_sent = False
        self.pending_barrier: int | None = None  # set by the checkpoint coordinator
        self.stop_after_barrier = False  # a stop checkpoint: read nothing after its barrier
        self.paused = False

    def trigger(self, checkpoint_id: int, stop: bool) -> None:
        """Take checkpoint ``checkpoint_id`` before the next read (called by the
        coordinator from the driver's thread); ``stop``: read nothing after it."""
        self.stop_after_barrier = stop
        self.pending_barrier = checkpoint_id

    def _checkpoint(self, checkpoint_id: int) -> None:
        self.metrics.rows_at_checkpoint[checkpoint_id] = self.metrics.rows_in  # for "rows replayed"
        snap = self.snapshot(checkpoint_id)
        snap.position = self.reader.position()
        self.chain.control(CheckpointBarrier(checkpoint_id))
        self.coordinator.ack(self.key, checkpoint_id, snap)

    def step(self) -> bool:
        """Read and push one batch; False when the source is exhausted."""
        cp = self.pending_barrier
        if cp is not None:
            self.pending_barrier = None
            self._checkpoint(cp)
            self.paused = self.stop_after_barrier
        if self.paused:  # until the attempt stops
            self.stop.wait(PAUSED_WAIT_S)
            return True
        t0 = time.perf_counter()
        batch = self.reader.read()
        if batch is END:
            self.chain.watermark(MAX_WATERMARK)
            self.finish()
            self.reader.close()
            return False
        if batch is None:  # nothing right now: the source is idle
            if self.chain.clocked:
                self.chain.tick()
            self.chain.flush()
            self.metrics.idle_s += time.perf_counter() - t0
            if (self.idle_timeout_ms is not None and not self._idle_sent
                    and (time.perf_counter() - self._last_data) * 1000 >= self.idle_timeout_ms):
                self.chain.control(IDLE)
                self._idle_sent = True
            return True
        self._last_data = time.perf_counter()
        self._idle_sent = False
        self.metrics.rows_in += batch.num_rows
        self.metrics.batches_in += 1
        marker = self._last_data - self._last_marker >= self.latency_interval_s
        read_at = ((self.arrival_time and self.arrival_time()) or time.time()) if marker else 0.0
        self.chain.process(0, batch)
        if marker:
            self._last_marker = self._last_data
            self.chain.control(LatencyMarker(read_at))
        return True

    def run(self) -> None:
        stop = self.stop
        while self.step():
            if stop.is_set():
                raise Cancelled()

    def close_reader(self) -> None:
        try:
            self.reader.close()
        except Exception:  # logged, not raised: closing after a failure must not hide that failure
            log.warning("task %s: closing its source reader failed", self.name, exc_info=True)


class OperatorTask(Task):
    """Takes items from its input gate and pushes them through the chain."""

    def __init__(self, name: str, gate: InputGate, chain: Chain, contexts: list[OperatorContext],
                 metrics: TaskMetrics, stop: threading.Event | None = None):
        super().__init__(name, chain, contexts, metrics, stop)
        self.gate = gate
        self.watermarks = WatermarkTracker(0)
        self._live = 0
        self._aligning: int | None = None  # checkpoint whose barriers are arriving
        self._barriers: set[int] = set()
        self._align_t0 = 0.0

    def open(self) -> None:
        super().open()
        self.watermarks = WatermarkTracker(len(self.gate.channels))
        self._live = len(self.gate.channels)

    def handle(self, index: int, item: Any) -> None:
        ch = self.gate.channels[index]
        if isinstance(item, pa.RecordBatch):
            self.metrics.rows_in += item.num_rows
            self.metrics.batches_in += 1
            self.watermarks.on_batch(index)
            self.chain.process(ch.input_index, item)
            return
        if isinstance(item, Watermark):
            new = self.watermarks.on_watermark(index, item.t_ms)
        elif isinstance(item, Idle):
            new = self.watermarks.on_idle(index)
            if self.watermarks.all_idle:  # the watermark the idle inputs got to first, then idle
                if new is not None:
                    self.chain.watermark(new)
                    new = None
                self.chain.control(IDLE)
        elif isinstance(item, EndOfStream):
            new = self.watermarks.on_end(index)
            self._live -= 1
            self._maybe_aligned()
        elif isinstance(item, CheckpointBarrier):
            self._on_barrier(index, item.checkpoint_id)
            new = None
        elif isinstance(item, LatencyMarker):
            self.chain.control(item)
            new = None
        else:
            raise TypeError(f"unexpected item on a channel: {type(item).__name__}")
        if new is not None:
            self.chain.watermark(new)  # the chain records the task's current watermark
        if self._live == 0 and not self.finished:
            self.finish()

    def _on_barrier(self, index: int, checkpoint_id: int) -> None:
        if self._aligning is None or checkpoint_id > self._aligning:
            if self._aligning is not None:  # an abandoned checkpoint: start over
                self.gate.unblock_all()
            self._aligning = checkpoint_id
            self._barriers = set()
            self._align_t0 = time.perf_counter()
        elif checkpoint_id < self._aligning:
            return  # a stale barrier
        self._barriers.add(index)
        if self.exactly_once:
            self.gate.block(index)  # rows after the barrier wait for the others
        self._maybe_aligned()

    def _maybe_aligned(self) -> None:
        cp = self._aligning
        if cp is None or self._live == 0:
            return
        done = self.watermarks.done
        if all(i in self._barriers or done[i] for i in range(len(done))):
            alignment = time.perf_counter() - self._align_t0
            self._aligning = None
            snap = self.snapshot(cp)
            snap.alignment_s = self.metrics.last_alignment_s = alignment
            self.chain.control(CheckpointBarrier(cp))
            if self.coordinator is not None:
                self.coordinator.ack(self.key, cp, snap)
            self.gate.unblock_all()

    def step(self) -> bool:
        """Handle everything queued now (one-thread mode); True if anything was."""
        did = False
        while not self.finished:
            got = self.gate.poll()
            if got is None:
                break
            self.handle(*got)
            did = True
        return did

    def run(self) -> None:
        m, gate, stop = self.metrics, self.gate, self.stop
        gathers = self.chain.gathers
        while not self.finished:
            if stop.is_set():
                raise Cancelled()
            if gathers and not gate.has_input():  # about to wait: what gathered downstream goes now
                self.chain.flush()
            t0 = m.idle_since = time.perf_counter()  # waiting for input: idle, visible while it lasts
            try:
                got = gate.get()
            finally:
                m.idle_s += time.perf_counter() - t0
                m.idle_since = 0.0
            assert got is not None  # get() without a timeout returns an item or raises Cancelled
            self.handle(*got)
