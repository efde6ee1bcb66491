"""GROUP BY over an updating (changelog) table: aggregates that take retractions.

:class:`RetractAggregate` is Flink's ``GroupAggFunction`` with retracting
accumulators. Each input row counts +1 (``+I`` / ``+U``) or -1 (``-U`` /
``-D``) towards its group; per batch the changes are netted per group with
array operations:

- ``COUNT(*)`` is the group's row count, ``COUNT(x)`` the count of non-null
  ``x``; ``SUM`` / ``AVG`` keep the sum and that count (null once it is 0),
  ``STDDEV_*`` / ``VAR_*`` also the sum of squares.
- ``MIN`` / ``MAX`` keep the multiset of the group's values, a count per
  (group, value) as Flink's ``MinWithRetractAggFunction`` keeps a map value
  -> count. A group's extreme is picked again from its candidates (its
  previous extreme, the values that arrived) after each batch, and from all
  its values only when the count of its previous extreme fell to 0.

After each batch, per group touched: a group that had rows and has none
gives ``-D`` (its state is dropped, as Flink's when the row count reaches 0),
a new group ``+I``, and a group whose result changed ``-U`` (old) then
``+U`` (new). The old result is computed from the state before the batch,
which is exactly what was emitted last.

State is keyed by the group keys; a snapshot holds the live groups'
accumulators and the live (group, value, count) entries of each MIN / MAX,
so it can be split by key group when the parallelism changes.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from fastops.core.arrow import as_batch, from_ipc, to_ipc
from fastops.core.keys import KeyTable
from fastops.core.partitioning import KeyGroups
from fastops.operators.base import Operator
from fastops.table.changelog import OP_COLUMN, _pack_parts, _same, _unpack_parts

__all__ = ["RETRACTING", "RetractAggregate"]

#: the aggregate functions that take retractions
RETRACTING = ("count", "sum", "avg", "min", "max", "stddev_pop", "stddev_samp", "var_pop", "var_samp")
_OP = pa.int8()


def _signs(batch: pa.RecordBatch) -> np.ndarray:
    """+1 per ``+I`` / ``+U`` row, -1 per ``-U`` / ``-D`` row."""
    sign = np.ones(batch.num_rows, np.int64)
    i = batch.schema.get_field_index(OP_COLUMN)
    if i >= 0:
        ops = batch.column(i).to_numpy(zero_copy_only=False)
        sign[(ops == 1) | (ops == 3)] = -1
    return sign


def _grow(a: np.ndarray, n: int, fill: Any = 0) -> np.ndarray:
    if len(a) >= n:
        return a
    out = np.full(max(n, 2 * len(a), 64), fill, dtype=a.dtype)
    out[:len(a)] = a
    return out


def _numbers(arr: pa.Array, dtype: Any) -> tuple[np.ndarray, np.ndarray]:
    """The values of ``arr`` as ``dtype`` (nulls as 0) and whether each is non-null."""
    valid = ~np.asarray(arr.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    vals = np.asarray(pc.fill_null(arr.cast(pa.float64() if dtype == np.float64 else pa.int64()), 0)
                      .to_numpy(zero_copy_only=False), dtype=dtype)
    return vals, valid


class _Sums:
    """COUNT(x), SUM, AVG, STDDEV / VAR: a non-null count, a sum and (moments) a sum of squares."""

    def __init__(self, fn: str, column: str | None, input_type: pa.DataType | None):
        self.fn = fn
        self.column = column
        exact = input_type is not None and (pa.types.is_integer(input_type) or pa.types.is_boolean(input_type))
        self.dtype = np.int64 if exact and fn in ("sum", "avg", "count") else np.float64
        self.moments = fn.startswith(("stddev", "var"))
        self.cnt = np.zeros(0, np.int64)
        self.sum = np.zeros(0, self.dtype)
        self.sq = np.zeros(0, np.float64)

    def grow(self, n: int) -> None:
        self.cnt, self.sum, self.sq = _grow(self.cnt, n), _grow(self.sum, n), _grow(self.sq, n)

    def update(self, batch: pa.RecordBatch, gids: np.ndarray, sign: np.ndarray) -> None:
        if self.column is None:  # COUNT(*): the group's row count, kept by the operator
            return
        col = batch.column(self.column)
        if self.fn == "count":
            valid = ~np.asarray(col.is_null().to_numpy(zero_copy_only=False), dtype=bool)
            np.add.at(self.cnt, gids, sign * valid)
            return
        vals, valid = _numbers(col, self.dtype)
        np.add.at(self.cnt, gids, sign * valid)
        np.add.at(self.sum, gids, vals * sign)
        if self.moments:
            np.add.at(self.sq, gids, vals.astype(np.float64) ** 2 * sign)

    def reset(self, gids: np.ndarray) -> None:
        self.cnt[gids], self.sum[gids], self.sq[gids] = 0, 0, 0

    def result(self, gids: np.ndarray, rows: np.ndarray) -> pa.Array:
        if self.column is None:
            return pa.array(rows[gids], pa.int64())
        cnt = self.cnt[gids]
        if self.fn == "count":
            return pa.array(cnt, pa.int64())
        s = self.sum[gids]
        if self.fn == "sum":
            return pa.array(s, mask=cnt <= 0)
        n = np.maximum(cnt, 1).astype(np.float64)
        mean = s / n
        if self.fn == "avg":
            return pa.array(mean, pa.float64(), mask=cnt <= 0)
        ddof = 0 if self.fn.endswith("pop") else 1
        var = np.maximum(self.sq[gids] - mean * s, 0.0) / np.maximum(cnt - ddof, 1)
        out = np.sqrt(var) if self.fn.startswith("stddev") else var
        return pa.array(out, pa.float64(), mask=cnt <= ddof)

    def state(self, gids: np.ndarray) -> dict[str, pa.Array]:
        return {"cnt": pa.array(self.cnt[gids]), "sum": pa.array(self.sum[gids]), "sq": pa.array(self.sq[gids])}

    def load(self, gids: np.ndarray, cols: dict[str, np.ndarray]) -> None:
        np.add.at(self.cnt, gids, cols["cnt"])
        np.add.at(self.sum, gids, cols["sum"].astype(self.dtype))
        np.add.at(self.sq, gids, cols["sq"])


class _Extreme:
    """MIN / MAX with retraction: a count per (group, value) and the entry of each group's extreme."""

    def __init__(self, fn: str, column: str, input_type: pa.DataType):
        self.fn = fn
        self.column = column
        self.type = input_type
        self._reset()

    def _reset(self) -> None:
        self.entries = KeyTable(["__g", "__v"], types=[pa.int64(), self.type])
        self.count = np.zeros(0, np.int64)  # per entry
        self.group = np.zeros(0, np.int64)  # per entry: its group
        self.ext = np.zeros(0, np.int64)  # per group: the entry of its extreme (-1: no value)
        self.sorted_g = np.zeros(0, np.int64)  # entry groups [0, indexed) sorted, and their entries
        self.sorted_e = np.zeros(0, np.int64)
        self.indexed = 0
        self.compacted = 0  # entries after the last compaction

    def grow(self, n: int) -> None:
        self.ext = _grow(self.ext, n, -1)

    def update(self, batch: pa.RecordBatch, gids: np.ndarray, sign: np.ndarray) -> None:
        col = batch.column(self.column)
        if col.type != self.type:
            col = col.cast(self.type)
        valid = ~np.asarray(col.is_null().to_numpy(zero_copy_only=False), dtype=bool)
        if not valid.all():
            idx = np.flatnonzero(valid)
            col, gids, sign = col.take(pa.array(idx)), gids[idx], sign[idx]
        if len(gids) == 0:
            return
        self._add(gids, col, sign)
        if self.entries.num_groups > max(4096, 2 * self.compacted):  # retracted values pile up
            self.compact()
            self.compacted = self.entries.num_groups

    def _add(self, gids: np.ndarray, values: pa.Array, counts: np.ndarray) -> None:
        eids = self.entries.lookup_or_insert([pa.array(gids, pa.int64()), values])
        n = self.entries.num_groups
        self.count, self.group = _grow(self.count, n), _grow(self.group, n)
        self.group[eids] = gids
        np.add.at(self.count, eids, counts)
        touched = np.unique(gids)
        cur = self.ext[touched]
        held = cur >= 0
        alive = np.zeros(len(cur), bool)
        alive[held] = self.count[cur[held]] > 0
        lost = touched[held & ~alive]  # the extreme's last copy was retracted: look at every value
        cands = np.concatenate([cur[alive], eids[counts > 0], self._of_groups(lost)])
        self._pick(touched, cands)

    def _of_groups(self, groups: np.ndarray) -> np.ndarray:
        """The entries of ``groups``."""
        if len(groups) == 0:
            return np.zeros(0, np.int64)
        n = self.entries.num_groups
        if n - self.indexed > max(1024, self.indexed):
            self.sorted_e = np.argsort(self.group[:n], kind="stable").astype(np.int64)
            self.sorted_g = self.group[self.sorted_e]
            self.indexed = n
        lo = np.searchsorted(self.sorted_g, groups, "left")
        hi = np.searchsorted(self.sorted_g, groups, "right")
        width = hi - lo
        pos = np.repeat(lo - np.concatenate([[0], np.cumsum(width)[:-1]]), width) + np.arange(int(width.sum()))
        tail = self.indexed + np.flatnonzero(np.isin(self.group[self.indexed:n], groups))
        return np.concatenate([self.sorted_e[pos], tail])

    def _pick(self, groups: np.ndarray, cands: np.ndarray) -> None:
        """Set the extreme of ``groups`` to the least / greatest live entry among ``cands``."""
        self.ext[groups] = -1
        cands = cands[self.count[cands] > 0]  # repeats are harmless: the first per group wins
        if len(cands) == 0:
            return
        vals = self.entries.keys(cands)[1]
        t = pa.table({"g": self.group[cands], "v": vals, "e": cands})
        order = pc.sort_indices(t, sort_keys=[("g", "ascending"),
                                              ("v", "ascending" if self.fn == "min" else "descending")])
        g = t.column("g").to_numpy()[order.to_numpy()]
        e = cands[order.to_numpy()]
        first = np.concatenate([[True], g[1:] != g[:-1]])
        self.ext[g[first]] = e[first]

    def reset(self, gids: np.ndarray) -> None:
        self.ext[gids] = -1  # its entries' counts are 0 once every row was retracted

    def result(self, gids: np.ndarray, rows: np.ndarray) -> pa.Array:
        e = self.ext[gids]
        has = e >= 0
        if has.all():
            return self.entries.keys(e)[1]
        vals = self.entries.keys(e[has])[1]
        idx = np.cumsum(has) - 1
        return vals.take(pa.array(idx, mask=~has)) if len(vals) else pa.nulls(len(gids), self.type)

    def live_entries(self) -> tuple[np.ndarray, pa.Array, np.ndarray]:
        """(group, value, count) of every entry with a positive count."""
        n = self.entries.num_groups
        live = np.flatnonzero(self.count[:n] > 0)
        vals = self.entries.keys(live)[1] if len(live) else pa.array([], self.type)
        return self.group[live], vals, self.count[live]

    def compact(self) -> None:
        """Drop the entries whose count is 0 (ids are renumbered)."""
        g, v, c = self.live_entries()
        ext, compacted = self.ext, self.compacted
        self._reset()
        self.compacted = compacted
        self.ext = np.full(len(ext), -1, np.int64)
        if len(g):
            self._add(g, v, c)


