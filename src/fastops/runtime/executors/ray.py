"""Ray: the tasks of the physical plan in Ray actors.

One actor per node (the default; ``actors="task"``: one per task). The
tasks go round robin over the cluster's nodes, and an actor runs the tasks
of its node, each in a thread of its own: exchanges between tasks of one
node stay in memory, as with the threads executor, and only those between
nodes go through Ray (as Quokka's one task manager per node). A node is
also Ray's unit of failure: a dead node takes its tasks, whatever actor
holds them. An actor builds its tasks from the plan
(``PhysicalPlan.instantiate(only=keys, ...)``); the driver keeps the
checkpoint coordinator and talks to the actors:

- **Data** between actors: a sending task's ``RayChannel`` pushes blocks
  of batches and control items to the receiving actor (``push``), up to
  ``BLOCK_BYTES``; Ray moves them through its object store. A push returns
  once the receiving task has taken the block: at most ``capacity`` pushes
  per channel are outstanding, the same credits as a local channel, and a
  sender without credit waits (counted as backpressure). Watermarks,
  barriers, latency markers and end of stream travel in band, numbered, and
  the receiver puts every channel back in order.
- **Checkpoints**: the coordinator triggers the source actors, the actors
  hand their acknowledgements (with their state) to the driver's next
  ``poll``, and the driver writes the checkpoint and commits the sinks
  through their actors. A failure or a dead actor ends the attempt; the job
  driver restores every task from the last complete checkpoint (global
  rollback, as Flink does).
- **Metrics**: every poll brings each task's counters; the driver keeps a
  ``TaskMetrics`` mirror per task, so sampling, progress, autoscaling and
  ``JobClient`` work as with local threads.
- **Results**: a collect sink's committed rows come back to the driver.

The actors of an attempt that failed run the tasks of the next one (a new
process costs seconds); every actor is killed when the job ends.
"""
from __future__ import annotations

import threading
import time
import traceback
from collections import deque
from typing import Any, Callable

import pyarrow as pa

from fastops.connectors.base import is_transactional
from fastops.core.messages import CheckpointBarrier, EndOfStream
from fastops.runtime.channels import Cancelled, ChannelClosed, InputGate
from fastops.runtime.checkpoint import Coordinator
from fastops.runtime.errors import JobCancelled, JobFailed, user_traceback
from fastops.runtime.executors.base import Attempt, AttemptResult
from fastops.runtime.metrics import TaskMetrics
from fastops.runtime.plan import PhysicalPlan
from fastops.runtime.rescale import StateAssignment
from fastops.runtime.tasks import OperatorError, SourceTask, Task

try:  # an optional dependency: pip install "fastops[ray]"
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
except ImportError:  # pragma: no cover - reported when the executor is created
    ray = None  # type: ignore[assignment]  # no Ray: require_ray() says how to get it

BLOCK_BYTES = 4 << 20  # a pushed block: large enough that a call's cost is small beside it
POLL_S = 0.1  # how often the driver polls the actors, checks checkpoints and ticks
WAIT_S = 0.1  # a blocked wait checks for a stop this often
LOCAL_OBJECT_STORE = 256 * 1024 * 1024  # bytes: the object store of a Ray the executor starts itself


def require_ray() -> Any:
    if ray is None:
        raise ImportError('executor="ray" needs Ray: pip install "fastops[ray]"')
    return ray


class RemoteFailure(Exception):
    """An exception raised in a task on a Ray actor; its message carries the
    remote traceback, the user's frames first."""


# -- in the actor ------------------------------------------------------------------------------

