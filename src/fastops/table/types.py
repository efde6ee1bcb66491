"""SQL type names (as Flink spells them) <-> Arrow types.

========================  =======================
SQL                       Arrow
========================  =======================
TINYINT / SMALLINT        int8 / int16
INT / INTEGER             int32
BIGINT                    int64
FLOAT / REAL              float32
DOUBLE                    float64
DECIMAL(p, s)             decimal128(p, s)
BOOLEAN                   bool
STRING / VARCHAR(n)       string
BYTES / VARBINARY(n)      binary
DATE                      date32
TIME(p)                   time32[ms] / time64[us|ns]
TIMESTAMP(p)              timestamp[s|ms|us|ns] (p 0 / 1-3 / 4-6 / 7-9; default 6)
TIMESTAMP_LTZ(p)          timestamp with tz UTC
ROW<name type, ...>       struct (also ROW(...), STRUCT<...>; names may be quoted)
========================  =======================

``DataTypes`` mirrors PyFlink's factory (``DataTypes.BIGINT()``); its methods
return Arrow types, which every Table API call accepts, as do SQL type strings.
"""
from __future__ import annotations

import re
from typing import Any

import pyarrow as pa
import pyarrow.types as pat

__all__ = ["DataTypes", "timestamp_precision", "to_arrow", "to_sql"]

_SIMPLE = {
    "TINYINT": pa.int8(), "SMALLINT": pa.int16(), "INT": pa.int32(), "INTEGER": pa.int32(),
    "BIGINT": pa.int64(), "FLOAT": pa.float32(), "REAL": pa.float32(), "DOUBLE": pa.float64(),
    "DOUBLE PRECISION": pa.float64(), "BOOLEAN": pa.bool_(), "BOOL": pa.bool_(),
    "STRING": pa.string(), "VARCHAR": pa.string(), "CHAR": pa.string(), "TEXT": pa.string(),
    "BYTES": pa.binary(), "VARBINARY": pa.binary(), "BINARY": pa.binary(), "DATE": pa.date32(),
    "DECIMAL": pa.decimal128(10, 0), "NUMERIC": pa.decimal128(10, 0),
}

_TYPE_RE = re.compile(r"^\s*([A-Za-z_ ]+?)\s*(?:\(\s*([0-9]+)\s*(?:,\s*([0-9]+)\s*)?\))?\s*(NOT\s+NULL)?\s*$",
                      re.IGNORECASE)


def _ts_unit(p: int) -> str:
    if p == 0:
        return "s"
    if p <= 3:
        return "ms"
    if p <= 6:
        return "us"
    return "ns"


def to_arrow(t: Any) -> pa.DataType:
    """An Arrow type from a SQL type name (``"BIGINT"``, ``"TIMESTAMP(3)"``), an
    Arrow type, or a sqlglot ``DataType``. Unknown names raise ``ValueError``."""
    if isinstance(t, pa.DataType):
        return t
    if not isinstance(t, str):
        sql = getattr(t, "sql", None)
        if callable(sql):
            return to_arrow(sql())
        raise TypeError(f"a type must be a SQL type name or a pyarrow DataType, got {t!r}")
    row = _ROW_RE.match(t)
    if row is not None:
        return pa.struct(_row_fields(row.group(2), t))
    m = _TYPE_RE.match(t)
    if m is None:
        raise ValueError(f"unknown SQL type {t!r}")
    name = " ".join(m.group(1).upper().split())
    p = int(m.group(2)) if m.group(2) is not None else None
    s = int(m.group(3)) if m.group(3) is not None else None
    if name in ("TIMESTAMP", "TIMESTAMP WITHOUT TIME ZONE", "DATETIME"):
        return pa.timestamp(_ts_unit(6 if p is None else p))
    if name in ("TIMESTAMP_LTZ", "TIMESTAMPLTZ", "TIMESTAMP WITH LOCAL TIME ZONE", "TIMESTAMPTZ",
                "TIMESTAMP WITH TIME ZONE"):
        return pa.timestamp(_ts_unit(6 if p is None else p), tz="UTC")
    if name == "TIME":
        p = 0 if p is None else p
        return pa.time32("s") if p == 0 else pa.time32("ms") if p <= 3 else pa.time64(_ts_unit(p))
    if name in ("DECIMAL", "NUMERIC", "DEC"):
        return pa.decimal128(10 if p is None else p, 0 if s is None else s)
    if name in _SIMPLE:
        return _SIMPLE[name]
    known = ", ".join(sorted(set(_SIMPLE) | {"TIMESTAMP", "TIMESTAMP_LTZ", "TIME"}))
    raise ValueError(f"unknown SQL type {t!r} (known: {known})")


