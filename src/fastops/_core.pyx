# cython: language_level=3
"""Shared kernels: hashing and hash partitioning.

Loops over buffers only: every function takes contiguous (``const``) memoryviews
prepared by the Python layer (``fastops.hashing``, ``fastops.partitioning``),
runs one ``with nogil:`` block, and writes into preallocated outputs ("modifies
``out``"). Lengths are validated by the callers; kernels trust them.
"""
from libc.stdint cimport (int8_t, int32_t, int64_t, uint8_t, uint16_t,
                          uint32_t, uint64_t)
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcpy, memset

from fastops._xxhash cimport (xxh64, xxh64_many4, xxh64_many8, xxh64_pair, xxh64_u8,
                              xxh64_u16, xxh64_values32, xxh64_values64)

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


# ---------------------------------------------------------------- hashing
#
# The 4- and 8-byte loops are the hottest code of the engine: they are
# ``_xxh64.h``'s (AVX2 where the CPU has it, else plain loops, bit for bit the
# same; the tests check them against the ``xxhash`` package).


def hash_u64(const uint64_t[::1] values, uint64_t seed, uint64_t[::1] out):
    """out[i] = XXH64(le8(values[i]), seed). Modifies ``out``."""
    cdef Py_ssize_t n = values.shape[0]
    if n == 0:
        return
    with nogil:
        xxh64_many8(&values[0], n, seed, &out[0], 0)


def hash_u32(const uint32_t[::1] values, uint64_t seed, uint64_t[::1] out):
    """out[i] = XXH64(le4(values[i]), seed). Modifies ``out``."""
    cdef Py_ssize_t n = values.shape[0]
    if n == 0:
        return
    with nogil:
        xxh64_many4(&values[0], n, seed, &out[0], 0)


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
    """Hash float64 bit patterns with -0.0 as 0.0 and every NaN alike. Modifies ``out``."""
    cdef Py_ssize_t n = bits.shape[0]
    if n == 0:
        return
    with nogil:
        xxh64_many8(&bits[0], n, seed, &out[0], 1)


def hash_f32(const uint32_t[::1] bits, uint64_t seed, uint64_t[::1] out):
    """Hash float32 bit patterns with -0.0 as 0.0 and every NaN alike. Modifies ``out``."""
    cdef Py_ssize_t n = bits.shape[0]
    if n == 0:
        return
    with nogil:
        xxh64_many4(&bits[0], n, seed, &out[0], 1)


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
    cdef Py_ssize_t n = out.shape[0]
    cdef const uint8_t* base = &data[0] if data.shape[0] > 0 else NULL
    if n == 0:
        return
    with nogil:
        if offset_t is int32_t:
            xxh64_values32(base, &offsets[0], n, seed, &out[0])
        else:
            xxh64_values64(base, &offsets[0], n, seed, &out[0])


def hash_bytes(const uint8_t[::1] data, uint64_t seed) -> int:
    """XXH64 of one byte string."""
    cdef uint64_t h
    cdef Py_ssize_t n = data.shape[0]
    if n == 0:
        return xxh64(NULL, 0, seed)
    with nogil:
        h = xxh64(&data[0], <size_t>n, seed)
    return h


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
#
# Every id kernel writes ``out[i]`` (in [0, P): int32, or uint8 where P <= 256
# and the ids stay inside ``partition``) and the histogram
# ``counts[p]`` (length P) in the same pass. Counting goes through four
# interleaved sub-histograms so that runs of one hot key do not serialise on a
# single counter.

