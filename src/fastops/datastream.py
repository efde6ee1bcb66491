"""The DataStream API: build a job graph, then run it.

>>> import fastops as fo, pyarrow as pa
>>> env = fo.StreamEnvironment()
>>> s = env.from_collection([(1, 2.0), (2, -1.0)], schema=["k", "v"])
>>> s.filter(fo.col("v") > 0).collect().to_pylist()
[{'k': 1, 'v': 2.0}]
"""
from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Sequence
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc

from fastops.autoscale import Autoscaling
from fastops.connectors import sinks as _sinks
from fastops.connectors.base import Source, check_batch_size
from fastops.connectors.collections import TableSource
from fastops.connectors.files import FileSource
from fastops.connectors.generators import GeneratorSource, IteratorSource
from fastops.connectors.pacing import Rate
from fastops.connectors.postgres import PostgresSink, prepare_target
from fastops.connectors.redis import UNDECODABLE, UNDECODABLE_SCHEMA, RedisStreamSource
from fastops.core.durations import parse_duration, parse_positive_duration
from fastops.core.keys import KeyTable
from fastops.core.partitioning import ASSIGNMENTS
from fastops.core.watermarks import BoundedOutOfOrderness, MonotonousTimestamps, to_ms
from fastops.core.window.aggregator import MissingColumnError, WindowAggregator
from fastops.core.window.assigners import GlobalWindow, Sliding, Tumbling, as_window, bound_type
from fastops.monitoring import DEFAULTS as UI_DEFAULTS
from fastops.monitoring import MetricsServer, parse_ui
from fastops.operators import basic as _basic
from fastops.operators.join import WindowJoinOperator
from fastops.operators.process import KeyedProcessFunction, KeyedProcessOperator
from fastops.operators.shedding import INCLUSION, Estimates, Shedder, priority_of
from fastops.operators.window import ARRIVAL, RunningAggregateOperator, WindowOperator
from fastops.runtime.client import JobClient
from fastops.runtime.executors import EXECUTORS
from fastops.runtime.graph import Edge, Node, identity
from fastops.runtime.job import Job, JobConfig, JobResult
from fastops.runtime.plan import PhysicalPlan
from fastops.runtime.progress import Progress
from fastops.shedding import Monitor, QoS

col = pc.field  # fo.col("v") > 0: a pyarrow.compute expression

# what an environment that names no executor runs on (``fastops run --executor``): None keeps the rule below
DEFAULTS: dict[str, Any] = {"executor": None}


def _executor_name(executor: str | None, threads: bool | None, parallelism: int) -> str:
    """The executor a StreamEnvironment asked for by name or by ``threads=``."""
    if executor is None:
        use_threads = (parallelism > 1) if threads is None else bool(threads)
        return "threads" if use_threads else "single"
    if executor not in EXECUTORS:
        raise ValueError(f"unknown executor {executor!r}; expected one of {sorted(EXECUTORS)}")
    if threads is not None and bool(threads) != (executor == "threads"):
        raise ValueError(f"threads={threads!r} contradicts executor={executor!r}: give one of them")
    return executor


def _check_parallelism(value: Any, what: str = "parallelism") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{what} must be an int >= 1, got {value!r}")
    return value


def _names(cols: Sequence[Any]) -> tuple[str, ...]:
    flat: list[str] = []
    for c in cols:
        if isinstance(c, (list, tuple)):
            flat.extend(c)
        else:
            flat.append(c)
    for c in flat:
        if not isinstance(c, str):
            raise TypeError(f"column names must be strings, got {c!r}")
    if not flat:
        raise ValueError("at least one key column is needed")
    return tuple(flat)


def _configured(stream: DataStream, config: Any) -> DataStream:
    """Record an operator's configuration on its node (part of the job fingerprint)."""
    stream.node.config = config
    return stream


def _describe_aggs(aggs: dict) -> dict:
    return {name: a.describe() if hasattr(a, "describe") else repr(a) for name, a in aggs.items()}


def _missing(what: str, column: str, schema: pa.Schema) -> Exception:
    """A missing column, raised where the graph is built (a KeyError and a ValueError)."""
    return MissingColumnError(f"{what} {column!r} not in stream (columns: {schema.names})")


def _require(schema: pa.Schema | None, columns: Sequence[str], what: str) -> None:
    """Check that ``columns`` exist, when the stream's schema is known."""
    if schema is not None:
        for c in columns:
            if c not in schema.names:
                raise _missing(what, c, schema)


def _no_rows(schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([], schema=schema)


def _expression_error(exc: Exception, schema: pa.Schema, what: str) -> Exception:
    """An Arrow error from evaluating ``what`` over no rows of ``schema``, as a
    MissingColumnError (an unknown column) or a TypeError (types that do not fit)."""
    msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    m = re.search(r"No match for FieldRef\.Name\((.*?)\) in ", str(exc))
    if m:
        return _missing(f"{what}: column", m.group(1), schema)
    return TypeError(f"{what}: {msg} (columns: {', '.join(f'{f.name}: {f.type}' for f in schema)})")


_ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError)


def _aggregate_schema(window: Any, keys: Sequence[str], aggs: dict, time: str, lateness: Any,
                      schema: pa.Schema | None) -> pa.Schema | None:
    """Check a window / running aggregate now (columns and their types, when the
    input schema is known); its output schema, or None if the input's is unknown."""
    if schema is not None:
        _require(schema, [time], "time column")
        for name, a in aggs.items():
            column = getattr(a, "column", None)
            if isinstance(column, str):
                _require(schema, [column], f"aggregate {name!r}: column")
    return WindowAggregator(window, list(keys), dict(aggs), time=time, allowed_lateness=lateness,
                            schema=schema).output_schema


def _shedding_schema(mode: str, window: Any, keys: Sequence[str], aggs: dict, time: str, lateness: Any,
                     schema: pa.Schema | None, out: pa.Schema | None) -> pa.Schema | None:
    """Check a window under load shedding; its output schema (random: with
    error columns and the sampled fraction)."""
    if mode == "window" and not isinstance(as_window(window), Tumbling):
        raise ValueError(f"shedding='window' drops whole windows of tumbling windows; {window!r} overlaps "
                         "or merges its windows, so a dropped row would leave another window inexact: "
                         "use shedding='random' or 'semantic'")
    if mode != "random":
        return out
    if schema is not None and INCLUSION not in schema.names:
        raise ValueError(f"under random load shedding a window estimates from each row's inclusion probability, "
                         f"column {INCLUSION!r}, which an earlier operator dropped (its input has "
                         f"{', '.join(schema.names)}): keep it, or shed with shedding='semantic' or 'window'")
    estimates = Estimates(aggs)
    if schema is None or out is None:
        return None
    internal = _aggregate_schema(window, keys, estimates.internal, time, lateness,
                                 estimates.prepare(_no_rows(schema), "window").schema)
    assert internal is not None
    return estimates.schema(internal, 2 + len(keys))


