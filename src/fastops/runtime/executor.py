"""Executors: one thread per task, or every task in one thread (deterministic)."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Optional

from fastops.runtime.channels import Cancelled
from fastops.runtime.errors import JobFailed, user_traceback
from fastops.runtime.metrics import TaskMetrics
from fastops.runtime.plan import PhysicalPlan
from fastops.runtime.tasks import OperatorError, SourceTask, Task


@dataclass
class JobResult:
    """What ``StreamEnvironment.execute`` returns."""

    job_name: str
    duration_s: float
    metrics: dict[str, TaskMetrics]
    rows_in: int
    rows_out: int
    outputs: dict[int, Any] = field(default_factory=dict)  # sink node id -> collected result

    def summary(self) -> str:
        lines = [f"job {self.job_name!r}: {self.rows_in} rows in, {self.rows_out} rows out, "
                 f"{self.duration_s:.3f} s"]
        for m in self.metrics.values():
            lines.append(f"  {m.task}: in {m.rows_in} out {m.rows_out} busy {m.busy_ms_per_s:.0f} "
                         f"idle {m.idle_ms_per_s:.0f} backpressured {m.backpressured_ms_per_s:.0f} ms/s")
        return "\n".join(lines)


def _failure(task: Task, exc: BaseException) -> JobFailed:
    if isinstance(exc, OperatorError):
        cause = user_traceback(exc.cause)
        failed = JobFailed(exc.operator, task.name, cause, exc.batch)
    else:
        cause = user_traceback(exc)
        failed = JobFailed(task.name, task.name, cause, None)
    failed.__cause__ = cause
    return failed


class Executor:
    """Runs a physical plan to completion."""

    def __init__(self, threads: bool = True, channel_capacity: int = 8):
        self.threads = threads
        self.channel_capacity = channel_capacity

    def run(self, plan: PhysicalPlan, job_name: str) -> tuple[list[Task], float]:
        cancel = threading.Event()
        tasks = plan.instantiate(cancel, self.channel_capacity if self.threads else None)
        t0 = time.perf_counter()
        for t in tasks:
            t.metrics.started = t0
        try:
            for t in tasks:
                t.open()
        except Exception as exc:  # noqa: BLE001
            failed = _failure(tasks[0], exc)
            raise failed from failed.__cause__
        if self.threads:
            self._run_threads(tasks, cancel)
        else:
            self._run_inline(tasks)
        return tasks, time.perf_counter() - t0

    def _run_inline(self, tasks: list[Task]) -> None:
        current: Optional[Task] = None
        try:
            while not all(t.finished for t in tasks):
                progressed = False
                for t in tasks:
                    if t.finished:
                        continue
                    current = t
                    progressed = t.step() or progressed
                if not progressed:
                    time.sleep(0.0005)  # every source is waiting for data
        except Exception as exc:  # noqa: BLE001
            self._close_sources(tasks)
            failed = _failure(current, exc)  # type: ignore[arg-type]
            raise failed from failed.__cause__

    def _run_threads(self, tasks: list[Task], cancel: threading.Event) -> None:
        errors: list[tuple[Task, BaseException]] = []
        lock = threading.Lock()

        def body(task: Task) -> None:
            try:
                task.run()
            except Cancelled:
                pass
            except BaseException as exc:  # noqa: BLE001
                with lock:
                    errors.append((task, exc))
                cancel.set()
                for other in tasks:
                    gate = getattr(other, "gate", None)
                    if gate is not None:
                        gate.wake()

        threads = [threading.Thread(target=body, args=(t,), name=t.name, daemon=True) for t in tasks]
        for th in threads:
            th.start()
        try:
            for th in threads:
                while th.is_alive():
                    th.join(0.1)
        except KeyboardInterrupt:
            cancel.set()
            for th in threads:
                th.join()
            raise
        finally:
            self._close_sources(tasks)
        if errors:
            task, exc = errors[0]
            failed = _failure(task, exc)
            raise failed from failed.__cause__

    @staticmethod
    def _close_sources(tasks: list[Task]) -> None:
        for t in tasks:
            if isinstance(t, SourceTask):
                t.close_reader()
