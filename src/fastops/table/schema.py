"""``TableSchema``: a table's columns, with PyFlink's TableSchema methods.

>>> import fastops as fo
>>> from fastops.table import DataTypes
>>> t = fo.TableEnvironment(mode="batch").from_elements([(1, "Hi")], ["id", "data"])
>>> s = t.get_schema()
>>> s.get_field_names(), s.get_field_count()
(['id', 'data'], 2)
>>> s.get_field_data_type("id") == DataTypes.BIGINT()
True
>>> print(s)
root
 |-- id: BIGINT
 |-- data: STRING
<BLANKLINE>

Data types are those of :class:`fastops.table.DataTypes` (Arrow types), so
they compare equal to ``DataTypes.BIGINT()`` and friends. The object also
behaves as the ``pyarrow.Schema`` it wraps (``names``, ``types``,
``field(...)``, iteration, equality with a ``pyarrow.Schema``); ``to_arrow()``
returns that schema.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from fastops.table.types import to_sql

__all__ = ["TableSchema"]


class TableSchema:
    """The names and data types of a table's columns."""

    def __init__(self, schema: pa.Schema):
        self._schema = schema

    # -- PyFlink's TableSchema ----------------------------------------------------------
    def get_field_names(self) -> list[str]:
        return list(self._schema.names)

    def get_field_data_types(self) -> list[pa.DataType]:
        return list(self._schema.types)

    def get_field_data_type(self, field: int | str) -> pa.DataType | None:
        """The data type of the column named (or at index) ``field``; None if there is none."""
        if isinstance(field, str):
            i = self._schema.get_field_index(field)
            return self._schema.field(i).type if i >= 0 else None
        if isinstance(field, int) and 0 <= field < len(self._schema):
            return self._schema.field(field).type
        return None

    def get_field_name(self, index: int) -> str | None:
        return self._schema.names[index] if 0 <= index < len(self._schema) else None

    def get_field_count(self) -> int:
        return len(self._schema)

    def to_arrow(self) -> pa.Schema:
        """The ``pyarrow.Schema``."""
        return self._schema

    # -- as the pyarrow.Schema ------------------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._schema, name)

    def __arrow_c_schema__(self) -> Any:
        return self._schema.__arrow_c_schema__()

    def __iter__(self) -> Iterator[pa.Field]:
        return iter(self._schema)

    def __len__(self) -> int:
        return len(self._schema)

    def __getitem__(self, key: Any) -> pa.Field:
        return self._schema[key]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TableSchema):
            return self._schema.equals(other._schema)
        if isinstance(other, pa.Schema):
            return self._schema.equals(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._schema)

    def __str__(self) -> str:
        return "root\n" + "".join(f" |-- {f.name}: {to_sql(f.type)}\n" for f in self._schema)

    def __repr__(self) -> str:
        return f"TableSchema({', '.join(f'{f.name} {to_sql(f.type)}' for f in self._schema)})"
