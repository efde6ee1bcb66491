"""A keyed changelog operator snapshotted at a cut of its input and restored,
whole or split over two tasks by key group, gives the uninterrupted output."""
from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa

from fastops.core.partitioning import KeyGroups
from fastops.table.changelog import OP_COLUMN


def feed(op, batches: Sequence[pa.RecordBatch]) -> list:
    """Per batch, the sorted (row kind, row) pairs ``op`` emitted."""
    out = []
    for b in batches:
        rows = [(r.pop(OP_COLUMN), tuple(r.values())) for x in op.process(b) for r in x.to_pylist()]
        out.append(sorted(rows, key=str))
    return out


def assert_restores_at(make: Callable, batches: Sequence[pa.RecordBatch], cut: int, keys: list[str]) -> None:
    """``make()``'s output over ``batches`` equals: the first ``cut`` batches, a
    snapshot, then the rest on a restored operator, or on two operators that
    each restored the key groups of one half (by ``keys``)."""
    whole = feed(make(), batches)
    first = make()
    head = feed(first, batches[:cut])
    state = first.snapshot()
    second = make()
    second.restore(state)
    assert head + feed(second, batches[cut:]) == whole
    parts = []
    for p in range(2):
        groups = KeyGroups(np.arange(128) % 2 == p)
        op = make()
        op.restore_groups([state], groups)
        parts.append(feed(op, [b.filter(pa.array(groups.mask(b, keys))) for b in batches[cut:]]))
    split = [sorted(a + b, key=str) for a, b in zip(*parts)]
    assert head + split == whole
