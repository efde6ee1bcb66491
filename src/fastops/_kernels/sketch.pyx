# cython: language_level=3
# distutils: language = c++
"""Sketch kernels: HyperLogLog, Count-Min, Bloom, KLL, Space-Saving, reservoir.

Loops over buffers only. The Python layer (``fastops.core.sketches``) validates
inputs, prepares zero-copy views of Arrow buffers and raises on a non-zero
status after the ``nogil`` block (the ``STATUS_*`` values).

Kernels that work on hashed values read them from a *hash source*
(``_sketch_source.pxi``, its kinds the ``HashSource`` enum), so a value
hashes the same whichever column fed it, and equals
``fastops.core.hashing.hash_columns([arr], seed)``.

One sketch per include: ``_sketch_hll.pxi``, ``_sketch_countmin.pxi``,
``_sketch_bloom.pxi``, ``_sketch_kll.pxi``, ``_sketch_spacesaving.pxi``,
``_sketch_reservoir.pxi``.
"""
cimport cython
from libc.math cimport ceil, exp, floor, log, pow
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy, memset
from libcpp.algorithm cimport nth_element, sort

from fastops._kernels._checks cimport (ERR_NEGATIVE_WEIGHT, ERR_NOMEM, ERR_RANGE,
                                       ERR_TOO_MANY_LEVELS, check_validity, offsets_ok)
from fastops._kernels._platform cimport clz64, popcount64, prefetch_r, range64
from fastops._kernels._xxhash cimport xxh64_many4, xxh64_many8, xxh64_values32, xxh64_values64

DEF BLOCK = 512  # rows hashed at a time, into a stack buffer

# statuses the kernels return (``_checks.pxd``), for the Python layer
STATUS_NOMEM = ERR_NOMEM
STATUS_NEGATIVE_WEIGHT = ERR_NEGATIVE_WEIGHT
STATUS_BAD_SIZES = ERR_RANGE  # a slot or sketch id outside the state
STATUS_TOO_MANY_LEVELS = ERR_TOO_MANY_LEVELS


# ------------------------------------------------------------ primitives

cdef inline uint64_t _fmix64(uint64_t h) noexcept nogil:
    """MurmurHash3's 64-bit finaliser: derives a second hash from the first."""
    h ^= h >> 33
    h *= 0xFF51AFD7ED558CCDULL
    h ^= h >> 33
    h *= 0xC4CEB9FE1A85EC53ULL
    h ^= h >> 33
    return h


cdef inline uint64_t _splitmix(uint64_t* s) noexcept nogil:
    """splitmix64: advance the state ``s`` and return the next output."""
    s[0] += 0x9E3779B97F4A7C15ULL
    cdef uint64_t z = s[0]
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL
    return z ^ (z >> 31)


cdef inline double _unit_open0(uint64_t* s) noexcept nogil:
    """Uniform double in (0, 1]."""
    return (<double>((_splitmix(s) >> 11) + 1)) * (1.0 / 9007199254740992.0)


cdef inline bint _any_negative(const int64_t* w, int64_t n) noexcept nogil:
    cdef int64_t i
    for i in range(n):
        if w[i] < 0:
            return True
    return False


cdef inline bint _bit(const uint8_t* bm, int64_t i) noexcept nogil:
    return (bm[i >> 3] >> (i & 7)) & 1


def splitmix_next(uint64_t state):
    """One splitmix64 step: returns ``(new_state, output)``."""
    cdef uint64_t s = state
    cdef uint64_t out = _splitmix(&s)
    return s, out


include "_sketch_source.pxi"
include "_sketch_hll.pxi"
include "_sketch_countmin.pxi"
include "_sketch_bloom.pxi"
include "_sketch_kll.pxi"
include "_sketch_spacesaving.pxi"
include "_sketch_reservoir.pxi"