class _Acks:
    """The coordinator as a task in an actor sees it: what it reports waits
    for the driver's next poll."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: list[tuple] = []

    def ack(self, task_key: str, checkpoint_id: int, snapshot: Any) -> None:
        with self._lock:
            self._items.append(("ack", task_key, checkpoint_id, snapshot))

    def task_finished(self, task_key: str, handles: dict) -> None:
        with self._lock:
            self._items.append(("finished", task_key, handles))

    def take(self) -> list[tuple]:
        with self._lock:
            items, self._items = self._items, []
        return items


class _Inbox(InputGate):
    """A task's input gate in an actor: pushed items go into its channels in
    their senders' order, and a push of a block returns once the task took it."""

    def __init__(self, cancel: threading.Event):
        super().__init__(cancel)
        self.next_seq: dict[int, int] = {}
        self.held: dict[int, dict[int, Any]] = {}
        self.queued: dict[int, int] = {}  # blocks put into each channel
        self.taken: dict[int, int] = {}  # blocks the task took from each channel
        self.numbers: dict[tuple[int, int], int] = {}  # (channel, seq) -> the block's number on it
        self.took = threading.Condition(self.lock)

    def put(self, index: int, seq: int, items: list) -> None:
        """Queue ``items``, the ``seq``-th block sent on channel ``index``,
        once the blocks before it are; its batches are numbered on the channel."""
        with self.lock:
            held = self.held.setdefault(index, {})
            held[seq] = items
            nxt = self.next_seq.get(index, 0)
            while nxt in held:
                block = held.pop(nxt)
                for it in block:
                    if isinstance(it, pa.RecordBatch):
                        self.numbers[(index, nxt)] = self.queued.get(index, 0)  # the block's last batch
                        self.queued[index] = self.numbers[(index, nxt)] + 1
                    self.channels[index].queue.append(it)
                nxt += 1
            self.next_seq[index] = nxt
            self.data_ready.notify_all()
            self.took.notify_all()

    def wait_taken(self, index: int, seq: int) -> None:
        """Until the task took the batches of block ``seq`` of channel ``index``."""
        with self.lock:
            while True:
                number = self.numbers.get((index, seq))
                if number is not None and self.taken.get(index, 0) > number:
                    del self.numbers[(index, seq)]
                    return
                if self.cancel.is_set():
                    raise Cancelled()
                self.took.wait(WAIT_S)

    def _take(self, i: int) -> Any:
        item = super()._take(i)  # (a credit back to a sender in the same actor)
        if isinstance(item, pa.RecordBatch):
            self.taken[i] = self.taken.get(i, 0) + 1
            self.took.notify_all()
        return item


