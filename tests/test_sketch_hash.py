"""The sketches' string hashing (grouped by length) is XXH64, row for row."""
import numpy as np
import pyarrow as pa
import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from fastops import _sketch
from fastops import sketches as S


def _kernel_hashes(arr: pa.Array, seed: int) -> tuple[list[int], list[int]]:
    src = next(S._sources(arr, seed))[2]
    out = np.zeros(src.n, np.uint64)
    rows = np.zeros(src.n, np.int64)
    got = _sketch.sketch_hash(src.mode, src.a, src.b, src.valid, src.voff, src.n, seed,
                              out, rows)
    return rows[:got].tolist(), [int(h) for h in out[:got]]


def _expected(arr: pa.Array, seed: int) -> tuple[list[int], list[int]]:
    py = arr.to_pylist()
    rows = [i for i, v in enumerate(py) if v is not None]
    data = [py[i].encode() if isinstance(py[i], str) else py[i] for i in rows]
    return rows, [xxhash.xxh64_intdigest(v, seed) for v in data]


@pytest.mark.parametrize("typ", [pa.binary(), pa.large_binary()], ids=str)
def test_every_length_up_to_100(typ):
    # lengths 0..99 thirty times each, shuffled: every length bucket and the
    # >= 32 path, with chunks of the kernel (512 rows) holding mixed lengths
    rng = np.random.default_rng(7)
    vals = [bytes(rng.integers(0, 256, n, dtype=np.uint8)) for n in list(range(100)) * 30]
    rng.shuffle(vals)
    arr = pa.array([None if i % 11 == 4 else v for i, v in enumerate(vals)], typ).slice(3)
    assert _kernel_hashes(arr, 99) == _expected(arr, 99)
    dense = pa.array(vals, typ)
    assert _kernel_hashes(dense, 0) == _expected(dense, 0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(max_size=40)), min_size=1, max_size=1500),
       st.integers(0, 2**64 - 1), st.integers(0, 5), st.booleans())
def test_strings_match_xxhash(values, seed, cut, large):
    arr = pa.array(values, pa.large_string() if large else pa.string()).slice(min(cut, len(values)))
    if len(arr) == 0 or arr.null_count == len(arr):
        return
    assert _kernel_hashes(arr, seed) == _expected(arr, seed)
