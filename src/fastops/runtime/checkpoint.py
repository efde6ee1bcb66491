"""Exactly-once checkpoints: the coordinator, the on-disk format, recovery.

Asynchronous barrier snapshots, as in Flink: the coordinator asks every source
task to inject ``CheckpointBarrier(id)``; a task with several inputs aligns the
barriers (exactly-once: an input whose barrier arrived is blocked until all
have; at-least-once: no blocking), snapshots its operators, forwards the
barrier and acknowledges. When every task has acknowledged, the coordinator
writes the checkpoint and then lets the sinks commit.

On disk (``checkpoint_dir/chk-000007/``, or a savepoint's own directory):
one file per operator state (the operator's bytes, Arrow IPC for the
built-in ones) and ``_manifest.json``, written last through a temporary
file, fsync and rename. The manifest lists every file with its size and
XXH64 checksum, the source positions, the sink transaction handles, the job
graph (operators by uid, their tasks and parallelism), its fingerprints
(the whole graph, and its structure without parallelism), max_parallelism,
the key-group owners of the keyed operators, and a checksum of its own
content. A savepoint is the same, with ``"savepoint": true``. A checkpoint
whose manifest is missing, unreadable, altered or does not match its files
is never used: recovery falls back to the
previous complete one and logs a warning (logger ``fastops``) naming the
checkpoint skipped and why.
"""
from __future__ import annotations

import errno as _errno
import json
import logging
import os
import shutil
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from fastops.core.files import fsync_dir, write_durably
from fastops.core.hashing import hash_bytes
from fastops.runtime.errors import JobFailed

MANIFEST = "_manifest.json"
FORMAT_VERSION = 3
MODES = ("exactly_once", "at_least_once")

log = logging.getLogger("fastops")


def _checksum(data: bytes) -> str:
    return format(hash_bytes(data), "016x")


def _manifest_checksum(manifest: dict) -> str:
    """Checksum of a manifest's content (every field but the checksum itself)."""
    body = {k: v for k, v in manifest.items() if k != "checksum"}
    return _checksum(json.dumps(body, sort_keys=True).encode())


class CheckpointStorageError(JobFailed):
    """Writing a checkpoint failed (disk full, permissions...): names the
    storage path and the OS error; the partial checkpoint is removed."""

    def __init__(self, checkpoint_id: int, path: str, cause: OSError):
        self.operator = self.task = "checkpoint storage"
        self.batch = None
        self.path = path
        self.errno = cause.errno
        code = _errno.errorcode.get(cause.errno, "?") if cause.errno is not None else "?"
        RuntimeError.__init__(
            self, f"checkpoint storage: writing checkpoint {checkpoint_id} to {path!r} failed: "
                  f"[Errno {cause.errno} {code}] {cause.strerror or cause} "
                  f"(file {cause.filename!r}); the partial checkpoint was removed")


@dataclass
class SkippedCheckpoint:
    """A checkpoint that recovery could not use, and why."""

    path: str
    reason: str


@dataclass
class TaskSnapshot:
    """One task's part of a checkpoint."""

    position: Any = None  # source reader position (JSON-serialisable)
    operators: list = field(default_factory=list)  # bytes | None per chained operator
    sinks: dict = field(default_factory=dict)  # operator index -> pre-commit handle
    alignment_s: float = 0.0

    def state_bytes(self) -> int:
        """Bytes of operator state this task adds to the checkpoint."""
        return sum(len(s) for s in self.operators if s is not None)


@dataclass
class CheckpointStats:
    checkpoint_id: int
    duration_s: float
    alignment_s: float
    state_bytes: int


