"""``fastops.partition`` / ``partition_ids`` / ``key_group_range`` / ``moved_fraction``
against the pure-Python schemes of ``reference.py``."""
from __future__ import annotations

import contextlib
import itertools
import math
import tracemalloc
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

import fastops
from fastops._kernels import core as _core
from support import reference as ref
from support.strategies import ALL_TYPES, values_for

SCHEMES = ["hash", "key_group", "consistent"]


@st.composite
def column(draw, n, t=None):
    t = t if t is not None else draw(st.sampled_from(ALL_TYPES + ["dict"]))
    dictionary = t == "dict"
    if dictionary:
        t = pa.utf8()
    # few distinct values so that keys repeat
    pool = draw(st.lists(values_for(t), min_size=1, max_size=6))
    vals = draw(st.lists(st.one_of(st.none(), st.sampled_from(pool)), min_size=n, max_size=n))
    arr = pa.array(vals, pa.int64()).view(t) if pa.types.is_timestamp(t) else pa.array(vals, t)
    return arr.dictionary_encode() if dictionary else arr


@st.composite
def batches(draw, max_rows=50, n_keys=None):
    """A batch: key columns k0.., payload columns of random types, and ``row``
    (the input position). Often a slice of a larger batch (offset != 0)."""
    total = draw(st.integers(0, max_rows))
    k = n_keys if n_keys is not None else draw(st.integers(1, 3))
    cols = {f"k{i}": draw(column(total)) for i in range(k)}
    for j in range(draw(st.integers(0, 3))):
        cols[f"p{j}"] = draw(column(total))
    cols["row"] = pa.array(range(total), pa.int64())
    batch = pa.record_batch(cols)
    start = draw(st.integers(0, total))
    length = draw(st.integers(0, total - start))
    return batch.slice(start, length), [f"k{i}" for i in range(k)]


def ref_ids(batch, by, P, scheme, seed=0, maxp=128, vnodes=64):
    hashes = ref.hash_columns([batch.column(name) for name in by], seed)
    return ref.partition_ids(hashes, P, scheme, maxp, vnodes, seed)


def rows(batch):
    cols = [ref.column_values(c) for c in batch.columns]
    return [tuple(_norm(v) for v in r) for r in zip(*cols)]


def _norm(v):
    return "NaN" if isinstance(v, float) and math.isnan(v) else v


# ---------------------------------------------------------------- partition_ids

@pytest.mark.parametrize("scheme", SCHEMES)
@settings(max_examples=40, deadline=None)
@given(data=st.data(), P=st.integers(1, 40), seed=st.integers(0, 2**64 - 1))
def test_ids_match_reference(scheme, data, P, seed):
    batch, by = data.draw(batches())
    maxp = data.draw(st.sampled_from([P, 128, 300, 4096])) if scheme == "key_group" else 128
    maxp = max(maxp, P)
    vnodes = data.draw(st.integers(1, 20))
    ids = fastops.partition_ids(batch, by, P, scheme=scheme, max_parallelism=maxp,
                                virtual_nodes=vnodes, seed=seed)
    assert ids.dtype == np.int32 and ids.shape == (batch.num_rows,)
    assert ids.tolist() == ref_ids(batch, by, P, scheme, seed, maxp, vnodes)



FIXED_KEY_TYPES = [pa.int32(), pa.uint32(), pa.int64(), pa.uint64(), pa.float32(),
                   pa.float64(), pa.date32(), pa.timestamp("ms")]


@pytest.mark.parametrize("t", FIXED_KEY_TYPES, ids=str)
@pytest.mark.parametrize("scheme,P,maxp", [("hash", 8, 128), ("hash", 64, 128), ("hash", 7, 128),
                                           ("key_group", 5, 128), ("key_group", 3, 100)])