_ROW_RE = re.compile(r"^\s*(ROW|STRUCT)\s*[<(](.*)[>)]\s*(NOT\s+NULL)?\s*$", re.IGNORECASE | re.DOTALL)


def _row_fields(body: str, whole: str) -> list[pa.Field]:
    """The fields of a ROW type's ``name type, ...`` (commas inside nested types kept)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(body):
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(body[start:i])
            start = i + 1
    parts.append(body[start:])
    fields = []
    for part in parts:
        m = re.match(r"\s*(`[^`]+`|\"[^\"]+\"|[A-Za-z_][A-Za-z_0-9$]*)\s+(.+?)\s*$", part, re.DOTALL)
        if m is None:
            raise ValueError(f"cannot read the field {part.strip()!r} of the type {whole!r} (expected name type)")
        fields.append(pa.field(m.group(1).strip('`"'), to_arrow(m.group(2))))
    return fields


def timestamp_precision(t: pa.DataType) -> int:
    return {"s": 0, "ms": 3, "us": 6, "ns": 9}[t.unit]


def to_sql(t: pa.DataType) -> str:
    """The SQL name of an Arrow type (``int64`` -> ``BIGINT``)."""
    if pat.is_int8(t):
        return "TINYINT"
    if pat.is_int16(t):
        return "SMALLINT"
    if pat.is_int32(t):
        return "INT"
    if pat.is_int64(t):
        return "BIGINT"
    if pat.is_unsigned_integer(t):
        return f"UINT{t.bit_width}"
    if pat.is_float32(t):
        return "FLOAT"
    if pat.is_float64(t):
        return "DOUBLE"
    if pat.is_boolean(t):
        return "BOOLEAN"
    if pat.is_string(t) or pat.is_large_string(t) or pat.is_dictionary(t):
        return "STRING"
    if pat.is_binary(t) or pat.is_large_binary(t):
        return "BYTES"
    if pat.is_decimal(t):
        return f"DECIMAL({t.precision}, {t.scale})"
    if pat.is_date(t):
        return "DATE"
    if pat.is_timestamp(t):
        p = timestamp_precision(t)
        return f"TIMESTAMP_LTZ({p})" if t.tz else f"TIMESTAMP({p})"
    if pat.is_time(t):
        return f"TIME({timestamp_precision(t)})"
    if pat.is_null(t):
        return "NULL"
    if pat.is_struct(t):
        return "ROW<" + ", ".join(f"`{f.name}` {to_sql(f.type)}" for f in t) + ">"
    return str(t).upper()


class DataTypes:
    """PyFlink-style type factory; every method returns an Arrow type."""

    @staticmethod
    def TINYINT() -> pa.DataType: return pa.int8()
    @staticmethod
    def SMALLINT() -> pa.DataType: return pa.int16()
    @staticmethod
    def INT() -> pa.DataType: return pa.int32()
    @staticmethod
    def BIGINT() -> pa.DataType: return pa.int64()
    @staticmethod
    def FLOAT() -> pa.DataType: return pa.float32()
    @staticmethod
    def DOUBLE() -> pa.DataType: return pa.float64()
    @staticmethod
    def BOOLEAN() -> pa.DataType: return pa.bool_()
    @staticmethod
    def STRING() -> pa.DataType: return pa.string()
    @staticmethod
    def BYTES() -> pa.DataType: return pa.binary()
    @staticmethod
    def DATE() -> pa.DataType: return pa.date32()

    @staticmethod
    def VARCHAR(n: int = 0) -> pa.DataType:
        return pa.string()

    @staticmethod
    def DECIMAL(p: int = 10, s: int = 0) -> pa.DataType:
        return pa.decimal128(p, s)

    @staticmethod
    def TIMESTAMP(p: int = 6) -> pa.DataType:
        return pa.timestamp(_ts_unit(p))

    @staticmethod
    def TIMESTAMP_LTZ(p: int = 6) -> pa.DataType:
        return pa.timestamp(_ts_unit(p), tz="UTC")

    @staticmethod
    def FIELD(name: str, data_type: Any) -> pa.Field:
        return pa.field(name, to_arrow(data_type))

    @staticmethod
    def ROW(fields: Any) -> pa.Schema:
        """A row type as an Arrow schema (``from_elements(rows, DataTypes.ROW([...]))``)."""
        return pa.schema(list(fields))
