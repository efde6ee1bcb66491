"""The executor protocol: what the job driver asks of whatever runs the tasks.

An executor runs one *attempt* of a physical plan at a time: it creates the
tasks (from a checkpoint, or from the start), runs them to the end, a
failure or a cancel, drives the attempt's checkpoint coordinator, and calls
the driver's ``tick`` a few times a second from the driver's thread (where the
driver samples metrics, reports progress and, later, runs its controllers).
The local executors (``threads``, ``single``) share ``LocalExecutor``; one
that runs tasks elsewhere (actors) implements the same protocol with the same
plan, channel protocol and coordinator.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from fastops.runtime.checkpoint import CheckpointStats, CheckpointStorage, Coordinator, Manifest
from fastops.runtime.metrics import TaskMetrics
from fastops.runtime.plan import PhysicalPlan


@dataclass
class Attempt:
    """One run of a plan, from ``restore`` (None: the start) to its end."""

    plan: PhysicalPlan
    job_name: str
    storage: CheckpointStorage | None = None  # None: no checkpoints
    interval_s: float | None = None  # between checkpoints
    exactly_once: bool = True  # align barriers (False: at least once)
    restore: Manifest | None = None
    # called once every task is restored, before they run, with the RescaleRecord if state moved
    on_running: Callable[[Any], None] | None = None


@dataclass
class AttemptResult:
    """What an attempt that ran to its end measured."""

    metrics: list[TaskMetrics]
    duration_s: float
    checkpoints: list[CheckpointStats] = field(default_factory=list)
    restore_s: float = 0.0
    stopped: Manifest | None = None  # the stop checkpoint it ended at (a savepoint or a rescale)
    rescaled: Any = None  # a RescaleRecord when it restored state at other parallelisms


class Executor(Protocol):
    """Runs attempts of a physical plan (see the module docs)."""

    name: str

    def run(self, attempt: Attempt, tick: Callable[[], None]) -> AttemptResult:
        """Run ``attempt`` to its end (or to a stop checkpoint: see
        ``Coordinator.request_stop``) in the calling thread, calling ``tick()``
        every few milliseconds. Raises ``JobFailed`` when a task or the
        checkpoint storage fails, ``JobCancelled`` after ``cancel()``."""
        ...

    def cancel(self) -> None:
        """From any thread: stop the running attempt (and refuse later ones)
        promptly; sinks commit nothing more."""
        ...

    def close(self) -> None:
        """The job ended (finished, failed or cancelled): release what the
        executor keeps between attempts (a Ray executor: its actors)."""
        ...

    def task_metrics(self) -> list[TaskMetrics]:
        """The live counters of the current (or last) attempt's tasks, in plan order."""
        ...

    @property
    def coordinator(self) -> Coordinator | None:
        """The current (or last) attempt's checkpoint coordinator."""
        ...
