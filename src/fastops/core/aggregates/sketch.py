"""Sketch aggregates for windows: ``approx_distinct``, ``approx_quantile``, ``top_k``.

They implement :class:`fastops.core.aggregates.SlotAggregate` and are registered with
:func:`fastops.core.aggregates.register`, so they are reachable as
``fastops.core.aggregates.approx_distinct(col, precision=12)``,
``fastops.core.aggregates.approx_quantile(col, q, k=200)`` and
``fastops.core.aggregates.top_k(col, k)``.

Per-slot state is columnar, never one Python object per slot:

- ``approx_distinct``: the HyperLogLog registers of every slot as one 2-D
  uint8 array (``slots x 2**precision``), updated by one kernel call per batch;
- ``approx_quantile``: an array of KLL sketches held as C structs
  (``fastops._kernels.sketch.KLLSlots``);
- ``top_k``: the Space-Saving entries of every slot as flat NumPy arrays
  (slot, hash, count, error) plus one Arrow array of representative values,
  combined with vectorised sorts and group-bys.

Error bounds are those of the standalone sketches (:mod:`fastops.core.sketches`).
"""
from __future__ import annotations

import struct
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.types as pat

from fastops._kernels import sketch as _sketch
from fastops.core import arrow as _arrow
from fastops.core import hashing
from fastops.core.aggregates.base import SlotAggregate, register
from fastops.core.sketches.common import _check_int, _check_seed, _chunk_source, _ipc_table, _plain, _status
from fastops.core.sketches.hll import hll_estimate_from_histogram
from fastops.core.sketches.kll import KLL, _float_chunks

__all__ = ["ApproxDistinct", "ApproxQuantile", "TopK", "approx_distinct", "approx_quantile",
           "top_k"]

_MAGIC = b"FOSA"


def _slots(slots: Any) -> np.ndarray:
    s = np.ascontiguousarray(slots, dtype=np.int64)
    if s.ndim != 1:
        raise ValueError("slots must be one-dimensional")
    if len(s) and s.min() < 0:
        raise ValueError("slot ids must be >= 0")
    return s


def _check_len(slots: np.ndarray, values: Any) -> None:
    if len(slots) != len(values):
        raise ValueError(f"{len(slots)} slots for {len(values)} values")


def _chunks_with_slots(slots: np.ndarray, values: Any):
    pos = 0
    arr = values if isinstance(values, (pa.Array, pa.ChunkedArray)) else pa.array(values)
    for chunk in (arr.chunks if isinstance(arr, pa.ChunkedArray) else [arr]):
        yield np.ascontiguousarray(slots[pos:pos + len(chunk)]), chunk
        pos += len(chunk)


def _column_label(a: SlotAggregate) -> str:
    return f"{a.name}({a.column!r})"


# ---------------------------------------------------------------- approx_distinct

class _HLLState:
    __slots__ = ("regs",)

    def __init__(self, m: int, nslots: int = 0):
        self.regs = np.zeros((nslots, m), dtype=np.uint8)

    def ensure(self, n: int) -> None:
        if n > self.regs.shape[0]:
            grown = np.zeros((max(n, 2 * self.regs.shape[0], 16), self.regs.shape[1]),
                             dtype=np.uint8)
            grown[: self.regs.shape[0]] = self.regs
            self.regs = grown


