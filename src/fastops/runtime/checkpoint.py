"""Exactly-once checkpoints: the coordinator, the on-disk format, recovery.

Asynchronous barrier snapshots, as in Flink: the coordinator asks every source
task to inject ``CheckpointBarrier(id)``; a task with several inputs aligns the
barriers (exactly-once: an input whose barrier arrived is blocked until all
have; at-least-once: no blocking), snapshots its operators, forwards the
barrier and acknowledges. When every task has acknowledged, the coordinator
writes the checkpoint and then lets the sinks commit.

On disk (``checkpoint_dir/chk-000007/``): one file per operator state (the
operator's bytes, Arrow IPC for the built-in ones) and ``_manifest.json``,
written last through a temporary file, fsync and rename. The manifest lists
every file with its size and XXH64 checksum, the source positions, the sink
transaction handles, the job graph (and its fingerprint), and a checksum of
its own content. A checkpoint whose manifest is missing, unreadable, altered
or does not match its files is never used: recovery falls back to the
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
FORMAT_VERSION = 2
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
    """A complete checkpoint, read back from disk."""

    checkpoint_id: int
    path: str
    fingerprint: str
    finished: bool
    tasks: dict  # "chain/task" -> {"position", "operators": [file | None], "sinks": {...}}
    graph: Any = None  # the job graph it was taken from (PhysicalPlan.describe_graph)

    def operator_state(self, task_key: str, op_index: int) -> bytes | None:
        entry = self.tasks[task_key]["operators"][op_index]
        if entry is None:
            return None
        with open(os.path.join(self.path, entry["file"]), "rb") as f:
            return f.read()


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

    def write(self, checkpoint_id: int, fingerprint: str, snapshots: dict[str, TaskSnapshot],
              finished: bool = False, graph: Any = None) -> int:
        """Write checkpoint ``checkpoint_id`` atomically; returns its state bytes.
        ``graph`` describes the job (see ``PhysicalPlan.describe_graph``)."""
        path = os.path.join(self.directory, f"chk-{checkpoint_id:06d}")
        try:
            return self._write(path, checkpoint_id, fingerprint, snapshots, finished, graph)
        except OSError as exc:
            shutil.rmtree(path, ignore_errors=True)  # never leave a partial chk-N behind
            raise CheckpointStorageError(checkpoint_id, path, exc) from exc

    def _write(self, path: str, checkpoint_id: int, fingerprint: str,
               snapshots: dict[str, TaskSnapshot], finished: bool, graph: Any) -> int:
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
        manifest = {"format": FORMAT_VERSION, "checkpoint_id": checkpoint_id,
                    "fingerprint": fingerprint, "graph": graph, "finished": finished,
                    "created": time.time(), "tasks": tasks}
        manifest["checksum"] = _manifest_checksum(manifest)
        tmp = os.path.join(path, MANIFEST + ".tmp")
        write_durably(tmp, json.dumps(manifest).encode())
        os.replace(tmp, os.path.join(path, MANIFEST))
        fsync_dir(path)
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
        mpath = os.path.join(path, MANIFEST)
        try:
            with open(mpath, "rb") as f:
                raw = json.loads(f.read())
        except FileNotFoundError:
            raise ValueError(f"checkpoint {path!r} has no manifest (incomplete)") from None
        except (OSError, ValueError) as exc:
            raise ValueError(f"checkpoint {path!r}: unreadable manifest: {exc}") from None
        if not isinstance(raw, dict) or raw.get("format") != FORMAT_VERSION:
            raise ValueError(f"checkpoint {path!r}: unknown manifest format")
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
                    raise ValueError(f"checkpoint {path!r}: state file {op['file']!r} is corrupt "
                                     f"({len(data)} bytes, expected {op['size']})")
        return Manifest(raw["checkpoint_id"], path, raw["fingerprint"], bool(raw["finished"]),
                        raw["tasks"], raw.get("graph"))

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
    """Triggers checkpoints, collects acknowledgements, writes and commits."""

    def __init__(self, storage: CheckpointStorage | None, interval_s: float | None,
                 fingerprint: str, first_id: int, sinks: list, sources: list, expected: set[str],
                 graph: Any = None):
        self.storage = storage
        self.interval_s = interval_s
        self.fingerprint = fingerprint
        self.graph = graph
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

    # -- called by the executor loop -------------------------------------------
    def maybe_trigger(self) -> None:
        if self.storage is None or self.interval_s is None:
            return
        now = time.perf_counter()
        with self.lock:
            if self.pending is not None or self.any_finished or now - self.last_trigger < self.interval_s:
                return
            cp = self.pending = self.next_id
            self.next_id += 1
            self.acks = {}
            self.triggered_at = self.last_trigger = now
        for src in self.sources:
            src.pending_barrier = cp

    def poll(self) -> None:
        """Complete the pending checkpoint if every task acknowledged it."""
        with self.lock:
            cp = self.pending
            if cp is None or set(self.acks) != self.expected:
                return
            acks, self.acks, self.pending = self.acks, {}, None
        assert self.storage is not None  # only a checkpoint that was triggered is pending
        size = self.storage.write(cp, self.fingerprint, acks, graph=self.graph)
        self.stats.append(CheckpointStats(cp, time.perf_counter() - self.triggered_at,
                                          max((a.alignment_s for a in acks.values()), default=0.0), size))
        for sink in self.sinks:
            sink.commit(cp)

    def finish(self) -> None:
        """All tasks finished: the final checkpoint seals and commits the last epochs."""
        final = self.next_id
        self.next_id += 1
        if self.storage is not None:
            snaps = {k: TaskSnapshot(position=None, operators=[], sinks=h) for k, h in self.final_handles.items()}
            self.storage.write(final, self.fingerprint, snaps, finished=True, graph=self.graph)
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