cdef extern from *:
    """
    #if defined(__SIZEOF_INT128__)
    typedef unsigned __int128 fastops_u128;
    /* Exact a % d through a 128-bit reciprocal (direct remainder computation,
       Lemire, Kaser & Kurz 2019): M = floor((2^128 - 1) / d) + 1, then
       a % d = ((M * a mod 2^128) * d) >> 128. */
    static inline void fastops_fastmod_init(uint64_t d, uint64_t* hi, uint64_t* lo) {
        fastops_u128 m = ((fastops_u128)0 - 1) / d + 1;
        *hi = (uint64_t)(m >> 64);
        *lo = (uint64_t)m;
    }
    static inline uint64_t fastops_fastmod(uint64_t a, uint64_t hi, uint64_t lo, uint64_t d) {
        fastops_u128 m = ((fastops_u128)hi << 64) | lo;
        fastops_u128 low = m * a;
        fastops_u128 bottom = ((fastops_u128)(uint64_t)low * d) >> 64;
        fastops_u128 top = (low >> 64) * d;
        return (uint64_t)((bottom + top) >> 64);
    }
    #else
    static inline void fastops_fastmod_init(uint64_t d, uint64_t* hi, uint64_t* lo) {
        *hi = 0; *lo = d;
    }
    static inline uint64_t fastops_fastmod(uint64_t a, uint64_t hi, uint64_t lo, uint64_t d) {
        return a % d;
    }
    #endif
    """
    void fastmod_init "fastops_fastmod_init"(uint64_t d, uint64_t* hi,
                                             uint64_t* lo) noexcept nogil
    uint64_t fastmod "fastops_fastmod"(uint64_t a, uint64_t hi, uint64_t lo,
                                       uint64_t d) noexcept nogil

cdef extern from *:
    """
    #define fastops_prefetch_w(p) __builtin_prefetch((const void*)(p), 1, 3)
    #if defined(__SSE2__) || defined(_M_X64)
    #include <emmintrin.h>
    /* One 64-byte line to memory, past the caches (no read for ownership). */
    static inline void fastops_stream_line(void* dst, const void* src) {
        __m128i* d = (__m128i*)dst;
        const __m128i* s = (const __m128i*)src;
        _mm_stream_si128(d, _mm_load_si128(s));
        _mm_stream_si128(d + 1, _mm_load_si128(s + 1));
        _mm_stream_si128(d + 2, _mm_load_si128(s + 2));
        _mm_stream_si128(d + 3, _mm_load_si128(s + 3));
    }
    static inline void fastops_stream_fence(void) { _mm_sfence(); }
    #else
    static inline void fastops_stream_line(void* dst, const void* src) { memcpy(dst, src, 64); }
    static inline void fastops_stream_fence(void) {}
    #endif
    """
    void prefetch_w "fastops_prefetch_w"(const void* p) noexcept nogil
    void stream_line "fastops_stream_line"(void* dst, const void* src) noexcept nogil
    void stream_fence "fastops_stream_fence"() noexcept nogil

cdef enum:
    SUB_HIST_MAX = 65536   # sub-histograms only for P up to this
    OK = 0
    ERR_RANGE = -1


cdef inline int64_t* _hist_alloc(Py_ssize_t P, Py_ssize_t* stride) noexcept nogil:
    """Four interleaved zeroed histograms of P counters (one if P is huge)."""
    stride[0] = P if P <= SUB_HIST_MAX else 0
    return <int64_t*>calloc(<size_t>(4 * stride[0] + P), sizeof(int64_t))


cdef inline void _hist_finish(const int64_t* sub, Py_ssize_t P, Py_ssize_t stride,
                              int64_t* counts) noexcept nogil:
    cdef Py_ssize_t p
    if stride == 0:
        for p in range(P):
            counts[p] = sub[p]
    else:
        for p in range(P):
            counts[p] = sub[p] + sub[stride + p] + sub[2 * stride + p] + sub[3 * stride + p]


cdef inline uint64_t _placed(const uint64_t* h, id_t* out, Py_ssize_t i, uint64_t mask) noexcept nogil:
    """out[i] = h[i] & mask (a power-of-two modulo); returns a one in byte
    ``out[i]``, the row's count for ``_ids_counted``'s byte counters."""
    cdef int32_t p = <int32_t>(h[i] & mask)
    out[i] = <id_t>p
    return <uint64_t>1 << (8 * p)


