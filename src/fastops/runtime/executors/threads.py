"""One thread per task: tasks run in parallel (the kernels release the GIL),
joined by bounded channels with credits."""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from fastops.runtime.channels import Cancelled
from fastops.runtime.checkpoint import Coordinator
from fastops.runtime.executors.local import LocalExecutor, close_sources, job_failure, wake
from fastops.runtime.tasks import Task

log = logging.getLogger("fastops")

POLL_S = 0.01  # how often the driver's thread checks the tasks, checkpoints and its tick


class ThreadExecutor(LocalExecutor):
    """Every task in a thread of its own; the driver's thread coordinates."""

    name = "threads"

    def __init__(self, channel_capacity: int = 8):
        super().__init__(channel_capacity)

    def _drive(self, tasks: list[Task], stop: threading.Event, coordinator: Coordinator,
               tick: Callable[[], None]) -> None:
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
                stop.set()
                wake(tasks)
            finally:
                task.metrics.cpu_s += time.thread_time() - c0

        threads = [threading.Thread(target=body, args=(t,), name=t.name, daemon=True) for t in tasks]
        for th in threads:
            th.start()
        try:
            while any(th.is_alive() for th in threads):
                if threads[0].is_alive():
                    threads[0].join(POLL_S)
                else:
                    time.sleep(POLL_S)
                if not stop.is_set():
                    coordinator.maybe_trigger()
                    coordinator.poll()
                    if coordinator.stopped is not None:  # every task is past the stop barrier
                        stop.set()
                        wake(tasks)
                tick()
        except BaseException:
            stop.set()
            wake(tasks)
            for th in threads:
                th.join()
            raise
        finally:
            close_sources(tasks)
        if errors and self._cancelled:  # the cancel is what the job reports
            for task, exc in errors:
                log.warning("task %s failed while the job was cancelled: %r", task.name, exc)
        elif errors:
            task, exc = errors[0]
            failed = job_failure(task, exc)
            raise failed from failed.__cause__