def _checked_schema(schema: Any) -> pa.Schema | None:
    if schema is not None and not isinstance(schema, pa.Schema):
        raise TypeError(f"schema must be a pyarrow.Schema (or None), got {type(schema).__name__}")
    return schema


def _schema_from(schema: Any) -> pa.Schema | None:
    if schema is None or isinstance(schema, pa.Schema):
        return schema
    if all(isinstance(s, str) for s in schema):
        return None  # names only: types are inferred
    return pa.schema([(n, t) for n, t in schema])


class StreamEnvironment:
    """Where a streaming job is built and executed.

    Parameters
    ----------
    parallelism
        Default number of parallel tasks for keyed operators.
    max_parallelism
        Number of key groups (the unit of keyed state and of rescaling).
    channel_capacity
        Credits per channel: batches in flight between two tasks.
    executor
        ``"threads"`` runs one thread per task; ``"single"`` runs every task
        in one thread in a fixed order (deterministic; for tests and
        debugging); ``"ray"`` runs every task in a Ray actor (``pip install
        "fastops[ray]"``; see docs/ray.md). Default: threads unless
        ``parallelism == 1`` (and no ``qos``).
    ray_address, ray_init_kwargs, ray_actors
        For ``executor="ray"``: the cluster to run on (None: this machine's
        Ray, started with a small footprint if none runs), more ``ray.init``
        arguments, and ``"node"`` (one actor per node runs that node's tasks
        in threads; exchanges between them stay in memory) or ``"task"``
        (an actor per task; every exchange goes through Ray).
    threads
        The same choice as a flag: ``True`` for ``"threads"``, ``False`` for
        ``"single"``.
    checkpoint_dir, checkpoint_interval, checkpoints_retained, mode
        Periodic checkpoints (``"exactly_once"`` aligns barriers,
        ``"at_least_once"`` does not) written to ``checkpoint_dir``; a job
        started with an existing ``checkpoint_dir`` resumes from its latest
        complete checkpoint.
    restart_attempts, restart_delay
        After a failure, restart in-process (from the latest checkpoint, or
        from the start without checkpoints) up to this many times.
    key_group_assignment
        Which task owns which key group after a rescale (``JobClient.rescale``,
        or a restore at another parallelism): ``"contiguous"`` (Flink's
        ranges) or ``"fewest_moves"`` (moves the fewest key groups). See
        docs/rescaling.md.
    autoscaling
        A ``fastops.Autoscaling``: DS2 sets every operator's parallelism
        while the job runs (see ``fastops.autoscale``); also
        ``enable_autoscaling(...)``.
    qos
        A ``fastops.QoS``: keep latency within a bound by shedding load
        (a drop operator after every source; see ``fastops.shedding`` and
        docs/shedding.md).
    """

    def __init__(self, parallelism: int = 1, max_parallelism: int = 128,
                 channel_capacity: int = 8, threads: bool | None = None,
                 chaining: bool = True, checkpoint_dir: str | None = None,
                 checkpoint_interval: Any = "5s", checkpoints_retained: int = 3,
                 mode: str = "exactly_once", restart_attempts: int = 0,
                 restart_delay: Any = 0, executor: str | None = None,
                 key_group_assignment: str = "contiguous", autoscaling: Autoscaling | None = None,
                 qos: QoS | None = None, ray_address: str | None = None, ray_init_kwargs: dict | None = None,
                 ray_actors: str = "node"):
        self.parallelism = _check_parallelism(parallelism)
        self.max_parallelism = _check_parallelism(max_parallelism, "max_parallelism")
        if parallelism > max_parallelism:
            raise ValueError(f"parallelism ({parallelism}) must not exceed max_parallelism ({max_parallelism})")
        self.channel_capacity = _check_parallelism(channel_capacity, "channel_capacity")
        # a QoS monitor sizes the drops by busy time, which only tasks in threads of their own measure
        if executor is None and threads is None:
            executor = DEFAULTS["executor"]
        threads = True if qos is not None and threads is None and executor is None else threads
        self.executor = _executor_name(executor, threads, parallelism)
        if (ray_address is not None or ray_init_kwargs is not None) and self.executor != "ray":
            raise ValueError("ray_address and ray_init_kwargs apply to executor='ray'")
        if self.executor == "ray" and qos is not None:
            raise ValueError("a QoS sheds load in this process's tasks; executor='ray' does not shed yet: "
                             "use executor='threads'")
        if ray_actors not in ("node", "task"):
            raise ValueError(f"ray_actors must be 'node' (one actor per node) or 'task' (one per task), "
                             f"got {ray_actors!r}")
        self.executor_options = {"address": ray_address, "init": dict(ray_init_kwargs or {}),
                                 "actors": ray_actors} if self.executor == "ray" else {}
        self.chaining = chaining
        if mode not in ("exactly_once", "at_least_once"):
            raise ValueError(f"mode must be 'exactly_once' or 'at_least_once', got {mode!r}")
        self.mode = mode
        self.checkpoint_dir = None if checkpoint_dir is None else str(checkpoint_dir)
        self.checkpoint_interval_ms = parse_duration(checkpoint_interval) if checkpoint_interval is not None else None
        if self.checkpoint_interval_ms is not None and self.checkpoint_interval_ms <= 0:
            raise ValueError(f"checkpoint_interval must be > 0, got {checkpoint_interval!r}")
        self.checkpoints_retained = _check_parallelism(checkpoints_retained, "checkpoints_retained")
        if isinstance(restart_attempts, bool) or not isinstance(restart_attempts, int) or restart_attempts < 0:
            raise ValueError(f"restart_attempts must be an int >= 0, got {restart_attempts!r}")
        self.restart_attempts = restart_attempts
        self.restart_delay_s = parse_duration(restart_delay) / 1000.0 if restart_delay else 0.0
        if key_group_assignment not in ASSIGNMENTS:
            raise ValueError(f"key_group_assignment must be one of {ASSIGNMENTS}, got {key_group_assignment!r}")
        self.key_group_assignment = key_group_assignment
        if autoscaling is not None and not isinstance(autoscaling, Autoscaling):
            raise TypeError(f"autoscaling must be a fastops.Autoscaling, got {type(autoscaling).__name__}")
        if autoscaling is not None:
            autoscaling.controller(self.max_parallelism)  # its settings are checked here
        self.autoscaling = autoscaling
        if qos is not None and not isinstance(qos, QoS):
            raise TypeError(f"qos must be a fastops.QoS, got {type(qos).__name__}")
        self.qos = qos
        self.shedding = qos.control() if qos is not None else None  # the drop fraction its jobs' operators read
        self._sinks: list[Node] = []
        self.last_result: JobResult | None = None
        self._collect_jobs = 0  # jobs collect() ran at once (for execute()'s "no sink" error)

    def enable_autoscaling(self, **settings: Any) -> StreamEnvironment:
        """Autoscale the jobs of this environment: ``settings`` as ``fastops.Autoscaling``."""
        autoscaling = Autoscaling(**settings)
        autoscaling.controller(self.max_parallelism)
        self.autoscaling = autoscaling
        return self

    @property
    def threads(self) -> bool:
        """Whether tasks run in threads of their own (``executor="threads"``)."""
        return self.executor == "threads"

    # -- sources ---------------------------------------------------------------
    def from_source(self, source: Source, parallelism: int | None = None) -> DataStream:
        """A stream read from ``source`` (a ``fastops.connectors.base.Source``).

        Parameters
        ----------
        source
            Describes the input; ``source.open(i, p, position)`` gives the
            reader of split ``i`` of ``p``.
        parallelism
            Source tasks; at most ``source.splits()`` (default: the
            environment's parallelism, capped the same way).

        Returns
        -------
        DataStream
            Its schema is ``source.schema()`` when the source knows it.
        """
        if parallelism is not None:
            _check_parallelism(parallelism)
        p = min(parallelism or self.parallelism, source.splits())
        node = Node(source.name, _check_parallelism(p), source=source)
        stream = DataStream(self, node, schema=source.schema())
        return stream._shed() if self.qos is not None else stream

    def from_collection(self, rows: Sequence[Any], schema: Any = None,
                        batch_size: int = 65536) -> DataStream:
        """Rows as tuples (with ``schema`` names or ``(name, type)`` pairs) or dicts."""
        rows = list(rows)
        arrow_schema = _schema_from(schema)
        if rows and not isinstance(rows[0], dict):
            if schema is None:
                raise ValueError("from_collection of tuples needs a schema (column names or (name, type) pairs)")
            names = arrow_schema.names if arrow_schema is not None else list(schema)
            rows = [dict(zip(names, r)) for r in rows]
        if not rows and arrow_schema is None:
            raise ValueError("an empty collection needs a schema with types")
        table = pa.Table.from_pylist(rows, schema=arrow_schema)
        return self.from_source(TableSource(table, batch_size, "from_collection"), 1)

    def from_pandas(self, df: Any, batch_size: int = 65536) -> DataStream:
        """The rows of a pandas DataFrame (its index is dropped), in batches.

        Parameters
        ----------
        df
            A ``pandas.DataFrame``; column types convert as in
            ``pyarrow.Table.from_pandas``.
        batch_size
            Rows per record batch.

        Returns
        -------
        DataStream
            One source task; replayable, so checkpoints can rewind it.

        Examples
        --------
        >>> import fastops as fo, pandas as pd
        >>> env = fo.StreamEnvironment()
        >>> env.from_pandas(pd.DataFrame({"k": [1, 2]})).collect().num_rows
        2
        """
        table = pa.Table.from_pandas(df, preserve_index=False)
        return self.from_source(TableSource(table, batch_size, "from_pandas"), 1)

    def from_arrow(self, data: Any, batch_size: int = 65536) -> DataStream:
        """A Table, a RecordBatch, a list of batches, or an iterator of batches."""
        check_batch_size(batch_size)
        if isinstance(data, pa.RecordBatch):
            data = pa.Table.from_batches([data])
        if isinstance(data, (list, tuple)):
            data = pa.Table.from_batches(list(data))
        if isinstance(data, pa.Table):
            return self.from_source(TableSource(data, batch_size), 1)
        if hasattr(data, "__iter__"):
            return self.from_source(IteratorSource(data), 1)
        raise TypeError(f"from_arrow needs a Table, batches or an iterator of batches, got {type(data).__name__}")

    def from_parquet(self, path: Any, batch_size: int = 65536) -> DataStream:
        """The rows of Parquet files: a file, a directory (read recursively;
        names starting with ``_`` or ``.`` are skipped) or a glob, or a list of these.

        Parameters
        ----------
        path
            Where the files are. A missing file or a glob that matches
            nothing raises ``FileNotFoundError`` here, not when the job runs.
        batch_size
            Largest record batch read, in rows (1 to ``2**31 - 1``).

        Returns
        -------
        DataStream
            With the files' schema. The splits are the row groups of the
            files, in order; with parallelism ``p`` source task ``i`` reads
            splits ``i, i + p, ...``. Replayable: a checkpoint records the
            row group and the rows read of it.

        Examples
        --------
        >>> import os, tempfile, fastops as fo, pyarrow as pa, pyarrow.parquet as pq
        >>> path = os.path.join(tempfile.mkdtemp(), "t.parquet")
        >>> pq.write_table(pa.table({"k": [1, 2, 3]}), path)
        >>> fo.StreamEnvironment().from_parquet(path).collect().column("k").to_pylist()
        [1, 2, 3]
        """
        return self.from_source(FileSource(path, "parquet", batch_size))

    def from_csv(self, path: Any, batch_size: int = 65536, schema: pa.Schema | None = None) -> DataStream:
        """The rows of CSV files (a header line, comma-separated): a file, a
        directory or a glob, or a list of these.

        Parameters
        ----------
        path
            Where the files are (``FileNotFoundError`` here if there are none).
        batch_size
            Largest record batch read, in rows (1 to ``2**31 - 1``).
        schema
            Column names and types; without it, types are inferred from the
            first block of the first file (as ``pyarrow.dataset`` does).

        Returns
        -------
        DataStream
            One split per file, read in order; replayable (a checkpoint
            records the file and the rows read of it).

        Examples
        --------
        >>> import os, tempfile, fastops as fo
        >>> path = os.path.join(tempfile.mkdtemp(), "t.csv")
        >>> with open(path, "w") as f:
        ...     _ = f.write("k,v\\n1,2.5\\n2,3.5\\n")
        >>> fo.StreamEnvironment().from_csv(path).collect().column("v").to_pylist()
        [2.5, 3.5]
        """
        return self.from_source(FileSource(path, "csv", batch_size, schema))

    def from_ipc(self, path: Any, batch_size: int = 65536) -> DataStream:
        """The rows of Arrow IPC (Feather v2) files: a file, a directory or a glob.

        Parameters
        ----------
        path
            Where the files are (``FileNotFoundError`` here if there are none).
        batch_size
            Largest record batch read, in rows (1 to ``2**31 - 1``).

        Returns
        -------
        DataStream
            One split per file, read in order; replayable.
        """
        return self.from_source(FileSource(path, "ipc", batch_size))

    def from_generator(self, fn: Callable[[], Iterable[Any]], rate: Rate | None = None,
                       deterministic: bool = False) -> DataStream:
        """Batches from ``fn()`` (a generator function); ``rate`` in rows/s paces
        it, constant or in steps (``[(0, 4000), (30, 8000)]``: from second 30
        on, 8000 rows/s). A paced source behind its schedule reports its
        backlog (see docs/autoscaling.md)."""
        return self.from_source(GeneratorSource(fn, rate, deterministic), 1)

    def from_redis_stream(self, url: str, streams: str | Sequence[str], schema: Any, group: str | None = None,
                          consumer: str | None = None, start: str = "0-0", batch_size: int = 10_000,
                          decode: str = "fields", json_field: str = "data", metadata: bool = True,
                          bounded: bool = False, idle_timeout: Any = "1s", parallelism: int | None = None,
                          block: Any = "100ms", claim_idle: Any = "60s") -> DataStream:
        """Entries of Redis streams (``redis://host:port/db``) as rows of
        ``schema`` (a ``pyarrow.Schema``, a dict or ``(name, type)`` pairs),
        exactly once with checkpoints. See docs/connectors.md.

        ``decode="fields"`` reads one entry field per column, ``"json"`` a JSON
        object in the field ``json_field``. Columns ``_stream``, ``_id`` and
        ``_ts`` (the id's append time, a timestamp usable as event time) are
        filled from the entry; with ``metadata`` those not in ``schema`` are
        added. Without ``group`` reader ``i`` reads streams ``i, i + p, ...``
        with ``XREAD`` from ``start``; with ``group`` every reader is a
        consumer ``{consumer}-{i}`` and entries are acknowledged once the
        checkpoint covering them completes. ``bounded``: end once a read finds
        nothing new. A reader without entries for ``idle_timeout`` marks its
        source idle. Entries that cannot be decoded go to
        ``side_output("undecodable")`` (``_stream``, ``_id``, ``reason``,
        ``fields``). The server, the group and the schema are checked here.
        """
        source = RedisStreamSource(url, streams, schema, group, consumer, start, batch_size, decode, json_field,
                                   metadata, bounded, block, claim_idle)
        if parallelism is not None:
            _check_parallelism(parallelism)
        p = min(parallelism or self.parallelism, source.splits())
        raw = DataStream(self, Node(source.name, _check_parallelism(p), source=source), schema=source.schema())
        idle = parse_positive_duration(idle_timeout, "idle_timeout") if idle_timeout is not None else None

        def acknowledger() -> Any:
            op = source.acknowledger()
            op.idle_timeout_ms = idle
            return op

        out = _configured(raw._then("redis_ack", acknowledger, schema=source.public),
                          {"streams": source.streams, "group": group, "consumer": source.consumer,
                           "decode": decode, "idle_ms": idle})
        out._source = raw  # set_parallelism and name apply to the source
        out._side_schemas[UNDECODABLE] = UNDECODABLE_SCHEMA
        return out._shed() if self.qos is not None else out

    # -- running ---------------------------------------------------------------
    @staticmethod
    def _check_sinks(sinks: list[Node]) -> None:
        if not sinks:
            raise ValueError("the job has no sink: add collect(), print(), sink_to_parquet(...) or sink_to(fn)")

    def _plan(self, sinks: list[Node]) -> PhysicalPlan:
        self._check_sinks(sinks)
        return PhysicalPlan.build(sinks, self.max_parallelism, self.chaining)

    def explain(self) -> str:
        """The physical plan of the sinks added so far (and, on Ray, where its tasks go)."""
        text = self._plan(self._sinks).explain()
        if self.executor == "ray":
            text += ("\nexecutor: ray, each task in a Ray actor of its own, spread over the cluster's nodes; "
                     "JobClient.metrics()['tasks'][i]['location'] names the node a task runs on")
        return text

    def _job_config(self) -> JobConfig:
        return JobConfig(
            executor=self.executor, executor_options=self.executor_options, channel_capacity=self.channel_capacity,
            max_parallelism=self.max_parallelism, chaining=self.chaining,
            checkpoint_dir=self.checkpoint_dir,
            checkpoint_interval_s=self.checkpoint_interval_ms / 1000.0 if self.checkpoint_interval_ms else None,
            checkpoints_retained=self.checkpoints_retained, exactly_once=self.mode == "exactly_once",
            restart_attempts=self.restart_attempts, restart_delay_s=self.restart_delay_s,
            key_group_assignment=self.key_group_assignment,
            controller=self.autoscaling.controller(self.max_parallelism) if self.autoscaling is not None else None,
            monitor=Monitor(self.qos, self.shedding) if self.qos is not None and self.shedding is not None else None)

    def _finished(self, result: JobResult) -> None:
        self.last_result = result

    def _submit(self, sinks: list[Node], job_name: str, restore: Any = "latest",
                progress: bool | Callable[[list], Any] | None = None, ui: Any = None,
                ui_keep: bool = False) -> JobClient:
        """Plan and check the job here (errors at the caller's line), then run it
        in a thread of its own."""
        self._check_sinks(sinks)
        if ui is None:
            ui, ui_keep = UI_DEFAULTS["ui"], ui_keep or UI_DEFAULTS["keep"]
        serve = parse_ui(ui)
        bar = Progress(label=job_name) if progress is True else None
        callback = bar if bar is not None else progress if callable(progress) else None
        try:
            job = Job(sinks, job_name, self._job_config(), restore, callback, owns_progress=bar is not None)
        except BaseException:
            if bar is not None:
                bar.close()
            raise
        client = JobClient(job, self._finished)
        server = MetricsServer(client, *serve) if serve is not None else None  # the port is taken here
        client.start()
        if server is not None:
            client.ui_url = server.start(keep=ui_keep).url
            if UI_DEFAULTS["announce"]:
                print(f"job {job_name!r}: page and metrics at {client.ui_url}/", file=sys.stderr, flush=True)
        return client

    def execute_async(self, job_name: str = "fastops job", restore: Any = "latest",
                      progress: bool | Callable[[list], Any] | None = None, ui: Any = None,
                      ui_keep: bool = False) -> JobClient:
        """Start every sink added so far as one job, in the background; they are
        then cleared (as in Flink). Returns a ``JobClient``: ``wait()`` for the
        ``JobResult``, ``get_job_status()``, ``metrics()`` (live rates),
        ``cancel()``. Arguments as for ``execute``; a job that cannot run
        (no sink, a checkpoint of another job...) raises here. ``ui``: serve
        the job's metrics over HTTP (a port, 0 for any free one, ``True`` for
        8081 or ``"host:port"``; ``JobClient.ui_url`` says where; see
        ``fastops.monitoring``); ``ui_keep`` keeps serving after the job ends."""
        sinks, self._sinks = self._sinks, []
        if not sinks and self._collect_jobs:
            raise ValueError(
                f"the job has no sink: collect() runs its job at once and returns the rows, and "
                f"{self._collect_jobs} collect() job(s) already ran on this environment, so nothing "
                "is left for execute(). For several outputs of one job, add a sink per output "
                "and read them after execute(): a = s1.sink_to_table('a'); b = s2.sink_to_table('b'); "
                "env.execute(); a.table(), b.table()")
        return self._submit(sinks, job_name, restore, progress, ui, ui_keep)

    def execute(self, job_name: str = "fastops job", restore: Any = "latest",
                progress: bool | Callable[[list], Any] | None = None, ui: Any = None,
                ui_keep: bool = False) -> JobResult:
        """Run every sink added so far; they are then cleared (as in Flink).

        With a ``checkpoint_dir``, ``restore="latest"`` resumes from the newest
        complete checkpoint there (if any); a path resumes from that checkpoint
        or savepoint (``JobClient.stop_with_savepoint``), with or without a
        ``checkpoint_dir``, at the parallelism it was taken with or another
        (state moves by key group; see docs/rescaling.md); ``None`` starts
        afresh. ``progress=True`` draws a live bar on stderr
        (rows of the total, rows/s, watermark, checkpoints; see
        ``fastops.runtime.progress.Progress``); a callable ``progress(metrics)`` is
        called a few times a second with the live ``TaskMetrics`` of every task.
        ``ui`` serves its metrics while it runs (see ``execute_async``).
        The same as ``execute_async(...).wait()``.
        """
        return self.execute_async(job_name, restore, progress, ui, ui_keep).wait()


