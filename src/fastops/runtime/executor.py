"""Executors: one thread per task, or every task in one thread (deterministic).

The executor also drives the checkpoint coordinator: it triggers checkpoints
at the configured interval, completes them when every task acknowledged, and
at the end of a successful run commits the sinks' last transactions.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from fastops.runtime.channels import Cancelled
from fastops.runtime.checkpoint import (
    CheckpointStats,
    CheckpointStorage,
    CheckpointStorageError,
    Coordinator,
    Manifest,
)
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
    checkpoints: list[CheckpointStats] = field(default_factory=list)
    restored_from: int | None = None  # checkpoint id the (last) attempt started from
    restore_s: float = 0.0
    restarts: int = 0
    rows_replayed: int = 0  # rows read again after in-process restarts
    skipped_checkpoints: list = field(default_factory=list)  # SkippedCheckpoint: unusable, passed over
    rolled_back: list = field(default_factory=list)  # committed output taken away before a replay

    def __repr__(self) -> str:
        restored = f", restored_from={self.restored_from}" if self.restored_from is not None else ""
        skipped = f", skipped_checkpoints={len(self.skipped_checkpoints)}" if self.skipped_checkpoints else ""
        return (f"JobResult({self.job_name!r}, rows_in={self.rows_in}, rows_out={self.rows_out}, "
                f"duration_s={self.duration_s:.3f}, checkpoints={len(self.checkpoints)}{restored}"
                f"{skipped}, restarts={self.restarts}, outputs={len(self.outputs)})")

    def summary(self) -> str:
        lines = [f"job {self.job_name!r}: {self.rows_in} rows in, {self.rows_out} rows out, "
                 f"{self.duration_s:.3f} s"]
        for m in self.metrics.values():
            lines.append(f"  {m.task}: in {m.rows_in} out {m.rows_out} busy {m.busy_ms_per_s:.0f} "
                         f"idle {m.idle_ms_per_s:.0f} backpressured {m.backpressured_ms_per_s:.0f} ms/s, "
                         f"cpu {m.cpu_s:.3f} s")
        for c in self.checkpoints:
            lines.append(f"  checkpoint {c.checkpoint_id}: {c.duration_s * 1000:.1f} ms, "
                         f"alignment {c.alignment_s * 1000:.1f} ms, {c.state_bytes} bytes")
        return "\n".join(lines)


def _failure(task: Task | None, exc: BaseException) -> JobFailed:
    if isinstance(exc, CheckpointStorageError):  # the storage failed, not the task that was running
        return exc
    name = task.name if task is not None else "job"
    if isinstance(exc, OperatorError):
        cause = user_traceback(exc.cause)
        failed = JobFailed(exc.operator, name, cause, exc.batch)
    else:
        cause = user_traceback(exc)
        failed = JobFailed(name, name, cause, None)
    failed.__cause__ = cause
    return failed


@dataclass
class Run:
    """One attempt's tasks and what it measured."""

    tasks: list[Task]
    duration_s: float
    checkpoints: list[CheckpointStats]
    restore_s: float


