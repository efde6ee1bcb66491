# cython: language_level=3
"""Shared kernels: hashing and hash partitioning.

Loops over buffers only: every function takes contiguous (``const``) memoryviews
prepared by the Python layer (``fastops.core.hashing``, ``fastops.core.partitioning``),
runs one ``with nogil:`` block, and writes into preallocated outputs ("modifies
``out``"). A length, offset or id that would index outside an array is a
ValueError, not a read or write out of bounds.

One concern per include: ``_core_hashing.pxi`` (column hashes),
``_core_partition.pxi`` (partition ids and their histograms),
``_core_scatter.pxi`` (rows placed and copied by partition).
"""
from libc.stdint cimport INT32_MAX, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcpy, memset

from fastops._kernels._checks cimport (ERR_RANGE, OK, check_bits, check_out,
                                       offsets_ok)
from fastops._kernels._platform cimport (fastmod, fastmod_init, prefetch_w, stream_fence,
                                         stream_line)
from fastops._kernels._xxhash cimport (xxh64, xxh64_many4, xxh64_many8, xxh64_pair,
                                       xxh64_u8, xxh64_u16, xxh64_values32, xxh64_values64)

ctypedef fused offset_t:
    int32_t
    int64_t

ctypedef fused word_t:
    uint8_t
    uint16_t
    uint32_t
    uint64_t

ctypedef fused id_t:  # partition ids: one byte where P <= 256 (less to write and read back)
    int32_t
    uint8_t


# ---------------------------------------------------------------- checks shared by the concerns

cdef inline bint _ids_ok(const id_t* ids, Py_ssize_t m, Py_ssize_t P) noexcept nogil:
    """Every id of ``ids[0 .. m-1]`` is in ``[0, P)`` (no branch per id)."""
    cdef Py_ssize_t j
    cdef uint32_t top = <uint32_t>min(P, <Py_ssize_t>0xFFFFFFFF)
    cdef bint out = False
    for j in range(m):
        out |= <uint32_t>ids[j] >= top
    return not out


cdef int _raise_offsets(const offset_t[::1] offsets, Py_ssize_t n, Py_ssize_t nbytes,
                        str what) except -1:
    """ValueError for offsets that are not ``offsets_ok`` over ``n`` values."""
    cdef Py_ssize_t j
    if offsets[0] < 0 or offsets[n] > nbytes:
        raise ValueError(f"{what}: offsets from {offsets[0]} to {offsets[n]} outside the "
                         f"{nbytes} data bytes")
    for j in range(n):
        if offsets[j + 1] < offsets[j]:
            raise ValueError(f"{what}: offsets decrease at value {j}: {offsets[j]} then "
                             f"{offsets[j + 1]}")
    return 0


include "_core_hashing.pxi"
include "_core_partition.pxi"
include "_core_scatter.pxi"
