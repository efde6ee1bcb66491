"""KeyTable: dense exact group ids, key reconstruction, hashes, snapshots."""
from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastops
from fastops._kernels import keys as _keys
from fastops.core.hashing import hash_columns
from fastops.core.keys import KeyTable

TYPES = {
    "int64": (pa.int64(), st.integers(-(2**63), 2**63 - 1) | st.integers(-3, 3)),
    "int8": (pa.int8(), st.integers(-128, 127)),
    "uint32": (pa.uint32(), st.integers(0, 2**32 - 1) | st.integers(0, 3)),
    "float64": (pa.float64(), st.sampled_from([0.0, -0.0, float("nan"), 1.0, -1.5, math.inf]) | st.floats()),
    "float32": (pa.float32(), st.sampled_from([0.0, -0.0, float("nan"), 2.5])),
    "bool": (pa.bool_(), st.booleans()),
    "string": (pa.string(), st.text(max_size=4) | st.sampled_from(["", "a", "ab"])),
    "large_binary": (pa.large_binary(), st.binary(max_size=4)),
    "timestamp": (pa.timestamp("ns"), st.integers(-(10**12), 10**12)),
    "date32": (pa.date32(), st.integers(-1000, 1000)),
}


def canon(v):
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if v == 0:
            return 0.0
    return v


@st.composite
def key_batches(draw):
    names = draw(st.lists(st.sampled_from(sorted(TYPES)), min_size=1, max_size=3))
    nb = draw(st.integers(1, 4))
    batches = []
    for _ in range(nb):
        n = draw(st.integers(0, 40))
        cols = []
        for t in names:
            typ, strat = TYPES[t]
            vals = draw(st.lists(st.none() | strat, min_size=n, max_size=n))
            if t == "float32":
                vals = [None if v is None else float(np.float32(v)) for v in vals]
            if t in ("timestamp", "date32"):
                storage = pa.int64() if t == "timestamp" else pa.int32()
                cols.append(pa.array(vals, type=storage).cast(typ))
            else:
                cols.append(pa.array(vals, type=typ))
        batches.append(cols)
    return names, batches


def pyvals(col: pa.Array) -> list:
    if pa.types.is_timestamp(col.type) or pa.types.is_date(col.type):
        return col.cast(pa.int64() if pa.types.is_timestamp(col.type) else pa.int32()).to_pylist()
    return col.to_pylist()


@settings(max_examples=150, deadline=None)
@given(key_batches())
def test_ids_match_dict_model(data):
    names, batches = data
    kt = KeyTable([f"c{i}" for i in range(len(names))])
    model: dict = {}
    for cols in batches:
        ids = kt.lookup_or_insert(cols)
        rows = list(zip(*[pyvals(c) for c in cols])) if cols and len(cols[0]) else []
        expected = [model.setdefault(tuple(canon(v) for v in r), len(model)) for r in rows]
        assert ids.tolist() == expected
    assert kt.num_groups == len(model)
    # keys() rebuilds the distinct keys in id order with their original types
    keys = kt.keys()
    assert [k.type for k in keys] == [c.type for c in batches[0]]
    rebuilt = list(zip(*[pyvals(k) for k in keys])) if keys and len(keys[0]) else []
    assert [tuple(canon(v) for v in r) for r in rebuilt] == list(model)
    # each group's hash is the row hash of its key
    if kt.num_groups:
        assert np.array_equal(kt.group_hashes(), hash_columns(keys, 0))
    # snapshot / restore keeps ids
    kt2 = KeyTable.restore(kt.snapshot())
    assert kt2.num_groups == kt.num_groups
    for cols in batches:
        assert np.array_equal(kt2.lookup_or_insert(cols), kt.lookup_or_insert(cols))


def test_large_random_against_pandas():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(1)
    a = rng.integers(0, 5000, 200_000)
    b = rng.choice(np.array(["x", "yy", "zzz", ""], dtype=object), 200_000)
    kt = KeyTable(["a", "b"])
    ids = np.concatenate([kt.lookup_or_insert([pa.array(a[i:i + 30_000]), pa.array(b[i:i + 30_000])])
                          for i in range(0, 200_000, 30_000)])
    codes, _ = pd.factorize(pd.MultiIndex.from_arrays([a, b]))
    assert np.array_equal(ids, codes)


def test_no_key_columns_is_one_group():
    kt = KeyTable([])
    assert kt.lookup_n(3).tolist() == [0, 0, 0]
    assert kt.num_groups == 1 and kt.keys() == []