def test_ids_of_one_fixed_width_key_without_nulls(t, scheme, P, maxp):
    """One 4- or 8-byte key column without nulls takes the fused hash-and-id
    kernel (blocks of 1024 rows; with AVX-512 and P a power of two, registers
    of eight rows counted in bytes up to P = 8): ids and partitions as the
    reference, over several blocks, sliced, with -0.0 and NaN among float keys."""
    rng = np.random.default_rng(P)
    raw = rng.integers(-50, 50, 3000)
    if pa.types.is_floating(t):
        vals = raw.astype(np.float64) / 4
        vals[::7] = -0.0
        vals[::11] = np.nan
        arr = pa.array(vals, t)
    elif pa.types.is_timestamp(t):
        arr = pa.array(raw, pa.int64()).view(t)
    elif pa.types.is_date32(t):
        arr = pa.array(raw.astype(np.int32), pa.int32()).view(t)
    else:
        arr = pa.array(np.abs(raw) if pa.types.is_unsigned_integer(t) else raw, t)
    batch = pa.record_batch({"k": arr, "row": pa.array(range(len(arr)), pa.int64())})
    for part in (batch, batch.slice(1000, 1500), pa.Table.from_batches([batch.slice(3)])):
        want = ref_ids(part, ["k"], P, scheme, seed=9, maxp=maxp)
        got = fastops.partition_ids(part, "k", P, scheme, max_parallelism=maxp, seed=9)
        assert got.tolist() == want
        parts = fastops.partition(part, "k", P, scheme, max_parallelism=maxp, seed=9)
        for p, b in enumerate(parts):
            assert b.column("row").to_pylist() == [
                r for r, i in zip(part.column("row").to_pylist(), want) if i == p]

@pytest.mark.parametrize("P", [1, 2, 4, 8, 16])
@pytest.mark.parametrize("distinct", [1, 2, 1000])
def test_partition_sizes_of_skewed_keys(P, distinct):
    """Partition sizes (counted in registers for up to 8 partitions) match a
    NumPy count of the reference ids, also when every row has one key (the
    most any counter takes)."""
    keys = np.random.default_rng(P * distinct).integers(0, distinct, 5000)
    batch = pa.record_batch({"k": pa.array(keys, pa.int64())})
    want = np.bincount(ref_ids(batch, ["k"], P, "hash", seed=0, maxp=128), minlength=P)
    assert [b.num_rows for b in fastops.partition(batch, "k", P)] == want.tolist()


@pytest.mark.parametrize("P", [1, 2, 3, 7, 8, 10, 64, 100, 255, 256, 1000, 2**31 - 1])
def test_modulo_on_extreme_hashes(P):
    edge = [0, 1, 2**32 - 1, 2**32, 2**63 - 1, 2**63, 2**64 - 2, 2**64 - 1]
    rnd = np.random.default_rng(P).integers(0, 2**64 - 1, 20_000, dtype=np.uint64, endpoint=True)
    h = np.concatenate([np.array(edge, dtype=np.uint64), rnd])
    ids = fastops.core.partitioning.ids_from_hashes(h, P)
    assert ids.tolist() == [int(x) % P for x in h.tolist()]


@pytest.mark.parametrize("key_type", [pa.int64(), pa.float32()])
def test_partition_ids_of_a_fixed_key_count_nothing(key_type):
    """``partition_ids`` of a 4- or 8-byte key (one fused kernel pass) gives the
    modulo of ``hash64`` for any P, without allocating a histogram of P counts."""
    P = 2**31 - 1
    batch = pa.record_batch({"k": pa.array(np.arange(1000), key_type)})
    tracemalloc.start()
    try:
        ids = fastops.partition_ids(batch, "k", P)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    h = fastops.hash64(batch.column(0)).to_numpy()
    assert ids.tolist() == [int(x) % P for x in h.tolist()]
    assert peak < 1 << 20, f"{peak} bytes for 1000 ids"


@pytest.mark.parametrize("d", [1, 3, 7, 10, 127, 1000, 2**31 - 1, 2**32 + 1, 2**63 + 5, 2**64 - 1])
def test_fast_modulo_is_exact(d):
    rng = np.random.default_rng(d % 1000)
    v = np.concatenate([rng.integers(0, 2**64 - 1, 50_000, dtype=np.uint64, endpoint=True),
                        np.array([0, 1, d - 1, d % 2**64, 2**64 - 1], dtype=np.uint64)])
    out = np.empty_like(v)
    _core.fastmod_u64(v, d, out)
    assert out.tolist() == [x % d for x in v.tolist()]


def test_same_key_same_partition_across_batches():
    rng = np.random.default_rng(1)
    keys = [f"user{i}" for i in rng.integers(0, 500, 5000)]
    b1 = pa.record_batch({"k": keys[:2500], "x": np.arange(2500)})
    b2 = pa.record_batch({"k": pa.array(keys[2500:]).dictionary_encode(), "x": np.arange(2500)})
    table = pa.Table.from_batches([b1.slice(0, 1000), b1.slice(1000)])
    for scheme in SCHEMES:
        owner = {}
        for b in (b1, b2, table):
            for k, p in zip(b.column("k").to_pylist(), fastops.partition_ids(b, "k", 6, scheme)):
                assert owner.setdefault(k, p) == p


