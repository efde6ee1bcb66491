"""The operator protocol: what every task runs, one batch at a time.

An operator instance lives in one parallel task. Each method returns a list of
outputs: record batches for the main output, ``Tagged(tag, batch)`` for a side
output, and (for watermark assigners only) ``Watermark`` messages. The task
forwards watermarks itself after ``on_watermark``.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from fastops.core.arrow import as_batch
from fastops.core.partitioning import KeyGroups


@dataclass(frozen=True)
class Tagged:
    """A batch for the side output ``tag`` (e.g. ``"late"``)."""

    tag: str
    batch: pa.RecordBatch


@dataclass
class OperatorContext:
    """What an operator knows about the task it runs in."""

    operator: str
    task_index: int
    parallelism: int
    max_parallelism: int
    metrics: Any = None  # the task's TaskMetrics
    extra: dict = field(default_factory=dict)

    @property
    def task_name(self) -> str:
        return f"{self.operator}[{self.task_index + 1}/{self.parallelism}]"


class Operator:
    """Base class: a pass-through that holds no state."""

    name: str = "operator"
    generates_watermarks: bool = False  # True: drops upstream watermarks, emits its own
    # True: state that is not keyed combines across tasks (a watermark: the
    # least), so the operator may change its parallelism without a key_by
    state_combines: bool = False

    def open(self, ctx: OperatorContext) -> None:
        self.ctx = ctx

    def process(self, batch: pa.RecordBatch) -> list:
        return [batch]

    def process_input(self, input_index: int, batch: pa.RecordBatch) -> list:
        """Multi-input operators (join) override this; others ignore the index."""
        return self.process(batch)

    def on_watermark(self, t_ms: int) -> list:
        return []

    def close(self) -> list:
        """End of input: emit whatever is still held."""
        return []

    def snapshot(self) -> bytes | None:
        """Operator state as bytes (never pickled code), or None if stateless."""
        return None

    def restore(self, state: bytes | None) -> None:
        if state is not None:
            raise ValueError(f"operator {self.name!r} is stateless but got state to restore")

    def restore_groups(self, states: Sequence[bytes | None], groups: KeyGroups) -> None:
        """Restore at another parallelism: ``states`` are the snapshots of the
        earlier tasks (those that owned any of ``groups``; every earlier task
        for an operator whose state is not keyed), ``groups`` the key groups
        this task now owns. A keyed operator keeps exactly the state of the
        keys in ``groups``; one whose state is not keyed combines what it
        holds (a watermark: the minimum). This default accepts only no state."""
        if any(s is not None for s in states):
            raise ValueError(f"operator {self.name!r} holds state that is not partitioned by key, "
                             "so it cannot be restored at another parallelism")


class OperatorContractError(TypeError):
    """A user function returned something the operator cannot use."""


def check_batch(value: Any, operator: str, what: str = "return") -> pa.RecordBatch:
    """The user's function must give a RecordBatch (a Table is combined into one)."""
    if isinstance(value, (pa.RecordBatch, pa.Table)):
        return as_batch(value)
    raise OperatorContractError(
        f"{operator}: the function must {what} a pyarrow.RecordBatch, got {type(value).__name__}"
    )