cdef inline void _ids_counted(const uint64_t* h, Py_ssize_t n, uint64_t d, uint64_t hi,
                              uint64_t lo, const int32_t* own, id_t* out, int64_t* sub,
                              Py_ssize_t stride) noexcept nogil:
    """out[i] = h[i] % d, or own[h[i] % d] when ``own`` is set, counted into the
    interleaved histograms ``sub`` (``_hist_alloc``) unless ``sub`` is NULL."""
    cdef Py_ssize_t i, j, m
    cdef uint64_t mask = d - 1
    cdef int32_t p
    cdef uint64_t c0, c1, c2, c3
    if d & mask == 0 and d <= 8 and own == NULL and sub != NULL:
        # up to 8 partitions: counts in the bytes of four registers (at most 255
        # rows each before they are added up), so no counter goes through memory
        i = 0
        while i < n:
            m = min(n - i, <Py_ssize_t>1008)  # 252 rows per register, 3 more in the tail
            c0 = c1 = c2 = c3 = 0
            j = 0
            while j + 4 <= m:
                c0 += _placed(h, out, i + j, mask)
                c1 += _placed(h, out, i + j + 1, mask)
                c2 += _placed(h, out, i + j + 2, mask)
                c3 += _placed(h, out, i + j + 3, mask)
                j += 4
            while j < m:
                c0 += _placed(h, out, i + j, mask)
                j += 1
            for p in range(<int32_t>d):
                sub[p] += <int64_t>(((c0 >> (8 * p)) & 255) + ((c1 >> (8 * p)) & 255)
                                    + ((c2 >> (8 * p)) & 255) + ((c3 >> (8 * p)) & 255))
            i += m
    elif d & mask == 0:
        for i in range(n):
            p = <int32_t>(h[i] & mask)
            if own != NULL:
                p = own[p]
            out[i] = <id_t>p
            if sub != NULL:
                sub[(i & 3) * stride + p] += 1
    else:
        for i in range(n):
            p = <int32_t>fastmod(h[i], hi, lo, d)
            if own != NULL:
                p = own[p]
            out[i] = <id_t>p
            if sub != NULL:
                sub[(i & 3) * stride + p] += 1


cdef inline int64_t* _hist_or_none(Py_ssize_t P, Py_ssize_t* stride) except? NULL:
    """Histograms for ``P`` counts (``_hist_alloc``), or NULL for none (P = 0)."""
    cdef int64_t* sub
    if P == 0:
        return NULL
    sub = _hist_alloc(P, stride)
    if sub == NULL:
        raise MemoryError(f"histogram of {P} partitions")
    return sub


cdef inline void _hist_done(int64_t* sub, Py_ssize_t P, Py_ssize_t stride,
                            int64_t* counts) noexcept nogil:
    """Sum ``sub`` into ``counts`` and free it (nothing for NULL)."""
    if sub != NULL:
        _hist_finish(sub, P, stride, counts)
        free(sub)


def fastmod_u64(const uint64_t[::1] values, uint64_t d, uint64_t[::1] out):
    """out[i] = values[i] % d through the kernels' reciprocal (``d >= 1``). For tests."""
    cdef Py_ssize_t i, n = values.shape[0]
    cdef uint64_t hi, lo
    fastmod_init(d, &hi, &lo)
    with nogil:
        for i in range(n):
            out[i] = fastmod(values[i], hi, lo, d)


def partition_modulo(const uint64_t[::1] hashes, uint64_t num_partitions,
                     id_t[::1] out, int64_t[::1] counts) -> int:
    """out[i] = hashes[i] % num_partitions; counts[p] = rows with id p.

    ``counts`` has ``num_partitions`` entries, or none for no histogram.
    Modifies ``out`` and ``counts``.
    Returns 0; raises MemoryError if memory ran out.
    """
    cdef Py_ssize_t i, n = hashes.shape[0], P = <Py_ssize_t>num_partitions, stride
    cdef uint64_t d = num_partitions, mask = num_partitions - 1, hi, lo
    cdef int64_t* sub
    fastmod_init(d, &hi, &lo)
    sub = _hist_or_none(counts.shape[0], &stride)
    with nogil:
        if n > 0:
            _ids_counted(&hashes[0], n, d, hi, lo, NULL, &out[0], sub, stride)
        _hist_done(sub, P, stride, &counts[0] if sub != NULL else NULL)
    return OK


