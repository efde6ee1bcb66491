"""No window: one slot per group (its dense id), a running aggregate.
``take_updates`` gives the groups changed since the last call, ``flush``
every group."""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa

from fastops.core import arrow as _arrow
from fastops.core.window.store import WindowStore
from fastops.core.window.strategy import WindowStrategy

__all__ = ["GlobalAggregate"]


class GlobalAggregate(WindowStrategy):
    """A running aggregate per group (see module docs); ``touched`` marks
    the groups updated since the last ``take_updates``."""

    def __init__(self, store: WindowStore):
        super().__init__(store)
        self._touched = np.zeros(64, dtype=np.uint8)

    def slot_capacity(self) -> int:
        return self.store.keys.num_groups

    def num_slots(self) -> int:
        return self.store.keys.num_groups

    def assign(self, gids: np.ndarray, ts: np.ndarray, tmin: int | None) -> tuple[np.ndarray, int]:
        self._touched = _arrow.grown(self._touched, self.store.keys.num_groups)
        self._touched[gids] = 1
        return gids, 0

    def moves(self, old: int, t: int) -> bool:
        return False  # nothing fires: results come from take_updates and flush

    def advance(self, old: int, t: int) -> pa.RecordBatch:
        return self.store.empty()

    def flush(self) -> pa.RecordBatch:
        st = self.store
        if st.out_schema is None or st.keys.num_groups == 0:
            return st.empty()
        groups = np.arange(st.keys.num_groups, dtype=np.int64)
        self._touched[:] = 0
        return st.build(None, None, groups, groups)

    def take_updates(self) -> pa.RecordBatch:
        st = self.store
        st.check_usable()
        if st.out_schema is None:
            return st.empty()
        groups = np.flatnonzero(self._touched[: st.keys.num_groups]).astype(np.int64)
        self._touched[:] = 0
        if len(groups) == 0:
            return st.empty()
        return st.build(None, None, groups, groups)

    def arrays(self) -> dict[str, np.ndarray]:
        return {"touched": self._touched}

    def restore(self, arrays: Mapping[str, np.ndarray], meta: Mapping) -> None:
        self._touched = arrays["touched"]
