"""Logical graph -> physical plan: chains of fused operators, parallel tasks,
channels between them, and ``explain()``."""
from __future__ import annotations

import difflib
import json
import threading
from dataclasses import dataclass, field
from typing import Any

from fastops.core.hashing import hash_bytes
from fastops.operators.base import OperatorContext
from fastops.runtime.channels import InputGate
from fastops.runtime.graph import Edge, Node, reachable
from fastops.runtime.metrics import TaskMetrics
from fastops.runtime.tasks import Chain, OperatorTask, OutputWriter, SourceTask, Task


def graph_fingerprint(graph: Any) -> str:
    """A short hash of ``PhysicalPlan.describe_graph()``."""
    return format(hash_bytes(json.dumps(graph, sort_keys=True).encode()), "016x")


def graph_difference(old: Any, new: Any) -> str:
    """What differs between two described graphs, in words: operators added
    or removed (matched by name, in order), then the changed fields of those
    that stayed (configuration, parallelism, schema, inputs); the first few."""
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
            fields = [k for k in ("config", "parallelism", "schema", "inputs") if a.get(k) != b.get(k)]
            if fields:
                changes = "; ".join(f"{k} {a.get(k)!r} in the checkpoint, {b.get(k)!r} now" for k in fields)
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


def _from_json(pos: Any) -> Any:
    """Positions come back from JSON with tuples turned into lists."""
    return tuple(pos) if isinstance(pos, list) else pos


def _make_operator(node: Node) -> Any:
    if node.factory is None:
        raise ValueError(f"operator {node.name!r} has no factory")
    return node.factory()


@dataclass(eq=False)
class PhysicalPlan:
    chains: list[ChainSpec]
    consumers: dict[int, list[tuple[Node, Edge]]]
    max_parallelism: int
    chain_of: dict[int, ChainSpec] = field(default_factory=dict)

    @classmethod
    def build(cls, sinks: list[Node], max_parallelism: int, chaining: bool = True) -> PhysicalPlan:
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
        for c in chains:
            for n in c.nodes:
                plan.chain_of[n.id] = c
        return plan

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
        """The job graph as JSON-able data: per operator its task, name,
        configuration, parallelism, source schema and inputs. Checkpoints store
        it, so a mismatch on restore can name what changed."""
        out = []
        for c in self.chains:
            for n in c.nodes:
                s = n.source.schema() if n.is_source else None
                out.append({
                    "task": c.index + 1, "operator": n.name, "config": n.config,
                    "parallelism": c.parallelism,
                    "schema": None if s is None else ", ".join(f"{f.name}: {f.type}" for f in s),
                    "inputs": [[e.partitioning, list(e.keys), e.tag, e.input_index,
                                self.chain_of[e.upstream.id].index + 1] for e in n.inputs]})
        return json.loads(json.dumps(out, default=str))  # configs as their JSON text

    def fingerprint(self) -> str:
        """Identifies the job graph: operators and their configuration,
        parallelism, exchanges, keys and source schemas."""
        return graph_fingerprint(self.describe_graph())

    def describe(self) -> list:
        return [f"Task {c.index + 1}: {c.name()} (parallelism {c.parallelism})" for c in self.chains]

    def instantiate(self, stop: threading.Event, channel_capacity: int | None,
                    positions: dict | None = None) -> list[Task]:
        """Create the tasks with their operators, gates, channels and writers;
        source readers start at ``positions[task key]`` when restoring. Setting
        ``stop`` ends every task (blocked sends and receives give up)."""
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
                    gates[(c.index, i)] = InputGate(stop)

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
                    w = OutputWriter(chans, how, e.keys, self.max_parallelism, metrics[(up.index, i)])
                    writers.setdefault((up.index, i, pos, e.tag), []).append(w)

        out: list[Task] = []
        for c in self.chains:
            for i in range(c.parallelism):
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
                m = metrics[(c.index, i)]
                chain.metrics = m
                m.operator_rows = chain.rows  # the chain counts, the sampler reads
                ctxs = [OperatorContext(n.name, i, c.parallelism, self.max_parallelism, m)
                        for n in c.nodes[offset:]]
                name = m.task
                key = f"{c.index}/{i}"
                if c.head.is_source:
                    start = (positions or {}).get(key)
                    reader = c.head.source.open(i, c.parallelism, _from_json(start))
                    idle = next((getattr(op, "idle_timeout_ms", None) for op in ops
                                 if getattr(op, "idle_timeout_ms", None) is not None), None)
                    task: Task = SourceTask(name, reader, chain, ctxs, m, idle, stop)
                else:
                    task = OperatorTask(name, gates[(c.index, i)], chain, ctxs, m, stop)
                task.key = key
                tasks[(c.index, i)] = task
                out.append(task)
        return out