class TaskActor:
    """Runs a group of the plan's tasks, each in a thread of its own (see the
    module docs); created by ``RayExecutor``. Channels between two tasks of
    the group stay in memory; the others go through Ray."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        """Ready for tasks: an actor of an attempt that ended runs some of the next."""
        self.tasks: dict[str, Task] = {}
        self.inboxes: dict[str, _Inbox] = {}
        self.outputs: dict[str, dict[int, Any]] = {}
        self.error: dict | None = None
        self.stop = threading.Event()
        self.acks = _Acks()
        self._latencies_sent: dict[str, int] = {}
        self._threads: list[threading.Thread] = []

    def node(self) -> str:
        return str(ray.get_runtime_context().get_node_id())

    def setup(self, plan: PhysicalPlan, keys: list[str], positions: dict | None, restore: Any,
              peers: dict[str, Any], capacity: int, exactly_once: bool) -> dict[str, list[int]]:
        """Build, open and restore (or start afresh) the tasks ``keys``; by
        task, the positions of its transactional sinks in its chain."""
        self.cancel()  # the tasks of an earlier attempt, if any, end first
        for thread in self._threads:
            thread.join()
        self._reset()
        stop = self.stop

        def remote(receiver: str, index: int, local: Any) -> RayChannel:
            return RayChannel(peers[receiver], receiver, index, capacity, local.input_index, stop)

        tasks = plan.instantiate(stop, capacity, positions, only=set(keys), remote=remote, gate=_Inbox)
        out = {}
        for task in tasks:
            self.tasks[task.key] = task
            gate = getattr(task, "gate", None)
            if isinstance(gate, _Inbox):
                self.inboxes[task.key] = gate
            task.coordinator = self.acks
            task.exactly_once = exactly_once
            task.metrics.started = time.perf_counter()
            task.open()
            if restore is not None:
                chain_index, index = map(int, task.key.split("/"))
                StateAssignment(plan, restore).restore(task, plan.chains[chain_index], index)
            else:
                task.start_fresh()
            ops = task.chain.operators
            self.outputs[task.key] = {i: op.result for i, op in enumerate(ops) if hasattr(op, "result")}
            out[task.key] = [i for i, op in enumerate(ops) if is_transactional(op)]
        return out

    def start(self) -> None:
        """Run every task in a thread of its own."""
        self._threads = [threading.Thread(target=self._run, args=(t,), name=t.name, daemon=True)
                         for t in self.tasks.values()]
        for thread in self._threads:
            thread.start()

    def _run(self, task: Task) -> None:
        c0 = time.thread_time()
        task.metrics.started = time.perf_counter()
        try:
            task.run()
        except Cancelled:
            pass
        except BaseException as exc:  # reported to the driver at its next poll; the other tasks stop
            if self.error is None:
                self.error = describe_failure(task, exc)
            self.cancel()
        finally:
            task.metrics.cpu_s += time.thread_time() - c0
            if isinstance(task, SourceTask):
                task.close_reader()

    def push(self, key: str, index: int, seq: int, items: list) -> None:
        """Block ``seq`` of input channel ``index`` of task ``key`` (batches and
        control items, in order); returns once the task took its batches."""
        inbox = self.inboxes[key]
        inbox.put(index, seq, items)
        if any(isinstance(it, pa.RecordBatch) for it in items):
            inbox.wait_taken(index, seq)

    def trigger(self, key: str, checkpoint_id: int, stop: bool) -> None:
        task = self.tasks[key]
        assert isinstance(task, SourceTask)
        task.trigger(checkpoint_id, stop)

    def commit(self, key: str, op_index: int, checkpoint_id: int) -> None:
        self.tasks[key].chain.operators[op_index].commit(checkpoint_id)  # type: ignore[attr-defined]

    def finished(self, key: str, op_index: int) -> None:
        self.tasks[key].chain.operators[op_index].finished()  # type: ignore[attr-defined]

    def poll(self) -> dict:
        """What happened since the last poll: acknowledgements, the tasks'
        counters, committed collect rows, and a failure if there was one."""
        done = bool(self._threads) and not any(t.is_alive() for t in self._threads)
        outputs: dict[str, dict] = {}
        for key, results in self.outputs.items():
            for i, result in results.items():
                with result._lock:
                    committed, result.committed = result.committed, []
                if committed:
                    outputs.setdefault(key, {})[i] = committed
        return {"acks": self.acks.take(), "error": self.error, "done": done, "outputs": outputs,
                "metrics": {key: self._metrics(key, t.metrics) for key, t in self.tasks.items()}}

    def _metrics(self, key: str, m: TaskMetrics) -> dict:
        now = time.perf_counter()
        skip = {"backlog", "latencies", "started", "finished", "idle_since", "backpressured_since", "operator_rows"}
        out = {k: v for k, v in vars(m).items() if k not in skip}
        out["operator_rows"] = list(m.operator_rows)
        out["elapsed_s"] = m.elapsed_s
        out["finished_ago"] = None if m.finished is None else now - m.finished
        out["idle_for"] = now - m.idle_since if m.idle_since else 0.0
        out["backpressured_for"] = now - m.backpressured_since if m.backpressured_since else 0.0
        out["backlog_now"] = m.backlog() if m.backlog is not None else None
        latencies = list(m.latencies)
        sent = min(self._latencies_sent.get(key, 0), len(latencies))
        out["latencies"] = latencies[sent:]
        self._latencies_sent[key] = len(latencies)
        return out

    def cancel(self) -> None:
        """End the tasks: their blocked waits and the pushes waiting on them give up."""
        self.stop.set()
        for inbox in self.inboxes.values():
            inbox.wake()
            with inbox.lock:
                inbox.took.notify_all()


def describe_failure(task: Task, exc: BaseException) -> dict:
    """A task's failure as plain data for the driver (tracebacks do not pickle)."""
    cause = user_traceback(exc.cause if isinstance(exc, OperatorError) else exc)  # the user's frames first
    text = "".join(traceback.format_exception(type(cause), cause, cause.__traceback__))
    return {"operator": exc.operator if isinstance(exc, OperatorError) else task.name, "task": task.name,
            "batch": exc.batch if isinstance(exc, OperatorError) else None,
            "type": type(cause).__name__, "message": str(cause), "traceback": text}