def partition_lookup(const uint64_t[::1] hashes, const int32_t[::1] owner_of,
                     id_t[::1] out, int64_t[::1] counts) -> int:
    """out[i] = owner_of[hashes[i] % len(owner_of)]: key groups (Flink's scheme).

    ``owner_of[g]`` is the owner of key group ``g``, in ``[0, P)``; ``counts``
    (length P, or empty for no histogram) gets the rows per owner.
    Modifies ``out`` and ``counts``. Returns 0; raises MemoryError if memory ran out.
    """
    cdef Py_ssize_t i, n = hashes.shape[0], P = counts.shape[0], stride
    cdef uint64_t m = <uint64_t>owner_of.shape[0], mask = m - 1, hi, lo
    cdef int64_t* sub
    fastmod_init(m, &hi, &lo)
    sub = _hist_or_none(P, &stride)
    with nogil:
        if n > 0:
            _ids_counted(&hashes[0], n, m, hi, lo, &owner_of[0], &out[0], sub, stride)
        _hist_done(sub, P, stride, &counts[0] if sub != NULL else NULL)
    return OK


cdef extern from "_ids.h" nogil:
    # out[i] = XXH64(v[i]) & (P - 1), counted into interleaved histograms, in
    # AVX-512 registers; 0 (nothing done) without AVX-512
    bint ids_pow2_u64_u8 "fastops_ids_pow2_u64_u8"(
        const uint64_t* v, int64_t n, uint64_t seed, int canon, uint64_t P, uint8_t* out,
        int64_t* sub, int64_t stride)
    bint ids_pow2_u64_i32 "fastops_ids_pow2_u64_i32"(
        const uint64_t* v, int64_t n, uint64_t seed, int canon, uint64_t P, int32_t* out,
        int64_t* sub, int64_t stride)
    bint ids_pow2_u32_u8 "fastops_ids_pow2_u32_u8"(
        const uint32_t* v, int64_t n, uint64_t seed, int canon, uint64_t P, uint8_t* out,
        int64_t* sub, int64_t stride)
    bint ids_pow2_u32_i32 "fastops_ids_pow2_u32_i32"(
        const uint32_t* v, int64_t n, uint64_t seed, int canon, uint64_t P, int32_t* out,
        int64_t* sub, int64_t stride)


ctypedef fused key_t:
    uint32_t
    uint64_t


def partition_fixed(const key_t[::1] values, bint is_float, uint64_t seed,
                    uint64_t num_partitions, const int32_t[::1] owner_of,
                    id_t[::1] out, int64_t[::1] counts) -> int:
    """Partition ids straight from a 4- or 8-byte key column without nulls:
    ``hash64`` (``is_float``: of float bits) in blocks of 1024 rows kept in L1,
    then ``partition_modulo`` (``owner_of`` empty) or ``partition_lookup`` on
    each block, so that no array of hashes is written and read back.

    ``counts`` has ``num_partitions`` entries, or none for no histogram.
    Modifies ``out`` and ``counts``. Returns 0; raises MemoryError if memory ran out.
    """
    cdef Py_ssize_t i, m, n = values.shape[0], P = <Py_ssize_t>num_partitions, stride
    cdef uint64_t d, hi, lo
    cdef uint64_t hbuf[1024]
    cdef int64_t* sub
    cdef bint lookup = owner_of.shape[0] > 0
    cdef const int32_t* own = &owner_of[0] if lookup else NULL
    cdef bint vector = False
    d = <uint64_t>owner_of.shape[0] if lookup else num_partitions
    fastmod_init(d, &hi, &lo)
    sub = _hist_or_none(counts.shape[0], &stride)
    with nogil:
        if not lookup and d & (d - 1) == 0 and n > 0:  # AVX-512: hash, mask and count in registers
            if key_t is uint64_t and id_t is uint8_t:
                vector = ids_pow2_u64_u8(&values[0], n, seed, is_float, d, &out[0], sub, stride)
            elif key_t is uint64_t:
                vector = ids_pow2_u64_i32(&values[0], n, seed, is_float, d, &out[0], sub, stride)
            elif id_t is uint8_t:
                vector = ids_pow2_u32_u8(&values[0], n, seed, is_float, d, &out[0], sub, stride)
            else:
                vector = ids_pow2_u32_i32(&values[0], n, seed, is_float, d, &out[0], sub, stride)
        i = n if vector else 0
        while i < n:
            m = min(<Py_ssize_t>1024, n - i)
            if key_t is uint64_t:
                xxh64_many8(&values[i], m, seed, hbuf, is_float)
            else:
                xxh64_many4(&values[i], m, seed, hbuf, is_float)
            _ids_counted(hbuf, m, d, hi, lo, own, &out[i], sub, stride)
            i += m
        _hist_done(sub, P, stride, &counts[0] if sub != NULL else NULL)
    return OK

