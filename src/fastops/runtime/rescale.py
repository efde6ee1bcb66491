"""Restoring a checkpoint into a plan: at the parallelism it was taken with,
or at another one (state moves by key group).

A checkpoint names each operator's state by the operator's uid (its place in
the job graph), so the state of an operator is found whatever tasks it now
shares. When an operator runs at the parallelism and key-group assignment of
the checkpoint, task ``i`` gets the state of task ``i``. Otherwise every new
task gets, through ``Operator.restore_groups``, the snapshots of the earlier
tasks that owned any of its key groups and keeps the keys of its own;
sources get their unread splits back, spread over the new tasks
(``Source.rescale_positions``); the sinks' pending transactions of the
checkpoint are committed (by the first new task) before anything runs.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fastops.connectors.base import is_transactional
from fastops.core.partitioning import assign_key_groups
from fastops.core.window.aggregator import State
from fastops.operators.base import Operator
from fastops.operators.state import unpack_state
from fastops.operators.window import Shards
from fastops.runtime.checkpoint import Manifest
from fastops.runtime.plan import ChainSpec, PhysicalPlan, from_json, is_keyed
from fastops.runtime.tasks import OperatorError, Task


@dataclass
class RescaleRecord:
    """One change of parallelism: a live ``rescale()`` or a restore at other parallelisms."""

    checkpoint_id: int
    started: float  # time.time() when it was asked for (or the restore began)
    parallelism_before: dict[str, int]  # operator name -> parallelism
    parallelism_after: dict[str, int]
    key_groups_moved: int = 0  # over the keyed operators: key groups whose owner changed
    key_groups: int = 0  # over the keyed operators: key groups in all
    state_bytes: int = 0  # the checkpoint's operator state
    bytes_moved: int = 0  # state of the key groups that changed owner (each task's share, by key groups)
    bytes_handed: int = 0  # snapshot bytes given to a task other than the one that took them
    pause_ms: float = 0.0  # from the stop checkpoint's completion to every new task running
    live: bool = True  # False: a restore of a checkpoint or savepoint at other parallelisms
    moves: dict[str, int] = field(default_factory=dict)  # keyed operator -> key groups moved

    def as_dict(self) -> dict[str, Any]:
        return {"checkpoint_id": self.checkpoint_id, "started": self.started, "live": self.live,
                "parallelism_before": self.parallelism_before, "parallelism_after": self.parallelism_after,
                "key_groups_moved": self.key_groups_moved, "key_groups": self.key_groups,
                "state_bytes": self.state_bytes, "bytes_moved": self.bytes_moved,
                "bytes_handed": self.bytes_handed, "pause_ms": self.pause_ms, "moves": dict(self.moves)}


def parallelism_of(graph: list) -> dict[str, int]:
    """Operator name (``name#uid`` where names repeat) -> parallelism, of a described graph."""
    names = [op["operator"] for op in graph]
    return {(n if names.count(n) == 1 else f"{n}#{op['uid']}"): op["parallelism"] for n, op in zip(names, graph)}


def not_rescalable(node: Any, plan: PhysicalPlan) -> str | None:
    """Why ``node`` (of ``plan``) cannot change its parallelism, or None: an
    operator with state it cannot share out by key group, or with state but
    no key (a window over all rows, as Flink's windowAll: its tasks would
    each hold a part of what must be one)."""
    if node.factory is None or node.is_source:
        return None
    cls = type(node.factory())
    if cls.snapshot is Operator.snapshot:
        return None
    if cls.restore_groups is Operator.restore_groups:
        return "its state is not partitioned by key group"
    if not cls.state_combines and not is_keyed(plan.chain_of[node.id]):
        return "it keeps state but its input is not keyed (key_by first to run it in parallel)"
    return None


def check_rescalable(nodes: list[Any], plan: PhysicalPlan) -> None:
    """ValueError naming the first of ``nodes`` (graph nodes of ``plan``, the
    plan they run in now, whose parallelism changes) that cannot change it."""
    for node in nodes:
        why = not_rescalable(node, plan)
        if why is not None:
            raise ValueError(f"operator {node.name!r} cannot change its parallelism: {why}")


def next_owners(manifest: Manifest, parallelism: dict[int, int], max_parallelism: int,
                how: str) -> dict[int, np.ndarray]:
    """Key-group owners, by operator uid, for the keyed operators of a plan
    that runs them at ``parallelism`` (by uid) after ``manifest``: one at its
    earlier parallelism keeps its table, one at another gets ``how``'s."""
    before = {op["uid"]: op["parallelism"] for op in manifest.graph or []}
    out = {}
    for uid_s, old in manifest.owners.items():
        uid = int(uid_s)
        p = parallelism.get(uid)
        if p is None:
            continue
        previous = np.asarray(old, dtype=np.int32)
        out[uid] = previous if before.get(uid) == p else assign_key_groups(p, max_parallelism, previous, how)
    return out


class StateAssignment:
    """Which state every task of ``plan`` restores from ``manifest``."""

    def __init__(self, plan: PhysicalPlan, manifest: Manifest):
        self.plan = plan
        self.manifest = manifest
        self.old = {op["uid"]: op for op in manifest.graph or []}
        self.new_owners = {str(k): v for k, v in plan.owners_by_uid().items()}
        self.same = (manifest.fingerprint == plan.fingerprint() and self.new_owners == manifest.owners)
        self.record: RescaleRecord | None = None
        if not self.same:
            self.record = RescaleRecord(manifest.checkpoint_id, time.time(), parallelism_of(manifest.graph or []),
                                        parallelism_of(plan.describe_graph()), live=False,
                                        state_bytes=manifest.state_bytes())
            self._count_moves()

    # -- what moves ------------------------------------------------------------------
    def _old_owners(self, uid: int) -> np.ndarray | None:
        old = self.manifest.owners.get(str(uid))
        return None if old is None else np.asarray(old, dtype=np.int64)

    def _count_moves(self) -> None:
        rec = self.record
        assert rec is not None
        for c in self.plan.chains:
            new = self.plan.owners.get(c.index)
            for n in c.nodes:
                uid = self.plan.uid[n.id]
                old = self._old_owners(uid)
                if new is None or old is None:
                    continue
                moved = old != new
                if n is c.head:
                    rec.moves[n.name] = int(moved.sum())
                    rec.key_groups_moved += int(moved.sum())
                    rec.key_groups += len(old)
                slot = self.old[uid]["slot"]
                task = self.old[uid]["task"] - 1
                for i in range(self.old[uid]["parallelism"]):
                    entry = self.manifest.tasks[f"{task}/{i}"]["operators"][slot] if slot is not None else None
                    size = (entry or {}).get("size") if self.manifest.memory is None else len(
                        self.manifest.memory.get((f"{task}/{i}", slot), b""))
                    mine = old == i
                    if size and mine.any():
                        rec.bytes_moved += int(size * (moved & mine).sum() / mine.sum())

    # -- sources -----------------------------------------------------------------------
    def positions(self) -> dict[str, Any]:
        """The start position of every source task, by task key."""
        if self.same:
            return {k: from_json(v["position"]) for k, v in self.manifest.tasks.items()}
        out: dict[str, Any] = {}
        for c in self.plan.chains:
            if not c.head.is_source:
                continue
            old = self.old[self.plan.uid[c.head.id]]
            task, p = old["task"] - 1, old["parallelism"]
            before = [from_json(self.manifest.tasks[f"{task}/{i}"]["position"]) for i in range(p)]
            if p == c.parallelism:
                after = before
            else:
                rescale = getattr(c.head.source, "rescale_positions", None)
                if rescale is None:
                    raise ValueError(f"source {c.head.name!r} cannot change its parallelism "
                                     f"({p} in the checkpoint, {c.parallelism} now)")
                after = rescale(before, c.parallelism)
            for j, pos in enumerate(after):
                out[f"{c.index}/{j}"] = pos
        return out

    # -- operators ---------------------------------------------------------------------
    def restore(self, task: Task, chain: ChainSpec, index: int) -> None:
        """Load the state of task ``index`` of ``chain`` (its sinks: recover)."""
        manifest = self.manifest
        if self.same:
            task.restore(manifest.tasks.get(task.key, {}), manifest)
            return
        offset = 1 if chain.head.is_source else 0
        for k, op in enumerate(task.chain.operators):
            uid = self.plan.uid[chain.nodes[offset + k].id]
            old = self.old[uid]
            old_task, slot, p = old["task"] - 1, old["slot"], old["parallelism"]
            keys = [f"{old_task}/{i}" for i in range(p)]
            if is_transactional(op):  # every handle of the checkpoint, committed once
                handles = [manifest.tasks[key].get("sinks", {}).get(str(slot)) for key in keys] if index == 0 else []
                op.recover([h for h in handles if h is not None], manifest.checkpoint_id)
                continue
            if manifest.finished:
                continue
            try:
                self._restore_operator(op, chain, index, uid, keys, slot)
            except Exception as exc:
                raise OperatorError(op.name, None, exc) from exc

    def _restore_operator(self, op: Any, chain: ChainSpec, index: int, uid: int, keys: list[str],
                          slot: int) -> None:
        old_owners = self._old_owners(uid)
        new_owners = self.plan.owners.get(chain.index)
        unchanged = (old_owners is None and new_owners is None) or (
            old_owners is not None and new_owners is not None and np.array_equal(old_owners, new_owners))
        if len(keys) == chain.parallelism and unchanged:
            op.restore(self.manifest.operator_state(keys[index], slot))  # this operator did not change
            return
        groups = self.plan.key_groups(chain, index)
        if old_owners is not None:  # keyed: the earlier tasks that owned any of these key groups
            earlier = sorted(set(old_owners[groups.owned].tolist()))
        else:
            earlier = list(range(len(keys)))
        states = [self.manifest.operator_state(keys[i], slot) for i in earlier]
        if self.record is not None:
            self.record.bytes_handed += sum(len(s) for i, s in zip(earlier, states) if s is not None and i != index)
        op.restore_groups(states, groups)


def _ranges(groups: np.ndarray) -> str:
    """Sorted key groups as ranges: ``0-41, 85, 90-95``."""
    if len(groups) == 0:
        return "-"
    breaks = np.flatnonzero(np.diff(groups) != 1) + 1
    parts = []
    for run in np.split(groups, breaks):
        parts.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
    return ", ".join(parts)


def _keys_held(state: bytes | None) -> int | None:
    """Keys a window, aggregate or keyed process operator's state holds (None: another kind of state)."""
    if state is None:
        return 0
    try:
        pieces, _ = Shards._pieces(state)
        return sum(State.from_bytes(data).keys.num_rows for _, _, data in pieces)
    except Exception:  # not an aggregator's state
        pass
    try:
        keys = unpack_state("keyed process", state)[0].get("keys")
        return keys.num_rows if keys is not None else 0
    except Exception:  # another kind: its operator alone can read it
        return None


def describe_snapshot(manifest: Manifest) -> dict[str, Any]:
    """What a checkpoint or savepoint holds, as plain data: the job's
    fingerprints and max_parallelism, and per operator its parallelism and
    per task its key groups, state bytes and keys held (where known)."""
    operators = []
    for op in manifest.graph or []:
        owners = manifest.owners.get(str(op["uid"]))
        tasks = []
        for i in range(op["parallelism"]):
            key = f"{op['task'] - 1}/{i}"
            state = manifest.operator_state(key, op["slot"]) if op["slot"] is not None else None
            entry: dict[str, Any] = {"task": i, "state_bytes": len(state) if state is not None else 0,
                     "keys": _keys_held(state) if owners is not None else None}
            if owners is not None:
                mine = np.flatnonzero(np.asarray(owners) == i)
                entry["key_groups"] = len(mine)
                entry["key_group_ranges"] = _ranges(mine)
            if op["slot"] is None:
                entry["position"] = manifest.tasks.get(key, {}).get("position")
            tasks.append(entry)
        keys: list[int | None] = [t["keys"] for t in tasks]
        operators.append({"uid": op["uid"], "name": op["operator"], "parallelism": op["parallelism"],
                          "keyed": owners is not None, "schema": op.get("schema"),
                          "state_bytes": sum(t["state_bytes"] for t in tasks),
                          "keys": sum(k for k in keys if k is not None) if None not in keys else None,
                          "tasks": tasks})
    return {"path": manifest.path, "savepoint": manifest.savepoint, "checkpoint_id": manifest.checkpoint_id,
            "created": manifest.created, "finished": manifest.finished, "fingerprint": manifest.fingerprint,
            "structure": manifest.structure, "max_parallelism": manifest.max_parallelism,
            "state_bytes": manifest.state_bytes(), "operators": operators}
