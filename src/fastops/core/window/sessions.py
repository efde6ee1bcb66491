"""Session windows: per group a list of sessions ``[start, end)``, each a
slot; a row opens ``[t, t + gap)`` or joins the sessions it overlaps, and the
sessions a row bridges are merged (their aggregates too)."""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa

from fastops._kernels import window as _window
from fastops.core import arrow as _arrow
from fastops.core.watermarks import MIN_WATERMARK
from fastops.core.window.assigners import Session
from fastops.core.window.store import FAR, WindowStore, clamp
from fastops.core.window.strategy import WindowStrategy

__all__ = ["SessionWindows"]


class SessionWindows(WindowStrategy):
    """Session windows (see module docs). Per group the head of its session
    list (``g_head``); per slot the session's bounds (``s_start`` /
    ``s_end``) and, while a merge is pending, the slot it went into
    (``s_parent``). A session fires when the watermark reaches its end and
    is purged ``allowed_lateness`` later."""

    late_reason = "session purged"

    def __init__(self, window: Session, allowed_lateness: int, store: WindowStore):
        super().__init__(store)
        self._slots = store.slots
        self._gap = window.gap
        self._lateness = allowed_lateness
        self._g_head = np.full(64, -1, dtype=np.int64)
        self._s_start = np.zeros(64, dtype=np.int64)
        self._s_end = np.zeros(64, dtype=np.int64)
        self._s_parent = np.full(64, -1, dtype=np.int64)
        self._pending_release: np.ndarray | None = None  # slots merged into others by the last assign

    def slot_capacity(self) -> int:
        return int(self._slots.counters[0])

    def num_slots(self) -> int:
        return int(self._slots.counters[0] - self._slots.counters[1])

    def _ensure_slots(self, extra: int) -> None:
        need = self._slots.ensure(extra)
        self._s_start = _arrow.grown(self._s_start, need)
        self._s_end = _arrow.grown(self._s_end, need)
        self._s_parent = _arrow.grown(self._s_parent, need, -1)

    def assign(self, gids: np.ndarray, ts: np.ndarray, tmin: int | None) -> tuple[np.ndarray, int]:
        n = len(gids)
        st, sl = self.store, self._slots
        self._ensure_slots(n)
        self._g_head = _arrow.grown(self._g_head, st.keys.num_groups, -1)
        out = np.empty(n, dtype=np.int64)
        mdst = np.empty(n, dtype=np.int64)
        msrc = np.empty(n, dtype=np.int64)
        limit = (st.wm - self._lateness) if st.wm != MIN_WATERMARK else -FAR
        nm, nlate = _window.session_assign(
            self._g_head, sl.s_group, self._s_start, self._s_end, sl.s_next, sl.s_flags,
            self._s_parent, sl.free, sl.counters, gids, ts, self._gap, clamp(limit),
            out, mdst, msrc)
        self._pending_release = None
        if nm:
            dst, src = mdst[:nm].copy(), msrc[:nm].copy()
            st.merge(dst, src, self.slot_capacity())
            self._pending_release = src
        return out, nlate

    def updated(self) -> None:
        """Slots merged into others are emptied and freed once the batch's rows are in."""
        rel = self._pending_release
        if rel is not None:
            self._pending_release = None
            self.store.reset_slots(rel)
            _window.session_release(self._s_parent, rel, self._slots.free, self._slots.counters)

    def moves(self, old: int, t: int) -> bool:
        return True

    def advance(self, old: int, t: int) -> pa.RecordBatch:
        st, sl = self.store, self._slots
        nslots = int(sl.counters[0])
        fired = np.empty(max(nslots, 1), dtype=np.int64)
        nf = _window.session_fire(sl.s_flags, self._s_end, nslots, t, fired)
        out = st.empty()
        if nf:
            fired = fired[:nf]
            order = np.lexsort((self._s_start[fired], self._s_end[fired]))
            fired = fired[order]
            out = st.build(self._s_start[fired], self._s_end[fired], sl.s_group[fired], fired)
        limit = t - self._lateness
        if limit >= -FAR:
            purged = np.empty(max(nslots, 1), dtype=np.int64)
            npg = _window.session_purge(self._g_head, sl.s_group, self._s_end, sl.s_next,
                                        sl.s_flags, sl.free, sl.counters, clamp(limit), purged)
            st.reset_slots(purged[:npg])
        return out

    def arrays(self) -> dict[str, np.ndarray]:
        return {"g_head": self._g_head, "s_start": self._s_start, "s_end": self._s_end, "s_parent": self._s_parent}

    def restore(self, arrays: Mapping[str, np.ndarray], meta: Mapping) -> None:
        self._g_head, self._s_start, self._s_end = arrays["g_head"], arrays["s_start"], arrays["s_end"]
        self._s_parent = arrays["s_parent"]