# ---------------------------------------------------------------- partition

def check_partition(batch, by, P, scheme, **kw):
    parts = fastops.partition(batch, by, P, scheme=scheme, **kw)
    assert len(parts) == P
    ids = ref_ids(batch, by, P, scheme, kw.get("seed", 0), kw.get("max_parallelism", 128),
                  kw.get("virtual_nodes", 64))
    src = rows(batch)
    for p, part in enumerate(parts):
        assert isinstance(part, pa.RecordBatch)
        assert part.schema == batch.schema
        part.validate(full=True)
        # exactly the rows with id p, in input order
        assert rows(part) == [r for r, i in zip(src, ids) if i == p]
    assert Counter(r for part in parts for r in rows(part)) == Counter(src)
    return parts


@contextlib.contextmanager
def small_batch(rows):
    """Batches below ``rows`` rows take Arrow's take path, others the column scatter."""
    old, fastops.core.partitioning.SMALL_BATCH = fastops.core.partitioning.SMALL_BATCH, rows
    try:
        yield
    finally:
        fastops.core.partitioning.SMALL_BATCH = old


@pytest.mark.parametrize("path", ["scatter", "take"])
@pytest.mark.parametrize("scheme", SCHEMES)
@settings(max_examples=40, deadline=None)
@given(data=st.data(), P=st.integers(1, 12))
def test_partition_union_order_and_ids(path, scheme, data, P):
    batch, by = data.draw(batches())
    with small_batch(0 if path == "scatter" else 2**62):
        check_partition(batch, by, P, scheme, max_parallelism=max(P, 16), virtual_nodes=8)


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_partition_table_with_chunks(data):
    batch, by = data.draw(batches(max_rows=40))
    cut = data.draw(st.integers(0, batch.num_rows))
    table = pa.Table.from_batches([batch.slice(0, cut), batch.slice(cut)], schema=batch.schema)
    parts = fastops.partition(table, by, 5)
    whole = fastops.partition(batch, by, 5)
    assert [rows(p) for p in parts] == [rows(p) for p in whole]


def test_empty_batch_gives_empty_partitions_with_schema():
    batch = pa.record_batch({"k": pa.array([], pa.utf8()), "v": pa.array([], pa.float64())})
    for scheme in SCHEMES:
        parts = fastops.partition(batch, "k", 4, scheme=scheme)
        assert [p.num_rows for p in parts] == [0] * 4
        assert all(p.schema == batch.schema for p in parts)
    table = pa.Table.from_batches([], schema=batch.schema)
    assert [p.num_rows for p in fastops.partition(table, "k", 3)] == [0, 0, 0]


def test_partition_large_strings_and_many_partitions():
    rng = np.random.default_rng(5)
    n = 30_000
    lengths = rng.integers(0, 80, n)
    strings = ["".join(chr(97 + (i + j) % 26) for j in range(L)) for i, L in enumerate(lengths)]
    batch = pa.record_batch({
        "k": pa.array(rng.integers(0, 3000, n)),
        "s": pa.array(strings),
        "ls": pa.array(strings, pa.large_utf8()),
        "f": pa.array(rng.standard_normal(n), mask=rng.random(n) < 0.1),
        "b": pa.array(rng.random(n) < 0.5, mask=rng.random(n) < 0.1),
    }).slice(3, n - 10)
    for P in (1, 7, 256, 257, 300):  # ids of one byte up to 256 partitions, int32 above
        parts = fastops.partition(batch, "k", P)
        ids = fastops.partition_ids(batch, "k", P)
        for p, part in enumerate(parts):
            part.validate(full=True)
            assert part.equals(batch.filter(pa.array(ids == p)))


