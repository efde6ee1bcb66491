# cython: language_level=3
"""Shared kernels: hashing and hash partitioning.

Loops over buffers only: every function takes contiguous (``const``) memoryviews
prepared by the Python layer (``fastops.hashing``, ``fastops.partitioning``),
runs one ``with nogil:`` block, and writes into preallocated outputs ("modifies
``out``"). Lengths are validated by the callers; kernels trust them.
"""
from libc.stdint cimport (int8_t, int32_t, int64_t, uint8_t, uint16_t,
                          uint32_t, uint64_t)
from libc.string cimport memcpy

from fastops._xxhash cimport (xxh64, xxh64_pair, xxh64_u8, xxh64_u16,
                              xxh64_u32, xxh64_u64)

ctypedef fused offset_t:
    int32_t
    int64_t

ctypedef fused word_t:
    uint8_t
    uint16_t
    uint32_t
    uint64_t

cdef uint64_t CANONICAL_NAN64 = 0x7FF8000000000000ULL
cdef uint32_t CANONICAL_NAN32 = 0x7FC00000U


# ---------------------------------------------------------------- hashing

def hash_u64(const uint64_t[::1] values, uint64_t seed, uint64_t[::1] out):
    """out[i] = XXH64(le8(values[i]), seed). Modifies ``out``."""
    cdef Py_ssize_t i, n = values.shape[0]
    with nogil:
        for i in range(n):
            out[i] = xxh64_u64(values[i], seed)


def hash_u32(const uint32_t[::1] values, uint64_t seed, uint64_t[::1] out):
    """out[i] = XXH64(le4(values[i]), seed). Modifies ``out``."""
    cdef Py_ssize_t i, n = values.shape[0]
    with nogil:
        for i in range(n):
            out[i] = xxh64_u32(values[i], seed)


def hash_u16(const uint16_t[::1] values, uint64_t seed, uint64_t[::1] out):
    """out[i] = XXH64(le2(values[i]), seed). Modifies ``out``."""
    cdef Py_ssize_t i, n = values.shape[0]
    with nogil:
        for i in range(n):
            out[i] = xxh64_u16(values[i], seed)


def hash_u8(const uint8_t[::1] values, uint64_t seed, uint64_t[::1] out):
    """out[i] = XXH64(values[i:i+1], seed). Modifies ``out``."""
    cdef Py_ssize_t i, n = values.shape[0]
    with nogil:
        for i in range(n):
            out[i] = xxh64_u8(values[i], seed)


def hash_f64(const uint64_t[::1] bits, uint64_t seed, uint64_t[::1] out):
    """Hash float64 bit patterns with -0.0 as 0.0 and every NaN alike."""
    cdef Py_ssize_t i, n = bits.shape[0]
    cdef uint64_t b
    with nogil:
        for i in range(n):
            b = bits[i]
            if (b << 1) == 0:                     # +0.0 or -0.0
                b = 0
            elif (b & 0x7FFFFFFFFFFFFFFFULL) > 0x7FF0000000000000ULL:
                b = CANONICAL_NAN64
            out[i] = xxh64_u64(b, seed)


def hash_f32(const uint32_t[::1] bits, uint64_t seed, uint64_t[::1] out):
    """Hash float32 bit patterns with -0.0 as 0.0 and every NaN alike."""
    cdef Py_ssize_t i, n = bits.shape[0]
    cdef uint32_t b
    with nogil:
        for i in range(n):
            b = bits[i]
            if (b << 1) == 0:
                b = 0
            elif (b & 0x7FFFFFFFU) > 0x7F800000U:
                b = CANONICAL_NAN32
            out[i] = xxh64_u32(b, seed)