@dataclass
class Manifest:
    """A complete checkpoint, read back from disk (or held in memory: ``memory``)."""

    checkpoint_id: int
    path: str
    fingerprint: str
    finished: bool
    tasks: dict  # "chain/task" -> {"position", "operators": [file | None], "sinks": {...}}
    graph: Any = None  # the job graph it was taken from (PhysicalPlan.describe_graph)
    structure: str = ""  # the graph's fingerprint without parallelism
    max_parallelism: int | None = None
    owners: dict = field(default_factory=dict)  # operator uid -> key-group owners (keyed operators)
    savepoint: bool = False
    created: float = 0.0
    memory: dict | None = None  # (task key, operator index) -> bytes, for a checkpoint not on disk

    def operator_state(self, task_key: str, op_index: int) -> bytes | None:
        if self.memory is not None:
            return self.memory.get((task_key, op_index))
        entry = self.tasks[task_key]["operators"][op_index]
        if entry is None:
            return None
        with open(os.path.join(self.path, entry["file"]), "rb") as f:
            return f.read()

    def state_bytes(self) -> int:
        """Bytes of operator state it holds."""
        if self.memory is not None:
            return sum(len(b) for b in self.memory.values())
        return sum(op["size"] for t in self.tasks.values() for op in t["operators"] if op is not None)

    @classmethod
    def in_memory(cls, checkpoint_id: int, meta: dict, snapshots: dict[str, TaskSnapshot]) -> Manifest:
        """The manifest of a checkpoint that is not (or not only) on disk."""
        tasks = {k: {"position": snap.position, "operators": [None] * len(snap.operators),
                     "sinks": {str(i): h for i, h in snap.sinks.items()}} for k, snap in snapshots.items()}
        memory = {(k, i): state for k, snap in snapshots.items()
                  for i, state in enumerate(snap.operators) if state is not None}
        # positions as a checkpoint on disk gives them back (JSON: tuples become lists)
        tasks = json.loads(json.dumps(tasks))
        return cls(checkpoint_id, "<memory>", meta.get("fingerprint", ""), False, tasks, meta.get("graph"),
                   meta.get("structure", ""), meta.get("max_parallelism"), dict(meta.get("owners") or {}),
                   created=time.time(), memory=memory)


def write_snapshot(path: str, checkpoint_id: int, meta: dict, snapshots: dict[str, TaskSnapshot],
                   finished: bool = False, savepoint: bool = False) -> int:
    """Write one checkpoint into directory ``path`` (created; replaced if it
    exists), the manifest last; returns its state bytes. ``meta``: the job's
    fingerprints, graph, max_parallelism and key-group owners."""
    if os.path.exists(path):
        shutil.rmtree(path)
    os.makedirs(path)
    tasks: dict[str, Any] = {}
    total = 0
    for key, snap in snapshots.items():
        ops: list[dict[str, Any] | None] = []
        for i, state in enumerate(snap.operators):
            if state is None:
                ops.append(None)
                continue
            fname = f"{key.replace('/', '-')}-op{i}.state"
            write_durably(os.path.join(path, fname), state)
            ops.append({"file": fname, "size": len(state), "xxh64": _checksum(state)})
        total += snap.state_bytes()
        tasks[key] = {"position": snap.position, "operators": ops,
                      "sinks": {str(k): v for k, v in snap.sinks.items()}}
    manifest = {"format": FORMAT_VERSION, "checkpoint_id": checkpoint_id, **meta, "finished": finished,
                "savepoint": savepoint, "created": time.time(), "tasks": tasks}
    manifest["checksum"] = _manifest_checksum(manifest)
    tmp = os.path.join(path, MANIFEST + ".tmp")
    write_durably(tmp, json.dumps(manifest).encode())
    os.replace(tmp, os.path.join(path, MANIFEST))
    fsync_dir(path)
    return total


