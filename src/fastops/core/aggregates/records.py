"""Per-slot records of the built-in aggregates, their storage types and their result columns.

A built-in aggregate keeps a few 8-byte fields per slot (:class:`Columns`);
the built-ins of one aggregator share one record array (:class:`_Records`),
so a row's update touches one cache line for all of them. :class:`ResultPlan`
says how kernels turn the records into result columns (:class:`ResultColumns`).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import pyarrow as pa
import pyarrow.types as pat

from fastops._kernels import window as _window
from fastops.core import arrow as _arrow

__all__ = ["Columns", "Finalised", "ResultColumns", "ResultPlan", "aligned_records", "as_storage", "from_storage",
           "record_width"]

_EMPTY_U8 = np.zeros(0, dtype=np.uint8)


class _Records:
    """An ``(n_slots, width)`` int64 record array, grown by doubling, rows
    64-byte aligned; several :class:`Columns` may share it (each its words)."""

    __slots__ = ("rec",)

    def __init__(self, width: int, size: int = 0):
        self.rec = aligned_records(size, width)

    @property
    def size(self) -> int:
        return len(self.rec)

    def ensure(self, n: int) -> None:
        self.rec = _arrow.grown(self.rec, n)


def record_width(words: int) -> int:
    """Words per record row: up to 8 rounded up to a power of two, so that an
    aligned row never straddles two cache lines."""
    return 1 << (words - 1).bit_length() if 0 < words <= 8 else words


def aligned_records(n: int, width: int) -> np.ndarray:
    """Zeroed ``(n, width)`` int64 records in pool memory, starting on a
    64-byte boundary."""
    return _arrow.zeros(n * width, np.int64).reshape(n, width)


class Columns:
    """Per-slot state of a built-in aggregate: one record of 8-byte words per slot.

    ``rec`` is an ``(n_slots, W)`` int64 array whose words ``off, off + 1,
    ...`` hold this aggregate's fields; :meth:`share` puts the aggregates of
    one aggregator side by side in one array, so a row's update touches one
    cache line for all of them. ``state[name]`` is the strided view of one
    field with its dtype (int64 or float64, the same bytes), so results,
    resets and snapshots stay columnar. The first field is always ``cnt``.
    """

    __slots__ = ("names", "off", "spec", "store")

    def __init__(self, spec: dict[str, np.dtype], size: int = 0):
        self.spec = {k: np.dtype(v) for k, v in spec.items()}
        if next(iter(self.spec)) != "cnt" or any(d.itemsize != 8 for d in self.spec.values()):
            raise ValueError("aggregate state needs 'cnt' first and 8-byte fields")
        self.names = list(self.spec)
        self.store = _Records(len(self.spec), size)
        self.off = 0

    @staticmethod
    def share(states: list[Columns]) -> _Records:
        """Move ``states`` into one record array (contents kept), each at its own
        words; returns its store (of one word per record for no states)."""
        width = record_width(max(sum(len(st.names) for st in states), 1))
        size = max((st.size for st in states), default=0)
        store = _Records(width, size)
        off = 0
        for st in states:
            store.rec[: st.size, off : off + len(st.names)] = st.rec[:, st.off : st.off + len(st.names)]
            st.store, st.off = store, off
            off += len(st.names)
        return store

    @property
    def rec(self) -> np.ndarray:
        """The whole record array (possibly shared: this state's words start at ``off``)."""
        return self.store.rec

    @property
    def size(self) -> int:
        return self.store.size

    def ensure(self, n: int) -> None:
        """Grow (doubling) to at least ``n`` slots; new slots are empty."""
        self.store.ensure(n)

    def __getitem__(self, k: str) -> np.ndarray:
        return self.store.rec.view(self.spec[k])[:, self.off + self.names.index(k)]

    def final_words(self, plan: list[tuple[str, int]]) -> tuple[np.ndarray, np.ndarray]:
        """A result plan's record words (this state's offset added) and codes."""
        return (np.array([self.off + self.names.index(k) for k, _ in plan], dtype=np.int64),
                np.array([c for _, c in plan], dtype=np.int64))

    def to_bytes(self) -> bytes:
        return _arrow.to_ipc(pa.RecordBatch.from_arrays(
            [pa.array(np.ascontiguousarray(self[k])) for k in self.names], names=self.names))

    @classmethod
    def from_bytes(cls, spec: dict[str, np.dtype], data: bytes) -> Columns:
        batch = _arrow.from_ipc(data).combine_chunks()
        if list(batch.schema.names) != list(spec):
            raise ValueError(f"aggregate state has fields {batch.schema.names}, expected {list(spec)}")
        out = cls(spec, batch.num_rows)
        for k in spec:
            out[k][:] = np.asarray(batch.column(k).to_numpy(zero_copy_only=False), dtype=spec[k])
        return out


def _numeric_storage(t: pa.DataType) -> np.dtype | None:
    """Storage dtype (int64 / float64) of a numeric-like type, None if unsupported."""
    if pat.is_floating(t):
        return None if t.bit_width == 16 else np.dtype(np.float64)
    if pat.is_integer(t) or pat.is_boolean(t) or pat.is_temporal(t):
        return np.dtype(np.int64)
    return None


def as_storage(arr: pa.Array, dtype: np.dtype) -> np.ndarray:
    """Values of a numeric-like array as contiguous int64 or float64 (nulls: garbage)."""
    t = arr.type
    n = len(arr)
    if pat.is_boolean(t):
        bits = np.unpackbits(_arrow.bit_values(arr), bitorder="little", count=arr.offset + n)
        return bits[arr.offset:].astype(dtype)
    if pat.is_floating(t):
        src = np.dtype(np.float32 if t.bit_width == 32 else np.float64)
    else:
        width = t.bit_width // 8
        signed = not pat.is_unsigned_integer(t)
        src = np.dtype(f"{'int' if signed else 'uint'}{width * 8}")
    vals = _arrow.fixed_values(arr, src)
    if vals.dtype == dtype:
        return np.ascontiguousarray(vals)
    return vals.astype(dtype)


def from_storage(vals: np.ndarray, null: np.ndarray | None, t: pa.DataType) -> pa.Array:
    """An Arrow array of type ``t`` from int64/float64 storage; ``null`` marks nulls.
    Built from buffers, sharing the memory where ``t`` is 8 bytes wide
    (``pa.array`` given an integer type would read every value)."""
    n = len(vals)
    validity, nnull = _arrow.bitmap(None if null is None else ~null)
    if pat.is_boolean(t):
        data = pa.py_buffer(np.packbits(vals.astype(bool), bitorder="little"))
    elif pat.is_floating(t):
        data = pa.py_buffer(np.ascontiguousarray(vals, dtype=np.float32 if t.bit_width == 32 else np.float64))
    else:
        width = t.bit_width // 8
        signed = not pat.is_unsigned_integer(t)
        dt = np.dtype(f"{'int' if signed else 'uint'}{width * 8}")
        data = pa.py_buffer(np.ascontiguousarray(vals.astype(dt, copy=False)))
    return pa.Array.from_buffers(t, n, [validity, data], null_count=nnull)


def _valid(values: pa.Array) -> tuple[np.ndarray, int]:
    v = _arrow.validity(values)
    return (_EMPTY_U8, 0) if v is None else (v, values.offset)


class Finalised(Protocol):
    """What :class:`ResultPlan` needs of an aggregate (the built-ins,
    :class:`~fastops.core.aggregates.builtins.BuiltinAggregate`)."""

    #: whether the result is null where the state counts no value
    nullable: bool

    def final_plan(self) -> list[tuple[str, int]]:
        """The state fields the result is made of, each with its
        ``_window.FINAL`` code: kernels write them as result columns."""
        ...

    def from_final(self, cols: list[np.ndarray], null: np.ndarray | None) -> pa.Array:
        """The result from the columns of :meth:`final_plan` (typed as the
        state's fields) and the null mask (None: no nulls)."""
        ...


class ResultColumns:
    """Result columns under construction: one int64 column per word of a
    ``ResultPlan`` and one null-byte column per nullable aggregate (zeroed,
    1 where null), with their null counts."""

    def __init__(self, plan: ResultPlan, capacity: int):
        self.cols = _arrow.empty(len(plan.words) * capacity, np.int64)[0].reshape(len(plan.words), capacity)
        nn = len(plan.cnt_words)
        self.nulls = _arrow.zeros(nn * capacity, np.uint8).reshape(nn, capacity)  # kernels write only nulls
        self.nnull = np.zeros(len(plan.cnt_words), dtype=np.int64)
        self.plan = plan

    @property
    def capacity(self) -> int:
        return self.cols.shape[1]

    def grown(self, rows: int, capacity: int) -> ResultColumns:
        """A copy of the first ``rows`` rows with room for ``capacity``."""
        out = ResultColumns(self.plan, capacity)
        out.cols[:, :rows] = self.cols[:, :rows]
        out.nulls[:, :rows] = self.nulls[:, :rows]
        out.nnull[:] = self.nnull
        return out


class ResultPlan:
    """How the records of built-in aggregates (side by side, :meth:`Columns.share`)
    become their results inside one kernel pass (``_window.gather_fields``,
    or ``dense_window`` for sliding windows): each aggregate's
    :meth:`~Finalised.final_plan` words, and a null column per
    nullable aggregate. The records' other words (count fields beside the
    values, error terms) are never written out."""

    def __init__(self, aggs: Sequence[Finalised], states: list[Columns]):
        words: list[int] = []
        codes: list[int] = []
        cnt_words: list[int] = []
        # aggregate, its fields, its first column, its null column (-1: none)
        self.parts: list[tuple[Finalised, list[tuple[str, np.dtype]], int, int]] = []
        for a, st in zip(aggs, states):
            plan = a.final_plan()
            w, c = st.final_words(plan)
            self.parts.append((a, [(k, st.spec[k]) for k, _ in plan], len(words),
                               len(cnt_words) if a.nullable else -1))
            words += w.tolist()
            codes += c.tolist()
            if a.nullable:
                cnt_words.append(st.off)
        self.words = np.array(words, dtype=np.int64)
        self.codes = np.array(codes, dtype=np.int64)
        self.cnt_words = np.array(cnt_words, dtype=np.int64)

    def columns(self, rec: np.ndarray, slots: np.ndarray | None = None) -> ResultColumns:
        """Result columns of the records ``rec[slots]`` (None: every row in order)."""
        out = ResultColumns(self, len(rec) if slots is None else len(slots))
        _window.gather_fields(rec, self.words, self.codes, self.cnt_words, slots, out.cols, out.nulls, out.nnull)
        return out

    def results(self, out: ResultColumns, n: int | None = None) -> list[pa.Array]:
        """Each aggregate's result array from the first ``n`` rows (None: all)."""
        n = out.capacity if n is None else n
        results = []
        for a, fields, col, nc in self.parts:
            cols = [out.cols[col + j, :n].view(dt) for j, (_, dt) in enumerate(fields)]
            null = out.nulls[nc, :n].view(bool) if nc >= 0 and out.nnull[nc] else None
            results.append(a.from_final(cols, null))
        return results