def hash_bits(const uint8_t[::1] bitmap, int64_t offset, uint64_t seed,
              uint64_t[::1] out):
    """Hash bit-packed booleans (bit ``offset + i``) as one byte 0 or 1."""
    cdef Py_ssize_t i, n = out.shape[0]
    cdef int64_t j
    cdef uint64_t h0 = xxh64_u8(0, seed)
    cdef uint64_t h1 = xxh64_u8(1, seed)
    with nogil:
        for i in range(n):
            j = offset + i
            out[i] = h1 if (bitmap[j >> 3] >> (j & 7)) & 1 else h0


def hash_binary(const offset_t[::1] offsets, const uint8_t[::1] data,
                uint64_t seed, uint64_t[::1] out):
    """Hash variable-width values: value i is ``data[offsets[i]:offsets[i+1]]``.

    ``offsets`` has ``len(out) + 1`` entries (already shifted by the array's
    offset); ``data`` is the whole data buffer.
    """
    cdef Py_ssize_t i, n = out.shape[0]
    cdef const uint8_t* base
    if data.shape[0] == 0:
        with nogil:
            for i in range(n):
                out[i] = xxh64(NULL, 0, seed)
        return
    base = &data[0]
    with nogil:
        for i in range(n):
            out[i] = xxh64(base + offsets[i], <size_t>(offsets[i + 1] - offsets[i]), seed)


def hash_bytes(const uint8_t[::1] data, uint64_t seed) -> int:
    """XXH64 of one byte string."""
    if data.shape[0] == 0:
        return xxh64(NULL, 0, seed)
    return xxh64(&data[0], data.shape[0], seed)


def hash_set_nulls(const uint8_t[::1] validity, int64_t offset, uint64_t null_hash,
                   uint64_t[::1] out):
    """Set out[i] = null_hash wherever validity bit ``offset + i`` is 0."""
    cdef Py_ssize_t i, n = out.shape[0]
    cdef int64_t j
    with nogil:
        for i in range(n):
            j = offset + i
            if not (validity[j >> 3] >> (j & 7)) & 1:
                out[i] = null_hash


def hash_combine(uint64_t[::1] acc, const uint64_t[::1] h, uint64_t seed):
    """acc[i] = XXH64(le8(acc[i]) || le8(h[i]), seed): multi-column keys."""
    cdef Py_ssize_t i, n = acc.shape[0]
    with nogil:
        for i in range(n):
            acc[i] = xxh64_pair(acc[i], h[i], seed)


# ---------------------------------------------------------------- partition ids

def partition_modulo(const uint64_t[::1] hashes, uint32_t num_partitions,
                     int32_t[::1] out):
    """out[i] = hashes[i] % num_partitions."""
    cdef Py_ssize_t i, n = hashes.shape[0]
    cdef uint64_t p = num_partitions, mask = num_partitions - 1
    with nogil:
        if p & mask == 0:
            for i in range(n):
                out[i] = <int32_t>(hashes[i] & mask)
        else:
            for i in range(n):
                out[i] = <int32_t>(hashes[i] % p)


