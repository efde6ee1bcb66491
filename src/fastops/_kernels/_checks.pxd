# cython: language_level=3
"""Bounds checks the kernel modules share, through ``cimport``: whole blocks
checked with no branch per value, so a hot loop pays one test per block."""
from libc.stdint cimport int32_t, int64_t

ctypedef fused offsets_t:
    int32_t
    int64_t


cdef inline bint offsets_ok(const offsets_t* off, Py_ssize_t m, int64_t lo, int64_t hi) noexcept nogil:
    """``off[0 .. m]`` never decreases and lies inside ``[lo, hi]``."""
    cdef Py_ssize_t j
    cdef bint down = False
    for j in range(m):
        down |= off[j + 1] < off[j]
    return not down and off[0] >= lo and off[m] <= hi