cdef inline int32_t _ring_owner(uint64_t h, const uint64_t* points, Py_ssize_t m,
                                const int32_t* owners, const int64_t* lut,
                                int lut_shift) noexcept nogil:
    """Owner of the first point >= h (wrapping), binary search inside h's LUT bucket."""
    cdef uint64_t b = h >> lut_shift
    cdef int64_t lo = lut[b], hi = lut[b + 1], mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if points[mid] < h:
            lo = mid + 1
        else:
            hi = mid
    if lo == m:
        lo = 0
    return owners[lo]


def partition_ring(const uint64_t[::1] hashes, const uint64_t[::1] points,
                   const int32_t[::1] owners, const int64_t[::1] lut, int lut_shift,
                   id_t[::1] out, int64_t[::1] counts) -> int:
    """Consistent hashing: the owner of the first ring point >= hash (wrapping).

    ``points`` is sorted ascending (non-empty); ``lut[b]`` is the first index
    whose point has top bits ``>= b`` (``b = point >> lut_shift``), and
    ``lut[-1] == len(points)``. ``counts`` (length P, or empty for no
    histogram) gets the rows per owner. Modifies ``out`` and ``counts``.
    Returns 0; raises MemoryError if memory ran out.
    """
    cdef Py_ssize_t i, n = hashes.shape[0], m = points.shape[0]
    cdef Py_ssize_t P = counts.shape[0], stride
    cdef int32_t p
    cdef int64_t* sub
    cdef const uint64_t* pts = &points[0]
    cdef const int32_t* own = &owners[0]
    cdef const int64_t* lt = &lut[0]
    if P == 0:
        with nogil:
            for i in range(n):
                out[i] = <id_t>_ring_owner(hashes[i], pts, m, own, lt, lut_shift)
        return OK
    sub = _hist_alloc(P, &stride)
    if sub == NULL:
        raise MemoryError(f"histogram of {P} partitions")
    with nogil:
        for i in range(n):
            p = _ring_owner(hashes[i], pts, m, own, lt, lut_shift)
            out[i] = <id_t>p
            sub[(i & 3) * stride + p] += 1
        _hist_finish(sub, P, stride, &counts[0])
        free(sub)
    return OK


def partition_count(const int32_t[::1] ids, int64_t[::1] counts) -> int:
    """counts[p] = number of ids equal to p. Returns 0, or -1 if an id is
    outside ``[0, len(counts))``. Modifies ``counts``."""
    cdef Py_ssize_t i, n = ids.shape[0], P = counts.shape[0], stride
    cdef int32_t p
    cdef int64_t* sub
    cdef int status = OK
    sub = _hist_alloc(P, &stride)
    if sub == NULL:
        raise MemoryError(f"histogram of {P} partitions")
    with nogil:
        for i in range(n):
            p = ids[i]
            if p < 0 or p >= P:
                status = ERR_RANGE
                break
            sub[(i & 3) * stride + p] += 1
        _hist_finish(sub, P, stride, &counts[0])
        free(sub)
    return status


# ---------------------------------------------------------------- scatter

ctypedef fused dest_t:
    int32_t
    int64_t


def partition_dest(const id_t[::1] ids, const int64_t[::1] counts,
                   dest_t[::1] dest, int64_t[::1] starts, bint order=False) -> int:
    """Counting-sort placement of rows by partition id (ids already counted).

    Fills ``starts`` (length P + 1: partition p owns output rows
    ``starts[p]:starts[p+1]``) and ``dest`` (output row of input row i; rows keep
    their order inside a partition), or with ``order`` its inverse (the input
    row at each output row, for a take). ``ids`` must be in ``[0, P)`` and
    ``counts`` their histogram. Returns 0; raises MemoryError if memory ran out.
    """
    cdef Py_ssize_t i, n = ids.shape[0], P = counts.shape[0]
    cdef int64_t* cursor
    cursor = <int64_t*>malloc(<size_t>(P if P > 0 else 1) * sizeof(int64_t))
    if cursor == NULL:
        raise MemoryError(f"cursors of {P} partitions")
    with nogil:
        starts[0] = 0
        for i in range(P):
            starts[i + 1] = starts[i] + counts[i]
        memcpy(cursor, &starts[0], <size_t>P * sizeof(int64_t))
        if order:
            for i in range(n):
                dest[cursor[ids[i]]] = <dest_t>i
                cursor[ids[i]] += 1
        else:
            for i in range(n):
                dest[i] = <dest_t>cursor[ids[i]]
                cursor[ids[i]] += 1
        free(cursor)
    return OK


