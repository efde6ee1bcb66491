"""The logical job graph that the DataStream API builds."""
from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass, field
from typing import Any, Callable

PARTITIONINGS = ("forward", "hash", "rebalance", "broadcast")

_ids = itertools.count(1)


@dataclass(eq=False)
class Edge:
    """An input of a node: where rows come from and how they are distributed."""

    upstream: Node
    partitioning: str = "forward"
    keys: tuple[str, ...] = ()
    tag: str | None = None  # a side output of the upstream node
    input_index: int = 0  # which input of a multi-input node (join: 0 left, 1 right)

    def __post_init__(self) -> None:
        if self.partitioning not in PARTITIONINGS:
            raise ValueError(f"unknown partitioning {self.partitioning!r}; expected one of {PARTITIONINGS}")
        if self.partitioning == "hash" and not self.keys:
            raise ValueError("a hash exchange needs key columns")

    def describe(self) -> str:
        s = f"hash({', '.join(self.keys)})" if self.partitioning == "hash" else self.partitioning
        return s + (f" [side output {self.tag!r}]" if self.tag else "")


@dataclass(eq=False)
class Node:
    """One logical operator (or source) with its parallelism and inputs."""

    name: str
    parallelism: int
    factory: Callable[[], Any] | None = None  # -> Operator
    source: Any = None  # a connectors.Source for source nodes
    inputs: list[Edge] = field(default_factory=list)
    is_sink: bool = False
    config: Any = None  # JSON-able operator configuration: part of the job's fingerprint
    # a sink's in-memory result (``reset()`` before a run from the start, ``table()`` after)
    output: Any = None
    id: int = field(default_factory=lambda: next(_ids))

    @property
    def is_source(self) -> bool:
        return self.source is not None

    def label(self) -> str:
        return f"{self.name}#{self.id}"


def identity(fn: Any) -> str:
    """A user function's identity for the job fingerprint: where it is defined
    (module and qualified name); its code is not compared."""
    target = getattr(fn, "func", fn)  # functools.partial
    module = getattr(target, "__module__", None) or type(target).__module__
    name = getattr(target, "__qualname__", None) or type(target).__qualname__
    return f"{module}.{name}"


def with_parallelism(sinks: list[Node], parallelism: dict[int, int]) -> list[Node]:
    """A copy of the graph ending in ``sinks`` whose nodes (by id) run at
    ``parallelism`` where given; nodes keep their ids, factories, sources and
    outputs (the copy is the same job)."""
    copies: dict[int, Node] = {}
    for n in reachable(sinks):
        inputs = [dataclasses.replace(e, upstream=copies[e.upstream.id]) for e in n.inputs]
        copies[n.id] = dataclasses.replace(n, parallelism=parallelism.get(n.id, n.parallelism), inputs=inputs)
    return [copies[s.id] for s in sinks]


def reachable(sinks: list[Node]) -> list[Node]:
    """Every node the sinks depend on, in topological order (sources first)."""
    order: list[Node] = []
    seen: set[int] = set()
    for sink in sinks:  # iterative depth-first search: no closure, no reference cycle
        stack: list[tuple[Node, int]] = [(sink, 0)]
        while stack:
            node, i = stack.pop()
            if i == 0:
                if node.id in seen:
                    continue
                seen.add(node.id)
            if i < len(node.inputs):
                stack.append((node, i + 1))
                stack.append((node.inputs[i].upstream, 0))
            else:
                order.append(node)
    return order