@pytest.mark.parametrize("P", [1, 5, 64, 300])
@pytest.mark.parametrize("dtype,columns", [(np.uint64, 1), (np.uint64, 2), (np.uint32, 2), (np.uint8, 1)])
def test_streamed_scatter_matches_numpy(P, dtype, columns):
    """Outputs past ``STREAM_MIN_BYTES`` go through per-partition line
    buffers and streaming stores: every value lands where a stable argsort by
    partition puts it, including partitions that start or end inside a
    64-byte line, empty partitions, and outputs not aligned to a line (which
    take the direct path); with the placement given, or made from the ids
    (an empty ``dest``); ids as int32 and, up to 256 partitions, as bytes."""
    rng = np.random.default_rng(P)
    width = np.dtype(dtype).itemsize
    n = _core.STREAM_MIN_BYTES // (width * columns) + 1001
    ids = rng.integers(0, P, n).astype(np.int32)
    if P > 2:
        ids[ids == 1] = 2  # an empty partition
        ids[ids == 3] = 0
        ids[rng.integers(0, n, 3)] = 3  # one of 1 to 3 rows: its line holds its neighbours' rows
    counts = np.bincount(ids, minlength=P).astype(np.int64)
    dest = np.empty(n, dtype=np.int32)
    starts = np.empty(P + 1, dtype=np.int64)
    _core.partition_dest(ids, counts, dest, starts)
    order = np.argsort(ids, kind="stable")
    srcs = [rng.integers(0, np.iinfo(dtype).max, n, dtype=dtype, endpoint=True) for _ in range(columns)]
    id_forms = [ids, ids.astype(np.uint8)] if P <= 256 else [ids]
    for shift, placement, id_form in itertools.product((0, 1), (dest, dest[:0]), id_forms):
        # 64-byte aligned outputs (streamed), and one word off (direct)
        outs = [fastops.core.arrow.empty(n + shift, dtype)[0][shift:] for _ in range(columns)]
        for o in outs:
            o[:] = 0
        if columns == 1:
            _core.scatter_words(srcs[0], id_form, starts, placement, outs[0])
        else:
            _core.scatter_words2(srcs[0], srcs[1], id_form, starts, placement, outs[0], outs[1])
        for src, out in zip(srcs, outs):
            np.testing.assert_array_equal(out, src[order])
    with pytest.raises(ValueError, match="ids"):
        _core.scatter_words(srcs[0], ids[:-1], starts, dest, outs[0])


def test_streamed_scatter_rejects_rows_it_cannot_place():
    """The streamed path writes a partition's lines whole: a row that
    completes a line must lie inside its partition's rows."""
    n = _core.STREAM_MIN_BYTES // 8 + 1001
    ids = np.random.default_rng(1).integers(0, 5, n).astype(np.int32)
    counts = np.bincount(ids, minlength=5).astype(np.int64)
    dest = np.empty(n, dtype=np.int64)
    starts = np.empty(6, dtype=np.int64)
    _core.partition_dest(ids, counts, dest, starts)
    src = np.arange(n, dtype=np.uint64)
    out = fastops.core.arrow.empty(n, np.uint64)[0]  # 64-byte aligned: streamed
    rows = np.flatnonzero(ids == 0)
    bad = dest.copy()
    bad[rows[5]] = starts[3] | 7  # the last word of a line, in partition 3's rows
    with pytest.raises(ValueError, match=rf"dest {starts[3] | 7} of row {rows[5]} outside partition "
                                         rf"0's rows \[0, {starts[1]}\)"):
        _core.scatter_words(src, ids, starts, bad, out)
    more = ids.copy()
    more[rows[:8]] = 1  # 8 rows past partition 1's: one of them completes a line
    with pytest.raises(ValueError, match=r"partition 1 has more rows than its starts"):
        _core.scatter_words(src, more, starts, dest[:0], out)
    more[rows[5]] = 7
    for placement in (dest, dest[:0]):
        with pytest.raises(ValueError, match=rf"id 7 of row {rows[5]} outside \[0, 5\)"):
            _core.scatter_words(src, more, starts, placement, out)