class DataStream:
    """A stream of record batches: the output of one node (or one of its side outputs)."""

    def __init__(self, env: StreamEnvironment, node: Node, tag: str | None = None,
                 time_column: str | None = None, schema: pa.Schema | None = None):
        self.env = env
        self.node = node
        self.tag = tag
        self.time_column = time_column
        #: The schema of this stream's batches when it is known as the graph is
        #: built (sources with a schema, then filter, select, key_by, windows,
        #: aggregates, joins), else None (after map, flat_map, process, transform).
        #: Columns are checked against it at the user's call, and an empty
        #: result keeps its columns.
        self.schema = schema
        self._side_schemas: dict[str, pa.Schema] = {}
        self._source: DataStream | None = None  # of the drop operator after a source: that source

    # -- plumbing --------------------------------------------------------------
    def _edge(self, partitioning: str = "forward", keys: tuple[str, ...] = (), input_index: int = 0) -> Edge:
        return Edge(self.node, partitioning, keys, self.tag, input_index)

    def _then(self, name: str, factory: Callable[[], Any], parallelism: int | None = None,
              partitioning: str = "forward", keys: tuple[str, ...] = (),
              time_column: str | None = "inherit", schema: pa.Schema | None = None) -> DataStream:
        if parallelism is not None:
            _check_parallelism(parallelism)
        p = parallelism or self.node.parallelism
        node = Node(name, p, factory=factory, inputs=[self._edge(partitioning, keys)])
        tc = self.time_column if time_column == "inherit" else time_column
        return DataStream(self.env, node, time_column=tc, schema=schema)

    def _shed(self) -> DataStream:
        """The drop operator after a source (the environment sheds load)."""
        qos, control = self.env.qos, self.env.shedding
        assert qos is not None and control is not None
        priority = priority_of(qos.priority) if qos.priority is not None else None
        schema = self.schema
        if schema is not None and qos.priority is not None:  # a missing column: here, not in a task
            try:
                _basic.evaluate(_no_rows(schema), {"priority": col(qos.priority) if isinstance(qos.priority, str)
                                                   else qos.priority})
            except _ARROW_ERRORS as exc:
                raise _expression_error(exc, schema, f"QoS priority {qos.priority}") from None
        if schema is not None and qos.shedding == "random" and INCLUSION not in schema.names:
            schema = schema.append(pa.field(INCLUSION, pa.float64()))
        shed = _configured(self._then("shed", lambda: Shedder(control, priority), schema=schema),
                           {"shedding": qos.shedding, "priority": None if qos.priority is None else str(qos.priority)})
        shed._source = self  # set_parallelism and name apply to the source
        return shed

    def set_parallelism(self, parallelism: int) -> DataStream:
        """Set this operator's parallelism (before anything consumes it)."""
        _check_parallelism(parallelism)
        if self._source is not None:  # the drop operator stays chained to its source
            self._source.set_parallelism(parallelism)
            self.node.parallelism = self._source.node.parallelism
            return self
        if self.node.is_source:
            parallelism = min(parallelism, self.node.source.splits())
        self.node.parallelism = _check_parallelism(parallelism)
        return self

    def name(self, name: str) -> DataStream:
        (self._source or self).node.name = name
        return self

    # -- event time ------------------------------------------------------------
    def with_watermark(self, column: str, max_out_of_orderness: Any = 0,
                       idle_timeout: Any = None, monotonous: bool = False) -> DataStream:
        """Use ``column`` as event time (int ms or Arrow timestamps) and emit
        watermarks ``max(ts) - max_out_of_orderness - 1`` (or, with
        ``monotonous=True``, ``max(ts) - 1``). An input with no data for
        ``idle_timeout`` stops holding downstream watermarks back."""
        if not isinstance(column, str):
            raise TypeError(f"the time column must be a name, got {column!r}")
        _require(self.schema, [column], "time column")
        if self.schema is not None:  # integer ms, timestamp or date, else a TypeError naming it
            to_ms(pa.array([], self.schema.field(column).type), column)
        bound = parse_duration(max_out_of_orderness) if max_out_of_orderness else 0
        if bound < 0:
            raise ValueError(f"max_out_of_orderness must be a duration >= 0, got {max_out_of_orderness!r}")
        idle = parse_positive_duration(idle_timeout, "idle_timeout") if idle_timeout is not None else None
        factory = (MonotonousTimestamps if monotonous else (lambda: BoundedOutOfOrderness(bound)))
        return _configured(self._then("watermark", lambda: _basic.WatermarkAssigner(column, factory, idle),
                                      time_column=column, schema=self.schema),
                           {"column": column, "bound_ms": bound, "idle_ms": idle, "monotonous": monotonous})

    # -- transformations -------------------------------------------------------
    def map(self, fn: Callable[[pa.RecordBatch], Any], name: str | None = None,
            schema: pa.Schema | None = None) -> DataStream:
        """``fn(batch) -> batch`` (vectorised). ``schema``: of what ``fn``
        returns, when known (PyFlink's ``output_type``): the columns after it
        are then checked where the job is built, an empty result keeps them,
        and a batch of another schema fails naming both."""
        label = name or str(getattr(fn, "__name__", "map"))
        declared = _checked_schema(schema)
        return _configured(self._then(f"map({label})" if name is None else name,
                                      lambda: _basic.Map(fn, label, declared), schema=declared), identity(fn))

    def flat_map(self, fn: Callable[[pa.RecordBatch], Any], name: str | None = None) -> DataStream:
        label = name or str(getattr(fn, "__name__", "flat_map"))
        return _configured(self._then(f"flat_map({label})" if name is None else name,
                                      lambda: _basic.FlatMap(fn, label)), identity(fn))

    def filter(self, predicate: Any, name: str | None = None) -> DataStream:
        """Keep rows where ``predicate`` (an expression, or ``fn(batch) -> mask``) holds."""
        label = name or ("filter" if isinstance(predicate, pc.Expression)
                         else f"filter({getattr(predicate, '__name__', 'fn')})")
        if not isinstance(predicate, pc.Expression) and not callable(predicate):
            raise TypeError("filter needs an expression (fastops.col(...) > 0) or a function, "
                            f"got {type(predicate).__name__}")
        if isinstance(predicate, pc.Expression) and self.schema is not None:
            try:  # unknown columns, types without a kernel, a predicate that is not boolean
                _no_rows(self.schema).filter(predicate)
            except _ARROW_ERRORS as exc:
                raise _expression_error(exc, self.schema, f"filter {predicate}") from None
        return _configured(self._then(label, lambda: _basic.Filter(predicate, label), schema=self.schema),
                           str(predicate) if isinstance(predicate, pc.Expression) else identity(predicate))

    def select(self, *columns: str, **expressions: Any) -> DataStream:
        """Keep ``columns`` and add ``name=expression`` columns, in that order."""
        spec: dict[str, Any] = {c: c for c in columns}
        spec.update(expressions)
        shedding = self.env.shedding
        if shedding is not None and shedding.mode == "random" and INCLUSION not in spec \
                and (self.schema is None or INCLUSION in self.schema.names):
            spec[INCLUSION] = INCLUSION  # the windows after it estimate from it
        _require(self.schema, [v for v in spec.values() if isinstance(v, str)], "select: column")
        schema = self._projected(spec, False, "select")
        return _configured(self._then("select", lambda: _basic.Project(spec, keep_existing=False), schema=schema),
                           {k: str(v) for k, v in spec.items()})

    def with_columns(self, **expressions: Any) -> DataStream:
        """Add or replace columns computed by pyarrow.compute expressions."""
        schema = self._projected(expressions, True, "with_columns")
        return _configured(self._then("with_columns", lambda: _basic.Project(dict(expressions), keep_existing=True),
                                      schema=schema),
                           {k: str(v) for k, v in expressions.items()})

    def _projected(self, spec: dict[str, Any], keep_existing: bool, what: str) -> pa.Schema | None:
        """Check select / with_columns expressions; their output schema if the input's is known."""
        for name, v in spec.items():
            if not isinstance(v, (str, pc.Expression)):
                raise TypeError(f"{what}: column {name!r}: expected a column name or a pyarrow.compute "
                                f"expression (fastops.col(...)), got {type(v).__name__}")
        if self.schema is None:
            return None
        try:
            return _basic.Project(dict(spec), keep_existing).process(_no_rows(self.schema))[0].schema
        except _ARROW_ERRORS as exc:
            raise _expression_error(exc, self.schema, what) from None

    def window_all(self, window: Any) -> WindowedStream:
        """Windows over every row, without keys (PyFlink's ``window_all``): one
        task sees the whole stream, and stays one task (a rescale leaves it)."""
        as_window(window)  # a TypeError here, not when the job runs
        return WindowedStream(self, (), window, lambda name, factory, schema: self._then(
            name, factory, 1, "forward", (), None, schema))

    def transform(self, name: str, operator_factory: Callable[[], Any],
                  parallelism: int | None = None, partitioning: str = "forward",
                  keys: Sequence[str] = (), schema: pa.Schema | None = None) -> DataStream:
        """Apply a custom ``fastops.operators.Operator`` (a fresh one per task),
        after a ``partitioning`` exchange (forward, rebalance, broadcast, or hash
        with ``keys``); ``parallelism=1`` gathers the stream into one task.
        ``schema``: of the operator's output, when known (as PyFlink's
        ``output_type``): an empty result then keeps its columns."""
        if not callable(operator_factory):
            raise TypeError("transform needs a factory (e.g. the Operator class) that makes one operator per task")
        return _configured(self._then(name, operator_factory, parallelism, partitioning, tuple(keys),
                                      schema=_checked_schema(schema)), identity(operator_factory))

    def connect(self, other: DataStream, name: str, operator_factory: Callable[[], Any],
                keys: Sequence[str] = (), other_keys: Sequence[str] | None = None,
                parallelism: int | None = None) -> DataStream:
        """A two-input custom operator: rows of this stream arrive with
        ``input_index`` 0, rows of ``other`` with 1 (``Operator.process_input``).
        With ``keys`` both inputs are hash-exchanged by key (``other_keys`` for
        the other side's columns); without, they are rebalanced."""
        how = "hash" if keys else "rebalance"
        lk = tuple(keys)
        rk = tuple(other_keys) if other_keys is not None else lk
        if parallelism is not None:
            _check_parallelism(parallelism)
        node = Node(name, parallelism or self.env.parallelism, factory=operator_factory,
                    config=identity(operator_factory),
                    inputs=[self._edge(how, lk, 0), other._edge(how, rk, 1)])
        return DataStream(self.env, node, time_column=None)

    def rebalance(self) -> DataStream:
        return self._then("rebalance", _basic.Operator, self.env.parallelism, "rebalance", schema=self.schema)

    def broadcast(self) -> DataStream:
        return self._then("broadcast", _basic.Operator, self.env.parallelism, "broadcast", schema=self.schema)

    def key_by(self, *columns: str | Sequence[str]) -> KeyedStream:
        """Partition by key: rows of one key go to one task (by key group)."""
        keys = _names(columns)
        _require(self.schema, keys, "key column")
        if self.schema is not None:  # a key type the key table cannot hold: TypeError naming the column
            KeyTable(keys)._prepare([pa.array([], self.schema.field(k).type) for k in keys])
        return KeyedStream(self, keys)

    def union(self, *others: DataStream) -> DataStream:
        """Rows of every stream, in one stream (same schema expected)."""
        streams = [self, *others]
        p = max(s.node.parallelism for s in streams)
        node = Node("union", p, factory=_basic.Operator,
                    inputs=[s._edge("forward" if s.node.parallelism == p else "rebalance") for s in streams])
        tcs = {s.time_column for s in streams}
        schema = self.schema if all(s.schema is not None and s.schema.equals(self.schema) for s in streams) else None
        return DataStream(self.env, node, time_column=tcs.pop() if len(tcs) == 1 else None, schema=schema)

    def join(self, other: DataStream) -> JoinBuilder:
        """A windowed inner join: ``a.join(b).on("k").window(Tumbling("1s")).apply()``."""
        return JoinBuilder(self, other)

    def side_output(self, tag: str) -> DataStream:
        """The side output ``tag`` of this operator (``"late"`` for window operators)."""
        return DataStream(self.env, self.node, tag=tag, time_column=self.time_column,
                          schema=self._side_schemas.get(tag))

    # -- sinks -----------------------------------------------------------------
    def _sink(self, name: str, factory: Callable[[], Any], register: bool = True) -> Node:
        node = Node(name, self.node.parallelism, factory=factory, inputs=[self._edge()], is_sink=True)
        if register:
            self.env._sinks.append(node)
        return node

    def collect(self, job_name: str = "collect") -> pa.Table:
        """Run the job that feeds this stream now, and return its rows as a pyarrow Table.

        ``collect()`` is a job of its own: it runs at once (like ``execute()``),
        reads the sources from the start and includes only this stream's
        branch; sinks added with ``sink_to_*`` are not part of it. For several
        outputs of one job use ``sink_to_table(...)`` on each stream, then
        ``env.execute()``, then ``.table()`` on each result.
        """
        result = _sinks.CollectResult()
        result.schema = self.schema  # an empty result keeps the stream's columns
        node = self._sink("collect", lambda: _sinks.CollectSink(result), register=False)
        node.output = result
        self.env._collect_jobs += 1
        self.env._submit([node], job_name).wait()
        return result.table()

    def sink_to_table(self, name: str = "collect") -> _sinks.CollectResult:
        """Collect this stream's rows when the job runs (``env.execute()``);
        read them with ``.table()`` afterwards. Exactly-once, like ``collect()``,
        and several of them can share one job."""
        result = _sinks.CollectResult()
        result.schema = self.schema  # an empty result keeps the stream's columns
        node = self._sink(name, lambda: _sinks.CollectSink(result, name))
        node.output = result
        return result

    def to_pandas(self) -> Any:
        return self.collect().to_pandas()

    def sink_to_parquet(self, directory: str, overwrite: bool = False) -> DataStream:
        """Write Parquet files into ``directory`` (on ``env.execute()``), one per
        task and checkpoint epoch, exactly once. A job that starts from no
        checkpoint refuses a directory holding committed files unless
        ``overwrite=True``, which deletes them."""
        self._sink("sink_to_parquet",
                   lambda: _sinks.FileSink(directory, "parquet", overwrite=overwrite)).config = os.fspath(directory)
        return self

    def sink_to_ipc(self, directory: str, overwrite: bool = False) -> DataStream:
        """Like ``sink_to_parquet``, in Arrow IPC files."""
        self._sink("sink_to_ipc",
                   lambda: _sinks.FileSink(directory, "ipc", overwrite=overwrite)).config = os.fspath(directory)
        return self

    def sink_to_postgres(self, dsn: str, table: str, mode: str = "append", key: str | Sequence[str] | None = None,
                         create: bool = False, sink_id: str | None = None) -> DataStream:
        """Write into PostgreSQL table ``table`` (on ``env.execute()``), exactly
        once: each checkpoint's rows in one transaction, prepared at the barrier
        and committed when the checkpoint completes (the server needs
        ``max_prepared_transactions > 0``). ``mode="append"`` inserts by COPY;
        ``"upsert"`` writes ``INSERT ... ON CONFLICT (key)``, and applies a
        changelog's updates and deletes. ``create=True`` makes a missing table
        from the stream's columns. ``sink_id`` names the sink's transactions
        (default: the table). The DSN, the table and each column's type are
        checked here. See docs/connectors.md."""
        target = prepare_target(dsn, table, self.schema, mode, key, create, sink_id)
        self._sink("sink_to_postgres", lambda: PostgresSink(target)).config = {
            "table": table, "mode": mode, "key": list(target.key), "sink_id": target.sink_id}
        return self

    def print(self) -> DataStream:
        self._sink("print", _sinks.PrintSink)
        return self

    def sink_to(self, fn: Callable[[pa.RecordBatch], Any]) -> DataStream:
        """Call ``fn(batch)`` for every batch (on ``env.execute()``)."""
        if not callable(fn):
            raise TypeError(f"sink_to needs a callable, got {type(fn).__name__}")
        self._sink(f"sink_to({getattr(fn, '__name__', 'fn')})", lambda: _sinks.FunctionSink(fn)).config = identity(fn)
        return self

    def explain(self) -> str:
        """The physical plan of a job that ends in this stream."""
        node = self._sink("collect", _basic.Operator, register=False)
        return self.env._plan([node]).explain()


