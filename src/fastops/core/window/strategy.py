"""The interface behind :class:`~fastops.core.window.aggregator.WindowAggregator`:
one strategy per kind of window.

The aggregator checks batches, holds rows, reads keys and runs the
aggregates; a strategy decides which slot each row goes to, which slots a
watermark fires and purges, and what a snapshot holds of its own. Everything
the strategies share (key table, slot table, aggregate records, late rows,
output rows) is the :class:`~fastops.core.window.store.WindowStore` each is
given.

- :class:`~fastops.core.window.panes.PaneWindows`: tumbling and sliding
  windows over panes (and, for sliding windows, the pane stacks).
- :class:`~fastops.core.window.sessions.SessionWindows`: session windows,
  merged per key.
- :class:`~fastops.core.window.global_window.GlobalAggregate`: no window, one
  slot per key (a running aggregate).

State a strategy snapshots is addressable by key: every array it returns
from :meth:`WindowStrategy.arrays` is indexed either by group id (the key
table's dense ids) or by slot, and the slot table's ``s_group`` names each
slot's group.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from fastops.core.window.store import WindowStore


class WindowStrategy(ABC):
    """How one kind of window assigns rows to slots and fires them.

    Methods are called once per batch or per watermark, never per row;
    each hands its loops to the kernels."""

    #: whether batches whose rows are all ahead of the watermark may be held
    #: and aggregated together (see ``WindowAggregator.process``)
    holds_rows = False
    #: the ``reason`` of this kind's late rows in the side output
    late_reason = "late"

    def __init__(self, store: WindowStore):
        self.store = store

    def bind(self) -> None:  # noqa: B027 (a hook: most strategies need nothing)
        """The aggregate records are laid out (input types are fixed, or a
        state restored): build what depends on them."""

    @abstractmethod
    def slot_capacity(self) -> int:
        """Slots the aggregate state must have room for."""

    @abstractmethod
    def num_slots(self) -> int:
        """Slots in use."""

    @abstractmethod
    def assign(self, gids: np.ndarray, ts: np.ndarray, tmin: int | None) -> tuple[np.ndarray, int]:
        """The slot of each row (group ids ``gids``, event times ``ts``,
        their minimum ``tmin``; -1: late) and the number of late rows."""

    def updated(self) -> None:  # noqa: B027 (a hook: most strategies need nothing)
        """The aggregates have taken the rows of the last ``assign``."""

    @abstractmethod
    def moves(self, old: int, t: int) -> bool:
        """Whether moving the watermark from ``old`` to ``t`` fires, fires
        again or purges anything (if not, only the watermark changes)."""

    @abstractmethod
    def advance(self, old: int, t: int) -> pa.RecordBatch:
        """The rows the watermark's move from ``old`` to ``t`` emits (the
        store's watermark is ``t`` already); purges what it ends."""

    def flush(self) -> pa.RecordBatch | None:
        """End of stream: every open result, or None where that is what the
        largest watermark emits."""
        return None

    def take_updates(self) -> pa.RecordBatch:
        """The current results of the groups changed since the last call."""
        raise TypeError("take_updates is for a running aggregate (no window); use advance_watermark")

    def arrays(self) -> dict[str, np.ndarray]:
        """This strategy's own arrays for a snapshot (beside the slot table's)."""
        return {}

    def meta(self) -> dict[str, Any]:
        """This strategy's own scalars for a snapshot."""
        return {}

    def readable(self, arrays: dict[str, np.ndarray], meta: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """A snapshot's arrays in this version's layout; a ValueError for a
        layout this version cannot read (nothing is changed then)."""
        return arrays

    @abstractmethod
    def restore(self, arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any]) -> None:
        """Take this strategy's state from a snapshot (the slot table is restored)."""