def partition_key_group(const uint64_t[::1] hashes, uint32_t num_partitions,
                        uint32_t max_parallelism, int32_t[::1] out):
    """Flink's owner of a key group: (h % max_parallelism) * P // max_parallelism."""
    cdef Py_ssize_t i, n = hashes.shape[0]
    cdef uint64_t m = max_parallelism, mask = max_parallelism - 1
    cdef uint64_t p = num_partitions
    with nogil:
        if m & mask == 0:
            for i in range(n):
                out[i] = <int32_t>(((hashes[i] & mask) * p) // m)
        else:
            for i in range(n):
                out[i] = <int32_t>(((hashes[i] % m) * p) // m)


def partition_ring(const uint64_t[::1] hashes, const uint64_t[::1] points,
                   const int32_t[::1] owners, const int64_t[::1] lut, int lut_shift,
                   int32_t[::1] out):
    """Consistent hashing: the owner of the first ring point >= hash (wrapping).

    ``points`` is sorted; ``lut[b]`` is the first index whose point has top bits
    ``>= b`` (``b = point >> lut_shift``), with ``lut[-1] == len(points)``.
    """
    cdef Py_ssize_t i, n = hashes.shape[0], m = points.shape[0]
    cdef int64_t lo, hi, mid
    cdef uint64_t h, b
    with nogil:
        for i in range(n):
            h = hashes[i]
            b = h >> lut_shift
            lo = lut[b]
            hi = lut[b + 1]
            while lo < hi:
                mid = (lo + hi) >> 1
                if points[mid] < h:
                    lo = mid + 1
                else:
                    hi = mid
            if lo == m:
                lo = 0
            out[i] = owners[lo]


# ---------------------------------------------------------------- scatter

def partition_plan(const int32_t[::1] pids, int64_t[::1] bounds, int64_t[::1] dest) -> int:
    """Counting sort of rows by partition id.

    Fills ``bounds`` (length P + 1: partition p owns output rows
    ``bounds[p]:bounds[p+1]``) and ``dest`` (output position of input row i;
    rows keep their order inside a partition). Returns 0, or -1 if an id is
    outside ``[0, P)``.
    """
    cdef Py_ssize_t i, n = pids.shape[0], P = bounds.shape[0] - 1
    cdef int32_t p
    cdef int64_t total = 0, c
    cdef int status = 0
    with nogil:
        for i in range(P + 1):
            bounds[i] = 0
        for i in range(n):
            p = pids[i]
            if p < 0 or p >= P:
                status = -1
                break
            bounds[p + 1] += 1
        if status == 0:
            for i in range(P):
                bounds[i + 1] += bounds[i]
            # dest doubles as a cursor table: reuse bounds' copy in-place
            for i in range(n):
                p = pids[i]
                dest[i] = bounds[p]
                bounds[p] += 1
            # bounds[p] now holds the end of p; shift back to starts
            for i in range(P, 0, -1):
                bounds[i] = bounds[i - 1]
            bounds[0] = 0
    return status


def scatter_words(const word_t[::1] src, const int64_t[::1] dest, word_t[::1] out):
    """out[dest[i]] = src[i] for fixed-width values. Modifies ``out``."""
    cdef Py_ssize_t i, n = dest.shape[0]
    with nogil:
        for i in range(n):
            out[dest[i]] = src[i]


def scatter_bits(const uint8_t[::1] src, int64_t src_offset, const int64_t[::1] dest,
                 uint8_t[::1] out):
    """Bit ``dest[i]`` of ``out`` = bit ``src_offset + i`` of ``src``.

    ``out`` must be zeroed. Modifies ``out``.
    """
    cdef Py_ssize_t i, n = dest.shape[0]
    cdef int64_t j, d
    with nogil:
        for i in range(n):
            j = src_offset + i
            if (src[j >> 3] >> (j & 7)) & 1:
                d = dest[i]
                out[d >> 3] |= <uint8_t>(1 << (d & 7))


def scatter_binary(const offset_t[::1] offsets, const uint8_t[::1] data,
                   const int64_t[::1] dest, offset_t[::1] out_offsets,
                   uint8_t[::1] out_data):
    """Scatter variable-width values: value i goes to output row ``dest[i]``.

    ``offsets`` has n + 1 entries; ``out_offsets`` (n + 1) is filled here;
    ``out_data`` must hold ``offsets[n] - offsets[0]`` bytes. Modifies both outputs.
    """
    cdef Py_ssize_t i, n = dest.shape[0]
    cdef offset_t length
    cdef const uint8_t* src_base
    cdef uint8_t* out_base
    with nogil:
        out_offsets[0] = 0
        for i in range(n):
            out_offsets[dest[i] + 1] = offsets[i + 1] - offsets[i]
        for i in range(n):
            out_offsets[i + 1] += out_offsets[i]
    if out_data.shape[0] == 0:
        return
    src_base = &data[0]
    out_base = &out_data[0]
    with nogil:
        for i in range(n):
            length = offsets[i + 1] - offsets[i]
            memcpy(out_base + out_offsets[dest[i]], src_base + offsets[i], <size_t>length)