cdef Py_ssize_t _STREAM_MIN_BYTES = 1 << 22
STREAM_MIN_BYTES = _STREAM_MIN_BYTES
"""Scatters that write at least this many bytes go through line buffers and
streaming stores (``_scatter_streamed``); smaller outputs would fit in the
caches, where the next operator reads them, so they are stored directly."""


cdef int _check_scatter(Py_ssize_t n, Py_ssize_t ndest, Py_ssize_t nsrc, Py_ssize_t nout, Py_ssize_t nstarts,
                        str what) except -1:
    if (ndest != n and ndest != 0) or nsrc < n or nout < n or nstarts < 1:
        raise ValueError(f"{what}: {n} ids, {ndest} output rows placed, columns of {nsrc} / {nout} rows, "
                         f"{nstarts} partition starts")
    return 0


cdef bint _streamable(const void* a, const void* b, Py_ssize_t nbytes) noexcept nogil:
    return nbytes >= _STREAM_MIN_BYTES and (<size_t>a) % 64 == 0 and (b == NULL or (<size_t>b) % 64 == 0)


cdef inline void _put_line(word_t* out_a, word_t* out_b, const word_t* buf, Py_ssize_t per, int64_t line,
                           int64_t lo, int64_t hi) noexcept nogil:
    """Words ``[lo, hi)`` of the buffered line at ``line`` to each output
    (``out_b`` NULL: one; its buffer follows the first's): a whole line in
    one streaming store, part of one value by value."""
    cdef int c
    cdef word_t* out
    for c in range(1 if out_b == NULL else 2):
        out = out_a if c == 0 else out_b
        if lo == 0 and hi == per:
            stream_line(out + line, buf + c * per)
        else:
            memcpy(out + line + lo, buf + c * per + lo, <size_t>(hi - lo) * sizeof(word_t))


cdef inline int64_t _next_row(const id_t* ids, const dest_t* dest, int64_t* cursor, Py_ssize_t i) noexcept nogil:
    """Output row of input row i: ``dest[i]``, or with ``dest`` NULL the next
    free row of its partition (``cursor``, advanced)."""
    cdef int64_t d
    if dest != NULL:
        return dest[i]
    d = cursor[ids[i]]
    cursor[ids[i]] = d + 1
    return d


cdef int _scatter_streamed(const word_t* src_a, const word_t* src_b, const id_t* ids,
                           const dest_t* dest, Py_ssize_t n, const int64_t* starts, Py_ssize_t P,
                           int64_t* cursor, word_t* out_a, word_t* out_b) noexcept nogil:
    """``out[dest[i]] = src[i]`` for one column (``src_b`` NULL) or two,
    through a 64-byte line buffer per partition and column: a partition's
    rows are consecutive, so each full line goes out in one streaming store
    instead of every value pulling its line into the cache (the outputs are
    64-byte aligned). The first line of a partition may start in the previous
    partition's rows, and its last may end in the next one's: those are
    written value by value. ``dest`` NULL: rows are placed by the partitions'
    ``cursor`` (from ``starts``). Returns -1 if the buffers could not be had."""
    cdef Py_ssize_t i, per = 64 // sizeof(word_t), cols = 1 if src_b == NULL else 2
    cdef int64_t d, s, line, end, p
    cdef char* raw = <char*>malloc(<size_t>(P if P > 0 else 1) * 64 * cols + 64)
    cdef word_t* buf = <word_t*>(raw + (64 - (<size_t>raw) % 64) % 64)  # aligned for the line loads
    cdef word_t* ba
    if raw == NULL:
        return -1
    for i in range(n):
        p = ids[i]
        d = _next_row(ids, dest, cursor, i)
        s = d & (per - 1)
        ba = buf + p * per * cols
        ba[s] = src_a[i]
        if cols == 2:
            ba[per + s] = src_b[i]
        if s == per - 1:  # a line is full: from the partition's first row on
            line = d - s
            _put_line(out_a, out_b, ba, per, line, max(starts[p] - line, 0), per)
    for p in range(P):  # the lines not filled: up to the partition's end
        end = starts[p + 1]
        if end == starts[p] or (end & (per - 1)) == 0:
            continue
        line = end & ~(per - 1)
        _put_line(out_a, out_b, buf + p * per * cols, per, line, max(starts[p] - line, 0), end - line)
    stream_fence()
    free(raw)
    return 0


