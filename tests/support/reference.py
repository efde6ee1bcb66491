"""Plain-Python models of fastops' kernels, for the tests (not shipped).

Everything here is written from the specification, value by value, on top of
the ``xxhash`` package and the standard library; it never calls fastops.
"""
from __future__ import annotations

import bisect
import datetime as _dt
import math
import struct
from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.types as pat
import xxhash

NULL_TOKEN = b"fastops:null"
MASK64 = (1 << 64) - 1
_EPOCH = _dt.date(1970, 1, 1)

_INT_FORMATS = {
    (8, True): "<b", (16, True): "<h", (32, True): "<i", (64, True): "<q",
    (8, False): "<B", (16, False): "<H", (32, False): "<I", (64, False): "<Q",
}


def xxh64(data: bytes, seed: int = 0) -> int:
    return xxhash.xxh64_intdigest(data, seed)


def null_hash(seed: int = 0) -> int:
    return xxh64(NULL_TOKEN, seed)


def _is_view(t: pa.DataType, kind: str) -> bool:
    check = getattr(pat, f"is_{kind}_view", None)  # pyarrow >= 16
    return check is not None and check(t)


def value_bytes(value: Any, t: pa.DataType) -> bytes:
    """The little-endian bytes fastops hashes for one non-null ``value`` of type ``t``."""
    if pat.is_dictionary(t):
        return value_bytes(value, t.value_type)
    if pat.is_boolean(t):
        return b"\x01" if value else b"\x00"
    if pat.is_integer(t):
        return struct.pack(_INT_FORMATS[(t.bit_width, pat.is_signed_integer(t))], value)
    if pat.is_float64(t):
        if math.isnan(value):
            return struct.pack("<Q", 0x7FF8000000000000)
        return struct.pack("<d", 0.0 if value == 0 else value)
    if pat.is_float32(t):
        if math.isnan(value):
            return struct.pack("<I", 0x7FC00000)
        return struct.pack("<f", 0.0 if value == 0 else value)
    if pat.is_string(t) or pat.is_large_string(t) or _is_view(t, "string"):
        return value.encode("utf-8")
    if pat.is_binary(t) or pat.is_large_binary(t) or _is_view(t, "binary"):
        return bytes(value)
    if pat.is_date32(t):
        return struct.pack("<i", (value - _EPOCH).days)
    if pat.is_timestamp(t) or pat.is_date64(t) or pat.is_duration(t) or pat.is_time(t):
        # ``value`` is the integer storage here (see ``column_values``)
        return struct.pack("<q" if t.bit_width == 64 else "<i", value)
    raise TypeError(f"no reference for {t}")


def column_values(arr: pa.Array | pa.ChunkedArray) -> list[Any]:
    """Python values of a column (None for nulls); temporal types other than
    date32 as their integer storage (each element's own integer)."""
    t = arr.type
    if pat.is_timestamp(t) or pat.is_date64(t) or pat.is_duration(t) or pat.is_time(t):
        storage = pa.int64() if t.bit_width == 64 else pa.int32()
        chunks = arr.chunks if isinstance(arr, pa.ChunkedArray) else [arr]
        return [v for c in chunks for v in c.view(storage).to_pylist()]
    return arr.to_pylist()


def hash_column(arr: pa.Array | pa.ChunkedArray, seed: int = 0) -> list[int]:
    t = arr.type
    return [null_hash(seed) if v is None else xxh64(value_bytes(v, t), seed)
            for v in column_values(arr)]


def combine(acc: Sequence[int], h: Sequence[int], seed: int = 0) -> list[int]:
    return [xxh64(struct.pack("<QQ", a, b), seed) for a, b in zip(acc, h)]


def hash_columns(columns: Sequence[pa.Array | pa.ChunkedArray], seed: int = 0) -> list[int]:
    acc = hash_column(columns[0], seed)
    for col in columns[1:]:
        acc = combine(acc, hash_column(col, seed), seed)
    return acc


# ---------------------------------------------------------------- partition schemes

def owner_hash(h: int, num_partitions: int) -> int:
    return h % num_partitions


def owner_key_group(h: int, num_partitions: int, max_parallelism: int) -> int:
    """Flink: ``KeyGroupRangeAssignment.computeOperatorIndexForKeyGroup``."""
    return (h % max_parallelism) * num_partitions // max_parallelism


def flink_key_group_range(index: int, num_partitions: int, max_parallelism: int) -> range:
    """Flink: ``computeKeyGroupRangeForOperatorIndex`` (inclusive end + 1)."""
    start = (index * max_parallelism + num_partitions - 1) // num_partitions
    end = ((index + 1) * max_parallelism - 1) // num_partitions
    return range(start, end + 1)


class Ring:
    """The consistent-hash ring: ``virtual_nodes`` points per partition, point
    ``XXH64(le8(partition) || le8(vnode), seed)``; a hash belongs to the first
    point ``>= hash``, wrapping to the smallest point."""

    def __init__(self, num_partitions: int, virtual_nodes: int, seed: int = 0):
        pts = sorted(
            (xxh64(struct.pack("<QQ", p, v), seed), p)
            for p in range(num_partitions) for v in range(virtual_nodes)
        )
        self.points = [x for x, _ in pts]
        self.owners = [p for _, p in pts]

    def owner(self, h: int) -> int:
        i = bisect.bisect_left(self.points, h)
        return self.owners[i if i < len(self.points) else 0]

    def arc_share(self, partition: int) -> float:
        """Fraction of the hash space [0, 2**64) owned by ``partition``."""
        total = 0
        prev = self.points[-1] - (1 << 64)   # wrap: the arc before the first point
        for x, p in zip(self.points, self.owners):
            if p == partition:
                total += x - prev
            prev = x
        return total / float(1 << 64)


def partition_ids(hashes: Iterable[int], num_partitions: int, scheme: str = "hash",
                  max_parallelism: int = 128, virtual_nodes: int = 64,
                  seed: int = 0, ring: Ring | None = None) -> list[int]:
    if scheme == "hash":
        return [owner_hash(h, num_partitions) for h in hashes]
    if scheme == "key_group":
        return [owner_key_group(h, num_partitions, max_parallelism) for h in hashes]
    if scheme == "consistent":
        ring = ring or Ring(num_partitions, virtual_nodes, seed)
        return [ring.owner(h) for h in hashes]
    raise ValueError(scheme)


def key_group_moved_share(old: int, new: int, max_parallelism: int) -> float:
    """Exact share of key groups whose owner changes from ``old`` to ``new`` tasks."""
    moved = sum(
        1 for g in range(max_parallelism)
        if g * old // max_parallelism != g * new // max_parallelism
    )
    return moved / max_parallelism


def modulo_moved_share(old: int, new: int) -> float:
    """Exact share of uniformly distributed hashes with ``h % old != h % new``
    (the residues repeat with period ``lcm(old, new)``)."""
    period = old * new // math.gcd(old, new)
    return sum(1 for h in range(period) if h % old != h % new) / period
