"""Logical graph -> physical plan: chains of fused operators, parallel tasks,
channels between them, and ``explain()``."""
from __future__ import annotations

import difflib
import json
import threading
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from fastops.core.hashing import hash_bytes
from fastops.core.partitioning import KeyGroups, assign_key_groups
from fastops.operators.base import OperatorContext
from fastops.runtime.channels import InputGate
from fastops.runtime.graph import Edge, Node, reachable
from fastops.runtime.metrics import TaskMetrics
from fastops.runtime.tasks import Chain, OperatorTask, OutputWriter, SourceTask, Task


def graph_fingerprint(graph: Any) -> str:
    """A short hash of ``PhysicalPlan.describe_graph()``."""
    return format(hash_bytes(json.dumps(graph, sort_keys=True).encode()), "016x")


def graph_structure(graph: Any) -> Any:
    """A described graph without what may change between runs of the same
    job: parallelism and the grouping of operators into tasks."""
    if not isinstance(graph, list):
        return graph
    return [{k: v for k, v in op.items() if k not in ("task", "slot", "parallelism")} for op in graph]


DIFFERENCES = ("config", "parallelism", "schema", "inputs")


def graph_difference(old: Any, new: Any, fields: tuple[str, ...] = DIFFERENCES) -> str:
    """What differs between two described graphs, in words: operators added
    or removed (matched by name, in order), then the changed ``fields`` of
    those that stayed; the first few."""
    if not isinstance(old, list):
        return "the checkpoint does not describe its job graph"
    lines = []
    names = difflib.SequenceMatcher(a=[op.get("operator") for op in old],
                                    b=[op.get("operator") for op in new], autojunk=False)
    for tag, i1, i2, j1, j2 in names.get_opcodes():
        if tag != "equal":
            lines += [f"operator {op.get('operator')!r} removed" for op in old[i1:i2]]
            lines += [f"operator {op.get('operator')!r} added" for op in new[j1:j2]]
            continue
        for a, b in zip(old[i1:i2], new[j1:j2]):
            changed = [k for k in fields if a.get(k) != b.get(k)]
            if changed:
                changes = "; ".join(f"{k} {a.get(k)!r} in the checkpoint, {b.get(k)!r} now" for k in changed)
                lines.append(f"operator {a.get('operator')!r}: {changes}")
    if not lines:
        return "the same operators (a fingerprint of another format)"
    return "; ".join(lines[:4]) + ("; ..." if len(lines) > 4 else "")


@dataclass(eq=False)
class ChainSpec:
    """Logical nodes fused into one task type, run by ``parallelism`` tasks."""

    nodes: list[Node]
    index: int

    @property
    def head(self) -> Node:
        return self.nodes[0]

    @property
    def parallelism(self) -> int:
        return self.head.parallelism

    def name(self) -> str:
        return " -> ".join(n.name for n in self.nodes)


def effective_partitioning(edge: Edge, downstream: Node) -> str:
    """How ``edge`` distributes rows: forward needs equal parallelism, otherwise rows are rebalanced."""
    if edge.partitioning == "forward" and edge.upstream.parallelism != downstream.parallelism:
        return "rebalance"
    return edge.partitioning


def from_json(pos: Any) -> Any:
    """Positions come back from JSON with tuples turned into lists."""
    return tuple(pos) if isinstance(pos, list) else pos


def _make_operator(node: Node) -> Any:
    if node.factory is None:
        raise ValueError(f"operator {node.name!r} has no factory")
    return node.factory()


def is_keyed(chain: ChainSpec) -> bool:
    """Whether the chain's tasks get their rows by key (a hash exchange into its head)."""
    return any(e.partitioning == "hash" for e in chain.head.inputs)


