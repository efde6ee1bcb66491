"""``fastops.hash64``: bit-exact against the ``xxhash`` package, value by value."""
from __future__ import annotations

import ctypes
import datetime as dt
import decimal
import mmap
import re
import struct
import sys

import numpy as np
import pyarrow as pa
import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

import fastops
from fastops._kernels import core as _core
from support import reference as ref
from support.strategies import (
    ALL_TYPES,
    values_for,
)

SEEDS = st.integers(0, 2**64 - 1)



@st.composite
def arrays(draw, t=None, max_size=60):
    """An Arrow array of a supported type, with nulls, often a slice (offset != 0)."""
    t = t if t is not None else draw(st.sampled_from(ALL_TYPES + ["dict"]))
    dictionary = t == "dict"
    if dictionary:
        t = draw(st.sampled_from([pa.utf8(), pa.large_utf8(), pa.binary(), pa.int64()]))
    values = draw(st.lists(st.one_of(st.none(), values_for(t)), max_size=max_size))
    if pa.types.is_timestamp(t):
        arr = pa.array(values, pa.int64()).view(t)
    else:
        arr = pa.array(values, t)
    if dictionary:
        arr = arr.dictionary_encode()
    if len(arr) and draw(st.booleans()):
        start = draw(st.integers(0, len(arr)))
        arr = arr.slice(start, draw(st.integers(0, len(arr) - start)))
    return arr


def expected(arr, seed):
    return ref.hash_column(arr, seed)


def got(values, seed=0):
    out = fastops.hash64(values, seed)
    assert isinstance(out, pa.UInt64Array)
    assert out.null_count == 0
    return out.to_pylist()


# ---------------------------------------------------------------- every type

@pytest.mark.parametrize("t", ALL_TYPES, ids=str)
@settings(max_examples=25, deadline=None)
@given(data=st.data(), seed=SEEDS)
def test_every_type_matches_xxhash(t, data, seed):
    arr = data.draw(arrays(t))
    assert got(arr, seed) == expected(arr, seed)


@settings(max_examples=60, deadline=None)
@given(arr=arrays(t="dict"), seed=SEEDS)
def test_dictionary_hashes_the_value_not_the_index(arr, seed):
    assert got(arr, seed) == expected(arr.dictionary_decode(), seed)


def test_dictionary_with_null_values_and_unused_entries():
    dictionary = pa.array(["x", None, "zz", "unused"])
    indices = pa.array([0, 1, None, 2, 0], pa.int8())
    arr = pa.DictionaryArray.from_arrays(indices, dictionary)
    h = fastops.null_hash(5)
    assert got(arr, 5) == [ref.xxh64(b"x", 5), h, h, ref.xxh64(b"zz", 5), ref.xxh64(b"x", 5)]
    assert got(arr.slice(1, 3), 5) == [h, h, ref.xxh64(b"zz", 5)]


@pytest.mark.parametrize("n", [0, 1, 3, 4, 7, 8, 15, 16, 31, 32, 33, 63, 64, 100, 1000])
def test_binary_lengths_around_block_sizes(n):
    rng = np.random.default_rng(n)
    value = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
    for seed in (0, 1, 2**64 - 1):
        assert got(pa.array([value], pa.binary()), seed) == [xxhash.xxh64_intdigest(value, seed)]


@pytest.mark.parametrize("large", [False, True])
@pytest.mark.parametrize("lengths", [(0, 70), (4, 21), (12, 13), (33, 34), (0, 4), (28, 36), (0, 36)])
def test_binary_mixed_lengths_across_row_blocks(lengths, large):
    """Values are hashed in blocks of rows: with AVX-512, side by side in
    vector lanes of mixed lengths (values of 32 bytes or more, and those
    ending in the buffer's first four bytes, again on their own: (0, 36)),
    or grouped by length where most values are long ((0, 70), (33, 34));
    else grouped by length. Random and uniform lengths over several blocks,
    sliced at odd offsets, against ``xxhash`` value by value."""
    rng = np.random.default_rng(lengths[0])
    values = [rng.integers(0, 256, k, dtype=np.uint8).tobytes()
              for k in rng.integers(*lengths, size=2600)]
    arr = pa.array(values, pa.large_binary() if large else pa.binary())
    for seed in (0, 2**64 - 1):
        for start, stop in ((0, 2600), (1, 2600), (1023, 2049), (5, 6)):
            want = [xxhash.xxh64_intdigest(v, seed) for v in values[start:stop]]
            assert got(arr.slice(start, stop - start), seed) == want


