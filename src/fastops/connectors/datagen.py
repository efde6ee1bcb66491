"""Flink's ``datagen`` connector: rows generated from a table's declared columns.

``CREATE TABLE t (...) WITH ('connector' = 'datagen', ...)`` takes Flink's
options:

``rows-per-second``
    Pace (default 10000 rows/s).
``number-of-rows``
    Rows in all; unset: unbounded (unless a sequence field ends it).
``fields.<f>.kind``
    ``random`` (default) or ``sequence``.
``fields.<f>.min`` / ``fields.<f>.max``
    Bounds of a random number (default: the type's range).
``fields.<f>.length`` / ``fields.<f>.var-len``
    Length of a random string (default 100; ``var-len``: 1 up to it).
``fields.<f>.max-past``
    A random TIMESTAMP is now minus up to this much (default 0: now).
``fields.<f>.start`` / ``fields.<f>.end``
    A sequence field's first and last value; the source ends after its last.
``fields.<f>.null-rate``
    Fraction of nulls (default 0).
``seed``
    fastops' own option: the same seed gives the same rows (default: a
    random seed). Row ``i``'s values are a hash of (seed, field, ``i``), so
    they do not depend on batch size or on where a restore resumed.

Random strings are hexadecimal, as Flink's. A restarted reader continues at
its position (rows read), so the source is replayable.
"""
from __future__ import annotations

import decimal
import os
import time
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from fastops.connectors.base import END, Reader, Source
from fastops.connectors.pacing import Pace, RateSchedule
from fastops.core.durations import parse_duration

__all__ = ["DatagenSource", "datagen_source"]