cdef int _scatter_any(const word_t* src_a, const word_t* src_b, const id_t* ids,
                      const dest_t* dest, Py_ssize_t n, const int64_t* starts, Py_ssize_t P,
                      word_t* out_a, word_t* out_b) noexcept nogil:
    """``out[dest[i]] = src[i]`` for one column (``src_b`` NULL) or two; with
    ``dest`` NULL, rows go to their partition's next free row (the placement
    ``partition_dest`` would give, without its array written and read back).
    Large aligned outputs are streamed, others stored directly. Returns -1 if
    memory ran out."""
    cdef Py_ssize_t i, ahead = 256 // sizeof(word_t)
    cdef int64_t d
    cdef int status = 0
    cdef int64_t* cursor = NULL
    if dest == NULL:
        cursor = <int64_t*>malloc(<size_t>(P if P > 0 else 1) * sizeof(int64_t))
        if cursor == NULL:
            return -1
        memcpy(cursor, starts, <size_t>P * sizeof(int64_t))
    if _streamable(out_a, out_b, n * sizeof(word_t) * (1 if src_b == NULL else 2)):
        status = _scatter_streamed(src_a, src_b, ids, dest, n, starts, P, cursor, out_a, out_b)
    else:
        for i in range(n):
            d = _next_row(ids, dest, cursor, i)
            out_a[d] = src_a[i]
            # each partition is a write stream: fetch its lines ahead of time
            prefetch_w(out_a + d + ahead)
            if src_b != NULL:
                out_b[d] = src_b[i]
                prefetch_w(out_b + d + ahead)
    free(cursor)
    return status


def scatter_words(const word_t[::1] src, const id_t[::1] ids, const int64_t[::1] starts,
                  const dest_t[::1] dest, word_t[::1] out):
    """out[dest[i]] = src[i] for fixed-width values, ``dest`` from
    ``partition_dest`` of ``ids`` (partition p owns output rows
    ``starts[p]:starts[p+1]``); an empty ``dest``: the same placement, made
    here from ``ids``. Modifies ``out``."""
    cdef Py_ssize_t n = ids.shape[0], P = starts.shape[0] - 1
    cdef int status = 0
    _check_scatter(n, dest.shape[0], src.shape[0], out.shape[0], starts.shape[0], "scatter_words")
    if n == 0:
        return
    with nogil:
        status = _scatter_any(&src[0], <const word_t*>NULL, &ids[0],
                              &dest[0] if dest.shape[0] > 0 else NULL, n, &starts[0], P,
                              &out[0], <word_t*>NULL)
    if status < 0:
        raise MemoryError(f"line buffers of {P} partitions")


def scatter_words2(const word_t[::1] src_a, const word_t[::1] src_b, const id_t[::1] ids,
                   const int64_t[::1] starts, const dest_t[::1] dest, word_t[::1] out_a, word_t[::1] out_b):
    """``scatter_words`` of two columns of one width in one pass: the row
    placement is read or made once for both. Modifies ``out_a`` and ``out_b``."""
    cdef Py_ssize_t n = ids.shape[0], P = starts.shape[0] - 1
    cdef int status = 0
    _check_scatter(n, dest.shape[0], min(src_a.shape[0], src_b.shape[0]),
                   min(out_a.shape[0], out_b.shape[0]), starts.shape[0], "scatter_words2")
    if n == 0:
        return
    with nogil:
        status = _scatter_any(&src_a[0], &src_b[0], &ids[0], &dest[0] if dest.shape[0] > 0 else NULL,
                              n, &starts[0], P, &out_a[0], &out_b[0])
    if status < 0:
        raise MemoryError(f"line buffers of {P} partitions")