def test_id_kernels_reject_what_they_would_index_outside():
    h = np.arange(10, dtype=np.uint64)
    out = np.zeros(10, np.int32)
    two = np.zeros(2, np.int64)
    with pytest.raises(ValueError, match="d must be >= 1"):
        _core.fastmod_u64(h, 0, np.zeros(10, np.uint64))
    with pytest.raises(ValueError, match="fastmod_u64: out has 9 rows for 10 values"):
        _core.fastmod_u64(h, 3, np.zeros(9, np.uint64))
    with pytest.raises(ValueError, match=r"num_partitions 0 outside \[1, 2147483647\]"):
        _core.partition_modulo(h, 0, out, np.zeros(0, np.int64))
    with pytest.raises(ValueError, match="2 counts for 4 partitions"):
        _core.partition_modulo(h, 4, out, two)
    with pytest.raises(ValueError, match="partition_modulo: out has 9 rows for 10 values"):
        _core.partition_modulo(h, 2, out[:9], two)
    with pytest.raises(ValueError, match="no key groups"):
        _core.partition_lookup(h, np.zeros(0, np.int32), out, two)
    # owners checked whole (no more key groups than rows), then row by row
    with pytest.raises(ValueError, match=r"owner 5 of key group 1 outside \[0, 2\)"):
        _core.partition_lookup(h, np.array([0, 5, 1], np.int32), out, two)
    with pytest.raises(ValueError, match=r"owner -1 of key group 3 outside \[0, 2\)"):
        _core.partition_lookup(h, np.array([0, 1, 1, -1], np.int32), out, two)
    many = np.zeros(128, np.int32)
    many[7] = 5
    with pytest.raises(ValueError, match=r"owner 5 of key group 7 outside \[0, 2\)"):
        _core.partition_lookup(h, many, out, two)
    with pytest.raises(ValueError, match=r"fixed: owner 7 of key group 1 outside \[0, 2\)"):
        _core.partition_fixed(h, False, 0, 2, np.array([0, 7, 1], np.int32), out, two)
    many[:] = 0
    many[xxhash.xxh64_intdigest(np.uint64(3).tobytes()) % 128] = 9
    with pytest.raises(ValueError, match=r"fixed: owner 9 of key group \d+ outside \[0, 2\)"):
        _core.partition_fixed(h, False, 0, 2, many, out, two)
    with pytest.raises(ValueError, match="partition_fixed: 3 counts for 2 partitions"):
        _core.partition_fixed(h, False, 0, 2, np.zeros(0, np.int32), out, np.zeros(3, np.int64))

    points, owners, lut, shift = fastops.core.partitioning._ring(3, 4, 0)
    rng = np.random.default_rng(0)
    hashes = rng.integers(0, 2**64 - 1, 10, dtype=np.uint64, endpoint=True)
    counts = np.zeros(3, np.int64)
    with pytest.raises(ValueError, match=f"65536 LUT entries for shift {shift}"):
        _core.partition_ring(hashes, points, owners, lut[:-1], shift, out, counts)
    with pytest.raises(ValueError, match="12 points, 11 owners"):
        _core.partition_ring(hashes, points, owners[:-1], lut, shift, out, counts)
    # fewer rows than LUT entries: checked row by row
    bucket = int(hashes[4]) >> shift
    bad_lut = lut.copy()
    bad_lut[bucket + 1] = 100
    for c in (counts, counts[:0]):
        with pytest.raises(ValueError, match=rf"LUT bucket {bucket} holds points "
                                             rf"\[{lut[bucket]}, 100\) outside \[0, 12\]"):
            _core.partition_ring(hashes, points, owners, bad_lut, shift, out, c)
    bad_owners = np.full(12, 9, np.int32)
    with pytest.raises(ValueError, match=r"owner 9 of point \d+ outside \[0, 3\)"):
        _core.partition_ring(hashes, points, bad_owners, lut, shift, out, counts)
    # as many rows as LUT entries and points: the tables checked whole
    hashes = rng.integers(0, 2**64 - 1, len(lut) + 12, dtype=np.uint64, endpoint=True)
    out = np.zeros(len(hashes), np.int32)
    with pytest.raises(ValueError, match=rf"LUT entry {bucket + 1} is 100, outside "
                                         rf"\[{lut[bucket]}, 12\]"):
        _core.partition_ring(hashes, points, owners, bad_lut, shift, out, counts)
    with pytest.raises(ValueError, match=r"owner 9 of point 0 outside \[0, 3\)"):
        _core.partition_ring(hashes, points, bad_owners, lut, shift, out, counts)
    _core.partition_ring(hashes, points, bad_owners, lut, shift, out, counts[:0])  # not counted