class ApproxDistinct(SlotAggregate):
    r"""Distinct count per slot with HyperLogLog (``2**precision`` registers).

    Relative standard error :math:`1.04/\sqrt{2^{p}}` (``p = 12``: 1.6 %);
    near exact at small counts (Ertl's estimator). Result: int64 (rounded
    estimate, 0 for an empty slot). Accepts every type ``fastops.hash64``
    hashes.
    """

    name = "approx_distinct"

    def __init__(self, column: str, precision: int = 12, seed: int = 0):
        if not isinstance(column, str):
            raise TypeError(f"approx_distinct: column must be a str, got {type(column).__name__}")
        self.column = column
        self.precision = _check_int("precision", precision, 4, 18)
        self.seed = _check_seed(seed)

    def output_type(self, input_type: pa.DataType | None) -> pa.DataType:
        return pa.int64()

    def validate(self, input_type: pa.DataType | None) -> None:
        if input_type is None or not hashing.supports(input_type):
            raise TypeError(f"{_column_label(self)}: column {self.column!r} has type "
                            f"{input_type}, which cannot be hashed")

    def new_state(self) -> _HLLState:
        return _HLLState(1 << self.precision)

    def update(self, state: _HLLState, slots: np.ndarray, values: Any) -> _HLLState:
        slots = _slots(slots)
        _check_len(slots, values)
        if len(slots) == 0:
            return state
        state.ensure(int(slots.max()) + 1)
        for sl, chunk in _chunks_with_slots(slots, values):
            src = _chunk_source(chunk, self.seed)
            if src is None:
                continue
            st = _sketch.hll_update_slots(state.regs, self.precision, sl, src.mode, src.a,
                                          src.b, src.valid, src.voff, src.n, self.seed)
            _status(st, "approx_distinct.update")
        return state

    def merge(self, state: _HLLState, dst: np.ndarray, src: np.ndarray) -> _HLLState:
        dst, src = _slots(dst), _slots(src)
        if len(dst) != len(src):
            raise ValueError("dst and src differ in length")
        if len(dst):
            state.ensure(int(max(dst.max(), src.max())) + 1)
            _status(_sketch.hll_merge_slots(state.regs, dst, src), "approx_distinct.merge")
        return state

    def estimates(self, state: _HLLState, slots: np.ndarray) -> np.ndarray:
        """Float estimates of ``slots`` (slots beyond the state are empty: 0)."""
        slots = _slots(slots)
        q2 = 66 - self.precision
        out = np.zeros(len(slots), dtype=np.float64)
        inside = slots < state.regs.shape[0]
        if inside.any():
            regs = state.regs[slots[inside]]
            rows = np.repeat(np.arange(len(regs), dtype=np.int64), regs.shape[1])
            hist = np.bincount(rows * q2 + regs.ravel(), minlength=len(regs) * q2)
            out[inside] = hll_estimate_from_histogram(hist.reshape(len(regs), q2),
                                                          self.precision)
        return out

    def result(self, state: _HLLState, slots: np.ndarray) -> pa.Array:
        return pa.array(np.rint(self.estimates(state, slots)).astype(np.int64), pa.int64())

    def reset(self, state: _HLLState, slots: np.ndarray) -> _HLLState:
        slots = _slots(slots)
        slots = slots[slots < state.regs.shape[0]]
        state.regs[slots] = 0
        return state

    def to_bytes(self, state: _HLLState) -> bytes:
        n = state.regs.shape[0]
        return _MAGIC + struct.pack("<BBQ", 1, self.precision, n) + state.regs.tobytes()

    def from_bytes(self, data: bytes) -> _HLLState:
        head = struct.Struct("<BBQ")
        if not isinstance(data, (bytes, bytearray)) or len(data) < 4 + head.size \
                or data[:4] != _MAGIC:
            raise ValueError("approx_distinct.from_bytes: not an approx_distinct state")
        kind, p, n = head.unpack_from(data, 4)
        m = 1 << self.precision
        if kind != 1 or p != self.precision or len(data) != 4 + head.size + n * m:
            raise ValueError("approx_distinct.from_bytes: parameters or size do not match")
        regs = np.frombuffer(data, dtype=np.uint8, offset=4 + head.size).reshape(n, m)
        if regs.size and int(regs.max()) > 65 - p:
            raise ValueError("approx_distinct.from_bytes: register out of range")
        state = _HLLState(m)
        state.regs = regs.copy()
        return state

    def describe(self) -> str:
        return f"approx_distinct({self.column!r}, precision={self.precision}, seed={self.seed})"

    def __repr__(self) -> str:
        return f"agg.approx_distinct({self.column!r}, precision={self.precision})"


# ---------------------------------------------------------------- approx_quantile