# -- the sending end ---------------------------------------------------------------------------

class RayChannel:
    """The sending end of a channel into a task on another actor (see the module docs).

    Items gather into a block, pushed when it holds ``BLOCK_BYTES`` of
    batches, at a barrier or the end of the stream, and whenever the sending
    task runs out of input (``flush``); a block takes one credit."""

    def __init__(self, actor: Any, receiver: str, index: int, capacity: int, input_index: int,
                 cancel: threading.Event):
        self.actor = actor
        self.receiver = receiver  # the receiving task's key
        self.index = index
        self.capacity = capacity
        self.input_index = input_index
        self.cancel = cancel
        self.seq = 0
        self.inflight: deque = deque()  # pushed blocks not yet taken: the credits in use
        self.pending: list = []
        self.pending_bytes = 0
        self.closed = False

    def _credit(self, wait: bool) -> float | None:
        """Wait for a credit; the seconds waited, or None (no wait allowed and none free)."""
        t0 = time.perf_counter()
        while len(self.inflight) >= self.capacity:
            ready, _ = ray.wait([self.inflight[0]], timeout=WAIT_S if wait else 0)
            if ready:
                ray.get(self.inflight.popleft())  # raises if the receiver died
            elif not wait:
                return None
            elif self.cancel.is_set():
                raise Cancelled()
        return time.perf_counter() - t0

    def flush(self) -> float:
        """Push what gathered; the seconds waited for a credit."""
        if not self.pending:
            return 0.0
        waited = self._credit(True) or 0.0
        self.inflight.append(self.actor.push.remote(self.receiver, self.index, self.seq, self.pending))
        self.seq += 1
        self.pending, self.pending_bytes = [], 0
        return waited

    def _full(self, item: Any) -> bool:
        return (self.pending_bytes >= BLOCK_BYTES or isinstance(item, (CheckpointBarrier, EndOfStream)))

    def send(self, item: Any) -> float:
        if self.closed:
            raise ChannelClosed(f"channel {self.index} into a task was closed by its sender")
        self.pending.append(item)
        if isinstance(item, pa.RecordBatch):
            self.pending_bytes += item.nbytes
        return self.flush() if self._full(item) else 0.0

    def try_send(self, item: Any) -> bool:
        size = item.nbytes if isinstance(item, pa.RecordBatch) else 0
        would_push = self.pending_bytes + size >= BLOCK_BYTES or isinstance(item, (CheckpointBarrier, EndOfStream))
        if would_push and len(self.inflight) >= self.capacity and self._credit(False) is None:
            return False
        self.send(item)
        return True

    def receive(self, timeout: float | None = None) -> Any:
        raise TypeError("the sending end of a Ray channel does not receive")

    def close(self) -> None:
        self.flush()
        self.closed = True


# -- in the driver -----------------------------------------------------------------------------

class _RemoteSource:
    def __init__(self, actor: Any, key: str):
        self.actor = actor
        self.key = key

    def trigger(self, checkpoint_id: int, stop: bool) -> None:
        self.actor.trigger.remote(self.key, checkpoint_id, stop)


class _RemoteSink:
    def __init__(self, actor: Any, key: str, op_index: int):
        self.actor = actor
        self.key = key
        self.op_index = op_index

    def commit(self, checkpoint_id: int) -> None:
        ray.get(self.actor.commit.remote(self.key, self.op_index, checkpoint_id))

    def finished(self) -> None:
        ray.get(self.actor.finished.remote(self.key, self.op_index))


