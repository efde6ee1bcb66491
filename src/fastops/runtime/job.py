"""The job driver: one job's life, from its sinks to its result.

``Job`` builds the physical plan, picks the restore point (runtime/recovery),
makes the sinks' committed output agree with it, then runs *attempts* on an
executor: when one fails it waits ``restart_delay``, restores the latest
complete checkpoint and starts another, up to ``restart_attempts`` times. It
owns the job's status (``JobStatus``), the metrics sampler and the result.

The driver runs in one thread (``JobClient`` gives it a thread of its own);
the executor calls its ``_tick`` a few times a second from that thread while
an attempt runs: there it samples the tasks' counters (``metrics()`` reads
the samples from any thread) and reports progress. Whatever steers a running
job belongs here too: a controller reads ``metrics()`` in the tick and acts
through the driver. A savepoint or a rescale asks the attempt's coordinator
for a *stop* checkpoint (sources pause at its barrier, so nothing is in
flight when it completes); the attempt ends there. After a savepoint the job
ends; after a rescale the driver plans the job again at the new parallelism
and starts the next attempt from that checkpoint (state moves by key group,
see runtime/rescale), as a restart does from its checkpoint.
"""
from __future__ import annotations

import enum
import os
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

from fastops.core.partitioning import ASSIGNMENTS
from fastops.runtime.checkpoint import CheckpointStats, CheckpointStorage, Manifest
from fastops.runtime.errors import JobCancelled, JobFailed
from fastops.runtime.executors import Attempt, AttemptResult, create_executor
from fastops.runtime.graph import Node, reachable, with_parallelism
from fastops.runtime.metrics import MetricsSampler, TaskMetrics, latency_summary
from fastops.runtime.plan import PhysicalPlan, effective_partitioning
from fastops.runtime.recovery import reconcile_sinks, restore_point
from fastops.runtime.rescale import RescaleRecord, check_rescalable, next_owners, not_rescalable, parallelism_of

PROGRESS_INTERVAL_S = 0.25  # between two calls of a progress callback
DEFAULT_WINDOW_S = 5.0  # of the rates in metrics()


class JobStatus(enum.Enum):
    """Where a job is in its life (PyFlink's names)."""

    CREATED = "CREATED"
    RUNNING = "RUNNING"
    RESTARTING = "RESTARTING"
    CANCELLING = "CANCELLING"
    CANCELED = "CANCELED"
    FAILED = "FAILED"
    FINISHED = "FINISHED"

    def is_globally_terminal_state(self) -> bool:
        """The job ended (finished, failed or was cancelled) and will not run again."""
        return self in (JobStatus.FINISHED, JobStatus.FAILED, JobStatus.CANCELED)


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
    job_id: str = ""
    rescales: list = field(default_factory=list)  # RescaleRecord: every change of parallelism
    scaling: list = field(default_factory=list)  # the autoscaler's decisions (see fastops.autoscale)
    savepoint: str | None = None  # where stop_with_savepoint wrote the job's state
    # source read -> sink: markers, p50_ms, p99_ms, max_ms (see fastops.runtime.metrics.latency_summary)
    latency: dict = field(default_factory=dict)
    # load shedding: mode, drop_fraction, rows_shed, decisions (see fastops.shedding); empty without QoS
    shedding: dict = field(default_factory=dict)

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


@dataclass(frozen=True)
class JobConfig:
    """How a job runs (the StreamEnvironment's settings)."""

    executor: str = "threads"
    executor_options: dict = field(default_factory=dict)  # the executor's own (ray: address, init)
    channel_capacity: int = 8
    max_parallelism: int = 128
    chaining: bool = True
    checkpoint_dir: str | None = None
    checkpoint_interval_s: float | None = 5.0
    checkpoints_retained: int = 3
    exactly_once: bool = True
    restart_attempts: int = 0
    restart_delay_s: float = 0.0
    sample_interval_s: float = 0.25  # between two metrics samples
    key_group_assignment: str = "contiguous"  # how key groups move on a rescale (see assign_key_groups)
    # called with the Job from the driver's tick while it runs (an autoscaler: fastops.autoscale.Controller)
    controller: Callable[[Any], None] | None = None
    # called likewise: a QoS monitor that sets the drop fraction (fastops.shedding.Monitor)
    monitor: Callable[[Any], None] | None = None