def test_placement_kernels_reject_rows_they_cannot_place():
    i32 = lambda *v: np.array(v, np.int32)
    i64 = lambda *v: np.array(v, np.int64)
    ids, counts, starts = i32(0, 1, 2, 1), i64(1, 3), np.zeros(3, np.int64)
    for order in (False, True):
        with pytest.raises(ValueError, match=r"partition_dest: id 2 of row 2 outside \[0, 2\)"):
            _core.partition_dest(ids, counts, np.zeros(4, np.int64), starts, order)
    with pytest.raises(ValueError, match=r"counts place row 3 at 4, outside \[0, 4\)"):
        _core.partition_dest(i32(0, 1, 1, 1), i64(2, 2), np.zeros(4, np.int64), starts, True)
    with pytest.raises(ValueError, match=r"counts place row 0 at -5, outside \[0, 2\)"):
        _core.partition_dest(i32(1, 0), i64(-5, 2), np.zeros(2, np.int64), starts, True)
    with pytest.raises(ValueError, match="partition_dest: 2 starts for 2 partitions"):
        _core.partition_dest(ids, counts, np.zeros(4, np.int64), starts[:2])
    with pytest.raises(ValueError, match="partition_dest: dest has 3 rows for 4 ids"):
        _core.partition_dest(i32(0, 1, 1, 1), counts, np.zeros(3, np.int64), starts)

    src, out = np.arange(4, dtype=np.uint64), np.zeros(4, np.uint64)
    ids, starts = i32(0, 1, 0, 1), i64(0, 2, 4)
    with pytest.raises(ValueError, match=r"scatter_words: dest 9 of row 2 outside \[0, 4\)"):
        _core.scatter_words(src, ids, starts, i64(0, 2, 9, 3), out)
    with pytest.raises(ValueError, match=r"scatter_words2: dest -1 of row 0 outside \[0, 4\)"):
        _core.scatter_words2(src, src, ids, starts, i64(-1, 2, 1, 3), out, out.copy())
    with pytest.raises(ValueError, match=r"id 2 of row 1 outside \[0, 2\)"):
        _core.scatter_words(src, i32(0, 2, 0, 1), starts, i64(), out)
    with pytest.raises(ValueError, match=r"partition 1 has more rows than its starts \[2, 4\)"):
        _core.scatter_words(src, i32(0, 1, 1, 1), starts, i64(), out)
    with pytest.raises(ValueError, match=r"start 1 of partition 2 outside \[2, 4\]"):
        _core.scatter_words(src, ids, i64(0, 2, 1), i64(), out)

    ones = np.full(1, 255, np.uint8)
    with pytest.raises(ValueError, match=r"scatter_bits: dest 8 of row 3 outside \[0, 8\)"):
        _core.scatter_bits(ones, 0, i64(0, 1, 2, 8), np.zeros(1, np.uint8))
    with pytest.raises(ValueError, match="scatter_bits: 4 bits from bit 6 on outside a bitmap"):
        _core.scatter_bits(ones, 6, i64(0, 1, 2, 3), np.zeros(1, np.uint8))

    data = np.frombuffer(b"abc", np.uint8)

    def scatter_binary(offsets=None, ids=None, starts=None, out_offsets=None, out_data=None):
        _core.scatter_binary(i64(0, 1, 3, 3) if offsets is None else offsets, data,
                             i32(1, 0, 1) if ids is None else ids, i64(0, 1, 3) if starts is None else starts,
                             np.zeros(4, np.int64) if out_offsets is None else out_offsets,
                             np.zeros(3, np.uint8) if out_data is None else out_data, np.zeros(3, np.int32))

    scatter_binary()
    with pytest.raises(ValueError, match=r"scatter_binary: id 2 of row 1 outside \[0, 2\)"):
        scatter_binary(ids=i32(1, 2, 1))
    with pytest.raises(ValueError, match="offsets decrease at value 1: 5 then 3"):
        scatter_binary(offsets=i64(0, 5, 3, 3))
    with pytest.raises(ValueError, match="offsets from 0 to 4 outside the 3 data bytes"):
        scatter_binary(offsets=i64(0, 1, 3, 4))
    with pytest.raises(ValueError, match="out_data has 2 bytes for 3"):
        scatter_binary(out_data=np.zeros(2, np.uint8))
    with pytest.raises(ValueError, match=r"partition 1 has more rows than its starts \[1, 2\)"):
        scatter_binary(starts=i64(0, 1, 2))
    with pytest.raises(ValueError, match=r"start 4 of partition 2 outside \[1, 3\]"):
        scatter_binary(starts=i64(0, 1, 4))
    with pytest.raises(ValueError, match="3 output offsets"):
        scatter_binary(out_offsets=np.zeros(3, np.int64))


