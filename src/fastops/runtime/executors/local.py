"""What the two in-process executors share: creating an attempt's tasks,
opening and restoring them, the checkpoint coordinator, and turning a task's
exception into a ``JobFailed`` that points at the user's code."""
from __future__ import annotations

import threading
import time
from typing import Callable

from fastops.connectors.base import is_transactional
from fastops.runtime.checkpoint import CheckpointStorageError, Coordinator
from fastops.runtime.errors import JobCancelled, JobFailed, user_traceback
from fastops.runtime.executors.base import Attempt, AttemptResult
from fastops.runtime.metrics import TaskMetrics
from fastops.runtime.rescale import StateAssignment
from fastops.runtime.tasks import OperatorError, SourceTask, Task


def job_failure(task: Task | None, exc: BaseException) -> JobFailed:
    """``exc`` raised in ``task`` as a ``JobFailed`` whose cause starts at the user's frames."""
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


def wake(tasks: list[Task]) -> None:
    """Wake the tasks waiting for input, so that they see a stop."""
    for t in tasks:
        gate = getattr(t, "gate", None)
        if gate is not None:
            gate.wake()


def close_sources(tasks: list[Task]) -> None:
    for t in tasks:
        if isinstance(t, SourceTask):
            t.close_reader()


class LocalExecutor:
    """Runs tasks in this process; subclasses say how (``_drive``)."""

    name = "local"

    def __init__(self, channel_capacity: int | None = 8):
        self.channel_capacity = channel_capacity  # None: unbounded channels
        self._tasks: list[Task] = []
        self._coordinator: Coordinator | None = None
        self._stop = threading.Event()  # of the current attempt: a failure or a cancel ends it
        self._cancelled = False

    @property
    def coordinator(self) -> Coordinator | None:
        return self._coordinator

    def task_metrics(self) -> list[TaskMetrics]:
        return [t.metrics for t in self._tasks]

    def close(self) -> None:
        """Nothing outlives an attempt here."""

    def cancel(self) -> None:
        self._cancelled = True
        stop, tasks = self._stop, self._tasks
        stop.set()
        wake(tasks)

    def _check_cancelled(self, attempt: Attempt, tasks: list[Task]) -> None:
        if self._cancelled:
            close_sources(tasks)
            raise JobCancelled(attempt.job_name)

    def run(self, attempt: Attempt, tick: Callable[[], None]) -> AttemptResult:
        plan, restore, storage = attempt.plan, attempt.restore, attempt.storage
        stop = threading.Event()
        self._stop = stop
        if self._cancelled:
            raise JobCancelled(attempt.job_name)
        t_restore = time.perf_counter()
        assignment = StateAssignment(plan, restore) if restore is not None else None
        positions = assignment.positions() if assignment is not None else None
        tasks = plan.instantiate(stop, self.channel_capacity, positions)
        self._tasks = tasks
        first_id = max(storage.last_id() if storage else 0, restore.checkpoint_id if restore else 0) + 1
        sinks = [op for t in tasks for op in t.chain.operators if is_transactional(op)]
        coordinator = Coordinator(storage, attempt.interval_s, plan.checkpoint_meta(), first_id, sinks,
                                  [t for t in tasks if isinstance(t, SourceTask)], {t.key for t in tasks})
        self._coordinator = coordinator
        t0 = time.perf_counter()
        current: Task | None = None
        try:
            for t in tasks:
                current = t
                t.coordinator = coordinator
                t.exactly_once = attempt.exactly_once
                t.metrics.started = t0
                t.open()
            for t in tasks:
                current = t
                if assignment is not None:
                    chain_index, index = map(int, t.key.split("/"))
                    assignment.restore(t, plan.chains[chain_index], index)
                else:
                    t.start_fresh()
        except Exception as exc:
            close_sources(tasks)
            failed = job_failure(current, exc)
            raise failed from failed.__cause__
        self._check_cancelled(attempt, tasks)
        restore_s = time.perf_counter() - t_restore if restore is not None else 0.0
        rescaled = assignment.record if assignment is not None else None
        metrics = [t.metrics for t in tasks]
        if restore is not None and restore.finished:
            for t in tasks:  # nothing left to do: the job had finished
                t.finished = True
            close_sources(tasks)
            return AttemptResult(metrics, 0.0, [], restore_s, rescaled=rescaled)
        t0 = time.perf_counter()
        for t in tasks:
            t.metrics.started = t0
        if attempt.on_running is not None:
            attempt.on_running(rescaled)
        self._drive(tasks, stop, coordinator, tick)
        self._check_cancelled(attempt, tasks)
        if coordinator.stopped is not None:  # a stop checkpoint: the next attempt or run goes on from it
            return AttemptResult(metrics, time.perf_counter() - t0, coordinator.stats, restore_s,
                                 stopped=coordinator.stopped, rescaled=rescaled)
        coordinator.finish()
        return AttemptResult(metrics, time.perf_counter() - t0, coordinator.stats, restore_s, rescaled=rescaled)

    def _drive(self, tasks: list[Task], stop: threading.Event, coordinator: Coordinator,
               tick: Callable[[], None]) -> None:
        """Run ``tasks`` until all finished or ``stop`` is set (then return);
        raise ``JobFailed`` for the first task that failed."""
        raise NotImplementedError