@dataclass
class _StopRequest:
    """A savepoint or a rescale asked for by a caller, done by the driver's thread."""

    kind: str  # "savepoint" | "rescale"
    path: str | None = None  # of the savepoint
    parallelism: dict[int, int] = field(default_factory=dict)  # node id -> new parallelism (rescale)
    asked: float = field(default_factory=time.time)
    sent: bool = False  # passed to the coordinator
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None
    record: Any = None

    def fail(self, error: BaseException) -> None:
        self.error = error
        self.done.set()


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


class Job:
    """The driver of one job (see the module docs).

    Building it plans the job, checks it and prepares recovery, raising a
    ``ValueError`` for a job that cannot run; ``run()`` then runs it in the
    calling thread, and ``cancel()`` / ``metrics()`` work from any thread.
    """

    def __init__(self, sinks: list[Node], job_name: str, config: JobConfig, restore: Any = "latest",
                 progress: Callable[[list], Any] | None = None, owns_progress: bool = False):
        self.job_id = uuid.uuid4().hex
        self.job_name = job_name
        self.config = config
        if config.key_group_assignment not in ASSIGNMENTS:
            raise ValueError(f"key_group_assignment must be one of {ASSIGNMENTS}, "
                             f"got {config.key_group_assignment!r}")
        self.sinks = sinks
        self.plan = PhysicalPlan.build(sinks, config.max_parallelism, config.chaining)
        self.storage = (CheckpointStorage(config.checkpoint_dir, config.checkpoints_retained)
                        if config.checkpoint_dir is not None else None)
        self.interval_s = config.checkpoint_interval_s if self.storage is not None else None
        if self.storage is not None:
            self._check_replayable()
        self.skipped: list = []
        self.manifest: Manifest | None = restore_point(self.storage, restore, self.plan, self.skipped)
        if self.manifest is not None and self.manifest.fingerprint != self.plan.fingerprint():
            self._plan_at(self.sinks, self.manifest)  # restored at other parallelisms: key groups move
        self.rescales: list[RescaleRecord] = []
        self._fixed: tuple[Any, dict[int, str]] = (None, {})  # (plan, _fixed_parallelism of it)
        self._request: _StopRequest | None = None
        self._request_lock = threading.Lock()
        self._stopped_runs: list[AttemptResult] = []  # attempts that ended at a rescale
        self._running_at = 0.0
        self._pending_record: tuple[RescaleRecord, float] | None = None  # a rescale, until its attempt runs
        self.savepoint: str | None = None
        self._outputs = [n for n in sinks if n.output is not None]
        for n in self._outputs:
            n.output.reset()
        self.rolled_back: list[str] = reconcile_sinks(sinks, self.manifest)
        self.executor = create_executor(config.executor, config.channel_capacity, config.executor_options)
        self.sampler = MetricsSampler(config.sample_interval_s)
        self.progress = progress
        self._owns_progress = owns_progress
        self._last_progress = 0.0
        self.restarts = 0
        self._checkpoints_before: list[CheckpointStats] = []  # of earlier attempts
        self._cancel = threading.Event()
        self._status_lock = threading.Lock()
        self.status = JobStatus.CREATED
        self.status_history: list[tuple[JobStatus, float]] = [(JobStatus.CREATED, time.time())]
        self._t0 = time.perf_counter()
        attach = getattr(progress, "attach", None)
        if attach is not None:  # a fastops.runtime.progress.Progress bar: sources, restore point
            attach(self.plan, self)

    def _plan_at(self, sinks: list[Node], manifest: Manifest) -> None:
        """Plan ``sinks`` (a graph at new parallelisms) to continue from ``manifest``."""
        plan = PhysicalPlan.build(sinks, self.config.max_parallelism, self.config.chaining)
        parallelism = {plan.uid[n.id]: plan.chain_of[n.id].parallelism for n in reachable(sinks)}
        before = {op["uid"]: op["parallelism"] for op in manifest.graph or []}
        check_rescalable([n for n in reachable(sinks) if before.get(plan.uid[n.id], parallelism[plan.uid[n.id]])
                          != parallelism[plan.uid[n.id]]], plan)
        owners = next_owners(manifest, parallelism, self.config.max_parallelism, self.config.key_group_assignment)
        self.sinks = sinks
        self.plan = PhysicalPlan.build(sinks, self.config.max_parallelism, self.config.chaining,
                                       owners={uid: owners[uid] for uid in owners})

    def _check_replayable(self) -> None:
        mode = "exactly-once" if self.config.exactly_once else "at-least-once"
        for c in self.plan.chains:
            if c.head.is_source and not c.head.source.replayable:
                raise ValueError(
                    f"source {c.head.name!r} cannot replay its input, so checkpoints cannot "
                    f"give {mode} results; use a file, collection, "
                    "pandas or Arrow source, or from_generator(..., deterministic=True)")

    # -- what a progress bar reads ----------------------------------------------------
    @property
    def restored(self) -> Manifest | None:
        """The checkpoint the current attempt started from."""
        return self.manifest

    @property
    def coordinator(self) -> Any:
        """The current attempt's checkpoint coordinator (its completed checkpoints)."""
        return self.executor.coordinator

    # -- status ------------------------------------------------------------------------
    def _set_status(self, status: JobStatus) -> None:
        with self._status_lock:
            if self.status is status:
                return
            if self.status is JobStatus.CANCELLING and status in (JobStatus.RUNNING, JobStatus.RESTARTING):
                return  # a cancel asked for meanwhile wins
            self.status = status
            self.status_history.append((status, time.time()))

    def cancel(self) -> None:
        """Stop the job promptly (from any thread): no sink commits anything more."""
        with self._status_lock:
            if self.status.is_globally_terminal_state() or self._cancel.is_set():
                return
            self._cancel.set()
            self.status = JobStatus.CANCELLING
            self.status_history.append((JobStatus.CANCELLING, time.time()))
        self.executor.cancel()

    # -- running -----------------------------------------------------------------------
    def _tick(self) -> None:
        """Called by the executor from the driver's thread while an attempt runs."""
        request = self._request
        coordinator = self.executor.coordinator
        if request is not None and not request.sent and coordinator is not None:
            request.sent = True
            coordinator.request_stop(request.path)
        controller = self.config.controller
        if controller is not None and request is None and self.status is JobStatus.RUNNING:
            controller(self)
        if self.config.monitor is not None and self.status is JobStatus.RUNNING:
            self.config.monitor(self)
        now = time.perf_counter()
        if self.sampler.due(now):
            self.sampler.sample(self.executor.task_metrics())
        if self.progress is not None and now - self._last_progress >= PROGRESS_INTERVAL_S:
            self._last_progress = now
            self.progress(self.executor.task_metrics())

    def _attempt(self) -> AttemptResult:
        self._set_status(JobStatus.RUNNING)
        attempt = Attempt(self.plan, self.job_name, self.storage, self.interval_s,
                          self.config.exactly_once, self.manifest, on_running=self._on_running)
        try:
            return self.executor.run(attempt, self._tick)
        finally:
            self.sampler.sample(self.executor.task_metrics())  # the attempt's last counters

    def _on_running(self, moved: RescaleRecord | None) -> None:
        """The attempt's tasks are restored and about to run: a rescale is done."""
        self._running_at = time.perf_counter()
        self._record_rescale(moved)

    # -- savepoints and rescaling ---------------------------------------------------------
    def _ask(self, request: _StopRequest, timeout: float | None) -> _StopRequest:
        with self._request_lock:
            if self.status.is_globally_terminal_state() or self._cancel.is_set():
                raise RuntimeError(f"job {self.job_name!r} is {self.status.value}: it cannot take a {request.kind}")
            if self._request is not None:
                raise RuntimeError(f"job {self.job_name!r} is already taking a {self._request.kind}")
            self._request = request
        if not request.done.wait(timeout):
            raise TimeoutError(f"job {self.job_name!r}: the {request.kind} did not complete within {timeout} s "
                               "(it goes on)")
        if request.error is not None:
            raise request.error
        return request

    def _check_sources_replayable(self, what: str) -> None:
        for c in self.plan.chains:
            if c.head.is_source and not c.head.source.replayable:
                raise ValueError(f"source {c.head.name!r} cannot replay its input, so the job cannot "
                                 f"{what}; use a replayable source (see checkpoints)")

    def stop_with_savepoint(self, path: str, timeout: float | None = None) -> str:
        """From any thread: take a savepoint into directory ``path`` (which
        must not hold one already) and stop the job; returns ``path``."""
        path = os.path.abspath(os.fspath(path))
        if os.path.exists(path) and (not os.path.isdir(path) or os.listdir(path)):
            raise ValueError(f"savepoint path {path!r} already exists and is not an empty directory")
        self._check_sources_replayable("resume from a savepoint")
        self._ask(_StopRequest("savepoint", path=path), timeout)
        return path

    def rescale(self, parallelism: int | dict[str, int], timeout: float | None = None) -> RescaleRecord:
        """From any thread: run the job at other parallelisms, keeping its
        state (see the module docs). ``parallelism``: one for every operator
        but the sources, or ``{operator name: parallelism}``. Returns the
        rescale's record once the job runs at the new parallelism."""
        request = self._ask(self._rescale_request(parallelism), timeout)
        return request.record

    def request_rescale(self, parallelism: int | dict[str, int]) -> None:
        """``rescale`` without waiting for it (the driver's own thread, e.g. an
        autoscaler in its tick, must not wait for itself)."""
        request = self._rescale_request(parallelism)
        with self._request_lock:
            if self._request is not None:
                raise RuntimeError(f"job {self.job_name!r} is already taking a {self._request.kind}")
            self._request = request

    def _rescale_request(self, parallelism: int | dict[str, int]) -> _StopRequest:
        """The request for ``rescale(parallelism)``; ValueError for a bad one."""
        nodes = reachable(self.sinks)
        maxp = self.config.max_parallelism
        if isinstance(parallelism, dict):
            by_name: dict[str, list[Node]] = {}
            for n in nodes:
                by_name.setdefault(n.name, []).append(n)
            targets = {}
            for name, p in parallelism.items():
                if name not in by_name:
                    raise ValueError(f"rescale: no operator named {name!r}; the job has "
                                     f"{sorted(by_name)}")
                for n in by_name[name]:
                    targets[n.id] = p
        else:  # operators that cannot run in parallel keep their parallelism (as Flink's windowAll)
            targets = {n.id: parallelism for n in nodes
                       if not n.is_source and not_rescalable(n, self.plan) is None}
        for p in set(targets.values()):
            if isinstance(p, bool) or not isinstance(p, int) or not 1 <= p <= maxp:
                raise ValueError(f"rescale: parallelism must be an int in [1, max_parallelism={maxp}], got {p!r}")
        for n in nodes:
            p_now = self.plan.chain_of[n.id].parallelism
            if n.is_source and targets.get(n.id, p_now) != p_now:
                reposition = getattr(n.source, "rescale_positions", None)
                if reposition is None:
                    raise ValueError(f"rescale: source {n.name!r} cannot change its parallelism")
                reposition([None] * p_now, targets[n.id])  # raises here, in the caller, if it cannot
        self._check_sources_replayable("be rescaled (its sources start again from their positions)")
        current = {n.id: self.plan.chain_of[n.id].parallelism for n in nodes}
        targets = {k: v for k, v in targets.items() if current[k] != v}
        check_rescalable([n for n in nodes if n.id in targets], self.plan)
        return _StopRequest("rescale", parallelism=targets)

    def _after_stop(self, run: AttemptResult) -> bool:
        """The attempt ended at a stop checkpoint: True if the job ends there (a
        savepoint); for a rescale, plan the next attempt and return False."""
        request = self._request
        assert request is not None and run.stopped is not None
        coordinator = self.executor.coordinator
        stopped_at = coordinator.stopped_at if coordinator is not None else time.perf_counter()
        if request.kind == "savepoint":
            self.savepoint = request.path
            self._request = None
            request.done.set()
            return True
        before = parallelism_of(self.plan.describe_graph())
        self.sampler = MetricsSampler(self.config.sample_interval_s)  # the next attempt's tasks are others
        self._stopped_runs.append(run)
        if coordinator is not None:
            self._checkpoints_before += coordinator.stats
        self.manifest = run.stopped
        self._plan_at(with_parallelism(self.sinks, request.parallelism), run.stopped)
        record = RescaleRecord(run.stopped.checkpoint_id, request.asked, before,
                               parallelism_of(self.plan.describe_graph()), state_bytes=run.stopped.state_bytes())
        request.record = record
        self._pending_record = (record, stopped_at)
        return False

    def _record_rescale(self, moved: RescaleRecord | None) -> None:
        """The attempt after a rescale runs: complete its record."""
        pending = self._pending_record
        if pending is None:
            if moved is not None:  # a restore at other parallelisms
                self.rescales.append(moved)
            return
        record, stopped_at = pending
        self._pending_record = None
        if moved is not None:
            for k in ("key_groups_moved", "key_groups", "bytes_moved", "bytes_handed", "moves"):
                setattr(record, k, getattr(moved, k))
        record.pause_ms = 1000.0 * (self._running_at - stopped_at)
        self.rescales.append(record)
        request, self._request = self._request, None
        if request is not None:
            request.done.set()

    def _rows_since(self, checkpoint_id: int | None) -> int:
        """Rows the latest attempt read after checkpoint ``checkpoint_id`` (all of
        them if it took no such checkpoint): what the next attempt reads again."""
        return sum(m.rows_in - m.rows_at_checkpoint.get(checkpoint_id, 0) if checkpoint_id is not None
                   else m.rows_in for m in self.executor.task_metrics() if m.is_source)

    def _prepare_restart(self) -> int:
        """After a failed attempt: the restore point of the next; rows it replays."""
        coordinator = self.executor.coordinator
        if coordinator is not None:
            self._checkpoints_before += coordinator.stats
        self.manifest = self.storage.latest(self.skipped) if self.storage is not None else None
        replayed = self._rows_since(self.manifest.checkpoint_id if self.manifest is not None else None)
        if self.manifest is None:
            for n in self._outputs:
                n.output.reset()
        self.rolled_back += reconcile_sinks(self.sinks, self.manifest)
        return replayed

    def run(self) -> JobResult:
        """Run the job to its end in the calling thread: its result, or
        ``JobFailed`` (after the restarts allowed), or ``JobCancelled``."""
        replayed = 0
        try:
            while True:
                try:
                    run = self._attempt()
                    if run.stopped is None or self._after_stop(run):
                        break
                    continue
                except JobFailed:
                    if self._cancel.is_set():  # failed while cancelling: the cancel is what happened
                        raise JobCancelled(self.job_name) from None
                    if self.restarts >= self.config.restart_attempts:
                        raise
                    self._set_status(JobStatus.RESTARTING)
                    self.restarts += 1
                    if self.config.restart_delay_s:
                        self._cancel.wait(self.config.restart_delay_s)
                    if self._cancel.is_set():
                        raise JobCancelled(self.job_name) from None
                    replayed += self._prepare_restart()
            if self.progress is not None:
                self.progress(run.metrics)
            result = self._result(run, replayed)
        except JobCancelled as exc:
            exc.result = self._result(None, replayed)
            self._set_status(JobStatus.CANCELED)
            self._end_request(exc)
            raise
        except BaseException as exc:
            self._set_status(JobStatus.FAILED)
            self._end_request(exc)
            raise
        finally:
            self.executor.close()
            if self._owns_progress:
                getattr(self.progress, "close", lambda: None)()
        self._set_status(JobStatus.FINISHED)
        self._end_request(None)
        return result

    def _end_request(self, error: BaseException | None) -> None:
        """The job ended with a savepoint or rescale still asked for: it failed."""
        with self._request_lock:
            request, self._request = self._request, None
        if request is not None and not request.done.is_set():
            why = f"it ended ({error!r})" if error is not None else "its input ended first"
            request.fail(RuntimeError(f"job {self.job_name!r}: the {request.kind} was not taken: {why}"))

    def _result(self, run: AttemptResult | None, replayed: int) -> JobResult:
        metrics = run.metrics if run is not None else self.executor.task_metrics()
        coordinator = self.executor.coordinator
        checkpoints = run.checkpoints if run is not None else list(coordinator.stats) if coordinator else []
        outputs = {n.id: n.output.table() for n in self._outputs}
        earlier = [m for r in self._stopped_runs for m in r.metrics]  # attempts that ended at a rescale
        done = earlier + list(metrics)
        duration = sum(r.duration_s for r in self._stopped_runs) + (
            run.duration_s if run is not None else time.perf_counter() - self._t0)
        return JobResult(self.job_name, duration, {m.task: m for m in metrics},
                         sum(m.rows_in for m in done if m.is_source), sum(m.sink_rows for m in done),
                         outputs, checkpoints=self._checkpoints_before + list(checkpoints) if self._stopped_runs
                         else checkpoints, restore_s=run.restore_s if run is not None else 0.0,
                         restarts=self.restarts, rows_replayed=replayed,
                         restored_from=self.manifest.checkpoint_id if self.manifest is not None else None,
                         skipped_checkpoints=self.skipped, rolled_back=self.rolled_back, job_id=self.job_id,
                         rescales=list(self.rescales), savepoint=self.savepoint, scaling=self.scaling(),
                         latency=latency_summary(done), shedding=self.shedding(done))

    # -- metrics -----------------------------------------------------------------------
    def metrics(self, window_s: float = DEFAULT_WINDOW_S) -> dict[str, Any]:
        """A plain snapshot (dicts, lists, numbers, strings) of the job's state,
        totals and rates over the last ``window_s`` seconds; safe from any thread.

        ``job``: id, name, status (and its history), restarts, rows in / out
        and their rates. ``tasks``: per parallel task (see
        ``MetricsSampler.task_rates``). ``operators``: per logical operator
        in plan order, its inputs and its tasks' rates summed (rows) or
        averaged (busy / idle / backpressured ms per s; chained operators
        share their task's). ``checkpoints``: completed, the latest, the
        restore point.
        """
        tasks = self.sampler.task_rates(window_s)
        with self._status_lock:
            status, history = self.status, list(self.status_history)
        sources = [t for t in tasks if t["is_source"]]
        job = {
            "id": self.job_id, "name": self.job_name, "status": status.value,
            "status_history": [[s.value, t] for s, t in history],
            "uptime_s": time.perf_counter() - self._t0, "restarts": self.restarts,
            "executor": self.config.executor,
            "window_s": tasks[0]["window_s"] if tasks else 0.0,
            "rows_in": sum(t["rows_in"] for t in sources),
            "rows_out": sum(t["sink_rows"] for t in tasks),
            "rows_in_per_s": sum(t["rows_in_per_s"] for t in sources),
            "rows_out_per_s": sum(t["sink_rows_per_s"] for t in tasks),
            "late_rows": sum(t["late_rows"] for t in tasks),  # found late by windows and joins
            "shed_rows": sum(t["shed_rows"] for t in tasks),  # dropped by load shedding
            "latency": self.sampler.latency(window_s),  # source read -> sink, over the window
        }
        return {"job": job, "checkpoints": self._checkpoint_metrics(), "operators": self._operator_metrics(tasks),
                "tasks": tasks, "rescales": [r.as_dict() for r in self.rescales], "scaling": self.scaling(),
                "shedding": self.shedding(self.executor.task_metrics())}

    def shedding(self, tasks: list[TaskMetrics]) -> dict[str, Any]:
        """The QoS monitor's state and the rows ``tasks`` shed, by task (empty without QoS)."""
        state = getattr(self.config.monitor, "state", None)
        if state is None:
            return {}
        out = state()
        shed: dict[str, int] = {}
        for m in tasks:
            if m.shed_rows:
                shed[m.task] = shed.get(m.task, 0) + m.shed_rows
        out.update(rows_offered=sum(m.rows_in for m in tasks if m.is_source), rows_shed=sum(shed.values()),
                   rows_shed_by_task=shed)
        return out

    def scaling(self) -> list[dict[str, Any]]:
        """The autoscaler's decisions so far (none without one)."""
        return list(getattr(self.config.controller, "decisions", []))

    def _checkpoint_metrics(self) -> dict[str, Any]:
        coordinator = self.executor.coordinator
        done = self._checkpoints_before + (list(coordinator.stats) if coordinator is not None else [])
        last = done[-1] if done else None
        return {
            "enabled": self.storage is not None, "interval_s": self.interval_s,
            "completed": len(done),
            "in_progress": coordinator.pending if coordinator is not None else None,
            "restored_from": self.manifest.checkpoint_id if self.manifest is not None else None,
            "last": None if last is None else {
                "id": last.checkpoint_id, "duration_ms": 1000.0 * last.duration_s,
                "alignment_ms": 1000.0 * last.alignment_s, "size_bytes": last.state_bytes},
        }

    def _fixed_parallelism(self) -> dict[int, str]:
        """Why each operator of the current plan that cannot change its parallelism cannot, by node id."""
        plan = self.plan
        if self._fixed[0] is not plan:
            self._fixed = (plan, {n.id: why for c in plan.chains for n in c.nodes
                                  if (why := not_rescalable(n, plan)) is not None})
        return self._fixed[1]

    def _operator_metrics(self, tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        fixed = self._fixed_parallelism()
        by_vertex: dict[int, list[dict[str, Any]]] = {}
        for t in tasks:
            by_vertex.setdefault(t["vertex"], []).append(t)
        out = []
        for c in self.plan.chains:
            names = [n.name for n in c.nodes]  # (samples of an attempt before a rescale are of other tasks)
            mine = [t for t in by_vertex.get(c.index, [])
                    if t["operators"] == names and t["parallelism"] == c.parallelism]
            offset = 1 if c.head.is_source else 0
            for k, node in enumerate(c.nodes):
                if node.is_source:
                    rows_in = rows_out = sum(t["rows_in"] for t in mine)
                    rate_in = rate_out = sum(t["rows_in_per_s"] for t in mine)
                else:
                    j = k - offset
                    rows_in = sum(t["operator_rows"][j] for t in mine)
                    rows_out = sum(t["operator_rows"][j + 1] for t in mine)
                    rate_in = sum(t["operator_rows_per_s"][j] for t in mine)
                    rate_out = sum(t["operator_rows_per_s"][j + 1] for t in mine)
                busy = sum(t["busy_ms_per_s"] for t in mine) / 1000.0
                backlogs = [t["backlog"] for t in mine if node.is_source and t["backlog"] is not None]
                growth = [t["backlog_growth_per_s"] for t in mine
                          if node.is_source and t["backlog_growth_per_s"] is not None]
                wms = [t["watermark"] for t in mine if t["watermark"] is not None]
                lags = [t["watermark_lag_ms"] for t in mine if t["watermark_lag_ms"] is not None]
                out.append({
                    "id": node.id, "name": node.name, "vertex": c.index, "position": k,
                    "parallelism": c.parallelism, "is_source": node.is_source, "is_sink": node.is_sink,
                    "fixed_parallelism": fixed.get(node.id),  # why it cannot be rescaled, if it cannot
                    "inputs": [{"id": e.upstream.id, "name": e.upstream.name,
                                "partitioning": effective_partitioning(e, node), "keys": list(e.keys), "tag": e.tag}
                               for e in node.inputs],
                    "rows_in": rows_in, "rows_out": rows_out,
                    "rows_in_per_s": rate_in, "rows_out_per_s": rate_out,
                    "busy_ms_per_s": _mean([t["busy_ms_per_s"] for t in mine]),
                    "max_busy_ms_per_s": max((t["busy_ms_per_s"] for t in mine), default=0.0),
                    "idle_ms_per_s": _mean([t["idle_ms_per_s"] for t in mine]),
                    "backpressured_ms_per_s": _mean([t["backpressured_ms_per_s"] for t in mine]),
                    "true_processing_rate": rate_in / busy if busy > 0 else None,
                    "watermark": min(wms) if wms else None,
                    "watermark_lag_ms": max(lags) if lags else None,
                    "backlog": sum(backlogs) if backlogs else None,  # sources: rows ready, not read
                    "backlog_growth_per_s": sum(growth) if growth else None,
                })
        return out
