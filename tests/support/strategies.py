"""Hypothesis strategies shared by the hashing and partitioning tests: Arrow types and their values."""
import pyarrow as pa
from hypothesis import strategies as st

from support import reference as ref

INT_TYPES = [pa.int8(), pa.int16(), pa.int32(), pa.int64(),
             pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64()]
# view types (pyarrow >= 16): values inline (<= 12 bytes) or in data buffers
VIEW_TYPES = [pa.string_view(), pa.binary_view()] if hasattr(pa, "string_view") else []
BINARY_TYPES = [pa.utf8(), pa.large_utf8(), pa.binary(), pa.large_binary()] + VIEW_TYPES
TS_TYPES = [pa.timestamp(u) for u in ("s", "ms", "us", "ns")] + [pa.timestamp("ms", tz="UTC")]


def int_values(t):
    if pa.types.is_signed_integer(t):
        lo, hi = -(2 ** (t.bit_width - 1)), 2 ** (t.bit_width - 1) - 1
    else:
        lo, hi = 0, 2**t.bit_width - 1
    return st.integers(lo, hi)


def values_for(t):
    """A strategy of Python values of Arrow type ``t`` (without nulls)."""
    if pa.types.is_integer(t):
        return int_values(t)
    if pa.types.is_float64(t):
        return st.floats(allow_nan=True, allow_infinity=True)
    if pa.types.is_float32(t):
        return st.floats(allow_nan=True, allow_infinity=True, width=32)
    if pa.types.is_boolean(t):
        return st.booleans()
    if pa.types.is_string(t) or pa.types.is_large_string(t) or ref._is_view(t, "string"):
        return st.text(max_size=70)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or ref._is_view(t, "binary"):
        return st.binary(max_size=70)
    if pa.types.is_date32(t):
        return st.dates()
    if pa.types.is_timestamp(t):
        return st.integers(-(2**62), 2**62)
    raise AssertionError(t)


ALL_TYPES = INT_TYPES + [pa.float32(), pa.float64(), pa.bool_(), pa.date32()] + BINARY_TYPES + TS_TYPES