def scatter_bits(const uint8_t[::1] src, int64_t src_offset, const dest_t[::1] dest,
                 uint8_t[::1] out):
    """Bit ``dest[i]`` of ``out`` = bit ``src_offset + i`` of ``src``.

    ``out`` holds at least ``ceil(n / 8)`` bytes and is zeroed here. Modifies ``out``.
    """
    cdef Py_ssize_t i, n = dest.shape[0]
    cdef int64_t j, d
    with nogil:
        if out.shape[0] > 0:
            memset(&out[0], 0, <size_t>out.shape[0])
        for i in range(n):
            j = src_offset + i
            if (src[j >> 3] >> (j & 7)) & 1:
                d = dest[i]
                out[d >> 3] |= <uint8_t>(1 << (d & 7))


cdef inline void _copy_short(uint8_t* dst, const uint8_t* src, size_t length,
                             size_t dst_room, size_t src_room) noexcept nogil:
    """Copy ``length`` bytes; values up to 32 bytes as one fixed 32-byte block
    (no branch on the length) when both sides have room for it."""
    if length <= 32 and dst_room >= 32 and src_room >= 32:
        memcpy(dst, src, 32)
    else:
        memcpy(dst, src, length)


def scatter_binary(const offset_t[::1] offsets, const uint8_t[::1] data,
                   const id_t[::1] ids, const int64_t[::1] starts,
                   offset_t[::1] out_offsets, uint8_t[::1] out_data, dest_t[::1] dest):
    """Scatter variable-width values by partition id, keeping row order.

    Value i (``data[offsets[i]:offsets[i+1]]``; ``offsets`` has n + 1 entries,
    already shifted by the array's offset) goes to the next free row of
    partition ``ids[i]``; partition p owns output rows ``starts[p]:starts[p+1]``
    (from ``partition_dest``). Two passes: bytes per partition, then place.
    ``out_offsets`` (n + 1) is filled here, starting at 0; ``out_data`` holds
    ``offsets[n] - offsets[0]`` bytes. Short values are copied as whole 32-byte
    blocks where the block stays inside the source buffer and inside the
    value's own partition (the spill is overwritten by the partition's next
    values, which are written later). If ``dest`` has n entries it also gets
    every row's output row, as from ``partition_dest`` (which this pass then
    replaces). Modifies the outputs.
    """
    cdef Py_ssize_t i, n = ids.shape[0], P = starts.shape[0] - 1, stride
    cdef int32_t p
    cdef int64_t o, length, r, b, src_len = data.shape[0], total = 0
    cdef int64_t* sub
    cdef int64_t* work
    cdef int64_t* cur
    cdef int64_t* c
    cdef bint with_dest = dest.shape[0] == ids.shape[0]
    cdef const uint8_t* src_base
    cdef uint8_t* out_base
    if n == 0:
        out_offsets[0] = 0
        return
    sub = _hist_alloc(P, &stride)
    work = <int64_t*>malloc(<size_t>(5 * P) * sizeof(int64_t))
    if sub == NULL or work == NULL:
        free(sub)
        free(work)
        raise MemoryError(f"byte cursors of {P} partitions")
    cur = work + P
    with nogil:
        for i in range(n):
            sub[(i & 3) * stride + ids[i]] += offsets[i + 1] - offsets[i]
        _hist_finish(sub, P, stride, work)            # bytes per partition
        # cursors of partition p side by side (one cache line for all three):
        # next row, next byte, end of its bytes
        for i in range(P):
            cur[4 * i] = starts[i]
            cur[4 * i + 1] = total
            total += work[i]
            cur[4 * i + 2] = total
        out_offsets[n] = <offset_t>total
        src_base = &data[0] if src_len > 0 else NULL
        out_base = &out_data[0] if total > 0 else NULL
        for i in range(n):
            c = cur + 4 * ids[i]
            o = offsets[i]
            length = offsets[i + 1] - o
            r = c[0]
            c[0] = r + 1
            if with_dest:
                dest[i] = <dest_t>r
            b = c[1]
            c[1] = b + length
            out_offsets[r] = <offset_t>b
            # each partition is a write stream: fetch its lines ahead of time
            prefetch_w(&out_offsets[0] + r + 64)
            prefetch_w(out_base + b + 384)
            if length > 0:
                _copy_short(out_base + b, src_base + o, <size_t>length,
                            <size_t>(c[2] - b), <size_t>(src_len - o))
    free(sub)
    free(work)
