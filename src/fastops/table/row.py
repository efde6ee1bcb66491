"""``Row``: a row of a result or of a user-defined function, as PyFlink's ``pyflink.common.Row``.

>>> from fastops.table import Row
>>> r = Row(id=1, data="Hi")
>>> r.id, r["data"], r[0], tuple(r)
(1, 'Hi', 1, (1, 'Hi'))
>>> acc = Row(0, 0)          # a mutable accumulator, as PyFlink's aggregate functions use it
>>> acc[0] += 5
>>> acc
<Row(5, 0)>

A row compares equal to another row or a tuple with the same values, and
hashes as that tuple. Result rows carry a row kind (``"+I"``, ``"-U"``,
``"+U"``, ``"-D"``: :meth:`get_row_kind`).
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

__all__ = ["Row", "to_python"]


class Row:
    """Positional (``Row(1, "a")``) or named (``Row(id=1, data="a")``) values:
    read by position, by name (``row.id``, ``row["id"]``), and set by position
    or name (``row[0] = 2``), as accumulators need."""

    __slots__ = ("_fields", "_kind", "_values")

    def __init__(self, *args: Any, **kwargs: Any):
        if args and kwargs:
            raise ValueError("a Row takes positional values or named values, not both")
        if kwargs:
            object.__setattr__(self, "_fields", list(kwargs))
            object.__setattr__(self, "_values", list(kwargs.values()))
        else:
            object.__setattr__(self, "_fields", None)
            object.__setattr__(self, "_values", list(args))
        object.__setattr__(self, "_kind", "+I")

    @classmethod
    def of(cls, values: Sequence[Any], names: Sequence[str] | None = None, kind: str = "+I") -> Row:
        """A row of ``values`` named ``names`` with row kind ``kind``."""
        r = cls(*values)
        if names is not None:
            r.set_field_names(names)
        object.__setattr__(r, "_kind", kind)
        return r

    # -- PyFlink's methods ----------------------------------------------------------
    def get_row_kind(self) -> str:
        return self._kind

    def set_row_kind(self, kind: str) -> None:
        object.__setattr__(self, "_kind", kind)

    def set_field_names(self, names: Sequence[str]) -> None:
        object.__setattr__(self, "_fields", list(names))

    def get_fields_by_names(self, names: Sequence[str]) -> list:
        return [self[n] for n in names]

    def as_dict(self, recursive: bool = False) -> dict:
        if self._fields is None:
            raise TypeError("as_dict needs a Row with field names")

        def conv(v: Any) -> Any:
            if recursive and isinstance(v, Row):
                return v.as_dict(True)
            if recursive and isinstance(v, list):
                return [conv(x) for x in v]
            return v

        return {n: conv(v) for n, v in zip(self._fields, self._values)}

    def __call__(self, *values: Any) -> Row:
        """A Row of field names used as a schema: ``Row("a", "b")(1, 2)`` is ``Row(a=1, b=2)``."""
        if len(values) != len(self._values):
            raise ValueError(f"{len(values)} values for the {len(self._values)} fields {self._values}")
        return Row(**dict(zip(self._values, values)))

    # -- access ----------------------------------------------------------------------
    def _index(self, name: str) -> int:
        if self._fields is None or name not in self._fields:
            raise KeyError(f"no field {name!r} in the row (fields: {self._fields or []})")
        return self._fields.index(name)

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return self._values[self._index(key)]
        return self._values[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        if isinstance(key, str):
            self._values[self._index(key)] = value
        else:
            self._values[key] = value

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        fields = self._fields
        if fields is not None and name in fields:
            return self._values[fields.index(name)]
        raise AttributeError(f"no field {name!r} in the row (fields: {fields or []})")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"a Row's fields are set by index or name (row[{name!r}] = ...), not as attributes")

    def __iter__(self) -> Iterator[Any]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __contains__(self, item: Any) -> bool:
        return item in self._values

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Row):
            return self._values == other._values and (
                self._fields is None or other._fields is None or self._fields == other._fields)
        if isinstance(other, tuple):
            return tuple(self._values) == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self._values))

    def __reduce__(self) -> Any:
        return (_rebuild, (self._values, self._fields, self._kind))

    def __repr__(self) -> str:
        if self._fields is not None:
            return "Row(" + ", ".join(f"{n}={v!r}" for n, v in zip(self._fields, self._values)) + ")"
        return "<Row(" + ", ".join(repr(v) for v in self._values) + ")>"


def _rebuild(values: list, fields: list | None, kind: str) -> Row:
    return Row.of(values, fields, kind)


def to_python(value: Any) -> Any:
    """``value`` with every :class:`Row` made a tuple (what pyarrow takes for a ROW value)."""
    if isinstance(value, Row):
        return tuple(to_python(v) for v in value)
    if isinstance(value, list):
        return [to_python(v) for v in value]
    return value
