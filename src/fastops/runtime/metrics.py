"""Per-task metrics, as Flink defines them: busy / idle / backpressured time,
as totals and as rates over a sliding interval.

- idle: waiting for input;
- backpressured: waiting for credit on an output channel;
- busy: everything else (processing).

The true processing rate (what an autoscaler reads) is ``rows_in / busy``.
``cpu_s`` is the CPU time the task's thread used: busy time includes waiting
for a core or for the GIL, CPU time does not, so the two together show whether
a task is short of work or short of a core. Work a task hands to Arrow's own
thread pool (the Parquet dataset scanner decodes there) is in its busy time
but not in its ``cpu_s``.

Only the task's own thread writes its ``TaskMetrics`` (plain attribute
updates, no lock). A ``MetricsSampler`` in the job driver's thread copies the
counters a few times a second into a ring of samples; rates over the last
``window`` seconds come from the two ends of the window, so any thread can
read them while the job runs without touching the tasks. A task that is
waiting right now says since when (``idle_since`` / ``backpressured_since``),
so a long wait counts as it happens, not only once it ends.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

log = logging.getLogger(__name__)

LATENCIES_KEPT = 4096  # latency markers kept per task (a few minutes of them)


@dataclass
class TaskMetrics:
    """Counters of one task, updated by its own thread only."""

    task: str
    rows_in: int = 0
    rows_out: int = 0
    batches_in: int = 0
    batches_out: int = 0
    sink_rows: int = 0  # rows written by sink operators of this task
    late_rows: int = 0  # rows its operators found late (their side output "late")
    shed_rows: int = 0  # rows its operators dropped to shed load (see fastops.shedding)
    idle_s: float = 0.0
    backpressured_s: float = 0.0
    cpu_s: float = 0.0  # CPU time of the thread(s) that ran this task
    watermark: int | None = None
    started: float = field(default_factory=time.perf_counter)
    finished: float | None = None
    # where the task sits in the plan
    vertex: int = 0  # index of its chain in the physical plan
    subtask: int = 0  # which parallel instance of the chain
    parallelism: int = 1
    operators: tuple[str, ...] = ()  # the chained operators' names (a source first)
    is_source: bool = False
    location: str = ""  # where it runs: "" in this process, else the Ray node of its actor
    # rows delivered to each chained operator after the source (if any), and
    # (last entry) to the chain's main output
    operator_rows: list[int] = field(default_factory=list)
    # a wait in progress: when it began (perf_counter), 0.0 when not waiting
    idle_since: float = 0.0
    backpressured_since: float = 0.0
    # this task's part of the latest checkpoint
    checkpoints: int = 0
    last_checkpoint_id: int | None = None
    last_checkpoint_s: float = 0.0  # time to snapshot its operators
    last_alignment_s: float = 0.0  # from the first barrier to the last
    last_checkpoint_bytes: int = 0
    rows_at_checkpoint: dict[int, int] = field(default_factory=dict)  # sources: rows read at each barrier
    # sources: the reader's ``backlog`` (rows ready and not read), read by the sampler
    backlog: Callable[[], int | None] | None = None
    # tasks that write to sinks: (wall time, ms from the source's read) of the latest latency markers
    latencies: deque = field(default_factory=lambda: deque(maxlen=LATENCIES_KEPT))

    def record_latency(self, read_at: float) -> None:
        """A latency marker of a batch read at ``read_at`` (wall clock) arrived now."""
        now = time.time()
        self.latencies.append((now, 1000.0 * (now - read_at)))

    @property
    def elapsed_s(self) -> float:
        end = self.finished if self.finished is not None else time.perf_counter()
        return max(end - self.started, 1e-9)

    @property
    def busy_s(self) -> float:
        return max(self.elapsed_s - self.idle_s - self.backpressured_s, 0.0)

    def per_second_ms(self, seconds: float) -> float:
        return 1000.0 * seconds / self.elapsed_s

    @property
    def busy_ms_per_s(self) -> float:
        return self.per_second_ms(self.busy_s)

    @property
    def idle_ms_per_s(self) -> float:
        return self.per_second_ms(self.idle_s)

    @property
    def backpressured_ms_per_s(self) -> float:
        return self.per_second_ms(self.backpressured_s)

    @property
    def true_processing_rate(self) -> float:
        """Rows per second of busy time."""
        return self.rows_in / self.busy_s if self.busy_s > 0 else float("inf")

    @property
    def watermark_lag_ms(self) -> float | None:
        """Wall-clock time now minus the current watermark (event time), in ms."""
        if self.watermark is None:
            return None
        return time.time() * 1000.0 - self.watermark

    def as_dict(self) -> dict:
        return {
            "task": self.task,
            "rows_in": self.rows_in,
            "rows_out": self.rows_out,
            "batches_in": self.batches_in,
            "batches_out": self.batches_out,
            "sink_rows": self.sink_rows,
            "busy_ms_per_s": round(self.busy_ms_per_s, 1),
            "idle_ms_per_s": round(self.idle_ms_per_s, 1),
            "backpressured_ms_per_s": round(self.backpressured_ms_per_s, 1),
            "cpu_s": round(self.cpu_s, 4),
            "watermark": self.watermark,
            "elapsed_s": round(self.elapsed_s, 4),
        }


class _TaskSample(NamedTuple):
    rows_in: int
    rows_out: int
    batches_in: int
    batches_out: int
    sink_rows: int
    idle_s: float  # with the wait in progress
    backpressured_s: float
    elapsed_s: float  # the task's running time (stops when it finished)
    watermark: int | None
    operator_rows: tuple[int, ...]
    backlog: int | None


def _read(m: TaskMetrics, now: float) -> _TaskSample:
    """A copy of ``m``'s counters at ``now``. Totals are read before the
    wait-in-progress marks, so a wait ending meanwhile is counted in the next
    sample rather than twice."""
    idle, bp = m.idle_s, m.backpressured_s
    idle_since, bp_since = m.idle_since, m.backpressured_since
    if idle_since:
        idle += max(now - idle_since, 0.0)
    if bp_since:
        bp += max(now - bp_since, 0.0)
    end = m.finished if m.finished is not None else now
    return _TaskSample(m.rows_in, m.rows_out, m.batches_in, m.batches_out, m.sink_rows, idle, bp,
                       max(end - m.started, 0.0), m.watermark, tuple(m.operator_rows),
                       _backlog(m) if m.finished is None else 0)


def _backlog(m: TaskMetrics) -> int | None:
    """The source's backlog now; None when it cannot say (or its reader fails
    to: logged once, the job goes on)."""
    if m.backlog is None:
        return None
    try:
        value = m.backlog()
        return None if value is None else int(value)
    except Exception:
        log.warning("task %s: its reader's backlog() failed; its backlog is not reported", m.task, exc_info=True)
        m.backlog = None
        return None


class _Sample(NamedTuple):
    t: float  # perf_counter
    wall: float  # time.time(), for watermark lag
    tasks: tuple[_TaskSample, ...]


def _rate(new: float, old: float, dt: float) -> float:
    return max(new - old, 0) / dt if dt > 0 else 0.0


class MetricsSampler:
    """Samples the live ``TaskMetrics`` of an attempt into a ring; computes
    totals and rates over a window from any thread.

    The job driver's thread calls ``sample(tasks)`` every ``interval_s``
    (``due(now)``); ``retention_s`` of samples are kept, the longest window
    ``task_rates`` can look back over.
    """

    def __init__(self, interval_s: float = 0.25, retention_s: float = 60.0):
        if interval_s <= 0 or retention_s < interval_s:
            raise ValueError(f"need 0 < interval ({interval_s}) <= retention ({retention_s})")
        self.interval_s = interval_s
        self._ring: deque[_Sample] = deque(maxlen=int(retention_s / interval_s) + 2)
        self._tasks: tuple[TaskMetrics, ...] = ()
        self._lock = threading.Lock()  # between the driver and readers; never taken by tasks
        self.last_sample = 0.0  # perf_counter of the latest sample

    def due(self, now: float) -> bool:
        return now - self.last_sample >= self.interval_s

    def sample(self, tasks: Sequence[TaskMetrics]) -> None:
        """Copy the counters of ``tasks`` now; tasks other than the last
        sample's (a new attempt) start a new ring."""
        now = time.perf_counter()
        self.last_sample = now
        s = _Sample(now, time.time(), tuple(_read(m, now) for m in tasks))
        same = len(tasks) == len(self._tasks) and all(a is b for a, b in zip(tasks, self._tasks))
        with self._lock:
            if not same:
                self._tasks = tuple(tasks)
                self._ring.clear()
            self._ring.append(s)

    def latency(self, window_s: float) -> dict[str, Any]:
        """``latency_summary`` of the current tasks over the last ``window_s`` seconds."""
        with self._lock:
            tasks = self._tasks
        return latency_summary(tasks, time.time() - window_s)

    def task_rates(self, window_s: float) -> list[dict[str, Any]]:
        """Per task (in plan order): its place in the plan, totals at the
        latest sample, and rates over the last ``window_s`` seconds (over the
        whole attempt when it is younger)."""
        with self._lock:
            tasks, ring = self._tasks, list(self._ring)
        if not ring:
            return []
        last = ring[-1]
        first = next((s for s in ring if s.t >= last.t - window_s - 1e-9), ring[0])
        dt = last.t - first.t
        out = []
        for m, a, b in zip(tasks, first.tasks, last.tasks):
            d_elapsed = max(b.elapsed_s - a.elapsed_s, 0.0)
            idle = min(max(b.idle_s - a.idle_s, 0.0), d_elapsed)
            bp = min(max(b.backpressured_s - a.backpressured_s, 0.0), d_elapsed - idle)
            busy = d_elapsed - idle - bp
            rows_in = max(b.rows_in - a.rows_in, 0)
            out.append({
                "task": m.task, "vertex": m.vertex, "subtask": m.subtask, "parallelism": m.parallelism,
                "operators": list(m.operators), "is_source": m.is_source, "location": m.location,
                "rows_in": b.rows_in, "rows_out": b.rows_out, "batches_in": b.batches_in,
                "batches_out": b.batches_out, "sink_rows": b.sink_rows,
                "busy_ms": 1000.0 * max(b.elapsed_s - b.idle_s - b.backpressured_s, 0.0),
                "idle_ms": 1000.0 * b.idle_s, "backpressured_ms": 1000.0 * b.backpressured_s,
                "finished": m.finished is not None,
                "window_s": dt,
                "rows_in_per_s": _rate(b.rows_in, a.rows_in, dt),
                "rows_out_per_s": _rate(b.rows_out, a.rows_out, dt),
                "sink_rows_per_s": _rate(b.sink_rows, a.sink_rows, dt),
                "busy_ms_per_s": 1000.0 * busy / dt if dt > 0 else 0.0,
                "idle_ms_per_s": 1000.0 * idle / dt if dt > 0 else 0.0,
                "backpressured_ms_per_s": 1000.0 * bp / dt if dt > 0 else 0.0,
                "true_processing_rate": rows_in / busy if busy > 0 else None,
                "watermark": b.watermark,
                "watermark_lag_ms": (last.wall * 1000.0 - b.watermark) if b.watermark is not None else None,
                "late_rows": m.late_rows,
                "shed_rows": m.shed_rows,
                "backlog": b.backlog,
                "backlog_growth_per_s": (b.backlog - a.backlog) / dt
                if dt > 0 and a.backlog is not None and b.backlog is not None else None,
                "operator_rows": list(b.operator_rows),
                "operator_rows_per_s": [_rate(y, x, dt) for x, y in zip(a.operator_rows, b.operator_rows)],
                "checkpoints": m.checkpoints,
                "last_checkpoint_id": m.last_checkpoint_id,
                "last_checkpoint_ms": 1000.0 * m.last_checkpoint_s,
                "last_alignment_ms": 1000.0 * m.last_alignment_s,
                "last_checkpoint_bytes": m.last_checkpoint_bytes,
            })
        return out


def latency_summary(tasks: Sequence[TaskMetrics], since: float | None = None) -> dict[str, Any]:
    """Quantiles (ms) of the latency markers that reached a sink (after
    ``since``, wall clock; None: all kept): from a source's read of a batch
    to the sink's task having processed what came before the marker."""
    values = sorted(ms for m in tasks for t, ms in list(getattr(m, "latencies", ()))
                    if since is None or t >= since)
    if not values:
        return {"markers": 0, "p50_ms": None, "p99_ms": None, "max_ms": None}

    def q(p: float) -> float:
        return values[min(len(values) - 1, int(p * len(values)))]
    return {"markers": len(values), "p50_ms": q(0.5), "p99_ms": q(0.99), "max_ms": values[-1]}