@dataclass(eq=False)
class PhysicalPlan:
    """Chains of operators and how tasks connect. ``uid`` numbers the
    operators in topological order: it names an operator's state across
    plans of the same job at other parallelisms. ``owners`` holds, per keyed
    chain (by index), the task that owns each key group."""

    chains: list[ChainSpec]
    consumers: dict[int, list[tuple[Node, Edge]]]
    max_parallelism: int
    chain_of: dict[int, ChainSpec] = field(default_factory=dict)
    uid: dict[int, int] = field(default_factory=dict)  # node id -> operator uid
    owners: dict[int, np.ndarray] = field(default_factory=dict)

    @classmethod
    def build(cls, sinks: list[Node], max_parallelism: int, chaining: bool = True,
              owners: dict[int, np.ndarray] | None = None) -> PhysicalPlan:
        """The plan of the graph ending in ``sinks``; ``owners`` (by operator
        uid of a keyed chain's head) replaces Flink's contiguous key-group
        ranges where given."""
        nodes = reachable(sinks)
        consumers: dict[int, list[tuple[Node, Edge]]] = {n.id: [] for n in nodes}
        for n in nodes:
            for e in n.inputs:
                consumers[e.upstream.id].append((n, e))

        def chainable(node: Node) -> Node | None:
            main = [(c, e) for c, e in consumers[node.id] if e.tag is None]
            if not chaining or len(main) != 1:
                return None
            c, e = main[0]
            if (e.partitioning == "forward" and len(c.inputs) == 1
                    and c.parallelism == node.parallelism):
                return c
            return None

        chained_into: set[int] = set()
        for n in nodes:
            nxt = chainable(n)
            if nxt is not None:
                chained_into.add(nxt.id)
        chains: list[ChainSpec] = []
        for n in nodes:
            if n.id in chained_into:
                continue
            members = [n]
            while (nxt := chainable(members[-1])) is not None:
                members.append(nxt)
            chains.append(ChainSpec(members, len(chains)))
        plan = cls(chains, consumers, max_parallelism)
        plan.uid = {n.id: i for i, n in enumerate(nodes)}
        for c in chains:
            for n in c.nodes:
                plan.chain_of[n.id] = c
            if is_keyed(c):
                given = (owners or {}).get(plan.uid[c.head.id])
                plan.owners[c.index] = (given if given is not None
                                        else assign_key_groups(c.parallelism, max_parallelism))
        return plan

    def key_groups(self, chain: ChainSpec, index: int) -> KeyGroups:
        """The key groups task ``index`` of ``chain`` owns (contiguous ranges for a chain that is not keyed)."""
        owners = self.owners.get(chain.index)
        if owners is None:
            owners = assign_key_groups(chain.parallelism, self.max_parallelism)
        return KeyGroups.of_task(owners, index)

    def owners_by_uid(self) -> dict[str, list[int]]:
        """The key-group owners of every operator of a keyed chain, by uid (JSON-able)."""
        return {str(self.uid[n.id]): self.owners[c.index].tolist()
                for c in self.chains if c.index in self.owners for n in c.nodes}

    def explain(self) -> str:
        lines = ["== Physical plan =="]
        for c in self.chains:
            kind = "chained " if len(c.nodes) > 1 else ""
            lines.append(f"Task {c.index + 1}: {c.name()}  [{kind}parallelism {c.parallelism}]")
            for e in c.head.inputs:
                src = self.chain_of[e.upstream.id]
                how = effective_partitioning(e, c.head)
                how = e.describe() if how == e.partitioning else how
                lines.append(f"    <- {how} exchange from Task {src.index + 1} ({e.upstream.name})")
        return "\n".join(lines)

    def describe_graph(self) -> list:
        """The job graph as JSON-able data, in plan order: per operator its
        uid, task, position in the task's chain (``slot``: None for a
        source), name, configuration, parallelism, source schema and inputs
        (by upstream uid). Checkpoints store it: a restore finds each
        operator's state by uid, and a mismatch names what changed."""
        out = []
        for c in self.chains:
            offset = 1 if c.head.is_source else 0
            for k, n in enumerate(c.nodes):
                s = n.source.schema() if n.is_source else None
                out.append({
                    "uid": self.uid[n.id], "task": c.index + 1, "slot": None if n.is_source else k - offset,
                    "operator": n.name, "config": n.config, "parallelism": c.parallelism,
                    "schema": None if s is None else ", ".join(f"{f.name}: {f.type}" for f in s),
                    "inputs": [[e.partitioning, list(e.keys), e.tag, e.input_index,
                                self.uid[e.upstream.id]] for e in n.inputs]})
        return json.loads(json.dumps(out, default=str))  # configs as their JSON text

    def structure(self) -> str:
        """Identifies the job apart from its parallelism: restoring a
        checkpoint of the same structure at other parallelisms moves state."""
        return graph_fingerprint(graph_structure(self.describe_graph()))

    def fingerprint(self) -> str:
        """Identifies the job graph: operators and their configuration,
        parallelism, exchanges, keys and source schemas."""
        return graph_fingerprint(self.describe_graph())

    def checkpoint_meta(self) -> dict[str, Any]:
        """What a checkpoint of this plan records about the job (see ``checkpoint.write_snapshot``)."""
        graph = self.describe_graph()
        return {"fingerprint": graph_fingerprint(graph), "structure": graph_fingerprint(graph_structure(graph)),
                "graph": graph, "max_parallelism": self.max_parallelism, "owners": self.owners_by_uid()}

    def describe(self) -> list:
        return [f"Task {c.index + 1}: {c.name()} (parallelism {c.parallelism})" for c in self.chains]

    def instantiate(self, stop: threading.Event, channel_capacity: int | None,
                    positions: dict | None = None, only: Collection[str] | None = None,
                    remote: Callable[[str, int, Any], Any] | None = None,
                    gate: Callable[[threading.Event], InputGate] = InputGate) -> list[Task]:
        """Create the tasks with their operators, gates, channels and writers;
        source readers start at ``positions[task key]`` when restoring. Setting
        ``stop`` ends every task (blocked sends and receives give up).

        ``only``: create just the tasks of those keys ("chain/task"), as a
        process of their own runs them; ``remote(receiver key, channel index,
        local channel)`` then gives the sending end of each of their output
        channels into a task not among them (the channel index is the
        receiver's, numbered as here); ``gate`` makes the input gates."""
        tasks: dict[tuple[int, int], Task] = {}
        gates: dict[tuple[int, int], InputGate] = {}
        metrics: dict[tuple[int, int], TaskMetrics] = {}
        for c in self.chains:
            for i in range(c.parallelism):
                metrics[(c.index, i)] = TaskMetrics(
                    task=f"{c.name()}[{i + 1}/{c.parallelism}]", vertex=c.index, subtask=i,
                    parallelism=c.parallelism, operators=tuple(n.name for n in c.nodes),
                    is_source=c.head.is_source)
                if not c.head.is_source:
                    gates[(c.index, i)] = gate(stop)

        # writers per (chain, task, node position, tag) -> list of OutputWriter
        writers: dict[tuple[int, int, int, str | None], list[OutputWriter]] = {}
        for c in self.chains:
            for e in c.head.inputs:
                up = self.chain_of[e.upstream.id]
                pos = up.nodes.index(e.upstream)
                how = effective_partitioning(e, c.head)
                for i in range(up.parallelism):
                    if how == "forward":
                        chans = [gates[(c.index, i)].new_channel(channel_capacity, e.input_index)]
                    else:
                        chans = [gates[(c.index, j)].new_channel(channel_capacity, e.input_index)
                                 for j in range(c.parallelism)]
                    if remote is not None and only is not None and f"{up.index}/{i}" in only:
                        targets = [i] if how == "forward" else list(range(c.parallelism))
                        chans = [ch if f"{c.index}/{j}" in only else remote(f"{c.index}/{j}", ch.index, ch)
                                 for j, ch in zip(targets, chans)]
                    w = OutputWriter(chans, how, e.keys, self.max_parallelism, metrics[(up.index, i)],
                                     self.owners.get(c.index))
                    writers.setdefault((up.index, i, pos, e.tag), []).append(w)

        out: list[Task] = []
        for c in self.chains:
            for i in range(c.parallelism):
                if only is not None and f"{c.index}/{i}" not in only:
                    continue
                offset = 1 if c.head.is_source else 0
                ops = [_make_operator(n) for n in c.nodes[offset:]]
                last = len(c.nodes) - 1
                main = writers.get((c.index, i, last, None), [])
                sides = []
                for k in range(offset, len(c.nodes)):
                    routes = {tag: ws for (ci, ti, pos, tag), ws in writers.items()
                              if ci == c.index and ti == i and pos == k and tag is not None}
                    sides.append(routes)
                chain = Chain(ops, main, sides)
                chain.has_sink = any(n.is_sink for n in c.nodes)
                m = metrics[(c.index, i)]
                chain.metrics = m
                m.operator_rows = chain.rows  # the chain counts, the sampler reads
                ctxs = [OperatorContext(n.name, i, c.parallelism, self.max_parallelism, m)
                        for n in c.nodes[offset:]]
                name = m.task
                key = f"{c.index}/{i}"
                if c.head.is_source:
                    start = (positions or {}).get(key)
                    reader = c.head.source.open(i, c.parallelism, from_json(start))
                    idle = next((getattr(op, "idle_timeout_ms", None) for op in ops
                                 if getattr(op, "idle_timeout_ms", None) is not None), None)
                    task: Task = SourceTask(name, reader, chain, ctxs, m, idle, stop)
                else:
                    task = OperatorTask(name, gates[(c.index, i)], chain, ctxs, m, stop)
                task.key = key
                tasks[(c.index, i)] = task
                out.append(task)
        return out