def test_scatter_by_ids_rejects_out_of_range():
    batch = pa.record_batch({"v": [1, 2, 3]})
    parts = fastops.core.partitioning.scatter_by_ids(batch, np.array([2, 0, 2]), 3)
    assert [p.column(0).to_pylist() for p in parts] == [[2], [], [1, 3]]
    with pytest.raises(ValueError, match=r"\[0, 3\)"):
        fastops.core.partitioning.scatter_by_ids(batch, np.array([0, 3, 1]), 3)
    with pytest.raises(ValueError, match=r"\[0, 3\)"):
        fastops.core.partitioning.scatter_by_ids(batch, np.array([0, -1, 1]), 3)
    with pytest.raises(ValueError, match="rows"):
        fastops.core.partitioning.scatter_by_ids(batch, np.array([0, 1]), 3)


@pytest.mark.parametrize("rows", [0, 2**62])
def test_nested_payload_uses_take(rows):
    batch = pa.record_batch({"k": [1, 2, 3, 4], "l": pa.array([[1], [], None, [2, 3]])})
    with small_batch(rows):
        parts = fastops.partition(batch, "k", 2)
    ids = fastops.partition_ids(batch, "k", 2)
    for p in range(2):
        assert parts[p].equals(batch.filter(pa.array(ids == p)))


# ---------------------------------------------------------------- key groups