def test_type_change_and_bad_input():
    kt = KeyTable(["user"])
    kt.lookup_or_insert([pa.array([1, 2])])
    with pytest.raises(TypeError, match="'user'.*int32"):
        kt.lookup_or_insert([pa.array([1], pa.int32())])
    with pytest.raises(TypeError, match="'m'.*unsupported type"):
        KeyTable(["m"]).lookup_or_insert([pa.array([[1]])])
    with pytest.raises(ValueError, match="rows"):
        KeyTable(["a", "b"]).lookup_or_insert([pa.array([1, 2]), pa.array([1])])
    with pytest.raises(KeyError, match="out of range"):
        kt.keys(np.array([5]))


def test_dictionary_and_chunked_keys():
    kt = KeyTable(["s"])
    d = pa.array(["a", "b", "a", None]).dictionary_encode()
    assert kt.lookup_or_insert([d]).tolist() == [0, 1, 0, 2]
    ch = pa.chunked_array([pa.array(["b"]), pa.array(["c", None])])
    assert kt.lookup_or_insert([ch]).tolist() == [1, 3, 2]
    assert kt.keys()[0].to_pylist() == ["a", "b", None, "c"]


@pytest.mark.skipif(not hasattr(pa, "string_view"), reason="view types need pyarrow >= 16")
@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), st.text(max_size=20)),
                          st.one_of(st.none(), st.binary(max_size=20))), min_size=1, max_size=40))
def test_view_keys_group_as_their_values(rows):
    """string_view / binary_view keys (inline or not) get the ids of the same
    values as string / binary (a first-seen-order dict model), and come back in
    their own type, through a snapshot too."""
    s = [r[0] for r in rows]
    b = [r[1] for r in rows]
    kt = KeyTable(["s", "b"])
    ids = kt.lookup_or_insert([pa.array(s, pa.string_view()), pa.array(b, pa.binary_view())])
    model: dict = {}
    assert ids.tolist() == [model.setdefault(r, len(model)) for r in rows]
    keys = KeyTable.restore(kt.snapshot()).keys()
    assert [k.type for k in keys] == [pa.string_view(), pa.binary_view()]
    assert list(zip(keys[0].to_pylist(), keys[1].to_pylist())) == list(model)


@pytest.mark.parametrize("typ", [pa.int64(), pa.int16(), pa.float64()])
def test_fixed_keys_rebuilt_before_and_after_a_null_key(typ):
    """A column that has held no null key is rebuilt by a plain gather (no
    validity); once a null key arrives, its group reads as null. Both
    against the keys as given, in any order of ids; a bad id is a KeyError
    on either path."""
    rng = np.random.default_rng(5)
    vals = rng.integers(-100, 100, 500)
    kt = KeyTable(["k"])
    kt.lookup_or_insert([pa.array(vals).cast(typ)])
    first = {}
    for v in vals.tolist():
        first.setdefault(v, len(first))
    order = rng.permutation(kt.num_groups)
    want = [list(first)[g] for g in order]
    got = kt.keys(order)[0]
    assert got.null_count == 0 and got.buffers()[0] is None
    assert got.cast(pa.int64()).to_pylist() == want
    kt.lookup_or_insert([pa.array([None, 7], pa.int64()).cast(typ)])
    null_gid = kt.num_groups - (2 if 7 not in first else 1)
    ids = np.array([null_gid, 0, null_gid], dtype=np.int64)
    assert kt.keys(ids)[0].cast(pa.int64()).to_pylist() == [None, next(iter(first)), None]
    for table in (KeyTable(["k"]), kt):
        table.lookup_or_insert([pa.array([1, 2], pa.int64()).cast(typ)])
        with pytest.raises(KeyError, match="out of range"):
            table.keys(np.array([0, table.num_groups], dtype=np.int64))
        with pytest.raises(KeyError, match="out of range"):
            table.keys(np.array([-1], dtype=np.int64))


@pytest.mark.parametrize("path", ["words", "nulls", "general"])
def test_table_grows_within_a_batch(path):
    """The table grows block by block while a batch inserts keys: one batch
    of 150k rows and ~78k new keys (the kernel's own hashing, a column with
    nulls, two columns) gives pandas' ids, and a table sized for the groups
    it holds (at most half full, at least a quarter), not for every row of
    the batch being new."""
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(11)
    n = 150_000
    a = rng.integers(0, 100_000, n) * 7919
    mask = (np.arange(n) % 97 == 5) if path == "nulls" else None
    cols = [pa.array(a, mask=mask)]
    ref = pd.Series(a).mask(mask) if mask is not None else pd.Series(a)
    if path == "general":
        b = rng.integers(0, 2, n)
        cols.append(pa.array(b.astype(str)))
        codes, _ = pd.factorize(pd.MultiIndex.from_arrays([a, b]))
    else:
        codes, _ = pd.factorize(ref, use_na_sentinel=False)
    kt = KeyTable(["a", "b"][: len(cols)])
    ids = kt.lookup_or_insert(cols)
    assert np.array_equal(ids, codes)
    cap = kt._index.capacity
    assert 2 * kt.num_groups <= cap <= 4 * kt.num_groups + 2 * 1024


