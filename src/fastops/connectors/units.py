"""Positions of sources read as a list of *units* (in-memory batches, file
fragments), and how the units left are dealt out when the number of readers
changes (as Flink reassigns unfinished splits).

Split ``i`` of ``P`` reads units ``i, i + P, ...``; its position is the
source's own compact form (how many of them it finished, and for files the
rows read of the next). After a change of parallelism a reader reads an
explicit list instead, and its position is a dict (JSON, as checkpoints store
positions)::

    {"units": [u, ...],          # global unit ids still to read, in order
     "rows": r,                  # rows already read of the first of them
     "partial": [[u, r], ...],   # only when needed: rows already read of later ones
     "done": [u, ...]}           # units finished (the rows it accounts for: rows_at)

``rescale`` deals the units nobody finished over the new readers round robin:
units read in part first (each keeps its row offset), then the untouched ones,
both by unit id. Old reader ``i``'s finished units go to new reader
``i % parallelism``, so the rows the readers account for still add up.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

__all__ = ["Cursor", "Plan", "rescale_positions", "split_plan"]


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


@dataclass
class Plan:
    """What one reader still reads (``units``, with the rows already read of
    each in ``skips``) and the units it finished (``done``)."""

    units: list[int] = field(default_factory=list)
    skips: list[int] = field(default_factory=list)
    done: list[int] = field(default_factory=list)

    def to_position(self) -> dict:
        """The dict form (see the module docs)."""
        pos: dict[str, Any] = {"units": list(self.units), "rows": self.skips[0] if self.units else 0}
        partial = [[u, s] for u, s in zip(self.units[1:], self.skips[1:]) if s]
        if partial:
            pos["partial"] = partial
        pos["done"] = list(self.done)
        return pos

    @classmethod
    def from_position(cls, position: dict, num_units: int, name: str) -> Plan:
        """The plan of a dict position; ValueError naming the source ``name``
        when it is not one of ``num_units`` units."""
        def bad(why: str) -> ValueError:
            return ValueError(f"source {name!r}: bad position {position!r}: {why}")

        unknown = set(position) - {"units", "rows", "partial", "done"}
        if unknown:
            raise bad(f"unknown keys {sorted(unknown)}")
        ids: dict[str, list[int]] = {}
        for what in ("units", "done"):
            value = position.get(what, [] if what == "done" else None)
            if not isinstance(value, (list, tuple)) or not all(_is_int(u) and 0 <= u < num_units for u in value):
                raise bad(f"{what!r} must be a list of unit ids in [0, {num_units})")
            ids[what] = [int(u) for u in value]
        units, done = ids["units"], ids["done"]
        if len(set(units) | set(done)) != len(units) + len(done):
            raise bad("a unit is listed twice")
        rows, partial = position.get("rows", 0), position.get("partial", [])
        if not _is_int(rows) or rows < 0:
            raise bad("'rows' must be an int >= 0")
        skips = [int(rows)] + [0] * (len(units) - 1) if units else []
        at = {u: k for k, u in enumerate(units)}
        if not isinstance(partial, (list, tuple)):
            raise bad("'partial' must be a list of [unit, rows] pairs")
        for pair in partial:
            if not (isinstance(pair, (list, tuple)) and len(pair) == 2 and all(_is_int(v) for v in pair)
                    and pair[1] >= 0 and at.get(int(pair[0]), 0) > 0):
                raise bad("'partial' must hold [unit, rows] pairs of units after the first")
            skips[at[int(pair[0])]] = int(pair[1])
        return cls(units, skips, done)

    def rows_read(self, unit_rows: Callable[[int], int]) -> int:
        """Rows of the finished units (``unit_rows(u)``) plus those read of the others."""
        return sum(unit_rows(u) for u in self.done) + sum(self.skips)


def split_plan(index: int, parallelism: int, num_units: int, finished: int = 0, rows: int = 0) -> Plan:
    """The plan of split ``index`` of ``parallelism`` (units ``index, index +
    parallelism, ...``) once it finished ``finished`` of them and read ``rows``
    of the next."""
    mine = list(range(index, num_units, parallelism))
    units = mine[finished:]
    return Plan(units, [rows] + [0] * (len(units) - 1) if units else [], mine[:finished])


def rescale_positions(name: str, positions: Any, parallelism: Any,
                      plan_of: Callable[[int, int, Any], Plan]) -> list[dict]:
    """``Source.rescale_positions`` of a source of units: the positions of
    ``parallelism`` new readers from those of the old ones, whose plans
    ``plan_of(index, old parallelism, position)`` gives; ValueError naming
    the source for bad positions or parallelism."""
    _check_rescale(name, positions, parallelism)
    return rescale([plan_of(i, len(positions), pos) for i, pos in enumerate(positions)], parallelism, name)


def _check_rescale(name: str, positions: Any, parallelism: Any) -> None:
    """ValueError naming the source unless ``positions`` is a non-empty list
    and ``parallelism`` an int >= 1."""
    if not isinstance(positions, (list, tuple)) or not positions:
        raise ValueError(f"source {name!r}: positions must be a non-empty list, one per reader, "
                         f"got {positions!r}")
    if not _is_int(parallelism) or parallelism < 1:
        raise ValueError(f"source {name!r}: parallelism must be an int >= 1, got {parallelism!r}")


def rescale(plans: list[Plan], parallelism: int, name: str) -> list[dict]:
    """The dict positions of ``parallelism`` new readers that together read
    what ``plans`` had left, each unit once (see the module docs)."""
    seen: set[int] = set()
    for plan in plans:
        for u in plan.units + plan.done:
            if u in seen:
                raise ValueError(f"source {name!r}: unit {u} is in two readers' positions")
            seen.add(u)
    left = [(s, u) for plan in plans for u, s in zip(plan.units, plan.skips)]
    order = sorted((u, s) for s, u in left if s) + sorted((u, s) for s, u in left if not s)
    new = [Plan() for _ in range(parallelism)]
    for j, (u, s) in enumerate(order):
        new[j % parallelism].units.append(u)
        new[j % parallelism].skips.append(s)
    for i, plan in enumerate(plans):
        new[i % parallelism].done.extend(plan.done)
    for plan in new:
        plan.done.sort()
    return [plan.to_position() for plan in new]


class Cursor:
    """How far a reader got through its plan: ``unit`` (None: all read) and
    ``rows`` read of it."""

    def __init__(self, plan: Plan):
        self._plan = plan
        self._at = 0
        self.rows = plan.skips[0] if plan.units else 0

    @property
    def unit(self) -> int | None:
        return self._plan.units[self._at] if self._at < len(self._plan.units) else None

    @property
    def finished(self) -> int:
        """Units finished, counting those the plan started with."""
        return len(self._plan.done) + self._at

    def next_unit(self) -> None:
        """The current unit is read to its end."""
        self._at += 1
        self.rows = self._plan.skips[self._at] if self._at < len(self._plan.units) else 0

    def rows_left(self, unit_rows: Callable[[int], int]) -> int:
        """Rows not read yet of the units left (``unit_rows(u)``: rows of unit ``u``)."""
        p, at = self._plan, self._at
        if at >= len(p.units):
            return 0
        return sum(unit_rows(u) for u in p.units[at:]) - self.rows - sum(p.skips[at + 1:])

    def plan(self) -> Plan:
        """What is left, and what is done."""
        p = self._plan
        units = p.units[self._at:]
        skips = [self.rows] + p.skips[self._at + 1:] if units else []
        return Plan(units, skips, p.done + p.units[:self._at])