def _guarded_values(lengths: list[int]) -> tuple[pa.Array, list[bytes]]:
    """A binary array whose data fill one page exactly, between two pages that
    must not be touched: reading a byte before its first value or after its
    last one crashes."""
    page = mmap.PAGESIZE
    assert sum(lengths) == page
    region = mmap.mmap(-1, 3 * page)
    address = ctypes.addressof(ctypes.c_char.from_buffer(region))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    for guard in (address, address + 2 * page):
        assert libc.mprotect(guard, page, 0) == 0  # PROT_NONE
    rng = np.random.default_rng(7)
    data = rng.integers(0, 256, page, dtype=np.uint8)
    ctypes.memmove(address + page, data.ctypes.data, page)
    offsets = np.zeros(len(lengths) + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    arr = pa.Array.from_buffers(pa.binary(), len(lengths), [
        None, pa.py_buffer(offsets), pa.foreign_buffer(address + page, page, base=region)])
    values = [data[a:b].tobytes() for a, b in zip(offsets[:-1], offsets[1:])]
    return arr, values


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mprotect guard pages")
def test_values_are_read_inside_their_buffer():
    """The hash reads no byte outside the data buffer, for short values at its
    very start and very end (word-wide loads stay inside the value)."""
    rng = np.random.default_rng(3)
    head = [1, 2, 3, 0, 1, 5]
    body = list(rng.integers(0, 32, 150))  # short: the block goes through the vector lanes
    body[60:60] = [40, 45]
    tail = [3, 2, 1, 0, 2, 1, 3]
    fill = mmap.PAGESIZE - sum(head) - sum(body) - sum(tail)
    body += [31] * (fill // 31) + [fill % 31]
    arr, values = _guarded_values(head + body + tail)
    for seed in (0, 2**64 - 1):
        assert got(arr, seed) == [xxhash.xxh64_intdigest(v, seed) for v in values]


def test_specific_values():
    seed = 12345
    assert got(pa.array([1], pa.int64()), seed) == [xxhash.xxh64_intdigest(struct.pack("<q", 1), seed)]
    assert got(pa.array([-1], pa.int8()), seed) == [xxhash.xxh64_intdigest(b"\xff", seed)]
    assert got(pa.array(["héllo"]), seed) == [xxhash.xxh64_intdigest("héllo".encode(), seed)]
    assert got(pa.array([True, False]), seed) == [xxhash.xxh64_intdigest(b"\x01", seed),
                                                 xxhash.xxh64_intdigest(b"\x00", seed)]
    days = (dt.date(2024, 2, 29) - dt.date(1970, 1, 1)).days
    assert got(pa.array([dt.date(2024, 2, 29)]), seed) == [
        xxhash.xxh64_intdigest(struct.pack("<i", days), seed)]


# ---------------------------------------------------------------- floats

NAN64 = [0x7FF8000000000000, 0x7FF0000000000001, 0xFFF8000000000000, 0x7FFFFFFFFFFFFFFF,
         0xFFF0000000000001]
NAN32 = [0x7FC00000, 0x7F800001, 0xFFC00000, 0x7FFFFFFF, 0xFF800001]


@pytest.mark.parametrize("seed", [0, 7, 2**64 - 1])
def test_float_zero_and_nan_canonical(seed):
    f64 = pa.array(np.array(NAN64 + [0x8000000000000000, 0], dtype=np.uint64).view(np.float64))
    h = got(f64, seed)
    assert len(set(h[:len(NAN64)])) == 1
    assert h[0] == xxhash.xxh64_intdigest(struct.pack("<Q", 0x7FF8000000000000), seed)
    assert h[-2] == h[-1] == xxhash.xxh64_intdigest(struct.pack("<d", 0.0), seed)
    f32 = pa.array(np.array(NAN32 + [0x80000000, 0], dtype=np.uint32).view(np.float32))
    h = got(f32, seed)
    assert len(set(h[:len(NAN32)])) == 1
    assert h[0] == xxhash.xxh64_intdigest(struct.pack("<I", 0x7FC00000), seed)
    assert h[-2] == h[-1] == xxhash.xxh64_intdigest(struct.pack("<f", 0.0), seed)
    # infinities are not NaN
    inf = got(pa.array([np.inf, -np.inf]), seed)
    assert inf == [xxhash.xxh64_intdigest(struct.pack("<d", v), seed) for v in (np.inf, -np.inf)]



@pytest.mark.parametrize("width", [32, 64])
def test_special_floats_in_every_lane(width):
    """The fixed-width loops hash several values per step (vector lanes, scalar
    registers, a tail): -0.0, NaNs, infinities and plain values at every
    position of arrays of every length up to 30 hash as the reference."""
    nans, fmt = (NAN64, "<d") if width == 64 else (NAN32, "<f")
    uint, flt = (np.uint64, np.float64) if width == 64 else (np.uint32, np.float32)
    specials = np.array(nans + [1 << (width - 1), 0], dtype=uint).view(flt)
    specials = np.concatenate([specials, np.array([np.inf, -np.inf, 1.5, -2.25], dtype=flt)])
    rng = np.random.default_rng(width)
    for n in range(1, 31):
        for pos in range(n):
            values = rng.standard_normal(n).astype(flt)
            values[pos] = specials[(n + pos) % len(specials)]
            want = [xxhash.xxh64_intdigest(struct.pack(fmt, 0.0 if v == 0 else
                                                       (np.nan if np.isnan(v) else v)), 9)
                    for v in values]
            assert got(pa.array(values), 9) == want, (n, pos, values[pos])

# ---------------------------------------------------------------- nulls, slices, chunks

@settings(max_examples=40, deadline=None)
@given(seed=SEEDS, t=st.sampled_from(ALL_TYPES))
def test_nulls_hash_to_null_hash(seed, t):
    arr = pa.nulls(5, t)
    assert got(arr, seed) == [fastops.null_hash(seed)] * 5
    assert fastops.null_hash(seed) == xxhash.xxh64_intdigest(b"fastops:null", seed)


def test_null_type_column():
    assert got(pa.nulls(3), 9) == [fastops.null_hash(9)] * 3


@pytest.mark.parametrize("t", [pa.bool_(), pa.int16(), pa.utf8(), pa.float64()], ids=str)
def test_every_slice_offset_of_bits(t):
    rng = np.random.default_rng(3)
    n = 41
    if t == pa.utf8():
        vals = [None if rng.random() < 0.3 else "v" * int(rng.integers(0, 9)) for _ in range(n)]
    elif t == pa.bool_():
        vals = [None if rng.random() < 0.3 else bool(rng.integers(0, 2)) for _ in range(n)]
    else:
        vals = [None if rng.random() < 0.3 else int(rng.integers(-50, 50)) for _ in range(n)]
    arr = pa.array(vals, t)
    for start in range(0, 17):
        for length in (0, 1, 5, 8, 9, n - start):
            sl = arr.slice(start, length)
            assert got(sl, 11) == expected(sl, 11), (start, length)


@settings(max_examples=40, deadline=None)
@given(data=st.data(), seed=SEEDS)
def test_chunked_array(data, seed):
    t = data.draw(st.sampled_from(ALL_TYPES))
    chunks = data.draw(st.lists(arrays(t, max_size=20), max_size=4))
    carr = pa.chunked_array(chunks, type=t)
    assert got(carr, seed) == [h for c in chunks for h in expected(c, seed)]


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8", "uint16",
                                   "uint32", "uint64", "float32", "float64", "bool"])