class KeyedStream:
    """A stream partitioned by key columns (a hash exchange by key group)."""

    def __init__(self, stream: DataStream, keys: tuple[str, ...]):
        self.stream = stream
        self.keys = keys

    def _keyed(self, name: str, factory: Callable[[], Any], time_column: Any = "inherit",
               schema: pa.Schema | None = None) -> DataStream:
        return self.stream._then(name, factory, self.stream.env.parallelism, "hash", self.keys, time_column, schema)

    def map(self, fn: Callable[[pa.RecordBatch], Any], name: str | None = None) -> DataStream:
        """``fn(batch) -> batch`` after the hash exchange: a task sees only its keys."""
        label = name or str(getattr(fn, "__name__", "map"))
        return _configured(self._keyed(f"map({label})" if name is None else name, lambda: _basic.Map(fn, label)),
                           identity(fn))

    def flat_map(self, fn: Callable[[pa.RecordBatch], Any], name: str | None = None) -> DataStream:
        label = name or str(getattr(fn, "__name__", "flat_map"))
        return _configured(self._keyed(f"flat_map({label})" if name is None else name,
                                       lambda: _basic.FlatMap(fn, label)), identity(fn))

    def transform(self, name: str, operator_factory: Callable[[], Any],
                  schema: pa.Schema | None = None) -> DataStream:
        """A custom operator after the hash exchange (``schema`` as for ``DataStream.transform``)."""
        return _configured(self._keyed(name, operator_factory, schema=_checked_schema(schema)),
                           identity(operator_factory))

    def window(self, window: Any) -> WindowedStream:
        as_window(window)  # a TypeError here, not when the job runs
        return WindowedStream(self.stream, self.keys, window, lambda name, factory, schema: self._keyed(
            name, factory, None, schema))

    def aggregate(self, **aggs: Any) -> DataStream:
        """A running aggregate per key: after each batch, the new value of every key it touched."""
        keys, tc = self.keys, self.stream.time_column
        if not aggs:
            raise ValueError("aggregate needs at least one name=aggregate")
        shedding = self.stream.env.shedding
        if shedding is not None and shedding.mode == "random":
            raise ValueError("a running aggregate cannot estimate its totals under random load shedding (it "
                             "never closes a window to scale): aggregate in windows, or shed with "
                             "shedding='semantic'")
        schema = self.stream.schema
        if schema is not None and tc is None:  # the operator numbers rows in arrival order
            schema = schema.append(pa.field(ARRIVAL, pa.int64()))
        out = _aggregate_schema(GlobalWindow(), keys, aggs, tc or ARRIVAL, 0, schema)
        return _configured(self._keyed("aggregate", lambda: RunningAggregateOperator(keys, aggs, tc), schema=out),
                           {"keys": list(keys), "aggregates": _describe_aggs(aggs), "time_column": tc})

    def process(self, function: Any, name: str | None = None) -> DataStream:
        """Run a ``KeyedProcessFunction`` (keyed state, event-time timers)."""
        if not isinstance(function, KeyedProcessFunction):
            raise TypeError(f"process needs a fastops.KeyedProcessFunction, got {type(function).__name__}")
        keys = self.keys
        tc = self.stream.time_column
        label = name or type(function).__name__
        return _configured(self._keyed(f"process({label})", lambda: KeyedProcessOperator(function, keys, tc, label)),
                           {"function": identity(type(function)), "keys": list(keys), "time_column": tc})