def load_snapshot(path: str) -> Manifest:
    """Read and verify the checkpoint or savepoint in directory ``path``;
    ValueError if it is incomplete, truncated or corrupt."""
    path = os.fspath(path)
    mpath = os.path.join(path, MANIFEST)
    try:
        with open(mpath, "rb") as f:
            raw = json.loads(f.read())
    except FileNotFoundError:
        what = "does not exist" if not os.path.exists(path) else "has no manifest (incomplete)"
        raise ValueError(f"checkpoint {path!r} {what}") from None
    except (OSError, ValueError) as exc:
        raise ValueError(f"checkpoint {path!r}: unreadable manifest: {exc}") from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT_VERSION:
        found = raw.get("format") if isinstance(raw, dict) else None
        raise ValueError(f"checkpoint {path!r}: manifest format {found!r}, this version reads "
                         f"format {FORMAT_VERSION}")
    if raw.get("checksum") != _manifest_checksum(raw):
        raise ValueError(f"checkpoint {path!r}: the manifest does not match its checksum "
                         "(altered or damaged)")
    for entry in raw["tasks"].values():
        for op in entry["operators"]:
            if op is None:
                continue
            fpath = os.path.join(path, op["file"])
            try:
                with open(fpath, "rb") as f:
                    data = f.read()
            except OSError:
                raise ValueError(f"checkpoint {path!r}: state file {op['file']!r} is missing") from None
            if len(data) != op["size"] or _checksum(data) != op["xxh64"]:
                raise ValueError(f"checkpoint {path!r}: state file {op['file']!r} is corrupt or truncated "
                                 f"({len(data)} bytes, expected {op['size']})")
    return Manifest(raw["checkpoint_id"], path, raw["fingerprint"], bool(raw["finished"]),
                    raw["tasks"], raw.get("graph"), raw.get("structure", ""), raw.get("max_parallelism"),
                    dict(raw.get("owners") or {}), bool(raw.get("savepoint")), float(raw.get("created", 0.0)))


class CheckpointStorage:
    """Checkpoints in one directory; keeps the ``retained`` newest."""

    def __init__(self, directory: str, retained: int = 3):
        if retained < 1:
            raise ValueError(f"checkpoints_retained must be >= 1, got {retained}")
        self.directory = os.fspath(directory)
        self.retained = retained
        os.makedirs(self.directory, exist_ok=True)

    def _dirs(self) -> list[tuple[int, str]]:
        out = []
        for name in os.listdir(self.directory):
            if name.startswith("chk-") and name[4:].isdigit():
                out.append((int(name[4:]), os.path.join(self.directory, name)))
        return sorted(out)

    def write(self, checkpoint_id: int, meta: dict, snapshots: dict[str, TaskSnapshot],
              finished: bool = False) -> int:
        """Write checkpoint ``checkpoint_id`` atomically; returns its state bytes.
        ``meta``: see ``write_snapshot``."""
        path = os.path.join(self.directory, f"chk-{checkpoint_id:06d}")
        try:
            total = write_snapshot(path, checkpoint_id, meta, snapshots, finished)
        except OSError as exc:
            shutil.rmtree(path, ignore_errors=True)  # never leave a partial chk-N behind
            raise CheckpointStorageError(checkpoint_id, path, exc) from exc
        self._cleanup()
        return total

    def _cleanup(self) -> None:
        complete = [(i, p) for i, p in self._dirs() if os.path.exists(os.path.join(p, MANIFEST))]
        keep = {i for i, _ in complete[-self.retained:]}
        newest = complete[-1][0] if complete else -1
        for i, p in self._dirs():
            if i not in keep and (i < newest):
                shutil.rmtree(p, ignore_errors=True)

    def load(self, path: str) -> Manifest:
        """Read and verify one checkpoint; ValueError if it is incomplete or corrupt."""
        return load_snapshot(path)

    def latest(self, skipped: list | None = None) -> Manifest | None:
        """The newest checkpoint that verifies. Each broken one is skipped with a
        warning (logger ``fastops``) and appended to ``skipped``."""
        for _, path in reversed(self._dirs()):
            try:
                return self.load(path)
            except ValueError as exc:
                log.warning("skipping checkpoint %s: %s", path, exc)
                if skipped is not None:
                    skipped.append(SkippedCheckpoint(path, str(exc)))
        return None

    def last_id(self) -> int:
        dirs = self._dirs()
        return dirs[-1][0] if dirs else 0


