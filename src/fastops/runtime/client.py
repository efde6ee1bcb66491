"""``JobClient``: a running job, seen from the program that started it
(PyFlink's names). ``StreamEnvironment.execute_async()`` returns one."""
from __future__ import annotations

import threading
from typing import Any, Callable

from fastops.core.durations import parse_duration
from fastops.runtime.errors import JobCancelled, JobFailed
from fastops.runtime.job import DEFAULT_WINDOW_S, Job, JobResult, JobStatus


class JobClient:
    """Watches and controls a job that runs in a thread of its own.

    ``wait()`` (or ``get_job_execution_result()``) blocks until the job ends
    and returns its ``JobResult``, or raises what ended it: ``JobFailed``
    (with the user's exception as its cause), ``JobCancelled`` after
    ``cancel()``. ``metrics()`` and ``get_job_status()`` can be called at any
    time, from any thread. The job's thread is a daemon: wait for the job (or
    cancel it) before the program ends.
    """

    def __init__(self, job: Job, on_finished: Callable[[JobResult], Any] | None = None):
        self._job = job
        self._on_finished = on_finished
        self._done = threading.Event()
        self._result: JobResult | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name=f"fastops job {job.job_name!r}", daemon=True)
        self.ui_url: str | None = None  # where the job's metrics are served (execute(ui=...))

    def start(self) -> JobClient:
        self._thread.start()
        return self

    def _main(self) -> None:
        try:
            result = self._job.run()
            if self._on_finished is not None:
                self._on_finished(result)
            self._result = result
        except BaseException as exc:
            self._error = exc
        finally:
            self._done.set()

    # -- PyFlink's JobClient ----------------------------------------------------------
    def get_job_id(self) -> str:
        """The job's id: 32 hex digits."""
        return self._job.job_id

    def get_job_status(self) -> JobStatus:
        return self._job.status

    def cancel(self) -> None:
        """Stop the job promptly. Its sinks commit nothing more: output of
        checkpoints completed before stays, the rest is dropped (as after a
        failure), so a later run restored from the latest checkpoint writes
        every row once. ``wait()`` then raises ``JobCancelled``. A source
        blocked inside ``read()`` stops when ``read()`` returns."""
        self._job.cancel()

    def get_job_execution_result(self, timeout: float | None = None) -> JobResult:
        """Wait up to ``timeout`` seconds (None: until the job ends) and return
        its result; ``TimeoutError`` if it is still running then (it keeps
        running). Ctrl-C while waiting cancels the job."""
        try:
            ended = self._done.wait(timeout)
        except KeyboardInterrupt:
            self.cancel()
            self._done.wait()
            raise
        if not ended:
            raise TimeoutError(f"job {self._job.job_name!r} still {self._job.status.value} after {timeout} s")
        if self._error is not None:
            if isinstance(self._error, (JobFailed, JobCancelled)):
                # raised here, at the caller's line: the cause holds the user's frames
                raise self._error.with_traceback(None)
            raise self._error
        assert self._result is not None
        return self._result

    def stop_with_savepoint(self, path: str, timeout: float | None = None) -> str:
        """Take a savepoint into directory ``path`` and stop the job; returns
        the savepoint's path. Every row read before it reaches the sinks,
        which commit it; nothing after. ``wait()`` then returns the result
        (``JobResult.savepoint``); ``execute(restore=path)`` resumes the job
        from it, at the same or other parallelisms. ``ValueError`` if
        ``path`` holds something, ``RuntimeError`` if the job ends first."""
        return self._job.stop_with_savepoint(path, timeout)

    # -- fastops' own -----------------------------------------------------------------
    def rescale(self, parallelism: int | dict[str, int], timeout: float | None = None) -> Any:
        """Change the job's parallelism while it runs, keeping its state:
        ``rescale(4)`` sets every operator but the sources to 4,
        ``rescale({"window(Tumbling)": 3})`` the named operators. A stop
        checkpoint aligns the tasks, the state of the key groups that change
        owner moves, and the job goes on from there without reading its
        input again. Returns the rescale's record (also in ``metrics()`` and
        ``JobResult.rescales``) once the job runs at the new parallelism.
        ``ValueError`` for a bad parallelism or an unknown operator (the job
        is not touched)."""
        return self._job.rescale(parallelism, timeout)

    def wait(self, timeout: float | None = None) -> JobResult:
        """The same as ``get_job_execution_result``."""
        return self.get_job_execution_result(timeout)

    def done(self) -> bool:
        """Whether the job ended (finished, failed or cancelled)."""
        return self._done.is_set()

    def metrics(self, window: Any = None) -> dict[str, Any]:
        """A plain snapshot of the running job: totals, and rates over the last
        ``window`` (a duration: ``"5s"``, ms, a timedelta; default 5 s). See
        ``fastops.runtime.job.Job.metrics`` for its fields."""
        window_s = DEFAULT_WINDOW_S if window is None else parse_duration(window) / 1000.0
        if window_s <= 0:
            raise ValueError(f"window must be a duration > 0, got {window!r}")
        return self._job.metrics(window_s)

    def __repr__(self) -> str:
        return f"JobClient({self._job.job_name!r}, id={self.get_job_id()}, status={self.get_job_status().value})"
