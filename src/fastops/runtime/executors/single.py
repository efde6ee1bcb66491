"""Every task in the driver's thread, in a fixed order: deterministic, for
tests and debugging. Channels are unbounded (a send must never wait)."""
from __future__ import annotations

import threading
import time
from typing import Callable

from fastops.runtime.checkpoint import Coordinator
from fastops.runtime.executors.local import LocalExecutor, close_sources, job_failure
from fastops.runtime.tasks import Task

IDLE_SLEEP_S = 0.0005  # when every source is waiting for data


class SingleThreadExecutor(LocalExecutor):
    """Steps every task in turn until all finished."""

    name = "single"

    def __init__(self, channel_capacity: int | None = None):
        super().__init__(None)  # one thread: bounded channels could deadlock

    def _drive(self, tasks: list[Task], stop: threading.Event, coordinator: Coordinator,
               tick: Callable[[], None]) -> None:
        current: Task | None = None
        try:
            while not all(t.finished for t in tasks):
                if stop.is_set():
                    return
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
                if coordinator.stopped is not None:  # every task is past the stop barrier
                    return
                tick()
                if not progressed:
                    time.sleep(IDLE_SLEEP_S)
        except Exception as exc:
            close_sources(tasks)
            failed = job_failure(current, exc)
            raise failed from failed.__cause__