@pytest.mark.parametrize("typ", [pa.int64(), pa.uint64(), pa.timestamp("us"), pa.duration("ms")])
def test_eight_byte_keys_hashed_in_the_kernel(typ):
    """One 8-byte integer key without nulls takes the kernel's own hashing
    (blocks of 1024 rows); sliced input, a seed, and a batch with nulls in
    between (the general path) must still give one id per key, in order of
    first appearance, and hash64's hash for each group."""
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(3)
    raw = rng.integers(0, 3000, 9000) * 7919 - 10**6
    null = np.zeros(9000, dtype=bool)
    null[6500::11] = True

    def typed(values, mask=None):
        if typ == pa.uint64():
            return pa.array(values.astype(np.uint64), mask=mask)
        return pa.array(values, pa.int64(), mask=mask).cast(typ)

    seed = 2**63 + 12345
    kt = KeyTable(["k"], seed=seed)
    pieces = [typed(raw[:2500]), typed(raw).slice(2500, 4000), typed(raw[6500:], null[6500:])]
    got = np.concatenate([kt.lookup_or_insert([p]) for p in pieces])
    codes, _ = pd.factorize(pd.Series(raw).mask(null), use_na_sentinel=False)
    assert np.array_equal(got, codes)
    assert np.array_equal(kt.group_hashes(), fastops.hash64(kt.keys()[0], seed=seed).to_numpy())


def test_key_kernels_reject_what_they_would_index_outside():
    i64 = lambda *v: np.array(v, np.int64)
    for kernel, dtype in [(_keys.normalize_f64, np.uint64), (_keys.normalize_f32, np.uint32)]:
        with pytest.raises(ValueError, match="outputs hold 2 rows, 3 needed"):
            kernel(np.zeros(3, dtype), np.zeros(2, np.uint64))
    data = np.frombuffer(b"abc", np.uint8)
    index = _keys.KeyIndex([1])
    # first and last offset in range, one between them not
    with pytest.raises(ValueError, match=r"column 0: value 0 runs from offset 0 to 100, outside"):
        index.lookup_or_insert(np.array([1, 2], np.uint64), [(i64(0, 100, 3), data, None)],
                               np.zeros(2, np.int64))
    two = _keys.KeyIndex([0, 1])  # a null value's offsets are checked too
    nulls = np.array([0, 1, 0], np.uint8)
    columns = [(np.zeros(3, np.uint64), None), (i64(0, 1, 0, 3), data, nulls)]
    with pytest.raises(ValueError, match=r"column 1: value 1 runs from offset 1 to 0, outside"):
        two.lookup_or_insert(np.array([1, 2, 3], np.uint64), columns, np.zeros(3, np.int64))

    index.lookup_or_insert(np.array([1, 2], np.uint64), [(i64(0, 1, 3), data, None)],
                           np.zeros(2, np.int64))
    with pytest.raises(ValueError, match="group_hashes: outputs hold 1 rows, 2 needed"):
        index.group_hashes(i64(0, 1), np.zeros(1, np.uint64))
    with pytest.raises(ValueError, match="binary_sizes: outputs hold 1 rows, 2 needed"):
        index.binary_sizes(0, i64(0, 1), np.zeros(2, np.int64), np.zeros(2, np.uint8))
    with pytest.raises(ValueError, match=r"binary_fill: group 2 outside \[0, 2\)"):
        index.binary_fill(0, i64(0, 2), i64(0, 1), np.zeros(3, np.uint8))
    with pytest.raises(ValueError, match="binary_fill: 2 bytes at offset 2 outside the 3 data"):
        index.binary_fill(0, i64(0, 1), i64(0, 2), np.zeros(3, np.uint8))
    with pytest.raises(ValueError, match="binary_fill: 1 bytes at offset -1 outside the 3 data"):
        index.binary_fill(0, i64(0, 1), i64(-1, 1), np.zeros(3, np.uint8))
    fixed = _keys.KeyIndex([0, 0])
    fixed.lookup_or_insert(np.array([1], np.uint64), [(np.zeros(1, np.uint64), None)] * 2,
                           np.zeros(1, np.int64))
    with pytest.raises(ValueError, match="gather_fixed: outputs hold 0 rows, 1 needed"):
        fixed.gather_fixed(0, i64(0), np.zeros(1, np.uint64), np.zeros(0, np.uint8))