def test_numpy_input(dtype):
    rng = np.random.default_rng(0)
    if dtype == "bool":
        a = rng.integers(0, 2, 100).astype(bool)
    elif dtype.startswith("float"):
        a = rng.standard_normal(100).astype(dtype)
        a[::7] = np.nan
        a[3] = -0.0
    else:
        info = np.iinfo(dtype)
        a = rng.integers(info.min, info.max, 100, dtype=dtype, endpoint=True)
    expect = ref.hash_column(pa.array(a), 99)
    assert got(a, 99) == expect
    assert got(a[5:60:1], 99) == expect[5:60]
    assert got(a[::3], 99) == expect[::3]  # non-contiguous


def test_numpy_unicode_and_datetime():
    a = np.array(["a", "bc", ""])
    assert got(a) == [xxhash.xxh64_intdigest(s.encode()) for s in a]
    d = np.array(["2024-01-01T00:00:00.000000001", "1960-01-01"], dtype="datetime64[ns]")
    assert got(d) == [xxhash.xxh64_intdigest(struct.pack("<q", v)) for v in d.view(np.int64)]


def test_python_list_input():
    assert got([1, 2, None]) == expected(pa.array([1, 2, None]), 0)


# ---------------------------------------------------------------- multi-column keys

@settings(max_examples=60, deadline=None)
@given(data=st.data(), seed=SEEDS, k=st.integers(2, 4))
def test_multi_column_combine(data, seed, k):
    n = data.draw(st.integers(0, 30))
    cols = []
    for _ in range(k):
        t = data.draw(st.sampled_from(ALL_TYPES))
        vals = data.draw(st.lists(st.one_of(st.none(), values_for(t)), min_size=n, max_size=n))
        arr = pa.array(vals, pa.int64()).view(t) if pa.types.is_timestamp(t) else pa.array(vals, t)
        cols.append(arr)
    h = ref.hash_column(cols[0], seed)
    for c in cols[1:]:
        hc = ref.hash_column(c, seed)
        h = [xxhash.xxh64_intdigest(struct.pack("<QQ", a, b), seed) for a, b in zip(h, hc)]
    assert got(cols, seed) == h
    # mixing Arrow, chunked and NumPy columns
    mixed = [cols[0], pa.chunked_array([cols[1]])] + cols[2:]
    assert got(mixed, seed) == h


