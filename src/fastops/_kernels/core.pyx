# cython: language_level=3
"""Shared kernels: hashing and hash partitioning.

Loops over buffers only: every function takes contiguous (``const``) memoryviews
prepared by the Python layer (``fastops.core.hashing``, ``fastops.core.partitioning``),
runs one ``with nogil:`` block, and writes into preallocated outputs ("modifies
``out``"). A length, offset or id that would index outside an array is a
ValueError, not a read or write out of bounds.
"""
from libc.stdint cimport (INT32_MAX, int8_t, int32_t, int64_t, uint8_t, uint16_t,
                          uint32_t, uint64_t)
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcpy, memset

from fastops._kernels._bounds cimport offsets_ok
from fastops._kernels._xxhash cimport (xxh64, xxh64_many4, xxh64_many8, xxh64_pair, xxh64_u8,
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


# ---------------------------------------------------------------- checks

cdef int _check_out(Py_ssize_t have, Py_ssize_t need, str what) except -1:
    if have < need:
        raise ValueError(f"{what}: out has {have} rows for {need} values")
    return 0


cdef int _check_bits(Py_ssize_t nbytes, int64_t offset, Py_ssize_t n, str what) except -1:
    """Bits ``offset .. offset + n - 1`` lie inside ``nbytes`` bytes."""
    if n > 0 and (offset < 0 or offset > nbytes * 8 - n):
        raise ValueError(f"{what}: {n} bits from bit {offset} on outside a bitmap of "
                         f"{nbytes} bytes")
    return 0


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


# ---------------------------------------------------------------- hashing
#
# The 4- and 8-byte loops are the hottest code of the engine: they are
# ``_xxh64.h``'s (AVX2 where the CPU has it, else plain loops, bit for bit the
# same; the tests check them against the ``xxhash`` package).


def hash_u64(const uint64_t[::1] values, uint64_t seed, uint64_t[::1] out):
    """out[i] = XXH64(le8(values[i]), seed). Modifies ``out``."""
    cdef Py_ssize_t n = values.shape[0]
    _check_out(out.shape[0], n, "hash_u64")
    if n == 0:
        return
    with nogil:
        xxh64_many8(&values[0], n, seed, &out[0], 0)


def hash_u32(const uint32_t[::1] values, uint64_t seed, uint64_t[::1] out):
    """out[i] = XXH64(le4(values[i]), seed). Modifies ``out``."""
    cdef Py_ssize_t n = values.shape[0]
    _check_out(out.shape[0], n, "hash_u32")
    if n == 0:
        return
    with nogil:
        xxh64_many4(&values[0], n, seed, &out[0], 0)


def hash_u16(const uint16_t[::1] values, uint64_t seed, uint64_t[::1] out):
    """out[i] = XXH64(le2(values[i]), seed). Modifies ``out``."""
    cdef Py_ssize_t i, n = values.shape[0]
    _check_out(out.shape[0], n, "hash_u16")
    with nogil:
        for i in range(n):
            out[i] = xxh64_u16(values[i], seed)


def hash_u8(const uint8_t[::1] values, uint64_t seed, uint64_t[::1] out):
    """out[i] = XXH64(values[i:i+1], seed). Modifies ``out``."""
    cdef Py_ssize_t i, n = values.shape[0]
    _check_out(out.shape[0], n, "hash_u8")
    with nogil:
        for i in range(n):
            out[i] = xxh64_u8(values[i], seed)


def hash_f64(const uint64_t[::1] bits, uint64_t seed, uint64_t[::1] out):
    """Hash float64 bit patterns with -0.0 as 0.0 and every NaN alike. Modifies ``out``."""
    cdef Py_ssize_t n = bits.shape[0]
    _check_out(out.shape[0], n, "hash_f64")
    if n == 0:
        return
    with nogil:
        xxh64_many8(&bits[0], n, seed, &out[0], 1)


def hash_f32(const uint32_t[::1] bits, uint64_t seed, uint64_t[::1] out):
    """Hash float32 bit patterns with -0.0 as 0.0 and every NaN alike. Modifies ``out``."""
    cdef Py_ssize_t n = bits.shape[0]
    _check_out(out.shape[0], n, "hash_f32")
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
    _check_bits(bitmap.shape[0], offset, n, "hash_bits")
    with nogil:
        for i in range(n):
            j = offset + i
            out[i] = h1 if (bitmap[j >> 3] >> (j & 7)) & 1 else h0


def hash_binary(const offset_t[::1] offsets, const uint8_t[::1] data,
                uint64_t seed, uint64_t[::1] out):
    """Hash variable-width values: value i is ``data[offsets[i]:offsets[i+1]]``.

    ``offsets`` has ``len(out) + 1`` entries (already shifted by the array's
    offset); ``data`` is the whole data buffer. Offsets that decrease or leave
    ``data`` are a ValueError, raised when the blocks of 1024 values before
    them are hashed.
    """
    cdef Py_ssize_t i, m, n = out.shape[0], bad = -1
    cdef Py_ssize_t nbytes = data.shape[0]
    cdef const uint8_t* base = &data[0] if nbytes > 0 else NULL
    if n == 0:
        return
    if offsets.shape[0] < n + 1:
        raise ValueError(f"hash_binary: {offsets.shape[0]} offsets for {n} values")
    with nogil:
        for i in range(0, n, 1024):  # each block's offsets checked while in L1
            m = min(n - i, <Py_ssize_t>1024)
            if not offsets_ok(&offsets[i], m, 0, nbytes):
                bad = i
                break
            if offset_t is int32_t:
                xxh64_values32(base, &offsets[i], m, seed, &out[i])
            else:
                xxh64_values64(base, &offsets[i], m, seed, &out[i])
    if bad >= 0:
        _raise_offsets(offsets, n, nbytes, "hash_binary")


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
    _check_bits(validity.shape[0], offset, n, "hash_set_nulls")
    with nogil:
        for i in range(n):
            j = offset + i
            if not (validity[j >> 3] >> (j & 7)) & 1:
                out[i] = null_hash


def hash_combine(uint64_t[::1] acc, const uint64_t[::1] h, uint64_t seed):
    """acc[i] = XXH64(le8(acc[i]) || le8(h[i]), seed): multi-column keys."""
    cdef Py_ssize_t i, n = acc.shape[0]
    if h.shape[0] < n:
        raise ValueError(f"hash_combine: {h.shape[0]} hashes for {n} rows")
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


cdef inline Py_ssize_t _ids_counted(const uint64_t* h, Py_ssize_t n, uint64_t d, uint64_t hi,
                                    uint64_t lo, const int32_t* own, id_t* out, int64_t* sub,
                                    Py_ssize_t stride, Py_ssize_t P, bint check) noexcept nogil:
    """out[i] = h[i] % d, or own[h[i] % d] when ``own`` is set, counted into the
    interleaved histograms ``sub`` (``_hist_alloc``, ``P`` counters) unless
    ``sub`` is NULL. With ``check`` (else ``own`` was checked whole), returns
    the first row whose counted owner is outside ``[0, P)`` (the rows before
    it done); else -1."""
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
                if check and sub != NULL and <uint32_t>p >= <size_t>P:
                    return i
            out[i] = <id_t>p
            if sub != NULL:
                sub[(i & 3) * stride + p] += 1
    else:
        for i in range(n):
            p = <int32_t>fastmod(h[i], hi, lo, d)
            if own != NULL:
                p = own[p]
                if check and sub != NULL and <uint32_t>p >= <size_t>P:
                    return i
            out[i] = <id_t>p
            if sub != NULL:
                sub[(i & 3) * stride + p] += 1
    return -1


cdef int _check_owners(const int32_t[::1] owner_of, Py_ssize_t P, str what) except -1:
    """Every key group's owner is in ``[0, P)``."""
    cdef Py_ssize_t g
    cdef bint ok
    with nogil:
        ok = _ids_ok(&owner_of[0], owner_of.shape[0], P)
    if not ok:
        for g in range(owner_of.shape[0]):
            if not 0 <= owner_of[g] < P:
                raise ValueError(f"{what}: owner {owner_of[g]} of key group {g} outside [0, {P})")
    return 0


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


cdef int _check_partitions(uint64_t num_partitions, Py_ssize_t ncounts, str what) except -1:
    """``num_partitions`` fits an int32 id; ``counts`` has that many entries or none."""
    if num_partitions < 1 or num_partitions > INT32_MAX:
        raise ValueError(f"{what}: num_partitions {num_partitions} outside [1, {INT32_MAX}]")
    if ncounts != 0 and <uint64_t>ncounts != num_partitions:
        raise ValueError(f"{what}: {ncounts} counts for {num_partitions} partitions")
    return 0


def fastmod_u64(const uint64_t[::1] values, uint64_t d, uint64_t[::1] out):
    """out[i] = values[i] % d through the kernels' reciprocal (``d >= 1``). For tests."""
    cdef Py_ssize_t i, n = values.shape[0]
    cdef uint64_t hi, lo
    if d == 0:
        raise ValueError("fastmod_u64: d must be >= 1")
    _check_out(out.shape[0], n, "fastmod_u64")
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
    cdef Py_ssize_t i, n = hashes.shape[0], P, stride
    cdef uint64_t d = num_partitions, mask = num_partitions - 1, hi, lo
    cdef int64_t* sub
    _check_partitions(num_partitions, counts.shape[0], "partition_modulo")
    _check_out(out.shape[0], n, "partition_modulo")
    P = <Py_ssize_t>num_partitions
    fastmod_init(d, &hi, &lo)
    sub = _hist_or_none(counts.shape[0], &stride)
    with nogil:
        if n > 0:
            _ids_counted(&hashes[0], n, d, hi, lo, NULL, &out[0], sub, stride, P, False)
        _hist_done(sub, P, stride, &counts[0] if sub != NULL else NULL)
    return OK


def partition_lookup(const uint64_t[::1] hashes, const int32_t[::1] owner_of,
                     id_t[::1] out, int64_t[::1] counts) -> int:
    """out[i] = owner_of[hashes[i] % len(owner_of)]: key groups (Flink's scheme).

    ``owner_of[g]`` is the owner of key group ``g``, in ``[0, P)``; ``counts``
    (length P, or empty for no histogram) gets the rows per owner. With
    counts, an owner outside ``[0, P)`` is a ValueError: checked before the
    rows when there are no more key groups than rows, else row by row (raised
    when the rows before it are done).
    Modifies ``out`` and ``counts``. Returns 0; raises MemoryError if memory ran out.
    """
    cdef Py_ssize_t i, n = hashes.shape[0], P = counts.shape[0], stride, bad = -1
    cdef uint64_t m = <uint64_t>owner_of.shape[0], mask = m - 1, hi, lo, g
    cdef int64_t* sub
    cdef bint by_row = P > 0 and <uint64_t>n < m  # else owner_of is checked whole: no dearer
    if m == 0:
        raise ValueError("partition_lookup: no key groups in owner_of")
    _check_out(out.shape[0], n, "partition_lookup")
    if P > 0 and not by_row:
        _check_owners(owner_of, P, "partition_lookup")
    fastmod_init(m, &hi, &lo)
    sub = _hist_or_none(P, &stride)
    with nogil:
        if n > 0 and by_row:
            bad = _ids_counted(&hashes[0], n, m, hi, lo, &owner_of[0], &out[0], sub, stride,
                               P, True)
        elif n > 0:
            _ids_counted(&hashes[0], n, m, hi, lo, &owner_of[0], &out[0], sub, stride, P, False)
        _hist_done(sub, P, stride, &counts[0] if sub != NULL else NULL)
    if bad >= 0:
        g = hashes[bad] % m
        raise ValueError(f"partition_lookup: owner {owner_of[g]} of key group {g} outside [0, {P})")
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

    ``counts`` has ``num_partitions`` entries, or none for no histogram. With
    counts, an owner outside ``[0, num_partitions)`` is a ValueError, checked
    as ``partition_lookup`` does.
    Modifies ``out`` and ``counts``. Returns 0; raises MemoryError if memory ran out.
    """
    cdef Py_ssize_t i, m, n = values.shape[0], P, stride, bad = -1
    cdef uint64_t d, hi, lo, h
    cdef uint64_t hbuf[1024]
    cdef int64_t* sub
    cdef bint lookup = owner_of.shape[0] > 0
    cdef const int32_t* own = &owner_of[0] if lookup else NULL
    cdef bint vector = False
    _check_partitions(num_partitions, counts.shape[0], "partition_fixed")
    _check_out(out.shape[0], n, "partition_fixed")
    P = <Py_ssize_t>num_partitions
    # owner_of is checked whole when it has no more key groups than rows
    cdef bint by_row = lookup and counts.shape[0] > 0 and n < owner_of.shape[0]
    if lookup and counts.shape[0] > 0 and not by_row:
        _check_owners(owner_of, P, "partition_fixed")
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
            if by_row:
                bad = _ids_counted(hbuf, m, d, hi, lo, own, &out[i], sub, stride, P, True)
                if bad >= 0:
                    bad += i
                    break
            else:
                _ids_counted(hbuf, m, d, hi, lo, own, &out[i], sub, stride, P, False)
            i += m
        _hist_done(sub, P, stride, &counts[0] if sub != NULL else NULL)
    if bad >= 0:
        if key_t is uint64_t:
            xxh64_many8(&values[bad], 1, seed, &h, is_float)
        else:
            xxh64_many4(&values[bad], 1, seed, &h, is_float)
        raise ValueError(f"partition_fixed: owner {owner_of[h % d]} of key group {h % d} "
                         f"outside [0, {P})")
    return OK

cdef inline Py_ssize_t _ring_ids(const uint64_t* hashes, Py_ssize_t n, const uint64_t* points,
                                 Py_ssize_t m, const int32_t* owners, const int64_t* lut,
                                 int lut_shift, id_t* out, int64_t* sub, Py_ssize_t stride,
                                 Py_ssize_t P, bint check) noexcept nogil:
    """out[i] = the owner of the first point >= hashes[i] (wrapping), binary
    search inside the hash's LUT bucket; counted into ``sub`` unless it is
    NULL. With ``check`` (else the tables were checked whole), returns the
    first row whose bucket is not ``0 <= lut[b] <= lut[b+1] <= m`` or whose
    counted owner is outside ``[0, P)``; else -1."""
    cdef Py_ssize_t i
    cdef uint64_t h, b
    cdef int64_t lo, hi, mid
    cdef int32_t p
    for i in range(n):
        h = hashes[i]
        b = h >> lut_shift
        lo = lut[b]
        hi = lut[b + 1]
        if check and (<uint64_t>lo > <uint64_t>hi or <uint64_t>hi > <uint64_t>m):
            return i
        while lo < hi:
            mid = (lo + hi) >> 1
            if points[mid] < h:
                lo = mid + 1
            else:
                hi = mid
        p = owners[0 if lo == m else lo]
        out[i] = <id_t>p
        if sub != NULL:
            if check and <uint32_t>p >= <size_t>P:
                return i
            sub[(i & 3) * stride + p] += 1
    return -1


cdef inline bint _lut_ok(const int64_t* lut, Py_ssize_t nlut, Py_ssize_t m) noexcept nogil:
    """``lut`` runs from 0 or more up to ``m`` or less and never down: one
    branch-free pass of vector ORs (with every entry below 2**62, a step
    down sets bit 63 of its difference)."""
    cdef Py_ssize_t j
    cdef uint64_t acc = <uint64_t>lut[0]
    for j in range(1, nlut):
        acc |= <uint64_t>lut[j] | (<uint64_t>lut[j] - <uint64_t>lut[j - 1])
    return (acc >> 62) == 0 and lut[nlut - 1] <= m


cdef int _check_ring(const int64_t[::1] lut, const int32_t[::1] owners, Py_ssize_t m,
                     Py_ssize_t P) except -1:
    """The LUT runs from 0 or more up to ``m`` or less, never down, and (``P``
    counts) every owner is in ``[0, P)``."""
    cdef Py_ssize_t j
    cdef int64_t prev = 0
    cdef bint ok
    with nogil:
        ok = _lut_ok(&lut[0], lut.shape[0], m) and (P == 0 or _ids_ok(&owners[0], m, P))
    if ok:
        return 0
    for j in range(lut.shape[0]):
        if not prev <= lut[j] <= m:
            raise ValueError(f"partition_ring: LUT entry {j} is {lut[j]}, outside [{prev}, {m}]")
        prev = lut[j]
    for j in range(m if P > 0 else 0):
        if not 0 <= owners[j] < P:
            raise ValueError(f"partition_ring: owner {owners[j]} of point {j} outside [0, {P})")
    return 0


def partition_ring(const uint64_t[::1] hashes, const uint64_t[::1] points,
                   const int32_t[::1] owners, const int64_t[::1] lut, int lut_shift,
                   id_t[::1] out, int64_t[::1] counts) -> int:
    """Consistent hashing: the owner of the first ring point >= hash (wrapping).

    ``points`` is sorted ascending (non-empty); ``lut[b]`` is the first index
    whose point has top bits ``>= b`` (``b = point >> lut_shift``), and
    ``lut[-1] == len(points)``. ``counts`` (length P, or empty for no
    histogram) gets the rows per owner. Modifies ``out`` and ``counts``.
    A LUT bucket outside the points, or an owner outside ``[0, P)`` that is
    counted, is a ValueError: for at least as many rows as LUT entries and
    points, checked before the rows; for fewer, row by row (raised when the
    rows before it are done).
    Returns 0; raises MemoryError if memory ran out.
    """
    cdef Py_ssize_t n = hashes.shape[0], m = points.shape[0], bad = -1
    cdef Py_ssize_t P = counts.shape[0], stride = 0
    cdef int64_t* sub = NULL
    cdef uint64_t b
    cdef int64_t lo
    cdef bint by_row = n < lut.shape[0] + m  # else the tables are checked whole: no dearer
    if m == 0 or owners.shape[0] < m:
        raise ValueError(f"partition_ring: {m} points, {owners.shape[0]} owners")
    # the last bucket, (2**64 - 1) >> lut_shift, reads lut[bucket + 1]
    if not (0 <= lut_shift <= 63 and lut.shape[0] >= 2
            and <uint64_t>(lut.shape[0] - 2) >= (~(<uint64_t>0)) >> lut_shift):
        raise ValueError(f"partition_ring: {lut.shape[0]} LUT entries for shift {lut_shift}")
    _check_out(out.shape[0], n, "partition_ring")
    if n > 0 and not by_row:
        _check_ring(lut, owners, m, P)
    if P > 0:
        sub = _hist_alloc(P, &stride)
        if sub == NULL:
            raise MemoryError(f"histogram of {P} partitions")
    with nogil:  # (literal arguments: the loop is compiled for each case)
        if n > 0 and by_row:
            bad = _ring_ids(&hashes[0], n, &points[0], m, &owners[0], &lut[0], lut_shift,
                            &out[0], sub, stride, P, True)
        elif n > 0 and sub != NULL:
            _ring_ids(&hashes[0], n, &points[0], m, &owners[0], &lut[0], lut_shift,
                      &out[0], sub, stride, P, False)
        elif n > 0:
            _ring_ids(&hashes[0], n, &points[0], m, &owners[0], &lut[0], lut_shift,
                      &out[0], NULL, 0, 0, False)
        if sub != NULL:
            _hist_finish(sub, P, stride, &counts[0])
            free(sub)
    if bad >= 0:
        b = hashes[bad] >> lut_shift
        if not 0 <= lut[b] <= lut[b + 1] <= m:
            raise ValueError(f"partition_ring: LUT bucket {b} holds points "
                             f"[{lut[b]}, {lut[b + 1]}) outside [0, {m}]")
        lo = lut[b]
        while lo < lut[b + 1] and points[lo] < hashes[bad]:
            lo += 1
        lo = 0 if lo == m else lo
        raise ValueError(f"partition_ring: owner {owners[lo]} of point {lo} outside [0, {P})")
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
    ``counts`` their histogram: an id outside, or (with ``order``) a row
    placed outside ``dest``, is a ValueError, raised when the rows before it
    are placed. Returns 0; raises MemoryError if memory ran out.
    """
    cdef Py_ssize_t i, n = ids.shape[0], P = counts.shape[0], bad = -1
    cdef Py_ssize_t ndest = dest.shape[0]
    cdef int64_t p, d = 0
    cdef int64_t* cursor
    if starts.shape[0] < P + 1:
        raise ValueError(f"partition_dest: {starts.shape[0]} starts for {P} partitions")
    if not order and ndest < n:
        raise ValueError(f"partition_dest: dest has {ndest} rows for {n} ids")
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
                p = ids[i]
                d = cursor[p] if <uint64_t>p < <uint64_t>P else -1
                if <uint64_t>d >= <uint64_t>ndest:
                    bad = i
                    break
                dest[d] = <dest_t>i
                cursor[p] = d + 1
        else:
            for i in range(n):
                p = ids[i]
                if <uint64_t>p >= <uint64_t>P:
                    bad = i
                    break
                dest[i] = <dest_t>cursor[p]
                cursor[p] += 1
        free(cursor)
    if bad >= 0:
        if not 0 <= ids[bad] < P:
            raise ValueError(f"partition_dest: id {ids[bad]} of row {bad} outside [0, {P})")
        raise ValueError(f"partition_dest: counts place row {bad} at {d}, outside [0, {ndest})")
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


cdef int _check_starts(const int64_t[::1] starts, Py_ssize_t nrows, str what) except -1:
    """Partition starts never decrease and lie inside ``[0, nrows]``."""
    cdef Py_ssize_t p
    cdef int64_t prev = 0
    for p in range(starts.shape[0]):
        if not prev <= starts[p] <= nrows:
            raise ValueError(f"{what}: start {starts[p]} of partition {p} outside "
                             f"[{prev}, {nrows}]")
        prev = starts[p]
    return 0


cdef int _raise_scatter(const id_t[::1] ids, const int64_t[::1] starts, const dest_t[::1] dest,
                        Py_ssize_t i, Py_ssize_t nout, str what) except -1:
    """ValueError for row ``i``, which a scatter could not place."""
    cdef Py_ssize_t P = starts.shape[0] - 1
    cdef int64_t p = ids[i]
    if dest.shape[0] > 0 and not 0 <= dest[i] < nout:
        raise ValueError(f"{what}: dest {dest[i]} of row {i} outside [0, {nout})")
    if not 0 <= p < P:
        raise ValueError(f"{what}: id {p} of row {i} outside [0, {P})")
    if dest.shape[0] == 0:
        raise ValueError(f"{what}: partition {p} has more rows than its starts "
                         f"[{starts[p]}, {starts[p + 1]})")
    raise ValueError(f"{what}: dest {dest[i]} of row {i} outside partition {p}'s rows "
                     f"[{starts[p]}, {starts[p + 1]})")


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


cdef inline int64_t _next_row(int64_t p, const dest_t* dest, int64_t* cursor,
                              Py_ssize_t i) noexcept nogil:
    """Output row of input row i (in partition ``p``): ``dest[i]``, or with
    ``dest`` NULL the next free row of its partition (``cursor``, advanced)."""
    cdef int64_t d
    if dest != NULL:
        return dest[i]
    d = cursor[p]
    cursor[p] = d + 1
    return d


cdef int _scatter_streamed(const word_t* src_a, const word_t* src_b, const id_t* ids,
                           const dest_t* dest, Py_ssize_t n, const int64_t* starts, Py_ssize_t P,
                           int64_t* cursor, word_t* out_a, word_t* out_b,
                           Py_ssize_t* bad) noexcept nogil:
    """``out[dest[i]] = src[i]`` for one column (``src_b`` NULL) or two,
    through a 64-byte line buffer per partition and column: a partition's
    rows are consecutive, so each full line goes out in one streaming store
    instead of every value pulling its line into the cache (the outputs are
    64-byte aligned). The first line of a partition may start in the previous
    partition's rows, and its last may end in the next one's: those are
    written value by value. ``dest`` NULL: rows are placed by the partitions'
    ``cursor`` (from ``starts``, which ``_check_starts`` accepted). A row
    whose id is outside ``[0, P)`` (ids are checked 1024 at a time, before
    their rows), or that completes a line at an output row outside its
    partition's rows, stops the scatter: ``bad`` gets it (other rows only
    fill their partition's line buffer). Returns -1 if the buffers could not
    be had."""
    cdef Py_ssize_t i, b, m, per = 64 // sizeof(word_t), cols = 1 if src_b == NULL else 2, stop = -1
    cdef int64_t d, s, line, end, p
    cdef char* raw = <char*>malloc(<size_t>(P if P > 0 else 1) * 64 * cols + 64)
    cdef word_t* buf = <word_t*>(raw + (64 - (<size_t>raw) % 64) % 64)  # aligned for the line loads
    cdef word_t* ba
    if raw == NULL:
        return -1
    for b in range(0, n, 1024):
        m = min(n - b, <Py_ssize_t>1024)
        if not _ids_ok(ids + b, m, P):  # a block's ids, checked while in L1
            stop = b
            while <uint64_t>ids[stop] < <uint64_t>P:
                stop += 1
            break
        for i in range(b, b + m):
            p = ids[i]
            d = _next_row(p, dest, cursor, i)
            s = d & (per - 1)
            ba = buf + p * per * cols
            ba[s] = src_a[i]
            if cols == 2:
                ba[per + s] = src_b[i]
            if s == per - 1:  # a line is full: from the partition's first row on
                if <uint64_t>(d - starts[p]) >= <uint64_t>(starts[p + 1] - starts[p]):
                    stop = i
                    break
                line = d - s
                _put_line(out_a, out_b, ba, per, line, max(starts[p] - line, 0), per)
        if stop >= 0:
            break
    bad[0] = stop
    for p in range(P if stop < 0 else 0):  # the lines not filled: up to the partition's end
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
                      word_t* out_a, word_t* out_b, Py_ssize_t nout,
                      Py_ssize_t* bad) noexcept nogil:
    """``out[dest[i]] = src[i]`` for one column (``src_b`` NULL) or two; with
    ``dest`` NULL, rows go to their partition's next free row (the placement
    ``partition_dest`` would give, without its array written and read back).
    Large aligned outputs are streamed, others stored directly. A row that
    cannot be placed inside the ``nout`` output rows stops the scatter:
    ``bad`` gets it. Returns -1 if memory ran out."""
    cdef Py_ssize_t i, ahead = 256 // sizeof(word_t)
    cdef int64_t d, p
    cdef int status = 0
    cdef int64_t* cursor = NULL
    if dest == NULL:
        cursor = <int64_t*>malloc(<size_t>(P if P > 0 else 1) * sizeof(int64_t))
        if cursor == NULL:
            return -1
        memcpy(cursor, starts, <size_t>P * sizeof(int64_t))
    if _streamable(out_a, out_b, n * sizeof(word_t) * (1 if src_b == NULL else 2)):
        status = _scatter_streamed(src_a, src_b, ids, dest, n, starts, P, cursor, out_a, out_b, bad)
    else:
        for i in range(n):
            if dest != NULL:
                d = dest[i]
            else:
                p = ids[i]
                if <uint64_t>p >= <uint64_t>P:
                    bad[0] = i
                    break
                d = cursor[p]
                cursor[p] = d + 1
            if <uint64_t>d >= <uint64_t>nout:
                bad[0] = i
                break
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
    here from ``ids``. An id outside ``[0, P)``, or an output row that would
    be written outside ``out`` (streamed: outside its partition's rows), is
    a ValueError; rows before it may be done. Modifies ``out``."""
    cdef Py_ssize_t n = ids.shape[0], P = starts.shape[0] - 1, bad = -1
    cdef int status = 0
    _check_scatter(n, dest.shape[0], src.shape[0], out.shape[0], starts.shape[0], "scatter_words")
    _check_starts(starts, out.shape[0], "scatter_words")
    if n == 0:
        return
    with nogil:
        status = _scatter_any(&src[0], <const word_t*>NULL, &ids[0],
                              &dest[0] if dest.shape[0] > 0 else NULL, n, &starts[0], P,
                              &out[0], <word_t*>NULL, out.shape[0], &bad)
    if status < 0:
        raise MemoryError(f"line buffers of {P} partitions")
    if bad >= 0:
        _raise_scatter(ids, starts, dest, bad, out.shape[0], "scatter_words")


def scatter_words2(const word_t[::1] src_a, const word_t[::1] src_b, const id_t[::1] ids,
                   const int64_t[::1] starts, const dest_t[::1] dest, word_t[::1] out_a, word_t[::1] out_b):
    """``scatter_words`` of two columns of one width in one pass: the row
    placement is read or made once for both. Rows that cannot be placed are
    as in ``scatter_words``. Modifies ``out_a`` and ``out_b``."""
    cdef Py_ssize_t n = ids.shape[0], P = starts.shape[0] - 1, bad = -1
    cdef Py_ssize_t nout = min(out_a.shape[0], out_b.shape[0])
    cdef int status = 0
    _check_scatter(n, dest.shape[0], min(src_a.shape[0], src_b.shape[0]),
                   nout, starts.shape[0], "scatter_words2")
    _check_starts(starts, nout, "scatter_words2")
    if n == 0:
        return
    with nogil:
        status = _scatter_any(&src_a[0], &src_b[0], &ids[0], &dest[0] if dest.shape[0] > 0 else NULL,
                              n, &starts[0], P, &out_a[0], &out_b[0], nout, &bad)
    if status < 0:
        raise MemoryError(f"line buffers of {P} partitions")
    if bad >= 0:
        _raise_scatter(ids, starts, dest, bad, nout, "scatter_words2")


def scatter_bits(const uint8_t[::1] src, int64_t src_offset, const dest_t[::1] dest,
                 uint8_t[::1] out):
    """Bit ``dest[i]`` of ``out`` = bit ``src_offset + i`` of ``src``.

    ``out`` holds at least ``ceil(n / 8)`` bytes and is zeroed here. A set
    bit's ``dest`` outside the bits of ``out`` is a ValueError, raised when
    the rows before it are done. Modifies ``out``.
    """
    cdef Py_ssize_t i, n = dest.shape[0], bad = -1
    cdef int64_t j, d, nbits = <int64_t>out.shape[0] * 8
    _check_bits(src.shape[0], src_offset, n, "scatter_bits")
    with nogil:
        if out.shape[0] > 0:
            memset(&out[0], 0, <size_t>out.shape[0])
        for i in range(n):
            j = src_offset + i
            if (src[j >> 3] >> (j & 7)) & 1:
                d = dest[i]
                if <uint64_t>d >= <uint64_t>nbits:
                    bad = i
                    break
                out[d >> 3] |= <uint8_t>(1 << (d & 7))
    if bad >= 0:
        raise ValueError(f"scatter_bits: dest {dest[bad]} of row {bad} outside [0, {nbits})")


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
    replaces). Ids outside ``[0, P)``, offsets that decrease or leave
    ``data``, and ids that do not fit ``starts`` are a ValueError (the first
    two before any output is written). Modifies the outputs.
    """
    cdef Py_ssize_t i, blk, m, n = ids.shape[0], P = starts.shape[0] - 1, stride, bad = -1
    cdef int64_t o, length, r, b, src_len = data.shape[0], total = 0
    cdef int64_t* sub
    cdef int64_t* work
    cdef int64_t* cur
    cdef int64_t* c
    cdef bint with_dest = dest.shape[0] == ids.shape[0]
    cdef const uint8_t* src_base
    cdef uint8_t* out_base
    if P < 0 or offsets.shape[0] < n + 1 or out_offsets.shape[0] < n + 1:
        raise ValueError(f"scatter_binary: {n} ids, {offsets.shape[0]} offsets, "
                         f"{out_offsets.shape[0]} output offsets, "
                         f"{starts.shape[0]} partition starts")
    if n == 0:
        out_offsets[0] = 0
        return
    if offsets[0] < 0 or offsets[n] > src_len:
        raise ValueError(f"scatter_binary: offsets from {offsets[0]} to {offsets[n]} outside the "
                         f"{src_len} data bytes")
    if out_data.shape[0] < offsets[n] - offsets[0]:
        raise ValueError(f"scatter_binary: out_data has {out_data.shape[0]} bytes for "
                         f"{offsets[n] - offsets[0]}")
    _check_starts(starts, n, "scatter_binary")
    sub = _hist_alloc(P, &stride)
    work = <int64_t*>malloc(<size_t>(5 * P) * sizeof(int64_t))
    if sub == NULL or work == NULL:
        free(sub)
        free(work)
        raise MemoryError(f"byte cursors of {P} partitions")
    cur = work + P
    with nogil:
        for blk in range(0, n, 1024):  # a block's ids and offsets, checked while in L1
            m = min(n - blk, <Py_ssize_t>1024)
            if not (_ids_ok(&ids[blk], m, P) and offsets_ok(&offsets[blk], m, 0, src_len)):
                bad = blk
                break
            for i in range(blk, blk + m):
                sub[(i & 3) * stride + ids[i]] += offsets[i + 1] - offsets[i]
    if bad >= 0:
        free(sub)
        free(work)
        for i in range(bad, min(n, bad + 1024)):
            if not 0 <= ids[i] < P:
                raise ValueError(f"scatter_binary: id {ids[i]} of row {i} outside [0, {P})")
        _raise_offsets(offsets, n, src_len, "scatter_binary")
    with nogil:
        _hist_finish(sub, P, stride, work)            # bytes per partition
        # cursors of partition p side by side (one cache line): next row,
        # next byte, end of its bytes, end of its rows
        for i in range(P):
            cur[4 * i] = starts[i]
            cur[4 * i + 1] = total
            total += work[i]
            cur[4 * i + 2] = total
            cur[4 * i + 3] = starts[i + 1]
        out_offsets[n] = <offset_t>total
        src_base = &data[0] if src_len > 0 else NULL
        out_base = &out_data[0] if total > 0 else NULL
        for i in range(n):
            c = cur + 4 * ids[i]
            o = offsets[i]
            length = offsets[i + 1] - o
            r = c[0]
            if r >= c[3]:  # more rows of this partition than ``starts`` gave it
                bad = i
                break
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
    if bad >= 0:
        raise ValueError(f"scatter_binary: partition {ids[bad]} has more rows than its starts "
                         f"[{starts[ids[bad]]}, {starts[ids[bad] + 1]})")