class ApproxQuantile(SlotAggregate):
    r"""The ``q``-quantile per slot with a KLL sketch of parameter ``k``.

    Rank error :math:`\varepsilon \approx 2.296/k^{0.9723}` (1.33 % at
    ``k = 200``, 99 % confidence): the result's true rank is within
    :math:`\varepsilon n` of :math:`q n`. Numeric and temporal inputs (as
    float64); result float64 (null for an empty slot).
    """

    name = "approx_quantile"

    def __init__(self, column: str, q: float = 0.5, k: int = 200, seed: int = 0):
        if not isinstance(column, str):
            raise TypeError(f"approx_quantile: column must be a str, got {type(column).__name__}")
        if not isinstance(q, (int, float)) or isinstance(q, bool) or not 0.0 <= q <= 1.0:
            raise ValueError(f"approx_quantile({column!r}): q must be in [0, 1], got {q!r}")
        self.column = column
        self.q = float(q)
        self.k = _check_int("k", k, 8, 65535)
        self.seed = _check_seed(seed)

    def output_type(self, input_type: pa.DataType | None) -> pa.DataType:
        return pa.float64()

    def validate(self, input_type: pa.DataType | None) -> None:
        t = input_type
        if t is not None and pat.is_dictionary(t):
            t = t.value_type
        ok = t is not None and (pat.is_integer(t) or pat.is_floating(t) or pat.is_temporal(t))
        if not ok:
            raise TypeError(f"{_column_label(self)}: column {self.column!r} has type "
                            f"{input_type}; approx_quantile needs numeric or temporal values")

    def new_state(self) -> _sketch.KLLSlots:
        return _sketch.KLLSlots(self.k, 8, self.seed)

    def update(self, state: _sketch.KLLSlots, slots: np.ndarray, values: Any) -> Any:
        slots = _slots(slots)
        _check_len(slots, values)
        if len(slots) == 0:
            return state
        state.grow(int(slots.max()) + 1)
        for sl, chunk in _chunks_with_slots(slots, values):
            for vals, valid, voff in _float_chunks(chunk, _column_label(self)):
                if valid.size:
                    ok = np.unpackbits(valid, bitorder="little")[voff:voff + len(vals)]
                    keep = ok.astype(bool)
                    vals, sl = vals[keep], sl[keep]
                _status(state.update(np.ascontiguousarray(sl), vals),
                            "approx_quantile.update")
        return state

    def merge(self, state: _sketch.KLLSlots, dst: np.ndarray, src: np.ndarray) -> Any:
        dst, src = _slots(dst), _slots(src)
        if len(dst) != len(src):
            raise ValueError("dst and src differ in length")
        if len(dst):
            state.grow(int(max(dst.max(), src.max())) + 1)
            _status(state.merge(dst, src), "approx_quantile.merge")
        return state

    def result(self, state: _sketch.KLLSlots, slots: np.ndarray) -> pa.Array:
        slots = _slots(slots)
        out = np.full(len(slots), np.nan)
        inside = slots < len(state)
        if inside.any():
            part = np.empty(int(inside.sum()))
            _status(state.quantiles(np.ascontiguousarray(slots[inside]), self.q, part),
                        "approx_quantile.result")
            out[inside] = part
        return pa.array(out, pa.float64(), mask=np.isnan(out))

    def reset(self, state: _sketch.KLLSlots, slots: np.ndarray) -> Any:
        slots = _slots(slots)
        slots = slots[slots < len(state)]
        _status(state.reset(np.ascontiguousarray(slots)), "approx_quantile.reset")
        return state

    def to_bytes(self, state: _sketch.KLLSlots) -> bytes:
        parts = [_MAGIC, struct.pack("<BHQ", 2, self.k, len(state))]
        for i in range(len(state)):  # one record per slot (snapshots only)
            one = KLL(self.k)
            one._core = state.get(i)
            b = one.to_bytes()
            parts.append(struct.pack("<Q", len(b)))
            parts.append(b)
        return b"".join(parts)

    def from_bytes(self, data: bytes) -> Any:
        head = struct.Struct("<BHQ")
        if not isinstance(data, (bytes, bytearray)) or len(data) < 4 + head.size \
                or data[:4] != _MAGIC:
            raise ValueError("approx_quantile.from_bytes: not an approx_quantile state")
        kind, k, n = head.unpack_from(data, 4)
        if kind != 2 or k != self.k or n > len(data):
            raise ValueError("approx_quantile.from_bytes: parameters do not match")
        state = self.new_state()
        state.grow(n)
        pos = 4 + head.size
        for i in range(n):
            if pos + 8 > len(data):
                raise ValueError("approx_quantile.from_bytes: truncated")
            (ln,) = struct.unpack_from("<Q", data, pos)
            pos += 8
            if pos + ln > len(data):
                raise ValueError("approx_quantile.from_bytes: truncated")
            one = KLL.from_bytes(bytes(data[pos:pos + ln]))
            if one.k != self.k:
                raise ValueError("approx_quantile.from_bytes: parameters do not match")
            state.put(i, one._core)
            pos += ln
        if pos != len(data):
            raise ValueError("approx_quantile.from_bytes: trailing bytes")
        return state

    def describe(self) -> str:
        return f"approx_quantile({self.column!r}, q={self.q!r}, k={self.k}, seed={self.seed})"

    def __repr__(self) -> str:
        return f"agg.approx_quantile({self.column!r}, q={self.q}, k={self.k})"