def _mirror(m: TaskMetrics, d: dict) -> None:
    """Copy an actor's counters into the driver's ``TaskMetrics`` of its task."""
    now = time.perf_counter()
    for k, v in d.items():
        if k in ("operator_rows", "elapsed_s", "finished_ago", "idle_for", "backpressured_for", "backlog_now",
                 "latencies", "location", "task"):
            continue
        setattr(m, k, v)
    m.operator_rows[:] = d["operator_rows"]
    m.finished = None if d["finished_ago"] is None else now - d["finished_ago"]
    m.started = (m.finished if m.finished is not None else now) - d["elapsed_s"]
    m.idle_since = now - d["idle_for"] if d["idle_for"] else 0.0
    m.backpressured_since = now - d["backpressured_for"] if d["backpressured_for"] else 0.0
    backlog = d["backlog_now"]
    m.backlog = None if backlog is None else (lambda: backlog)
    m.latencies.extend(tuple(x) for x in d["latencies"])


class RayExecutor:
    """Runs attempts on Ray actors (see the module docs); ``address``: of a
    running Ray cluster (None: this machine's, started if none runs);
    ``init``: more ``ray.init`` arguments; ``actors``: one per node (its
    tasks share it, in threads) or one per task."""

    name = "ray"

    def __init__(self, channel_capacity: int = 8, address: str | None = None, init: dict | None = None,
                 actors: str = "node"):
        require_ray()
        if actors not in ("node", "task"):
            raise ValueError(f"ray actors must be 'node' (one per node) or 'task' (one per task), got {actors!r}")
        self.actors = actors
        self.channel_capacity = channel_capacity
        self.address = address
        self.init = dict(init or {})
        self._metrics: list[TaskMetrics] = []
        self._coordinator: Coordinator | None = None
        self._actors: list[Any] = []
        self._pool: list[tuple[Any, int]] = []  # the last attempt's actors (and their threads), for the next
        self._cancelled = False
        self.placement: dict[str, str] = {}  # task name -> Ray node id of its actor
        self._connect()  # here, in the caller's thread (where the job is submitted): Ray starts or is found

    @property
    def coordinator(self) -> Coordinator | None:
        return self._coordinator

    def task_metrics(self) -> list[TaskMetrics]:
        return list(self._metrics)

    def cancel(self) -> None:
        self._cancelled = True
        for actor in list(self._actors):
            actor.cancel.remote()

    def _connect(self) -> None:
        if ray.is_initialized():
            return
        options: dict[str, Any] = {"include_dashboard": False, "ignore_reinit_error": True,
                                   "log_to_driver": True, "configure_logging": False}
        if self.address is None:
            options["object_store_memory"] = LOCAL_OBJECT_STORE
        else:
            options["address"] = self.address
        options.update(self.init)
        ray.init(**options)

    def _groups(self, plan: PhysicalPlan) -> list[list[str]]:
        """The task keys of each actor: round robin over the cluster's nodes,
        one actor per node (``actors="node"``) or per task."""
        keys = [f"{c.index}/{i}" for c in plan.chains for i in range(c.parallelism)]
        if self.actors == "task":
            return [[k] for k in keys]
        nodes = max(1, sum(1 for n in ray.nodes() if n.get("Alive")))
        return [g for g in ([k for j, k in enumerate(keys) if j % nodes == n] for n in range(nodes)) if g]

    def _start_actors(self, plan: PhysicalPlan, groups: list[list[str]]) -> list[Any]:
        """An actor per group: the live ones of the last attempt first (a new
        process costs seconds), new ones for the rest, round robin over the
        nodes. A push waits in a thread of the receiving actor until its
        block is taken, so an actor needs a thread per credit of each input
        channel of its tasks."""
        cls = ray.remote(TaskActor)
        chain = {f"{c.index}/{i}": c for c in plan.chains for i in range(c.parallelism)}
        needed = [self.channel_capacity * sum(plan.chain_of[e.upstream.id].parallelism
                                              for k in g for e in chain[k].head.inputs) + 16 for g in groups]
        live = []
        for actor, size in self._pool:
            if size >= max(needed) and self._alive(actor):
                live.append((actor, size))
            else:
                ray.kill(actor, no_restart=True)
        nodes = sorted(n["NodeID"] for n in ray.nodes() if n.get("Alive"))
        pool: list[tuple[Any, int]] = []
        for _ in groups:
            if live:
                actor, size = live.pop()
            else:  # on that node (alive now; a soft affinity let Ray put every actor on one node)
                node = nodes[len(pool) % len(nodes)] if nodes else None
                where = NodeAffinitySchedulingStrategy(node, soft=False) if node is not None else "SPREAD"
                size = max(needed)
                actor = cls.options(num_cpus=0, max_concurrency=size, scheduling_strategy=where).remote()
            pool.append((actor, size))
        for actor, _ in live:
            ray.kill(actor, no_restart=True)
        self._pool = pool
        return [actor for actor, _ in pool]

    @staticmethod
    def _alive(actor: Any) -> bool:
        try:
            ray.get(actor.node.remote(), timeout=5)
            return True
        except Exception:  # dead, or its node is: a new actor takes its place
            return False

    def close(self) -> None:
        """The job ended: no actor of it is left."""
        for actor, _ in self._pool:
            ray.kill(actor, no_restart=True)
        self._pool = []

    def run(self, attempt: Attempt, tick: Callable[[], None]) -> AttemptResult:
        if self._cancelled:
            raise JobCancelled(attempt.job_name)
        plan, restore, storage = attempt.plan, attempt.restore, attempt.storage
        t_restore = time.perf_counter()
        assignment = StateAssignment(plan, restore) if restore is not None else None
        positions = assignment.positions() if assignment is not None else None
        self._metrics = []  # the driver's mirror of every task's counters
        for c in plan.chains:
            for i in range(c.parallelism):
                self._metrics.append(TaskMetrics(
                    task=f"{c.name()}[{i + 1}/{c.parallelism}]", vertex=c.index, subtask=i,
                    parallelism=c.parallelism, operators=tuple(n.name for n in c.nodes),
                    is_source=c.head.is_source,
                    operator_rows=[0] * (len(c.nodes) - (1 if c.head.is_source else 0) + 1)))
        groups = self._groups(plan)
        actors = self._actors = self._start_actors(plan, groups)
        try:
            result = self._run(attempt, plan, restore, storage, positions, assignment, groups, actors, tick,
                               t_restore)
        except ray.exceptions.RayError as exc:  # an actor died mid-commit or mid-drain: restart the attempt
            for actor in actors:
                actor.cancel.remote()
            if self._cancelled:
                raise JobCancelled(attempt.job_name) from None
            raise self._failure(exc, None) from None
        except BaseException:
            for actor in actors:  # their tasks end; the actors may serve the next attempt
                actor.cancel.remote()
            raise
        finally:
            self._actors = []
        return result

    def _run(self, attempt: Attempt, plan: PhysicalPlan, restore: Any, storage: Any, positions: Any,
             assignment: Any, groups: list[list[str]], actors: list[Any], tick: Callable[[], None],
             t_restore: float) -> AttemptResult:
        keys = [f"{c.index}/{i}" for c in plan.chains for i in range(c.parallelism)]
        by_key = dict(zip(keys, self._metrics))
        where = {k: actor for g, actor in zip(groups, actors) for k in g}
        try:
            shared = ray.put(plan)  # serialised once for every actor
            transactional: dict[str, list[int]] = {}
            for found in ray.get([a.setup.remote(shared, g, positions, restore, where, self.channel_capacity,
                                                 attempt.exactly_once) for g, a in zip(groups, actors)]):
                transactional.update(found)
            nodes = ray.get([a.node.remote() for a in actors])
        except Exception as exc:
            raise self._failure(exc, None) from None
        for g, node in zip(groups, nodes):
            for k in g:
                by_key[k].location = node
        self.placement = {by_key[k].task: by_key[k].location for k in keys}
        sources = [_RemoteSource(where[k], k) for k, m in by_key.items() if m.is_source]
        sinks = [_RemoteSink(where[k], k, i) for k, found in transactional.items() for i in found]
        first_id = max(storage.last_id() if storage else 0, restore.checkpoint_id if restore else 0) + 1
        coordinator = Coordinator(storage, attempt.interval_s, plan.checkpoint_meta(), first_id, sinks, sources,
                                  set(keys))
        self._coordinator = coordinator
        restore_s = time.perf_counter() - t_restore if restore is not None else 0.0
        rescaled = assignment.record if assignment is not None else None
        outputs = {f"{c.index}/{i}": list(c.nodes[(1 if c.head.is_source else 0):])
                   for c in plan.chains for i in range(c.parallelism)}
        if restore is not None and restore.finished:
            return AttemptResult(self._metrics, 0.0, [], restore_s, rescaled=rescaled)
        if self._cancelled:
            raise JobCancelled(attempt.job_name)
        if attempt.on_running is not None:
            attempt.on_running(rescaled)
        t0 = time.perf_counter()
        ray.get([a.start.remote() for a in actors])
        done: set[int] = set()
        while len(done) < len(actors):
            time.sleep(POLL_S)
            try:
                replies = ray.get([a.poll.remote() for a in actors])
            except Exception as exc:
                if self._cancelled:
                    raise JobCancelled(attempt.job_name) from None
                raise self._failure(exc, None) from None
            for n, r in enumerate(replies):
                for k, counters in r["metrics"].items():
                    _mirror(by_key[k], counters)
                for item in r["acks"]:
                    if item[0] == "ack":
                        coordinator.ack(item[1], item[2], item[3])
                    else:
                        coordinator.task_finished(item[1], item[2])
                for k, found in r["outputs"].items():
                    _gather(outputs[k], found)
                if r["error"] is not None:
                    if self._cancelled:
                        raise JobCancelled(attempt.job_name)
                    raise self._failure(None, r["error"])
                if r["done"]:
                    done.add(n)
            if self._cancelled:
                raise JobCancelled(attempt.job_name)
            coordinator.maybe_trigger()
            coordinator.poll()
            if coordinator.stopped is not None:
                break
            tick()
        if coordinator.stopped is not None:
            self._drain(actors, outputs)
            return AttemptResult(self._metrics, time.perf_counter() - t0, coordinator.stats, restore_s,
                                 stopped=coordinator.stopped, rescaled=rescaled)
        coordinator.finish()
        self._drain(actors, outputs)
        return AttemptResult(self._metrics, time.perf_counter() - t0, coordinator.stats, restore_s,
                             rescaled=rescaled)

    def _drain(self, actors: list[Any], outputs: dict[str, list]) -> None:
        """The collect rows committed last."""
        for r in ray.get([a.poll.remote() for a in actors]):
            for k, found in r["outputs"].items():
                _gather(outputs[k], found)

    def _failure(self, exc: BaseException | None, remote: dict | None) -> JobFailed:
        if remote is not None:
            cause = RemoteFailure(f"{remote['type']}: {remote['message']}\n{remote['traceback']}")
            failed = JobFailed(remote["operator"], remote["task"], cause, remote["batch"])
        else:
            cause = RemoteFailure(f"{type(exc).__name__}: {exc}")
            failed = JobFailed("job", "a Ray actor", cause, None)
        failed.__cause__ = cause
        return failed


def _gather(nodes: list, outputs: dict) -> None:
    """Committed collect rows of an actor's sinks into the driver's results."""
    for op_index, committed in outputs.items():
        result = nodes[op_index].output
        if result is not None:
            with result._lock:
                result.committed.extend(committed)