def test_multi_column_order_matters():
    a, b = pa.array([1, 2]), pa.array([2, 1])
    assert got([a, b]) != got([b, a])


# ---------------------------------------------------------------- errors

@pytest.mark.parametrize("arr", [
    pa.array([[1]], pa.list_(pa.int32())),
    pa.array([{"a": 1}]),
    pa.array([decimal.Decimal("1.50")], pa.decimal128(5, 2)),
    pa.array(np.array([1.0], dtype=np.float16)),
    pa.array([b"ab"], pa.binary(2)),
], ids=lambda a: str(a.type))
def test_unsupported_type_raises_type_error_naming_it(arr):
    with pytest.raises(TypeError, match=re.escape(str(arr.type))):
        fastops.hash64(arr)


def test_bad_arguments():
    with pytest.raises(ValueError, match="rows"):
        fastops.hash64([pa.array([1, 2]), pa.array([1])])
    with pytest.raises(ValueError, match="seed"):
        fastops.hash64(pa.array([1]), seed=-1)
    with pytest.raises(ValueError, match="seed"):
        fastops.hash64(pa.array([1]), seed=2**64)
    with pytest.raises(TypeError, match="seed"):
        fastops.hash64(pa.array([1]), seed=1.5)
    with pytest.raises(ValueError, match="one-dimensional"):
        fastops.hash64(np.zeros((2, 2)))
    with pytest.raises(TypeError):
        fastops.hash64(object())


def test_empty_inputs():
    assert got(pa.array([], pa.int64())) == []
    assert got(pa.chunked_array([], pa.utf8())) == []
    assert got(np.array([], dtype=np.float64)) == []


def test_hash_kernels_reject_what_they_would_index_outside():
    for kernel, dtype in [(_core.hash_u64, np.uint64), (_core.hash_u32, np.uint32),
                          (_core.hash_u16, np.uint16), (_core.hash_u8, np.uint8),
                          (_core.hash_f64, np.uint64), (_core.hash_f32, np.uint32)]:
        with pytest.raises(ValueError, match="out has 2 rows for 3 values"):
            kernel(np.zeros(3, dtype), 0, np.zeros(2, np.uint64))
    one_byte, out8 = np.zeros(1, np.uint8), np.zeros(8, np.uint64)
    with pytest.raises(ValueError, match="hash_bits: 8 bits from bit 4 on outside a bitmap of 1 "):
        _core.hash_bits(one_byte, 4, 0, out8)
    with pytest.raises(ValueError, match="hash_bits: 8 bits from bit -1 on"):
        _core.hash_bits(np.zeros(2, np.uint8), -1, 0, out8)
    with pytest.raises(ValueError, match="hash_set_nulls: 8 bits from bit 4 on"):
        _core.hash_set_nulls(one_byte, 4, 0, out8)
    with pytest.raises(ValueError, match="hash_combine: 1 hashes for 2 rows"):
        _core.hash_combine(np.zeros(2, np.uint64), np.zeros(1, np.uint64), 0)
    data, out2 = np.frombuffer(b"abc", np.uint8), np.zeros(2, np.uint64)
    with pytest.raises(ValueError, match="hash_binary: 2 offsets for 2 values"):
        _core.hash_binary(np.array([0, 1], np.int64), data, 0, out2)
    with pytest.raises(ValueError, match="offsets from 0 to 5 outside the 3 data bytes"):
        _core.hash_binary(np.array([0, 1, 5], np.int64), data, 0, out2)
    # first and last offset in range, one between them not
    with pytest.raises(ValueError, match="offsets decrease at value 1: 100 then 3"):
        _core.hash_binary(np.array([0, 100, 3], np.int32), data, 0, out2)
    offsets = np.zeros(2001, np.int32)
    offsets[1024] = 10**6  # the first block of 1024 values ends past the data
    with pytest.raises(ValueError, match="offsets decrease at value 1024: 1000000 then 0"):
        _core.hash_binary(offsets, data, 0, np.zeros(2000, np.uint64))