# ---------------------------------------------------------------- top_k

class _TopKState:
    """Space-Saving entries of every slot, flat; ``values`` aligned with them."""

    __slots__ = ("count", "err", "hash", "nslots", "slot", "values")

    def __init__(self) -> None:
        self.slot: np.ndarray = np.zeros(0, dtype=np.int64)
        self.hash: np.ndarray = np.zeros(0, dtype=np.uint64)
        self.count: np.ndarray = np.zeros(0, dtype=np.int64)
        self.err: np.ndarray = np.zeros(0, dtype=np.int64)
        self.values: pa.Array | None = None
        self.nslots = 0


_TOPK_MAX_SLOTS = 1 << 26  # window slots per top_k state (64M, ~1.5 GiB of per-slot arrays)


def _slot_min(slot: np.ndarray, count: np.ndarray, nslots: int, capacity: int) -> np.ndarray:
    """Per slot: the minimum count if the slot holds ``capacity`` entries, else 0."""
    size = np.bincount(slot, minlength=nslots)
    mins = np.full(nslots, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(mins, slot, count)
    return np.where(size >= capacity, mins, 0)


def _combine(a: tuple, b: tuple, min_a: np.ndarray, min_b: np.ndarray, capacity: int):
    """Mergeable Space-Saving combine of two entry sets, per slot, vectorised.

    ``a``/``b`` = (slot, hash, count, err, rep); ``min_x[slot]`` is what side
    x contributes for an item it does not monitor. Returns the kept entries
    (at most ``capacity`` per slot, largest counts)."""
    slot = np.concatenate([a[0], b[0]])
    h = np.concatenate([a[1], b[1]])
    cnt = np.concatenate([a[2], b[2]])
    err = np.concatenate([a[3], b[3]])
    rep = np.concatenate([a[4], b[4]])
    side = np.concatenate([np.zeros(len(a[0]), np.int8), np.ones(len(b[0]), np.int8)])
    if len(slot) == 0:
        return slot, h, cnt, err, rep
    order = np.lexsort((side, h, slot))
    slot, h, cnt, err, rep, side = (x[order] for x in (slot, h, cnt, err, rep, side))
    first = np.ones(len(slot), dtype=bool)
    first[1:] = (slot[1:] != slot[:-1]) | (h[1:] != h[:-1])
    gid = np.cumsum(first) - 1
    g_slot, g_hash, g_rep = slot[first], h[first], rep[first]
    g_cnt = np.bincount(gid, weights=cnt).astype(np.int64)
    g_err = np.bincount(gid, weights=err).astype(np.int64)
    has_a = np.bincount(gid, weights=(side == 0)).astype(bool)
    has_b = np.bincount(gid, weights=(side == 1)).astype(bool)
    add = np.where(has_a, 0, min_a[g_slot]) + np.where(has_b, 0, min_b[g_slot])
    g_cnt = g_cnt + add
    g_err = g_err + add
    # keep the ``capacity`` largest counts of each slot
    order = np.lexsort((-g_cnt, g_slot))
    g_slot, g_hash, g_cnt, g_err, g_rep = (x[order] for x in (g_slot, g_hash, g_cnt, g_err,
                                                                g_rep))
    start = np.ones(len(g_slot), dtype=bool)
    start[1:] = g_slot[1:] != g_slot[:-1]
    idx = np.arange(len(g_slot))
    rank = idx - np.maximum.accumulate(np.where(start, idx, 0))
    keep = rank < capacity
    return g_slot[keep], g_hash[keep], g_cnt[keep], g_err[keep], g_rep[keep]


class TopK(SlotAggregate):
    r"""The ``k`` most frequent values per slot (Space-Saving, ``capacity``
    counters per slot, default ``max(8k, 32)``).

    Result per slot: a list of ``{value, count}`` structs, largest first, where
    ``count`` is an upper bound: :math:`f \le \mathrm{count} \le f + n/\mathrm{capacity}`
    for a slot of ``n`` rows; every value with :math:`f > n/\mathrm{capacity}` is
    tracked, so the reported top ``k`` are exact whenever their gap exceeds
    that bound.
    """

    name = "top_k"

    def __init__(self, column: str, k: int = 10, capacity: int | None = None,
                 seed: int = 0):
        if not isinstance(column, str):
            raise TypeError(f"top_k: column must be a str, got {type(column).__name__}")
        self.column = column
        self.k = _check_int("k", k, 1, 1 << 20)
        self.capacity = (max(8 * self.k, 32) if capacity is None
                         else _check_int("capacity", capacity, self.k, 1 << 24))
        self.seed = _check_seed(seed)

    def _value_type(self, input_type: pa.DataType) -> pa.DataType:
        return input_type.value_type if pat.is_dictionary(input_type) else input_type

    def output_type(self, input_type: pa.DataType | None) -> pa.DataType:
        return pa.list_(pa.struct([("value", self._value_type(input_type)),
                                   ("count", pa.int64())]))

    def validate(self, input_type: pa.DataType | None) -> None:
        if input_type is None or not hashing.supports(input_type) or pat.is_null(input_type):
            raise TypeError(f"{_column_label(self)}: column {self.column!r} has type "
                            f"{input_type}, which cannot be hashed")

    def new_state(self) -> _TopKState:
        return _TopKState()

    def _hash_values(self, values: Any) -> tuple[np.ndarray, np.ndarray, pa.Array]:
        """(hashes, valid row numbers, plain values) of a batch."""
        arr = values if isinstance(values, (pa.Array, pa.ChunkedArray)) else pa.array(values)
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        arr = _plain(arr)
        n = len(arr)
        out = np.empty(n, dtype=np.uint64)
        rows = np.empty(n, dtype=np.int64)
        src = _chunk_source(arr, self.seed)
        got = 0 if src is None else _sketch.sketch_hash(src.mode, src.a, src.b, src.valid,
                                                        src.voff, src.n, self.seed, out, rows)
        return out[:got], rows[:got], arr

    def update(self, state: _TopKState, slots: np.ndarray, values: Any) -> _TopKState:
        slots = _slots(slots)
        _check_len(slots, values)
        if len(slots) == 0:
            return state
        h, rows, arr = self._hash_values(values)
        if state.values is not None and arr.type != state.values.type:
            raise TypeError(f"{_column_label(self)}: column {self.column!r} changed type "
                            f"from {state.values.type} to {arr.type}")
        sl = slots[rows]
        state.nslots = max(state.nslots, int(slots.max()) + 1)
        # exact per-(slot, value) counts of the batch
        order = np.lexsort((h, sl))
        sl, h, rows = sl[order], h[order], rows[order]
        first = np.ones(len(sl), dtype=bool)
        first[1:] = (sl[1:] != sl[:-1]) | (h[1:] != h[:-1])
        gid = np.cumsum(first) - 1
        b_cnt = np.bincount(gid).astype(np.int64)
        n_old = len(state.slot)
        b = (sl[first], h[first], b_cnt, np.zeros(len(b_cnt), np.int64),
             rows[first] + n_old)
        a = (state.slot, state.hash, state.count, state.err, np.arange(n_old, dtype=np.int64))
        min_a = _slot_min(state.slot, state.count, state.nslots, self.capacity)
        self._adopt(state, _combine(a, b, min_a, np.zeros(state.nslots, np.int64),
                                    self.capacity), arr)
        return state

    def _adopt(self, state: _TopKState, kept: tuple, other_values: pa.Array) -> None:
        slot, h, cnt, err, rep = kept
        both = other_values if state.values is None else pa.concat_arrays(
            [state.values, other_values])
        state.slot, state.hash, state.count, state.err = slot, h, cnt, err
        state.values = both.take(pa.array(rep, pa.int64()))

    def merge(self, state: _TopKState, dst: np.ndarray, src: np.ndarray) -> _TopKState:
        dst, src = _slots(dst), _slots(src)
        if len(dst) != len(src):
            raise ValueError("dst and src differ in length")
        if len(dst) == 0:
            return state
        state.nslots = max(state.nslots, int(max(dst.max(), src.max())) + 1)
        # pairs whose slots interact must run in order: split into waves
        wave_start = 0
        while wave_start < len(dst):
            seen: set = set()
            end = wave_start
            while end < len(dst):
                d, s_ = int(dst[end]), int(src[end])
                if d in seen or s_ in seen or d == s_:
                    break
                seen.add(d)
                seen.add(s_)
                end += 1
            if end == wave_start:  # d == s: merging a slot with itself doubles it
                end = wave_start + 1
            self._merge_wave(state, dst[wave_start:end], src[wave_start:end])
            wave_start = end
        return state

    def _merge_wave(self, state: _TopKState, dst: np.ndarray, src: np.ndarray) -> None:
        """One wave of pairs: ``dst`` unique and disjoint from ``src`` (or a single
        self-merge). Source slots are left as they are."""
        if state.values is None:
            return
        n = state.nslots
        remap = np.full(n, -1, dtype=np.int64)
        remap[src] = dst
        a_idx = np.flatnonzero(np.isin(state.slot, dst))
        b_idx = np.flatnonzero(remap[state.slot] >= 0)
        rest = np.flatnonzero(~np.isin(state.slot, dst))
        mins = _slot_min(state.slot, state.count, n, self.capacity)
        min_b = np.zeros(n, dtype=np.int64)
        min_b[dst] = mins[src]
        a = (state.slot[a_idx], state.hash[a_idx], state.count[a_idx], state.err[a_idx], a_idx)
        b = (remap[state.slot[b_idx]], state.hash[b_idx], state.count[b_idx],
             state.err[b_idx], b_idx)
        slot, h, cnt, err, rep = _combine(a, b, mins, min_b, self.capacity)
        state.slot = np.concatenate([state.slot[rest], slot])
        state.hash = np.concatenate([state.hash[rest], h])
        state.count = np.concatenate([state.count[rest], cnt])
        state.err = np.concatenate([state.err[rest], err])
        state.values = state.values.take(pa.array(np.concatenate([rest, rep]), pa.int64()))

    def result(self, state: _TopKState, slots: np.ndarray) -> pa.Array:
        slots = _slots(slots)
        vtype = state.values.type if state.values is not None else pa.null()
        if state.values is None or len(state.slot) == 0:
            offsets = np.zeros(len(slots) + 1, dtype=np.int32)
            inner = pa.StructArray.from_arrays([pa.array([], vtype), pa.array([], pa.int64())],
                                               names=["value", "count"])
            return pa.ListArray.from_arrays(pa.array(offsets), inner)
        # entries of the requested slots, by slot then count (largest first),
        # the first ``k`` of each slot
        sel = np.flatnonzero(np.isin(state.slot, slots))
        order = sel[np.lexsort((-state.count[sel], state.slot[sel]))]
        e_slot = state.slot[order]
        start = np.ones(len(order), dtype=bool)
        start[1:] = e_slot[1:] != e_slot[:-1]
        idx = np.arange(len(order))
        rank = idx - np.maximum.accumulate(np.where(start, idx, 0))
        keep = rank < self.k
        order, e_slot = order[keep], e_slot[keep]
        width = max(state.nslots, int(slots.max()) + 1)
        per_slot = np.bincount(e_slot, minlength=width)
        first_of = np.zeros(width + 1, dtype=np.int64)
        np.cumsum(per_slot, out=first_of[1:])
        lengths = per_slot[slots]
        offsets = np.zeros(len(slots) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        # list i holds order[first_of[slots[i]] : first_of[slots[i]] + lengths[i]]
        within = np.arange(offsets[-1]) - np.repeat(offsets[:-1], lengths)
        chosen = order[np.repeat(first_of[slots], lengths) + within]
        inner = pa.StructArray.from_arrays(
            [state.values.take(pa.array(chosen, pa.int64())),
             pa.array(state.count[chosen], pa.int64())], names=["value", "count"])
        return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), inner)

    def reset(self, state: _TopKState, slots: np.ndarray) -> _TopKState:
        slots = _slots(slots)
        if len(state.slot) and len(slots):
            keep = ~np.isin(state.slot, slots)
            state.slot, state.hash = state.slot[keep], state.hash[keep]
            state.count, state.err = state.count[keep], state.err[keep]
            assert state.values is not None  # entries have values
            state.values = state.values.filter(pa.array(keep))
        return state

    def to_bytes(self, state: _TopKState) -> bytes:
        vals = state.values if state.values is not None else pa.array([], pa.null())
        blob = _arrow.to_ipc(pa.table({"value": vals}))
        n = len(state.slot)
        return (_MAGIC + struct.pack("<BIQQ", 3, self.capacity, state.nslots, n)
                + state.slot.tobytes() + state.hash.tobytes() + state.count.tobytes()
                + state.err.tobytes() + struct.pack("<Q", len(blob)) + blob)

    def from_bytes(self, data: bytes) -> _TopKState:
        head = struct.Struct("<BIQQ")
        if not isinstance(data, (bytes, bytearray)) or len(data) < 4 + head.size \
                or data[:4] != _MAGIC:
            raise ValueError("top_k.from_bytes: not a top_k state")
        kind, cap, nslots, n = head.unpack_from(data, 4)
        pos = 4 + head.size
        if kind != 3 or cap != self.capacity or len(data) < pos + 32 * n + 8:
            raise ValueError("top_k.from_bytes: parameters or size do not match")
        if nslots > _TOPK_MAX_SLOTS:  # a damaged count would allocate per slot on the next result()
            raise ValueError(f"top_k.from_bytes: {nslots} window slots, more than the "
                             f"{_TOPK_MAX_SLOTS} a top_k state holds")
        arrs = [np.frombuffer(data, dtype=dt, count=n, offset=pos + 8 * n * i).copy()
                for i, dt in enumerate((np.int64, np.uint64, np.int64, np.int64))]
        pos += 32 * n
        (ln,) = struct.unpack_from("<Q", data, pos)
        pos += 8
        if pos + ln != len(data):
            raise ValueError("top_k.from_bytes: truncated or trailing bytes")
        table = _ipc_table(bytes(data[pos:pos + ln]), "top_k")
        if table.num_columns != 1 or table.num_rows != n:
            raise ValueError("top_k.from_bytes: values do not match the entries")
        state = _TopKState()
        state.slot, state.hash, state.count, state.err = arrs
        if n and (state.slot.min() < 0 or state.slot.max() >= nslots or state.count.min() < 1
                  or state.err.min() < 0 or np.any(state.err > state.count)):
            raise ValueError("top_k.from_bytes: corrupt entries")
        vals = table.column(0).combine_chunks()
        state.values = None if pat.is_null(vals.type) else vals
        state.nslots = nslots
        return state

    def describe(self) -> str:
        return (f"top_k({self.column!r}, k={self.k}, capacity={self.capacity}, "
                f"seed={self.seed})")

    def __repr__(self) -> str:
        return f"agg.top_k({self.column!r}, k={self.k})"


def approx_distinct(column: str, precision: int = 12, seed: int = 0) -> ApproxDistinct:
    """HyperLogLog distinct count per window/key (see :class:`ApproxDistinct`)."""
    return ApproxDistinct(column, precision, seed)


def approx_quantile(column: str, q: float = 0.5, k: int = 200, seed: int = 0) -> ApproxQuantile:
    """KLL ``q``-quantile per window/key (see :class:`ApproxQuantile`)."""
    return ApproxQuantile(column, q, k, seed)


def top_k(column: str, k: int = 10, capacity: int | None = None, seed: int = 0) -> TopK:
    """Space-Saving top ``k`` values per window/key (see :class:`TopK`)."""
    return TopK(column, k, capacity, seed)


register("approx_distinct", approx_distinct)
register("approx_quantile", approx_quantile)
register("top_k", top_k)
