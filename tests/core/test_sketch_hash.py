"""The sketches' string hashing (grouped by length) is XXH64, row for row."""
import numpy as np
import pyarrow as pa
import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from fastops._kernels import sketch as _sketch
from fastops.core.sketches.common import _sources


def _kernel_hashes(arr: pa.Array, seed: int) -> tuple[list[int], list[int]]:
    src = next(_sources(arr, seed))[2]
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


_E8 = np.zeros(0, np.uint8)


def _bad_offsets_calls(src):
    """Every kernel that hashes a hash source, on ``src``."""
    z64 = lambda n: np.zeros(n, np.int64)
    n, regs, table = src[5], np.zeros((1, 16), np.uint8), np.zeros((2, 8), np.int64)
    return {
        "sketch_hash": lambda: _sketch.sketch_hash(*src, np.zeros(n, np.uint64), z64(n)),
        "hll_update": lambda: _sketch.hll_update(regs[0], 4, *src),
        "hll_update_slots": lambda: _sketch.hll_update_slots(regs, 4, z64(n), *src),
        "cms_update": lambda: _sketch.cms_update(table, False, z64(0), *src),
        "cms_estimate": lambda: _sketch.cms_estimate(table, z64(n), *src),
        "bloom_update": lambda: _sketch.bloom_update(np.zeros(1, np.uint64), 64, 2, False, _E8,
                                                     *src),
        "ss_update": lambda: _sketch.ss_update(np.zeros(4, np.uint64), z64(4), z64(4), np.arange(4),
                                               0, 4, z64(0), 1, *src),
    }


@pytest.mark.parametrize("kernel", list(_bad_offsets_calls((3, _E8, _E8, _E8, 0, 0, 0))))
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_offsets_between_first_and_last_are_checked(kernel, dtype):
    """The first and the last offset are in range, one between them is not:
    each block's offsets are checked before its rows are hashed."""
    data = np.frombuffer(b"abc", np.uint8)
    mode = 3 if dtype == np.int32 else 4
    offsets = np.array([0, 100, 3], dtype).view(np.uint8)
    with pytest.raises(ValueError, match=f"{kernel}: offsets decrease at row 1: 100 then 3"):
        _bad_offsets_calls((mode, offsets, data, _E8, 0, 2, 0))[kernel]()
    offsets = np.zeros(601, dtype)
    offsets[512] = 10**6  # the first block (512 rows) ends past the data
    with pytest.raises(ValueError, match=f"{kernel}: offsets decrease at row 512: 1000000 then 0"):
        _bad_offsets_calls((mode, offsets.view(np.uint8), data, _E8, 0, 600, 0))[kernel]()


def test_buffer_sizes_that_overflow_are_too_short():
    regs = np.zeros(16, np.uint8)
    with pytest.raises(ValueError, match="values buffer too short"):  # 2**61 * 8 bytes wraps to 0
        _sketch.hll_update(regs, 4, 1, np.zeros(8, np.uint8), _E8, _E8, 0, 2**61, 0)
    with pytest.raises(ValueError, match="offsets buffer too short"):
        _sketch.hll_update(regs, 4, 4, np.zeros(16, np.uint8), np.zeros(3, np.uint8), _E8, 0,
                           2**62, 0)
    with pytest.raises(ValueError, match="validity bitmap too short"):
        _sketch.hll_update(regs, 4, 1, np.zeros(64, np.uint8), _E8, np.zeros(1, np.uint8),
                           2**63 - 4, 8, 0)