_HEX = np.frombuffer(b"0123456789abcdef", np.uint8)
_FIELD_OPTIONS = {"kind", "min", "max", "length", "var-len", "max-past", "start", "end", "null-rate"}
_TABLE_OPTIONS = {"connector", "rows-per-second", "number-of-rows", "seed", "scan.parallelism"}


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser over uint64 values (wrapping arithmetic)."""
    z = x + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _unit(h: np.ndarray) -> np.ndarray:
    """Hashes as floats in [0, 1)."""
    return (h >> np.uint64(11)).astype(np.float64) * 2.0 ** -53


class _Field:
    """How one column is generated (parsed from its ``fields.<name>.*`` options)."""

    def __init__(self, index: int, field: pa.Field, opts: dict[str, str], seed: int, table: str):
        self.name = field.name
        self.type = field.type
        t = field.type
        self.kind = opts.get("kind", "random").lower()
        where = f"datagen table {table!r}, field {field.name!r}"
        if self.kind not in ("random", "sequence"):
            raise ValueError(f"{where}: 'fields.{field.name}.kind' is 'random' or 'sequence', got {self.kind!r}")
        self.null_rate = float(opts.get("null-rate", 0))
        if not 0 <= self.null_rate <= 1:
            raise ValueError(f"{where}: null-rate must be within [0, 1], got {self.null_rate}")
        self.salt = _mix(np.array([seed & (2**64 - 1)], np.uint64) ^ np.uint64(0x51ED270B) * np.uint64(index + 1))
        self.numeric = pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
        self.text = pa.types.is_string(t) or pa.types.is_large_string(t)
        if self.kind == "sequence":
            if "start" not in opts or "end" not in opts:
                raise ValueError(f"{where}: a sequence needs 'fields.{field.name}.start' and "
                                 f"'fields.{field.name}.end'")
            if not (self.numeric or self.text):
                raise ValueError(f"{where}: a sequence is of numbers or strings, not {t}")
            self.start, self.end = int(opts["start"]), int(opts["end"])
            if self.end < self.start:
                raise ValueError(f"{where}: sequence end {self.end} is before its start {self.start}")
            return
        if pa.types.is_integer(t):
            info = np.iinfo(t.to_pandas_dtype())
            self.lo, self.hi = int(opts.get("min", info.min)), int(opts.get("max", info.max))
        elif pa.types.is_floating(t) or pa.types.is_decimal(t):
            big = float(np.finfo(np.float32 if pa.types.is_float32(t) else np.float64).max)
            if pa.types.is_decimal(t):
                big = float(10 ** (t.precision - t.scale)) - 10.0 ** -t.scale
            self.flo, self.fhi = float(opts.get("min", -big)), float(opts.get("max", big))
        elif self.text:
            self.length = int(opts.get("length", 100))
            self.var_len = str(opts.get("var-len", "false")).lower() == "true"
        elif pa.types.is_timestamp(t) or pa.types.is_date(t):
            self.max_past = parse_duration(opts["max-past"]) if "max-past" in opts else 0
        elif not pa.types.is_boolean(t):
            raise ValueError(f"{where}: datagen does not generate {t} (numbers, strings, booleans, timestamps, "
                             "dates)")
        if (self.numeric and pa.types.is_integer(t) and self.hi < self.lo) or \
                ((pa.types.is_floating(t) or pa.types.is_decimal(t)) and self.fhi < self.flo):
            raise ValueError(f"{where}: max is below min")

    def hashes(self, rows: np.ndarray, stream: int) -> np.ndarray:
        return _mix(rows ^ _mix(self.salt ^ np.uint64(stream)))

    def column(self, rows: np.ndarray, now_ms: int) -> pa.Array:
        t = self.type
        n = len(rows)
        mask = None
        if self.null_rate > 0:
            mask = _unit(self.hashes(rows, 1)) < self.null_rate
        if self.kind == "sequence":
            seq = self.start + rows.astype(np.int64)
            if self.text:
                return pa.array(seq.astype(str).astype(object), t, mask=mask)
            if pa.types.is_decimal(t):
                return pa.array([decimal.Decimal(int(v)) for v in seq], t, mask=mask)
            return pa.array(seq, mask=mask).cast(t)
        h = self.hashes(rows, 0)
        if pa.types.is_integer(t):
            span = self.hi - self.lo + 1
            off = h if span >= 2**64 else h % np.uint64(span)
            ints = (off + np.uint64(self.lo % 2**64)).view(np.int64)  # wraps: lo + off in two's complement
            return pa.array(ints, mask=mask).cast(t, safe=False)
        if pa.types.is_floating(t) or pa.types.is_decimal(t):
            u = _unit(h)
            vals = self.flo * (1 - u) + self.fhi * u
            if pa.types.is_decimal(t):
                return pa.array([decimal.Decimal(f"{v:.{t.scale}f}") for v in vals], t, mask=mask)
            return pa.array(vals, mask=mask).cast(t)
        if pa.types.is_boolean(t):
            return pa.array((h & np.uint64(1)).astype(bool), mask=mask)
        if self.text:
            lens = np.full(n, self.length, np.int64)
            if self.var_len:
                lens = 1 + (self.hashes(rows, 2) % np.uint64(max(self.length, 1))).astype(np.int64)
            offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
            total = int(offsets[-1])
            # character j of row r: a hex digit of hash(row r, stream 3 + j // 16)
            row_of = np.repeat(np.arange(n), lens)
            j = np.arange(total, dtype=np.int64) - np.repeat(offsets[:-1], lens)
            words = self.hashes(rows[row_of] * np.uint64(0x10001) + (j // 16).astype(np.uint64), 3)
            digits = _HEX[((words >> (np.uint64(4) * (j % 16).astype(np.uint64))) & np.uint64(15)).astype(np.int64)]
            arr = pa.Array.from_buffers(pa.large_string(), n,
                                        [None, pa.py_buffer(offsets), pa.py_buffer(digits.tobytes())])
            arr = arr.cast(t)
            return arr if mask is None else pc.if_else(pa.array(mask), pa.scalar(None, t), arr)
        if pa.types.is_timestamp(t) or pa.types.is_date(t):
            past = (h % np.uint64(self.max_past + 1)).astype(np.int64) if self.max_past > 0 else np.zeros(n, np.int64)
            ms = pa.array(now_ms - past, mask=mask).cast(pa.timestamp("ms", getattr(t, "tz", None)))
            if pa.types.is_date(t):
                return ms.cast(pa.date32())
            return ms.cast(t)
        raise AssertionError(t)  # checked in __init__

    def limit(self) -> int | None:
        """Rows this field can give (a sequence's length)."""
        return self.end - self.start + 1 if self.kind == "sequence" else None


class DatagenSource(Source):
    """Rows of ``schema`` generated by Flink's datagen options (see the module docs)."""

    def __init__(self, schema: pa.Schema, options: dict, name: str = "datagen", batch_size: int = 65536):
        opts = {str(k).lower(): str(v) for k, v in options.items() if v is not None}
        self.name = name
        self.replayable = True
        self.batch_size = int(batch_size)
        self._schema = schema
        unknown = [k for k in opts if k not in _TABLE_OPTIONS and not k.startswith("fields.")]
        if unknown:
            raise ValueError(f"datagen table {name!r}: unknown option {unknown[0]!r} (options: rows-per-second, "
                             "number-of-rows, fields.<field>.kind / min / max / length / var-len / max-past / start / "
                             "end / null-rate, seed)")
        per_field: dict[str, dict[str, str]] = {f.name: {} for f in schema}
        for k, v in opts.items():
            if not k.startswith("fields."):
                continue
            fname, _, what = k[len("fields."):].rpartition(".")
            match = {f.lower(): f for f in per_field}.get(fname)
            if match is None or what not in _FIELD_OPTIONS:
                raise ValueError(f"datagen table {name!r}: unknown option {k!r} (fields: {', '.join(per_field)}; "
                                 f"per field: {', '.join(sorted(_FIELD_OPTIONS))})")
            per_field[match][what] = v
        self.seed = int(opts["seed"]) if "seed" in opts else int.from_bytes(os.urandom(8), "little")
        self.fields = [_Field(i, f, per_field[f.name], self.seed, name) for i, f in enumerate(schema)]
        limits = [n for n in [int(opts["number-of-rows"]) if "number-of-rows" in opts else None]
                  + [f.limit() for f in self.fields] if n is not None]
        self.num_rows: int | None = min(limits) if limits else None
        self.rate = float(opts.get("rows-per-second", 10000))
        self.schedule = RateSchedule(self.rate)
        self.now_ms = int(time.time() * 1000)

    def schema(self) -> pa.Schema:
        return self._schema

    def batch(self, start: int, stop: int) -> pa.RecordBatch:
        """Rows ``start .. stop - 1``."""
        rows = np.arange(start, stop, dtype=np.uint64)
        return pa.RecordBatch.from_arrays([f.column(rows, self.now_ms) for f in self.fields], schema=self._schema)

    def open(self, index: int, parallelism: int, position: Any = None) -> Reader:
        return _DatagenReader(self, int(position or 0))


class _DatagenReader(Reader):
    def __init__(self, source: DatagenSource, start: int):
        self.source = source
        self.next = start
        self.pace = Pace(source.schedule, start)

    def read(self) -> Any:
        src = self.source
        if src.num_rows is not None and self.next >= src.num_rows:
            return END
        ahead = self.pace.wait(self.next + 1, time.perf_counter())
        if ahead > 0:
            time.sleep(min(ahead, 0.05))
            return None
        due = int(self.pace.due(time.perf_counter()))
        stop = self.next + max(1, min(src.batch_size, due - self.next))
        if src.num_rows is not None:
            stop = min(stop, src.num_rows)
        out = src.batch(self.next, stop)
        self.next = stop
        return out

    def position(self) -> Any:
        return self.next

    def backlog(self) -> int | None:
        return self.pace.backlog(self.next, time.perf_counter())


def datagen_source(table: str, options: dict, schema: pa.Schema, batch_size: int = 65536) -> DatagenSource:
    """The source of a ``'connector' = 'datagen'`` table (``ValueError`` naming a bad option)."""
    return DatagenSource(schema, {k: v for k, v in options.items() if k != "connector"}, table, batch_size)