class Executor:
    """Runs a physical plan to completion."""

    def __init__(self, threads: bool = True, channel_capacity: int = 8,
                 progress: Any | None = None, progress_interval_s: float = 0.25):
        self.threads = threads
        self.channel_capacity = channel_capacity
        self.progress = progress  # called with the live list of TaskMetrics
        self.progress_interval_s = progress_interval_s
        self._last_progress = 0.0
        self.last_tasks: list[Task] = []  # of the latest attempt, also when it failed
        self.restored: Manifest | None = None
        self.coordinator: Coordinator | None = None

    def _report(self, tasks: list[Task], force: bool = False) -> None:
        if self.progress is None:
            return
        now = time.perf_counter()
        if force or now - self._last_progress >= self.progress_interval_s:
            self._last_progress = now
            self.progress([t.metrics for t in tasks])

    def rows_since(self, checkpoint_id: int | None) -> int:
        """Rows the latest attempt read after checkpoint ``checkpoint_id`` (all
        of them if that attempt took no such checkpoint): what a restart replays."""
        total = 0
        for t in self.last_tasks:
            if isinstance(t, SourceTask):
                total += t.metrics.rows_in - t.rows_at_checkpoint.get(checkpoint_id, 0)
        return total

    def run(self, plan: PhysicalPlan, job_name: str, storage: CheckpointStorage | None = None,
            interval_s: float | None = None, exactly_once: bool = True,
            restore: Manifest | None = None) -> Run:
        cancel = threading.Event()
        t_restore = time.perf_counter()
        positions = {k: v["position"] for k, v in restore.tasks.items()} if restore else None
        tasks = plan.instantiate(cancel, self.channel_capacity if self.threads else None, positions)
        self.last_tasks = tasks
        self.restored = restore  # this attempt's starting checkpoint (a progress bar reads it)
        first_id = max(storage.last_id() if storage else 0, restore.checkpoint_id if restore else 0) + 1
        from fastops.connectors.sinks import TransactionalSink

        sinks = [op for t in tasks for op in t.chain.operators if isinstance(op, TransactionalSink)]
        coordinator = Coordinator(storage, interval_s, plan.fingerprint(), first_id, sinks,
                                  [t for t in tasks if isinstance(t, SourceTask)], {t.key for t in tasks},
                                  plan.describe_graph())
        self.coordinator = coordinator  # its completed checkpoints (a progress bar reads them)
        t0 = time.perf_counter()
        current: Task | None = None
        try:
            for t in tasks:
                current = t
                t.coordinator = coordinator
                t.exactly_once = exactly_once
                t.metrics.started = t0
                t.open()
            for t in tasks:
                current = t
                if restore is not None:
                    t.restore(restore.tasks.get(t.key, {}), restore)
                else:
                    t.start_fresh()
        except Exception as exc:
            self._close_sources(tasks)
            failed = _failure(current, exc)
            raise failed from failed.__cause__
        restore_s = time.perf_counter() - t_restore if restore is not None else 0.0
        if restore is not None and restore.finished:
            for t in tasks:  # nothing left to do: the job had finished
                t.finished = True
            self._close_sources(tasks)
            return Run(tasks, 0.0, [], restore_s)
        t0 = time.perf_counter()
        for t in tasks:
            t.metrics.started = t0
        if self.threads:
            self._run_threads(tasks, cancel, coordinator)
        else:
            self._run_inline(tasks, coordinator)
        coordinator.finish()
        self._report(tasks, force=True)
        return Run(tasks, time.perf_counter() - t0, coordinator.stats, restore_s)

    def _run_inline(self, tasks: list[Task], coordinator: Coordinator) -> None:
        current: Task | None = None
        try:
            while not all(t.finished for t in tasks):
                coordinator.maybe_trigger()
                progressed = False
                for t in tasks:
                    if t.finished:
                        continue
                    current = t
                    c0 = time.thread_time()
                    progressed = t.step() or progressed
                    t.metrics.cpu_s += time.thread_time() - c0
                coordinator.poll()
                self._report(tasks)
                if not progressed:
                    time.sleep(0.0005)  # every source is waiting for data
        except Exception as exc:
            self._close_sources(tasks)
            failed = _failure(current, exc)
            raise failed from failed.__cause__

    def _run_threads(self, tasks: list[Task], cancel: threading.Event, coordinator: Coordinator) -> None:
        errors: list[tuple[Task, BaseException]] = []
        lock = threading.Lock()

        def body(task: Task) -> None:
            c0 = time.thread_time()
            try:
                task.run()
            except Cancelled:
                pass
            except BaseException as exc:
                with lock:
                    errors.append((task, exc))
                cancel.set()
                for other in tasks:
                    gate = getattr(other, "gate", None)
                    if gate is not None:
                        gate.wake()
            finally:
                task.metrics.cpu_s += time.thread_time() - c0

        threads = [threading.Thread(target=body, args=(t,), name=t.name, daemon=True) for t in tasks]
        for th in threads:
            th.start()
        try:
            while any(th.is_alive() for th in threads):
                threads[0].join(0.01) if threads[0].is_alive() else time.sleep(0.01)
                if not cancel.is_set():
                    coordinator.maybe_trigger()
                    coordinator.poll()
                    self._report(tasks)
        except BaseException:
            cancel.set()
            for t in tasks:
                gate = getattr(t, "gate", None)
                if gate is not None:
                    gate.wake()
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