class WindowedStream:
    """A keyed stream cut into event-time windows (or, from ``window_all``,
    the whole stream, in one task)."""

    def __init__(self, stream: DataStream, keys: tuple[str, ...], window: Any,
                 place: Callable[[str, Callable[[], Any], pa.Schema | None], DataStream]):
        self.stream = stream
        self.keys = keys
        self.window = window
        self.place = place  # adds the window operator after its exchange (hash by key, or into one task)
        self.lateness: Any = 0

    def allowed_lateness(self, lateness: Any) -> WindowedStream:
        if parse_duration(lateness) < 0:
            raise ValueError(f"allowed_lateness must be a duration >= 0, got {lateness!r}")
        self.lateness = lateness
        return self

    def aggregate(self, **aggs: Any) -> DataStream:
        """One row per key and window: ``window_start, window_end, keys..., aggs...``.
        Late rows go to ``side_output("late")``."""
        stream = self.stream
        if stream.time_column is None:
            raise ValueError("a window needs event time: call with_watermark(column, ...) before key_by "
                             "(or window_all)")
        if not aggs:
            raise ValueError("aggregate needs at least one name=aggregate")
        keys, window, tc, lateness = self.keys, self.window, stream.time_column, self.lateness
        # validate now (and the input columns, when the schema is known), not in a task
        out = _aggregate_schema(window, keys, aggs, tc, lateness, stream.schema)
        shedding = stream.env.shedding
        if shedding is not None:
            out = _shedding_schema(shedding.mode, window, keys, aggs, tc, lateness, stream.schema, out)
        name = f"window{'' if keys else '_all'}({type(window).__name__})"
        windowed = self.place(name, lambda: WindowOperator(window, keys, aggs, tc, lateness, shedding), out)
        if stream.schema is not None:  # late rows: the input, the reason and the watermark they met
            kept = [f for f in stream.schema if f.name not in ("reason", "watermark")]
            windowed._side_schemas["late"] = pa.schema(kept + [
                pa.field("reason", pa.string()),
                pa.field("watermark", bound_type(stream.schema.field(tc).type))])
        return _configured(windowed,
                           {"window": repr(window), "keys": list(keys), "aggregates": _describe_aggs(aggs),
                            "time_column": tc, "allowed_lateness_ms": parse_duration(lateness) if lateness else 0})