@pytest.mark.parametrize("maxp", [1, 2, 7, 128, 1000, 32768])
def test_key_group_range_matches_flink_and_covers(maxp):
    for P in sorted(p for p in {1, 2, 3, 5, 8, maxp // 3 or 1, maxp - 1 or 1, maxp} if p <= maxp):
        ranges = [fastops.key_group_range(i, P, maxp) for i in range(P)]
        assert ranges == [ref.flink_key_group_range(i, P, maxp) for i in range(P)]
        assert [g for r in ranges for g in r] == list(range(maxp))   # contiguous, disjoint, covering
        for i, r in enumerate(ranges):
            assert all(ref.owner_key_group(g, P, maxp) == i for g in (r.start, r.stop - 1)
                       if len(r))


def test_key_group_owner_is_range_owner():
    rng = np.random.default_rng(2)
    h = rng.integers(0, 2**64 - 1, 5000, dtype=np.uint64, endpoint=True)
    for P, maxp in [(3, 128), (7, 100), (128, 128), (1, 1)]:
        ids = fastops.core.partitioning.ids_from_hashes(h, P, "key_group", maxp)
        for hv, i in zip(h.tolist(), ids.tolist()):
            assert hv % maxp in fastops.key_group_range(i, P, maxp)


# ---------------------------------------------------------------- errors

def test_errors():
    batch = pa.record_batch({"k": [1, 2], "l": pa.array([[1], [2]]), "d": pa.array([1.0, 2.0])})
    with pytest.raises(KeyError, match="'missing'"):
        fastops.partition_ids(batch, "missing", 2)
    with pytest.raises(KeyError, match="'nope'"):
        fastops.partition(batch, ["k", "nope"], 2)
    with pytest.raises(TypeError, match=r"'l'.*list<item: int64>|list<item: int64>.*'l'"):
        fastops.partition_ids(batch, "l", 2)
    for bad in (0, -1):
        with pytest.raises(ValueError, match="num_partitions"):
            fastops.partition_ids(batch, "k", bad)
    with pytest.raises(ValueError, match="max_parallelism"):
        fastops.partition_ids(batch, "k", 200, scheme="key_group", max_parallelism=128)
    with pytest.raises(ValueError, match="max_parallelism"):
        fastops.key_group_range(0, 129, 128)
    with pytest.raises(ValueError, match="index"):
        fastops.key_group_range(4, 4, 128)
    with pytest.raises(ValueError, match="scheme"):
        fastops.partition(batch, "k", 2, scheme="round_robin")
    with pytest.raises(ValueError, match="virtual_nodes"):
        fastops.partition_ids(batch, "k", 2, scheme="consistent", virtual_nodes=0)
    with pytest.raises(TypeError, match="RecordBatch"):
        fastops.partition({"k": [1]}, "k", 2)
    with pytest.raises(ValueError, match="num_partitions"):
        fastops.partition_ids(batch, "k", True)
    with pytest.raises(ValueError, match="key column"):
        fastops.partition_ids(batch, [], 2)


# ---------------------------------------------------------------- migration

N_KEYS = 200_000


def _keys(n=N_KEYS, seed=0):
    return np.random.default_rng(seed).choice(2**40, n, replace=False).astype(np.int64)


def _tol(p, n=N_KEYS):
    return 5 * math.sqrt(p * (1 - p) / n) + 1e-9


@pytest.mark.parametrize("n", [1, 2, 3, 4, 7, 8])
def test_moved_fraction_hash(n):
    keys = _keys()
    exact = ref.modulo_moved_share(n, n + 1)
    assert exact == pytest.approx(1 - 1 / (n + 1))
    got = fastops.moved_fraction(keys, n, n + 1, scheme="hash")
    assert abs(got - exact) < _tol(exact)
    doubled = ref.modulo_moved_share(n, 2 * n)
    assert abs(fastops.moved_fraction(keys, n, 2 * n, scheme="hash") - doubled) < _tol(doubled)


@pytest.mark.parametrize("n,maxp", [(1, 128), (2, 128), (3, 128), (4, 128), (7, 128),
                                    (8, 128), (5, 1000)])
def test_moved_fraction_key_group(n, maxp):
    keys = _keys()
    for new in (n + 1, 2 * n):
        exact = ref.key_group_moved_share(n, new, maxp)
        got = fastops.moved_fraction(keys, n, new, scheme="key_group", max_parallelism=maxp)
        assert abs(got - exact) < _tol(exact), (new, got, exact)
    if maxp % (2 * n) == 0:
        # doubling: group g of old task o goes to task 2o or 2o+1, so only the
        # first half of task 0's groups keep their task index
        assert ref.key_group_moved_share(n, 2 * n, maxp) == 1 - 1 / (2 * n)
    # contiguous ranges: n -> n+1 moves about half the groups, not 1/(n+1)
    assert abs(ref.key_group_moved_share(n, n + 1, maxp) - 0.5) < 0.04


@pytest.mark.parametrize("n", [1, 2, 4, 7, 16])
def test_moved_fraction_consistent(n):
    keys = _keys()
    vnodes = 64
    ring_new = ref.Ring(n + 1, vnodes)
    share = ring_new.arc_share(n)             # the hash space the new partition takes
    got = fastops.moved_fraction(keys, n, n + 1, scheme="consistent", virtual_nodes=vnodes)
    assert abs(got - share) < _tol(share)
    # about 1/(n+1): with 64 virtual nodes the share's relative spread is ~1/sqrt(64)
    assert abs(share * (n + 1) - 1) < 0.5
    # keys only ever move to the new partition
    h = fastops.hash64(pa.array(keys)).to_numpy()
    old = fastops.core.partitioning.ids_from_hashes(h, n, "consistent", virtual_nodes=vnodes)
    new = fastops.core.partitioning.ids_from_hashes(h, n + 1, "consistent", virtual_nodes=vnodes)
    assert set(new[old != new].tolist()) <= {n}


def test_moved_fraction_counts_distinct_keys_and_edge_cases():
    keys = np.repeat(_keys(1000), 50)
    assert fastops.moved_fraction(keys, 3, 4) == fastops.moved_fraction(np.unique(keys), 3, 4)
    assert fastops.moved_fraction(pa.array([], pa.int64()), 3, 4) == 0.0
    assert fastops.moved_fraction(_keys(1000), 5, 5, scheme="consistent") == 0.0
    strings = pa.array([f"k{i}" for i in range(20_000)])
    assert 0.7 < fastops.moved_fraction(strings, 3, 4) < 0.8


def _zipf(n, distinct, s, seed=0):
    rng = np.random.default_rng(seed)
    w = 1.0 / np.arange(1, distinct + 1) ** s
    ranks = rng.choice(distinct, size=n, p=w / w.sum())
    return rng.choice(2**40, distinct, replace=False)[ranks]


@pytest.mark.parametrize("scheme", SCHEMES)
def test_load_imbalance(scheme):
    """max/mean rows per partition: near 1 on uniform keys; on Zipf keys at
    least what the hottest key alone forces, and not much more."""
    P, n = 8, 400_000
    uniform = pa.record_batch({"k": np.random.default_rng(1).integers(0, 10**9, n)})
    counts = np.bincount(fastops.partition_ids(uniform, "k", P, scheme=scheme), minlength=P)
    limit = {"hash": 1.02, "key_group": 1.05, "consistent": 1.6}[scheme]
    assert counts.max() / counts.mean() < limit
    keys = _zipf(n, 10_000, 1.2)
    skewed = pa.record_batch({"k": keys})
    counts = np.bincount(fastops.partition_ids(skewed, "k", P, scheme=scheme), minlength=P)
    imbalance = counts.max() / counts.mean()
    top_share = Counter(keys.tolist()).most_common(1)[0][1] / n
    assert imbalance >= top_share * P - 1e-9
    assert imbalance <= top_share * P + limit + 0.5