class Coordinator:
    """Triggers checkpoints, collects acknowledgements, writes and commits.

    ``request_stop()`` asks for a *stop* checkpoint: triggered at once, its
    barrier also pauses every source (no row is read after it), so once
    every task has acknowledged it the job holds no row in flight. It is
    written like any checkpoint (and to a savepoint directory when asked),
    the sinks commit it, and ``stopped`` then holds its manifest: the
    executor ends the attempt there, and the next one (a rescale) or a later
    run (a savepoint) starts from it.
    """

    def __init__(self, storage: CheckpointStorage | None, interval_s: float | None, meta: dict,
                 first_id: int, sinks: list, sources: list, expected: set[str]):
        self.storage = storage
        self.interval_s = interval_s
        self.meta = meta  # fingerprints, graph, max_parallelism, owners (see write_snapshot)
        self.next_id = first_id
        self.sinks = sinks  # TransactionalSink instances
        self.sources = sources  # SourceTask instances
        self.expected = expected  # task keys
        self.lock = threading.Lock()
        self.pending: int | None = None
        self.acks: dict[str, TaskSnapshot] = {}
        self.triggered_at = 0.0
        self.last_trigger = time.perf_counter()
        self.stats: list[CheckpointStats] = []
        self.any_finished = False
        self.final_handles: dict[str, dict] = {}
        self.stop_requested = False
        self.savepoint_path: str | None = None
        self.stop_id: int | None = None
        self.stopped: Manifest | None = None
        self.stopped_at = 0.0  # perf_counter when the stop checkpoint completed

    @property
    def fingerprint(self) -> str:
        return str(self.meta.get("fingerprint", ""))

    # -- called by the driver's thread -------------------------------------------
    def request_stop(self, savepoint_path: str | None = None) -> None:
        """Take a stop checkpoint as soon as none is in flight (see the class docs)."""
        with self.lock:
            self.stop_requested = True
            self.savepoint_path = savepoint_path

    def maybe_trigger(self) -> None:
        now = time.perf_counter()
        with self.lock:
            if self.pending is not None or self.any_finished or self.stop_id is not None:
                return
            stop = self.stop_requested
            if not stop and (self.storage is None or self.interval_s is None
                             or now - self.last_trigger < self.interval_s):
                return
            cp = self.pending = self.next_id
            self.next_id += 1
            self.acks = {}
            self.triggered_at = self.last_trigger = now
            if stop:
                self.stop_id = cp
        for src in self.sources:
            src.trigger(cp, stop)

    def poll(self) -> None:
        """Complete the pending checkpoint if every task acknowledged it."""
        with self.lock:
            cp = self.pending
            if cp is None or set(self.acks) != self.expected:
                return
            acks, self.acks, self.pending = self.acks, {}, None
        stop = cp == self.stop_id
        size = sum(a.state_bytes() for a in acks.values())
        if self.storage is not None:
            size = self.storage.write(cp, self.meta, acks)
        if stop and self.savepoint_path is not None:
            try:
                write_snapshot(self.savepoint_path, cp, self.meta, acks, savepoint=True)
            except OSError as exc:
                raise CheckpointStorageError(cp, self.savepoint_path, exc) from exc
        self.stats.append(CheckpointStats(cp, time.perf_counter() - self.triggered_at,
                                          max((a.alignment_s for a in acks.values()), default=0.0), size))
        for sink in self.sinks:
            sink.commit(cp)
        if stop:
            self.stopped = Manifest.in_memory(cp, self.meta, acks)
            self.stopped_at = time.perf_counter()

    def finish(self) -> None:
        """All tasks finished: the final checkpoint seals and commits the last epochs."""
        final = self.next_id
        self.next_id += 1
        if self.storage is not None:
            snaps = {k: TaskSnapshot(position=None, operators=[], sinks=h) for k, h in self.final_handles.items()}
            self.storage.write(final, self.meta, snaps, finished=True)
        for sink in self.sinks:
            sink.commit(final)
        for sink in self.sinks:
            sink.finished()

    # -- called by task threads ------------------------------------------------
    def ack(self, task_key: str, checkpoint_id: int, snapshot: TaskSnapshot) -> None:
        with self.lock:
            if checkpoint_id == self.pending:
                self.acks[task_key] = snapshot

    def task_finished(self, task_key: str, handles: dict) -> None:
        with self.lock:
            self.any_finished = True
            self.pending = None  # a checkpoint in flight can no longer complete
            self.final_handles[task_key] = handles