class RetractAggregate(Operator):
    """Streaming GROUP BY (no window) of a changelog, emitting a changelog (module docs).

    ``aggs``: (output name, function, input column or None for ``COUNT(*)``,
    input type); ``schema``: the output's keys then aggregates (the op column
    is appended).
    """

    def __init__(self, keys: Sequence[str], aggs: Sequence[tuple[str, str, str | None, pa.DataType | None]],
                 schema: pa.Schema):
        self.keys = list(keys)
        self.specs = list(aggs)
        self.schema = schema
        self.name = "group_by(retract)"
        self._reset()

    def _reset(self) -> None:
        self.groups = KeyTable(self.keys)
        self.rows = np.zeros(0, np.int64)
        self.accs: list[_Sums | _Extreme] = [
            _Extreme(fn, col, t) if fn in ("min", "max") else _Sums(fn, col, t)  # type: ignore[arg-type]
            for _, fn, col, t in self.specs]

    def _gids(self, batch: pa.RecordBatch) -> np.ndarray:
        if self.keys:
            return self.groups.lookup_or_insert([batch.column(k) for k in self.keys])
        return self.groups.lookup_n(batch.num_rows)

    def _grow(self) -> None:
        n = max(self.groups.num_groups, 1)
        self.rows = _grow(self.rows, n)
        for a in self.accs:
            a.grow(n)

    def _results(self, gids: np.ndarray) -> pa.Table:
        cols = self.groups.keys(gids) if self.keys else []
        cols += [a.result(gids, self.rows) for a in self.accs]
        cols = [c if c.type == f.type else c.cast(f.type) for c, f in zip(cols, self.schema)]
        return pa.Table.from_arrays(cols, schema=self.schema)

    def process(self, batch: pa.RecordBatch) -> list:
        if batch.num_rows == 0:
            return []
        sign = _signs(batch)
        gids = self._gids(batch)
        self._grow()
        touched = np.unique(gids)
        before = self.rows[touched] > 0
        old = self._results(touched[before])
        np.add.at(self.rows, gids, sign)
        for a in self.accs:
            a.update(batch, gids, sign)
        after = self.rows[touched] > 0
        gone = touched[~after]
        if len(gone):  # no rows left: the group's state is dropped
            self.rows[gone] = 0
            for a in self.accs:
                a.reset(gone)
        new = self._results(touched[after])
        return self._changes(before, after, old, new)

    def _changes(self, before: np.ndarray, after: np.ndarray, old: pa.Table, new: pa.Table) -> list:
        """-U / +U per group kept whose result changed, -D per group gone, +I per new group."""
        n = len(before)
        old_at = np.full(n, -1, np.int64)
        old_at[before] = np.arange(old.num_rows)
        new_at = np.full(n, -1, np.int64)
        new_at[after] = np.arange(new.num_rows)
        both = np.flatnonzero(before & after)
        changed = np.zeros(len(both), bool)
        if len(both):
            o, w = old.take(pa.array(old_at[both])), new.take(pa.array(new_at[both]))
            for name in self.schema.names[len(self.keys):]:
                changed |= ~_same(o.column(name).combine_chunks(), w.column(name).combine_chunks())
        keep = np.zeros(n, bool)
        keep[both[changed]] = True
        keep |= before != after
        rows = np.flatnonzero(keep)
        if len(rows) == 0:
            return []
        width = np.where(before[rows] & after[rows], 2, 1)
        start = np.cumsum(width) - width
        total = int(width.sum())
        src = np.empty(total, np.int64)  # row of old ++ new
        ops = np.empty(total, np.int8)
        upd = before[rows] & after[rows]
        s = start[upd]
        src[s], ops[s] = old_at[rows[upd]], 1
        src[s + 1], ops[s + 1] = old.num_rows + new_at[rows[upd]], 2
        s = start[before[rows] & ~after[rows]]
        src[s], ops[s] = old_at[rows[before[rows] & ~after[rows]]], 3
        s = start[~before[rows] & after[rows]]
        src[s], ops[s] = old.num_rows + new_at[rows[~before[rows] & after[rows]]], 0
        out = pa.concat_tables([old, new]).take(pa.array(src)).combine_chunks()
        out = out.append_column(OP_COLUMN, pa.array(ops, _OP))
        return [b for b in out.to_batches() if b.num_rows]

    # -- state --------------------------------------------------------------------------
    def snapshot(self) -> bytes | None:
        n = self.groups.num_groups
        live = np.flatnonzero(self.rows[:n] > 0)
        if len(live) == 0:
            return None
        cols: dict[str, Any] = dict(zip(self.keys, self.groups.keys(live))) if self.keys else {}
        cols["__rows"] = pa.array(self.rows[live])
        parts = []
        for i, a in enumerate(self.accs):
            if isinstance(a, _Sums):
                cols.update({f"__a{i}_{k}": v for k, v in a.state(live).items()})
        parts.append(to_ipc(pa.table(cols)))
        for a in self.accs:
            if isinstance(a, _Extreme):
                a.compact()
                g, v, c = a.live_entries()
                ent: dict[str, Any] = dict(zip(self.keys, self.groups.keys(g))) if self.keys else \
                    {"__nokey": pa.array(np.zeros(len(g), np.int8))}
                ent["__v"], ent["__c"] = v, pa.array(c)
                parts.append(to_ipc(pa.table(ent)))
        return _pack_parts(parts)

    def restore(self, state: bytes | None) -> None:
        self._load([state], None)

    def restore_groups(self, states: Sequence[bytes | None], groups: KeyGroups) -> None:
        if not self.keys:
            given = [s for s in states if s is not None]
            if len(given) > 1:
                raise ValueError(f"operator {self.name!r} aggregates without a key, so the state of "
                                 f"{len(given)} tasks cannot be shared out again")
            self._load(given, None)
            return
        self._load(states, groups)

    def _load(self, states: Sequence[bytes | None], owned: KeyGroups | None) -> None:
        self._reset()
        for s in states:
            if s is None:
                continue
            parts = _unpack_parts(s)
            t = from_ipc(parts[0])
            if owned is not None:
                t = t.filter(pa.array(owned.mask(t, self.keys)))
            if t.num_rows:
                b = as_batch(t)
                gids = self._gids(b)
                self._grow()
                np.add.at(self.rows, gids, t.column("__rows").to_numpy())
                for i, a in enumerate(self.accs):
                    if isinstance(a, _Sums):
                        a.load(gids, {k: t.column(f"__a{i}_{k}").to_numpy() for k in ("cnt", "sum", "sq")})
            ext = iter(parts[1:])
            for a in self.accs:
                if not isinstance(a, _Extreme):
                    continue
                e = from_ipc(next(ext))
                if owned is not None:
                    e = e.filter(pa.array(owned.mask(e, self.keys)))
                if e.num_rows == 0:
                    continue
                gids = self._gids(as_batch(e))
                self._grow()
                a._add(gids, e.column("__v").combine_chunks(), e.column("__c").to_numpy())