class JoinBuilder:
    """``left.join(right).on(keys[, right_keys]).window(w).apply()``."""

    def __init__(self, left: DataStream, right: DataStream):
        self.left = left
        self.right = right
        self.left_keys: tuple[str, ...] = ()
        self.right_keys: tuple[str, ...] = ()
        self._window: Any = None

    def on(self, keys: str | Sequence[str], right_keys: str | Sequence[str] | None = None) -> JoinBuilder:
        self.left_keys = _names([keys])
        self.right_keys = _names([right_keys]) if right_keys is not None else self.left_keys
        if len(self.left_keys) != len(self.right_keys):
            raise ValueError("join keys: left and right need the same number of columns")
        _require(self.left.schema, self.left_keys, "join key (left)")
        _require(self.right.schema, self.right_keys, "join key (right)")
        return self

    def window(self, window: Any) -> JoinBuilder:
        if not isinstance(window, (Tumbling, Sliding)):
            raise TypeError(f"a window join needs Tumbling or Sliding windows, got {type(window).__name__}")
        self._window = window
        return self

    def apply(self, suffixes: tuple[str, str] = ("", "_right")) -> DataStream:
        """Inner join of the rows of both sides that share a key and a window."""
        if not self.left_keys:
            raise ValueError("join: call .on(keys) first")
        if self._window is None:
            raise ValueError("join: call .window(...) first")
        lt, rt = self.left.time_column, self.right.time_column
        if lt is None or rt is None:
            raise ValueError("a windowed join needs event time on both sides: call with_watermark first")
        env = self.left.env
        lk, rk, w = self.left_keys, self.right_keys, self._window
        node = Node("window_join", env.parallelism,
                    config={"window": repr(w), "left_keys": list(lk), "right_keys": list(rk),
                            "time_columns": [lt, rt], "suffixes": list(suffixes)},
                    factory=lambda: WindowJoinOperator(w, lk, rk, lt, rt, suffixes),
                    inputs=[self.left._edge("hash", lk, 0), self.right._edge("hash", rk, 1)])
        return DataStream(env, node, time_column=None, schema=self._schema(suffixes))

    def _schema(self, suffixes: tuple[str, str]) -> pa.Schema | None:
        """The joined rows' schema (an Arrow join of no rows), if both sides' are known."""
        ls, rs = self.left.schema, self.right.schema
        if ls is None or rs is None:
            return None
        try:
            joined = ls.empty_table().join(rs.empty_table(), keys=list(self.left_keys),
                                           right_keys=list(self.right_keys), join_type="inner",
                                           left_suffix=suffixes[0] or None, right_suffix=suffixes[1],
                                           use_threads=False)
        except _ARROW_ERRORS as exc:
            raise _expression_error(exc, ls, "join") from None
        bt = bound_type(ls.field(self.left.time_column).type) if self.left.time_column in ls.names else None
        if bt is None:
            return None
        return pa.schema([pa.field("window_start", bt), pa.field("window_end", bt), *joined.schema])
