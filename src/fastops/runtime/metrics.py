"""Per-task metrics, as Flink defines them: busy / idle / backpressured time.

- idle: waiting for input;
- backpressured: waiting for credit on an output channel;
- busy: everything else (processing).

The true processing rate (what an autoscaler reads) is ``rows_in / busy``.
``cpu_s`` is the CPU time the task's thread used: busy time includes waiting
for a core or for the GIL, CPU time does not, so the two together show whether
a task is short of work or short of a core. Work a task hands to Arrow's own
thread pool (the Parquet dataset scanner decodes there) is in its busy time
but not in its ``cpu_s``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class TaskMetrics:
    """Counters of one task, updated by its own thread only."""

    task: str
    rows_in: int = 0
    rows_out: int = 0
    batches_in: int = 0
    batches_out: int = 0
    sink_rows: int = 0  # rows written by sink operators of this task
    idle_s: float = 0.0
    backpressured_s: float = 0.0
    cpu_s: float = 0.0  # CPU time of the thread(s) that ran this task
    watermark: int | None = None
    started: float = field(default_factory=time.perf_counter)
    finished: float | None = None

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
